// What the fault matrix's integration tests share (fault_ranks_test.cpp,
// fault_environment_test.cpp): one job of tests/helpers/fault_rank in any
// launch mode and layout, what must hold once it ended, and the two fences
// that make "nothing left" checkable: the test process as the child
// subreaper that adopts whatever trainit leaves behind, and a private pids
// cgroup.
//
// The modes: exec (PROGRAM is the one "rank"), ascend (a template-1 table
// of 2 devices), torchrun (native, MA_NUM_GPUS=2) and mpi (one host: mpirun
// starts 2 ranks from a hostfile naming localhost). Every job mode but exec
// keeps a status file, DIR/status.json.
//
// Nothing left, by layout:
//   - As PID 1 (the container), trainit exits only once it has no child:
//     every process of its namespace descends from it, and an orphan is
//     reparented to it, so "no child" is "nothing else in the namespace".
//     The job modes log that last transition ("reaping -> exit after ...:
//     no process is left"); the kernel kills whatever a PID 1 that exits
//     earlier leaves, so that line, not the empty namespace after the exit,
//     is what the tests assert. Processes the fault made are watched through
//     pidfds besides: when they die tells whether SIGTERM or SIGKILL did it.
//   - As a subreaper (kNoNamespace), nothing would clean up after trainit:
//     the test process, a child subreaper itself, adopts what trainit leaves
//     and finds it among its own children.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness.h"
#include "job_support.h"

namespace trainit::test::fault {

using Json = nlohmann::ordered_json;
using job::exists;
using job::slurp;
using job::wait_until;
using job::write_file;

// Every fault's --grace: short, so that SIGKILL tests stay short.
inline constexpr auto kGrace = 300ms;
inline constexpr const char* kGraceArg = "0.3";

enum class Mode { kExec, kAscend, kTorchrun, kMpi };

inline const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kExec:
      return "Exec";
    case Mode::kAscend:
      return "Ascend";
    case Mode::kTorchrun:
      return "Torchrun";
    case Mode::kMpi:
      return "Mpi";
  }
  return "?";
}

// One instance of a parametrised fault: where the job runs.
struct Where {
  Mode mode;
  Layout layout = Layout::kPid1;
};

inline void PrintTo(const Where& where, std::ostream* os) {
  *os << mode_name(where.mode) << (where.layout == Layout::kPid1 ? " as PID 1" : " as a subreaper");
}

// "Ascend", "ExecAsSubreaper": the instance's name in the test's.
inline std::string where_name(const ::testing::TestParamInfo<Where>& info) {
  return std::string(mode_name(info.param.mode)) + (info.param.layout == Layout::kPid1 ? "" : "AsSubreaper");
}

// One job of fault_rank: its directories (job::Job's), its environment and
// arguments in its mode, and what its plan says of its ranks.
class FaultJob {
 public:
  explicit FaultJob(Where where) : where_(where) {
    if (where.mode == Mode::kAscend) {
      EXPECT_TRUE(write_file(job_.table(), job::template1("completed", 2)));
    }
  }

  [[nodiscard]] Mode mode() const { return where_.mode; }
  [[nodiscard]] bool job_mode() const { return where_.mode != Mode::kExec; }
  [[nodiscard]] bool as_pid1() const { return where_.layout == Layout::kPid1; }
  [[nodiscard]] unsigned ranks() const { return where_.mode == Mode::kExec ? 1 : 2; }
  [[nodiscard]] const job::Job& dirs() const { return job_; }
  [[nodiscard]] std::string status_path() const { return job_.status(); }
  [[nodiscard]] std::string record(unsigned rank, std::string_view what) const { return job_.record(rank, what); }
  bool release(std::string_view name = "go") const { return job_.release(name); }

  // `trainit --grace 0.3 [MODE'S OPTIONS] EXTRA -- fault_rank DIR/rec ACTIONS...`
  [[nodiscard]] Spec spec(const std::vector<std::string>& actions, const std::vector<std::string>& extra = {}) const {
    Spec s;
    s.layout = where_.layout;
    s.env = env();
    s.args = {"--grace", kGraceArg};
    for (auto& a : mode_args()) {
      s.args.push_back(std::move(a));
    }
    s.args.insert(s.args.end(), extra.begin(), extra.end());
    s.args.push_back("--");
    s.args.push_back(helper_path("fault_rank"));
    s.args.push_back(job_.rec());
    s.args.insert(s.args.end(), actions.begin(), actions.end());
    return s;
  }

  [[nodiscard]] std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e;
    const std::string vj = "MA_VJ_NAME=" + std::string(job::kVjName);
    const std::string instance = "MA_CURRENT_INSTANCE_NAME=" + std::string(job::kInstance);
    const std::string mount = "MA_MOUNT_PATH=" + job_.mount();
    switch (where_.mode) {
      case Mode::kExec:
        e = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
        break;
      case Mode::kAscend:
        return job_.env(std::move(extra));
      case Mode::kTorchrun:
        e = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "MA_RUN_METHOD=torchrun",
             "MA_NUM_GPUS=2",
             vj,
             instance,
             mount};
        break;
      case Mode::kMpi:
        // mpirun wants a home; the job's directory is one nobody else uses.
        e = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "HOME=" + job_.root(),
             "MA_NUM_GPUS=2",
             vj,
             instance,
             mount};
        break;
    }
    e.insert(e.end(), extra.begin(), extra.end());
    return e;
  }

  // The plan trainit makes of spec(actions): `trainit plan` with the same
  // environment and arguments. Null (with a failure) when it cannot.
  [[nodiscard]] const Json& plan() const {
    if (plan_.is_null()) {
      Spec s = spec({});
      s.layout = Layout::kNoNamespace;
      s.args.insert(s.args.begin(), "plan");
      Outcome o = run(s);
      plan_ = Json::parse(o.out, nullptr, false);
      EXPECT_EQ(o.exit, Exit::code(0)) << o.transcript;
      EXPECT_FALSE(plan_.is_discarded()) << o.transcript;
      if (plan_.is_discarded()) {
        plan_ = Json::object();
      }
    }
    return plan_;
  }
  // The plan's process `index` (in start order): its name and log file.
  [[nodiscard]] std::string process_name(size_t index) const { return process(index).value("name", "?"); }
  [[nodiscard]] std::string log_file(size_t index) const {
    const Json& p = process(index);
    return p.contains("output") ? p["output"].value("log_file", "") : "";
  }
  // The console prefix of process `index`'s lines ("" in exec mode).
  [[nodiscard]] std::string console_prefix(size_t index) const {
    const Json& p = process(index);
    return p.contains("output") ? p["output"].value("console_prefix", "") : "";
  }

 private:
  [[nodiscard]] const Json& process(size_t index) const {
    static const Json kNone = Json::object();
    const Json& p = plan();
    return p.contains("processes") && index < p["processes"].size() ? p["processes"][index] : kNone;
  }

  [[nodiscard]] std::vector<std::string> mode_args() const {
    switch (where_.mode) {
      case Mode::kExec:
        return {"--mode", "exec"};
      case Mode::kAscend:
      case Mode::kTorchrun:
        return {"--status-file", job_.status()};
      case Mode::kMpi:
        return {"--mode", "mpi", "--private-dir", job_.path("private"), "--status-file", job_.status()};
    }
    return {};
  }

  Where where_;
  job::Job job_;
  mutable Json plan_;
};

// Waits for fault_rank's "ready R pid P" of each rank 0..ranks-1 on
// trainit's stdout, whatever prefix the mode gives it; returns each rank's
// pid in trainit's namespace (-1 where the line did not come).
inline std::vector<pid_t> wait_ready(const Trainit& t, unsigned ranks) {
  std::vector<pid_t> pids(ranks, -1);
  for (unsigned r = 0; r < ranks; ++r) {
    const std::string marker = "ready " + std::to_string(r) + " pid ";
    wait_until([&] {
      std::string out = t.out();
      size_t at = out.find(marker);
      if (at == std::string::npos || out.find('\n', at) == std::string::npos) {
        return false;
      }
      pids[r] = std::atoi(out.c_str() + at + marker.size());
      return true;
    });
  }
  return pids;
}

// The pid the test can watch of a process whose pid in trainit's namespace
// is `ns_pid` (the same number when trainit has no namespace of its own).
inline pid_t watchable(const Trainit& t, const FaultJob& job, pid_t ns_pid) {
  return job.as_pid1() ? host_pid(t.pid(), ns_pid) : ns_pid;
}

// The pid fault_rank recorded as rR.WHAT ("P\n"), once it is there; -1 after
// the deadline.
inline pid_t recorded_pid(const FaultJob& job, unsigned rank, std::string_view what) {
  pid_t pid = -1;
  wait_until([&] {
    std::string text = slurp(job.record(rank, what));
    pid = text.empty() ? -1 : std::atoi(text.c_str());
    return pid > 0;
  });
  return pid;
}

// The status file once the job ended: whole JSON of schema v1 in state
// "exit" with the job's code; the cause null when `cause_parts` is empty,
// else holding each part (the parts that stay true however much detail the
// cause gains); no temporary file of it left beside it. Returns the parsed
// file (null when it is not JSON).
inline Json expect_final_status(const FaultJob& job, int code, const std::vector<std::string>& cause_parts) {
  const std::string text = slurp(job.status_path());
  Json status = Json::parse(text, nullptr, false);
  EXPECT_FALSE(status.is_discarded()) << "the status file is not whole JSON: '" << text << "'";
  if (status.is_discarded()) {
    return nullptr;
  }
  EXPECT_EQ(status["schema"], "trainit.status/v1") << status.dump(2);
  EXPECT_EQ(status["state"], "exit") << status.dump(2);
  EXPECT_EQ(status["exit_code"], code) << status.dump(2);
  if (cause_parts.empty()) {
    EXPECT_TRUE(status["cause"].is_null()) << status.dump(2);
  } else {
    EXPECT_TRUE(status["cause"].is_string()) << status.dump(2);
    const std::string cause = status["cause"].is_string() ? status["cause"].get<std::string>() : "";
    for (const auto& part : cause_parts) {
      EXPECT_NE(cause.find(part), std::string::npos) << "the cause lacks '" << part << "': " << status.dump(2);
    }
  }
  const std::string dir = job.status_path().substr(0, job.status_path().rfind('/'));
  const std::string base = job.status_path().substr(dir.size() + 1);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_FALSE(name != base && name.starts_with(base)) << "left beside the status file: " << entry.path();
  }
  return status;
}

// The rank of `status` whose name is `name` (null when there is none).
inline Json status_rank(const Json& status, const std::string& name) {
  if (status.is_object() && status.contains("ranks")) {
    for (const Json& rank : status["ranks"]) {
      if (rank.value("name", "") == name) {
        return rank;
      }
    }
  }
  return nullptr;
}

// A job mode's trainit ended by its own last transition: with no child left
// (see the top of this file).
inline void expect_last_transition_found_nothing_left(const Trainit& t) {
  std::string last;
  for (const auto& line : lines_of(t.err())) {
    if (line.find(" -> exit after ") != std::string::npos) {
      last = line;
    }
  }
  EXPECT_NE(last.find("reaping -> exit after "), std::string::npos) << t.transcript();
  EXPECT_NE(last.find("no process is left"), std::string::npos) << t.transcript();
}

// The test process as a child subreaper for its lifetime, for a trainit
// that is not PID 1 (`layout`; as PID 1 it does nothing): what trainit
// leaves behind is reparented here. leftovers() lists those; the destructor
// SIGKILLs and reaps them, so a failing test leaves nothing.
class Subreaper {
 public:
  explicit Subreaper(Layout layout) : active_(layout != Layout::kPid1) {
    ok_ = !active_ || ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  }
  ~Subreaper() {
    if (!active_) {
      return;
    }
    // Whatever is left (a bomb forks on while it is swept) until none is.
    wait_until([] {
      for (pid_t pid : leftovers()) {
        ::kill(pid, SIGKILL);
      }
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      return leftovers().empty();
    });
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  Subreaper(const Subreaper&) = delete;
  Subreaper& operator=(const Subreaper&) = delete;
  // False when the test process could not become a subreaper.
  [[nodiscard]] bool ok() const { return ok_; }

  // Our children: once trainit is reaped, whatever it left behind.
  [[nodiscard]] static std::vector<pid_t> leftovers() { return children_of(::getpid()); }
  // "pid 12 (fault_rank), ..." for a failure message.
  [[nodiscard]] static std::string describe(const std::vector<pid_t>& pids) {
    std::string out;
    for (pid_t pid : pids) {
      std::string comm = slurp("/proc/" + std::to_string(pid) + "/comm");
      if (!comm.empty() && comm.back() == '\n') {
        comm.pop_back();
      }
      out += (out.empty() ? "" : ", ") + ("pid " + std::to_string(pid) + " (" + comm + ")");
    }
    return out;
  }

 private:
  bool active_;
  bool ok_ = false;
};

// Nothing of the job runs once trainit ended: as a subreaper, nothing was
// left to the test process (which SIGKILLs what it finds); as PID 1 (job
// modes) trainit's last transition found nothing left.
inline void expect_nothing_left(const Trainit& t, const FaultJob& job) {
  if (!job.as_pid1()) {
    auto left = Subreaper::leftovers();
    EXPECT_TRUE(left.empty()) << "trainit left behind: " << Subreaper::describe(left) << t.transcript();
  } else if (job.job_mode()) {
    expect_last_transition_found_nothing_left(t);
  }
}

// A private pids cgroup below the test process's own, for a job that must
// not grow without bound (a fork bomb). Made from what the machine offers:
// cgroup v2 with the pids controller (enabled in our cgroup's
// subtree_control when it is available but not enabled), else cgroup v1's
// pids hierarchy. When neither is there, error() says what the machine has
// instead, for the test to fail with: a bomb is never run unbounded, and a
// missing fence is never a silent skip.
class PidsCgroup {
 public:
  explicit PidsCgroup(unsigned max) {
    const std::string name = "trainit-fault-" + std::to_string(::getpid());
    std::string v2_why, v1_why;
    std::string parent = v2_parent(&v2_why);
    if (parent.empty()) {
      parent = v1_parent(&v1_why);
    }
    if (parent.empty()) {
      error_ = "no pids cgroup to run the job in: " + v2_why + "; " + v1_why;
      return;
    }
    path_ = parent + "/" + name;
    if (::mkdir(path_.c_str(), 0755) != 0) {
      error_ = "mkdir " + path_ + ": " + std::strerror(errno);
      path_.clear();
      return;
    }
    if (!write_file(path_ + "/pids.max", std::to_string(max))) {
      error_ = "cannot write " + path_ + "/pids.max: " + std::strerror(errno);
    }
  }
  ~PidsCgroup() {
    if (path_.empty()) {
      return;
    }
    // What is left, SIGKILLed until nothing is (a bomb forks on meanwhile),
    // then the cgroup removed once the kernel let go of it.
    wait_until([&] {
      auto left = procs();
      for (pid_t pid : left) {
        ::kill(pid, SIGKILL);
      }
      return left.empty() && ::rmdir(path_.c_str()) == 0;
    });
  }
  PidsCgroup(const PidsCgroup&) = delete;
  PidsCgroup& operator=(const PidsCgroup&) = delete;

  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  // The processes in it (pids of the test's namespace).
  [[nodiscard]] std::vector<pid_t> procs() const {
    std::vector<pid_t> out;
    for (const auto& line : lines_of(slurp(path_ + "/cgroup.procs"))) {
      out.push_back(std::atoi(line.c_str()));
    }
    return out;
  }
  // The tasks it counts against pids.max; -1 when unreadable.
  [[nodiscard]] long current() const {
    std::string text = slurp(path_ + "/pids.current");
    return text.empty() ? -1 : std::atol(text.c_str());
  }

  // `spec` with trainit started inside this cgroup: a shell joins it and
  // execs trainit in its place (a PID 1 stays PID 1), so that everything
  // trainit starts is counted from its first fork.
  [[nodiscard]] Spec run_inside(Spec spec) const {
    std::vector<std::string> args = {"-c", "echo 0 > \"$1\" && shift && exec \"$@\"", "sh", path_ + "/cgroup.procs"};
    if (kEmulated) {
      args.push_back(kEmulator);
    }
    args.push_back(spec.program);
    args.insert(args.end(), spec.args.begin(), spec.args.end());
    spec.program = "/bin/sh";
    spec.args = std::move(args);
    return spec;
  }

 private:
  // One line of /proc/self/mountinfo: where a file system of `type` whose
  // super options hold `option` ("" for any) is mounted, and its root.
  static std::pair<std::string, std::string> mount_of(std::string_view type, std::string_view option) {
    for (const auto& line : lines_of(slurp("/proc/self/mountinfo"))) {
      auto dash = line.find(" - ");
      if (dash == std::string::npos) {
        continue;
      }
      std::vector<std::string> fields;
      for (size_t at = 0; at < dash;) {
        size_t end = std::min(line.find(' ', at), dash);
        fields.push_back(line.substr(at, end - at));
        at = end + 1;
      }
      std::vector<std::string> tail;
      for (size_t at = dash + 3; at <= line.size();) {
        size_t end = std::min(line.find(' ', at), line.size());
        tail.push_back(line.substr(at, end - at));
        at = end + 1;
      }
      if (fields.size() < 5 || tail.size() < 3 || tail[0] != type) {
        continue;
      }
      if (!option.empty() && ("," + tail[2] + ",").find("," + std::string(option) + ",") == std::string::npos) {
        continue;
      }
      return {fields[4], fields[3]};
    }
    return {};
  }

  // Our cgroup's path in the hierarchy whose /proc/self/cgroup line has
  // `controllers` ("" for v2's "0::" line), relative to the mount's root.
  static std::string own_cgroup(std::string_view controllers, const std::string& mount_root) {
    for (const auto& line : lines_of(slurp("/proc/self/cgroup"))) {
      auto first = line.find(':');
      auto second = line.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) {
        continue;
      }
      const std::string list = "," + line.substr(first + 1, second - first - 1) + ",";
      const bool match =
          controllers.empty() ? list == ",," : list.find("," + std::string(controllers) + ",") != std::string::npos;
      if (!match) {
        continue;
      }
      std::string path = line.substr(second + 1);
      if (mount_root != "/" && path.starts_with(mount_root)) {
        path = path.substr(mount_root.size());
      }
      return path == "/" ? "" : path;
    }
    return "/?";
  }

  static bool has_word(const std::string& text, std::string_view word) {
    return (" " + text + " ").find(" " + std::string(word) + " ") != std::string::npos;
  }

  static std::string trimmed(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
      text.pop_back();
    }
    return text;
  }

  // Our cgroup v2 directory with pids enabled for its children, or "".
  static std::string v2_parent(std::string* why) {
    auto [mount, root] = mount_of("cgroup2", "");
    if (mount.empty()) {
      *why = "no cgroup2 file system is mounted";
      return "";
    }
    std::string dir = mount + own_cgroup("", root);
    std::string controllers = trimmed(slurp(dir + "/cgroup.controllers"));
    if (!has_word(controllers, "pids")) {
      *why = "cgroup2 at " + dir + " offers the controllers '" + controllers + "', not pids";
      return "";
    }
    if (!has_word(slurp(dir + "/cgroup.subtree_control"), "pids")) {
      // Left enabled afterwards: a test beside this one (ctest -j) may have
      // a cgroup of its own below, whose pids.max disabling would remove.
      if (!write_file(dir + "/cgroup.subtree_control", "+pids")) {
        *why = "cannot enable pids in " + dir + "/cgroup.subtree_control: " + std::strerror(errno);
        return "";
      }
    }
    return dir;
  }

  // Our directory in cgroup v1's pids hierarchy, or "".
  static std::string v1_parent(std::string* why) {
    auto [mount, root] = mount_of("cgroup", "pids");
    if (mount.empty()) {
      *why = "no cgroup v1 hierarchy has the pids controller";
      return "";
    }
    return mount + own_cgroup("pids", root);
  }

  std::string path_;
  std::string error_;
};

}  // namespace trainit::test::fault

// The fault matrix, signals (docs/testing.md#the-fault-matrix): SIGTERM,
// SIGINT and SIGHUP to trainit, as PID 1, in each state of each mode's plan
// on one host. The states of several hosts (resolve_peers, start_sshd,
// wait_peers, host_barrier, a restart of every host) are the e2e scenario
// tests/e2e/signals_in_every_multi_host_state_end_every_host_as_documented.sh.
//
// Each case drives trainit into its state and proves it is there (the status
// file's `state`, or exec mode's log line), sends the signal, waits until
// trainit has taken it (its pending bit is clear: signals reach trainit
// through a signalfd or sigtimedwait, which dequeue them), lets the job end,
// and checks what must hold afterwards:
//   - the exit code, as docs/reference/exit-codes.md says;
//   - the status file (job modes): final state `exit`, its `exit_code`, and a
//     `cause` that names the signal when the signal stopped the job, or the
//     first cause when the job was already stopping;
//   - nothing left running: every process of the plan has ended in the
//     status file, trainit left reaping only once no process was left, and
//     each rank stopped by trainit handled its SIGTERM (it was not killed
//     with the PID namespace when trainit exited);
//   - no file half-written: the status file parses, no temporary file of an
//     atomic write is left beside it, and every log file ends with a whole
//     line.
//
// What the signals do (the expectations below keep this table):
//   SIGTERM, SIGINT  job modes: stop the job, 128+S, in any state before
//                    stopping; in stopping they change nothing (the first
//                    cause's code stays). Exec mode: a stop; the code is
//                    PROGRAM's (128+S when it dies of it).
//   SIGHUP           not a stop: forwarded to the ranks (exec: to PROGRAM).
//                    While no rank runs (wait_rank_table, exec mode's drain)
//                    it has nobody to reach and the job goes on.
//
// spawn runs from trainit's loop like every state: the device preflight
// (--preflight devices) and the collective arena's preflight wait there as
// sources of the loop, and a signal is taken in spawn. The Spawn cases hold
// it with a device check that passes only once the case lets it: a stop
// signal ends the job from spawn with no rank started; SIGHUP reaches no
// rank yet and the job goes on. reaping is not a case: it follows the
// SIGKILL of every process left, and ends as soon as the kernel has them
// (nothing can be held there); its own transition is checked in every case.
//
// The processes are tests/helpers/job_rank behind one shell script
// (write_process_script) that every mode can start; what each does is told
// by marker files in the case's directory.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "job_support.h"
#include "process_support.h"

namespace trainit::test {
namespace {

using Json = nlohmann::ordered_json;
using job::count;
using job::write_file;

// --- the matrix ----------------------------------------------------------------

enum class Launch { kExec, kAscend, kTorchrun, kTorchrunExec, kMsrun, kMsrunExec, kPytorch, kTensorflow, kMpi };

// The state trainit is held in when the signal comes. Exec mode has no state
// machine; its phases are its own (stop delay, drain, restart).
enum class Held {
  kWaitRankTable,  // the rank table is "initializing"
  kSpawn,          // the status file says spawn: the device checks wait for DIR/devices
  kRunning,        // every process runs
  kStopDelay,      // exec: --stop-delay after a first SIGTERM
  kStopping,       // a rank failed with 7 (one process: a first SIGTERM); a rank ignoring SIGTERM holds it
  kDraining,       // exec: PROGRAM exited 3; a process ignoring SIGTERM holds the drain
  kRestarting,     // a rank failed and the job restarts; a process ignoring SIGTERM holds the stop before it
};

struct Case {
  Launch mode;
  Held held;
  int signo;
};

const char* mode_option(Launch mode) {
  switch (mode) {
    case Launch::kExec:
      return "exec";
    case Launch::kAscend:
      return "ascend";
    case Launch::kTorchrun:
      return "torchrun";
    case Launch::kTorchrunExec:
      return "torchrun-exec";
    case Launch::kMsrun:
      return "msrun";
    case Launch::kMsrunExec:
      return "msrun-exec";
    case Launch::kPytorch:
      return "pytorch";
    case Launch::kTensorflow:
      return "tensorflow";
    case Launch::kMpi:
      return "mpi";
  }
  return "?";
}

std::string mode_title(Launch mode) {
  switch (mode) {
    case Launch::kExec:
      return "Exec";
    case Launch::kAscend:
      return "Ascend";
    case Launch::kTorchrun:
      return "Torchrun";
    case Launch::kTorchrunExec:
      return "TorchrunExec";
    case Launch::kMsrun:
      return "Msrun";
    case Launch::kMsrunExec:
      return "MsrunExec";
    case Launch::kPytorch:
      return "Pytorch";
    case Launch::kTensorflow:
      return "Tensorflow";
    case Launch::kMpi:
      return "Mpi";
  }
  return "?";
}

std::string held_title(Held held) {
  switch (held) {
    case Held::kWaitRankTable:
      return "WaitRankTable";
    case Held::kSpawn:
      return "Spawn";
    case Held::kRunning:
      return "Running";
    case Held::kStopDelay:
      return "StopDelay";
    case Held::kStopping:
      return "Stopping";
    case Held::kDraining:
      return "Draining";
    case Held::kRestarting:
      return "Restarting";
  }
  return "?";
}

std::string signal_title(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "SIG" + std::to_string(signo);
  }
}

// "Ascend_WaitRankTable_SIGTERM"
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return mode_title(info.param.mode) + "_" + held_title(info.param.held) + "_" + signal_title(info.param.signo);
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << mode_title(c.mode) << " " << held_title(c.held) << " " << signal_title(c.signo);
}

// The ids of a mode's processes (the script's $id): ranks by number, msrun's
// scheduler 100, a mode's single process 0.
std::vector<std::string> process_ids(Launch mode) {
  switch (mode) {
    case Launch::kAscend:
    case Launch::kTorchrun:
    case Launch::kMpi:
      return {"0", "1"};
    case Launch::kMsrun:
      return {"100", "0", "1"};
    default:
      return {"0"};
  }
}

bool one_process(Launch mode) {
  return process_ids(mode).size() == 1;
}

// --- what must hold afterwards ---------------------------------------------------

// How the job ends after the signal.
struct Expected {
  int exit_code = 0;
  // The status file's cause names the signal (it stopped the job).
  bool cause_names_signal = false;
  // The cause is the one that began the stop before the signal: a rank's
  // exit 7, or a first SIGTERM (one process). It must not name the signal.
  bool cause_is_first = false;
  // SIGHUP reached the ranks: the cause is a rank killed by it.
  bool cause_is_rank_killed_by_hup = false;
  // The signal did not stop the job: it goes on (and ends with 0).
  bool job_goes_on = false;
  // The job's code is its one process's (mpirun's answer to SIGHUP).
  bool code_is_the_process_own = false;
};

int first_stop_code(Launch mode) {
  return one_process(mode) ? 128 + SIGTERM : 7;
}

Expected expected(const Case& c) {
  const bool stop_signal = c.signo == SIGTERM || c.signo == SIGINT;
  Expected e;
  if (c.mode == Launch::kExec) {  // the code is PROGRAM's
    switch (c.held) {
      case Held::kRunning:
      case Held::kStopDelay:  // a second stop skips the delay; SIGHUP is forwarded
        e.exit_code = 128 + c.signo;
        break;
      case Held::kStopping:  // PROGRAM ignores SIGTERM only; SIGKILL ends it then
        e.exit_code = c.signo == SIGTERM ? 128 + SIGKILL : 128 + c.signo;
        break;
      case Held::kDraining:  // PROGRAM exited 3; nothing to forward SIGHUP to
        e.exit_code = 3;
        break;
      case Held::kRestarting:  // a stop ends the restarting with the last code; SIGHUP lets it run
        e.exit_code = stop_signal ? 3 : 0;
        e.job_goes_on = !stop_signal;
        break;
      default:
        ADD_FAILURE() << "exec mode has no such state";
    }
    return e;
  }
  switch (c.held) {
    case Held::kWaitRankTable:
    case Held::kRestarting:
      e.exit_code = stop_signal ? 128 + c.signo : 0;
      e.cause_names_signal = stop_signal;
      e.job_goes_on = !stop_signal;
      break;
    case Held::kSpawn:  // no rank yet for SIGHUP to reach: the checks pass, the job runs and ends 0
      e.exit_code = stop_signal ? 128 + c.signo : 0;
      e.cause_names_signal = stop_signal;
      e.job_goes_on = !stop_signal;
      break;
    case Held::kRunning:
      e.exit_code = 128 + c.signo;
      e.cause_names_signal = stop_signal;
      // SIGHUP goes to mpirun's session; mpirun, not its ranks, decides how
      // the job ends (Open MPI aborts the job and exits 1).
      e.code_is_the_process_own = !stop_signal && c.mode == Launch::kMpi;
      e.cause_is_rank_killed_by_hup = !stop_signal && !e.code_is_the_process_own;
      break;
    case Held::kStopping:
      e.exit_code = first_stop_code(c.mode);
      e.cause_is_first = true;
      break;
    default:
      ADD_FAILURE() << "job modes have no such state";
  }
  return e;
}

// --- the processes ---------------------------------------------------------------

// One process of every mode: a script that becomes tests/helpers/job_rank
// (one process, which takes its signals itself). Its id is its rank
// (RANK_ID, RANK, OMPI_COMM_WORLD_RANK), 100 for msrun's scheduler, 0 for a
// mode's only process. It appends "ID GENERATION" to DIR/launches, then by
// the markers in DIR:
//   quick        exit 0 at once (as does every start after a restart)
//   leave.ID     the first start leaves a process ignoring SIGTERM and SIGINT
//                ("daemon PID" to DIR/daemons) and exits 3; the next exits 0
//   default.ID   job_rank record pause: it dies of any signal
//   stubborn.ID  job_rank on-term ignore record pause: SIGTERM is caught and
//                ignored (DIR/rID.term records it)
//   otherwise    job_rank on-term exit record wait-file fail exit-if 1 7
//                pause: SIGTERM ends it with 0 (DIR/rID.term); once DIR/fail
//                exists, rank 1 exits 7
// `record` comes after `on-term`: once DIR/rID.info exists (its pid, in
// trainit's namespace), the process takes SIGTERM as it was told.
std::string write_process_script(const TempDir& dir) {
  std::string path = dir / "process.sh";
  const std::string script = R"(#!/bin/sh
d=')" + dir.path() + R"('
rank=')" + helper_path("job_rank") +
                             R"('
case ${RANK_ID:-${RANK:-${OMPI_COMM_WORLD_RANK:-${MS_ROLE:-main}}}} in
  MS_SCHED) id=100 ;;
  main) id=0 ;;
  *) id=${RANK_ID:-${RANK:-$OMPI_COMM_WORLD_RANK}} ;;
esac
generation=${TORCHELASTIC_RESTART_COUNT:-0}
echo "$id $generation" >> "$d/launches"
if [ "$generation" != 0 ] || [ -e "$d/quick" ]; then echo "$id done"; exit 0; fi
if [ -e "$d/leave.$id" ]; then
  if [ -e "$d/left" ]; then echo "$id done"; exit 0; fi
  : > "$d/left"
  trap '' TERM INT
  sleep 1000 &
  echo "daemon $!" >> "$d/daemons"
  echo "$id leaves a process ignoring SIGTERM and exits 3"
  exit 3
fi
export RANK_ID="$id"
if [ -e "$d/default.$id" ]; then exec "$rank" "$d" record pause; fi
if [ -e "$d/stubborn.$id" ]; then exec "$rank" "$d" on-term ignore record pause; fi
exec "$rank" "$d" on-term exit record wait-file fail exit-if 1 7 pause
)";
  EXPECT_TRUE(write_file(path, script));
  ::chmod(path.c_str(), 0755);
  return path;
}

// "WHAT PID" lines of DIR/NAME as pids.
std::vector<pid_t> pids_in(const TempDir& dir, const char* name) {
  std::vector<pid_t> out;
  for (const auto& line : lines_of(slurp(dir / name))) {
    auto sp = line.rfind(' ');
    if (sp != std::string::npos) {
      out.push_back(std::atoi(line.c_str() + sp + 1));
    }
  }
  return out;
}

// --- trainit's side -----------------------------------------------------------------

// Whether signal `signo` is pending for process `pid` (its own or its thread
// group's set): trainit has not taken it yet.
bool pending(pid_t pid, int signo) {
  for (const auto& line : lines_of(slurp("/proc/" + std::to_string(pid) + "/status"))) {
    if (line.starts_with("SigPnd:") || line.starts_with("ShdPnd:")) {
      const unsigned long long set = std::strtoull(line.c_str() + 7, nullptr, 16);
      if ((set >> (signo - 1)) & 1U) {
        return true;
      }
    }
  }
  return false;
}

Json read_status(const std::string& path) {
  return Json::parse(slurp(path), nullptr, false);
}

std::string status_state(const std::string& path) {
  Json status = read_status(path);
  return status.is_object() && status["state"].is_string() ? status["state"].get<std::string>() : "";
}

// --- one case ---------------------------------------------------------------------

class SignalInEveryState : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    TRAINIT_REQUIRE_ROOT();
    program_ = write_process_script(dir_);
    ASSERT_EQ(::mkdir((dir_ / "log").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir_ / "bin").c_str(), 0755), 0);
  }

  const Case& c() const { return GetParam(); }
  std::string status_path() const { return dir_ / "status.json"; }
  bool job_mode() const { return c().mode != Launch::kExec; }

  // Leaves a marker file in the case's directory.
  void mark(const std::string& name) const { ASSERT_TRUE(write_file(dir_ / name, "")); }

  Spec spec() const {
    Spec s;
    s.env = {"PATH=" + (dir_ / "bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"};
    s.args = {"--mode", mode_option(c().mode), "--grace", "60"};
    switch (c().mode) {
      case Launch::kExec:
        s.args.insert(s.args.end(), {"--verbosity", "2"});
        break;
      case Launch::kAscend:
        s.env = job_.env();
        s.env.emplace_back("HOME=/root");
        break;
      case Launch::kMpi:
        s.env.insert(s.env.end(), {"MA_VJ_NAME=ma-job-fault", "MA_NUM_GPUS=2", "MA_MOUNT_PATH=" + dir_.path()});
        s.args.insert(s.args.end(), {"--private-dir", dir_ / "private"});
        break;
      default:
        s.env.insert(s.env.end(), {"MA_NUM_GPUS=2", "MA_MOUNT_PATH=" + dir_.path()});
        break;
    }
    if (job_mode()) {
      s.args.insert(s.args.end(), {"--status-file", status_path()});
    }
    if (c().held == Held::kStopDelay) {
      s.args.insert(s.args.end(), {"--stop-delay", "60"});
    }
    if (c().held == Held::kRestarting) {
      s.args.insert(s.args.end(), {"--restart", "on-failure"});
    }
    if (c().held == Held::kSpawn) {
      s.args.insert(s.args.end(), {"--preflight", "devices", "--device-check", dir_ / "bin/device-check"});
    }
    s.args.emplace_back("--");
    s.args.push_back(program_);
    return s;
  }

  // The real launchers' stand-ins: the supervised process is the script.
  void write_launcher_stand_ins() const {
    for (const char* tool : {"torchrun", "msrun"}) {
      const std::string path = dir_ / (std::string("bin/") + tool);
      ASSERT_TRUE(write_file(path, "#!/bin/sh\nexec " + program_ + "\n"));
      ::chmod(path.c_str(), 0755);
    }
  }

  // The markers that make the processes behave as the case needs.
  void prepare() {
    switch (c().held) {
      case Held::kWaitRankTable:
        ASSERT_TRUE(write_file(job_.table(), job::template1("initializing", 2)));
        return;
      case Held::kRunning:
      case Held::kStopDelay:
        if (c().mode == Launch::kExec) {
          mark("default.0");  // PROGRAM dies of whatever reaches it
        }
        break;
      case Held::kStopping:
        mark("stubborn." + stubborn_id());
        break;
      case Held::kDraining:
      case Held::kRestarting:
        if (c().mode == Launch::kExec) {
          mark("leave.0");
        } else {
          mark("stubborn." + stubborn_id());
        }
        break;
      case Held::kSpawn:
        write_device_check();
        break;
    }
    if (c().mode == Launch::kAscend) {
      ASSERT_TRUE(write_file(job_.table(), job::template1("completed", 2)));
    }
    if (c().mode == Launch::kTorchrunExec || c().mode == Launch::kMsrunExec) {
      write_launcher_stand_ins();
    }
  }

  // A stand-in for trainit-device-check that holds spawn: each device passes
  // every step once DIR/devices exists.
  void write_device_check() const {
    const std::string path = dir_ / "bin/device-check";
    ASSERT_TRUE(write_file(
        path, "#!/bin/sh\n: > '" + dir_.path() + "/check-'$$\nwhile [ ! -e '" + dir_.path() +
                  "/devices' ]; do sleep 0.02; done\nprintf 'open\\nalloc\\njoin\\nallreduce\\ncheck\\n'\n"));
    ::chmod(path.c_str(), 0755);
  }

  // The process that ignores SIGTERM where one holds the state: rank 0, or
  // the mode's only process.
  static std::string stubborn_id() { return "0"; }
  // The rank that fails with 7 to begin a stop: rank 1.
  static std::string failing_id() { return "1"; }

  // Waits until every process of the plan has recorded itself (DIR/rID.info);
  // false after the deadline.
  bool wait_all_ready() const {
    const auto ids = process_ids(c().mode);
    return wait_until([&] {
      return std::all_of(ids.begin(), ids.end(),
                         [&](const std::string& id) { return job::exists(dir_ / ("r" + id + ".info")); });
    });
  }

  bool wait_state(const std::string& state) const {
    return wait_until([&] { return status_state(status_path()) == state; });
  }

  // Sends `signo` to the process of id `id` (its host pid).
  void signal_process(const Trainit& t, const std::string& id, int signo) const {
    const pid_t ns_pid = std::atoi(field(slurp(dir_ / ("r" + id + ".info")), "pid").c_str());
    ASSERT_GT(ns_pid, 0) << "no pid for " << id;
    const pid_t pid = host_pid(t.pid(), ns_pid);
    ASSERT_GT(pid, 0) << id << " (pid " << ns_pid << " in trainit's namespace) is not running";
    ASSERT_EQ(::kill(pid, signo), 0);
  }

  // SIGKILL to the process of id `id`, as the grace's SIGKILL would send it:
  // what ends a process that ignores SIGTERM, without waiting --grace.
  void kill_stubborn(const Trainit& t, const std::string& id) const { signal_process(t, id, SIGKILL); }

  // SIGKILL to every process left behind by the script ("daemon PID").
  void kill_daemons(const Trainit& t) const {
    for (const pid_t ns_pid : pids_in(dir_, "daemons")) {
      const pid_t pid = host_pid(t.pid(), ns_pid);
      ASSERT_GT(pid, 0) << "the process left behind (pid " << ns_pid << ") is gone already" << t.transcript();
      ASSERT_EQ(::kill(pid, SIGKILL), 0);
    }
  }

  // Drives trainit into the case's state.
  void drive(Trainit& t) {
    switch (c().held) {
      case Held::kWaitRankTable:
        ASSERT_TRUE(wait_state("wait_rank_table")) << t.transcript();
        return;
      case Held::kSpawn:  // the status file says spawn, and a device's check has begun
        ASSERT_TRUE(wait_until([&] { return status_state(status_path()) == "spawn"; }, kTimeout))
            << "the status file never said spawn: " << slurp(status_path()) << t.transcript();
        ASSERT_TRUE(wait_until([&] { return !checks_begun().empty(); })) << t.transcript();
        return;
      case Held::kRunning:
        ASSERT_TRUE(wait_all_ready()) << t.transcript();
        if (job_mode()) {
          ASSERT_TRUE(wait_state("running")) << t.transcript();
        }
        return;
      case Held::kStopDelay:
        ASSERT_TRUE(wait_all_ready()) << t.transcript();
        ASSERT_EQ(t.signal(SIGTERM), 0);
        ASSERT_TRUE(wait_err(t, "got SIGTERM; passing it on in 60.000 s")) << t.transcript();
        return;
      case Held::kStopping:
        ASSERT_TRUE(wait_all_ready()) << t.transcript();
        if (c().mode == Launch::kExec || one_process(c().mode)) {
          ASSERT_EQ(t.signal(SIGTERM), 0);  // the first stop
        } else {
          mark("fail");  // rank 1 exits 7
        }
        if (job_mode()) {
          ASSERT_TRUE(wait_state("stopping")) << t.transcript();
        }
        wait_stop_signal_taken(t);
        return;
      case Held::kDraining:  // exec: PROGRAM left a process and exited 3
        ASSERT_TRUE(wait_err(t, "draining: stopping the remaining processes")) << t.transcript();
        return;
      case Held::kRestarting:
        if (c().mode == Launch::kExec) {  // the drain before the restart
          ASSERT_TRUE(wait_err(t, "draining: stopping the remaining processes")) << t.transcript();
          return;
        }
        ASSERT_TRUE(wait_all_ready()) << t.transcript();
        ASSERT_TRUE(wait_state("running")) << t.transcript();
        mark("fail");
        ASSERT_TRUE(wait_err(t, "restarting the job (restart 1 of unlimited)")) << t.transcript();
        ASSERT_TRUE(wait_state("stopping")) << t.transcript();
        wait_stop_signal_taken(t);
        return;
    }
  }

  // The stop's SIGTERM went out: the process that ignores it, and every one
  // that ends on it, took it (DIR/rID.term).
  void wait_stop_signal_taken(const Trainit& t) const {
    std::vector<std::string> ids = stopped_by_trainit();
    ids.push_back(stubborn_id());
    for (const auto& id : ids) {
      ASSERT_TRUE(wait_until([&] { return job::exists(dir_ / ("r" + id + ".term")); }))
          << id << " never took the stop's SIGTERM" << t.transcript();
    }
  }

  // After trainit took the signal: what was held still is, unless the signal
  // ends it; then whatever still holds the state is let go.
  void after_signal(Trainit& t) {
    switch (c().held) {
      case Held::kSpawn:
        if (!stop_signal()) {  // still in spawn; the devices pass, the ranks start and exit 0
          EXPECT_EQ(status_state(status_path()), "spawn") << t.transcript();
          mark("quick");
          mark("devices");
        }
        return;
      case Held::kWaitRankTable:
        if (!stop_signal()) {  // still waiting; the table completes and the job runs
          EXPECT_EQ(status_state(status_path()), "wait_rank_table") << t.transcript();
          mark("quick");
          ASSERT_TRUE(job::replace_file(job_.table(), job::template1("completed", 2)));
        }
        return;
      case Held::kStopping:
      case Held::kRestarting:
        if (c().mode == Launch::kExec && c().held == Held::kRestarting) {
          kill_daemons(t);
          return;
        }
        if (c().mode == Launch::kExec) {  // PROGRAM ignores SIGTERM; SIGINT and SIGHUP reached it
          if (c().signo == SIGTERM) {
            kill_stubborn(t, stubborn_id());
          }
          return;
        }
        if (stop_signal()) {  // nothing changed: still stopping, the stubborn rank alive
          EXPECT_EQ(status_state(status_path()), "stopping") << t.transcript();
          kill_stubborn(t, stubborn_id());
        }  // SIGHUP went on to the stubborn rank, which died of it
        return;
      case Held::kDraining:
        kill_daemons(t);
        return;
      default:
        return;
    }
  }

  bool stop_signal() const { return c().signo == SIGTERM || c().signo == SIGINT; }

  // The processes trainit stopped with SIGTERM that end on their own when
  // they get it: all of them when the signal stops a running job; in
  // stopping, those that neither failed nor ignore SIGTERM.
  std::vector<std::string> stopped_by_trainit() const {
    std::vector<std::string> out;
    const bool whole_job = c().held == Held::kRunning && stop_signal();
    const bool by_the_first_stop = c().held == Held::kStopping || c().held == Held::kRestarting;
    // mpirun stops its own ranks, its own way (they are not the plan's).
    if (c().mode == Launch::kExec || c().mode == Launch::kMpi || !(whole_job || by_the_first_stop)) {
      return out;
    }
    for (const auto& id : process_ids(c().mode)) {
      if (whole_job || (id != stubborn_id() && id != failing_id())) {
        out.push_back(id);
      }
    }
    return out;
  }

  // Each of them took trainit's SIGTERM and ended itself: trainit stopped
  // them, the kernel did not kill them along with the PID namespace.
  void expect_stopped_by_their_own_handler(const Trainit& t) const {
    for (const auto& id : stopped_by_trainit()) {
      EXPECT_TRUE(job::exists(dir_ / ("r" + id + ".term")))
          << id << " did not take trainit's SIGTERM" << t.transcript();
    }
  }

  void expect_status(const Trainit& t, const Expected& e, const Exit& exit) const {
    const Json status = read_status(status_path());
    ASSERT_TRUE(status.is_object()) << "the status file does not parse: " << slurp(status_path());
    EXPECT_EQ(status["state"], "exit") << status.dump(2);
    EXPECT_EQ(Exit::code(status["exit_code"].is_number() ? status["exit_code"].get<int>() : -1), exit)
        << status.dump(2);
    const std::string cause = status["cause"].is_string() ? status["cause"].get<std::string>() : "";
    const std::string signal = signal_title(c().signo);
    if (e.job_goes_on) {
      EXPECT_TRUE(status["cause"].is_null()) << status.dump(2);
    }
    if (e.cause_names_signal) {
      EXPECT_NE(cause.find(signal), std::string::npos) << "the cause does not name " << signal << ": " << cause;
    }
    if (e.cause_is_rank_killed_by_hup) {
      EXPECT_NE(cause.find("killed by SIGHUP"), std::string::npos) << cause;
    }
    if (e.cause_is_first) {
      EXPECT_NE(cause.find(one_process(c().mode) ? "SIGTERM" : "exited with 7"), std::string::npos) << cause;
      if (c().signo != SIGTERM || !one_process(c().mode)) {
        EXPECT_EQ(cause.find(signal), std::string::npos) << "a signal in stopping changed the cause: " << cause;
      }
    }
    // Every process of the plan ended before trainit did.
    ASSERT_TRUE(status["ranks"].is_array()) << status.dump(2);
    const bool nothing_started = (c().held == Held::kWaitRankTable || c().held == Held::kSpawn) && stop_signal();
    EXPECT_EQ(status["ranks"].empty(), nothing_started) << status.dump(2);
    for (const Json& rank : status["ranks"]) {
      EXPECT_NE(rank["state"], "running") << rank.dump() << t.transcript();
      EXPECT_TRUE(rank["exit_code"].is_number()) << rank.dump();
    }
    if (e.code_is_the_process_own) {
      ASSERT_EQ(status["ranks"].size(), 1U) << status.dump(2);
      EXPECT_EQ(status["exit_code"], status["ranks"][0]["exit_code"]) << status.dump(2);
      EXPECT_NE(cause.find(status["ranks"][0]["name"].get<std::string>()), std::string::npos) << cause;
    }
    if (c().held == Held::kStopping) {  // the process ignoring SIGTERM: SIGHUP was forwarded to it
      const int code =
          one_process(c().mode) ? status["ranks"][0]["exit_code"].get<int>() : rank_code(status, stubborn_id());
      EXPECT_EQ(code, c().signo == SIGHUP ? 128 + SIGHUP : 128 + SIGKILL) << status.dump(2);
    }
    // trainit's own account: it left reaping for exit once nothing was left.
    EXPECT_NE(t.err().find("reaping -> exit after"), std::string::npos) << t.transcript();
  }

  // The exit code of rank `id` in the status file (-1: none).
  static int rank_code(const Json& status, const std::string& id) {
    for (const Json& rank : status["ranks"]) {
      if (rank["rank"].is_number() && std::to_string(rank["rank"].get<int>()) == id) {
        return rank["exit_code"].is_number() ? rank["exit_code"].get<int>() : -1;
      }
    }
    return -1;
  }

  std::string log_dir() const { return c().mode == Launch::kAscend ? job_.log_dir() : dir_ / "log"; }

  // No temporary file of an atomic write is left (the status file, the
  // plan's files), and every log file ends with a whole line.
  void expect_no_file_half_written() const {
    namespace fs = std::filesystem;
    for (const std::string& root : {dir_.path(), job_.root()}) {
      for (const auto& entry : fs::recursive_directory_iterator(root)) {
        EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
            << "left half-written: " << entry.path();
      }
    }
    for (const auto& entry : fs::directory_iterator(log_dir())) {
      const std::string text = slurp(entry.path().string());
      EXPECT_TRUE(text.empty() || text.back() == '\n') << entry.path() << " ends mid-line: " << text;
    }
  }

  // How many times the processes were started.
  size_t starts() const { return count(slurp(dir_ / "launches"), "\n"); }

  void expect_starts(const Expected& e) const {
    const size_t per_start = process_ids(c().mode).size();
    switch (c().held) {
      case Held::kWaitRankTable:  // nothing before the table (the devices); the job once it came
      case Held::kSpawn:
        EXPECT_EQ(starts(), e.job_goes_on ? per_start : 0) << slurp(dir_ / "launches");
        break;
      case Held::kRestarting:  // the restart ran, or a stop ended the restarting
        EXPECT_EQ(starts(), e.job_goes_on ? 2 * per_start : per_start) << slurp(dir_ / "launches");
        break;
      default:
        EXPECT_EQ(starts(), per_start) << slurp(dir_ / "launches");
    }
  }

  // Each device check begun (DIR/check-PID, in trainit's namespace).
  std::vector<std::string> checks_begun() const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      if (entry.path().filename().string().starts_with("check-")) {
        out.push_back(entry.path().filename().string());
      }
    }
    return out;
  }

  // A stop signal sent in spawn is taken there: no rank starts. SIGHUP
  // stops nothing.
  void expect_taken_in_spawn(const Trainit& t) const {
    const std::string err = t.err();
    EXPECT_EQ(err.find("spawn -> stopping") != std::string::npos, stop_signal()) << t.transcript();
    EXPECT_EQ(err.find("spawn -> running") != std::string::npos, !stop_signal()) << t.transcript();
  }

  void run_case() {
    const Expected e = expected(c());
    prepare();
    if (HasFatalFailure()) {
      return;
    }
    Trainit t(spec());
    TRAINIT_ASSERT_STARTED(t);
    drive(t);
    if (HasFatalFailure()) {
      return;
    }
    ASSERT_EQ(t.signal(c().signo), 0);
    ASSERT_TRUE(wait_until([&] { return !pending(t.pid(), c().signo); })) << "trainit never took the signal";
    after_signal(t);
    if (HasFatalFailure()) {
      return;
    }
    const Exit exit = t.wait();
    if (!e.code_is_the_process_own) {
      EXPECT_EQ(exit, Exit::code(e.exit_code)) << t.transcript();
    }
    if (job_mode()) {
      expect_status(t, e, exit);
      expect_stopped_by_their_own_handler(t);
      EXPECT_EQ(t.err().find(": got SIGHUP"), std::string::npos) << "SIGHUP moved the machine" << t.transcript();
    }
    if (c().held == Held::kSpawn) {
      expect_taken_in_spawn(t);
    }
    expect_starts(e);
    expect_no_file_half_written();
  }

  TempDir dir_;
  job::Job job_;
  std::string program_;
};

TEST_P(SignalInEveryState, EndsAsDocumentedWithNothingLeftAndNoFileHalfWritten) {
  run_case();
}

std::vector<Case> matrix() {
  const std::vector<std::pair<Launch, std::vector<Held>>> plans = {
      {Launch::kExec, {Held::kRunning, Held::kStopDelay, Held::kStopping, Held::kDraining, Held::kRestarting}},
      {Launch::kAscend, {Held::kWaitRankTable, Held::kSpawn, Held::kRunning, Held::kStopping}},
      {Launch::kTorchrun, {Held::kSpawn, Held::kRunning, Held::kStopping, Held::kRestarting}},
      {Launch::kTorchrunExec, {Held::kRunning, Held::kStopping}},
      {Launch::kMsrun, {Held::kSpawn, Held::kRunning, Held::kStopping}},
      {Launch::kMsrunExec, {Held::kRunning, Held::kStopping}},
      {Launch::kPytorch, {Held::kRunning, Held::kStopping}},
      {Launch::kTensorflow, {Held::kRunning, Held::kStopping}},
      {Launch::kMpi, {Held::kRunning}},
  };
  std::vector<Case> cases;
  for (const auto& [mode, states] : plans) {
    for (Held held : states) {
      for (int signo : {SIGTERM, SIGINT, SIGHUP}) {
        cases.push_back({mode, held, signo});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(FaultMatrix, SignalInEveryState, ::testing::ValuesIn(matrix()), case_name);

}  // namespace
}  // namespace trainit::test

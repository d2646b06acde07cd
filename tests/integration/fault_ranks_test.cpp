// The fault matrix, ranks that misbehave (issue 21): a rank that segfaults,
// that ignores SIGTERM, that leaves a setsid daemon, that fork-bombs into a
// pids cgroup limit, that closes its stdout early, that floods binary
// output; each in every launch mode where it means something (exec mode's
// PROGRAM is its one "rank"), as PID 1 and, where the tree trainit kills is
// the point, as a subreaper too.
//
// Each case asserts what must hold afterwards: the documented exit code
// (docs/reference/exit-codes.md), the cause in the status file
// (docs/reference/status-file.md: the parts that stay true however much
// detail it gains), nothing left running (fault_support.h says how each
// layout proves it), no file half-written (the status file is whole JSON,
// the logs hold every byte).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "fault_support.h"

namespace trainit::test {
namespace {

using fault::FaultJob;
using fault::Json;
using fault::kGrace;
using fault::Mode;
using fault::Where;
using job::Pidfd;
using job::slurp;
using job::wait_until;

// A SIGKILL comes when the grace is over. The test sees the stop begin a
// little late, never early: a death half a grace after it can only be the
// SIGKILL's (SIGTERM's is at once), and a loaded machine may add up to
// kLate after the grace.
constexpr auto kKillAfter = kGrace / 2;
constexpr auto kLate = reaction(1s);

class FaultTest : public ::testing::TestWithParam<Where> {};

// The status file's row of process `name` says `state` and `code` (a rank
// trainit stopped: 143 for SIGTERM, 137 where it ignored that).
void expect_rank(const Json& status, const std::string& name, const char* state, int code) {
  const Json rank = fault::status_rank(status, name);
  ASSERT_TRUE(rank.is_object()) << "no rank " << name << " in " << status.dump(2);
  EXPECT_EQ(rank["state"], state) << rank.dump();
  EXPECT_EQ(rank["exit_code"], code) << rank.dump();
}

// The index in the plan of the process whose failure the status names:
// mpirun in mpi mode (it reports its rank's end as its own), else the rank.
size_t failing_process(const FaultJob& job, unsigned rank) {
  return job.mode() == Mode::kMpi ? 0 : rank;
}

// --- a rank that segfaults -------------------------------------------------------

using RankThatSegfaults = FaultTest;

TEST_P(RankThatSegfaults, EndsTheJobWith139NamingItAndLeavesNothing) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(GetParam());
  const unsigned last = job.ranks() - 1;
  Trainit t(job.spec({"only", std::to_string(last), "segv", "pause"}));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(139)) << t.transcript();
  if (job.job_mode()) {
    const std::string failed = job.process_name(failing_process(job, last));
    const char* how = job.mode() == Mode::kMpi ? "exited with 139" : "was killed by SIGSEGV";
    Json status = fault::expect_final_status(job, 139, {failed, how});
    expect_rank(status, failed, "failed", 139);
    if (job.mode() != Mode::kMpi) {
      expect_rank(status, job.process_name(0), "stopped", 143);
    }
  }
  fault::expect_nothing_left(t, job);
}

INSTANTIATE_TEST_SUITE_P(Modes, RankThatSegfaults,
                         ::testing::Values(Where{Mode::kExec}, Where{Mode::kAscend}, Where{Mode::kTorchrun},
                                           Where{Mode::kMpi}),
                         fault::where_name);

// --- a rank that ignores SIGTERM ------------------------------------------------------

// Job modes: every rank ignores SIGTERM, the last exits 3 once released; the
// others are SIGKILLed when the grace is over, not before, and the job exits
// 3. Exec mode: PROGRAM leaves a child that ignores SIGTERM and exits 3; the
// drain SIGKILLs the child when the grace is over.
using RankThatIgnoresSigterm = FaultTest;

TEST_P(RankThatIgnoresSigterm, IsSigkilledWhenTheGraceIsOverAndTheJobKeepsTheFailingCode) {
  TRAINIT_REQUIRE_ROOT();
  if (GetParam().layout != Layout::kPid1) {
    TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  }
  fault::Subreaper subreaper(GetParam().layout);
  ASSERT_TRUE(subreaper.ok());
  FaultJob job(GetParam());
  const unsigned last = job.ranks() - 1;
  const std::vector<std::string> actions =
      job.job_mode() ? std::vector<std::string>{"ignore-term",        "ready", "wait-file", "go",   "only",
                                                std::to_string(last), "exit",  "3",         "pause"}
                     : std::vector<std::string>{"ignore-term", "child", "ready", "wait-file", "go", "exit", "3"};
  Trainit t(job.spec(actions));
  TRAINIT_ASSERT_STARTED(t);
  auto ready = fault::wait_ready(t, job.ranks());
  ASSERT_EQ(std::count(ready.begin(), ready.end(), -1), 0) << t.transcript();
  // The stubborn one: rank 0, or exec mode's child.
  const pid_t stubborn_ns = job.job_mode() ? ready[0] : fault::recorded_pid(job, 0, "child");
  Pidfd stubborn(fault::watchable(t, job, stubborn_ns));
  Pidfd failing(fault::watchable(t, job, ready[last]));
  ASSERT_TRUE(stubborn.valid() && failing.valid()) << t.transcript();
  ASSERT_TRUE(job.release());
  auto failed = failing.wait_dead(kTimeout);
  ASSERT_TRUE(failed) << t.transcript();
  auto killed = stubborn.wait_dead(kGrace + kLate + kTimeout);
  ASSERT_TRUE(killed) << "still alive long after the grace" << t.transcript();
  EXPECT_EQ(t.wait(), Exit::code(3)) << t.transcript();
  if (job.mode() != Mode::kMpi) {  // mpirun has its own escalation between
    EXPECT_GE(*killed - *failed, kKillAfter) << "killed before the grace was over";
    EXPECT_LT(*killed - *failed, kGrace + kLate) << "SIGKILL came " << job::ms(*killed - *failed) << " ms after";
  }
  if (job.job_mode()) {
    const std::string failed_name = job.process_name(failing_process(job, last));
    Json status = fault::expect_final_status(job, 3, {failed_name, "exited with 3"});
    if (job.mode() != Mode::kMpi) {
      expect_rank(status, job.process_name(0), "stopped", 137);
      EXPECT_NE(t.err().find("SIGKILL"), std::string::npos) << "the SIGKILL is not told" << t.transcript();
    }
  }
  fault::expect_nothing_left(t, job);
}

INSTANTIATE_TEST_SUITE_P(Modes, RankThatIgnoresSigterm,
                         ::testing::Values(Where{Mode::kExec}, Where{Mode::kAscend}, Where{Mode::kTorchrun},
                                           Where{Mode::kMpi}, Where{Mode::kExec, Layout::kNoNamespace},
                                           Where{Mode::kAscend, Layout::kNoNamespace}),
                         fault::where_name);

// --- a rank that leaves a setsid daemon ---------------------------------------------

// Rank 0 starts a daemon the classic way (fork, setsid, fork: a session of
// its own, its parent gone) and every rank exits 0: the job is over, and
// the daemon must not survive it. One that ignores SIGTERM dies of the
// SIGKILL when the grace is over and the job still exits 0; one that obeys
// SIGTERM is gone at the stop, the job does not wait out the grace.
//
// Under mpirun the daemon's stdio is /dev/null: mpirun waits for the end of
// each rank's output, and a daemon holding it would keep mpirun (and so the
// job) running, a hang of the job's own that trainit cannot tell from work.
using RankThatLeavesASetsidDaemon = FaultTest;

const char* daemon_action(const FaultJob& job) {
  return job.mode() == Mode::kMpi ? "detached-daemon" : "daemon";
}

// When the job's stop began as the test saw it: its status file left
// "running" (job modes); exec mode has none, `otherwise` stands for it.
Clock::time_point stop_began(const FaultJob& job, Clock::time_point otherwise) {
  if (!job.job_mode()) {
    return otherwise;
  }
  wait_until([&] {
    Json status = Json::parse(slurp(job.status_path()), nullptr, false);
    return !status.is_discarded() &&
           (status["state"] == "stopping" || status["state"] == "reaping" || status["state"] == "exit");
  });
  return Clock::now();
}

TEST_P(RankThatLeavesASetsidDaemon, DaemonIgnoringSigtermIsKilledAfterTheGraceAndTheJobExits0) {
  TRAINIT_REQUIRE_ROOT();
  if (GetParam().layout != Layout::kPid1) {
    TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  }
  fault::Subreaper subreaper(GetParam().layout);
  ASSERT_TRUE(subreaper.ok());
  FaultJob job(GetParam());
  Trainit t(job.spec({"only", "0", "ignore-term", "only", "0", daemon_action(job), "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  const pid_t daemon_ns = fault::recorded_pid(job, 0, "daemon");
  ASSERT_GT(daemon_ns, 0) << t.transcript();
  const auto recorded = Clock::now();  // the ranks exit right after this
  Pidfd daemon(fault::watchable(t, job, daemon_ns));
  ASSERT_TRUE(daemon.valid()) << "daemon " << daemon_ns << " not found" << t.transcript();
  const auto stop = stop_began(job, recorded);
  auto killed = daemon.wait_dead(kGrace + kLate + kTimeout);
  ASSERT_TRUE(killed) << "the daemon outlived the job" << t.transcript();
  EXPECT_GE(*killed - stop, kKillAfter) << "killed before the grace was over";
  EXPECT_LT(*killed - stop, kGrace + kLate) << job::ms(*killed - stop) << " ms after the stop began";
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  if (job.job_mode()) {
    fault::expect_final_status(job, 0, {});
  }
  if (job.mode() == Mode::kAscend || job.mode() == Mode::kTorchrun) {  // its output went to rank 0's log
    EXPECT_NE(slurp(job.log_file(0)).find("daemon 0 pid " + std::to_string(daemon_ns) + "\n"), std::string::npos)
        << slurp(job.log_file(0));
  }
  fault::expect_nothing_left(t, job);
}

TEST_P(RankThatLeavesASetsidDaemon, DaemonObeyingSigtermIsGoneAtTheStopWithoutWaitingOutTheGrace) {
  TRAINIT_REQUIRE_ROOT();
  if (GetParam().layout != Layout::kPid1) {
    TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  }
  fault::Subreaper subreaper(GetParam().layout);
  ASSERT_TRUE(subreaper.ok());
  FaultJob job(GetParam());
  // A grace long enough that waiting it out shows: the daemon must get the
  // SIGTERM itself, although it is in no rank's process group or session.
  // Half the grace is the bound natively; under qemu on a busy machine the
  // end has taken 1.17 s (past the 1 s once asked), so there the bound is a
  // second short of the grace, still short of waiting it out.
  constexpr auto kLongGrace = 5s;
  Trainit t(job.spec({"only", "0", daemon_action(job), "exit", "0"}, {"--grace", "5"}));
  TRAINIT_ASSERT_STARTED(t);
  const pid_t daemon_ns = fault::recorded_pid(job, 0, "daemon");
  ASSERT_GT(daemon_ns, 0) << t.transcript();
  const auto stop = stop_began(job, Clock::now());
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_LT(Clock::now() - stop, kEmulated ? kLongGrace - 1s : kLongGrace / 2)
      << "the job waited out the grace: the daemon got no SIGTERM" << t.transcript();
  if (job.job_mode()) {
    fault::expect_final_status(job, 0, {});
  }
  fault::expect_nothing_left(t, job);
}

INSTANTIATE_TEST_SUITE_P(Modes, RankThatLeavesASetsidDaemon,
                         ::testing::Values(Where{Mode::kExec}, Where{Mode::kAscend}, Where{Mode::kTorchrun},
                                           Where{Mode::kMpi}, Where{Mode::kExec, Layout::kNoNamespace},
                                           Where{Mode::kAscend, Layout::kNoNamespace}),
                         fault::where_name);

// --- a rank that fork-bombs into a pids cgroup limit ---------------------------------

// trainit and the job run in a private pids cgroup of kPidsMax tasks. The
// last rank (exec mode: PROGRAM) ignores SIGTERM and forks until the kernel
// refuses, then exits 1 as a program whose fork raised; its bombers fork on
// into every pid that frees up. The job ends with the rank's 1, every
// bomber is SIGKILLed once the grace is over, and the cgroup is empty.
constexpr unsigned kPidsMax = 48;

using RankThatForkBombs = FaultTest;

TEST_P(RankThatForkBombs, IntoAPidsLimitEndsTheJobWithItsCodeAndLeavesTheCgroupEmpty) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kThreadsAtPidsLimit);
  fault::PidsCgroup cgroup(kPidsMax);
  ASSERT_TRUE(cgroup.error().empty()) << "cannot fence the bomb in: " << cgroup.error();
  fault::Subreaper subreaper(GetParam().layout);
  ASSERT_TRUE(subreaper.ok());
  FaultJob job(GetParam());
  const std::string last = std::to_string(job.ranks() - 1);
  Trainit t(
      cgroup.run_inside(job.spec({"only", last, "ignore-term", "only", last, "forkbomb", cgroup.path(), "pause"})));
  TRAINIT_ASSERT_STARTED(t);
  const Exit exit = t.wait(kTimeout + 5s);
  ASSERT_EQ(exit, Exit::code(1)) << t.transcript();
  // The bomb met the limit (EAGAIN), not something else.
  const std::string bomb = slurp(job.record(job.ranks() - 1, "bomb"));
  EXPECT_NE(bomb.find(" " + std::to_string(EAGAIN) + "\n"), std::string::npos) << "rR.bomb: '" << bomb << "'";
  if (job.job_mode()) {
    fault::expect_final_status(job, 1, {job.process_name(job.ranks() - 1), "exited with 1"});
  }
  EXPECT_TRUE(wait_until([&] { return cgroup.procs().empty() && cgroup.current() == 0; }, 2s))
      << "left in the cgroup: " << fault::Subreaper::describe(cgroup.procs()) << " (pids.current " << cgroup.current()
      << ")";
  fault::expect_nothing_left(t, job);
}

INSTANTIATE_TEST_SUITE_P(Modes, RankThatForkBombs,
                         ::testing::Values(Where{Mode::kExec}, Where{Mode::kAscend}, Where{Mode::kTorchrun},
                                           Where{Mode::kExec, Layout::kNoNamespace},
                                           Where{Mode::kAscend, Layout::kNoNamespace}),
                         fault::where_name);

// --- a rank that closes its stdout early ---------------------------------------------

// It goes on, and what it writes to stderr afterwards is still logged and
// shown: in the job modes stdout and stderr are one pipe, and losing one
// descriptor of it ends nothing.
using RankThatClosesItsStdout = FaultTest;

TEST_P(RankThatClosesItsStdout, GoesOnAndWhatItWritesToStderrAfterIsLogged) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(GetParam());
  Outcome r = run(job.spec({"print", "before", "close-stdout", "eprint", "after", "exit", "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    EXPECT_EQ(slurp(job.log_file(rank)), "before\nafter\n") << "rank " << rank;
    EXPECT_NE(r.out.find(job.console_prefix(rank) + "after\n"), std::string::npos) << r.transcript;
  }
  fault::expect_final_status(job, 0, {});
}

// Both closed: trainit sees the end of the rank's output long before the
// rank's end, and must wait for the rank all the same.
TEST_P(RankThatClosesItsStdout, AndStderrIsStillWaitedForAndItsCodeIsTheJobs) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(GetParam());
  Trainit t(
      job.spec({"print", "before", "close-stdout", "close-stderr", "mark", "closed", "wait-file", "go", "exit", "5"}));
  TRAINIT_ASSERT_STARTED(t);
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    ASSERT_TRUE(wait_until([&] { return job::exists(job.record(rank, "closed")); })) << t.transcript();
    ASSERT_TRUE(wait_until([&] { return slurp(job.log_file(rank)) == "before\n"; })) << t.transcript();
  }
  std::this_thread::sleep_for(100ms);  // time to act on the end of the output, wrongly
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(t.pid()), &info, WEXITED | WNOHANG | WNOWAIT), 0);
  EXPECT_EQ(info.si_pid, 0) << "trainit ended while its ranks ran" << t.transcript();
  Json running = Json::parse(slurp(job.status_path()), nullptr, false);
  ASSERT_FALSE(running.is_discarded()) << slurp(job.status_path());
  EXPECT_EQ(running["state"], "running") << running.dump(2);
  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(), Exit::code(5)) << t.transcript();
  fault::expect_final_status(job, 5, {"exited with 5"});
  fault::expect_nothing_left(t, job);
}

INSTANTIATE_TEST_SUITE_P(Modes, RankThatClosesItsStdout,
                         ::testing::Values(Where{Mode::kAscend}, Where{Mode::kTorchrun}), fault::where_name);

TEST(RankThatClosesItsStdoutInExecMode, GoesOnAndWhatItWritesToStderrAfterReachesTrainitsStderr) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(Where{Mode::kExec});
  Outcome r = run(job.spec({"print", "before", "close-stdout", "eprint", "after", "exit", "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(r.out, "before\n") << r.transcript;
  EXPECT_NE(r.err.find("after\n"), std::string::npos) << r.transcript;
}

// --- a rank that floods binary output -------------------------------------------------

// What fault_rank's `flood BYTES` writes for rank `rank`.
std::string flood_stream(size_t bytes, unsigned rank) {
  std::string out = job::random_stream(bytes, 0, rank);
  std::replace(out.begin(), out.end(), '\n', '\0');
  return out;
}

// The size of `path`; 0 when it is not there.
uintmax_t size_of(const std::string& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  return error ? 0 : size;
}

// A /proc/PID/status field in kB; -1 when missing.
long status_kb(pid_t pid, std::string_view field) {
  for (const auto& line : lines_of(slurp("/proc/" + std::to_string(pid) + "/status"))) {
    if (line.starts_with(field) && line.size() > field.size() && line[field.size()] == ':') {
      return std::atol(line.c_str() + field.size() + 1);
    }
  }
  return -1;
}

// Every rank writes kFlood bytes of binary (NULs, bytes that are no UTF-8,
// not one newline) as fast as the pipe takes them. trainit's memory stays
// within kGrowthKb of what it held before (the output is 4 times that), each
// log file holds every byte, each console line is one rank's, under its
// prefix, cut at the console's longest line, and the job ends normally.
constexpr size_t kFlood = size_t{32} << 20;
constexpr long kGrowthKb = 16 << 10;

using RankThatFloodsBinaryOutput = FaultTest;

TEST_P(RankThatFloodsBinaryOutput, KeepsTrainitsMemoryBoundedAndEveryByteInItsLog) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(GetParam());
  Trainit t(job.spec({"ready", "wait-file", "start", "flood", std::to_string(kFlood), "mark", "flooded", "wait-file",
                      "go", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  auto ready = fault::wait_ready(t, job.ranks());
  ASSERT_EQ(std::count(ready.begin(), ready.end(), -1), 0) << t.transcript();
  const long before = status_kb(t.pid(), "VmRSS");
  ASSERT_GT(before, 0);
  ASSERT_TRUE(job.release("start"));
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    ASSERT_TRUE(wait_until([&] { return job::exists(job.record(rank, "flooded")); }, 30s)) << t.transcript();
  }
  // Each log: the ready line, then the flood.
  std::vector<std::string> logs;
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    logs.push_back("ready " + std::to_string(rank) + " pid " + std::to_string(ready[rank]) + "\n" +
                   flood_stream(kFlood, rank));
  }
  // Drained into the files: what trainit held for it is in its peak now.
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    ASSERT_TRUE(wait_until([&] { return size_of(job.log_file(rank)) == logs[rank].size(); }))
        << "rank " << rank << "'s log has " << size_of(job.log_file(rank)) << " bytes";
  }
  const long peak = status_kb(t.pid(), "VmHWM");
  EXPECT_LT(peak - before, kGrowthKb) << "trainit grew from " << before << " kB to a peak of " << peak << " kB";
  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(30s), Exit::code(0)) << t.err();
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    const std::string got = slurp(job.log_file(rank));
    EXPECT_TRUE(got == logs[rank]) << "rank " << rank << ": " << job::compare_bytes(got, logs[rank]);
  }
  // The console: whole lines, each under a rank's prefix or trainit's own.
  size_t bad = 0;
  std::string first_bad;
  for (const auto& line : lines_of(t.out())) {
    bool ours = line.starts_with("[trainit] ");
    for (unsigned rank = 0; rank < job.ranks() && !ours; ++rank) {
      const std::string prefix = job.console_prefix(rank);
      ours = line.starts_with(prefix) && line.size() <= prefix.size() + (size_t{64} << 10);
    }
    if (!ours && bad++ == 0) {
      first_bad = line.substr(0, 80);
    }
  }
  EXPECT_EQ(bad, 0u) << "console lines without a prefix, or too long; the first begins '" << first_bad << "'";
  fault::expect_final_status(job, 0, {});
  fault::expect_nothing_left(t, job);
}

INSTANTIATE_TEST_SUITE_P(Modes, RankThatFloodsBinaryOutput,
                         ::testing::Values(Where{Mode::kAscend}, Where{Mode::kTorchrun}), fault::where_name);

}  // namespace
}  // namespace trainit::test

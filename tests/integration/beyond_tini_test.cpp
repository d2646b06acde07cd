// Beyond tini (issue 3), against the real kernel: the drain when PROGRAM
// exits, a stop that reaches every process at once, the grace before
// SIGKILL, --no-drain and --forward-only, --stop-delay, restarts with their
// backoff, and a subreaper that touches its descendants only.
//
// The processes are tests/helpers/lifecycle: a main process and setsid'ed
// daemons that record when they took SIGTERM and when their cleanup was over.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "emulation.h"
#include "harness.h"
#include "lifecycle_support.h"

namespace trainit::test {
namespace {

using lifecycle::proc_helper;
using lifecycle::stamp;
using lifecycle::wait_stamp;

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// `trainit ARGS -- lifecycle DIR REST...`
Spec lifecycle_spec(const TempDir& dir, std::vector<std::string> trainit_args, std::vector<std::string> rest) {
  Spec spec;
  spec.args = std::move(trainit_args);
  spec.args.push_back("--");
  spec.args.push_back(proc_helper());
  spec.args.push_back(dir.path());
  spec.args.insert(spec.args.end(), rest.begin(), rest.end());
  return spec;
}

// --- Drain on exit -------------------------------------------------------------

TEST(Drain, SetsidDaemonFinishesItsCleanupBeforeTrainitExitsWithTheChildsCode) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  // PROGRAM exits 0 at once; its daemon takes 200 ms to clean up on SIGTERM.
  const std::vector<std::string> job = {"daemon", "d", "exit", "200", "exit", "0"};
  Outcome r = run(lifecycle_spec(dir, {"--grace", "5"}, job));
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  auto term = stamp(dir, "d.term");
  auto done = stamp(dir, "d.done");
  ASSERT_TRUE(term) << "the daemon got no SIGTERM" << r.transcript;
  ASSERT_TRUE(done) << "the daemon's cleanup was cut off" << r.transcript;
  EXPECT_GE(*done - *term, 200ms);
  EXPECT_GE(r.elapsed, 200ms) << "trainit did not wait for the cleanup";
  EXPECT_LT(r.elapsed, 4s) << "someone waited for the SIGKILL";

  // The contrast: the inits this replaces exit with PROGRAM, and the kernel
  // SIGKILLs the daemon mid-cleanup (or before it even saw a SIGTERM).
  for (const char* other : {"/usr/bin/tini-static", "/usr/bin/dumb-init", "/usr/bin/catatonit"}) {
    if (!path_exists(other)) {
      continue;
    }
    TempDir other_dir;
    Spec spec = lifecycle_spec(other_dir, {}, job);
    spec.program = other;
    Outcome o = run(spec);
    EXPECT_EQ(o.exit, Exit::code(0)) << other << o.transcript;
    EXPECT_FALSE(stamp(other_dir, "d.done")) << other << " let the daemon finish: the contrast proves nothing";
  }
}

TEST(Drain, ProcessIgnoringSigtermIsKilledAfterTheGraceNotBefore) {
  TRAINIT_REQUIRE_ROOT();
  constexpr auto kGrace = 400ms;
  constexpr auto kMargin = 50ms;
  TempDir dir;
  Trainit t(
      lifecycle_spec(dir, {"--grace", "0.4"}, {"daemon", "stubborn", "ignore", "0", "serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  Pidfd stubborn(lifecycle::ready_host_pid(t, "stubborn"));
  Pidfd main(lifecycle::ready_host_pid(t, "main"));
  ASSERT_TRUE(stubborn.valid() && main.valid()) << t.transcript();

  t.close_stdin();  // PROGRAM exits 0: the drain begins
  auto child_exit = main.wait_dead(kTimeout);
  ASSERT_TRUE(child_exit) << t.transcript();
  EXPECT_FALSE(stubborn.wait_dead(kGrace - kMargin - (Clock::now() - *child_exit)))
      << "killed before the grace was over";
  auto death = stubborn.wait_dead(kGrace + 2s);
  ASSERT_TRUE(death) << "still alive 2 s after the grace" << t.transcript();
  EXPECT_GE(*death - *child_exit, kGrace - kMargin);
  EXPECT_LT(*death - *child_exit, kGrace + reaction(500ms))
      << "SIGKILL came " << ms(*death - *child_exit) << " ms after";
  EXPECT_EQ(t.wait(), Exit::code(0)) << "PROGRAM's code, not the SIGKILLed daemon's" << t.transcript();
  EXPECT_NE(t.err().find("SIGKILL"), std::string::npos) << t.transcript();
}

TEST(Drain, NoDrainExitsAtOnceAndLeavesTheDaemonToTheKernel) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  // A drain would wait out the daemon's 4 s cleanup; the bound has room for
  // a loaded CI machine (224 ms was seen against an earlier 200 ms bound).
  Trainit t(lifecycle_spec(dir, {"--no-drain", "--grace", "5"},
                           {"daemon", "d", "exit", "4000", "serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_LT(t.waited(), reaction(1s)) << "waited as if draining";
  EXPECT_FALSE(stamp(dir, "d.term")) << "--no-drain sent the daemon a SIGTERM";
  EXPECT_FALSE(stamp(dir, "d.done")) << "the kernel's SIGKILL should have cut the daemon off";
}

// --- Stop everything ---------------------------------------------------------

TEST(Stop, SigtermReachesASetsidDaemonAtTheSameTimeAsTheRunningChild) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  // PROGRAM takes 300 ms to clean up: a daemon signalled only by the drain
  // would get its SIGTERM 300 ms after PROGRAM's.
  Trainit t(lifecycle_spec(dir, {"--grace", "5"}, {"daemon", "d", "exit", "0", "serve", "main", "exit", "300"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("d ready")) << t.transcript();
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  auto main_term = stamp(dir, "main.term");
  auto main_done = stamp(dir, "main.done");
  auto d_term = stamp(dir, "d.term");
  ASSERT_TRUE(main_term && main_done && d_term) << t.transcript();
  EXPECT_LT(*d_term, *main_done) << "the daemon got SIGTERM only after PROGRAM had exited";
  EXPECT_LT(*d_term - *main_term, reaction(50ms));
  EXPECT_LT(*main_term - *d_term, reaction(50ms));
  EXPECT_LT(*d_term - sent, reaction(200ms));
  // (main.done at all: trainit waited for PROGRAM's 300 ms cleanup.)
}

TEST(Stop, ForwardOnlySigtermReachesOnlyTheChildAndNothingIsKilled) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  // Both survive SIGTERM: only a SIGKILL escalation could end them.
  Trainit t(lifecycle_spec(dir, {"--forward-only", "--grace", "0.5"},
                           {"daemon", "d", "stay", "0", "serve", "main", "stay", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  Pidfd d(lifecycle::ready_host_pid(t, "d"));
  Pidfd main(lifecycle::ready_host_pid(t, "main"));
  ASSERT_TRUE(d.valid() && main.valid()) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  ASSERT_TRUE(wait_stamp(dir, "main.term", 2s)) << "PROGRAM did not get the SIGTERM" << t.transcript();
  // The behaviour under test: three times the grace, and no SIGKILL.
  EXPECT_FALSE(main.wait_dead(1500ms)) << "PROGRAM was killed: an escalation despite --forward-only";
  EXPECT_TRUE(d.alive()) << "the daemon was killed";
  EXPECT_FALSE(stamp(dir, "d.term")) << "the daemon got the SIGTERM despite --forward-only";
  EXPECT_EQ(t.err(), "") << t.transcript();
  // The drain is independent of --forward-only: PROGRAM's exit still drains.
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_TRUE(stamp(dir, "d.term")) << "the drain did not reach the daemon" << t.transcript();
}

TEST(Stop, ForwardOnlyWithNoDrainIsTinisBehaviour) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(lifecycle_spec(dir, {"--forward-only", "--no-drain"},
                           {"daemon", "d", "exit", "0", "serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_TRUE(stamp(dir, "main.term"));
  EXPECT_FALSE(stamp(dir, "d.term")) << "only the kernel's SIGKILL should reach the daemon";
}

// --- Stop delay ----------------------------------------------------------------

TEST(StopDelay, ChildAndDaemonGetSigtermOnlyAfterTheDelay) {
  TRAINIT_REQUIRE_ROOT();
  constexpr auto kDelay = 300ms;
  TempDir dir;
  Trainit t(lifecycle_spec(dir, {"--stop-delay", "0.3", "--grace", "5"},
                           {"daemon", "d", "exit", "0", "serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (const char* who : {"main.term", "d.term"}) {
    auto term = stamp(dir, who);
    ASSERT_TRUE(term) << who << t.transcript();
    EXPECT_GE(*term - sent, kDelay) << who << " got SIGTERM " << ms(*term - sent) << " ms after it was sent";
    EXPECT_LT(*term - sent, kDelay + reaction(300ms)) << who;
  }
}

// --forward-only passes SIGTERM to PROGRAM alone, as tini does; the delay
// still comes first, as the option says.
TEST(StopDelay, WithForwardOnlyTheSigtermIsForwardedAfterTheDelay) {
  TRAINIT_REQUIRE_ROOT();
  constexpr auto kDelay = 300ms;
  TempDir dir;
  Trainit t(lifecycle_spec(dir, {"--forward-only", "--stop-delay", "0.3"}, {"serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  auto term = stamp(dir, "main.term");
  ASSERT_TRUE(term) << t.transcript();
  EXPECT_GE(*term - sent, kDelay) << "SIGTERM forwarded " << ms(*term - sent) << " ms after it was sent";
  EXPECT_LT(*term - sent, kDelay + reaction(300ms));
}

TEST(StopDelay, ASecondSigtermSkipsTheRestOfTheDelay) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(lifecycle_spec(dir, {"-v", "--stop-delay", "10", "--grace", "5"}, {"serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  Pidfd main(lifecycle::ready_host_pid(t, "main"));
  ASSERT_TRUE(main.valid()) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  // Two SIGTERMs pending at once are one: the second goes only once trainit
  // has taken the first.
  ASSERT_TRUE(wait_err(t, "got SIGTERM; passing it on in 10.000 s")) << t.transcript();
  // The behaviour under test: PROGRAM keeps running through the delay.
  EXPECT_FALSE(main.wait_dead(100ms)) << "no delay at all";
  EXPECT_FALSE(stamp(dir, "main.term")) << "no delay at all";
  const auto second = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(2s), Exit::code(0)) << t.transcript();
  auto term = stamp(dir, "main.term");
  ASSERT_TRUE(term) << t.transcript();
  EXPECT_LT(*term - second, reaction(200ms));
}

// --- Restarts -------------------------------------------------------------------

// The time between run i's exit and run i+1's start.
Clock::duration gap(const std::vector<lifecycle::Run>& runs, size_t i) {
  return runs[i + 1].start - runs[i].exit.value_or(runs[i].start);
}

TEST(Restart, OnFailureWithMaxRestartsTwoRunsThreeTimesWithDoublingBackoff) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string file = dir / "runs";
  Outcome r = run(lifecycle_spec(dir, {"--restart", "on-failure", "--max-restarts", "2"}, {"runs", file, "3"}));
  EXPECT_EQ(r.exit, Exit::code(3)) << r.transcript;
  auto runs = lifecycle::read_runs(file);
  ASSERT_EQ(runs.size(), 3u) << r.transcript;
  // Backoff 0.1 s, then 0.2 s, as trainit says; the timer never fires early,
  // nor (natively) late enough to pass for the next backoff.
  EXPECT_NE(r.err.find("exited with 3; restart 1 in 0.1 s"), std::string::npos) << r.transcript;
  EXPECT_NE(r.err.find("exited with 3; restart 2 in 0.2 s"), std::string::npos) << r.transcript;
  EXPECT_GE(gap(runs, 0), 100ms);
  EXPECT_LT(gap(runs, 0), 100ms + kStartLate) << ms(gap(runs, 0)) << " ms";
  EXPECT_GE(gap(runs, 1), 200ms);
  EXPECT_LT(gap(runs, 1), 200ms + kStartLate) << ms(gap(runs, 1)) << " ms";
  EXPECT_NE(r.err.find("not restarting after 2 restarts"), std::string::npos) << r.transcript;
}

TEST(Restart, AlwaysRestartsACleanExitOnFailureDoesNot) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string always = dir / "always";
  Outcome r = run(lifecycle_spec(dir, {"--restart", "always", "--max-restarts", "1"}, {"runs", always, "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(lifecycle::read_runs(always).size(), 2u) << r.transcript;

  const std::string on_failure = dir / "on-failure";
  r = run(lifecycle_spec(dir, {"--restart", "on-failure"}, {"runs", on_failure, "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(lifecycle::read_runs(on_failure).size(), 1u) << r.transcript;
}

// Starting again what cannot be started fails the same way: a PROGRAM that
// is gone (127) ends trainit with that code, at the first start or at a
// restart, instead of restarting for ever.
TEST(Restart, AProgramThatCannotBeStartedIsNotRestartedAndItsCodeIsTheExit) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kVforkIsFork);  // a failed exec reads as a PROGRAM exiting 127 there
  TempDir dir;
  Outcome r = run({.args = {"--restart", "always", "--", dir / "missing"}});
  EXPECT_EQ(r.exit, Exit::code(127)) << r.transcript;
  EXPECT_EQ(r.err.find("restart"), std::string::npos) << r.transcript;

  // A PROGRAM that removes itself and fails: the restart finds it gone.
  const std::string program = dir / "once";
  {
    std::ofstream out(program);
    out << "#!/bin/sh\nrm -f \"$0\"\nexit 3\n";
  }
  ASSERT_EQ(::chmod(program.c_str(), 0755), 0);
  r = run({.args = {"--restart", "on-failure", "--", program}});
  EXPECT_EQ(r.exit, Exit::code(127)) << r.transcript;
  EXPECT_NE(r.err.find("restart 1 in 0.1 s"), std::string::npos) << r.transcript;
  EXPECT_NE(r.err.find("cannot execute"), std::string::npos) << r.transcript;
  EXPECT_EQ(r.err.find("restart 2"), std::string::npos) << r.transcript;
  EXPECT_LT(r.elapsed, 3s) << r.transcript;
}

// A code -e declares a success is no failure: on-failure does not restart
// it (systemd's SuccessExitStatus= alike), and trainit exits 0.
TEST(Restart, OnFailureDoesNotRestartACodeThatExitZeroDeclaresASuccess) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string file = dir / "runs";
  Outcome r =
      run(lifecycle_spec(dir, {"--restart", "on-failure", "--max-restarts", "2", "-e", "3"}, {"runs", file, "3"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(lifecycle::read_runs(file).size(), 1u) << r.transcript;
}

// Starts `trainit ARGS -- lifecycle runs FILE 1` (fails at once, forever) and
// sends SIGTERM in the 0.8 s backoff before the fifth run: long enough that
// even the emulated bound on the stop tells it from waiting the backoff out.
void expect_sigterm_in_backoff_ends_restarting(std::vector<std::string> args) {
  TempDir dir;
  const std::string file = dir / "runs";
  args.insert(args.end(), {"--restart", "on-failure"});
  Trainit t(lifecycle_spec(dir, args, {"runs", file, "1"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(wait_err(t, "restart 4 in 0.8 s")) << t.transcript();
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(2s), Exit::code(1)) << "the last run's code" << t.transcript();
  EXPECT_LT(Clock::now() - sent, reaction(200ms)) << "the stop waited for the backoff";
  EXPECT_EQ(lifecycle::read_runs(file).size(), 4u) << "a run started after the stop" << t.transcript();
}

TEST(Restart, SigtermDuringTheBackoffEndsRestartingAtOnce) {
  TRAINIT_REQUIRE_ROOT();
  expect_sigterm_in_backoff_ends_restarting({});
}

// With --forward-only there is no PROGRAM to forward SIGTERM to during the
// backoff; dropping the signal would leave `docker stop` to its SIGKILL.
TEST(Restart, SigtermDuringTheBackoffEndsRestartingEvenWithForwardOnly) {
  TRAINIT_REQUIRE_ROOT();
  expect_sigterm_in_backoff_ends_restarting({"--forward-only"});
}

// The same between PROGRAM's exit and the backoff, while its daemon drains.
TEST(Restart, SigtermWhileDrainingBeforeARestartEndsRestartingEvenWithForwardOnly) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string file = dir / "runs";
  // Each run leaves a daemon that outlives SIGTERM: each drain takes the grace.
  Trainit t(lifecycle_spec(dir, {"--forward-only", "--restart", "on-failure", "--grace", "0.5"},
                           {"daemon", "d", "stay", "0", "runs", file, "1"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(wait_stamp(dir, "d.term")) << "no drain after the first run" << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(reaction(2s)), Exit::code(1)) << t.transcript();
  EXPECT_EQ(lifecycle::read_runs(file).size(), 1u) << "restarted after the stop" << t.transcript();
}

// About 10.5 s: the only way to make a run healthy is to let it last 10 s.
TEST(Restart, CountAndBackoffStartAfreshAfterARunOfTenSeconds) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string file = dir / "runs";
  // Run 1 fails at once; run 2 fails after 10.1 s (healthy); run 3 at once.
  // With --max-restarts 1, run 3 happens only if run 2 reset the count.
  Outcome r =
      run(lifecycle_spec(dir, {"--restart", "on-failure", "--max-restarts", "1"}, {"runs", file, "1", "1@10100", "1"}),
          20s);
  EXPECT_EQ(r.exit, Exit::code(1)) << r.transcript;
  auto runs = lifecycle::read_runs(file);
  ASSERT_EQ(runs.size(), 3u) << "the healthy run did not reset the count" << r.transcript;
  EXPECT_GE(runs[1].exit.value_or(runs[1].start) - runs[1].start, 10s);
  // The backoff started afresh: the restart after the healthy run is
  // announced as the first, 0.1 s away, as the one before it was.
  EXPECT_EQ(count_lines_containing(r.err, "exited with 1; restart 1 in 0.1 s"), 2) << r.transcript;
  EXPECT_GE(gap(runs, 1), 100ms);
  // Natively the timer shows it too (a doubled backoff is 0.2 s).
  EXPECT_LT(gap(runs, 1), 100ms + kStartLate)
      << "the backoff did not start afresh at 0.1 s: " << ms(gap(runs, 1)) << " ms";
}

// --- As a subreaper ---------------------------------------------------------------

// trainit as PID 2 under a stub init with a bystander beside it: PROGRAM
// (`main`), a setsid'ed daemon that cleans up on SIGTERM, a stubborn one that
// ignores it.
Spec under_init(const TempDir& dir, std::vector<std::string> main) {
  std::vector<std::string> job = {"daemon", "d", "exit", "100", "daemon", "stubborn", "ignore", "0"};
  job.insert(job.end(), main.begin(), main.end());
  Spec spec = lifecycle_spec(dir, {"--grace", "0.3"}, job);
  spec.layout = Layout::kUnderInit;
  spec.bystander = {proc_helper(), dir.path(), "forever", "bystander", "stay", "0"};
  return spec;
}

void expect_only_descendants_touched(Trainit& t, const TempDir& dir) {
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_TRUE(stamp(dir, "d.done")) << "the daemon was not stopped gracefully" << t.transcript();
  EXPECT_TRUE(t.wait_line("stub: bystander alive", 0s)) << "the bystander was killed" << t.transcript();
  EXPECT_FALSE(stamp(dir, "bystander.term")) << "the bystander outside the tree got SIGTERM";
  EXPECT_NE(t.err().find("SIGKILL"), std::string::npos) << "the stubborn daemon needed the escalation";
}

TEST(Subreaper, StopTouchesOnlyDescendantsAndABystanderSurvives) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  TempDir dir;
  Trainit t(under_init(dir, {"serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("bystander ready")) << t.transcript();
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  expect_only_descendants_touched(t, dir);
  EXPECT_TRUE(stamp(dir, "main.term"));
}

TEST(Subreaper, DrainTouchesOnlyDescendantsAndABystanderSurvives) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  TempDir dir;
  // PROGRAM exits 0 after 0.3 s. (Not at the end of stdin: the stub init
  // holds a copy of the harness's end of trainit's stdin.)
  Trainit t(under_init(dir, {"runs", dir / "runs", "0@300"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("bystander ready")) << t.transcript();
  ASSERT_TRUE(t.wait_line_starting("stubborn ready")) << t.transcript();
  expect_only_descendants_touched(t, dir);
  auto runs = lifecycle::read_runs(dir / "runs");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].exit) << "PROGRAM had not exited by itself";
}

TEST(Subreaper, DrainsItsSetsidDescendantsWithoutANamespace) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  TempDir dir;
  Spec spec = lifecycle_spec(dir, {"--grace", "5"}, {"daemon", "d", "exit", "100", "exit", "4"});
  spec.layout = Layout::kNoNamespace;
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(4)) << r.transcript;
  EXPECT_TRUE(stamp(dir, "d.done")) << "the adopted daemon was not drained" << r.transcript;
}

TEST(Subreaper, StopWithNoDrainStillSignalsTheRestWhenTheChildExitsAtOnce) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  TempDir dir;
  // PROGRAM exits the moment it takes SIGTERM, before the sweep of the rest
  // is due; with --no-drain trainit leaves then, and must sweep on its way.
  Spec spec =
      lifecycle_spec(dir, {"--no-drain", "--grace", "5"}, {"daemon", "d", "exit", "0", "serve", "main", "exit", "0"});
  spec.layout = Layout::kNoNamespace;
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  const pid_t d = lifecycle::ready_host_pid(t, "d");
  Pidfd daemon(d);
  ASSERT_TRUE(daemon.valid()) << t.transcript();
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  // No namespace ends with trainit here: the daemon lives on unless signalled.
  EXPECT_TRUE(daemon.wait_dead(2s)) << "the daemon never got its SIGTERM" << t.transcript();
  EXPECT_TRUE(stamp(dir, "d.term")) << t.transcript();
  if (daemon.alive()) {
    ::kill(d, SIGKILL);
  }
}

}  // namespace
}  // namespace trainit::test

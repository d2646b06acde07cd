// Signals in exec mode, as PID 1: forwarding (to the child, or its group with
// -g), the stop escalation, the signal state the child inherits, its process
// group, and the parent-death signal (-p).
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <csignal>

#include "harness.h"

namespace trainit::test {
namespace {

// Every signal exec mode passes on as tini does: all of 1..SIGRTMAX (less
// the two qemu-user cannot send, under emulation: highest_signal()) but
// SIGKILL, SIGSTOP, SIGCHLD, SIGTTIN/SIGTTOU (trainit ignores them, as tini
// does), the kernel's synchronous ones and glibc's two internal real-time
// signals. SIGINT and SIGTERM come last, in that order: by default they stop
// every process (with --forward-only they are forwarded like the rest), and
// SIGTERM ends sigreport.
std::vector<int> forwarded_signals() {
  std::vector<int> signals;
  for (int s = 1; s <= highest_signal(); ++s) {
    if (s >= 32 && s < SIGRTMIN) {
      continue;
    }
    switch (s) {
      case SIGKILL:
      case SIGSTOP:
      case SIGCHLD:
      case SIGTTIN:
      case SIGTTOU:
      case SIGSEGV:
      case SIGBUS:
      case SIGILL:
      case SIGFPE:
      case SIGTRAP:
      case SIGSYS:
      case SIGABRT:
      case SIGINT:
      case SIGTERM:
        continue;
      default:
        signals.push_back(s);
    }
  }
  signals.push_back(SIGINT);
  signals.push_back(SIGTERM);
  return signals;
}

std::string line(const std::string& who, int signo) {
  return who + "signal " + std::to_string(signo);
}

// The only child of `pid`, waiting until there is one.
pid_t only_child(pid_t pid) {
  auto deadline = Clock::now() + kTimeout;
  for (;;) {
    auto children = children_of(pid);
    if (children.size() == 1 || Clock::now() > deadline) {
      return children.size() == 1 ? children[0] : -1;
    }
    std::this_thread::sleep_for(1ms);
  }
}

// Starts trainit ARGS -- sigreport family and waits until both report.
void start_family(Trainit& t) {
  ASSERT_TRUE(t.started()) << "cannot start trainit: " << t.error();
  ASSERT_TRUE(t.wait_line("grandchild ready")) << t.transcript();
  ASSERT_TRUE(t.wait_line("child ready")) << t.transcript();
}

// Sends each of `signals` to trainit and waits until the child reports it.
void forward_each(Trainit& t, const std::vector<int>& signals) {
  for (int signo : signals) {
    ASSERT_EQ(t.signal(signo), 0);
    ASSERT_TRUE(t.wait_line(line("child ", signo)))
        << "signal " << signo << " (" << strsignal(signo) << ") not forwarded" << t.transcript();
  }
}

// Proves that the grandchild got no signal so far: it handles one signal at a
// time, lowest number first, so anything sent to it before this marker
// (SIGRTMAX, or highest_signal(), sent straight to it) is reported before
// the marker.
void expect_grandchild_got_nothing(Trainit& t) {
  pid_t child = only_child(t.pid());
  ASSERT_GT(child, 0);
  pid_t grandchild = only_child(child);
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(::kill(grandchild, highest_signal()), 0);
  ASSERT_TRUE(t.wait_line(line("grandchild ", highest_signal()))) << t.transcript();
  for (const auto& l : t.out_lines()) {
    EXPECT_TRUE(l.rfind("grandchild signal", 0) != 0 || l == line("grandchild ", highest_signal()))
        << "the grandchild got: " << l;
  }
}

TEST(Signals, EveryForwardedSignalReachesTheChildOnly) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"--", helper_path("sigreport"), "family"}});
  ASSERT_NO_FATAL_FAILURE(start_family(t));
  auto signals = forwarded_signals();
  signals.resize(signals.size() - 2);  // not SIGINT, SIGTERM
  signals.pop_back();                  // SIGRTMAX: the marker
  ASSERT_NO_FATAL_FAILURE(forward_each(t, signals));
  ASSERT_NO_FATAL_FAILURE(expect_grandchild_got_nothing(t));
  // A stop, though, reaches every process: the grandchild too.
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_TRUE(t.wait_line(line("child ", SIGTERM))) << t.transcript();
  EXPECT_TRUE(t.wait_line(line("grandchild ", SIGTERM))) << t.transcript();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

TEST(Signals, WithForwardOnlySigtermAndSigintReachTheChildOnlyAsInTini) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"--forward-only", "--", helper_path("sigreport"), "family"}});
  ASSERT_NO_FATAL_FAILURE(start_family(t));
  ASSERT_NO_FATAL_FAILURE(forward_each(t, {SIGUSR1, SIGINT}));
  ASSERT_NO_FATAL_FAILURE(expect_grandchild_got_nothing(t));
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_TRUE(t.wait_line(line("child ", SIGTERM))) << t.transcript();
  // The child is gone; the grandchild is stopped by the drain, not the stop.
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_EQ(t.err(), "") << "no escalation with --forward-only";
}

TEST(Signals, WithDashGEveryForwardedSignalReachesTheWholeProcessGroup) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"-g", "--", helper_path("sigreport"), "family"}});
  ASSERT_NO_FATAL_FAILURE(start_family(t));
  for (int signo : forwarded_signals()) {
    ASSERT_EQ(t.signal(signo), 0);
    ASSERT_TRUE(t.wait_line(line("child ", signo))) << "signal " << signo << t.transcript();
    ASSERT_TRUE(t.wait_line(line("grandchild ", signo))) << "signal " << signo << t.transcript();
  }
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

TEST(Signals, AStopReachesEveryProcessInTheNamespace) {
  TRAINIT_REQUIRE_ROOT();
  // A daemon in a session of its own, beside PROGRAM and its process group.
  const std::string sigreport = helper_path("sigreport");
  Trainit t(
      {.args = {"--grace", "5", "--", "sh", "-c", "setsid " + sigreport + " wait & exec " + sigreport + " family"}});
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_NO_FATAL_FAILURE(start_family(t));
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_LT(t.waited(), 4s) << "someone waited for the SIGKILL";
  for (const char* who : {"", "child ", "grandchild "}) {
    EXPECT_TRUE(t.wait_line(line(who, SIGTERM), 0s)) << "'" << who << "' got no SIGTERM" << t.transcript();
  }
}

TEST(Signals, TiniKillProcessGroupVariableActsLikeDashG) {
  TRAINIT_REQUIRE_ROOT();
  Spec spec{.args = {"--", helper_path("sigreport"), "family"}};
  spec.env.push_back("TINI_KILL_PROCESS_GROUP=1");
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("grandchild ready")) << t.transcript();
  ASSERT_TRUE(t.wait_line("child ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGUSR1), 0);
  EXPECT_TRUE(t.wait_line(line("grandchild ", SIGUSR1))) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

TEST(Signals, ChildIgnoringSigtermIsKilledAfterTheGrace) {
  TRAINIT_REQUIRE_ROOT();
  // sleep inherits the ignored SIGTERM through exec.
  Trainit t({.args = {"--grace", "0.3", "--", "sh", "-c", "trap '' TERM; echo ready; exec sleep 60"}});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  Exit e = t.wait();
  EXPECT_EQ(e, Exit::code(128 + SIGKILL)) << t.transcript();
  // trainit arms the grace period after it takes the signal, so no SIGKILL
  // can come sooner than 0.3 s after we sent it.
  EXPECT_GE(t.waited(), 300ms);
  EXPECT_LT(t.waited(), 300ms + reaction(2s)) << "SIGKILL came long after the grace";
  EXPECT_NE(t.err().find("SIGKILL"), std::string::npos) << "no warning before the SIGKILL" << t.transcript();
}

TEST(Signals, SigintAlsoEscalatesToSigkillAfterTheGrace) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"--grace", "0.2", "--", "sh", "-c", "trap '' INT; echo ready; exec sleep 60"}});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGINT), 0);
  EXPECT_EQ(t.wait(), Exit::code(128 + SIGKILL)) << t.transcript();
  EXPECT_GE(t.waited(), 200ms);
}

TEST(Signals, ChildThatExitsOnSigtermGives143Promptly) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"--grace", "5", "--", "sh", "-c", "echo ready; exec sleep 60"}});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(128 + SIGTERM)) << t.transcript();
  EXPECT_LT(t.waited(), reaction(1s));
  EXPECT_EQ(t.err(), "") << "no SIGKILL warning for a child that obeyed";
}

TEST(Signals, ChildThatHandlesSigtermKeepsItsOwnExitCode) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t(
      {.args = {"--grace", "5", "--", "sh", "-c", "trap 'exit 7' TERM; echo ready; while :; do sleep 0.01; done"}});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(7)) << t.transcript();
  EXPECT_LT(t.waited(), reaction(2s));
}

uint64_t bits(std::initializer_list<int> signals) {
  uint64_t mask = 0;
  for (int s : signals) {
    mask |= uint64_t{1} << (s - 1);
  }
  return mask;
}

uint64_t hex_field(const std::string& text, const char* key) {
  return std::stoull(field(text, key), nullptr, 16);
}

TEST(Signals, ChildGetsTheMaskAndIgnoredSignalsTrainitsParentLeft) {
  TRAINIT_REQUIRE_ROOT();
  Outcome r =
      run({.args = {"--", helper_path("sigreport")}, .blocked = {SIGUSR1, SIGRTMIN + 3}, .ignored = {SIGUSR2, SIGHUP}});
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(hex_field(r.out, "blocked"), bits({SIGUSR1, SIGRTMIN + 3})) << r.out;
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kIgnoredNotInherited);
  EXPECT_EQ(hex_field(r.out, "ignored"), bits({SIGUSR2, SIGHUP})) << r.out;
}

TEST(Signals, ChildGetsEverySignalBlockedWhenTrainitsParentBlockedThemAll) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kBlockedNotInherited);
  std::vector<int> all;
  uint64_t expected = 0;
  for (int s = 1; s <= SIGRTMAX; ++s) {
    if (s < 32 || s >= SIGRTMIN) {
      all.push_back(s);
      if (s != SIGKILL && s != SIGSTOP) {
        expected |= uint64_t{1} << (s - 1);
      }
    }
  }
  Outcome r = run({.args = {"--", helper_path("sigreport")}, .blocked = all});
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(hex_field(r.out, "blocked"), expected) << r.out;
  // trainit itself still takes and forwards signals: the child unblocks.
  Trainit t({.args = {"--", helper_path("sigreport"), "wait"}, .blocked = all});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGUSR2), 0);
  EXPECT_TRUE(t.wait_line(line("", SIGUSR2))) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

TEST(Signals, ChildGetsTheJobControlSignalsAsTrainitsParentLeftThem) {
  TRAINIT_REQUIRE_ROOT();
  // trainit ignores SIGTTIN/SIGTTOU itself; the child gets its parent's back.
  Outcome r = run({.args = {"--", helper_path("sigreport")}, .blocked = {SIGTTIN}, .ignored = {SIGTTOU}});
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(hex_field(r.out, "blocked"), bits({SIGTTIN})) << r.out;
  EXPECT_EQ(hex_field(r.out, "ignored"), bits({SIGTTOU})) << r.out;
}

TEST(Signals, ChildGetsNoMaskAndNoIgnoredSignalsWhenTrainitsParentLeftNone) {
  TRAINIT_REQUIRE_ROOT();
  Outcome r = run({.args = {"--", helper_path("sigreport")}});
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "blocked"), "0000000000000000") << r.out;
  EXPECT_EQ(field(r.out, "ignored"), "0000000000000000") << "trainit's own SIGTTIN/SIGTTOU leaked" << r.out;
}

TEST(Signals, TrainitWorksWhenItsParentLeftSigchldIgnored) {
  TRAINIT_REQUIRE_ROOT();
  // With SIGCHLD ignored the kernel reaps children by itself: an init that
  // keeps that disposition never learns its child's exit status and waits
  // forever (tini and catatonit do too). A launcher can leave it so (Python's
  // signal.signal(SIGCHLD, SIG_IGN) survives exec). trainit must take
  // SIGCHLD back to SIG_DFL for itself, and may give PROGRAM the parent's.
  Outcome r = run({.args = {"--", helper_path("exitwith"), "3"}, .ignored = {SIGCHLD}}, 3s);
  EXPECT_EQ(r.exit, Exit::code(3)) << r.transcript;
  r = run({.args = {"-w", "--", helper_path("orphans"), "one"}, .ignored = {SIGCHLD}}, 3s);
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
}

TEST(Signals, ChildRunsInItsOwnProcessGroup) {
  TRAINIT_REQUIRE_ROOT();
  Outcome r = run({.args = {"--", helper_path("sigreport")}});
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "ppid"), "1") << "trainit is not PID 1?" << r.out;
  EXPECT_EQ(field(r.out, "pgid"), field(r.out, "pid")) << r.out;
}

// Makes the test process a child subreaper for the scope: trainit, orphaned
// by its intermediate parent, comes back to us to be waited for.
class Subreaper {
 public:
  Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
  ~Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

TEST(Signals, ParentDeathSignalKillsTrainitWhenItsParentDies) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  Subreaper subreaper;
  Trainit t({.args = {"-p", "SIGKILL", "--", helper_path("sigreport"), "wait"}, .intermediate_parent = true});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  t.release_parent();
  EXPECT_EQ(t.wait(), Exit::signal(SIGKILL)) << t.transcript();
}

TEST(Signals, ParentDeathSigtermIsForwardedToTheChild) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  Subreaper subreaper;
  Trainit t({.args = {"-p", "TERM", "--", helper_path("sigreport"), "wait"}, .intermediate_parent = true});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  t.release_parent();
  EXPECT_TRUE(t.wait_line(line("", SIGTERM))) << t.transcript();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

TEST(Signals, WithoutParentDeathSignalTrainitOutlivesItsParent) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  Subreaper subreaper;
  Trainit t({.args = {"--", helper_path("sigreport"), "wait"}, .intermediate_parent = true});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  t.release_parent();  // returns once the parent is reaped: any death signal is sent by then
  ASSERT_EQ(t.signal(SIGUSR1), 0);
  EXPECT_TRUE(t.wait_line(line("", SIGUSR1))) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

}  // namespace
}  // namespace trainit::test

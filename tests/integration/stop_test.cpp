// The stop escalation against processes that do not want to stop: SIGTERM
// ignored everywhere, a tree that keeps changing while it is swept, processes
// paused with SIGSTOP. Whatever they do, trainit exits right after the grace.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "harness.h"

namespace trainit::test {
namespace {

constexpr auto kGrace = 300ms;

// stubborn: 200 idle processes and a daemon that keeps replacing its child,
// all ignoring SIGTERM. SIGTERM to trainit; it must exit with SIGKILL's 137
// soon after the grace, `runs` times in a row.
void stubborn_tree_is_gone_right_after_the_grace(Layout layout, int runs) {
  for (int run = 0; run < runs; ++run) {
    Trainit t({.args = {"--grace", "0.3", "--", helper_path("stubborn"), "200"}, .layout = layout});
    TRAINIT_ASSERT_STARTED(t);
    ASSERT_TRUE(t.wait_line("ready")) << "run " << run << t.transcript();
    const auto sent = Clock::now();
    ASSERT_EQ(t.signal(SIGTERM), 0);
    const Exit e = t.wait(5s);
    const auto took = Clock::now() - sent;
    // PROGRAM's SIGKILL (under the stub init, the stub passes it on).
    ASSERT_EQ(e, Exit::code(137)) << "run " << run << ": trainit did not end" << t.transcript();
    EXPECT_GE(took, kGrace - 50ms) << "run " << run;
    EXPECT_LT(took, kGrace + reaction(1s))
        << "run " << run << ": " << std::chrono::duration<double, std::milli>(took).count() << " ms after SIGTERM";
  }
}

TEST(Stop, TreeThatForksWhileSweptIsGoneRightAfterTheGraceAsPid1TenRuns) {
  TRAINIT_REQUIRE_ROOT();
  stubborn_tree_is_gone_right_after_the_grace(Layout::kPid1, 10);
}

TEST(Stop, TreeThatForksWhileSweptIsGoneRightAfterTheGraceAsSubreaperTenRuns) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  stubborn_tree_is_gone_right_after_the_grace(Layout::kUnderInit, 10);
}

// A child paused with SIGSTOP (docker pause, a debugger) sees the SIGTERM at
// once: trainit follows it with SIGCONT, and the child's own handler exits.
TEST(Stop, StoppedChildSeesSigtermAndExitsWithinTheGrace) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"--grace", "5", "--", "/bin/sh", "-c",
                      "trap 'echo got-term; exit 3' TERM; echo ready; kill -STOP $$; while :; do sleep 1; done"}});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  // Stopped: its state in /proc says T.
  const auto deadline = Clock::now() + kTimeout;
  for (;;) {
    auto kids = children_of(t.pid());
    char state = 0;
    if (kids.size() == 1) {
      if (FILE* f = std::fopen(("/proc/" + std::to_string(kids[0]) + "/stat").c_str(), "r")) {
        (void)std::fscanf(f, "%*d %*s %c", &state);
        std::fclose(f);
      }
    }
    if (state == 'T') {
      break;
    }
    ASSERT_LT(Clock::now(), deadline) << "the child did not stop" << t.transcript();
    std::this_thread::sleep_for(1ms);
  }
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(4s), Exit::code(3)) << "the stopped child did not handle SIGTERM" << t.transcript();
  EXPECT_LT(Clock::now() - sent, reaction(2s));
  EXPECT_TRUE(t.wait_line("got-term", 0s)) << t.transcript();
}

// As PID 1 trainit stops every process of its namespace, the ones that
// entered it from outside too (`docker exec`, `nsenter`: their parents are
// not trainit's descendants): they get the SIGTERM, not just the SIGKILL
// of trainit's exit.
TEST(Stop, AProcessThatEnteredTheNamespaceFromOutsideGetsTheSigtermToo) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string got = dir / "got-term";
  // PROGRAM outlives the SIGTERM by 0.5 s: the outsider is not waited for,
  // and trainit's exit would otherwise SIGKILL it before its trap runs
  // (after its own sleep ends).
  Trainit t({.args = {"--grace", "5", "--", "/bin/sh", "-c",
                      "trap 'sleep 0.5; exit 0' TERM; echo ready; while :; do sleep 0.05; done"}});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  const std::string ns = "/proc/" + std::to_string(t.pid()) + "/ns/pid";
  const std::string script =
      "trap 'echo term > " + got + "; exit 0' TERM; echo > " + (dir / "in") + "; while :; do sleep 0.05; done";
  const pid_t outsider = ::fork();
  ASSERT_GE(outsider, 0);
  if (outsider == 0) {
    ::execl("/usr/bin/nsenter", "nsenter", ("--pid=" + ns).c_str(), "--", "/bin/sh", "-c", script.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = Clock::now() + kTimeout;
  while (!std::filesystem::exists(dir / "in") && Clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(std::filesystem::exists(dir / "in")) << "nsenter did not run its shell";
  ASSERT_EQ(t.signal(SIGTERM), 0);
  (void)t.wait(10s);
  int status = 0;
  ASSERT_EQ(::waitpid(outsider, &status, 0), outsider);
  EXPECT_TRUE(std::filesystem::exists(got)) << "the outsider got no SIGTERM" << t.transcript();
}

}  // namespace
}  // namespace trainit::test

// The supervisor protocol, end to end: trainit as PID 1 with NOTIFY_SOCKET
// pointing at a real unix datagram listener in this test (a path, and an
// abstract "@name"), and, with --ready notify, a child that speaks to trainit
// through libsystemd's own sd_notify().
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "lifecycle_support.h"
#include "notify_listener.h"

namespace trainit::test {
namespace {

using lifecycle::proc_helper;

std::string unique_abstract(const char* what) {
  static int counter = 0;
  return "@trainit-it-" + std::string(what) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// `trainit ARGS -- lifecycle DIR env` with NOTIFY_SOCKET (and `extra`) set.
Spec env_job(const NotifyListener& l, const TempDir& dir, std::vector<std::string> extra = {},
             std::vector<std::string> args = {}) {
  Spec spec;
  spec.args = std::move(args);
  spec.args.insert(spec.args.end(), {"--", proc_helper(), dir.path(), "env"});
  spec.env.push_back(l.variable());
  spec.env.push_back("APP_TEST_KEPT=yes");
  spec.env.insert(spec.env.end(), extra.begin(), extra.end());
  return spec;
}

// READY=1 once PROGRAM runs, its STATUS, STOPPING=1 on SIGTERM, the final
// STATUS; PROGRAM's environment without the supervisor's variables.
void expect_ready_status_stopping(const std::string& address) {
  TempDir dir;
  NotifyListener l(address);
  ASSERT_EQ(l.error(), "") << address;
  Trainit t(env_job(l, dir, {"WATCHDOG_USEC=60000000", "WATCHDOG_PID=1"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("env end")) << t.transcript();
  for (const auto& line : t.out_lines()) {
    EXPECT_FALSE(line.starts_with("env NOTIFY_SOCKET=")) << line;
    EXPECT_FALSE(line.starts_with("env WATCHDOG_USEC=")) << line;
    EXPECT_FALSE(line.starts_with("env WATCHDOG_PID=")) << line;
  }
  EXPECT_TRUE(t.wait_line("env APP_TEST_KEPT=yes", 0s)) << "the rest of the environment is kept";

  auto ready = l.wait_for("READY=1");
  ASSERT_TRUE(ready) << l.dump() << t.transcript();
  bool has_running = false;
  for (const auto& m : l.messages()) {
    has_running = has_running || m.text.starts_with("STATUS=running '" + proc_helper() + "' (pid ");
  }
  EXPECT_TRUE(has_running) << l.dump();

  const size_t before = l.messages().size();
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  auto stopping = l.wait_for("STOPPING=1", before);
  ASSERT_TRUE(stopping) << "no STOPPING=1 after SIGTERM" << l.dump();
  EXPECT_LT(l.at(*stopping).at - sent, reaction(200ms));
  EXPECT_EQ(t.wait(), Exit::code(128 + SIGTERM)) << t.transcript();
  EXPECT_TRUE(l.wait_for("STATUS=exited with 143", *stopping, 1s)) << l.dump();
  // READY=1 exactly once, and before the stop.
  size_t readies = 0;
  for (const auto& m : l.messages()) {
    readies += m.text == "READY=1" ? 1 : 0;
  }
  EXPECT_EQ(readies, 1u) << l.dump();
  EXPECT_LT(*ready, *stopping);
}

TEST(Notify, SupervisorOnAPathSocketGetsReadyStatusAndStopping) {
  TRAINIT_REQUIRE_ROOT();
  TempDir socket_dir;
  expect_ready_status_stopping(socket_dir / "notify");
}

TEST(Notify, SupervisorOnAnAbstractSocketGetsReadyStatusAndStopping) {
  TRAINIT_REQUIRE_ROOT();
  expect_ready_status_stopping(unique_abstract("abstract"));
}

TEST(Notify, WatchdogPingsEveryHalfOfWatchdogUsec) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  NotifyListener l(unique_abstract("watchdog"));
  ASSERT_EQ(l.error(), "");
  Trainit t(env_job(l, dir, {"WATCHDOG_USEC=200000"}));  // 0.2 s: a ping every 0.1 s
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("env end")) << t.transcript();
  ASSERT_TRUE(l.wait_count("WATCHDOG=1", 7)) << l.dump();  // 0.6 s of pings
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  std::vector<Clock::time_point> pings;
  for (const auto& m : l.messages()) {
    if (m.text == "WATCHDOG=1") {
      pings.push_back(m.at);
    }
  }
  ASSERT_GE(pings.size(), 7u) << l.dump();
  for (size_t i = 1; i < pings.size(); ++i) {
    EXPECT_GE(pings[i] - pings[i - 1], 80ms) << "ping " << i << l.dump();
    EXPECT_LT(pings[i] - pings[i - 1], 180ms) << "ping " << i << l.dump();
  }
  auto total = pings.back() - pings.front();
  EXPECT_NEAR(ms(total) / static_cast<double>(pings.size() - 1), 100.0, 15.0) << "mean interval";
}

TEST(Notify, NoWatchdogWhenWatchdogPidIsAnotherProcess) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  NotifyListener l(unique_abstract("watchdog-pid"));
  ASSERT_EQ(l.error(), "");
  // trainit is PID 1 here: a WATCHDOG_PID of 2 names someone else.
  Trainit t(env_job(l, dir, {"WATCHDOG_USEC=100000", "WATCHDOG_PID=2"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("env end")) << t.transcript();
  std::this_thread::sleep_for(200ms);  // the behaviour under test: four watchdog periods without a ping
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  // trainit's last word: once it is here, every earlier message is too.
  ASSERT_TRUE(l.wait_for("STATUS=exited with 0")) << l.dump();
  EXPECT_TRUE(l.wait_for("READY=1", 0, 0s)) << l.dump();
  EXPECT_FALSE(l.wait_for("WATCHDOG=1", 0, 0s)) << l.dump();
  for (const auto& line : t.out_lines()) {
    EXPECT_FALSE(line.starts_with("env WATCHDOG_")) << line;
  }
}

TEST(Notify, StatusFollowsRestartsAndTheDrain) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  NotifyListener l(unique_abstract("restart"));
  ASSERT_EQ(l.error(), "");
  Spec spec;
  spec.args = {"--restart", "on-failure", "--max-restarts", "1", "--",   proc_helper(), dir.path(),
               "daemon",    "d",          "exit",           "0", "runs", dir / "runs",  "5"};
  spec.env.push_back(l.variable());
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(5)) << r.transcript;
  auto restarting = l.wait_for("STATUS=restarting '" + proc_helper() + "' in 0.1 s (restart 1)", 0, 1s);
  EXPECT_TRUE(restarting) << l.dump();
  EXPECT_TRUE(l.wait_for("STATUS=draining: stopping the remaining processes", 0, 0s)) << l.dump();
  EXPECT_TRUE(l.wait_for("STATUS=exited with 5", 0, 1s)) << l.dump();
}

// --- --ready notify: the child's own sd_notify ----------------------------------

TEST(Notify, ReadyNotifySendsReadyOnlyWhenTheChildSaysSoThroughSdNotify) {
  TRAINIT_REQUIRE_ROOT();
  const std::string address = unique_abstract("ready-notify");
  NotifyListener l(address);
  ASSERT_EQ(l.error(), "");
  Spec spec{.args = {"--ready", "notify", "--", helper_path("sd_notifier")}};
  spec.env.push_back(l.variable());
  spec.env.push_back("WATCHDOG_USEC=60000000");
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  auto socket = t.wait_line_starting("notify_socket ");
  ASSERT_TRUE(socket) << t.transcript();
  EXPECT_TRUE(socket->starts_with("notify_socket @trainit-notify-")) << *socket;
  EXPECT_EQ(socket->find(address), std::string::npos) << "the child got our socket";
  ASSERT_TRUE(t.wait_line_starting("warming ")) << t.transcript();
  EXPECT_TRUE(t.wait_line("warming 1", 0s)) << "sd_notify failed" << t.transcript();

  // The child's STATUS is passed on at once; READY=1 is not sent yet.
  auto warming = l.wait_for("STATUS=warming up");
  ASSERT_TRUE(warming) << l.dump() << t.transcript();
  std::this_thread::sleep_for(100ms);  // the behaviour under test: no READY=1 meanwhile
  EXPECT_FALSE(l.wait_for("READY=1", 0, 0s)) << "READY=1 before the child was ready" << l.dump();

  const size_t before = l.messages().size();
  ASSERT_TRUE(t.write_stdin("go\n"));
  ASSERT_TRUE(t.wait_line("notified 1")) << t.transcript();
  auto ready = l.wait_for("READY=1", before);
  ASSERT_TRUE(ready) << l.dump() << t.transcript();
  EXPECT_TRUE(l.wait_for("STATUS=serving", before)) << l.dump();
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

// A PROGRAM that floods its STATUS costs the supervisor (and trainit's log)
// one message per 100 ms at most, and its latest status still arrives.
TEST(Notify, AFloodOfStatusFromTheChildIsPassedOnAtMostTenTimesASecondEndingWithTheLatest) {
  TRAINIT_REQUIRE_ROOT();
  NotifyListener l(unique_abstract("status-flood"));
  ASSERT_EQ(l.error(), "");
  Spec spec{.args = {"--ready", "notify", "--", helper_path("sd_notifier"), "flood", "3000"}};
  spec.env.push_back(l.variable());
  const auto began = Clock::now();
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("flooded ")) << t.transcript();
  EXPECT_TRUE(t.wait_line("flooded 1", 0s)) << "sd_notify failed" << t.transcript();
  const auto sent = Clock::now();
  ASSERT_TRUE(l.wait_for("STATUS=done", 0, 4s)) << "the latest status never arrived" << l.dump();
  EXPECT_LT(Clock::now() - sent, 2s);
  const auto took = Clock::now() - began;
  size_t steps = 0;
  for (const auto& m : l.messages()) {
    steps += m.text.starts_with("STATUS=step ") ? 1 : 0;
  }
  // One at once, then at most one a 100 ms.
  EXPECT_LE(steps, 2U + static_cast<size_t>(took / 100ms)) << l.dump();
  size_t logged = 0;
  for (size_t at = t.err().find("reports status"); at != std::string::npos;
       at = t.err().find("reports status", at + 1)) {
    ++logged;
  }
  EXPECT_LE(logged, steps + 1) << "the log took the flood" << t.transcript();
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

// NotifyAccess=main: the socket's abstract name reaches every process in the
// network namespace, but only PROGRAM itself is heard. A forked child's
// READY=1 (libsystemd's sd_notify, from the child's own pid) is dropped.
TEST(Notify, ReadyNotifyHearsOnlyTheMainChildNotItsForkedChild) {
  TRAINIT_REQUIRE_ROOT();
  NotifyListener l(unique_abstract("from-child"));
  ASSERT_EQ(l.error(), "");
  Spec spec{.args = {"--ready", "notify", "--", helper_path("sd_notifier"), "from-child"}};
  spec.env.push_back(l.variable());
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("child sent 1")) << "the forked child's sd_notify failed" << t.transcript();
  ASSERT_TRUE(t.wait_line("warming 1")) << t.transcript();
  // The forked child's datagram was queued before PROGRAM's: had trainit
  // taken it, its READY=1 and STATUS would reach us before "warming up".
  auto warming = l.wait_for("STATUS=warming up");
  ASSERT_TRUE(warming) << l.dump() << t.transcript();
  EXPECT_FALSE(l.wait_for("STATUS=from a forked child", 0, 0s)) << l.dump();
  EXPECT_FALSE(l.wait_for("READY=1", 0, 0s)) << "READY=1 from PROGRAM's child" << l.dump();

  const size_t before = l.messages().size();
  ASSERT_TRUE(t.write_stdin("go\n"));
  ASSERT_TRUE(t.wait_line("notified 1")) << t.transcript();
  EXPECT_TRUE(l.wait_for("READY=1", before)) << l.dump() << t.transcript();
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_FALSE(l.wait_for("STATUS=from a forked child", 0, 0s)) << l.dump();
}

// Each restart of PROGRAM has a new pid, and it is the new one that is heard.
TEST(Notify, ReadyNotifyHearsEachRestartedRunOfTheChild) {
  TRAINIT_REQUIRE_ROOT();
  NotifyListener l(unique_abstract("restarts"));
  ASSERT_EQ(l.error(), "");
  Spec spec{.args = {"--ready", "notify", "--restart", "on-failure", "--max-restarts", "1", "--",
                     helper_path("sd_notifier"), "exit", "3"}};
  spec.env.push_back(l.variable());
  Outcome r = run(spec);
  ASSERT_EQ(r.exit, Exit::code(3)) << r.transcript;
  std::vector<std::string> pids;
  for (const auto& line : lines_of(r.out)) {
    char pid[32];
    int rc = 0;
    if (std::sscanf(line.c_str(), "pid %31s sent %d", pid, &rc) == 2) {
      EXPECT_EQ(rc, 1) << line;
      pids.emplace_back(pid);
    }
  }
  ASSERT_EQ(pids.size(), 2u) << r.transcript;
  EXPECT_TRUE(l.wait_for("STATUS=pid " + pids[0])) << "the first run was not heard" << l.dump();
  EXPECT_TRUE(l.wait_for("STATUS=pid " + pids[1])) << "the restarted run was not heard" << l.dump();
}

// Containers that share a network namespace (a Kubernetes pod, --network=host)
// share the abstract socket namespace too, and each trainit there is PID 1:
// the socket served to one child must not stop another trainit from starting.
TEST(Notify, TwoTrainitsAsPid1InOneNetworkNamespaceBothServeReadyNotify) {
  TRAINIT_REQUIRE_ROOT();
  Spec spec{.args = {"--ready", "notify", "--", helper_path("sd_notifier")}};
  Trainit first(spec);
  TRAINIT_ASSERT_STARTED(first);
  ASSERT_TRUE(first.wait_line_starting("warming ")) << first.transcript();
  Trainit second(spec);
  TRAINIT_ASSERT_STARTED(second);
  EXPECT_TRUE(second.wait_line_starting("warming ")) << "the second trainit could not start" << second.transcript();
  second.close_stdin();
  EXPECT_EQ(second.wait(), Exit::code(0)) << second.transcript();
  first.close_stdin();
  EXPECT_EQ(first.wait(), Exit::code(0)) << first.transcript();
}

}  // namespace
}  // namespace trainit::test

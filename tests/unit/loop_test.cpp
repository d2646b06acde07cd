// The loop, stepped one run_once() at a time with real pipes, signals and
// children; the kernel features a test cannot switch off (pidfd on 4.19,
// EINTR) go through the syscall seam. Every test runs twice: with a watched
// (idle) pipe, where the loop sleeps in epoll_wait(), and without, where it
// sleeps in sigtimedwait().
#include "loop/loop.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "base/fd.h"
#include "base/sys.h"
#include "emulation.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;

enum class Wait { kEpoll, kSigtimedwait };

class LoopTest : public ::testing::TestWithParam<Wait> {
 protected:
  void SetUp() override {
    ASSERT_EQ(loop_.init(), 0);
    if (GetParam() == Wait::kEpoll) {
      int fds[2];
      ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
      idle_read_.reset(fds[0]);
      idle_write_.reset(fds[1]);
      idle_ = loop_.add_io(
          idle_read_.get(), EPOLLIN, [](uint32_t) { return -EIO; }, "idle pipe");
    }
  }
  void TearDown() override {
    EXPECT_EQ(loop_.set_kernel_reaps(false), 0);  // SIGCHLD's disposition is the process's
    sys::reset_table();
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  // A source for `signo` that stores each signal number it takes in `got`.
  SourceHandle record_signal(int signo, int& got) {
    return loop_.add_signal(
        signo,
        [&got](const signalfd_siginfo& i) {
          got = static_cast<int>(i.ssi_signo);
          return 0;
        },
        "record");
  }

  // Steps until `done` or a 5 s limit; returns whether `done` came true.
  template <typename Pred>
  bool step_until(Pred done) {
    auto limit = Clock::now() + 5s;
    while (!done() && Clock::now() < limit) {
      EXPECT_GE(loop_.run_once(100), 0);
    }
    return done();
  }

  static pid_t fork_exit(int code) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::_exit(code);
    }
    return pid;
  }

  // A child that exits with `code` once `go`'s write end is closed.
  static pid_t fork_exit_when_closed(const int go[2], int code) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      char byte;
      while (::read(go[0], &byte, 1) != 0) {
      }
      ::_exit(code);
    }
    return pid;
  }

  // Lets the kernel reap; false (the test skips) where it cannot keep the
  // registered children's status.
  bool kernel_reaps() {
    int r = loop_.set_kernel_reaps(true);
    EXPECT_TRUE(r == 0 || r == -EOPNOTSUPP) << r;
    return r == 0;
  }

  // A child status the child source was handed.
  static Loop::ChildFn record_status(siginfo_t& status) {
    return [&status](const siginfo_t& s) {
      status = s;
      return 0;
    };
  }

  Loop loop_;
  Fd idle_read_, idle_write_;  // nothing is ever written: it only keeps epoll in use
  SourceHandle idle_;
};

TEST_P(LoopTest, IoSourceSeesDataWrittenToAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  Fd r(fds[0]), w(fds[1]);
  std::string got;
  auto io = loop_.add_io(
      r.get(), EPOLLIN,
      [&](uint32_t) {
        char buf[16];
        ssize_t n = ::read(r.get(), buf, sizeof(buf));
        got.append(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
        return 0;
      },
      "pipe");
  EXPECT_EQ(loop_.run_once(0), 0);  // nothing written yet: nothing dispatched
  ASSERT_EQ(::write(w.get(), "abc", 3), 3);
  EXPECT_EQ(loop_.run_once(1000), 1);
  EXPECT_EQ(got, "abc");
}

TEST_P(LoopTest, DroppingTheHandleUnregistersTheSource) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  int calls = 0;
  auto io = loop_.add_io(
      r.get(), EPOLLIN, [&](uint32_t) { return ++calls; }, "pipe");
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  io.reset();
  EXPECT_EQ(loop_.run_once(0), 0);
  EXPECT_EQ(calls, 0);
}

TEST_P(LoopTest, AHandlerMayDropAnotherSourceReadyInTheSameIteration) {
  int a[2], b[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  Fd ar(a[0]), aw(a[1]), br(b[0]), bw(b[1]);
  SourceHandle first, second;
  int calls = 0;
  first = loop_.add_io(
      ar.get(), EPOLLIN,
      [&](uint32_t) {
        ++calls;
        second.reset();
        first.reset();
        return 0;
      },
      "a");
  second = loop_.add_io(
      br.get(), EPOLLIN,
      [&](uint32_t) {
        ++calls;
        first.reset();
        second.reset();
        return 0;
      },
      "b");
  ASSERT_EQ(::write(aw.get(), "x", 1), 1);
  ASSERT_EQ(::write(bw.get(), "x", 1), 1);
  loop_.run_once(1000);
  EXPECT_EQ(calls, 1);  // whichever ran first dropped the other
}

TEST_P(LoopTest, AFailingHandlerDisablesItsSourceNotTheLoop) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  int failing_calls = 0;
  int timer_calls = 0;
  auto bad = loop_.add_io(
      r.get(), EPOLLIN,
      [&](uint32_t) {
        ++failing_calls;
        return -EIO;
      },
      "bad reader");
  auto thrower = loop_.add_defer([]() -> int { throw std::runtime_error("boom"); }, "thrower");
  auto timer = loop_.add_timer(
      Clock::now(), [&] { return ++timer_calls; }, "timer");
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  ASSERT_TRUE(step_until([&] { return timer_calls == 1 && failing_calls == 1; }));
  EXPECT_FALSE(bad.enabled());
  EXPECT_FALSE(thrower.enabled());
  loop_.run_once(0);
  EXPECT_EQ(failing_calls, 1);  // still readable, but disabled
}

TEST_P(LoopTest, TimersFireInDeadlineOrderAndCanBeRearmed) {
  std::vector<int> order;
  auto now = Clock::now();
  auto late = loop_.add_timer(
      now + 60ms,
      [&] {
        order.push_back(2);
        return 0;
      },
      "late");
  auto early = loop_.add_timer(
      now + 20ms,
      [&] {
        order.push_back(1);
        return 0;
      },
      "early");
  ASSERT_TRUE(step_until([&] { return order.size() == 2; }));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_GE(Clock::now() - now, 60ms);
  early.set_deadline(Clock::now() + 10ms);
  ASSERT_TRUE(step_until([&] { return order.size() == 3; }));
  EXPECT_EQ(order.back(), 1);
}

TEST_P(LoopTest, TimerWaitsInTheKernelNotInAPoll) {
  bool fired = false;
  auto start = Clock::now();
  auto t = loop_.add_timer(
      start + 50ms,
      [&] {
        fired = true;
        return 0;
      },
      "timer");
  int dispatched = loop_.run_once(-1);  // must block until the deadline, then dispatch
  EXPECT_EQ(dispatched, 1);
  EXPECT_TRUE(fired);
  EXPECT_GE(Clock::now() - start, 50ms);
}

TEST_P(LoopTest, SignalSourceReceivesASignalSentToTheProcess) {
  int got = 0;
  auto s = record_signal(SIGUSR1, got);
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  ASSERT_TRUE(step_until([&] { return got != 0; }));
  EXPECT_EQ(got, SIGUSR1);
}

TEST_P(LoopTest, ChildSourceGetsItsExitStatusAndOthersCountAsOrphans) {
  pid_t mine = fork_exit(7);
  pid_t other = fork_exit(3);
  siginfo_t status{};
  int orphans = 0;
  auto child = loop_.add_child(
      mine,
      [&](const siginfo_t& s) {
        status = s;
        return 0;
      },
      "child");
  loop_.set_orphan_handler([&](const siginfo_t& s) { orphans += s.si_pid == other ? 1 : 100; });
  ASSERT_TRUE(step_until([&] { return status.si_pid != 0 && orphans != 0; }));
  EXPECT_EQ(status.si_pid, mine);
  EXPECT_EQ(status.si_code, CLD_EXITED);
  EXPECT_EQ(status.si_status, 7);
  EXPECT_EQ(orphans, 1);
  EXPECT_EQ(loop_.orphans_reaped(), 1U);
  EXPECT_EQ(child.send_signal(SIGTERM), -ESRCH);  // reaped: never signal a recycled pid
}

TEST_P(LoopTest, ReaperDrainsEveryZombieOnOneSigchld) {
  constexpr int kChildren = 200;
  for (int i = 0; i < kChildren; ++i) {
    ASSERT_GT(fork_exit(0), 0);
  }
  ASSERT_TRUE(step_until([&] { return loop_.orphans_reaped() == kChildren; }));
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_ALL, 0, &info, WEXITED | WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_P(LoopTest, HasChildrenSeesRunningChildrenAndZombiesWithoutReapingThem) {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  EXPECT_FALSE(loop_.has_children());
  pid_t pid = fork_exit(0);
  EXPECT_TRUE(loop_.has_children());
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // now a zombie
  EXPECT_TRUE(loop_.has_children());
  EXPECT_EQ(loop_.reap(), 1);
  EXPECT_FALSE(loop_.has_children());
}

TEST_P(LoopTest, ChildIsSignalledThroughItsPidfd) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  siginfo_t status{};
  auto child = loop_.add_child(
      pid,
      [&](const siginfo_t& s) {
        status = s;
        return 0;
      },
      "child");
  EXPECT_TRUE(loop_.has_pidfd());
  ASSERT_EQ(child.send_signal(SIGKILL), 0);
  ASSERT_TRUE(step_until([&] { return status.si_pid == pid; }));
  EXPECT_EQ(status.si_code, CLD_KILLED);
  EXPECT_EQ(status.si_status, SIGKILL);
}

TEST_P(LoopTest, WithoutPidfdsChildrenAreSignalledByPid) {
  sys::table().pidfd_open = [](pid_t, unsigned) { return -ENOSYS; };  // a 4.19 kernel
  static int pidfd_signals = 0;
  sys::table().pidfd_send_signal = [](int, int, siginfo_t*, unsigned) { return ++pidfd_signals, -ENOSYS; };
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  siginfo_t status{};
  auto child = loop_.add_child(
      pid,
      [&](const siginfo_t& s) {
        status = s;
        return 0;
      },
      "child");
  EXPECT_FALSE(loop_.has_pidfd());
  ASSERT_EQ(child.send_signal(SIGTERM), 0);
  ASSERT_TRUE(step_until([&] { return status.si_pid == pid; }));
  EXPECT_EQ(status.si_code, CLD_KILLED);
  EXPECT_EQ(status.si_status, SIGTERM);
  EXPECT_EQ(pidfd_signals, 0);
}

// A signal for a child's process group reaches the child before it has
// made its group (its setpgid still to come): where the parent runs on
// before the child's exec (qemu-user runs vfork as fork), a stop sent in
// that moment found no such group, and the rank it was for ran on.
TEST_P(LoopTest, ASignalForAGroupNotYetMadeReachesTheChildItself) {
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &term, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    ::close(go[1]);
    char byte;
    while (::read(go[0], &byte, 1) != 0) {
    }
    ::setpgid(0, 0);
    ::sigprocmask(SIG_UNBLOCK, &term, nullptr);  // a SIGTERM pending ends it here
    ::_exit(0);
  }
  ::close(go[0]);
  siginfo_t status{};
  auto child = loop_.add_child(pid, record_status(status), "child");
  EXPECT_EQ(child.signal_group(SIGTERM), 0);
  ::close(go[1]);
  ASSERT_TRUE(step_until([&] { return status.si_pid == pid; }));
  EXPECT_EQ(status.si_code, CLD_KILLED);
  EXPECT_EQ(status.si_status, SIGTERM);
}

TEST_P(LoopTest, InterruptedWaitsAreRetriedNotFatal) {
  static int epoll_eintr = 0;
  static int sigwait_eintr = 0;
  static int waitid_eintr = 0;
  (GetParam() == Wait::kEpoll ? epoll_eintr : sigwait_eintr) = 1;
  waitid_eintr = 3;
  sys::table().waitid = [](idtype_t t, id_t id, siginfo_t* info, int options) {
    if (waitid_eintr > 0) {
      --waitid_eintr;
      return -EINTR;
    }
    return ::waitid(t, id, info, options) < 0 ? -errno : 0;
  };
  sys::table().epoll_wait = [](int fd, struct epoll_event* ev, int max, int timeout) {
    if (epoll_eintr > 0) {
      --epoll_eintr;
      return -EINTR;
    }
    int r = ::epoll_wait(fd, ev, max, timeout);
    return r < 0 ? -errno : r;
  };
  sys::table().sigtimedwait = [](const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
    if (sigwait_eintr > 0) {
      --sigwait_eintr;
      return -EINTR;
    }
    int r = ::sigtimedwait(set, info, timeout);
    return r < 0 ? -errno : r;
  };
  pid_t pid = fork_exit(5);
  int code = -1;
  auto child = loop_.add_child(
      pid,
      [&](const siginfo_t& s) {
        code = s.si_status;
        return 0;
      },
      "child");
  EXPECT_EQ(loop_.run_once(0), 0);  // EINTR from the wait: an empty step, not an error
  EXPECT_EQ(epoll_eintr + sigwait_eintr, 0);
  ASSERT_TRUE(step_until([&] { return code == 5; }));
  EXPECT_EQ(waitid_eintr, 0);
}

TEST_P(LoopTest, BrokenWaitIsReportedByRun) {
  sys::table().epoll_wait = [](int, struct epoll_event*, int, int) { return -EBADF; };
  sys::table().sigtimedwait = [](const sigset_t*, siginfo_t*, const struct timespec*) { return -EINVAL; };
  const int broken = GetParam() == Wait::kEpoll ? -EBADF : -EINVAL;
  EXPECT_EQ(loop_.run_once(0), broken);
  EXPECT_EQ(loop_.run(), broken);
}

// Counts the waits each kind of step makes.
int g_epoll_waits = 0;
int g_signal_waits = 0;

TEST_P(LoopTest, SleepsInSigtimedwaitOnlyWhileNoDescriptorIsWatched) {
  g_epoll_waits = g_signal_waits = 0;
  sys::table().epoll_wait = [](int fd, struct epoll_event* ev, int max, int timeout) {
    ++g_epoll_waits;
    int r = ::epoll_wait(fd, ev, max, timeout);
    return r < 0 ? -errno : r;
  };
  sys::table().sigtimedwait = [](const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
    ++g_signal_waits;
    int r = ::sigtimedwait(set, info, timeout);
    return r < 0 ? -errno : r;
  };
  int got = 0;
  auto s = record_signal(SIGUSR1, got);
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  EXPECT_EQ(loop_.run_once(1000), 1);
  EXPECT_EQ(got, SIGUSR1);
  const bool epoll = GetParam() == Wait::kEpoll;
  EXPECT_EQ(g_epoll_waits, epoll ? 1 : 0);
  EXPECT_EQ(g_signal_waits, epoll ? 0 : 2);  // the wait, then a look for more already pending

  idle_.reset();  // nothing watched any more: both kinds of loop now sleep in sigtimedwait
  g_epoll_waits = g_signal_waits = 0;
  got = 0;
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  EXPECT_EQ(loop_.run_once(1000), 1);
  EXPECT_EQ(got, SIGUSR1);
  EXPECT_EQ(g_epoll_waits, 0);
  EXPECT_EQ(g_signal_waits, 2);

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  int reads = 0;
  auto io = loop_.add_io(
      r.get(), EPOLLIN, [&](uint32_t) { return ++reads; }, "pipe");  // and back to epoll
  g_epoll_waits = g_signal_waits = 0;
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  EXPECT_EQ(loop_.run_once(1000), 1);
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(g_epoll_waits, 1);
  EXPECT_EQ(g_signal_waits, 0);
}

TEST_P(LoopTest, SignalsAndExitsPendingTogetherAreAllHandledInOneStep) {
  std::vector<int> got;
  auto s = loop_.add_signal(
      SIGUSR1,
      [&](const signalfd_siginfo& i) {
        got.push_back(static_cast<int>(i.ssi_signo));
        return 0;
      },
      "usr1");
  auto s2 = loop_.add_signal(
      SIGUSR2,
      [&](const signalfd_siginfo& i) {
        got.push_back(static_cast<int>(i.ssi_signo));
        EXPECT_EQ(static_cast<pid_t>(i.ssi_pid), ::getpid());
        return 0;
      },
      "usr2");
  pid_t pid = fork_exit(9);
  int code = -1;
  auto child = loop_.add_child(
      pid,
      [&](const siginfo_t& st) {
        code = st.si_status;
        return 0;
      },
      "child");
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  EXPECT_GE(loop_.run_once(1000), 1);
  EXPECT_EQ(got, (std::vector<int>{SIGUSR1, SIGUSR2}));  // lowest number first, as the kernel hands them out
  EXPECT_EQ(code, 9);
}

TEST_P(LoopTest, ADueTimerEndsASignalWaitWithoutASignal) {
  bool fired = false;
  auto start = Clock::now();
  auto later = loop_.add_timer(
      start + 1h, [] { return 0; }, "later");
  auto soon = loop_.add_timer(
      start + 30ms,
      [&] {
        fired = true;
        return 0;
      },
      "soon");
  EXPECT_EQ(loop_.run_once(-1), 1);
  EXPECT_TRUE(fired);
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, 30ms);
  EXPECT_LT(waited, 1s);
  EXPECT_EQ(loop_.run_once(20), 0);  // the other is an hour away: a bounded step simply ends
}

TEST_P(LoopTest, DeferRunsEachIterationWithoutBlockingUntilDisabled) {
  int runs = 0;
  SourceHandle defer;
  defer = loop_.add_defer(
      [&] {
        if (++runs == 3) {
          defer.set_enabled(false);
        }
        return 0;
      },
      "defer");
  auto start = Clock::now();
  loop_.run_once(1000);
  loop_.run_once(1000);  // enabled: neither step blocks
  EXPECT_LT(Clock::now() - start, 500ms);
  EXPECT_EQ(runs, 2);
  loop_.run_once(0);
  EXPECT_EQ(runs, 3);
  loop_.run_once(0);
  EXPECT_EQ(runs, 3);
}

TEST_P(LoopTest, RunReturnsTheExitCodeAfterRunningExitSources) {
  std::vector<std::string> events;
  auto t = loop_.add_timer(
      Clock::now(),
      [&] {
        events.push_back("timer");
        loop_.exit(42);
        return 0;
      },
      "t");
  auto e1 = loop_.add_exit(
      [&] {
        events.push_back("exit1");
        return 0;
      },
      "e1");
  auto e2 = loop_.add_exit(
      [&] {
        events.push_back("exit2");
        return 0;
      },
      "e2");
  EXPECT_EQ(loop_.run(), 42);
  EXPECT_EQ(events, (std::vector<std::string>{"timer", "exit1", "exit2"}));
}

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

TEST(LoopDescriptors, OpenOnlyWithTheFirstWatchedDescriptor) {
  const int before = open_fds();
  Loop loop;
  ASSERT_EQ(loop.init(), 0);
  auto signal = loop.add_signal(
      SIGUSR1, [](const signalfd_siginfo&) { return 0; }, "usr1");
  auto timer = loop.add_timer(
      Clock::now() + 1h, [] { return 0; }, "timer");
  EXPECT_EQ(loop.run_once(0), 0);
  EXPECT_EQ(open_fds(), before);  // signals and timers need no descriptor of the loop's own

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  int reads = 0;
  auto io = loop.add_io(
      r.get(), EPOLLIN, [&](uint32_t) { return ++reads; }, "pipe");
  EXPECT_EQ(open_fds(), before + 2 + 3);  // the pipe, then the epoll set, signalfd and timerfd
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  EXPECT_EQ(loop.run_once(1000), 1);
  EXPECT_EQ(reads, 1);
}

constexpr const char* kNoKeptStatus =
    "no exit status kept for a pidfd here (PIDFD_INFO_EXIT is Linux 6.15; qemu-user does not pass PIDFD_GET_INFO on)";

TEST_P(LoopTest, WhenTheKernelReapsOrphansLeaveNoZombieAndARegisteredChildStillGetsItsStatus) {
  TRAINIT_SKIP_UNDER_EMULATION(test::emulation::kNoAutoreap);
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  Fd go_read(go[0]), go_write(go[1]);
  pid_t mine = fork_exit_when_closed(go, 7);
  siginfo_t status{};
  auto child = loop_.add_child(mine, record_status(status), "child");
  if (!kernel_reaps()) {
    GTEST_SKIP() << kNoKeptStatus;
  }
  pid_t orphan = fork_exit(3);
  // Gone without a wait: nobody could reap it but the kernel.
  siginfo_t info{};
  auto limit = Clock::now() + 5s;
  while (::waitid(P_PID, static_cast<id_t>(orphan), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && Clock::now() < limit) {
    ::usleep(1000);
  }
  EXPECT_EQ(errno, ECHILD) << "the orphan was left a zombie";

  go_write.reset();
  ASSERT_TRUE(step_until([&] { return status.si_pid != 0; }));
  EXPECT_EQ(status.si_pid, mine);
  EXPECT_EQ(status.si_code, CLD_EXITED);
  EXPECT_EQ(status.si_status, 7);
  EXPECT_EQ(loop_.orphans_reaped(), 0U);  // the kernel reaped, not the loop
  EXPECT_EQ(child.send_signal(SIGTERM), -ESRCH);
}

TEST_P(LoopTest, WhenTheKernelReapsAKilledChildsSignalIsKept) {
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  Fd go_read(go[0]), go_write(go[1]);
  pid_t mine = fork_exit_when_closed(go, 0);
  siginfo_t status{};
  auto child = loop_.add_child(mine, record_status(status), "child");
  if (!kernel_reaps()) {
    GTEST_SKIP() << kNoKeptStatus;
  }
  ASSERT_EQ(child.send_signal(SIGKILL), 0);
  ASSERT_TRUE(step_until([&] { return status.si_pid != 0; }));
  EXPECT_EQ(status.si_code, CLD_KILLED);
  EXPECT_EQ(status.si_status, SIGKILL);
}

TEST_P(LoopTest, AChildThatEndedBeforeTheKernelTookOverReapingIsStillHeardOf) {
  pid_t mine = fork_exit(9);
  siginfo_t status{};
  auto child = loop_.add_child(mine, record_status(status), "child");
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(mine), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  // The switch to SA_NOCLDWAIT discards the SIGCHLD that was pending for it.
  if (!kernel_reaps()) {
    GTEST_SKIP() << kNoKeptStatus;
  }
  ASSERT_TRUE(step_until([&] { return status.si_pid != 0; }));
  EXPECT_EQ(status.si_code, CLD_EXITED);
  EXPECT_EQ(status.si_status, 9);
}

INSTANTIATE_TEST_SUITE_P(Waits, LoopTest, ::testing::Values(Wait::kEpoll, Wait::kSigtimedwait),
                         [](const ::testing::TestParamInfo<Wait>& info) {
                           return info.param == Wait::kEpoll ? "epoll" : "sigtimedwait";
                         });

}  // namespace
}  // namespace trainit

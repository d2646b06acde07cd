// Spawning, signal names and the escalation, against the real kernel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "base/fd.h"
#include "emulation.h"
#include "loop/loop.h"
#include "proc/escalation.h"
#include "proc/signals.h"
#include "proc/spawn.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;

siginfo_t wait_for(pid_t pid) {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) < 0 && errno == EINTR) {
  }
  return info;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST(Signals, NamesAndNumbersRoundTrip) {
  EXPECT_EQ(signal_from_name("SIGTERM"), SIGTERM);
  EXPECT_EQ(signal_from_name("term"), SIGTERM);
  EXPECT_EQ(signal_from_name("9"), SIGKILL);
  EXPECT_EQ(signal_from_name("SIGRTMIN+2"), SIGRTMIN + 2);
  EXPECT_EQ(signal_from_name("RTMAX-1"), SIGRTMAX - 1);
  EXPECT_EQ(signal_from_name("SIGRTMAX+1"), 0);
  EXPECT_EQ(signal_from_name("0"), 0);
  EXPECT_EQ(signal_from_name("65"), 0);
  EXPECT_EQ(signal_from_name("09"), 0);  // numbers in base/number.h's one form
  EXPECT_EQ(signal_from_name("+9"), 0);
  EXPECT_EQ(signal_from_name("RTMIN+02"), 0);
  EXPECT_EQ(signal_from_name("RTMIN++2"), 0);
  EXPECT_EQ(signal_from_name("SIGBOGUS"), 0);
  EXPECT_EQ(signal_from_name(""), 0);
  for (int s = 1; s <= SIGRTMAX; ++s) {
    if (s < SIGRTMIN && s > 31) {
      continue;  // glibc's own
    }
    EXPECT_EQ(signal_from_name(signal_name(s)), s) << signal_name(s);
  }
}

TEST(Signals, ForwardableSetLeavesOutWhatMustNotBeForwarded) {
  sigset_t set = forwardable_signals();
  for (int s : {SIGKILL, SIGSTOP, SIGCHLD, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTTIN, SIGTTOU}) {
    EXPECT_EQ(sigismember(&set, s), 0) << signal_name(s);
  }
  for (int s : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP, SIGRTMIN, SIGRTMAX}) {
    EXPECT_EQ(sigismember(&set, s), 1) << signal_name(s);
  }
}

TEST(Spawn, ChildLeadsItsOwnProcessGroupInTheGivenDirectory) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  SpawnOptions o;
  o.argv = {"sh", "-c", "echo $$ $(ps -o pgid= -p $$) $(pwd)"};
  o.cwd = "/tmp";
  o.stdout_fd = w.get();
  auto s = spawn(o);
  ASSERT_TRUE(s.ok()) << s.error().message;
  w.reset();
  std::string out = read_all(r.get());
  EXPECT_EQ(wait_for(s->pid).si_status, 0);
  int pid = 0, pgid = 0;
  char cwd[64] = {};
  ASSERT_EQ(std::sscanf(out.c_str(), "%d %d %63s", &pid, &pgid, cwd), 3) << out;
  EXPECT_EQ(pid, s->pid);
  EXPECT_EQ(pgid, s->pid);
  EXPECT_STREQ(cwd, "/tmp");
}

TEST(Spawn, EnvironmentIsExactlyTheOneGiven) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  std::vector<std::string> env = {"A=1", "B=two words"};
  SpawnOptions o;
  o.argv = {"/usr/bin/env"};
  o.env = &env;
  o.stdout_fd = w.get();
  auto s = spawn(o);
  ASSERT_TRUE(s.ok());
  w.reset();
  EXPECT_EQ(read_all(r.get()), "A=1\nB=two words\n");
  wait_for(s->pid);
}

TEST(Spawn, MissingProgramIs127AndNotExecutableIs126) {
  TRAINIT_SKIP_UNDER_EMULATION(trainit::test::emulation::kVforkIsFork);
  SpawnOptions o;
  o.argv = {"/nonexistent/program"};
  auto missing = spawn(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().errnum, ENOENT);
  EXPECT_NE(missing.error().message.find("'/nonexistent/program'"), std::string::npos);
  EXPECT_EQ(exec_failure_status(missing.error().errnum), 127);

  char path[] = "/tmp/trainit-not-executable-XXXXXX";
  Fd file(::mkstemp(path));
  ASSERT_TRUE(file);
  ASSERT_EQ(::fchmod(file.get(), 0644), 0);
  o.argv = {path};
  auto denied = spawn(o);
  ::unlink(path);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(exec_failure_status(denied.error().errnum), 126);

  // The failed children are zombies left for the one reaper, with those codes.
  int codes[2] = {};
  for (int& c : codes) {
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_ALL, 0, &info, WEXITED), 0);
    c = info.si_status;
  }
  EXPECT_EQ(codes[0] + codes[1], 127 + 126);
}

TEST(Spawn, TrainitsOwnDescriptorsDoNotLeakButInheritedOnesPassThrough) {
  Fd cloexec(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int inherited = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(inherited, 0);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  SpawnOptions o;
  std::string script = "for fd in " + std::to_string(cloexec.get()) + " " + std::to_string(inherited) +
                       "; do if [ -e /proc/self/fd/$fd ]; then echo open; else echo closed; fi; done";
  o.argv = {"sh", "-c", script};
  o.stdout_fd = w.get();
  auto s = spawn(o);
  ASSERT_TRUE(s.ok());
  w.reset();
  EXPECT_EQ(read_all(r.get()), "closed\nopen\n");
  ::close(inherited);
  wait_for(s->pid);
}

TEST(Spawn, ChildGetsBackTheSignalStateTrainitsParentLeft) {
  sigset_t old_mask;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &old_mask);
  struct sigaction old_ttin {
  }, old_ttou{}, ignore{};
  ignore.sa_handler = SIG_IGN;

  // The parent's state: SIGUSR2 blocked, SIGTTIN/SIGTTOU at their defaults.
  sigset_t parent_mask = old_mask;
  sigaddset(&parent_mask, SIGUSR2);
  ::pthread_sigmask(SIG_SETMASK, &parent_mask, nullptr);
  SignalState parent = capture_signal_state();
  // What trainit then does: block everything, ignore SIGTTIN/SIGTTOU.
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
  ::sigaction(SIGTTIN, &ignore, &old_ttin);
  ::sigaction(SIGTTOU, &ignore, &old_ttou);

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  SpawnOptions o;
  o.argv = {"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"};
  o.signals = &parent;
  o.stdout_fd = w.get();
  auto s = spawn(o);
  ::sigaction(SIGTTIN, &old_ttin, nullptr);
  ::sigaction(SIGTTOU, &old_ttou, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_TRUE(s.ok());
  w.reset();
  std::string out = read_all(r.get());
  wait_for(s->pid);
  unsigned long long blk = 0, ign = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "SigBlk: %llx SigIgn: %llx", &blk, &ign), 2) << out;
  auto bit = [](int signo) { return 1ULL << (signo - 1); };
  EXPECT_TRUE(blk & bit(SIGUSR2)) << out;
  EXPECT_FALSE(blk & bit(SIGTERM)) << out;
  EXPECT_FALSE(ign & bit(SIGTTIN)) << out;
  EXPECT_FALSE(ign & bit(SIGTTOU)) << out;
}

TEST(Escalation, SignalNowThenSigkillAfterTheGrace) {
  Loop loop;
  ASSERT_EQ(loop.init(), 0);
  std::vector<std::pair<int, Clock::time_point>> sent;
  Escalation stop(loop, 100ms, [&](int signo) { sent.emplace_back(signo, Clock::now()); });
  auto start = Clock::now();
  stop.start(SIGTERM);
  stop.start(SIGTERM);  // a second request re-sends, keeps the deadline
  while (sent.size() < 3 && Clock::now() - start < 5s) {
    loop.run_once(1000);
  }
  ASSERT_EQ(sent.size(), 3U);
  EXPECT_EQ(sent[0].first, SIGTERM);
  EXPECT_EQ(sent[2].first, SIGKILL);
  EXPECT_GE(sent[2].second - start, 100ms);
  EXPECT_LT(sent[2].second - start, 1s);
  EXPECT_TRUE(stop.killed());
}

TEST(Escalation, FinishCancelsTheSigkill) {
  Loop loop;
  ASSERT_EQ(loop.init(), 0);
  int kills = 0;
  Escalation stop(loop, 20ms, [&](int signo) { kills += signo == SIGKILL; });
  stop.start(SIGTERM);
  stop.finish();
  auto t = loop.add_timer(
      Clock::now() + 60ms, [] { return 0; }, "wait");
  loop.run_once(1000);
  loop.run_once(0);
  EXPECT_EQ(kills, 0);
  EXPECT_FALSE(stop.killed());
}

}  // namespace
}  // namespace trainit

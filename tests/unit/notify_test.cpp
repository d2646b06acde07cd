// The supervisor protocol (Notifier, NotifyReceiver, the child's environment)
// against real unix datagram sockets, and proc/tree against real children.
#include "notify/notify.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/fd.h"
#include "notify/receiver.h"
#include "proc/tree.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using Lines = std::vector<std::pair<std::string, std::string>>;

// --- Sockets and the environment --------------------------------------------

// A unix datagram socket bound to `address` ("/path" or "@abstract").
Fd bind_listener(const std::string& address) {
  Fd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, address.data(), address.size());
  auto len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + address.size());
  if (address[0] == '@') {
    addr.sun_path[0] = '\0';
  } else {
    ++len;
  }
  if (!fd || ::bind(fd.get(), reinterpret_cast<const struct sockaddr*>(&addr), len) < 0) {
    return Fd();
  }
  return fd;
}

// The next datagram on `fd`, or nothing within `timeout`.
std::optional<std::string> receive(int fd, std::chrono::milliseconds timeout = 2s) {
  struct pollfd pfd = {fd, POLLIN, 0};
  if (::poll(&pfd, 1, static_cast<int>(timeout.count())) != 1) {
    return std::nullopt;
  }
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
  if (n < 0) {
    return std::nullopt;
  }
  return std::string(buf, static_cast<size_t>(n));
}

// A unique abstract address for one test.
std::string abstract_address(const char* what) {
  static int counter = 0;
  return "@trainit-unit-" + std::string(what) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Sets (or, for nullptr, unsets) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name); old != nullptr) {
      old_ = old;
    }
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A supervisor's environment with NOTIFY_SOCKET = `socket` and no watchdog.
struct SupervisorEnv {
  explicit SupervisorEnv(const char* socket, const char* usec = nullptr, const char* pid = nullptr)
      : socket_(ScopedEnv("NOTIFY_SOCKET", socket)), usec_("WATCHDOG_USEC", usec), pid_("WATCHDOG_PID", pid) {}
  ScopedEnv socket_;
  ScopedEnv usec_;
  ScopedEnv pid_;
};

Lines parse(std::string_view message) {
  Lines lines;
  parse_notify_message(message, [&](std::string_view k, std::string_view v) { lines.emplace_back(k, v); });
  return lines;
}

// --- parse_notify_message ---------------------------------------------------

TEST(NotifyMessage, SplitsNewlineSeparatedKeyValueLines) {
  EXPECT_EQ(parse("READY=1\nSTATUS=loading shard 3/8"), (Lines{{"READY", "1"}, {"STATUS", "loading shard 3/8"}}));
  EXPECT_EQ(parse("READY=1\n"), (Lines{{"READY", "1"}}));
  EXPECT_EQ(parse(""), Lines{});
}

TEST(NotifyMessage, ValueKeepsLaterEqualsSignsAndMayBeEmpty) {
  EXPECT_EQ(parse("STATUS=a=b=c\nSTATUS="), (Lines{{"STATUS", "a=b=c"}, {"STATUS", ""}}));
}

TEST(NotifyMessage, LinesWithoutAKeySkippedOthersKept) {
  EXPECT_EQ(parse("garbage\n=nokey\n\nREADY=1\n\n"), (Lines{{"READY", "1"}}));
}

// --- Notifier ---------------------------------------------------------------

TEST(Notifier, WithoutNotifySocketItIsDisabledAndSendingIsANoOp) {
  SupervisorEnv env(nullptr, "200000");
  Notifier n = Notifier::from_environment();
  EXPECT_FALSE(n.enabled());
  EXPECT_EQ(n.send("READY=1"), 0);
  n.status("anything");  // no socket, no crash
  SupervisorEnv empty("");
  EXPECT_FALSE(Notifier::from_environment().enabled()) << "an empty NOTIFY_SOCKET is no socket";
}

TEST(Notifier, SendsEachMessageAsOneDatagramToAPathSocket) {
  char dir[] = "/tmp/trainit-notify-unit-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/notify";
  {
    Fd listener = bind_listener(path);
    ASSERT_TRUE(listener) << std::strerror(errno);
    SupervisorEnv env(path.c_str());
    Notifier n = Notifier::from_environment();
    ASSERT_TRUE(n.enabled());
    EXPECT_EQ(n.send("READY=1\nSTATUS=up"), 0);
    EXPECT_EQ(receive(listener.get()), "READY=1\nSTATUS=up");
  }
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST(Notifier, SendsToAnAbstractSocketNamedWithAnAt) {
  const std::string address = abstract_address("notifier");
  Fd listener = bind_listener(address);
  ASSERT_TRUE(listener) << std::strerror(errno);
  SupervisorEnv env(address.c_str());
  Notifier n = Notifier::from_environment();
  EXPECT_EQ(n.send("STOPPING=1"), 0);
  EXPECT_EQ(receive(listener.get()), "STOPPING=1");
}

TEST(Notifier, StatusIsSentOnlyWhenItChanges) {
  const std::string address = abstract_address("status");
  Fd listener = bind_listener(address);
  ASSERT_TRUE(listener);
  SupervisorEnv env(address.c_str());
  Notifier n = Notifier::from_environment();
  n.status("running");
  n.status("running");
  n.status("draining");
  n.status("running");
  EXPECT_EQ(receive(listener.get()), "STATUS=running");
  EXPECT_EQ(receive(listener.get()), "STATUS=draining");
  EXPECT_EQ(receive(listener.get()), "STATUS=running");
  EXPECT_EQ(receive(listener.get(), 50ms), std::nullopt) << "an unchanged status was sent again";
}

TEST(Notifier, AMissingSupervisorIsAnErrorReturnedNotAFailure) {
  SupervisorEnv env("/nonexistent/trainit/notify");
  Notifier n = Notifier::from_environment();
  EXPECT_LT(n.send("READY=1"), 0);
  SupervisorEnv gone(abstract_address("nobody").c_str());
  EXPECT_LT(Notifier::from_environment().send("READY=1"), 0);
}

TEST(Notifier, ARelativeSocketPathIsRefused) {
  SupervisorEnv env("relative/notify");
  EXPECT_LT(Notifier::from_environment().send("READY=1"), 0);
}

// Sending must never block trainit's loop, even when the supervisor stopped
// reading and its queue is full. Run in a child, so that a block fails the
// test instead of hanging it.
TEST(Notifier, SendingToASupervisorThatStoppedReadingNeverBlocks) {
  const std::string address = abstract_address("full");
  Fd listener = bind_listener(address);
  ASSERT_TRUE(listener);
  SupervisorEnv env(address.c_str());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(5);  // the deadline: a send that blocks dies of SIGALRM
    Notifier n = Notifier::from_environment();
    int refused = 0;
    for (int i = 0; i < 5000; ++i) {
      refused += n.send("WATCHDOG=1") < 0 ? 1 : 0;
    }
    ::_exit(refused > 0 ? 0 : 1);  // the queue must have filled up
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
      << "send() blocked on a full supervisor queue for 5 s";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "5000 datagrams never filled the queue?";
}

TEST(Notifier, WatchdogIntervalIsHalfOfWatchdogUsecForThisProcessOnly) {
  const std::string me = std::to_string(::getpid());
  const std::string me_and_more = me + "x";
  struct Case {
    const char* usec;
    const char* pid;
    Duration want;
  };
  const Case cases[] = {
      {"200000", nullptr, 100ms},                    // no WATCHDOG_PID: ours
      {"200000", me.c_str(), 100ms},                 // our pid
      {"30000000", nullptr, 15s},                    // WatchdogSec=30
      {"200000", "1", Duration{0}},                  // someone else's watchdog (we are not PID 1 here)
      {"200000", me_and_more.c_str(), Duration{0}},  // not a pid: not ours
      {"0200000", nullptr, Duration{0}},             // numbers in base/number.h's one form
      {"+200000", nullptr, Duration{0}},
      {"0", nullptr, Duration{0}},      // off
      {"-5", nullptr, Duration{0}},     // nonsense
      {"100ms", nullptr, Duration{0}},  // not a number of microseconds
      {"", nullptr, Duration{0}},
      {nullptr, nullptr, Duration{0}},
  };
  for (const Case& c : cases) {
    SupervisorEnv env("@trainit-unit-watchdog", c.usec, c.pid);
    EXPECT_EQ(Notifier::from_environment().watchdog_interval(), c.want)
        << "WATCHDOG_USEC=" << (c.usec ? c.usec : "(unset)") << " WATCHDOG_PID=" << (c.pid ? c.pid : "(unset)");
  }
}

// --- environment_for_children ------------------------------------------------

TEST(ChildEnvironment, DropsExactlyTheSupervisorsVariables) {
  std::vector<std::string> storage = {"PATH=/bin",
                                      "NOTIFY_SOCKET=/run/systemd/notify",
                                      "WATCHDOG_USEC=200000",
                                      "WATCHDOG_PID=1",
                                      "NOTIFY_SOCKET_EXTRA=kept",
                                      "MY_WATCHDOG_USEC=kept",
                                      "NOTIFY_SOCKET",
                                      "HOME=/root"};
  std::vector<char*> environ_like;
  for (auto& s : storage) {
    environ_like.push_back(s.data());
  }
  environ_like.push_back(nullptr);
  bool changed = false;
  auto env = environment_for_children(environ_like.data(), &changed);
  EXPECT_TRUE(changed);
  // A bare "NOTIFY_SOCKET" names the supervisor's variable all the same: dropped.
  EXPECT_EQ(env,
            (std::vector<std::string>{"PATH=/bin", "NOTIFY_SOCKET_EXTRA=kept", "MY_WATCHDOG_USEC=kept", "HOME=/root"}));
}

// trainit's own configuration stays with trainit, as NOTIFY_SOCKET does.
TEST(ChildEnvironment, DropsTrainitsAndTinisVariables) {
  std::vector<std::string> storage = {
      "PATH=/bin",        "TRAINIT_GRACE=2",           "TRAINIT_NO_DRAIN=1",      "TRAINIT_JOB_SECRET=s3cret",
      "TRAINIT_GRCAE=2",  "TRAINIT_LOCAL_RANK=3",      "TRAINIT_COLL_TIMEOUT=30", "TINI_VERBOSITY=2",
      "TINI_SUBREAPER=",  "TINI_KILL_PROCESS_GROUP=1", "TINI_OTHER=kept",         "MY_TRAINIT_GRACE=kept",
      "TRAINITGRACE=kept"};
  std::vector<char*> environ_like;
  for (auto& s : storage) {
    environ_like.push_back(s.data());
  }
  environ_like.push_back(nullptr);
  bool changed = false;
  auto env = environment_for_children(environ_like.data(), &changed);
  EXPECT_TRUE(changed);
  // TRAINIT_COLL_TIMEOUT is documented as the ranks': passed on.
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "TRAINIT_COLL_TIMEOUT=30", "TINI_OTHER=kept",
                                           "MY_TRAINIT_GRACE=kept", "TRAINITGRACE=kept"}));
  EXPECT_TRUE(is_withheld_from_children("NOTIFY_SOCKET=/x"));
  EXPECT_TRUE(is_withheld_from_children("TRAINIT_MODE"));
  EXPECT_FALSE(is_withheld_from_children("HOME=/root"));
}

// The variables the ranks' side reads (libtrainit_coll, its plugins, the
// Python module) reach the ranks: the job's environment configures them.
TEST(ChildEnvironment, PassesOnEveryVariableTheRanksRead) {
  for (const char* entry :
       {"TRAINIT_COLL_TIMEOUT=30", "TRAINIT_COLL_HEAP=1M", "TRAINIT_COLL_BACKEND=cuda", "TRAINIT_COLL_DEVICE=1",
        "TRAINIT_COLL_DEVICE_STAGING=4096", "TRAINIT_COLL_DEVICE_ONE_SHOT=65536",
        "TRAINIT_COLL_LIBRARY=/opt/lib/libtrainit_coll.so", "TRAINIT_FAKEDEV_FAULT=1:wrong"}) {
    EXPECT_FALSE(is_withheld_from_children(entry)) << entry;
  }
}

TEST(ChildEnvironment, UnchangedWithoutSupervisorVariables) {
  std::string a = "A=1", b = "B=2";
  char* environ_like[] = {a.data(), b.data(), nullptr};
  bool changed = true;
  EXPECT_EQ(environment_for_children(environ_like, &changed), (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_FALSE(changed);
  EXPECT_TRUE(environment_for_children(nullptr, &changed).empty());
  EXPECT_FALSE(changed);
}

TEST(ChildEnvironment, SupervisorVariableIsTheWholeNameOfAnEntryOrABareName) {
  EXPECT_TRUE(is_supervisor_variable("NOTIFY_SOCKET=@x"));
  EXPECT_TRUE(is_supervisor_variable("WATCHDOG_USEC="));
  EXPECT_TRUE(is_supervisor_variable("WATCHDOG_PID=7"));
  EXPECT_TRUE(is_supervisor_variable("WATCHDOG_USEC"));  // a name, as the planners hold them
  EXPECT_FALSE(is_supervisor_variable("NOTIFY_SOCKETS=1"));
  EXPECT_FALSE(is_supervisor_variable("XNOTIFY_SOCKET=1"));
  EXPECT_FALSE(is_supervisor_variable("WATCHDOG=1"));
  EXPECT_FALSE(is_supervisor_variable(""));
}

// --- NotifyReceiver ----------------------------------------------------------

TEST(NotifyReceiver, OpensAnAbstractSocketEachWithItsOwnAddress) {
  NotifyReceiver a, b;
  ASSERT_EQ(a.open(), 0);
  ASSERT_EQ(b.open(), 0);
  EXPECT_TRUE(a.address().starts_with("@trainit-notify-")) << a.address();
  EXPECT_NE(a.address(), b.address());
  EXPECT_GE(a.fd(), 0);
  int flags = ::fcntl(a.fd(), F_GETFD);
  EXPECT_TRUE(flags & FD_CLOEXEC) << "the child gets the address, not the descriptor";
}

TEST(NotifyReceiver, DrainReadsEveryPendingDatagramInOrder) {
  NotifyReceiver r;
  ASSERT_EQ(r.open(), 0);
  r.serve(::getpid());  // the sender below is this process
  Lines lines;
  auto collect = [&](std::string_view k, std::string_view v) { lines.emplace_back(k, v); };
  EXPECT_EQ(r.drain(collect), 0) << "nothing pending: returns at once";

  SupervisorEnv env(r.address().c_str());
  Notifier child = Notifier::from_environment();  // the child's side, as sd_notify would be
  ASSERT_EQ(child.send("STATUS=warming up"), 0);
  ASSERT_EQ(child.send("READY=1\nSTATUS=serving"), 0);
  ASSERT_EQ(child.send("EXTEND_TIMEOUT_USEC=5000000"), 0);
  EXPECT_EQ(r.drain(collect), 3);
  EXPECT_EQ(
      lines,
      (Lines{{"STATUS", "warming up"}, {"READY", "1"}, {"STATUS", "serving"}, {"EXTEND_TIMEOUT_USEC", "5000000"}}));
  EXPECT_EQ(r.drain(collect), 0);
}

// A datagram longer than the receiver takes is dropped whole, as systemd
// drops it: its first 4 KiB cut at any byte could pass as a message it
// never was ("READY=1" past the cut, a STATUS cut mid-character).
TEST(NotifyReceiver, ADatagramTooLongToTakeWholeIsDroppedNotCut) {
  NotifyReceiver r;
  ASSERT_EQ(r.open(), 0);
  r.serve(::getpid());
  Lines lines;
  auto collect = [&](std::string_view k, std::string_view v) { lines.emplace_back(k, v); };
  SupervisorEnv env(r.address().c_str());
  Notifier child = Notifier::from_environment();
  ASSERT_EQ(child.send("STATUS=" + std::string(8000, 'a')), 0);
  ASSERT_EQ(child.send("READY=1"), 0);
  EXPECT_EQ(r.drain(collect), 1);
  EXPECT_EQ(lines, (Lines{{"READY", "1"}}));
}

TEST(NotifyReceiver, AnEmptyDatagramCountsAndCallsNothing) {
  NotifyReceiver r;
  ASSERT_EQ(r.open(), 0);
  r.serve(::getpid());
  SupervisorEnv env(r.address().c_str());
  ASSERT_EQ(Notifier::from_environment().send(""), 0);
  int calls = 0;
  EXPECT_EQ(r.drain([&](std::string_view, std::string_view) { ++calls; }), 1);
  EXPECT_EQ(calls, 0);
}

// Another process that speaks to a NOTIFY_SOCKET: a forked child that sends,
// from its own pid, each message it is handed (through Notifier, as the
// child's sd_notify would), and says when it has.
class Sender {
 public:
  explicit Sender(const std::string& address) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0) {
      return;
    }
    Fd mine(fds[0]), theirs(fds[1]);
    pid_ = ::fork();
    if (pid_ == 0) {
      mine.reset();
      ::setenv("NOTIFY_SOCKET", address.c_str(), 1);
      Notifier n = Notifier::from_environment();
      char buf[4096];
      ssize_t len;
      while ((len = ::recv(theirs.get(), buf, sizeof(buf), 0)) > 0) {
        int r = n.send(std::string_view(buf, static_cast<size_t>(len)));
        if (::send(theirs.get(), &r, sizeof(r), 0) != sizeof(r)) {
          break;
        }
      }
      ::_exit(0);
    }
    control_ = std::move(mine);
  }
  ~Sender() {
    control_.reset();  // end of file: the child exits
    if (pid_ > 0) {
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  // Sends `message` as one datagram from the child; true once it is queued.
  bool send(std::string_view message) {
    int r = -1;
    return pid_ > 0 &&
           ::send(control_.get(), message.data(), message.size(), 0) == static_cast<ssize_t>(message.size()) &&
           ::recv(control_.get(), &r, sizeof(r), 0) == sizeof(r) && r == 0;
  }

 private:
  pid_t pid_ = -1;
  Fd control_;
};

// NotifyAccess=main: the abstract name can be reached by anyone in the network
// namespace (a pod's other containers too); only the served child is heard.
TEST(NotifyReceiver, TakesOnlyTheServedProcessesDatagrams) {
  NotifyReceiver r;
  ASSERT_EQ(r.open(), 0);
  r.serve(::getpid());
  Sender other(r.address());
  ASSERT_GT(other.pid(), 0);
  ASSERT_TRUE(other.send("READY=1\nSTATUS=an impostor"));
  SupervisorEnv env(r.address().c_str());
  ASSERT_EQ(Notifier::from_environment().send("STATUS=the served process"), 0);
  ASSERT_TRUE(other.send("STATUS=another impostor"));
  Lines lines;
  EXPECT_EQ(r.drain([&](std::string_view k, std::string_view v) { lines.emplace_back(k, v); }), 1);
  EXPECT_EQ(lines, (Lines{{"STATUS", "the served process"}}));
  EXPECT_EQ(r.dropped(), 2u);
}

TEST(NotifyReceiver, ServesNobodyUntilTold) {
  NotifyReceiver r;
  ASSERT_EQ(r.open(), 0);
  SupervisorEnv env(r.address().c_str());
  ASSERT_EQ(Notifier::from_environment().send("READY=1"), 0);
  int calls = 0;
  EXPECT_EQ(r.drain([&](std::string_view, std::string_view) { ++calls; }), 0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(r.dropped(), 1u);
}

// A restarted child has a new pid: the receiver follows it, and the old pid
// (gone, or someone else's by now) is no longer heard.
TEST(NotifyReceiver, FollowsTheServedPidAcrossARestart) {
  NotifyReceiver r;
  ASSERT_EQ(r.open(), 0);
  Sender first(r.address()), second(r.address());
  ASSERT_GT(first.pid(), 0);
  ASSERT_GT(second.pid(), 0);
  Lines lines;
  auto collect = [&](std::string_view k, std::string_view v) { lines.emplace_back(k, v); };
  r.serve(first.pid());
  ASSERT_TRUE(first.send("STATUS=first run"));
  ASSERT_TRUE(second.send("STATUS=too early"));
  EXPECT_EQ(r.drain(collect), 1);
  EXPECT_EQ(lines, (Lines{{"STATUS", "first run"}}));
  r.serve(second.pid());
  ASSERT_TRUE(first.send("STATUS=the old run, late"));
  ASSERT_TRUE(second.send("READY=1"));
  EXPECT_EQ(r.drain(collect), 1);
  EXPECT_EQ(lines, (Lines{{"STATUS", "first run"}, {"READY", "1"}}));
  EXPECT_EQ(r.dropped(), 2u);
}

// Descriptors sent along with a datagram (SCM_RIGHTS) would land in trainit,
// and through it in its next child: the receiver closes them.
TEST(NotifyReceiver, DescriptorsSentAlongAreNotKept) {
  NotifyReceiver r;
  ASSERT_EQ(r.open(), 0);
  r.serve(::getpid());
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  Fd read_end(p[0]), write_end(p[1]);
  Fd sender(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(sender);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, r.address().data() + 1, r.address().size() - 1);
  char text[] = "READY=1";
  struct iovec iov = {text, sizeof(text) - 1};
  char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg {};
  msg.msg_name = &addr;
  msg.msg_namelen = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + r.address().size());
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  int passed = write_end.get();
  std::memcpy(CMSG_DATA(cmsg), &passed, sizeof(passed));
  ASSERT_EQ(::sendmsg(sender.get(), &msg, 0), static_cast<ssize_t>(iov.iov_len)) << std::strerror(errno);
  write_end.reset();  // the copy in flight is now the pipe's only writer
  Lines lines;
  EXPECT_EQ(r.drain([&](std::string_view k, std::string_view v) { lines.emplace_back(k, v); }), 1);
  EXPECT_EQ(lines, (Lines{{"READY", "1"}}));
  struct pollfd pfd = {read_end.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 0), 1);
  EXPECT_TRUE(pfd.revents & POLLHUP) << "the passed write end is still open somewhere in this process";
}

// --- proc/tree ---------------------------------------------------------------

// A child that runs `body` and then waits to be killed; its pid.
template <typename Body>
pid_t fork_child(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    for (;;) {
      ::pause();
    }
  }
  return pid;
}

void kill_and_reap(pid_t pid) {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

// Reads one pid from `fd`; -1 on EOF.
pid_t read_pid(int fd) {
  pid_t pid = -1;
  return ::read(fd, &pid, sizeof(pid)) == sizeof(pid) ? pid : -1;
}

// Gone, or a zombie nobody has reaped yet.
bool is_dead(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  Fd stat(::open(path, O_RDONLY | O_CLOEXEC));
  char buf[512] = {};
  if (!stat || ::read(stat.get(), buf, sizeof(buf) - 1) <= 0) {
    return true;
  }
  const char* end = std::strrchr(buf, ')');
  return end != nullptr && (end[2] == 'Z' || end[2] == 'X');
}

// Waits at most `timeout` until `pid` (not necessarily our child) is dead:
// until its pidfd (opened while it lived) is readable, or, on a kernel
// without pidfds (before 5.3), until /proc says so.
bool wait_dead(const Fd& pidfd, pid_t pid, std::chrono::milliseconds timeout) {
  if (pidfd) {
    struct pollfd pfd = {pidfd.get(), POLLIN, 0};
    int r;
    while ((r = ::poll(&pfd, 1, static_cast<int>(timeout.count()))) < 0 && errno == EINTR) {
    }
    return r == 1;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!is_dead(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  return is_dead(pid);
}

size_t index_of(const std::vector<pid_t>& v, pid_t pid) {
  return static_cast<size_t>(std::find(v.begin(), v.end(), pid) - v.begin());
}

TEST(ProcTree, ListsChildrenAndGrandchildrenParentsFirst) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  Fd r(fds[0]), w(fds[1]);
  pid_t child = fork_child([&] {
    pid_t grandchild = fork_child([] { ::setsid(); });  // another session: still ours
    ssize_t unused = ::write(w.get(), &grandchild, sizeof(grandchild));
    (void)unused;
  });
  ASSERT_GT(child, 0);
  pid_t grandchild = read_pid(r.get());
  ASSERT_GT(grandchild, 0);
  auto all = list_descendants(::getpid());
  EXPECT_LT(index_of(all, child), all.size());
  EXPECT_LT(index_of(all, grandchild), all.size());
  EXPECT_LT(index_of(all, child), index_of(all, grandchild)) << "parents come first";
  auto below = list_descendants(child);
  EXPECT_EQ(below, std::vector<pid_t>{grandchild});
  ::kill(grandchild, SIGKILL);
  kill_and_reap(child);
}

TEST(ProcTree, ListsTheChildrenOfEveryThread) {
  // A child forked by another thread is listed in that thread's
  // /proc/<pid>/task/<tid>/children only, while that thread lives (when it
  // ends, its children pass to another thread of ours).
  std::promise<pid_t> forked;
  std::promise<void> listed;
  std::thread forker([&] {
    forked.set_value(fork_child([] {}));
    listed.get_future().wait();
  });
  const pid_t child = forked.get_future().get();
  auto all = list_descendants(::getpid());
  listed.set_value();
  forker.join();
  ASSERT_GT(child, 0);
  EXPECT_LT(index_of(all, child), all.size()) << "a child of a second thread is missed";
  kill_and_reap(child);
}

TEST(ProcTree, AnOrphanThatLeftTheTreeIsNoLongerOurs) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  Fd r(fds[0]), w(fds[1]);
  pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    pid_t orphan = fork_child([] {});
    ssize_t unused = ::write(w.get(), &orphan, sizeof(orphan));
    (void)unused;
    ::_exit(0);
  }
  w.reset();
  pid_t orphan = read_pid(r.get());
  ::waitpid(middle, nullptr, 0);  // the orphan now belongs to some other reaper
  ASSERT_GT(orphan, 0);
  auto all = list_descendants(::getpid());
  EXPECT_EQ(index_of(all, orphan), all.size()) << "listed a process outside our tree";
  ::kill(orphan, SIGKILL);
}

TEST(ProcTree, NoDescendantsForALeafOrAMissingProcess) {
  pid_t child = fork_child([] {});
  ASSERT_GT(child, 0);
  EXPECT_TRUE(list_descendants(child).empty());
  kill_and_reap(child);
  EXPECT_TRUE(list_descendants(child).empty()) << "a reaped pid";
  EXPECT_TRUE(list_descendants(0x3fffffff).empty());
}

TEST(ProcTree, SignalAllOutsidePid1ReachesEveryDescendantAndNothingElse) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  Fd r(fds[0]), w(fds[1]);
  // An outsider: forked, then orphaned away from our tree before the stop.
  pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    pid_t outsider = fork_child([] {});
    ssize_t unused = ::write(w.get(), &outsider, sizeof(outsider));
    (void)unused;
    ::_exit(0);
  }
  pid_t outsider = read_pid(r.get());
  ::waitpid(middle, nullptr, 0);
  ASSERT_GT(outsider, 0);
  // Ours: a child leading its own group, and its grandchild in another session.
  pid_t child = fork_child([&] {
    ::setpgid(0, 0);
    pid_t grandchild = fork_child([] { ::setsid(); });
    ssize_t unused = ::write(w.get(), &grandchild, sizeof(grandchild));
    (void)unused;
  });
  ASSERT_GT(child, 0);
  pid_t grandchild = read_pid(r.get());
  ASSERT_GT(grandchild, 0);

  Fd grandchild_pidfd(static_cast<int>(::syscall(SYS_pidfd_open, grandchild, 0)));
  EXPECT_GE(signal_all(false, SIGTERM, child), 2);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED), 0);
  EXPECT_EQ(info.si_code, CLD_KILLED);
  EXPECT_EQ(info.si_status, SIGTERM);
  // The grandchild now belongs to the init (or a subreaper): it must die.
  EXPECT_TRUE(wait_dead(grandchild_pidfd, grandchild, 2s)) << "the grandchild in its own session missed the signal";
  EXPECT_FALSE(is_dead(outsider)) << "a process outside our tree was signalled";
  ::kill(outsider, SIGKILL);
  ::kill(grandchild, SIGKILL);
}

}  // namespace
}  // namespace trainit

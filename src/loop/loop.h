// The event loop: one epoll set, one signalfd, one timerfd, one reaper.
//
// Sources are registered with add_*() and owned by the returned SourceHandle:
// dropping the handle unregisters the source (safe from inside any handler,
// including the source's own). The Loop must outlive every handle.
//
// Every handler returns int: >= 0 is success; a negative errno (or an
// exception) disables that source, not the loop, and is logged once with the
// source's description. run_once() is one prepare -> wait -> dispatch step,
// for tests; run() steps until exit() and then runs the exit sources.
//
// Signals: add_signal() blocks the signals in the calling thread and routes
// them through the loop's single signalfd. SIGCHLD belongs to the loop: on
// each one it drains waitid(P_ALL, WEXITED|WNOHANG) until nothing is left
// and hands each status to the child source registered for that pid; any
// other pid is an orphan, counted and passed to the orphan handler. The loop
// is the only code that waits for children. Where the kernel reaps for it
// (set_kernel_reaps), a registered child's status comes from its pidfd.
//
// Waiting: with descriptors to watch, the loop sleeps in epoll_wait() on the
// epoll set (io sources, the signalfd, the timerfd). With none (exec mode's
// usual case: a child, signals, timers) it sleeps in sigtimedwait() on the
// same signals, with the next timer's deadline as its timeout: one call that
// both sleeps and takes the signal, where epoll needs a second one to read
// the signalfd. That is the path a stop takes on its way to the child.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/fd.h"
#include "base/time.h"

namespace trainit {

class Loop;
struct Source;

// Owns one registered source; move-only.
class SourceHandle {
 public:
  SourceHandle() noexcept = default;
  SourceHandle(SourceHandle&& other) noexcept;
  SourceHandle& operator=(SourceHandle&& other) noexcept;
  SourceHandle(const SourceHandle&) = delete;
  SourceHandle& operator=(const SourceHandle&) = delete;
  ~SourceHandle() { reset(); }

  explicit operator bool() const noexcept { return source_ != nullptr; }
  // Unregisters the source now. Its handler will not be called again.
  void reset() noexcept;

  // A disabled source keeps its registration but is never dispatched.
  void set_enabled(bool enabled) noexcept;
  [[nodiscard]] bool enabled() const noexcept;
  [[nodiscard]] const std::string& description() const noexcept;

  // Timer sources: (re)arm for `deadline`; the handler runs once when it passes.
  void set_deadline(Clock::time_point deadline) noexcept;

  // Child sources: sends `signo` to the process (through its pidfd where the
  // kernel has them). Returns 0 or -errno; -ESRCH once the child was reaped.
  int send_signal(int signo) noexcept;
  // Child sources: sends `signo` to the process group the child leads (its
  // pid is its group's id), and only while the child is not reaped: until
  // then neither id can be reused. A child that has not made its group yet
  // gets it on its own. Returns 0 or -errno; -ESRCH once reaped.
  int signal_group(int signo) noexcept;
  [[nodiscard]] pid_t pid() const noexcept;

 private:
  friend class Loop;
  SourceHandle(Loop* loop, Source* source) noexcept : loop_(loop), source_(source) {}
  Loop* loop_ = nullptr;
  Source* source_ = nullptr;
};

class Loop {
 public:
  using IoFn = std::function<int(uint32_t events)>;
  using SignalFn = std::function<int(const signalfd_siginfo& info)>;
  using TimerFn = std::function<int()>;
  using ChildFn = std::function<int(const siginfo_t& status)>;
  using DeferFn = std::function<int()>;
  using ExitFn = std::function<int()>;
  using OrphanFn = std::function<void(const siginfo_t& status)>;

  Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  ~Loop();

  // Blocks SIGCHLD (the epoll set, signalfd and timerfd come with the first
  // io source). Returns 0 or -errno. Must succeed before anything else.
  int init() noexcept;

  // `fd` stays owned by the caller and must outlive the source.
  SourceHandle add_io(int fd, uint32_t events, IoFn fn, std::string description);
  // One source for every signal in `signals` (SIGCHLD excluded: the loop owns it).
  SourceHandle add_signal(const sigset_t& signals, SignalFn fn, std::string description);
  SourceHandle add_signal(int signo, SignalFn fn, std::string description);
  // A one-shot timer; it stays registered and can be re-armed with set_deadline().
  SourceHandle add_timer(Clock::time_point deadline, TimerFn fn, std::string description);
  // Called once, when `pid` (a child of ours) is reaped; pins it with a pidfd.
  SourceHandle add_child(pid_t pid, ChildFn fn, std::string description);
  // Called before every wait while enabled; the loop does not block meanwhile.
  SourceHandle add_defer(DeferFn fn, std::string description);
  // Called once, in registration order, when run() ends after exit().
  SourceHandle add_exit(ExitFn fn, std::string description);
  void set_orphan_handler(OrphanFn fn) { orphan_fn_ = std::move(fn); }
  // Called after every SIGCHLD, once the zombies are reaped: where the kernel
  // reaps the orphans, the only news that one of them ended.
  void set_children_changed_handler(std::function<void()> fn) { children_changed_fn_ = std::move(fn); }

  // With `on`, the kernel reaps every child the moment it exits (SIGCHLD's
  // SA_NOCLDWAIT): an orphan never lingers as a zombie, however late we get a
  // CPU. The children registered with add_child() still get their status, which
  // the kernel keeps for their pidfds (PIDFD_INFO_EXIT, Linux 6.15). Refused
  // with -EOPNOTSUPP where it would not for each of them; register a child
  // with it off (pidfd_open needs an unreaped child). Returns 0 or -errno.
  int set_kernel_reaps(bool on);

  // One iteration: defer sources, then wait up to `timeout_ms` (-1: forever,
  // 0: not at all) and dispatch what is ready. Returns the number of handlers
  // called, or -errno when waiting failed (never -EINTR).
  int run_once(int timeout_ms);
  // Steps until exit() was called, runs the exit sources and returns the exit
  // code, or returns -errno if the loop itself broke.
  int run();
  void exit(int code) noexcept;
  [[nodiscard]] bool exiting() const noexcept { return exiting_; }
  [[nodiscard]] int exit_code() const noexcept { return exit_code_; }

  // Reaps every child that has exited now, as on SIGCHLD. Returns how many.
  int reap();
  // Whether any child of ours (running or a zombie) exists. Reaps nothing.
  [[nodiscard]] bool has_children() const noexcept;
  [[nodiscard]] uint64_t orphans_reaped() const noexcept { return orphans_reaped_; }
  [[nodiscard]] bool has_pidfd() const noexcept { return has_pidfd_; }

 private:
  friend class SourceHandle;

  void release(Source* source) noexcept;
  void set_enabled(Source* source, bool enabled) noexcept;
  int open_epoll() noexcept;
  void update_signal_mask();
  [[nodiscard]] Clock::time_point next_deadline() const;
  void arm_timer();
  int wait_signals(int timeout_ms);
  void dispatch_signals();
  void route_signal(const signalfd_siginfo& info);
  void on_child_signal();
  void child_ended(Source* source, const siginfo_t& info);
  int collect_kernel_reaped();
  void dispatch_timers();
  int run_due_timers();
  bool call(Source* source, const std::function<int()>& invoke);
  Source* track(std::unique_ptr<Source> source);
  void collect_garbage();

  Fd epoll_;
  Fd signal_fd_;
  Fd timer_fd_;
  sigset_t signal_mask_{};
  std::vector<std::unique_ptr<Source>> sources_;
  std::unordered_map<pid_t, Source*> children_;
  OrphanFn orphan_fn_;
  std::function<void()> children_changed_fn_;
  SourceHandle reap_again_;  // set_kernel_reaps: a SIGCHLD discarded, a child still ending
  Clock::time_point armed_{Clock::time_point::max()};
  uint64_t orphans_reaped_ = 0;
  int watched_ = 0;  // io sources in the epoll set
  bool has_pidfd_ = true;
  bool kernel_reaps_ = false;
  bool garbage_ = false;
  bool exiting_ = false;
  int exit_code_ = 0;
};

}  // namespace trainit

#include "loop/loop.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <exception>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/source.h"

namespace trainit {

namespace {

// epoll tags for the loop's own descriptors; real sources carry a pointer.
constexpr uint64_t kSignalTag = 1;
constexpr uint64_t kTimerTag = 2;

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kIo:
      return "io";
    case Kind::kSignal:
      return "signal";
    case Kind::kTimer:
      return "timer";
    case Kind::kChild:
      return "child";
    case Kind::kDefer:
      return "defer";
    case Kind::kExit:
      return "exit";
  }
  return "?";
}

}  // namespace

// --- SourceHandle ----------------------------------------------------------

SourceHandle::SourceHandle(SourceHandle&& other) noexcept
    : loop_(std::exchange(other.loop_, nullptr)), source_(std::exchange(other.source_, nullptr)) {}

SourceHandle& SourceHandle::operator=(SourceHandle&& other) noexcept {
  if (this != &other) {
    reset();
    loop_ = std::exchange(other.loop_, nullptr);
    source_ = std::exchange(other.source_, nullptr);
  }
  return *this;
}

void SourceHandle::reset() noexcept {
  if (source_ != nullptr) {
    loop_->release(std::exchange(source_, nullptr));
  }
}

void SourceHandle::set_enabled(bool enabled) noexcept {
  if (source_ != nullptr) {
    loop_->set_enabled(source_, enabled);
  }
}

bool SourceHandle::enabled() const noexcept {
  return source_ != nullptr && source_->enabled;
}

const std::string& SourceHandle::description() const noexcept {
  static const std::string kEmpty;
  return source_ != nullptr ? source_->description : kEmpty;
}

void SourceHandle::set_deadline(Clock::time_point deadline) noexcept {
  if (source_ != nullptr && source_->kind == Kind::kTimer) {
    source_->deadline = deadline;
    source_->enabled = true;
  }
}

pid_t SourceHandle::pid() const noexcept {
  return source_ != nullptr ? source_->pid : 0;
}

int SourceHandle::send_signal(int signo) noexcept {
  if (source_ == nullptr || source_->kind != Kind::kChild) {
    return -EINVAL;
  }
  if (source_->reaped) {
    return -ESRCH;
  }
  // Until we reap it, the pid cannot be reused: the loop is the only reaper.
  // The pidfd pins the process all the same, as the kernel intends.
  if (source_->pidfd) {
    int r = sys::pidfd_send_signal(source_->pidfd.get(), signo);
    if (r != -ENOSYS) {
      return r;
    }
  }
  return ::kill(source_->pid, signo) < 0 ? -errno : 0;
}

int SourceHandle::signal_group(int signo) noexcept {
  if (source_ == nullptr || source_->kind != Kind::kChild) {
    return -EINVAL;
  }
  if (source_->reaped) {
    return -ESRCH;  // its group may be empty, and the id someone else's
  }
  if (::kill(-source_->pid, signo) == 0) {
    return 0;
  }
  // No such group: the child has not made it yet (its setpgid or setsid is
  // still to come where the parent runs on before the child's exec, as
  // under qemu-user, whose vfork is a fork). It is then the only process
  // the group will hold, and a signal pending on it acts once it unblocks.
  return errno == ESRCH ? send_signal(signo) : -errno;
}

// --- Loop ------------------------------------------------------------------

Loop::Loop() = default;
Loop::~Loop() = default;

int Loop::init() noexcept {
  sigemptyset(&signal_mask_);
  sigaddset(&signal_mask_, SIGCHLD);
  if (::pthread_sigmask(SIG_BLOCK, &signal_mask_, nullptr) != 0) {
    return -EINVAL;
  }
  return 0;
}

// The epoll set, with the signalfd and the timerfd in it, made for the first
// descriptor to watch: until then the loop has no use for any of them (an
// exec-mode PID 1 usually never has), and start-up is 10 syscalls shorter.
int Loop::open_epoll() noexcept {
  if (epoll_) {
    return 0;
  }
  Fd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) {
    return -errno;
  }
  signal_fd_.reset(::signalfd(-1, &signal_mask_, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signal_fd_) {
    return -errno;
  }
  timer_fd_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!timer_fd_) {
    return -errno;
  }
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = kSignalTag;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, signal_fd_.get(), &ev) < 0) {
    return -errno;
  }
  ev.data.u64 = kTimerTag;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, timer_fd_.get(), &ev) < 0) {
    return -errno;
  }
  armed_ = Clock::time_point::max();  // a new timerfd: disarmed
  epoll_ = std::move(epoll);
  return 0;
}

Source* Loop::track(std::unique_ptr<Source> source) {
  sources_.push_back(std::move(source));
  return sources_.back().get();
}

SourceHandle Loop::add_io(int fd, uint32_t events, IoFn fn, std::string description) {
  auto s = std::make_unique<Source>();
  s->kind = Kind::kIo;
  s->description = std::move(description);
  s->fd = fd;
  s->events = events;
  s->io_fn = std::move(fn);
  Source* source = track(std::move(s));
  set_enabled(source, true);
  return {this, source};
}

SourceHandle Loop::add_signal(const sigset_t& signals, SignalFn fn, std::string description) {
  auto s = std::make_unique<Source>();
  s->kind = Kind::kSignal;
  s->description = std::move(description);
  s->signals = signals;
  sigdelset(&s->signals, SIGCHLD);
  s->signal_fn = std::move(fn);
  ::pthread_sigmask(SIG_BLOCK, &s->signals, nullptr);
  Source* source = track(std::move(s));
  update_signal_mask();
  return {this, source};
}

SourceHandle Loop::add_signal(int signo, SignalFn fn, std::string description) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  return add_signal(set, std::move(fn), std::move(description));
}

SourceHandle Loop::add_timer(Clock::time_point deadline, TimerFn fn, std::string description) {
  auto s = std::make_unique<Source>();
  s->kind = Kind::kTimer;
  s->description = std::move(description);
  s->deadline = deadline;
  s->plain_fn = std::move(fn);
  return {this, track(std::move(s))};
}

SourceHandle Loop::add_child(pid_t pid, ChildFn fn, std::string description) {
  auto s = std::make_unique<Source>();
  s->kind = Kind::kChild;
  s->description = std::move(description);
  s->pid = pid;
  s->child_fn = std::move(fn);
  if (has_pidfd_) {
    int r = sys::pidfd_open(pid);
    if (r >= 0) {
      s->pidfd.reset(r);
    } else if (r == -ENOSYS) {
      has_pidfd_ = false;  // kernel < 5.3: plain pids, safe while we are the only reaper
      log_debug("no pidfd_open on this kernel; signalling by pid");
    }
  }
  Source* source = track(std::move(s));
  children_[pid] = source;
  return {this, source};
}

SourceHandle Loop::add_defer(DeferFn fn, std::string description) {
  auto s = std::make_unique<Source>();
  s->kind = Kind::kDefer;
  s->description = std::move(description);
  s->plain_fn = std::move(fn);
  return {this, track(std::move(s))};
}

SourceHandle Loop::add_exit(ExitFn fn, std::string description) {
  auto s = std::make_unique<Source>();
  s->kind = Kind::kExit;
  s->description = std::move(description);
  s->plain_fn = std::move(fn);
  return {this, track(std::move(s))};
}

void Loop::set_enabled(Source* source, bool enabled) noexcept {
  source->enabled = enabled;
  if (source->kind == Kind::kIo && source->in_epoll != enabled) {
    struct epoll_event ev {};
    ev.events = source->events;
    ev.data.ptr = source;
    int op = enabled ? EPOLL_CTL_ADD : EPOLL_CTL_DEL;
    int r = open_epoll();
    if (r == 0 && ::epoll_ctl(epoll_.get(), op, source->fd, &ev) < 0) {
      r = -errno;
    }
    if (r < 0) {
      log_debug("watching fd {} for '{}': {}", source->fd, source->description, errno_string(-r));
      source->enabled = false;
      return;
    }
    source->in_epoll = enabled;
    watched_ += enabled ? 1 : -1;
  }
  if (source->kind == Kind::kSignal) {
    update_signal_mask();
  }
}

void Loop::release(Source* source) noexcept {
  set_enabled(source, false);
  source->dead = true;
  if (source->kind == Kind::kChild && !source->reaped) {
    children_.erase(source->pid);
  }
  garbage_ = true;
}

void Loop::collect_garbage() {
  if (!garbage_) {
    return;
  }
  garbage_ = false;
  std::erase_if(sources_, [](const std::unique_ptr<Source>& s) { return s->dead; });
}

void Loop::update_signal_mask() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (const auto& s : sources_) {
    if (s->kind == Kind::kSignal && s->enabled && !s->dead) {
      sigorset(&mask, &mask, &s->signals);
    }
  }
  signal_mask_ = mask;
  if (signal_fd_ && ::signalfd(signal_fd_.get(), &signal_mask_, SFD_NONBLOCK | SFD_CLOEXEC) < 0) {
    log_debug("signalfd update: {}", errno_string(errno));
  }
}

Clock::time_point Loop::next_deadline() const {
  Clock::time_point next = Clock::time_point::max();
  for (const auto& s : sources_) {
    if (s->kind == Kind::kTimer && s->enabled && !s->dead && s->deadline < next) {
      next = s->deadline;
    }
  }
  return next;
}

void Loop::arm_timer() {
  const Clock::time_point next = next_deadline();
  if (next == armed_) {
    return;
  }
  struct itimerspec spec {};
  if (next != Clock::time_point::max()) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(next.time_since_epoch()).count();
    if (ns <= 0) {
      ns = 1;  // zero would disarm
    }
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  if (::timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &spec, nullptr) == 0) {
    armed_ = next;
  }
}

bool Loop::call(Source* source, const std::function<int()>& invoke) {
  int r;
  try {
    r = invoke();
  } catch (const std::exception& e) {
    log_error("{} source '{}' threw: {}; disabling it", kind_name(source->kind), source->description, e.what());
    set_enabled(source, false);
    return false;
  } catch (...) {
    log_error("{} source '{}' threw; disabling it", kind_name(source->kind), source->description);
    set_enabled(source, false);
    return false;
  }
  if (r < 0) {
    log_error("{} source '{}' failed: {}; disabling it", kind_name(source->kind), source->description,
              errno_string(-r));
    set_enabled(source, false);
    return false;
  }
  return true;
}

namespace {

// What the signalfd would have said about the signal sigtimedwait() took.
signalfd_siginfo to_signalfd_siginfo(const siginfo_t& info) {
  signalfd_siginfo out{};
  out.ssi_signo = static_cast<uint32_t>(info.si_signo);
  out.ssi_errno = info.si_errno;
  out.ssi_code = info.si_code;
  out.ssi_pid = static_cast<uint32_t>(info.si_pid);
  out.ssi_uid = info.si_uid;
  out.ssi_status = info.si_status;
  out.ssi_int = info.si_value.sival_int;
  out.ssi_ptr = reinterpret_cast<uint64_t>(info.si_value.sival_ptr);
  return out;
}

timespec to_timespec(Duration d) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

}  // namespace

// No descriptor to watch: sleep in sigtimedwait() until a signal comes or the
// next timer is due, then take every signal already pending, as a read of the
// signalfd would. Returns the number of wake-up causes handled, or -errno.
int Loop::wait_signals(int timeout_ms) {
  const Clock::time_point next = next_deadline();
  timespec until{};
  const timespec* timeout = nullptr;
  if (timeout_ms >= 0 || next != Clock::time_point::max()) {
    Duration wait = next == Clock::time_point::max() ? Duration::max() : std::max(next - Clock::now(), Duration{});
    if (timeout_ms >= 0) {
      wait = std::min<Duration>(wait, std::chrono::milliseconds(timeout_ms));
    }
    until = to_timespec(wait);
    timeout = &until;
  }
  siginfo_t info{};
  int signo = sys::sigtimedwait(&signal_mask_, &info, timeout);
  if (signo < 0 && signo != -EAGAIN) {
    return signo == -EINTR ? 0 : signo;
  }
  int dispatched = 0;
  if (signo > 0) {
    ++dispatched;
    bool child = false;
    static constexpr timespec kNow{};
    while (signo > 0) {
      if (signo == SIGCHLD) {
        child = true;
      } else {
        route_signal(to_signalfd_siginfo(info));
      }
      do {
        signo = sys::sigtimedwait(&signal_mask_, &info, &kNow);
      } while (signo == -EINTR);
    }
    if (child) {
      on_child_signal();
    }
  }
  if (run_due_timers() > 0) {
    ++dispatched;
  }
  return dispatched;
}

void Loop::dispatch_signals() {
  signalfd_siginfo infos[16];
  for (;;) {
    ssize_t n = ::read(signal_fd_.get(), infos, sizeof(infos));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    bool child = false;
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(infos[0]); ++i) {
      if (static_cast<int>(infos[i].ssi_signo) == SIGCHLD) {
        child = true;
      } else {
        route_signal(infos[i]);
      }
    }
    if (child) {
      on_child_signal();
    }
  }
}

void Loop::route_signal(const signalfd_siginfo& info) {
  const size_t count = sources_.size();  // handlers may add sources
  for (size_t j = 0; j < count; ++j) {
    Source* s = sources_[j].get();
    if (s->kind == Kind::kSignal && s->enabled && !s->dead &&
        sigismember(&s->signals, static_cast<int>(info.ssi_signo)) == 1) {
      call(s, [&] { return s->signal_fn(info); });
      return;
    }
  }
}

void Loop::dispatch_timers() {
  uint64_t expirations;
  while (::read(timer_fd_.get(), &expirations, sizeof(expirations)) < 0 && errno == EINTR) {
  }
  armed_ = Clock::time_point::max();  // fired: one-shot
  run_due_timers();
}

int Loop::run_due_timers() {
  int ran = 0;
  const Clock::time_point now = Clock::now();
  const size_t count = sources_.size();
  for (size_t i = 0; i < count; ++i) {
    Source* s = sources_[i].get();
    if (s->kind == Kind::kTimer && s->enabled && !s->dead && s->deadline <= now) {
      s->deadline = Clock::time_point::max();
      call(s, s->plain_fn);
      ++ran;
    }
  }
  return ran;
}

int Loop::run_once(int timeout_ms) {
  collect_garbage();
  int dispatched = 0;
  bool busy = false;
  const size_t count = sources_.size();
  for (size_t i = 0; i < count; ++i) {
    Source* s = sources_[i].get();
    if (s->kind == Kind::kDefer && s->enabled && !s->dead) {
      call(s, s->plain_fn);
      ++dispatched;
      busy = busy || (s->enabled && !s->dead);
    }
  }
  if (exiting_) {
    return dispatched;
  }
  if (watched_ == 0) {
    int r = wait_signals(busy ? 0 : timeout_ms);
    collect_garbage();
    return r < 0 ? r : dispatched + r;
  }
  arm_timer();
  struct epoll_event events[32];
  int n = sys::epoll_wait(epoll_.get(), events, 32, busy ? 0 : timeout_ms);
  if (n == -EINTR) {
    return dispatched;
  }
  if (n < 0) {
    return n;
  }
  for (int i = 0; i < n; ++i) {
    uint64_t tag = events[i].data.u64;
    if (tag == kSignalTag) {
      dispatch_signals();
    } else if (tag == kTimerTag) {
      dispatch_timers();
    } else {
      auto* s = static_cast<Source*>(events[i].data.ptr);
      if (!s->enabled || s->dead) {
        continue;
      }
      uint32_t revents = events[i].events;
      call(s, [&] { return s->io_fn(revents); });
    }
    ++dispatched;
  }
  collect_garbage();
  return dispatched;
}

void Loop::exit(int code) noexcept {
  if (!exiting_) {
    exiting_ = true;
    exit_code_ = code;
  }
}

int Loop::run() {
  while (!exiting_) {
    int r = run_once(-1);
    if (r < 0) {
      return r;
    }
  }
  const size_t count = sources_.size();
  for (size_t i = 0; i < count; ++i) {
    Source* s = sources_[i].get();
    if (s->kind == Kind::kExit && s->enabled && !s->dead) {
      call(s, s->plain_fn);
    }
  }
  return exit_code_;
}

}  // namespace trainit

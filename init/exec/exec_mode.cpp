#include "exec/exec_mode.h"

#include <fmt/core.h>
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "base/exit_code.h"
#include "base/log.h"
#include "exec/privileges.h"
#include "exec/termination_log.h"
#include "loop/loop.h"
#include "notify/notify.h"
#include "notify/receiver.h"
#include "proc/escalation.h"
#include "proc/signals.h"
#include "proc/spawn.h"
#include "proc/tree.h"

extern char** environ;

namespace trainit {
namespace {

using namespace std::chrono_literals;

// Restart backoff: 0.1 s, doubling, at most 10 s. A run of 10 s or more
// counts as healthy and starts the count (and the backoff) afresh.
constexpr Duration kFirstBackoff = 100ms;
constexpr Duration kMaxBackoff = 10s;
constexpr Duration kHealthyRun = 10s;

// How long the rest of the processes wait for their stop signal after PROGRAM
// got its own (see stop_everyone).
constexpr Duration kSweepDelay = 1ms;
// PROGRAM's STATUS is passed on (and logged) at most once a period: the
// latest wins, so a flood costs the supervisor ten messages a second.
constexpr Duration kStatusPeriod = 100ms;

class ExecSupervisor {
 public:
  ExecSupervisor(const Options& options, const Pid1& pid1, Loop& loop)
      : options_(options),
        pid1_(pid1),
        loop_(loop),
        notifier_(Notifier::from_environment()),
        escalation_(
            loop, options.grace, [this](int signo) { stop_everyone(signo); },
            [this] {
              log_warning("processes still ran {:.3f} s after the stop signal: SIGKILL sent", seconds(options_.grace));
            }),
        sweep_(loop.add_timer(
            Clock::time_point::max(),
            [this] {
              sweep();
              return 0;
            },
            "stop sweep")) {
    bool changed = false;
    child_env_ = environment_for_children(environ, &changed);
    if (pid1.privileges != nullptr && pid1.privileges->switches_user()) {
      pid1.privileges->set_identity(child_env_);
      changed = true;
    }
    spawn_options_.credentials = pid1.privileges != nullptr ? pid1.privileges->credentials() : nullptr;
    spawn_options_.argv = options.command;
    spawn_options_.env = changed ? &child_env_ : nullptr;
    spawn_options_.grouping = Grouping::kProcessGroup;
    spawn_options_.foreground = true;
    spawn_options_.pass_socket_activation = true;
    spawn_options_.signals = &pid1.parent_signals;
  }

  // Starts PROGRAM the first time. Returns -1 when it runs, else the code to
  // exit with (nothing was started: there is nothing to drain).
  int start() {
    if (options_.ready == Ready::kNotify) {
      if (int r = receiver_.open(); r < 0) {
        log_error("cannot open a NOTIFY_SOCKET for the child: {}", errno_string(-r));
        return exit_code::kOsError;
      }
      child_env_.push_back("NOTIFY_SOCKET=" + receiver_.address());
      spawn_options_.env = &child_env_;
      child_notify_ = loop_.add_io(
          receiver_.fd(), EPOLLIN, [this](uint32_t) { return on_child_notify(); }, "child's NOTIFY_SOCKET");
    }
    if (int code = spawn_child(); code >= 0) {
      loop_.reap();
      write_end();
      return code;
    }
    // PROGRAM runs: what trainit needs from here is signalling it (and
    // starting it again, with --restart).
    if (pid1_.privileges != nullptr) {
      pid1_.privileges->narrow_own({.more_spawns = options_.restart != Restart::kNo});
    }
    signals_ = loop_.add_signal(
        forwardable_signals(), [this](const signalfd_siginfo& i) { return on_signal(i); }, "forwarded signals");
    loop_.set_orphan_handler([this](const siginfo_t& info) { on_orphan(info); });
    loop_.set_children_changed_handler([this] { check_drained(); });
    notifier_.start_watchdog(loop_);
    if (options_.ready == Ready::kSpawn) {
      notifier_.send("READY=1");
    }
    return -1;
  }

  // The exit code once the loop has stopped.
  [[nodiscard]] int exit_code() const { return options_.exit_zero.test(static_cast<size_t>(code_)) ? 0 : code_; }

 private:
  enum class Phase { kRunning, kStopDelay, kDraining, kRestartWait, kDone };

  // PROGRAM is alive (or a zombie not yet reaped: its pid is still its own).
  [[nodiscard]] bool program_runs() const { return phase_ == Phase::kRunning || phase_ == Phase::kStopDelay; }

  // Returns -1 when PROGRAM runs, else the exit code for the failure.
  int spawn_child() {
    // PROGRAM's pidfd is taken while nothing reaps behind our back.
    (void)loop_.set_kernel_reaps(false);
    auto spawned = spawn(spawn_options_);
    if (!spawned) {
      log_error("{}", spawned.error().message);
      code_ = spawned.error().exit_code;
      end_ = spawned.error().message;
      return code_;
    }
    // Point of no return (the first time): a child runs. From here the only
    // way out is through the loop; errors are logged and lived with.
    child_pid_ = spawned->pid;
    receiver_.serve(child_pid_);  // NotifyAccess=main: this run of PROGRAM, nobody else
    started_at_ = Clock::now();
    child_ = loop_.add_child(
        child_pid_, [this](const siginfo_t& info) { return on_child_exit(info); }, "main child");
    // Orphans are the kernel's to reap, where it keeps PROGRAM's status for
    // us; -w wants to hear of each, so trainit reaps them itself then.
    if (!options_.warn_on_reap) {
      if (int r = loop_.set_kernel_reaps(true); r < 0) {
        log_debug("reaping orphans ourselves: the kernel cannot ({})", errno_string(-r));
      }
    }
    phase_ = Phase::kRunning;
    log_info("spawned '{}' with pid {}", options_.command[0], child_pid_);
    notifier_.status("running '{}' (pid {})", options_.command[0], child_pid_);
    return -1;
  }

  int on_child_exit(const siginfo_t& info) {
    // PROGRAM's last status goes out now, before what trainit says of its
    // end (restarting, draining, exited), never after it.
    if (status_waiting_) {
      status_timer_.reset();
      pass_status();
    }
    status_timer_.reset();
    code_ = exit_code::of(info);
    end_ = fmt::format("'{}' (pid {}) {}", options_.command[0], child_pid_,
                       info.si_code == CLD_EXITED ? fmt::format("exited with {}", info.si_status)
                                                  : fmt::format("was killed by {}", signal_name(info.si_status)));
    log_info("main child {} {} {}", child_pid_, info.si_code == CLD_EXITED ? "exited with" : "was killed by signal",
             info.si_status);
    if (!stopping_ && should_restart()) {
      restart_pending_ = true;
    } else if (!options_.drain) {
      finish();
      return 0;
    }
    begin_drain();
    return 0;
  }

  bool should_restart() {
    // A code -e declares a success is no failure (systemd's SuccessExitStatus=).
    if (options_.restart == Restart::kNo || (options_.restart == Restart::kOnFailure && exit_code() == 0)) {
      return false;
    }
    if (Clock::now() - started_at_ >= kHealthyRun) {
      restarts_ = 0;
    }
    if (options_.max_restarts >= 0 && restarts_ >= options_.max_restarts) {
      log_warning("'{}' exited with {}; not restarting after {} restart{}", options_.command[0], code_, restarts_,
                  restarts_ == 1 ? "" : "s");
      return false;
    }
    return true;
  }

  // PROGRAM is gone: everything else gets the stop signal, the grace, then
  // SIGKILL, and trainit waits until nothing is left.
  void begin_drain() {
    phase_ = Phase::kDraining;
    if (!loop_.has_children()) {
      drained();
      return;
    }
    if (!escalation_.started()) {
      log_info("draining: stopping the remaining processes");
      notifier_.status("draining: stopping the remaining processes");
      escalation_.start(SIGTERM);
    }
  }

  void check_drained() {
    if (phase_ == Phase::kDraining && !loop_.has_children()) {
      drained();
    }
  }

  void drained() {
    escalation_.finish();
    cancel_sweep();  // nobody left to sweep
    if (restart_pending_ && !stopping_) {
      schedule_restart();
      return;
    }
    finish();
  }

  void schedule_restart() {
    restart_pending_ = false;
    phase_ = Phase::kRestartWait;
    Duration delay = std::min<Duration>(kFirstBackoff * (1LL << std::min(restarts_, 20)), kMaxBackoff);
    ++restarts_;
    log_warning("'{}' exited with {}; restart {} in {:.1f} s", options_.command[0], code_, restarts_, seconds(delay));
    notifier_.status("restarting '{}' in {:.1f} s (restart {})", options_.command[0], seconds(delay), restarts_);
    restart_timer_ = loop_.add_timer(
        Clock::now() + delay,
        [this] {
          restart_timer_.reset();
          if (spawn_child() >= 0) {
            begin_drain();  // could not start again: leave with its code
          }
          return 0;
        },
        "restart backoff");
  }

  void finish() {
    if (sweep_pending_) {
      sweep();  // leaving at once (--no-drain): the rest still get their signal
    }
    phase_ = Phase::kDone;
    notifier_.status("exited with {}", exit_code());
    write_end();
    loop_.exit(exit_code());
  }

  // How PROGRAM ended, in one line, where the platform looks for it
  // (Kubernetes' termination message), when that file is there.
  void write_end() const {
    if (options_.termination_log.empty()) {
      return;
    }
    const std::string line = fmt::format("{}; exit {}", end_, exit_code());
    if (auto r = write_termination_log(options_.termination_log, line); !r && r.error().errnum != ENOENT) {
      log_warning("{}", r.error().message);
    }
  }

  void on_orphan(const siginfo_t& info) {
    if (options_.warn_on_reap) {
      log_warning("reaped zombie process {} ({} {})", info.si_pid,
                  info.si_code == CLD_EXITED ? "exit status" : "signal", info.si_status);
    }
    check_drained();
  }

  int on_signal(const signalfd_siginfo& info) {
    const int signo = static_cast<int>(info.ssi_signo);
    if (signo == SIGPIPE && static_cast<pid_t>(info.ssi_pid) == ::getpid()) {
      return 0;  // our own write to a closed pipe: not the child's business
    }
    // With --forward-only a stop is forwarded like any signal; but between
    // PROGRAM's exit and its restart there is no PROGRAM to take it, and it
    // ends the restarting.
    const bool no_program = phase_ == Phase::kDraining || phase_ == Phase::kRestartWait;
    const bool stop = signo == SIGTERM || signo == SIGINT;
    if (stop && (!options_.forward_only || no_program)) {
      request_stop(signo);
    } else if (stop && !stop_delay_ && phase_ == Phase::kRunning && options_.stop_delay > Duration::zero()) {
      // --forward-only: PROGRAM alone gets it, after the delay all the same
      // (a second one during it goes at once).
      log_info("got {}; passing it on in {:.3f} s", signal_name(signo), seconds(options_.stop_delay));
      stop_delay_ = loop_.add_timer(
          Clock::now() + options_.stop_delay,
          [this, signo] {
            stop_delay_.reset();
            forward(signo);
            return 0;
          },
          "stop delay");
    } else {
      if (stop) {
        stop_delay_.reset();  // a second stop during the delay: now
      }
      forward(signo);
    }
    return 0;
  }

  // tini's routing: PROGRAM, or its process group with -g. The signal goes
  // before any word about it: on this path every microsecond is the child's.
  void forward(int signo) {
    if (!program_runs()) {
      return;  // no PROGRAM to forward to
    }
    int r = options_.kill_process_group ? (::kill(-child_pid_, signo) < 0 ? -errno : 0) : child_.send_signal(signo);
    log_info("forwarded {} to {} {}", signal_name(signo), options_.kill_process_group ? "process group" : "pid",
             child_pid_);
    if (r < 0 && r != -ESRCH) {
      log_warning("cannot send {} to {}: {}", signal_name(signo), child_pid_, errno_string(-r));
    }
  }

  void request_stop(int signo) {
    if (phase_ == Phase::kRestartWait) {  // a stop ends the restarting
      announce_stopping();
      stopping_ = true;
      restart_timer_.reset();
      finish();
      return;
    }
    if (phase_ == Phase::kRunning && !stopping_ && options_.stop_delay > Duration::zero()) {
      announce_stopping();
      stopping_ = true;
      phase_ = Phase::kStopDelay;
      log_info("got {}; passing it on in {:.3f} s", signal_name(signo), seconds(options_.stop_delay));
      notifier_.status("stopping in {:.1f} s", seconds(options_.stop_delay));
      stop_delay_ = loop_.add_timer(
          Clock::now() + options_.stop_delay,
          [this, signo] {
            stop_now(signo);
            return 0;
          },
          "stop delay");
      return;
    }
    const bool first = !stopping_;
    stop_now(signo);  // also a second stop request during the delay
    if (first) {
      notifier_.send("STOPPING=1");  // after the signal: the child need not wait for our supervisor
    }
  }

  void announce_stopping() {
    if (!stopping_) {
      notifier_.send("STOPPING=1");
    }
  }

  void stop_now(int signo) {
    stopping_ = true;
    stop_delay_.reset();
    if (phase_ == Phase::kStopDelay) {
      phase_ = Phase::kRunning;
    }
    escalation_.start(signo);  // PROGRAM's signal first, the words after
    log_info("stopping: {} sent to every process, SIGKILL after {:.3f} s", signal_name(signo), seconds(options_.grace));
    notifier_.status("stopping: {} sent, SIGKILL in {:.1f} s", signal_name(signo), seconds(options_.grace));
  }

  // Every process trainit answers for: as PID 1 the namespace, otherwise our
  // descendants (and PROGRAM's group, should /proc be missing). PROGRAM
  // first, and the CPU to itself: the sweep of the rest (which reads /proc)
  // waits kSweepDelay while trainit sleeps, so that PROGRAM, woken on a
  // busy CPU, is not kept waiting for it. A PROGRAM that exits meanwhile
  // and leaves nobody behind ends the stop before any sweep.
  void stop_everyone(int signo) {
    sweep_signal_ = signo;
    child_signalled_ = child_.send_signal(signo) == 0;
    if (child_signalled_ && signo != SIGKILL) {
      // The CPU to PROGRAM first, then SIGCONT: a stopped PROGRAM sees the
      // stop now, and one that runs (nearly always) is not kept waiting for
      // a signal it ignores.
      ::sched_yield();
      (void)child_.send_signal(SIGCONT);
      sweep_.set_deadline(Clock::now() + kSweepDelay);
      sweep_pending_ = true;
      return;
    }
    sweep();
  }

  void cancel_sweep() {
    sweep_.set_deadline(Clock::time_point::max());
    sweep_pending_ = false;
  }

  void sweep() {
    cancel_sweep();
    // PROGRAM has had its signal; until it is reaped, its pid is still its own.
    const pid_t skip = child_signalled_ && program_runs() ? child_pid_ : 0;
    signal_all(pid1_.is_pid1, sweep_signal_, child_pid_, skip);
  }

  // The child speaks sd_notify to us: its READY=1 is ours, its STATUS ours too.
  int on_child_notify() {
    return receiver_.drain([this](std::string_view key, std::string_view value) {
      if (key == "READY" && value == "1" && !child_ready_) {
        child_ready_ = true;
        log_info("'{}' reports it is ready", options_.command[0]);
        notifier_.send("READY=1");
      } else if (key == "STATUS") {
        child_status_.assign(value);
        pass_status();
      }
    }) < 0
               ? -EIO
               : 0;
  }

  // PROGRAM's latest STATUS, unless one went out less than kStatusPeriod
  // ago: then the timer passes the latest on when the period ends.
  void pass_status() {
    if (status_timer_) {
      status_waiting_ = true;
      return;
    }
    status_waiting_ = false;
    log_info("'{}' reports status: {}", options_.command[0], child_status_);
    notifier_.status(child_status_);
    status_timer_ = loop_.add_timer(
        Clock::now() + kStatusPeriod,
        [this] {
          status_timer_.reset();
          if (status_waiting_) {
            pass_status();
          }
          return 0;
        },
        "PROGRAM's status period");
  }

  const Options& options_;
  const Pid1& pid1_;
  Loop& loop_;
  Notifier notifier_;
  Escalation escalation_;
  NotifyReceiver receiver_;
  std::vector<std::string> child_env_;
  SpawnOptions spawn_options_;
  SourceHandle signals_, child_, restart_timer_, stop_delay_, child_notify_, status_timer_;
  std::string child_status_;     // PROGRAM's latest STATUS
  bool status_waiting_ = false;  // it came within the period: the timer passes it on
  SourceHandle sweep_;
  int sweep_signal_ = SIGTERM;
  bool sweep_pending_ = false;
  Phase phase_ = Phase::kRunning;
  pid_t child_pid_ = 0;
  Clock::time_point started_at_;
  int code_ = 0;
  int restarts_ = 0;
  bool child_signalled_ = false;
  bool stopping_ = false;
  bool restart_pending_ = false;
  bool child_ready_ = false;
  std::string end_;  // how PROGRAM ended last, in words
};

}  // namespace

int run_exec(const Options& options, const Pid1& pid1) {
  Loop loop;
  if (int r = loop.init(); r < 0) {
    log_error("cannot create the event loop: {}", errno_string(-r));
    return exit_code::kOsError;
  }
  ExecSupervisor supervisor(options, pid1, loop);
  if (int code = supervisor.start(); code >= 0) {
    return code;
  }
  int r = loop.run();
  if (r < 0) {
    log_error("event loop failed: {}; killing everything", errno_string(-r));
    fatal_exit(pid1, 0);
  }
  loop.reap();  // zombies that exited along with the child (--no-drain)
  return supervisor.exit_code();
}

}  // namespace trainit

#include "exec_mode.h"

#include <unistd.h>

#include <cerrno>

#include "base/log.h"
#include "loop/loop.h"
#include "proc/escalation.h"
#include "proc/spawn.h"

namespace trainit {
namespace {

constexpr int kExitOsError = 71;  // EX_OSERR: could not start at all

int status_code(const siginfo_t& info) {
  return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

}  // namespace

int run_exec(const Options& options, const Pid1& pid1) {
  Loop loop;
  if (int r = loop.init(); r < 0) {
    log_error("cannot create the event loop: {}", errno_string(-r));
    return kExitOsError;
  }

  SpawnOptions spawn_options;
  spawn_options.argv = options.command;
  spawn_options.grouping = Grouping::kProcessGroup;
  spawn_options.foreground = true;
  spawn_options.signals = &pid1.parent_signals;
  auto spawned = spawn(spawn_options);
  if (!spawned) {
    log_error("{}", spawned.error().message);
    loop.reap();
    int e = spawned.error().errnum;
    return e == EAGAIN || e == ENOMEM ? kExitOsError : exec_failure_status(e);
  }
  // Point of no return: a child runs. From here the only way out is the
  // child's exit (or the fatal path); errors are logged and lived with.
  const pid_t child = spawned->pid;
  log_info("spawned '{}' with pid {}", options.command[0], child);

  int code = 0;
  SourceHandle child_source = loop.add_child(
      child,
      [&](const siginfo_t& info) {
        code = status_code(info);
        log_info("main child {} {} {}", child, info.si_code == CLD_EXITED ? "exited with" : "was killed by signal",
                 info.si_status);
        loop.exit(code);
        return 0;
      },
      "main child");

  auto deliver = [&](int signo, bool whole_group) {
    int r = whole_group ? (::kill(-child, signo) < 0 ? -errno : 0) : child_source.send_signal(signo);
    if (r < 0 && r != -ESRCH) {
      log_warning("cannot send {} to {}: {}", signal_name(signo), child, errno_string(-r));
    }
  };
  Escalation stop(loop, options.grace, [&](int signo) {
    if (signo == SIGKILL) {
      log_warning("pid {} still runs {} s after the stop signal; sending SIGKILL to its process group", child,
                  std::chrono::duration<double>(options.grace).count());
      deliver(SIGKILL, true);
      deliver(SIGKILL, false);  // the child may have left its group
      return;
    }
    deliver(signo, options.kill_process_group);
  });

  const pid_t self = ::getpid();
  SourceHandle signals = loop.add_signal(
      forwardable_signals(),
      [&](const signalfd_siginfo& info) {
        int signo = static_cast<int>(info.ssi_signo);
        if (signo == SIGPIPE && static_cast<pid_t>(info.ssi_pid) == self) {
          return 0;  // our own write to a closed pipe: not the child's business
        }
        log_info("forwarding {} to {}{}", signal_name(signo), options.kill_process_group ? "process group " : "pid ",
                 child);
        if (signo == SIGTERM || signo == SIGINT) {
          stop.start(signo);
        } else {
          deliver(signo, options.kill_process_group);
        }
        return 0;
      },
      "forwarded signals");

  loop.set_orphan_handler([&](const siginfo_t& info) {
    if (options.warn_on_reap) {
      log_warning("reaped zombie process {} ({} {})", info.si_pid,
                  info.si_code == CLD_EXITED ? "exit status" : "signal", info.si_status);
    }
  });

  int r = loop.run();
  if (r < 0) {
    log_error("event loop failed: {}; killing everything", errno_string(-r));
    fatal_exit(pid1, child);
  }
  loop.reap();  // zombies that exited along with the child
  if (options.exit_zero.test(static_cast<size_t>(code))) {
    code = 0;
  }
  return code;
}

}  // namespace trainit

// The loop's children: the one reaper (waitid on SIGCHLD), and, where the
// kernel reaps for us (set_kernel_reaps), their ends read from their pidfds.
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <utility>
#include <vector>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "loop/source.h"

namespace trainit {
namespace {

// PIDFD_GET_INFO (Linux 6.13), and PIDFD_INFO_EXIT (6.15): the kernel keeps a
// process's wait status for whoever holds its pidfd, even once it has reaped
// the process itself. The first published layout of the struct.
struct PidfdInfo {
  uint64_t mask;
  uint64_t cgroupid;
  uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  int32_t exit_code;  // a wait status, with PIDFD_INFO_EXIT in mask
};
static_assert(sizeof(PidfdInfo) == 64, "PIDFD_INFO_SIZE_VER0");
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);  // NOLINT(hicpp-signed-bitwise)
constexpr uint64_t kPidfdInfoExit = 1U << 3;

// Linux 6.15 or later, by the release uname() gives ("6.18.44-..."). Parsed
// by hand: scanf would page in much of libc on exec mode's start.
bool kernel_keeps_exit_status() {
  utsname u{};
  if (::uname(&u) < 0) {
    return false;
  }
  const char* p = u.release;
  auto number = [&p] {
    int n = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
      n = n * 10 + (*p - '0');
    }
    return n;
  };
  const int major = number();
  if (*p++ != '.') {
    return false;
  }
  const int minor = number();
  return major > 6 || (major == 6 && minor >= 15);
}

// What the kernel kept of the process behind `pidfd`: 1 with `info` filled as
// waitid() would once it has ended and been reaped, 0 while it runs, -errno
// when the kernel cannot say.
int kept_exit_status(int pidfd, pid_t pid, siginfo_t* info) {
  PidfdInfo pi{};
  pi.mask = kPidfdInfoExit;
  if (::ioctl(pidfd, kPidfdGetInfo, &pi) < 0) {
    return -errno;
  }
  if ((pi.mask & kPidfdInfoExit) == 0) {
    return 0;
  }
  const int status = pi.exit_code;
  *info = siginfo_t{};
  info->si_signo = SIGCHLD;
  info->si_pid = pid;
  if (WIFEXITED(status)) {
    info->si_code = CLD_EXITED;
    info->si_status = WEXITSTATUS(status);
  } else {
    info->si_code = WCOREDUMP(status) ? CLD_DUMPED : CLD_KILLED;
    info->si_status = WTERMSIG(status);
  }
  return 1;
}

// A process that has ended (its pidfd reads ready) but whose status the kernel
// has not kept yet is in the last steps of its own exit, between its notice to
// us and its release (PIDFD_GET_INFO says ESRCH or nothing meanwhile); or a
// zombie left for waitid() because it ended while the kernel did not reap for
// us. Returns 1 with `info` filled once the status is there, 0 while the
// process runs, -EAGAIN while it is still ending after a few yields (the loop
// asks again shortly), or another -errno.
int settle_exit_status(int pidfd, pid_t pid, siginfo_t* info) {
  pollfd ready{pidfd, POLLIN, 0};
  if (::poll(&ready, 1, 0) != 1) {
    return 0;  // running
  }
  for (int tries = 0; tries < 100; ++tries) {
    int r = sys::waitid(P_PIDFD, static_cast<id_t>(pidfd), info, WEXITED | WNOHANG);
    if (r == 0 && info->si_pid != 0) {
      return 1;  // a zombie of ours after all
    }
    r = kept_exit_status(pidfd, pid, info);
    if (r == 1 || (r < 0 && r != -ESRCH)) {
      return r;
    }
    ::sched_yield();
  }
  return -EAGAIN;
}

}  // namespace

int Loop::reap() {
  int reaped = 0;
  for (;;) {
    siginfo_t info{};
    int r = sys::waitid(P_ALL, 0, &info, WEXITED | WNOHANG);
    if (r == -EINTR) {
      continue;
    }
    if (r < 0 || info.si_pid == 0) {
      break;  // -ECHILD: no children left; si_pid 0: none has exited yet
    }
    ++reaped;
    auto it = children_.find(info.si_pid);
    if (it == children_.end()) {
      ++orphans_reaped_;
      if (orphan_fn_) {
        orphan_fn_(info);
      }
      continue;
    }
    child_ended(it->second, info);
  }
  return reaped;
}

void Loop::child_ended(Source* source, const siginfo_t& info) {
  children_.erase(source->pid);
  source->reaped = true;
  source->pidfd.reset();
  if (source->enabled && !source->dead) {
    call(source, [&] { return source->child_fn(info); });
  }
}

int Loop::set_kernel_reaps(bool on) {
  if (on == kernel_reaps_) {
    return 0;
  }
  if (on) {
    // Each child we wait for must be one whose status the kernel keeps.
    if (!has_pidfd_ || !kernel_keeps_exit_status()) {
      return -EOPNOTSUPP;
    }
    for (const auto& [pid, source] : children_) {
      siginfo_t info{};
      if (!source->pidfd || kept_exit_status(source->pidfd.get(), pid, &info) < 0) {
        return -EOPNOTSUPP;
      }
    }
  }
  // SIG_DFL keeps SIGCHLD coming (blocked, it still wakes us) and, unlike
  // SIG_IGN, does not pass on to what the children exec.
  struct sigaction child {};
  child.sa_handler = SIG_DFL;
  child.sa_flags = on ? SA_NOCLDWAIT : 0;
  if (::sigaction(SIGCHLD, &child, nullptr) < 0) {
    return -errno;
  }
  kernel_reaps_ = on;
  // Setting SIG_DFL discards a pending SIGCHLD (POSIX: its default is to
  // ignore it): whatever ended meanwhile is looked for on the next turn.
  if (!reap_again_) {
    reap_again_ = add_timer(
        Clock::time_point::max(),
        [this] {
          on_child_signal();
          return 0;
        },
        "children's ends, looked for again");
  }
  reap_again_.set_deadline(Clock::now());
  return 0;
}

int Loop::collect_kernel_reaped() {
  int collected = 0;
  std::vector<std::pair<pid_t, Source*>> waiting(children_.begin(), children_.end());
  for (const auto& entry : waiting) {
    const pid_t pid = entry.first;
    Source* source = entry.second;
    if (source->dead || !source->pidfd) {
      continue;  // released by a handler called before it in this pass
    }
    siginfo_t info{};
    const int r = settle_exit_status(source->pidfd.get(), pid, &info);
    if (r == 0) {
      continue;
    }
    if (r == -EAGAIN) {
      // No further SIGCHLD will come for it: look again in a millisecond.
      reap_again_.set_deadline(Clock::now() + std::chrono::milliseconds(1));
      continue;
    }
    if (r < 0) {
      // The kernel checked in set_kernel_reaps() cannot say after all. It
      // has ended: say so with EX_OSERR rather than wait for it forever.
      log_error("child {} ('{}') ended, but its exit status is lost: {}", pid, source->description, errno_string(-r));
      info = siginfo_t{};
      info.si_signo = SIGCHLD;
      info.si_pid = pid;
      info.si_code = CLD_EXITED;
      info.si_status = exit_code::kOsError;
    }
    ++collected;
    child_ended(source, info);
  }
  return collected;
}

void Loop::on_child_signal() {
  reap();
  if (kernel_reaps_) {
    collect_kernel_reaped();
  }
  if (children_changed_fn_) {
    children_changed_fn_();
  }
}

bool Loop::has_children() const noexcept {
  siginfo_t info{};
  int r;
  do {
    r = sys::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r == -EINTR);
  return r != -ECHILD;
}

}  // namespace trainit

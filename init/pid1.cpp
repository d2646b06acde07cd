#include "pid1.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/log.h"
#include "proc/tree.h"

extern char** environ;

namespace trainit {

namespace {

// sched_setattr(2)'s argument (glibc 2.36 has no wrapper).
struct SchedAttr {
  uint32_t size;
  uint32_t policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime;  // SCHED_OTHER: the time slice asked for (Linux 6.12+)
  uint64_t deadline;
  uint64_t period;
};
constexpr uint64_t kSchedResetOnFork = 1;     // SCHED_FLAG_RESET_ON_FORK
constexpr uint64_t kShortestSlice = 100'000;  // ns: the least the kernel grants

// trainit wakes for a few microseconds of work at a time (reap a child,
// forward a signal, relay a pipe). The fair scheduler (EEVDF) lets a task
// ask for a shorter slice: no larger share of the CPU, but an earlier
// deadline, so that on waking it runs at once instead of after a busy
// task's slice. In a 20,000-orphan storm on two cores the zombies
// outstanding fell from a p99 of 2-3 to 1-2 (bench/exec). Its processes start
// with the default slice (reset on fork); a kernel without custom slices
// ignores or refuses it, and nothing changes. Not under a negative nice:
// reset on fork would take it from the ranks.
void ask_for_a_short_slice() noexcept {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, 0);
  if (errno != 0 || nice < 0) {
    return;
  }
  SchedAttr attr{};
  attr.size = sizeof attr;
  attr.policy = SCHED_OTHER;
  attr.flags = kSchedResetOnFork;
  attr.nice = nice;
  attr.runtime = kShortestSlice;
  if (::sched_getscheduler(0) == SCHED_OTHER) {
    (void)::syscall(SYS_sched_setattr, 0, &attr, 0U);
  }
}

}  // namespace

int setup_pid1(const SignalState& parent, int parent_death_signal, Pid1* out) noexcept {
  out->is_pid1 = ::getpid() == 1;
  out->parent_signals = parent;

  sigset_t all;
  sigfillset(&all);
  for (int signo = 1; signo < SIGRTMIN; ++signo) {
    if (is_kernel_signal(signo)) {
      sigdelset(&all, signo);  // a fault in trainit stays a fault, not a hang
    }
  }
  if (int r = ::pthread_sigmask(SIG_SETMASK, &all, nullptr); r != 0) {
    return -r;
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  if (::sigaction(SIGTTIN, &ignore, nullptr) < 0 || ::sigaction(SIGTTOU, &ignore, nullptr) < 0) {
    return -errno;
  }
  // A parent that ignored SIGCHLD (or set SA_NOCLDWAIT) would have the kernel
  // reap our children behind our back: exit codes lost, waits that hang.
  struct sigaction child_default {};
  child_default.sa_handler = SIG_DFL;
  if (::sigaction(SIGCHLD, &child_default, nullptr) < 0) {
    return -errno;
  }
  if (!out->is_pid1 && ::prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
    return -errno;
  }
  if (parent_death_signal != 0 && ::prctl(PR_SET_PDEATHSIG, parent_death_signal) < 0) {
    return -errno;
  }
  ask_for_a_short_slice();
  return 0;
}

void fatal_exit(const Pid1& pid1, pid_t group) noexcept {
  if (pid1.is_pid1) {
    ::kill(-1, SIGKILL);  // our own namespace only: we are its init; needs no /proc
  } else {
    signal_all(false, SIGKILL, group);
  }
  // Reap for at most a second: outside PID 1, processes that left the group
  // (setsid) are not ours to kill and may outlive us.
  struct timespec pause = {0, 10'000'000};
  for (int i = 0; i < 100; ++i) {
    pid_t pid;
    while ((pid = ::waitpid(-1, nullptr, WNOHANG)) > 0) {
    }
    if (pid < 0 && errno == ECHILD) {
      break;
    }
    ::nanosleep(&pause, nullptr);
  }
  ::_exit(70);
}

void erase_from_environment(const char* name) noexcept {
  if (::getenv(name) == nullptr) {
    return;  // the usual case: nothing to erase, no code of this function's paged in
  }
  const size_t length = std::strlen(name);
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, name, length) == 0 && (*entry)[length] == '=') {
      char* value = *entry + length + 1;
      ::explicit_bzero(value, std::strlen(value));
    }
  }
  ::unsetenv(name);
}

void guard_secret_memory() noexcept {
  if (::prctl(PR_SET_DUMPABLE, 0) < 0) {
    log_warning("cannot make trainit undumpable: {}; processes of its uid can read its memory", errno_string(errno));
  }
}

}  // namespace trainit

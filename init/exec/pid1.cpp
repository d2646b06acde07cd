#include "exec/pid1.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/log.h"
#include "proc/tree.h"

extern char** environ;

namespace trainit {

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

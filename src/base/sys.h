// The one test seam: syscalls whose failures a test cannot provoke.
//
// A 4.19 kernel has no pidfd_open (ENOSYS), and EINTR cannot be produced on
// demand. Code calls these wrappers; tests swap an entry of table() for a fake
// and call reset_table() afterwards. Everything else stays a real syscall.
// Each wrapper returns a value >= 0 or -errno, and never sets errno for the
// caller to read.
#pragma once

#include <signal.h>
#include <sys/epoll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

namespace trainit::sys {

struct Table {
  int (*pidfd_open)(pid_t pid, unsigned flags);
  int (*pidfd_send_signal)(int pidfd, int sig, siginfo_t* info, unsigned flags);
  int (*waitid)(idtype_t type, id_t id, siginfo_t* info, int options);
  int (*epoll_wait)(int epfd, struct epoll_event* events, int max, int timeout_ms);
  // Returns the signal number taken, or -errno (-EAGAIN: the timeout passed).
  int (*sigtimedwait)(const sigset_t* set, siginfo_t* info, const struct timespec* timeout);
};

// The live table. Not thread-safe: tests change it between steps.
Table& table() noexcept;
void reset_table() noexcept;

inline int pidfd_open(pid_t pid) noexcept {
  return table().pidfd_open(pid, 0);
}
inline int pidfd_send_signal(int pidfd, int sig) noexcept {
  return table().pidfd_send_signal(pidfd, sig, nullptr, 0);
}
inline int waitid(idtype_t type, id_t id, siginfo_t* info, int options) noexcept {
  return table().waitid(type, id, info, options);
}
inline int epoll_wait(int epfd, struct epoll_event* events, int max, int timeout_ms) noexcept {
  return table().epoll_wait(epfd, events, max, timeout_ms);
}

inline int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) noexcept {
  return table().sigtimedwait(set, info, timeout);
}

}  // namespace trainit::sys

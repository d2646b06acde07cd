#include "base/sys.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace trainit::sys {
namespace {

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int real_pidfd_open(pid_t pid, unsigned flags) {
  long r = ::syscall(SYS_pidfd_open, pid, flags);
  return r < 0 ? -errno : static_cast<int>(r);
}

int real_pidfd_send_signal(int pidfd, int sig, siginfo_t* info, unsigned flags) {
  long r = ::syscall(SYS_pidfd_send_signal, pidfd, sig, info, flags);
  return r < 0 ? -errno : 0;
}

int real_waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
  return ::waitid(type, id, info, options) < 0 ? -errno : 0;
}

int real_epoll_wait(int epfd, struct epoll_event* events, int max, int timeout_ms) {
  int r = ::epoll_wait(epfd, events, max, timeout_ms);
  return r < 0 ? -errno : r;
}

int real_sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  int r = ::sigtimedwait(set, info, timeout);
  return r < 0 ? -errno : r;
}

constexpr Table kReal = {real_pidfd_open, real_pidfd_send_signal, real_waitid, real_epoll_wait, real_sigtimedwait};
Table g_table = kReal;

}  // namespace

Table& table() noexcept {
  return g_table;
}
void reset_table() noexcept {
  g_table = kReal;
}

}  // namespace trainit::sys

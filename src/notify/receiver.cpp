#include "notify/receiver.h"

#include <fmt/core.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "base/log.h"

namespace trainit {

int NotifyReceiver::open() {
  static std::atomic<unsigned> counter{0};
  fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd_) {
    return -errno;
  }
  // Before bind: every datagram that can reach the socket carries its
  // sender's credentials.
  const int on = 1;
  if (::setsockopt(fd_.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0) {
    int e = errno;
    fd_.reset();
    return -e;
  }
  // Abstract names are per network namespace, not per PID namespace: every
  // container's trainit is PID 1, and containers may share a network (a pod,
  // --network=host). A random part keeps the names apart; a clash retries.
  for (int attempt = 0;; ++attempt) {
    uint64_t nonce = 0;
    if (::getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(nonce))) {
      nonce = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) + attempt;
    }
    std::string name =
        fmt::format("trainit-notify-{}-{}-{:016x}", ::getpid(), counter.fetch_add(1, std::memory_order_relaxed), nonce);
    struct sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract
    auto len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + name.size());
    if (::bind(fd_.get(), reinterpret_cast<const struct sockaddr*>(&addr), len) == 0) {
      address_ = "@" + name;
      return 0;
    }
    int e = errno;
    if (e != EADDRINUSE || attempt == 8) {
      fd_.reset();
      return -e;
    }
  }
}

namespace {

// The sender's pid from the SCM_CREDENTIALS of `msg` (0 when there are none),
// closing every descriptor that came along.
pid_t sender_pid(struct msghdr& msg) {
  pid_t pid = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET) {
      continue;
    }
    if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
      struct ucred cred {};
      std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      pid = cred.pid;
    } else if (c->cmsg_type == SCM_RIGHTS) {
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
        Fd discarded(fd);
      }
    }
  }
  return pid;
}

}  // namespace

int NotifyReceiver::drain(const LineFn& fn) {
  int datagrams = 0;
  char buf[4096];
  // Room for the credentials and a few descriptors (to close them); more
  // descriptors than fit are closed by the kernel (MSG_CTRUNC).
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(16 * sizeof(int))];
  for (;;) {
    struct iovec iov = {buf, sizeof(buf)};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno == EAGAIN ? datagrams : -errno;
    }
    const pid_t sender = sender_pid(msg);
    if ((msg.msg_flags & MSG_TRUNC) != 0) {  // cut at 4 KiB, it could read as a message it never was
      ++dropped_;
      log_debug("NOTIFY_SOCKET: dropped a datagram of more than {} bytes from pid {}", sizeof buf, sender);
      continue;
    }
    if (served_ <= 0 || sender != served_) {
      ++dropped_;
      log_debug("NOTIFY_SOCKET: dropped a datagram from pid {} (serving pid {}; {} dropped)", sender, served_,
                dropped_);
      continue;
    }
    ++datagrams;
    parse_notify_message(std::string_view(buf, static_cast<size_t>(n)), fn);
  }
}

void parse_notify_message(std::string_view message, const NotifyReceiver::LineFn& fn) {
  while (!message.empty()) {
    size_t end = message.find('\n');
    std::string_view line = message.substr(0, end);
    message = end == std::string_view::npos ? std::string_view() : message.substr(end + 1);
    size_t eq = line.find('=');
    if (eq != std::string_view::npos && eq > 0) {
      fn(line.substr(0, eq), line.substr(eq + 1));
    }
  }
}

}  // namespace trainit

#include "notify/receiver.h"

#include <fmt/format.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace trainit {

int NotifyReceiver::open() {
  static std::atomic<unsigned> counter{0};
  fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd_) {
    return -errno;
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

int NotifyReceiver::drain(const LineFn& fn) {
  int datagrams = 0;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno == EAGAIN ? datagrams : -errno;
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

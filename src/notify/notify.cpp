#include "notify/notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/env.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/number.h"

namespace trainit {
namespace {

int send_builtin(const std::string& socket_path, std::string_view message) {
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path) || (socket_path[0] != '/' && socket_path[0] != '@')) {
    return -EINVAL;
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  socklen_t len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + socket_path.size());
  if (addr.sun_path[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace
  } else {
    ++len;  // the terminating NUL of a path
  }
  Fd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return -errno;
  }
  ssize_t n = ::sendto(fd.get(), message.data(), message.size(), MSG_NOSIGNAL,
                       reinterpret_cast<const struct sockaddr*>(&addr), len);
  return n < 0 ? -errno : 0;
}

}  // namespace

Notifier Notifier::from_environment() {
  Notifier n;
  if (const char* socket = ::getenv("NOTIFY_SOCKET"); socket != nullptr && socket[0] != '\0') {
    n.socket_ = socket;
  }
  const char* usec = ::getenv("WATCHDOG_USEC");
  const char* pid = ::getenv("WATCHDOG_PID");
  if (usec != nullptr) {
    auto value = parse_decimal(usec, 1);
    bool ours = pid == nullptr || parse_decimal(pid) == static_cast<std::uint64_t>(::getpid());
    if (value && ours) {
      n.watchdog_ = std::chrono::microseconds(*value / 2);
    }
  }
  return n;
}

int Notifier::send(std::string_view message) const {
  if (socket_.empty()) {
    return 0;
  }
  int r = send_builtin(socket_, message);
  if (r < 0) {
    log_debug("notify '{}': {}", message, errno_string(-r));
  }
  return r;
}

void Notifier::status(std::string_view text) {
  if (socket_.empty() || text == last_status_) {
    return;
  }
  last_status_ = text;
  std::string message = "STATUS=";
  message += text;
  send(message);
}

void Notifier::start_watchdog(Loop& loop) {
  if (watchdog_ <= Duration::zero()) {
    return;
  }
  watchdog_timer_ = loop.add_timer(
      Clock::now(),
      [this] {
        (void)send("WATCHDOG=1");
        watchdog_timer_.set_deadline(Clock::now() + watchdog_);
        return 0;
      },
      "watchdog");
}

std::vector<std::string> environment_for_children(char** environ, bool* changed) {
  std::vector<std::string> env;
  *changed = false;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (is_withheld_from_children(*e)) {
      *changed = true;
    } else {
      env.emplace_back(*e);
    }
  }
  return env;
}

}  // namespace trainit

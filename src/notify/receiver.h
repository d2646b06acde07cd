// A NOTIFY_SOCKET that trainit serves to its child (--ready notify).
//
// The child (or anything it starts) speaks the sd_notify protocol to trainit
// as it would to systemd: READY=1 when it can serve, STATUS=... as it goes.
// The socket is an abstract unix datagram socket with a unique name, so it
// needs no writable directory and leaves no file behind; it is close-on-exec
// and reaches the child only through the NOTIFY_SOCKET variable.
//
// An abstract name is reachable by every process in the network namespace
// (a pod's other containers too), so the receiver hears one process only, as
// systemd's NotifyAccess=main: each datagram carries its sender's pid
// (SO_PASSCRED), and one from any other pid, or without credentials, is
// dropped and counted. The caller names the process (serve()) and names it
// again when it changes (a restarted child has a new pid). Descriptors sent
// along (SCM_RIGHTS) are closed: nothing a sender passes stays in trainit.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/fd.h"

namespace trainit {

class NotifyReceiver {
 public:
  using LineFn = std::function<void(std::string_view key, std::string_view value)>;

  // Binds the socket, with SO_PASSCRED. Returns 0 or -errno.
  int open();
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  // The value for the child's NOTIFY_SOCKET ("@trainit-notify-...").
  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  // The only process whose datagrams are taken from now on, by its pid in
  // the receiver's PID namespace (the pid spawn() returned); 0, the default,
  // takes none. Datagrams already queued are judged when drained.
  void serve(pid_t pid) noexcept { served_ = pid; }
  [[nodiscard]] pid_t served() const noexcept { return served_; }
  // Reads every pending datagram and calls `fn` for each KEY=VALUE line of
  // those from the served pid. Returns the number of datagrams taken, or
  // -errno; the others are dropped (logged at debug) and counted.
  int drain(const LineFn& fn);
  // Datagrams dropped so far: not from the served pid, or no credentials.
  [[nodiscard]] uint64_t dropped() const noexcept { return dropped_; }

 private:
  Fd fd_;
  std::string address_;
  pid_t served_ = 0;
  uint64_t dropped_ = 0;
};

// Splits one datagram into KEY=VALUE lines; lines without '=' are skipped.
void parse_notify_message(std::string_view message, const NotifyReceiver::LineFn& fn);

}  // namespace trainit

// A NOTIFY_SOCKET that trainit serves to its child (--ready notify).
//
// The child (or anything it starts) speaks the sd_notify protocol to trainit
// as it would to systemd: READY=1 when it can serve, STATUS=... as it goes.
// The socket is an abstract unix datagram socket with a unique name, so it
// needs no writable directory and leaves no file behind; it is close-on-exec
// and reaches the child only through the NOTIFY_SOCKET variable.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/fd.h"

namespace trainit {

class NotifyReceiver {
 public:
  using LineFn = std::function<void(std::string_view key, std::string_view value)>;

  // Binds the socket. Returns 0 or -errno.
  int open();
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  // The value for the child's NOTIFY_SOCKET ("@trainit-notify-...").
  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  // Reads every pending datagram and calls `fn` for each KEY=VALUE line.
  // Returns the number of datagrams read, or -errno.
  int drain(const LineFn& fn);

 private:
  Fd fd_;
  std::string address_;
};

// Splits one datagram into KEY=VALUE lines; lines without '=' are skipped.
void parse_notify_message(std::string_view message, const NotifyReceiver::LineFn& fn);

}  // namespace trainit

// Readiness and status for trainit's own supervisor: the sd_notify protocol.
//
// When NOTIFY_SOCKET is set (systemd Type=notify, or any supervisor speaking
// the protocol), trainit sends READY=1, STATUS=..., STOPPING=1 and, when
// WATCHDOG_USEC asks for it, WATCHDOG=1. The dynamic build sends through
// libsystemd's sd_notify(); the static build (Debian ships no static
// libsystemd) through the small sender here. Same messages, one interface.
// Sending never blocks and never fails the caller: a supervisor that went
// away costs a debug line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/time.h"

namespace trainit {

class Notifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from `environ`.
  static Notifier from_environment();
  // A notifier that sends nothing (no supervisor).
  Notifier() = default;

  [[nodiscard]] bool enabled() const noexcept { return !socket_.empty(); }
  // Sends one datagram of newline-separated KEY=VALUE lines; 0 or -errno.
  int send(std::string_view message) const;
  // STATUS=<text>, deduplicated: an unchanged status is not sent again.
  void status(std::string_view text);
  // Half of WATCHDOG_USEC when the watchdog is on for this process, else 0.
  [[nodiscard]] Duration watchdog_interval() const noexcept { return watchdog_; }

  // The supervisor's variables, which no child may inherit (they would talk
  // to trainit's supervisor as if they were trainit).
  [[nodiscard]] static bool is_notify_variable(std::string_view entry) noexcept;

 private:
  std::string socket_;
  std::string last_status_;
  Duration watchdog_{0};
};

// `environ` without the supervisor's variables; `changed` says whether any
// was dropped (when not, a child can simply inherit trainit's environment).
std::vector<std::string> environment_for_children(char** environ, bool* changed);

}  // namespace trainit

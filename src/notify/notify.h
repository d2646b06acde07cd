// Readiness and status for trainit's own supervisor: the sd_notify protocol.
//
// When NOTIFY_SOCKET is set (systemd Type=notify, or any supervisor speaking
// the protocol), trainit sends READY=1, STATUS=..., STOPPING=1 and, when
// WATCHDOG_USEC asks for it, WATCHDOG=1, through the small sender here, in
// both builds. libsystemd's sd_notify() (252) sends on a blocking socket: a
// supervisor that stops reading fills its queue and the next send hangs the
// whole loop — what a PID 1 must never do (tests/unit/notify_test.cpp has the
// case). So trainit sends with MSG_DONTWAIT; libsystemd stays what the tests
// use as a real client of trainit's own receiver. Sending never blocks and
// never fails the caller: a supervisor that went away costs a debug line.
#pragma once

#include <fmt/core.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/time.h"
#include "loop/loop.h"

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
  // The same, formatted only when a supervisor listens (the stop path must
  // not pay for text nobody reads).
  template <typename... T>
  void status(fmt::format_string<T...> format, T&&... args) {
    if (enabled()) {
      status(std::string_view(fmt::format(format, std::forward<T>(args)...)));
    }
  }
  // Half of WATCHDOG_USEC when the watchdog is on for this process, else 0.
  [[nodiscard]] Duration watchdog_interval() const noexcept { return watchdog_; }

  // Sends WATCHDOG=1 now and every watchdog_interval() from now on, when the
  // watchdog is on for this process; until the notifier is destroyed, which
  // must not move afterwards.
  void start_watchdog(Loop& loop);

 private:
  std::string socket_;
  std::string last_status_;
  Duration watchdog_{0};
  SourceHandle watchdog_timer_;
};

// `environ` without what a child must not inherit: the supervisor's
// variables and trainit's own (base/env.h, the filter the planners use too);
// `changed` says whether any was dropped (when not, a child can simply
// inherit trainit's environment).
std::vector<std::string> environment_for_children(char** environ, bool* changed);

}  // namespace trainit

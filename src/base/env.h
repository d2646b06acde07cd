// The one child-environment filter: which of trainit's own variables a child
// never inherits. trainit plan shows the same environment the run gives.
#pragma once

#include <string_view>

namespace trainit {

// Whether `entry` ("NAME=value", or a bare NAME) is one of trainit's
// supervisor's variables: NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID. A child
// that inherited them would talk to trainit's supervisor as if it were
// trainit (its READY=1, its WATCHDOG=1 or none: systemd would kill the job).
[[nodiscard]] constexpr bool is_supervisor_variable(std::string_view entry) noexcept {
  const std::string_view name = entry.substr(0, entry.find('='));
  return name == "NOTIFY_SOCKET" || name == "WATCHDOG_USEC" || name == "WATCHDOG_PID";
}

}  // namespace trainit

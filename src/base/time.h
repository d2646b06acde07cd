// Monotonic time and durations given on the command line.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace trainit {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux
using Duration = std::chrono::nanoseconds;

// Parses "8", "0.25", ".5", "1.5" (seconds: a whole number in parse_decimal's
// form, base/number.h, and up to 9 fractional digits after a '.', at most one
// day). Nothing else: no sign, exponent, unit, space or leading zero. Returns
// nullopt when the text is not such a number.
[[nodiscard]] std::optional<Duration> parse_seconds(std::string_view text) noexcept;

// `d` in seconds, for messages ("{:.3f} s").
[[nodiscard]] inline double seconds(Duration d) noexcept {
  return std::chrono::duration<double>(d).count();
}

}  // namespace trainit

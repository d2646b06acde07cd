// Monotonic time and durations given on the command line.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace trainit {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux
using Duration = std::chrono::nanoseconds;

// Parses "8", "0.25", "1.5" (seconds; digits with at most one '.', at most 9
// fractional digits, at most one day). Nothing else: no sign, exponent, unit
// or space. Returns nullopt when the text is not such a number.
[[nodiscard]] std::optional<Duration> parse_seconds(std::string_view text) noexcept;

}  // namespace trainit

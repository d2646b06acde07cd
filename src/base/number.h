// The one integer parser: every number trainit reads from text (the command
// line, its variables, the platform's variables, rank tables, seconds) goes
// through parse_decimal(), so that all of them accept the same form.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace trainit {

// The largest number parse_decimal() reads: 18 digits (below 2^63, so no
// overflow to check on the way).
inline constexpr std::uint64_t kMaxDecimal = 999'999'999'999'999'999;

// The form: "0" or a digit string without a leading zero
// (^(0|[1-9][0-9]*)$), at most 18 digits. No sign, space, hex, exponent,
// fraction or digit separator. Returns nullopt for anything else, and for a
// number outside [min, max].
[[nodiscard]] std::optional<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t min = 0,
                                                         std::uint64_t max = kMaxDecimal) noexcept;

}  // namespace trainit

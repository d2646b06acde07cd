#include "base/time.h"

namespace trainit {

std::optional<Duration> parse_seconds(std::string_view text) noexcept {
  constexpr long long kMaxSeconds = 24LL * 3600;
  long long whole = 0;
  long long frac = 0;
  int frac_digits = 0;
  bool seen_dot = false;
  bool seen_digit = false;
  for (char c : text) {
    if (c == '.' && !seen_dot) {
      seen_dot = true;
      continue;
    }
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    seen_digit = true;
    if (!seen_dot) {
      whole = whole * 10 + (c - '0');
      if (whole > kMaxSeconds) {
        return std::nullopt;
      }
    } else {
      if (++frac_digits > 9) {
        return std::nullopt;
      }
      frac = frac * 10 + (c - '0');
    }
  }
  if (!seen_digit) {
    return std::nullopt;
  }
  for (int i = frac_digits; i < 9; ++i) {
    frac *= 10;
  }
  return std::chrono::seconds(whole) + Duration(frac);
}

}  // namespace trainit

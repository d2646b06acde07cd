#include "base/time.h"

#include <algorithm>

#include "base/number.h"

namespace trainit {

std::optional<Duration> parse_seconds(std::string_view text) noexcept {
  constexpr std::uint64_t kMaxSeconds = 24ULL * 3600;
  constexpr std::size_t kMaxFractionDigits = 9;  // nanoseconds
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if ((whole.empty() && fraction.empty()) || fraction.size() > kMaxFractionDigits) {
    return std::nullopt;
  }
  std::optional<std::uint64_t> seconds = whole.empty() ? 0 : parse_decimal(whole, 0, kMaxSeconds);
  // The fraction's digits are a number too, once its leading zeros (which
  // parse_decimal refuses) are set aside: "05" is 5 hundredths.
  std::string_view significant = fraction.substr(std::min(fraction.find_first_not_of('0'), fraction.size()));
  std::optional<std::uint64_t> units = significant.empty() ? 0 : parse_decimal(significant);
  if (!seconds || !units || (*seconds == kMaxSeconds && *units != 0)) {  // at most one day, fraction included
    return std::nullopt;
  }
  std::uint64_t nanoseconds = *units;
  for (std::size_t i = fraction.size(); i < kMaxFractionDigits; ++i) {
    nanoseconds *= 10;
  }
  return std::chrono::seconds(*seconds) + Duration(nanoseconds);
}

}  // namespace trainit

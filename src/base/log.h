// The diagnostic logger: one line per message on stderr, "trainit: LEVEL: text".
//
// Lines are formatted into a stack buffer and written with one write(2): no
// allocation, no stdio, errno preserved, safe on the fatal path. Messages above
// the verbosity are dropped before formatting. src/ logs only at debug level;
// init/ logs each error once, where it is handled.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace trainit {

enum class Level { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

// Verbosity as tini counts it: 1 (default) shows errors and warnings, each -v
// one level more. 0 keeps errors only.
void set_log_verbosity(int verbosity) noexcept;
[[nodiscard]] int log_verbosity() noexcept;
[[nodiscard]] bool log_enabled(Level level) noexcept;
void log_write(Level level, fmt::string_view format, fmt::format_args args) noexcept;

// strerror without the locale machinery: "No such file or directory".
[[nodiscard]] const char* errno_string(int errnum) noexcept;

template <typename... T>
void log_at(Level level, fmt::format_string<T...> format, T&&... args) noexcept {
  if (log_enabled(level)) {
    log_write(level, format, fmt::make_format_args(args...));
  }
}
template <typename... T>
void log_error(fmt::format_string<T...> format, T&&... args) noexcept {
  log_at(Level::kError, format, std::forward<T>(args)...);
}
template <typename... T>
void log_warning(fmt::format_string<T...> format, T&&... args) noexcept {
  log_at(Level::kWarning, format, std::forward<T>(args)...);
}
template <typename... T>
void log_info(fmt::format_string<T...> format, T&&... args) noexcept {
  log_at(Level::kInfo, format, std::forward<T>(args)...);
}
template <typename... T>
void log_debug(fmt::format_string<T...> format, T&&... args) noexcept {
  log_at(Level::kDebug, format, std::forward<T>(args)...);
}

}  // namespace trainit

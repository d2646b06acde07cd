// The diagnostic logger: one line per message on stderr, "trainit: LEVEL: text".
//
// Lines are formatted into a stack buffer: no allocation, no stdio, errno
// preserved, safe on the fatal path. Messages above the verbosity are dropped
// before formatting. src/ logs only at debug level; init/ logs each error
// once, where it is handled.
//
// Where a line goes: to the sink, when one is set (the PID 1 program sets the
// console's, so that its lines queue behind the ranks' output and never block
// the loop: log/console.h); else straight to stderr, and only when it takes
// the line now (write_now()). Either way a log line never waits for a reader.
#pragma once

#include <fmt/core.h>

#include <string_view>

namespace trainit {

enum class Level { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

// Verbosity as tini counts it: 1 (default) shows errors and warnings, each -v
// one level more. 0 keeps errors only.
void set_log_verbosity(int verbosity) noexcept;
[[nodiscard]] int log_verbosity() noexcept;
[[nodiscard]] bool log_enabled(Level level) noexcept;
void log_write(Level level, fmt::string_view format, fmt::format_args args) noexcept;

// Where log lines go instead of stderr. Called on the thread that set it; a
// line from any other thread goes to stderr (write_now()).
class LogSink {
 public:
  // Takes one whole line (with its '\n') or drops and counts it; never blocks.
  virtual void log_line(std::string_view line) noexcept = 0;
  // Waits at most `timeout_ms` for the lines taken so far to be written.
  virtual void log_flush(int timeout_ms) noexcept = 0;

 protected:
  ~LogSink() = default;
};
// nullptr: stderr again. The sink must outlive its use.
void set_log_sink(LogSink* sink) noexcept;
// The fatal path's last words: waits at most `timeout_ms` for the sink.
void log_flush(int timeout_ms) noexcept;

// Writes `text` to `fd` when the descriptor can take it now, without waiting
// for a reader (a full pipe or terminal drops it). Returns whether it was
// written whole. For the few lines trainit writes with no console to queue
// them (before it exists, from another thread, the terminate handler).
bool write_now(int fd, std::string_view text) noexcept;
// Writes all of `text` to `fd`, blocking (EINTR and short writes continued).
// Returns 0 or -errno. For output a user asked for (--help, `trainit plan`).
int write_all(int fd, std::string_view text) noexcept;

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

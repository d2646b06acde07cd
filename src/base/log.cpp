#include "base/log.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "base/redact.h"
#include "base/utf8.h"

namespace trainit {
namespace {

int g_verbosity = 1;
LogSink* g_sink = nullptr;
std::thread::id g_sink_thread;

constexpr std::string_view kLevelNames[] = {"error", "warning", "info", "debug", "trace"};

}  // namespace

void set_log_verbosity(int verbosity) noexcept {
  g_verbosity = verbosity;
}
int log_verbosity() noexcept {
  return g_verbosity;
}

bool log_enabled(Level level) noexcept {
  return level == Level::kError || static_cast<int>(level) <= g_verbosity;
}

// A line is made in three steps, in this order: its secrets hidden in the
// whole formatted text (a cut first would leave a secret's beginning), then
// cut to kLineMax, then what is not printable UTF-8 (C0, DEL, C1 controls, a
// malformed byte) written as \xNN, whatever text the message quotes: one
// line, and nothing a terminal takes as a command.
void log_write(Level level, fmt::string_view format, fmt::format_args args) noexcept {
  constexpr size_t kFormattedMax = 4096;
  constexpr size_t kLineMax = 1024;  // the newline included
  int saved_errno = errno;
  try {
    char formatted[kFormattedMax];
    auto r = fmt::format_to_n(formatted, sizeof(formatted), "trainit: {}: ", kLevelNames[static_cast<int>(level)]);
    char* p = r.out;
    if (p < formatted + sizeof(formatted)) {
      p = fmt::vformat_to_n(p, static_cast<size_t>(formatted + sizeof(formatted) - p), format, args).out;
    }
    std::string_view text(formatted, static_cast<size_t>(std::min(p, formatted + sizeof(formatted)) - formatted));
    char hidden[kLineMax];
    if (has_secrets()) {  // nothing secret reaches a log line
      text = std::string_view(hidden, redact_into(text, hidden, sizeof(hidden) - 1));
    }
    char line[kLineMax];
    size_t n = escape_unprintable_into(text.substr(0, sizeof(line) - 1), line, sizeof(line) - 1);
    line[n++] = '\n';
    if (g_sink != nullptr && std::this_thread::get_id() == g_sink_thread) {
      g_sink->log_line(std::string_view(line, n));
    } else {
      (void)write_now(STDERR_FILENO, std::string_view(line, n));
    }
  } catch (...) {  // a bad format string must not take PID 1 down
  }
  errno = saved_errno;
}

void set_log_sink(LogSink* sink) noexcept {
  g_sink = sink;
  g_sink_thread = std::this_thread::get_id();
}

void log_flush(int timeout_ms) noexcept {
  if (g_sink != nullptr && std::this_thread::get_id() == g_sink_thread) {
    g_sink->log_flush(timeout_ms);
  }
}

// A pipe or terminal that polls writable has room for a short line (a pipe: a
// free page; PIPE_BUF bytes go in whole); anything longer may block, so only
// lines up to PIPE_BUF are tried.
bool write_now(int fd, std::string_view text) noexcept {
  struct pollfd p {};
  p.fd = fd;
  p.events = POLLOUT;
  if (text.size() > PIPE_BUF || ::poll(&p, 1, 0) != 1 || (p.revents & POLLOUT) == 0) {
    return false;
  }
  ssize_t n;
  do {
    n = ::write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(text.size());
}

int write_all(int fd, std::string_view text) noexcept {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return n < 0 ? -errno : -EIO;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

const char* errno_string(int errnum) noexcept {
  const char* s = strerrordesc_np(errnum);
  return s != nullptr ? s : "Unknown error";
}

}  // namespace trainit

#include "base/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainit {
namespace {

int g_verbosity = 1;

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

void log_write(Level level, fmt::string_view format, fmt::format_args args) noexcept {
  int saved_errno = errno;
  char buf[1024];
  char* end = buf + sizeof(buf) - 1;  // room for the newline
  try {
    auto r = fmt::format_to_n(buf, sizeof(buf) - 1, "trainit: {}: ", kLevelNames[static_cast<int>(level)]);
    char* p = r.out;
    if (p < end) {
      p = fmt::vformat_to_n(p, static_cast<size_t>(end - p), format, args).out;
    }
    if (p > end) {
      p = end;
    }
    *p++ = '\n';
    for (const char* q = buf; q < p;) {
      ssize_t n = ::write(STDERR_FILENO, q, static_cast<size_t>(p - q));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;
      }
      q += n;
    }
  } catch (...) {  // a bad format string must not take PID 1 down
  }
  errno = saved_errno;
}

const char* errno_string(int errnum) noexcept {
  const char* s = strerrordesc_np(errnum);
  return s != nullptr ? s : "Unknown error";
}

}  // namespace trainit

// What the libFuzzer targets (tests/fuzz/*.cpp) share: a check that makes a
// broken property a crash libFuzzer keeps the input of, a log sink that
// takes trainit's log lines (and checks each is one line), and the readable
// input form several targets use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"

namespace trainit::fuzz {

// A property that does not hold: print it and abort, so that libFuzzer saves
// the input as a crash (what a sanitizer finding is too).
[[noreturn]] inline void failed(const char* what, const char* file, int line, std::string_view detail) {
  std::fprintf(stderr, "\n%s:%d: fuzz check failed: %s\n  %.*s\n", file, line, what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

#define FUZZ_CHECK(cond, detail)                                    \
  do {                                                              \
    if (!(cond))                                                    \
      ::trainit::fuzz::failed(#cond, __FILE__, __LINE__, (detail)); \
  } while (false)

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Whether `text` is one line: no '\n' at all (a message), or exactly one, at
// its end (a log line).
inline bool one_line(std::string_view text, bool ends_in_newline = false) {
  if (ends_in_newline) {
    if (text.empty() || text.back() != '\n')
      return false;
    text.remove_suffix(1);
  }
  return text.find('\n') == std::string_view::npos;
}

// Takes trainit's log lines at every level (so that the code formatting them
// runs) and checks that each is one line: a peer's text must not make two.
// With TRAINIT_FUZZ_LOG set they also go to stderr (to see what an input
// does: run the target on it).
class CheckedLog final : public LogSink {
 public:
  CheckedLog() : echo_(std::getenv("TRAINIT_FUZZ_LOG") != nullptr) {
    set_log_verbosity(4);
    set_log_sink(this);
  }
  CheckedLog(const CheckedLog&) = delete;
  CheckedLog& operator=(const CheckedLog&) = delete;
  ~CheckedLog() { set_log_sink(nullptr); }

  void log_line(std::string_view line) noexcept override {
    if (echo_)
      std::fprintf(stderr, "%.*s", static_cast<int>(line.size()), line.data());
    FUZZ_CHECK(one_line(line, true), line);
    ++lines_;
  }
  void log_flush(int /*timeout_ms*/) noexcept override {}
  [[nodiscard]] size_t lines() const noexcept { return lines_; }

 private:
  bool echo_;
  size_t lines_ = 0;
};

// The readable form of a list of strings: one per line, with "\n" and "\\"
// standing for a newline and a backslash inside an item (a line ends at a
// real newline only).
inline std::vector<std::string> unescaped_lines(std::string_view text) {
  std::vector<std::string> lines(1);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      lines.emplace_back();
    } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == 'n' || text[i + 1] == '\\')) {
      lines.back() += text[++i] == 'n' ? '\n' : '\\';
    } else {
      lines.back() += c;
    }
  }
  if (lines.back().empty())
    lines.pop_back();
  return lines;
}

}  // namespace trainit::fuzz

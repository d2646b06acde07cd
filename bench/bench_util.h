// What every bench program needs: the monotonic clock in nanoseconds and a
// fatal error that names the program.
#pragma once

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace bench {

using Ns = int64_t;

inline Ns now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Ns>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Prints "PROGRAM: message" on stderr and exits 1.
[[noreturn]] inline __attribute__((format(printf, 1, 2))) void die(const char* format, ...) {
  va_list args;
  va_start(args, format);
  (void)std::fprintf(stderr, "%s: ", program_invocation_short_name);
  (void)std::vfprintf(stderr, format, args);
  (void)std::fputc('\n', stderr);
  va_end(args);
  std::exit(1);
}

}  // namespace bench

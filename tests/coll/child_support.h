// What the collective core's fork()ed-rank tests share (backend_test.cpp,
// ascend_backend_test.cpp, device_test.cpp): a check inside a child, the
// clock, and finite random values of every type.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "coll/kernels.h"
#include "trainit/coll.h"

// A failed check in a child: one line on stderr saying where, exit 1.
#define CHILD_CHECK(cond, ...)                                                                              \
  do {                                                                                                      \
    if (!(cond)) {                                                                                          \
      char what_[512];                                                                                      \
      if (std::snprintf(what_, sizeof what_, __VA_ARGS__) < 0) {                                            \
        what_[0] = '\0';                                                                                    \
      }                                                                                                     \
      static_cast<void>(                                                                                    \
          std::fprintf(stderr, "child check failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, what_)); \
      _exit(1);                                                                                             \
    }                                                                                                       \
  } while (0)

namespace trainit::coll::test {

using Bytes = std::vector<unsigned char>;

inline int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Finite values of every type (random bits; float exponents that are not all
// ones), so that no NaN makes bitwise comparisons meaningless.
inline Bytes random_values(int dtype, size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const size_t size = dtype_size(dtype);
  Bytes out(count * size);
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = rng();
    switch (dtype) {
      case TRAINIT_F32:
        bits &= ~(uint64_t{1} << 30);  // exponent below 255
        break;
      case TRAINIT_F64:
        bits &= ~(uint64_t{1} << 62);
        break;
      case TRAINIT_F16:
      case TRAINIT_BF16:
        bits &= ~(uint64_t{1} << 14);
        break;
      default:
        break;
    }
    std::memcpy(&out[i * size], &bits, size);
  }
  return out;
}

}  // namespace trainit::coll::test

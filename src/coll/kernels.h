// Reduction kernels: out[i] = ins[0][i] op ins[1][i] op … op ins[n-1][i],
// folded left to right in that order for every element, whatever the ISA —
// vector lanes fold elementwise across the inputs, so every kernel gives the
// bitwise result of the scalar one (tests/coll checks it). f16 and bf16
// accumulate in f32 and round to nearest even once, at the end; integers wrap.
//
// out may be exactly one of the inputs (in place), never partly overlap one;
// no pointer needs any alignment. Callable from any thread.
#pragma once

#include <cerrno>
#include <cstddef>

namespace trainit::coll {

inline constexpr int kDtypes = 7;  // trainit_dtype: F32 F64 F16 BF16 I32 I64 U8
inline constexpr int kOps = 4;     // trainit_op: SUM PROD MIN MAX

using FoldFn = void (*)(void* out, const void* const* ins, int n, size_t count);

struct Kernels {
  const char* name;  // "scalar", "sse2", "avx2", "avx512", "neon"
  FoldFn fold[kDtypes][kOps];
};

// The fastest table this CPU runs (chosen once, at run time).
const Kernels* kernels_best();
// A table by name, or nullptr when this build or CPU lacks it.
const Kernels* kernels_by_name(const char* name);

size_t dtype_size(int dtype);  // 0 for an unknown dtype

// A backend's fold (or reduce: n = 2, srcs = {dst, src}) arguments, as every
// backend checks them: -EINVAL for an unknown dtype or op, no inputs, or a
// null pointer with elements to fold; 1 when there is nothing to do (count
// 0); 0 to go on.
inline int check_fold_args(int dtype, int op, size_t count, const void* dst, const void* const* srcs, int n) {
  if (dtype_size(dtype) == 0 || op < 0 || op >= kOps || n < 1 || srcs == nullptr) {
    return -EINVAL;
  }
  if (count == 0) {
    return 1;
  }
  bool all = dst != nullptr;
  for (int i = 0; i < n; ++i) {
    all = all && srcs[i] != nullptr;
  }
  return all ? 0 : -EINVAL;
}

// The per-ISA tables (kernels_*.cpp); call only when the CPU supports them.
const Kernels* kernels_scalar();
const Kernels* kernels_vec128();  // SSE2 on x86-64, NEON on aarch64
#if defined(__x86_64__)
const Kernels* kernels_avx2();
const Kernels* kernels_avx512();
#endif

}  // namespace trainit::coll

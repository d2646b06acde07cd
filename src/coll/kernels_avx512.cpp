// AVX-512 kernels (F, BW, DQ, VL), compiled with those flags and called only
// when the CPU has all four (kernels.cpp).
// GCC 12 warns of its own _mm512_undefined_*() inside the intrinsics headers
// (-Wmaybe-uninitialized: a false positive about the headers, not this code).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#define KERNEL_NS avx512_isa
#define KERNEL_WIDTH 64
#define KERNEL_NAME "avx512"
#define KERNEL_F16_TO_F32(out, in) \
  _mm512_storeu_ps((out), _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in))))
#define KERNEL_F16_FROM_F32(out, in)                   \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), \
                      _mm512_cvtps_ph(_mm512_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#include "coll/kernels_impl.h"

namespace trainit::coll {

const Kernels* kernels_avx512() {
  return &avx512_isa::kTable;
}

}  // namespace trainit::coll

// AVX2 kernels (with F16C for f16), compiled with -mavx2 -mf16c and called
// only when the CPU has both (kernels.cpp).
#include <immintrin.h>

#define KERNEL_NS avx2_isa
#define KERNEL_WIDTH 32
#define KERNEL_NAME "avx2"
#define KERNEL_F16_TO_F32(out, in) \
  _mm256_storeu_ps((out), _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))))
#define KERNEL_F16_FROM_F32(out, in)                \
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), \
                   _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#include "coll/kernels_impl.h"

namespace trainit::coll {

const Kernels* kernels_avx2() {
  return &avx2_isa::kTable;
}

}  // namespace trainit::coll

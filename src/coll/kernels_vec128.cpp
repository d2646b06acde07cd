// 128-bit kernels, the architecture's baseline: SSE2 on x86-64, NEON (with
// its f16 conversions) on aarch64.
#if defined(__aarch64__)
#include <arm_neon.h>
#define KERNEL_NAME "neon"
#define KERNEL_F16_TO_F32(out, in) \
  vst1q_f32((out), vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(in)))))
#define KERNEL_F16_FROM_F32(out, in) \
  vst1_u16(reinterpret_cast<uint16_t*>(out), vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(in))))
#else
#define KERNEL_NAME "sse2"
#endif
#define KERNEL_NS vec128_isa
#define KERNEL_WIDTH 16
#include "coll/kernels_impl.h"

namespace trainit::coll {

const Kernels* kernels_vec128() {
  return &vec128_isa::kTable;
}

}  // namespace trainit::coll

// The element types on the device and the host kernels' rule for each op
// (kernels.h): f16 and bf16 accumulate in f32 and round to nearest even
// once; integers wrap; min and max keep the first unless the second is
// strictly smaller or larger. For every kernel of the plugin.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cerrno>
#include <cstdint>

#include "trainit/coll.h"

namespace trainit::coll::cuda {

// Loads to and stores from the accumulating type.
struct F32 {
  using T = float;
  static constexpr bool kInteger = false;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
struct F16 {
  using T = __half;
  static constexpr bool kInteger = false;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
struct BF16 {
  using T = __nv_bfloat16;
  static constexpr bool kInteger = false;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
struct F64 {
  using T = double;
  static constexpr bool kInteger = false;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};
// Integers: sum and prod in the unsigned type U (they wrap, as on the host);
// min and max compare as T.
template <class S, class U>
struct Int {
  using T = S;
  static constexpr bool kInteger = true;
  __device__ static U load(S v) { return static_cast<U>(v); }
  __device__ static S store(U v) { return static_cast<S>(v); }
};
using I32 = Int<int32_t, uint32_t>;
using I64 = Int<int64_t, uint64_t>;
using U8 = Int<uint8_t, uint32_t>;

template <int Op, class A>
__device__ A apply(A a, A b) {
  if constexpr (Op == TRAINIT_SUM) {
    return a + b;
  } else if constexpr (Op == TRAINIT_PROD) {
    return a * b;
  } else if constexpr (Op == TRAINIT_MIN) {
    return a < b ? a : b;
  } else {
    return a > b ? a : b;
  }
}

template <class D, int Op>
__device__ typename D::T apply_to(typename D::T a, typename D::T b) {
  if constexpr (D::kInteger && (Op == TRAINIT_MIN || Op == TRAINIT_MAX)) {
    return apply<Op>(a, b);
  } else {
    return D::store(apply<Op>(D::load(a), D::load(b)));
  }
}

// Calls dispatch<D, Op>() for a dtype and op: what it returns, or
// -EOPNOTSUPP for one the kernels lack.
template <template <class, int> class F, class... Args>
int with_type(int dtype, int op, Args... args) {
  const auto ops = [&](auto d) {
    using D = decltype(d);
    switch (op) {
      case TRAINIT_SUM:
        return F<D, TRAINIT_SUM>::run(args...);
      case TRAINIT_PROD:
        return F<D, TRAINIT_PROD>::run(args...);
      case TRAINIT_MIN:
        return F<D, TRAINIT_MIN>::run(args...);
      case TRAINIT_MAX:
        return F<D, TRAINIT_MAX>::run(args...);
      default:
        return -EOPNOTSUPP;
    }
  };
  switch (dtype) {
    case TRAINIT_F32:
      return ops(F32{});
    case TRAINIT_F16:
      return ops(F16{});
    case TRAINIT_BF16:
      return ops(BF16{});
    case TRAINIT_F64:
      return ops(F64{});
    case TRAINIT_I32:
      return ops(I32{});
    case TRAINIT_I64:
      return ops(I64{});
    case TRAINIT_U8:
      return ops(U8{});
    default:
      return -EOPNOTSUPP;
  }
}

}  // namespace trainit::coll::cuda

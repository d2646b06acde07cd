#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>
#include <type_traits>

#include "coll/cuda/reduce_kernels.h"
#include "trainit/coll.h"

namespace trainit::coll::cuda {
namespace {

// Loads to and stores from the accumulating type.
struct F32 {
  using T = float;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
struct F16 {
  using T = __half;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
struct BF16 {
  using T = __nv_bfloat16;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
struct I32 {
  using T = int32_t;
  __device__ static uint32_t load(int32_t v) { return static_cast<uint32_t>(v); }  // wraps
  __device__ static int32_t store(uint32_t v) { return static_cast<int32_t>(v); }
};

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

// min/max of i32 compare as signed, not as the wrapping unsigned.
template <int Op>
__device__ int32_t apply_i32(int32_t a, int32_t b) {
  if constexpr (Op == TRAINIT_MIN) {
    return a < b ? a : b;
  } else if constexpr (Op == TRAINIT_MAX) {
    return a > b ? a : b;
  } else {
    return I32::store(apply<Op>(I32::load(a), I32::load(b)));
  }
}

template <class D, int Op>
__global__ void reduce_kernel(typename D::T* dst, const typename D::T* src, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    if constexpr (std::is_same_v<D, I32>) {
      dst[i] = apply_i32<Op>(dst[i], src[i]);
    } else {
      dst[i] = D::store(apply<Op>(D::load(dst[i]), D::load(src[i])));
    }
  }
}

template <class D, int Op>
int launch(void* dst, const void* src, size_t count) {
  constexpr unsigned kThreads = 256;
  const size_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = blocks > 65535 ? 65535U : static_cast<unsigned>(blocks);
  reduce_kernel<D, Op><<<grid, kThreads>>>(static_cast<typename D::T*>(dst), static_cast<const typename D::T*>(src),
                                           count);
  return static_cast<int>(cudaGetLastError());
}

template <class D>
int launch_op(void* dst, const void* src, size_t count, int op) {
  switch (op) {
    case TRAINIT_SUM: return launch<D, TRAINIT_SUM>(dst, src, count);
    case TRAINIT_PROD: return launch<D, TRAINIT_PROD>(dst, src, count);
    case TRAINIT_MIN: return launch<D, TRAINIT_MIN>(dst, src, count);
    case TRAINIT_MAX: return launch<D, TRAINIT_MAX>(dst, src, count);
    default: return -EOPNOTSUPP;
  }
}

}  // namespace

int launch_reduce(void* dst, const void* src, size_t count, int dtype, int op) {
  if (count == 0) {
    return 0;
  }
  switch (dtype) {
    case TRAINIT_F32: return launch_op<F32>(dst, src, count, op);
    case TRAINIT_F16: return launch_op<F16>(dst, src, count, op);
    case TRAINIT_BF16: return launch_op<BF16>(dst, src, count, op);
    case TRAINIT_I32: return launch_op<I32>(dst, src, count, op);
    default: return -EOPNOTSUPP;
  }
}

}  // namespace trainit::coll::cuda

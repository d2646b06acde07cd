#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>

#include "coll/cuda/reduce_kernels.h"
#include "trainit/coll.h"

namespace trainit::coll::cuda {
namespace {

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

template <class D, int Op>
__global__ void reduce_kernel(typename D::T* dst, const typename D::T* src, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    dst[i] = apply_to<D, Op>(dst[i], src[i]);
  }
}

// A fold's inputs, passed by value as the kernel's argument.
struct Inputs {
  const void* p[kMaxFoldInputs];
  int n;
};

template <class D, int Op>
__global__ void fold_kernel(typename D::T* dst, Inputs in, size_t count) {
  using T = typename D::T;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    if constexpr (D::kInteger && (Op == TRAINIT_MIN || Op == TRAINIT_MAX)) {
      T acc = static_cast<const T*>(in.p[0])[i];
      for (int k = 1; k < in.n; ++k) {
        acc = apply<Op>(acc, static_cast<const T*>(in.p[k])[i]);
      }
      dst[i] = acc;
    } else {
      auto acc = D::load(static_cast<const T*>(in.p[0])[i]);
      for (int k = 1; k < in.n; ++k) {
        acc = apply<Op>(acc, D::load(static_cast<const T*>(in.p[k])[i]));
      }
      dst[i] = D::store(acc);
    }
  }
}

template <class D, int Op>
int launch_fold_op(void* dst, const Inputs& in, size_t count) {
  constexpr unsigned kThreads = 256;
  const size_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = blocks > 65535 ? 65535U : static_cast<unsigned>(blocks);
  fold_kernel<D, Op><<<grid, kThreads>>>(static_cast<typename D::T*>(dst), in, count);
  return static_cast<int>(cudaGetLastError());
}

template <class D>
int launch_fold_type(void* dst, const Inputs& in, size_t count, int op) {
  switch (op) {
    case TRAINIT_SUM:
      return launch_fold_op<D, TRAINIT_SUM>(dst, in, count);
    case TRAINIT_PROD:
      return launch_fold_op<D, TRAINIT_PROD>(dst, in, count);
    case TRAINIT_MIN:
      return launch_fold_op<D, TRAINIT_MIN>(dst, in, count);
    case TRAINIT_MAX:
      return launch_fold_op<D, TRAINIT_MAX>(dst, in, count);
    default:
      return -EOPNOTSUPP;
  }
}

template <class D, int Op>
int launch(void* dst, const void* src, size_t count) {
  constexpr unsigned kThreads = 256;
  const size_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = blocks > 65535 ? 65535U : static_cast<unsigned>(blocks);
  reduce_kernel<D, Op>
      <<<grid, kThreads>>>(static_cast<typename D::T*>(dst), static_cast<const typename D::T*>(src), count);
  return static_cast<int>(cudaGetLastError());
}

template <class D>
int launch_op(void* dst, const void* src, size_t count, int op) {
  switch (op) {
    case TRAINIT_SUM:
      return launch<D, TRAINIT_SUM>(dst, src, count);
    case TRAINIT_PROD:
      return launch<D, TRAINIT_PROD>(dst, src, count);
    case TRAINIT_MIN:
      return launch<D, TRAINIT_MIN>(dst, src, count);
    case TRAINIT_MAX:
      return launch<D, TRAINIT_MAX>(dst, src, count);
    default:
      return -EOPNOTSUPP;
  }
}

}  // namespace

int launch_fold(void* dst, const void* const* srcs, int n, size_t count, int dtype, int op) {
  if (n < 1 || n > kMaxFoldInputs) {
    return -EINVAL;
  }
  if (count == 0) {
    return 0;
  }
  Inputs in{};
  in.n = n;
  for (int k = 0; k < n; ++k) {
    in.p[k] = srcs[k];
  }
  switch (dtype) {
    case TRAINIT_F32:
      return launch_fold_type<F32>(dst, in, count, op);
    case TRAINIT_F16:
      return launch_fold_type<F16>(dst, in, count, op);
    case TRAINIT_BF16:
      return launch_fold_type<BF16>(dst, in, count, op);
    case TRAINIT_F64:
      return launch_fold_type<F64>(dst, in, count, op);
    case TRAINIT_I32:
      return launch_fold_type<I32>(dst, in, count, op);
    case TRAINIT_I64:
      return launch_fold_type<I64>(dst, in, count, op);
    case TRAINIT_U8:
      return launch_fold_type<U8>(dst, in, count, op);
    default:
      return -EOPNOTSUPP;
  }
}

int launch_reduce(void* dst, const void* src, size_t count, int dtype, int op) {
  if (count == 0) {
    return 0;
  }
  switch (dtype) {
    case TRAINIT_F32:
      return launch_op<F32>(dst, src, count, op);
    case TRAINIT_F16:
      return launch_op<F16>(dst, src, count, op);
    case TRAINIT_BF16:
      return launch_op<BF16>(dst, src, count, op);
    case TRAINIT_F64:
      return launch_op<F64>(dst, src, count, op);
    case TRAINIT_I32:
      return launch_op<I32>(dst, src, count, op);
    case TRAINIT_I64:
      return launch_op<I64>(dst, src, count, op);
    case TRAINIT_U8:
      return launch_op<U8>(dst, src, count, op);
    default:
      return -EOPNOTSUPP;
  }
}

}  // namespace trainit::coll::cuda

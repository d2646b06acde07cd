#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>

#include "coll/plugins/cuda/dtypes.cuh"
#include "coll/plugins/cuda/reduce_kernels.h"
#include "trainit/coll.h"

namespace trainit::coll::cuda {
namespace {

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

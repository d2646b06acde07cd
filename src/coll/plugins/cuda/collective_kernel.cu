// A whole collective as one kernel: the device algorithm (device_algo.h)
// over the lanes every chip shares (device_lanes.h), one thread block per
// block of the call, each thread with the chip below.
//
// Steps at system scope: a block's threads write the step's data, meet at
// a barrier, and its thread 0 fences (__threadfence_system) and stores the
// step with release semantics; a waiting block's thread 0 loads peers'
// steps with acquire semantics, then the block meets again. Peers' staging
// is read with loads that skip the L1 cache (ld.global.cg), which no other
// SM (and no other process's kernel) keeps coherent. Every wait reads the
// abort word (host memory the host side sets) every 1,024 polls and ends
// after the call's timeout (the GPU's global timer).
#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "coll/device_lanes.h"
#include "coll/plugins/cuda/dtypes.cuh"
#include "coll/plugins/cuda/reduce_kernels.h"

namespace trainit::coll::cuda {
namespace {

constexpr unsigned kThreads = 512;

// A thread of a thread block, as the lanes (device_lanes.h) use it.
template <class D>
class GpuChip {
 public:
  using Vec16 = int4;
  static constexpr uint32_t kPollsPerCheck = 1024;

  __device__ GpuChip(int op, int* slot) : op_(op), slot_(slot) {}

  __device__ unsigned tid() const { return threadIdx.x; }
  __device__ unsigned threads() const { return blockDim.x; }
  __device__ void barrier() { __syncthreads(); }
  __device__ int* slot() { return slot_; }

  __device__ static uint64_t load_acquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ static void store_release(uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  // The block's writes (gathered by the barrier before it) reach every
  // peer before the step does.
  __device__ static void fence() { __threadfence_system(); }
  __device__ static uint32_t load_abort(const volatile uint32_t* p) { return *p; }
  __device__ static int64_t now_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return static_cast<int64_t>(t);
  }
  __device__ static void relax(uint32_t) {}

  // Through L2 only, whatever the type: no other SM (and no other process's
  // kernel) keeps this SM's L1 coherent.
  template <class T>
  __device__ static T load_peer(const T* p) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16);
    T v;
    if constexpr (sizeof(T) == 16) {
      const int4 bits = __ldcg(reinterpret_cast<const int4*>(p));
      memcpy(&v, &bits, 16);
    } else if constexpr (sizeof(T) == 8) {
      const unsigned long long bits = __ldcg(reinterpret_cast<const unsigned long long*>(p));
      memcpy(&v, &bits, 8);
    } else if constexpr (sizeof(T) == 4) {
      const unsigned int bits = __ldcg(reinterpret_cast<const unsigned int*>(p));
      memcpy(&v, &bits, 4);
    } else if constexpr (sizeof(T) == 2) {
      const unsigned short bits = __ldcg(reinterpret_cast<const unsigned short*>(p));
      memcpy(&v, &bits, 2);
    } else {
      const unsigned char bits = __ldcg(reinterpret_cast<const unsigned char*>(p));
      memcpy(&v, &bits, 1);
    }
    return v;
  }

  // Elements first, first + stride, … of dst (and of also, unless null) =
  // srcs[0] op … op srcs[n-1], in that order (kernels.h); the op is the
  // call's, alike for every thread: one loop each.
  __device__ int fold(void* dst, void* also, const void* const* srcs, int n, size_t count, size_t first,
                      size_t stride) const {
    switch (op_) {
      case TRAINIT_SUM:
        return fold_as<TRAINIT_SUM>(dst, also, srcs, n, count, first, stride);
      case TRAINIT_PROD:
        return fold_as<TRAINIT_PROD>(dst, also, srcs, n, count, first, stride);
      case TRAINIT_MIN:
        return fold_as<TRAINIT_MIN>(dst, also, srcs, n, count, first, stride);
      default:
        return fold_as<TRAINIT_MAX>(dst, also, srcs, n, count, first, stride);
    }
  }

 private:
  template <int Op>
  __device__ static int fold_as(void* dst, void* also, const void* const* srcs, int n, size_t count, size_t first,
                                size_t stride) {
    using T = typename D::T;
    auto* out = static_cast<T*>(dst);
    auto* copy = static_cast<T*>(also);
    for (size_t i = first; i < count; i += stride) {
      T v;
      if constexpr (D::kInteger && (Op == TRAINIT_MIN || Op == TRAINIT_MAX)) {
        v = load_peer(static_cast<const T*>(srcs[0]) + i);
        for (int k = 1; k < n; ++k) {
          v = apply<Op>(v, load_peer(static_cast<const T*>(srcs[k]) + i));
        }
      } else {
        auto acc = D::load(load_peer(static_cast<const T*>(srcs[0]) + i));
        for (int k = 1; k < n; ++k) {
          acc = apply<Op>(acc, D::load(load_peer(static_cast<const T*>(srcs[k]) + i)));
        }
        v = D::store(acc);
      }
      out[i] = v;
      if (copy != nullptr) {
        copy[i] = v;
      }
    }
    return 0;
  }

  int op_;
  int* slot_;
};

template <class D>
__global__ void __launch_bounds__(kThreads) collective(dev::Call a) {
  __shared__ int slot;
  GpuChip<D> chip(a.op, &slot);
  dev::Lanes<GpuChip<D>> x(chip);
  dev::Block<dev::Lanes<GpuChip<D>>> block(x, a, static_cast<int>(blockIdx.x));
  const int r = block.run();
  if (r != 0 && threadIdx.x == 0) {
    atomicCAS(a.status, 0, r);
  }
}

// One kernel per element type; the op is the call's argument.
template <class D, int>
struct Launch {
  static int run(const dev::Call* a, cudaStream_t stream) {
    collective<D><<<static_cast<unsigned>(a->blocks), kThreads, 0, stream>>>(*a);
    return static_cast<int>(cudaGetLastError());
  }
};

}  // namespace

int launch_collective(const dev::Call& a, cudaStream_t stream) {
  if (!dev::reduces(a.kind)) {
    return Launch<U8, TRAINIT_SUM>::run(&a, stream);  // copies only
  }
  if (a.op < TRAINIT_SUM || a.op > TRAINIT_MAX) {
    return -EOPNOTSUPP;
  }
  return with_type<Launch>(a.dtype, TRAINIT_SUM, &a, stream);
}

}  // namespace trainit::coll::cuda

// A whole collective as one kernel: the device algorithm (device_algo.h),
// one thread block per block of the call, each with the lanes below.
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

#include "coll/device_algo.h"
#include "coll/plugins/cuda/dtypes.cuh"
#include "coll/plugins/cuda/reduce_kernels.h"

namespace trainit::coll::cuda {
namespace {

constexpr unsigned kThreads = 512;

__device__ __forceinline__ uint64_t load_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// An element through L2 only, whatever its type.
template <class T>
__device__ __forceinline__ T load_cg(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  T v;
  if constexpr (sizeof(T) == 8) {
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

template <class D>
class Lanes {
 public:
  __device__ explicit Lanes(int op) : op_(op) {}

  __device__ int sync() {
    __syncthreads();
    return 0;
  }

  __device__ static int64_t now_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return static_cast<int64_t>(t);
  }

  __device__ uint64_t last_step(int b, const dev::Call& a) const {
    return load_acquire(&dev::line(a.staging[a.rank], b)->seq);
  }

  // After sync(): every thread's data of step s is written.
  __device__ void publish(int b, uint64_t s, const dev::Call& a, bool first) {
    if (threadIdx.x == 0) {
      dev::Line* l = dev::line(a.staging[a.rank], b);
      if (first) {
        l->desc[s & 1] = a.desc;
        l->count[s & 1] = a.count;
      }
      __threadfence_system();
      store_release(&l->seq, s);
    }
  }

  __device__ int wait(int b, uint64_t s, const dev::Call& a, int64_t start) {
    __shared__ int result;
    __syncthreads();  // every thread has read the previous result
    if (threadIdx.x == 0) {
      int r = 0;
      for (int p = 0; r == 0 && p < a.n; ++p) {
        const uint64_t* seq = &dev::line(a.staging[p], b)->seq;
        for (uint32_t polls = 1; r == 0 && load_acquire(seq) < s; ++polls) {
          if ((polls & 1023) == 0) {
            if (*a.abort != 0) {
              r = -ECONNABORTED;
            } else if (a.timeout_ns > 0 && now_ns() - start > a.timeout_ns) {
              r = -ETIMEDOUT;
            }
          }
        }
      }
      result = r;
    }
    __syncthreads();
    return result;
  }

  __device__ bool agrees(int b, uint64_t s, const dev::Call& a) {
    __shared__ int all;
    if (threadIdx.x == 0) {
      bool ok = a.valid != 0;
      for (int p = 0; p < a.n; ++p) {
        const dev::Line* l = dev::line(a.staging[p], b);
        ok = ok && load_cg(&l->desc[s & 1]) == a.desc && load_cg(&l->count[s & 1]) == a.count;
      }
      all = ok ? 1 : 0;
    }
    __syncthreads();
    return all != 0;
  }

  // 16 bytes a thread where both ends and the length allow, else 4, else 1.
  __device__ int copy(void* dst, const void* src, size_t bytes) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    if (bytes == 0 || d == s) {
      return 0;
    }
    const uintptr_t bits = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s) | bytes;
    size_t i = threadIdx.x;
    if ((bits & 15) == 0) {
      for (; i < bytes / 16; i += blockDim.x) {
        reinterpret_cast<int4*>(d)[i] = __ldcg(reinterpret_cast<const int4*>(s) + i);
      }
    } else if ((bits & 3) == 0) {
      for (; i < bytes / 4; i += blockDim.x) {
        reinterpret_cast<unsigned int*>(d)[i] = __ldcg(reinterpret_cast<const unsigned int*>(s) + i);
      }
    } else {
      for (; i < bytes; i += blockDim.x) {
        d[i] = load_cg(s + i);
      }
    }
    return 0;
  }

  // dst[i] = srcs[0][i] op … op srcs[n-1][i], in that order (kernels.h);
  // the op is the call's, alike for every thread: one loop each.
  __device__ int fold(void* dst, const void* const* srcs, int n, size_t count) {
    switch (op_) {
      case TRAINIT_SUM:
        return fold_as<TRAINIT_SUM>(dst, srcs, n, count);
      case TRAINIT_PROD:
        return fold_as<TRAINIT_PROD>(dst, srcs, n, count);
      case TRAINIT_MIN:
        return fold_as<TRAINIT_MIN>(dst, srcs, n, count);
      default:
        return fold_as<TRAINIT_MAX>(dst, srcs, n, count);
    }
  }

 private:
  template <int Op>
  __device__ int fold_as(void* dst, const void* const* srcs, int n, size_t count) {
    using T = typename D::T;
    auto* out = static_cast<T*>(dst);
    for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
      if constexpr (D::kInteger && (Op == TRAINIT_MIN || Op == TRAINIT_MAX)) {
        T acc = load_cg(static_cast<const T*>(srcs[0]) + i);
        for (int k = 1; k < n; ++k) {
          acc = apply<Op>(acc, load_cg(static_cast<const T*>(srcs[k]) + i));
        }
        out[i] = acc;
      } else {
        auto acc = D::load(load_cg(static_cast<const T*>(srcs[0]) + i));
        for (int k = 1; k < n; ++k) {
          acc = apply<Op>(acc, D::load(load_cg(static_cast<const T*>(srcs[k]) + i)));
        }
        out[i] = D::store(acc);
      }
    }
    return 0;
  }

  int op_;
};

template <class D>
__global__ void __launch_bounds__(kThreads) collective(dev::Call a) {
  Lanes<D> x(a.op);
  dev::Block<Lanes<D>> block(x, a, static_cast<int>(blockIdx.x));
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

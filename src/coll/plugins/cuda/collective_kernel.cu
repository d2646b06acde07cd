// A whole collective as one kernel: the device algorithm (device_algo.h)
// over the lanes every chip shares (device_lanes.h), one thread block per
// block of the call, each thread with the chip below.
//
// Steps at system scope: a block's threads write the step's data, meet at
// a barrier, and its thread 0 fences (__threadfence_system) and stores the
// step with release semantics; in a waiting block, thread p loads peer p's
// step with acquire semantics, all peers at once, then the block meets
// again. Peers' staging is read with loads that skip the L1 cache
// (ld.global.cg), which no other SM (and no other process's kernel) keeps
// coherent. Every wait reads the abort word (host memory the host side
// sets, and a call that fails for good: dev::fails_for_good()) every 1,024
// polls and ends after the call's timeout (the GPU's global timer).
#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "coll/device_lanes.h"
#include "coll/plugins/cuda/dtypes.cuh"
#include "coll/plugins/cuda/reduce_kernels.h"

// Experiment builds of this kernel (the targets trainit_coll_cuda_gpu_scope,
// _lean_threads and _no_step_fence, which bench/coll/gpu_bundle.sh
// --variants builds and gpu_check.sh --variants checks and measures beside
// this one), not the plugin's:
//   TRAINIT_CUDA_GPU_SCOPE: steps at GPU scope (ld.acquire.gpu,
//     st.release.gpu, __threadfence()): enough only where every rank is on
//     this GPU;
//   TRAINIT_CUDA_LEAN_THREADS: a block of a small call launches with fewer
//     threads (threads_of());
//   TRAINIT_CUDA_NO_STEP_FENCE: no fence before a step's release store, nor
//     before a done word's; the block's barrier and the release order its
//     writes before either, as the host chip's steps (device_host.h) take
//     them to.
#if defined(TRAINIT_CUDA_GPU_SCOPE)
#define TRAINIT_STEP_SCOPE "gpu"
#else
#define TRAINIT_STEP_SCOPE "sys"
#endif

namespace trainit::coll::cuda {
namespace {

constexpr unsigned kThreads = 512;

// A thread of a thread block, as the lanes (device_lanes.h) use it.
template <class D>
class GpuChip {
 public:
  using Vec16 = int4;
  static constexpr uint32_t kPollsPerCheck = 1024;

  __device__ explicit GpuChip(int op) : op_(op) {}

  __device__ unsigned tid() const { return threadIdx.x; }
  __device__ unsigned threads() const { return blockDim.x; }
  __device__ void barrier() { __syncthreads(); }
  __device__ int barrier_or(int v) { return __syncthreads_or(v); }

  __device__ static uint64_t load_acquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire." TRAINIT_STEP_SCOPE ".global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ static void store_release(uint64_t* p, uint64_t v) {
    asm volatile("st.release." TRAINIT_STEP_SCOPE ".global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  // The block's writes (gathered by the barrier before it) reach every
  // peer before the step does.
  __device__ static void fence() {
#if defined(TRAINIT_CUDA_NO_STEP_FENCE)
#elif defined(TRAINIT_CUDA_GPU_SCOPE)
    __threadfence();
#else
    __threadfence_system();
#endif
  }
  __device__ static uint32_t load_abort(const volatile uint32_t* p) {
    return *p;
  }
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
  // call's, alike for every thread: one loop each. Where every pointer is
  // 16-byte aligned, 16 bytes a load: element by element the same
  // arithmetic, so bitwise the scalar loop's result.
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
  using T = typename D::T;
  static constexpr size_t kPerVec = 16 / sizeof(T);

  // Vectors a thread folds together: each source's kFoldUnroll loads in
  // flight at once, not one; as many as 16 accumulators' registers allow
  // (two blocks of kThreads must fit an SM: see collective()).
  static constexpr unsigned kFoldUnroll = kPerVec >= 16 ? 1 : kPerVec >= 8 ? 2 : 4;

  template <int Op>
  __device__ static int fold_as(void* dst, void* also, const void* const* srcs, int n, size_t count, size_t first,
                                size_t stride) {
    uintptr_t bits = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(also);
    for (int k = 0; k < n; ++k) {
      bits |= reinterpret_cast<uintptr_t>(srcs[k]);
    }
    size_t done = 0;
    if ((bits & 15) == 0) {
      const size_t vecs = count / kPerVec;
      size_t j = first;
      for (; j + (kFoldUnroll - 1) * stride < vecs; j += kFoldUnroll * stride) {
        fold_at<Op, kPerVec, kFoldUnroll>(dst, also, srcs, n, j, stride);
      }
      for (; j < vecs; j += stride) {
        fold_at<Op, kPerVec, 1>(dst, also, srcs, n, j, stride);
      }
      done = vecs * kPerVec;
    }
    for (size_t i = done + first; i < count; i += stride) {
      fold_at<Op, 1, 1>(dst, also, srcs, n, i, stride);
    }
    return 0;
  }

  // The U groups of W elements at [(at + u * stride) * W, … + W), u < U
  // (W * sizeof(T) is 16 or the size of one): every source's U loads
  // issued together (a single element's sources four at a time: a small
  // call's fold is a chain of loads), each element folded in rank order,
  // and every source of an element read before it is written.
  template <int Op, size_t W, unsigned U>
  __device__ static void fold_at(void* dst, void* also, const void* const* srcs, int n, size_t at, size_t stride) {
    T in[U][W];
    T out[U][W];
    for (unsigned u = 0; u < U; ++u) {
      load_elements<W>(srcs[0], at + u * stride, in[u]);
    }
    if constexpr (D::kInteger && (Op == TRAINIT_MIN || Op == TRAINIT_MAX)) {
      for (unsigned u = 0; u < U; ++u) {
        for (size_t e = 0; e < W; ++e) {
          out[u][e] = in[u][e];
        }
      }
#pragma unroll(U == 1 ? 4 : 1)
      for (int k = 1; k < n; ++k) {
        for (unsigned u = 0; u < U; ++u) {
          load_elements<W>(srcs[k], at + u * stride, in[u]);
        }
        for (unsigned u = 0; u < U; ++u) {
          for (size_t e = 0; e < W; ++e) {
            out[u][e] = apply<Op>(out[u][e], in[u][e]);
          }
        }
      }
    } else {
      decltype(D::load(in[0][0])) acc[U][W];
      for (unsigned u = 0; u < U; ++u) {
        for (size_t e = 0; e < W; ++e) {
          acc[u][e] = D::load(in[u][e]);
        }
      }
#pragma unroll(U == 1 ? 4 : 1)
      for (int k = 1; k < n; ++k) {
        for (unsigned u = 0; u < U; ++u) {
          load_elements<W>(srcs[k], at + u * stride, in[u]);
        }
        for (unsigned u = 0; u < U; ++u) {
          for (size_t e = 0; e < W; ++e) {
            acc[u][e] = apply<Op>(acc[u][e], D::load(in[u][e]));
          }
        }
      }
      for (unsigned u = 0; u < U; ++u) {
        for (size_t e = 0; e < W; ++e) {
          out[u][e] = D::store(acc[u][e]);
        }
      }
    }
    for (unsigned u = 0; u < U; ++u) {
      store_elements<W>(dst, at + u * stride, out[u]);
      if (also != nullptr) {
        store_elements<W>(also, at + u * stride, out[u]);
      }
    }
  }

  template <size_t W>
  __device__ static void load_elements(const void* src, size_t at, T (&v)[W]) {
    if constexpr (W == 1) {
      v[0] = load_peer(static_cast<const T*>(src) + at);
    } else {
      static_assert(W * sizeof(T) == 16);
      const int4 bits = load_peer(static_cast<const int4*>(src) + at);
      memcpy(v, &bits, 16);
    }
  }

  template <size_t W>
  __device__ static void store_elements(void* dst, size_t at, const T (&v)[W]) {
    if constexpr (W == 1) {
      static_cast<T*>(dst)[at] = v[0];
    } else {
      int4 bits;
      memcpy(&bits, v, 16);
      static_cast<int4*>(dst)[at] = bits;
    }
  }

  int op_;
};

// Two blocks an SM (at most 64 registers a thread): every block of every
// rank sharing one GPU must be resident at once, since a block waits for
// its peers' blocks; device.cpp's default keeps ranks × blocks at 64.
//
// A zero-copy call (a registered window: Call::where) is a kernel of its
// own, so that neither way's registers are allocated around the other's;
// one that stages its results (dev::stages_results()) runs Block::staged().
template <class D, bool kZeroCopy>
__global__ void __launch_bounds__(kThreads, 2) collective(dev::Call a) {
  GpuChip<D> chip(a.op);
  dev::Lanes<GpuChip<D>> x(chip);
  dev::Block<dev::Lanes<GpuChip<D>>> block(x, a, static_cast<int>(blockIdx.x));
  const int r = kZeroCopy ? block.zero_copy() : block.staged();
  __syncthreads();  // every thread's writes of the block are done
  if (threadIdx.x != 0) {
    return;
  }
  if (r != 0) {  // the call's first error; the host only reads it
    auto* status = reinterpret_cast<unsigned long long*>(a.status);
    const unsigned long long mine = dev::status_of(a.tag, r);
    unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(status);
    while (dev::status_tag(seen) != (a.tag & dev::kTagMask)) {
      const unsigned long long was = atomicCAS(status, seen, mine);
      seen = was == seen ? mine : was;
    }
    if (dev::fails_for_good(r)) {  // the calls queued behind it end at once, this status read first
      __threadfence_system();
      *a.abort = 1U;
    }
  }
  if (a.done != nullptr) {  // a synchronous call: the host returns once every block's is there
#if !defined(TRAINIT_CUDA_NO_STEP_FENCE)
    __threadfence_system();  // at system scope in every build: the host reads it
#endif
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&a.done[blockIdx.x]), "l"(a.tag) : "memory");
  }
}

// The threads of each block of the call: kThreads, or (the experiment
// TRAINIT_CUDA_LEAN_THREADS) one per 16 bytes a block moves, a warp at
// least: a small call's barriers then gather one warp, not sixteen.
unsigned threads_of(const dev::Call& a) {
#if defined(TRAINIT_CUDA_LEAN_THREADS)
  const uint64_t vectors = (dev::moved_bytes(a.kind, a.count, a.elem, a.n) / static_cast<uint64_t>(a.blocks) + 15) / 16;
  const uint64_t warps = (vectors + 31) / 32;
  return warps >= kThreads / 32 ? kThreads : warps < 1 ? 32U : static_cast<unsigned>(warps * 32);
#else
  (void)a;
  return kThreads;
#endif
}

// One kernel per element type; the op is the call's argument.
template <class D, int>
struct Launch {
  static int run(const dev::Call* a, cudaStream_t stream) {
    const unsigned threads = threads_of(*a);
    if (a->where != 0 && !dev::stages_results(*a)) {
      collective<D, true><<<static_cast<unsigned>(a->blocks), threads, 0, stream>>>(*a);
    } else {
      collective<D, false><<<static_cast<unsigned>(a->blocks), threads, 0, stream>>>(*a);
    }
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

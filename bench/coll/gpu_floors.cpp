// The floors' kernels as PTX and their launches (gpu_floors.h).
#include "gpu_floors.h"

#include <cuda.h>
#include <dlfcn.h>

#include "bench_util.h"

namespace bench {
namespace {

// PTX 7.0 for sm_70 and later: the driver compiles it for the GPU at load.
constexpr char kPtx[] = R"(.version 7.0
.target sm_70
.address_size 64

.visible .entry trainit_empty()
{
  ret;
}

.visible .entry trainit_swap(.param .u64 mine, .param .u64 peer, .param .u64 step)
{
  .reg .b64 %rd<5>;
  .reg .pred %p;
  ld.param.u64 %rd1, [mine];
  ld.param.u64 %rd2, [peer];
  ld.param.u64 %rd3, [step];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  st.release.sys.global.u64 [%rd1], %rd3;
$WAIT:
  ld.acquire.sys.global.u64 %rd4, [%rd2];
  setp.lt.u64 %p, %rd4, %rd3;
  @%p bra $WAIT;
  ret;
}
)";

struct Kernels {
  CUfunction empty = nullptr;
  CUfunction swap = nullptr;
  decltype(&::cuLaunchKernel) launch = nullptr;
};

// Loaded once a process (the context current: the runtime's).
const Kernels* kernels() {
  static Kernels k;
  static bool tried = false;
  if (!tried) {
    tried = true;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      return nullptr;
    }
    const auto load = reinterpret_cast<decltype(&::cuModuleLoadData)>(dlsym(lib, "cuModuleLoadData"));
    const auto get = reinterpret_cast<decltype(&::cuModuleGetFunction)>(dlsym(lib, "cuModuleGetFunction"));
    k.launch = reinterpret_cast<decltype(&::cuLaunchKernel)>(dlsym(lib, "cuLaunchKernel"));
    CUmodule module = nullptr;
    if (load == nullptr || get == nullptr || k.launch == nullptr || load(&module, kPtx) != CUDA_SUCCESS ||
        get(&k.empty, module, "trainit_empty") != CUDA_SUCCESS ||
        get(&k.swap, module, "trainit_swap") != CUDA_SUCCESS) {
      k.launch = nullptr;
    }
  }
  return k.launch != nullptr ? &k : nullptr;
}

// Mean µs of `launches` launches of f (one thread) and a synchronize, after
// one untimed; args(k) gives launch k's parameters.
template <class Args>
double timed(CUfunction f, cudaStream_t stream, int launches, Args args) {
  const Kernels* k = kernels();
  bool ok = true;
  Ns t0 = 0;
  for (int i = 0; i <= launches && ok; ++i) {
    if (i == 1) {
      t0 = now_ns();
    }
    ok = k->launch(f, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(stream), args(i), nullptr) == CUDA_SUCCESS &&
         cudaStreamSynchronize(stream) == cudaSuccess;
  }
  return ok ? static_cast<double>(now_ns() - t0) / 1e3 / launches : -1;
}

}  // namespace

double empty_launch_floor_us(cudaStream_t stream, int launches) {
  if (kernels() == nullptr) {
    return -1;
  }
  return timed(kernels()->empty, stream, launches, [](int) -> void** { return nullptr; });
}

double swap_floor_us(cudaStream_t stream, uint64_t* mine, const uint64_t* peer, int launches) {
  if (kernels() == nullptr) {
    return -1;
  }
  uint64_t step = 0;
  void* params[3] = {&mine, &peer, &step};
  return timed(kernels()->swap, stream, launches, [&](int i) {
    step = static_cast<uint64_t>(i) + 1;
    return params;
  });
}

}  // namespace bench

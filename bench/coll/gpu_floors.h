// The floors under a synchronous device call, for gpu_allreduce's table:
// what one empty kernel launch and a stream synchronize cost, and one launch
// in which two processes swap a step through IPC-mapped memory. Kernels as
// PTX text the driver compiles for the GPU it finds (the bench has no CUDA
// source), launched through the driver API (libcuda.so.1, dlopened): in a
// process whose CUDA runtime has made its device's context current.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace bench {

// Mean µs of `launches` empty kernels each followed by a
// cudaStreamSynchronize on `stream`; negative where the driver refused.
double empty_launch_floor_us(cudaStream_t stream, int launches);

// Mean µs of `launches` kernels of one thread that store step s in *mine
// (release, system scope) and wait until *peer holds s (acquire), each
// followed by a cudaStreamSynchronize; the peer process runs the same with
// the two words swapped. mine and peer: 8 zeroed bytes of device memory,
// the peer's mapped here (cudaIpcOpenMemHandle). Negative where the driver
// refused.
double swap_floor_us(cudaStream_t stream, uint64_t* mine, const uint64_t* peer, int launches);

}  // namespace bench

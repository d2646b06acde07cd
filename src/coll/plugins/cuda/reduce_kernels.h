// Reductions on the device. launch_reduce: dst[i] = dst[i] op src[i], the host kernels' rule (f16 and
// bf16 in f32, rounded once to nearest even; integers wrap; min/max keep dst
// unless src is strictly smaller/larger). Launched on the legacy default
// stream; returns a cudaError_t (0 on success), -EOPNOTSUPP as a negative
// value for a dtype/op it lacks.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "coll/device_algo.h"

namespace trainit::coll::cuda {

int launch_reduce(void* dst, const void* src, size_t count, int dtype, int op);

// The most inputs launch_fold takes (a device communicator's local ranks).
inline constexpr int kMaxFoldInputs = 16;

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], in that order,
// accumulated as the host kernels do (f16 and bf16 in f32, rounded once):
// bitwise the host fold. dst may be srcs[0]. Same returns as launch_reduce,
// and -EINVAL for n outside 1..kMaxFoldInputs.
int launch_fold(void* dst, const void* const* srcs, int n, size_t count, int dtype, int op);

// The device algorithm's whole call a (device_algo.h) as one kernel on
// stream: a cudaError_t (0 on success), -EOPNOTSUPP for a dtype or op the
// kernels lack. Its error lands in *a.status.
int launch_collective(const dev::Call& a, cudaStream_t stream);

}  // namespace trainit::coll::cuda

// dst[i] = dst[i] op src[i] on the device, the host kernels' rule (f16 and
// bf16 in f32, rounded once to nearest even; integers wrap; min/max keep dst
// unless src is strictly smaller/larger). Launched on the legacy default
// stream; returns a cudaError_t (0 on success), -EOPNOTSUPP as a negative
// value for a dtype/op it lacks.
#pragma once

#include <cstddef>

namespace trainit::coll::cuda {

int launch_reduce(void* dst, const void* src, size_t count, int dtype, int op);

}  // namespace trainit::coll::cuda

// The Ascend backend's fold on the NPU (ascend_backend.cpp): aclnn's
// elementwise operators (Add, Mul, Minimum, Maximum, Cast), reached through
// dlopen("libopapi.so") as AscendCL is, declared here from the public aclnn
// reference. Without that library the fold stays staged through the host.
#pragma once

#include <cstddef>

#include "coll/plugins/ascend/acl.h"

namespace trainit::coll::ascend {

// Whether libopapi.so and every operator the fold uses were found (looked
// for once per process; a miss is said once on stderr).
bool aclnn_ready();

// dst = srcs[0] op srcs[1] op … op srcs[n-1], count elements of dtype, on
// this process's device, accumulated as the host kernels do: each input is
// copied into local scratch with aclrtMemcpyAsync (an input may be another
// device's memory, imported: only asynchronous copies may read it), f16 and
// bf16 are cast to f32, folded there in rank order and cast back once (round
// to nearest even), other types fold in their own; all of it on `stream`
// (after what is queued there), synchronised before it returns. dst is
// device memory of this process. 0 or a negative errno.
int aclnn_fold(const Acl& acl, aclrtStream stream, void* dst, const void* const* srcs, int n, size_t count, int dtype,
               int op);

}  // namespace trainit::coll::ascend

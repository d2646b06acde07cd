// Mock aclnn operators for the tests: a shared library named libopapi.so
// (its soname too) beside the mock AscendCL (mock_acl.cpp, which it links),
// implementing the few operators the Ascend collective backend folds with
// on the device (src/coll/plugins/ascend/aclnn.cpp) and the tensor calls
// they take, with the prototypes and two-phase rule of the public aclnn
// reference: aclnnXxxGetWorkspaceSize checks the tensors and returns an
// executor and a workspace size, aclnnXxx runs that executor once on a
// stream. Every broken rule is refused, counted and reported on stderr:
//   - a tensor whose data is not an allocation of this process on its
//     current device (host memory, another process's memory imported by
//     IPC: operators read and write local device memory only), or runs past
//     it; before aclInit and aclrtSetDevice: ACLNN_ERR_PARAM_INVALID 161002;
//   - a null tensor, scalar, executor or workspace-size pointer:
//     ACLNN_ERR_PARAM_NULLPTR 161001;
//   - tensors of an operator that differ in element count, or (Add, Mul,
//     Minimum, Maximum) in dtype; a dtype the mock lacks; a workspace smaller
//     than asked; an executor run twice or never made: 161002.
// The arithmetic is the host kernels' (kernels_impl.h, the scalar table):
// f16 and bf16 compute in f32 and round to nearest even; integers wrap; min
// and max keep the first operand unless the second is strictly smaller
// (larger). Cast converts with round to nearest even. An operator runs
// before aclnnXxx returns, after the asynchronous copies queued on its
// stream (the default one or any other of the process); a stream that is
// not the process's is refused (the mock AscendCL counts it).
// mockAclnnCalls() and mockAclnnViolations() (not aclnn) count this process's
// operators run and rules broken.
#define KERNEL_NS mock_isa
#define KERNEL_WIDTH 0
#define KERNEL_NAME "mock"
#include <trainit/coll.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "coll/kernels_impl.h"

#define MOCK_API extern "C" __attribute__((visibility("default")))

extern "C" int mockAclMemoryKind(const void* p, size_t len);
extern "C" int mockAclSynchronizeStream(void* stream);

namespace {

using trainit::coll::mock_isa::bf16_to_f32;
using trainit::coll::mock_isa::f16_to_f32;
using trainit::coll::mock_isa::f32_to_bf16;
using trainit::coll::mock_isa::f32_to_f16;
using trainit::coll::mock_isa::kTable;

constexpr int kSuccess = 0;
constexpr int kNullptr = 161001;  // ACLNN_ERR_PARAM_NULLPTR
constexpr int kInvalid = 161002;  // ACLNN_ERR_PARAM_INVALID

// aclDataType values of the reference (acl_base.h).
constexpr int kFloat = 0;
constexpr int kFloat16 = 1;
constexpr int kInt32 = 3;
constexpr int kUint8 = 4;
constexpr int kInt64 = 9;
constexpr int kDouble = 11;
constexpr int kBf16 = 27;

std::atomic<uint64_t> calls{0};
std::atomic<uint64_t> violations{0};

__attribute__((format(printf, 3, 4))) int refuse(int code, const char* call, const char* fmt, ...) {
  violations.fetch_add(1, std::memory_order_relaxed);
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) {
    msg[0] = '\0';
  }
  va_end(ap);
  static_cast<void>(std::fprintf(stderr, "mock aclnn [%d]: %s refused: %s (aclnnStatus %d)\n",
                                 static_cast<int>(getpid()), call, msg, code));
  return code;
}

// The host kernels' dtype index of an aclDataType (-1: not one the mock has).
int host_dtype(int acl) {
  switch (acl) {
    case kFloat:
      return TRAINIT_F32;
    case kDouble:
      return TRAINIT_F64;
    case kFloat16:
      return TRAINIT_F16;
    case kBf16:
      return TRAINIT_BF16;
    case kInt32:
      return TRAINIT_I32;
    case kInt64:
      return TRAINIT_I64;
    case kUint8:
      return TRAINIT_U8;
    default:
      return -1;
  }
}

size_t elem_size(int acl) {
  switch (host_dtype(acl)) {
    case TRAINIT_F64:
    case TRAINIT_I64:
      return 8;
    case TRAINIT_F32:
    case TRAINIT_I32:
      return 4;
    case TRAINIT_F16:
    case TRAINIT_BF16:
      return 2;
    case TRAINIT_U8:
      return 1;
    default:
      return 0;
  }
}

constexpr uint64_t kTensorMagic = 0x6d6f636b74656e73;  // "mocktens"

}  // namespace

// The opaque types of the reference, as the mock makes them.
struct aclTensor {
  uint64_t magic;
  int dtype;
  int64_t count;
  void* data;
};
struct aclScalar {
  int dtype;
  double value;
};
struct aclOpExecutor {
  enum Op : uint8_t { kAdd, kMul, kMin, kMax, kCast } op;
  bool used;
  const aclTensor* self;
  const aclTensor* other;
  const aclTensor* out;
};

namespace {

// A tensor the operators may use: local device memory, in its bounds.
int check_tensor(const char* call, const aclTensor* t) {
  if (t == nullptr) {
    return refuse(kNullptr, call, "a null tensor");
  }
  if (t->magic != kTensorMagic) {
    return refuse(kInvalid, call, "%p is not a tensor of aclCreateTensor", static_cast<const void*>(t));
  }
  const int kind = mockAclMemoryKind(t->data, static_cast<size_t>(t->count) * elem_size(t->dtype));
  if (kind != 1) {
    return refuse(kInvalid, call, "tensor data %p is %s", t->data,
                  kind == 0    ? "host memory"
                  : kind == 2  ? "another process's memory (IPC-imported): operators take local device memory"
                  : kind == -1 ? "past the end of its buffer"
                               : "device memory before aclInit and aclrtSetDevice");
  }
  return kSuccess;
}

int prepare(const char* call, aclOpExecutor::Op op, const aclTensor* self, const aclTensor* other, const aclTensor* out,
            uint64_t* workspace, aclOpExecutor** executor) {
  if (workspace == nullptr || executor == nullptr) {
    return refuse(kNullptr, call, "a null workspace size or executor pointer");
  }
  int rc = check_tensor(call, self);
  rc = rc != kSuccess ? rc : other != nullptr ? check_tensor(call, other) : kSuccess;
  rc = rc != kSuccess ? rc : check_tensor(call, out);
  if (rc != kSuccess) {
    return rc;
  }
  if (self->count != out->count || (other != nullptr && other->count != self->count)) {
    return refuse(kInvalid, call, "element counts differ");
  }
  if (op != aclOpExecutor::kCast && (out->dtype != self->dtype || other->dtype != self->dtype)) {
    return refuse(kInvalid, call, "dtypes differ (%d, %d, out %d)", self->dtype, other->dtype, out->dtype);
  }
  auto* e = new (std::nothrow) aclOpExecutor{op, false, self, other, out};
  if (e == nullptr) {
    return kInvalid;
  }
  *workspace = 0;
  *executor = e;
  return kSuccess;
}

int run(const char* call, void* workspace, uint64_t size, aclOpExecutor* e, void* stream) {
  (void)workspace;
  (void)size;  // the mock asks for none
  if (e == nullptr) {
    return refuse(kNullptr, call, "a null executor");
  }
  if (mockAclSynchronizeStream(stream) != 0) {  // after what the stream holds; refused and counted there
    return kInvalid;
  }
  if (e->used) {
    return refuse(kInvalid, call, "an executor runs once (aclnn's two-phase rule)");
  }
  e->used = true;
  const size_t n = static_cast<size_t>(e->self->count);
  if (e->op == aclOpExecutor::kCast) {
    const auto* in = static_cast<const unsigned char*>(e->self->data);
    auto* to = static_cast<unsigned char*>(e->out->data);
    for (size_t i = 0; i < n; ++i) {
      float v = 0;
      uint16_t h = 0;
      switch (e->self->dtype) {
        case kFloat16:
          std::memcpy(&h, in + 2 * i, 2);
          v = f16_to_f32(h);
          break;
        case kBf16:
          std::memcpy(&h, in + 2 * i, 2);
          v = bf16_to_f32(h);
          break;
        default:
          std::memcpy(&v, in + 4 * i, 4);
      }
      switch (e->out->dtype) {
        case kFloat16:
          h = f32_to_f16(v);
          std::memcpy(to + 2 * i, &h, 2);
          break;
        case kBf16:
          h = f32_to_bf16(v);
          std::memcpy(to + 2 * i, &h, 2);
          break;
        default:
          std::memcpy(to + 4 * i, &v, 4);
      }
    }
  } else {
    const void* ins[2] = {e->self->data, e->other->data};
    kTable.fold[host_dtype(e->self->dtype)][static_cast<int>(e->op)](e->out->data, ins, 2, n);
  }
  delete e;
  calls.fetch_add(1, std::memory_order_relaxed);
  return kSuccess;
}

}  // namespace

MOCK_API aclTensor* aclCreateTensor(const int64_t* view_dims, uint64_t view_dims_num, int data_type,
                                    const int64_t* stride, int64_t offset, int format, const int64_t* storage_dims,
                                    uint64_t storage_dims_num, void* tensor_data) {
  (void)stride;
  (void)format;
  (void)storage_dims;
  (void)storage_dims_num;
  if (view_dims == nullptr || view_dims_num != 1 || offset != 0 || elem_size(data_type) == 0 || view_dims[0] < 0) {
    refuse(kInvalid, "aclCreateTensor", "the mock makes 1-D tensors of a known dtype at offset 0");
    return nullptr;
  }
  return new (std::nothrow) aclTensor{kTensorMagic, data_type, view_dims[0], tensor_data};
}

MOCK_API int aclDestroyTensor(const aclTensor* t) {
  if (t == nullptr || t->magic != kTensorMagic) {
    return refuse(kInvalid, "aclDestroyTensor", "not a tensor");
  }
  delete t;
  return kSuccess;
}

MOCK_API aclScalar* aclCreateScalar(void* value, int data_type) {
  if (value == nullptr) {
    return nullptr;
  }
  double v = 0;
  if (data_type == kFloat) {
    float f = 0;
    std::memcpy(&f, value, 4);
    v = f;
  } else if (data_type == kInt64) {
    int64_t i = 0;
    std::memcpy(&i, value, 8);
    v = static_cast<double>(i);
  } else {
    return nullptr;
  }
  return new (std::nothrow) aclScalar{data_type, v};
}

MOCK_API int aclDestroyScalar(const aclScalar* s) {
  delete s;
  return kSuccess;
}

MOCK_API int aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                      aclTensor* out, uint64_t* workspace, aclOpExecutor** executor) {
  if (alpha == nullptr || alpha->value != 1.0) {
    return refuse(alpha == nullptr ? kNullptr : kInvalid, "aclnnAddGetWorkspaceSize", "the mock adds with alpha 1");
  }
  return prepare("aclnnAddGetWorkspaceSize", aclOpExecutor::kAdd, self, other, out, workspace, executor);
}

MOCK_API int aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                      uint64_t* workspace, aclOpExecutor** executor) {
  return prepare("aclnnMulGetWorkspaceSize", aclOpExecutor::kMul, self, other, out, workspace, executor);
}

MOCK_API int aclnnMinimumGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                          uint64_t* workspace, aclOpExecutor** executor) {
  return prepare("aclnnMinimumGetWorkspaceSize", aclOpExecutor::kMin, self, other, out, workspace, executor);
}

MOCK_API int aclnnMaximumGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                          uint64_t* workspace, aclOpExecutor** executor) {
  return prepare("aclnnMaximumGetWorkspaceSize", aclOpExecutor::kMax, self, other, out, workspace, executor);
}

MOCK_API int aclnnCastGetWorkspaceSize(const aclTensor* self, int dtype, aclTensor* out, uint64_t* workspace,
                                       aclOpExecutor** executor) {
  const bool known = [](int a, int b) {
    const auto ok = [](int t) { return t == kFloat || t == kFloat16 || t == kBf16; };
    return ok(a) && ok(b);
  }(self != nullptr ? self->dtype : -1, dtype);
  if (self != nullptr && out != nullptr && (!known || out->dtype != dtype)) {
    return refuse(kInvalid, "aclnnCastGetWorkspaceSize", "the mock casts between float32, float16 and bfloat16");
  }
  return prepare("aclnnCastGetWorkspaceSize", aclOpExecutor::kCast, self, nullptr, out, workspace, executor);
}

MOCK_API int aclnnAdd(void* workspace, uint64_t size, aclOpExecutor* executor, void* stream) {
  return run("aclnnAdd", workspace, size, executor, stream);
}
MOCK_API int aclnnMul(void* workspace, uint64_t size, aclOpExecutor* executor, void* stream) {
  return run("aclnnMul", workspace, size, executor, stream);
}
MOCK_API int aclnnMinimum(void* workspace, uint64_t size, aclOpExecutor* executor, void* stream) {
  return run("aclnnMinimum", workspace, size, executor, stream);
}
MOCK_API int aclnnMaximum(void* workspace, uint64_t size, aclOpExecutor* executor, void* stream) {
  return run("aclnnMaximum", workspace, size, executor, stream);
}
MOCK_API int aclnnCast(void* workspace, uint64_t size, aclOpExecutor* executor, void* stream) {
  return run("aclnnCast", workspace, size, executor, stream);
}

// Not aclnn: operators this process ran, and rules it broke.
MOCK_API uint64_t mockAclnnCalls() {
  return calls.load(std::memory_order_relaxed);
}
MOCK_API uint64_t mockAclnnViolations() {
  return violations.load(std::memory_order_relaxed);
}

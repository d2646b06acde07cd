// The fold on the NPU with aclnn operators: see aclnn.h.
#include "coll/plugins/ascend/aclnn.h"

#include <dlfcn.h>
#include <pthread.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

// The opaque types of the reference (aclnn/acl_meta.h), at global scope as
// its C header declares them: an entry point's type here is the library's.
struct aclTensor;
struct aclScalar;
struct aclOpExecutor;

namespace trainit::coll::ascend {
namespace {

// The entry points of the reference (aclnn/acl_meta.h, aclnnop/*.h), as
// dlsym() finds them.
using aclnnStatus = int;
constexpr int kAclFloat = 0;  // aclDataType
constexpr int kAclFloat16 = 1;
constexpr int kAclInt32 = 3;
constexpr int kAclUint8 = 4;
constexpr int kAclInt64 = 9;
constexpr int kAclDouble = 11;
constexpr int kAclBf16 = 27;
constexpr int kFormatNd = 2;  // aclFormat ACL_FORMAT_ND

using PrepareBinary = aclnnStatus (*)(const aclTensor*, const aclTensor*, aclTensor*, uint64_t*, aclOpExecutor**);
using Run = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

struct Aclnn {
  aclTensor* (*create_tensor)(const int64_t*, uint64_t, int, const int64_t*, int64_t, int, const int64_t*, uint64_t,
                              void*);
  aclnnStatus (*destroy_tensor)(const aclTensor*);
  aclScalar* (*create_scalar)(void*, int);
  aclnnStatus (*destroy_scalar)(const aclScalar*);
  aclnnStatus (*add_prepare)(const aclTensor*, const aclTensor*, const aclScalar*, aclTensor*, uint64_t*,
                             aclOpExecutor**);
  PrepareBinary mul_prepare;
  PrepareBinary min_prepare;
  PrepareBinary max_prepare;
  aclnnStatus (*cast_prepare)(const aclTensor*, int, aclTensor*, uint64_t*, aclOpExecutor**);
  Run add;
  Run mul;
  Run min;
  Run max;
  Run cast;
};

Aclnn nn;
bool found = false;
pthread_once_t once = PTHREAD_ONCE_INIT;

template <class F>
bool sym(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

void load() {
  // The operators' library brings the tensor calls (libnnopbase.so) with it.
  void* lib = dlopen("libopapi.so", RTLD_NOW | RTLD_GLOBAL);
  found = lib != nullptr && sym(lib, "aclCreateTensor", nn.create_tensor) &&
          sym(lib, "aclDestroyTensor", nn.destroy_tensor) && sym(lib, "aclCreateScalar", nn.create_scalar) &&
          sym(lib, "aclDestroyScalar", nn.destroy_scalar) && sym(lib, "aclnnAddGetWorkspaceSize", nn.add_prepare) &&
          sym(lib, "aclnnMulGetWorkspaceSize", nn.mul_prepare) &&
          sym(lib, "aclnnMinimumGetWorkspaceSize", nn.min_prepare) &&
          sym(lib, "aclnnMaximumGetWorkspaceSize", nn.max_prepare) &&
          sym(lib, "aclnnCastGetWorkspaceSize", nn.cast_prepare) && sym(lib, "aclnnAdd", nn.add) &&
          sym(lib, "aclnnMul", nn.mul) && sym(lib, "aclnnMinimum", nn.min) && sym(lib, "aclnnMaximum", nn.max) &&
          sym(lib, "aclnnCast", nn.cast);
  if (!found) {
    // A report only: nothing to do when stderr is gone.
    static_cast<void>(std::fprintf(stderr,
                                   "trainit ascend backend [%d]: no aclnn operators (libopapi.so: %s): reductions are "
                                   "staged through host memory\n",
                                   static_cast<int>(getpid()), lib == nullptr ? dlerror() : "an operator is missing"));
  }
}

int acl_type(int dtype) {
  switch (dtype) {
    case TRAINIT_F32:
      return kAclFloat;
    case TRAINIT_F64:
      return kAclDouble;
    case TRAINIT_F16:
      return kAclFloat16;
    case TRAINIT_BF16:
      return kAclBf16;
    case TRAINIT_I32:
      return kAclInt32;
    case TRAINIT_I64:
      return kAclInt64;
    default:
      return kAclUint8;
  }
}

size_t type_size(int acl) {
  switch (acl) {
    case kAclDouble:
    case kAclInt64:
      return 8;
    case kAclFloat:
    case kAclInt32:
      return 4;
    case kAclFloat16:
    case kAclBf16:
      return 2;
    default:
      return 1;
  }
}

// Scratch device memory of this process, grown as calls need, kept.
struct Scratch {
  pid_t pid = 0;
  unsigned char* p = nullptr;
  size_t bytes = 0;
};
Scratch scratch;
pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;

int scratch_of(const Acl& acl, size_t bytes, unsigned char** out) {
  if (scratch.pid != getpid()) {  // a fork()ed child's inherited pointer is not its memory
    scratch = Scratch{getpid(), nullptr, 0};
  }
  if (scratch.bytes < bytes) {
    if (scratch.p != nullptr) {
      (void)acl.free(scratch.p);
      scratch.p = nullptr;
      scratch.bytes = 0;
    }
    void* p = nullptr;
    const int rc = from_acl(acl.malloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    if (rc != 0) {
      return rc;
    }
    scratch.p = static_cast<unsigned char*>(p);
    scratch.bytes = bytes;
  }
  *out = scratch.p;
  return 0;
}

// One operator's call: its tensors over device buffers of count elements,
// its two phases on the stream, its workspace freed once the stream is done
// (the caller synchronises).
class Ops {
 public:
  Ops(const Acl& acl, aclrtStream stream, size_t count)
      : acl_(acl), stream_(stream), dims_{static_cast<int64_t>(count)} {}
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;
  ~Ops() {
    for (int i = 0; i < workspaces_; ++i) {
      (void)acl_.free(workspace_[i]);
    }
  }

  // out = a op b, all of acl type t.
  int binary(int op, int t, void* a, void* b, void* out) {
    aclTensor* ta = tensor(t, a);
    aclTensor* tb = tensor(t, b);
    aclTensor* to = tensor(t, out);
    int rc = ta != nullptr && tb != nullptr && to != nullptr ? 0 : -ENOMEM;
    uint64_t ws = 0;
    aclOpExecutor* e = nullptr;
    if (rc == 0) {
      switch (op) {
        case TRAINIT_SUM: {
          float one_f = 1.0F;
          int64_t one_i = 1;
          const bool real = t == kAclFloat || t == kAclFloat16 || t == kAclBf16 || t == kAclDouble;
          aclScalar* alpha = real ? nn.create_scalar(&one_f, kAclFloat) : nn.create_scalar(&one_i, kAclInt64);
          rc = alpha == nullptr ? -ENOMEM : status(nn.add_prepare(ta, tb, alpha, to, &ws, &e));
          rc = rc != 0 ? rc : launch(nn.add, ws, e);
          if (alpha != nullptr) {
            (void)nn.destroy_scalar(alpha);
          }
          break;
        }
        case TRAINIT_PROD:
          rc = status(nn.mul_prepare(ta, tb, to, &ws, &e));
          rc = rc != 0 ? rc : launch(nn.mul, ws, e);
          break;
        case TRAINIT_MIN:
          rc = status(nn.min_prepare(ta, tb, to, &ws, &e));
          rc = rc != 0 ? rc : launch(nn.min, ws, e);
          break;
        default:
          rc = status(nn.max_prepare(ta, tb, to, &ws, &e));
          rc = rc != 0 ? rc : launch(nn.max, ws, e);
      }
    }
    drop(ta);
    drop(tb);
    drop(to);
    return rc;
  }

  int cast(int from, void* in, int to, void* out) {
    aclTensor* ti = tensor(from, in);
    aclTensor* tout = tensor(to, out);
    int rc = ti != nullptr && tout != nullptr ? 0 : -ENOMEM;
    uint64_t ws = 0;
    aclOpExecutor* e = nullptr;
    rc = rc != 0 ? rc : status(nn.cast_prepare(ti, to, tout, &ws, &e));
    rc = rc != 0 ? rc : launch(nn.cast, ws, e);
    drop(ti);
    drop(tout);
    return rc;
  }

 private:
  aclTensor* tensor(int t, void* data) {
    const int64_t stride = 1;
    return nn.create_tensor(dims_, 1, t, &stride, 0, kFormatNd, dims_, 1, data);
  }
  static void drop(aclTensor* t) {
    if (t != nullptr) {
      (void)nn.destroy_tensor(t);
    }
  }
  static int status(aclnnStatus s) { return s == 0 ? 0 : -EIO; }

  int launch(Run run, uint64_t ws, aclOpExecutor* e) {
    void* w = nullptr;
    if (ws != 0) {
      if (workspaces_ == kWorkspaces) {
        return -ENOMEM;
      }
      const int rc = from_acl(acl_.malloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST));
      if (rc != 0) {
        return rc;
      }
      workspace_[workspaces_++] = w;
    }
    return status(run(w, ws, e, stream_));
  }

  static constexpr int kWorkspaces = 64;
  const Acl& acl_;
  aclrtStream stream_;
  int64_t dims_[1];
  void* workspace_[kWorkspaces] = {};
  int workspaces_ = 0;
};

}  // namespace

bool aclnn_ready() {
  pthread_once(&once, load);
  return found;
}

int aclnn_fold(const Acl& acl, aclrtStream stream, void* dst, const void* const* srcs, int n, size_t count, int dtype,
               int op) {
  const int t = acl_type(dtype);
  const bool widen = t == kAclFloat16 || t == kAclBf16;
  const int ct = widen ? kAclFloat : t;  // the type the fold runs in
  const size_t bytes = count * type_size(t);
  const size_t cbytes = count * type_size(ct);
  pthread_mutex_lock(&scratch_lock);
  unsigned char* base = nullptr;
  int rc = scratch_of(acl, 3 * cbytes + bytes, &base);
  unsigned char* acc = base;            // the fold so far
  unsigned char* next = base + cbytes;  // acc op input, then swapped
  unsigned char* input = base + 2 * cbytes;
  unsigned char* raw = base + 3 * cbytes;  // an input as it came (widen only)
  Ops ops(acl, stream, count);
  for (int i = 0; rc == 0 && i < n; ++i) {
    unsigned char* into = i == 0 ? acc : input;
    unsigned char* landing = widen ? raw : into;
    rc = from_acl(acl.memcpy_async(landing, bytes, srcs[i], bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
    rc = rc != 0 || !widen ? rc : ops.cast(t, raw, ct, into);
    if (rc == 0 && i > 0) {
      rc = ops.binary(op, ct, acc, input, next);
      unsigned char* done = next;
      next = acc;
      acc = done;
    }
  }
  if (rc == 0) {
    rc = widen ? ops.cast(ct, acc, t, dst)
               : from_acl(acl.memcpy_async(dst, bytes, acc, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
  }
  const int synced = from_acl(acl.synchronize_stream(stream));
  pthread_mutex_unlock(&scratch_lock);
  return rc != 0 ? rc : synced;
}

}  // namespace trainit::coll::ascend

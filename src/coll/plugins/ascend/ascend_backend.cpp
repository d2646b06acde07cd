// libtrainit_coll_ascend.so: the collective backend on Ascend NPUs, over the
// AscendCL runtime reached through dlopen("libascendcl.so"): no build-time
// CANN dependency (the few entry points used are declared here from the
// public AscendCL reference); without the runtime or a device, init() says
// why on stderr and returns -ENODEV. docs/coll-ascend.md describes it.
//
// Device: TRAINIT_COLL_DEVICE when set; else 0 when ASCEND_RT_VISIBLE_DEVICES
// (or else ASCEND_VISIBLE_DEVICES) names one device, the only one the process
// sees; else ASCEND_DEVICE_ID, else DEVICE_ID (trainit gives each rank both:
// its device's position on the host, as the container numbers them); else 0.
//
// Memory is aclrtMalloc'd. Sharing follows the documented IPC order:
//   exporter: aclrtIpcMemGetExportKey (65-byte key, pid validation on), then
//     aclrtIpcMemSetImportPid with the importers' aclrtDeviceGetBareTgid ids
//     (process_id/allow_import), the key sent to them; at free, once every
//     importer closed, aclrtIpcMemClose(key) and then aclrtFree;
//   importer: aclrtIpcMemImportByKey (with peer access: the exporter may sit
//     on another device), use, aclrtIpcMemClose(key).
// The handle is a small header and the key; there is no fd (-1).
//
// The plugin queues its device work on a stream of its own (one per
// process, made at init). Copies between device buffers are
// aclrtMemcpyAsync on it (another device's memory may be used only by
// asynchronous device-to-device copies) and are done once the stream is
// synchronised: by wait(), or before anything the host reads or writes
// (host<->device copies with aclrtMemcpy, host<->import through a bounce
// buffer here), and before a free or a close.
//
// fold and reduce run on the NPU with aclnn's operators where libopapi.so is
// found (aclnn.cpp: inputs copied in with aclrtMemcpyAsync, folded in rank
// order as the host kernels do, on the same stream, synchronised before they
// return). Without it they are STAGED THROUGH HOST MEMORY: the operands are
// copied to the host, folded there by the host kernels (kernels_best(): the
// same fixed-order results as every other backend), and the result copied
// back — correct on any device, not fast.
//
// signal() is a no-op and wait() is aclrtSynchronizeDevice: the plugin's
// stream and the work a caller queued on the device itself (what a call
// waits for first). drain() is aclrtSynchronizeStream of the plugin's
// stream alone (what a call waits for between its steps).
//
// Errors: each aclError becomes a negative errno (from_acl), and a failed
// call prints one line with its name and the aclError number. Refused IPC
// calls (the plugin's own checks and the runtime's) are counted: violations().
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coll/arena.h"
#include "coll/backend.h"
#include "coll/kernels.h"
#include "coll/plugins/ascend/acl.h"
#include "coll/plugins/ascend/aclnn.h"

namespace trainit::coll::ascend {
namespace {

Acl acl;
void* acl_lib = nullptr;
pid_t ready_pid = 0;           // the process whose runtime is set up (a fork()ed child sets up its own)
int32_t device = 0;            // the logical device
aclrtStream stream = nullptr;  // the plugin's, made at init
std::atomic<uint64_t> violation_count{0};

// --- errors ------------------------------------------------------------------

__attribute__((format(printf, 1, 2))) void say(const char* fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) {  // cut short when too long
    msg[0] = '\0';
  }
  va_end(ap);
  // A report only: nothing to do when stderr is gone.
  static_cast<void>(std::fprintf(stderr, "trainit ascend backend [%d]: %s\n", static_cast<int>(getpid()), msg));
}

// A failed AscendCL call: one line naming it and its aclError, the errno.
int acl_failed(const char* call, aclError e) {
  const int err = from_acl(e);
  say("%s failed: aclError %d (%s)", call, e, std::strerror(-err));
  return err;
}

int check(const char* call, aclError e) {
  return e == ACL_SUCCESS ? 0 : acl_failed(call, e);
}

// A refused IPC call: counted.
int ipc_check(const char* call, aclError e) {
  if (e != ACL_SUCCESS) {
    violation_count.fetch_add(1, std::memory_order_relaxed);
  }
  return check(call, e);
}

__attribute__((format(printf, 2, 3))) int misuse(int err, const char* fmt, ...) {
  violation_count.fetch_add(1, std::memory_order_relaxed);
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) {
    msg[0] = '\0';
  }
  va_end(ap);
  say("refused: %s (%s)", msg, std::strerror(-err));
  return err;
}

// --- this process's buffers --------------------------------------------------

enum class Kind : uint8_t { kNone, kAlloc, kImport };

struct Buffer {
  Kind kind = Kind::kNone;
  pid_t pid = 0;  // the process it belongs to (a fork()ed child inherits the table)
  char* ptr = nullptr;
  uint64_t bytes = 0;
  bool exported = false;  // allocations: key open
  char key[kKeyLen] = {};
};

constexpr int kBuffers = 1024;
Buffer buffers[kBuffers];
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct Locked {
  Locked() { pthread_mutex_lock(&lock); }
  ~Locked() { pthread_mutex_unlock(&lock); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
};

// The buffer of this process holding [p, p + len) (or overlapping it);
// nullptr: host memory.
Buffer* find(const void* p, size_t len) {
  const pid_t me = getpid();
  const auto* c = static_cast<const char*>(p);
  for (Buffer& b : buffers) {
    if (b.kind != Kind::kNone && b.pid == me && c < b.ptr + b.bytes && c + (len == 0 ? 1 : len) > b.ptr) {
      return &b;
    }
  }
  return nullptr;
}

Buffer* new_slot() {
  const pid_t me = getpid();
  for (Buffer& b : buffers) {
    if (b.kind == Kind::kNone || b.pid != me) {
      return &b;
    }
  }
  return nullptr;
}

// What export_handle writes: 96 bytes.
constexpr uint64_t kMagic = 0x7472616e6173636e;  // "tranascn"
struct Handle {
  uint64_t magic;
  uint64_t bytes;
  int32_t exporter;  // bare tgid
  int32_t device;    // the exporter's logical device
  char key[kKeyLen];
};
static_assert(sizeof(Handle) <= TRAINIT_COLL_HANDLE_MAX);

// --- setup -------------------------------------------------------------------

template <class F>
bool sym(const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(acl_lib, name));
  if (out == nullptr) {
    say("libascendcl.so lacks %s: not the AscendCL runtime this backend needs", name);
  }
  return out != nullptr;
}

bool resolve() {
  return sym("aclInit", acl.init) && sym("aclrtSetDevice", acl.set_device) && sym("aclrtMalloc", acl.malloc) &&
         sym("aclrtFree", acl.free) && sym("aclrtMemcpy", acl.memcpy) && sym("aclrtMemcpyAsync", acl.memcpy_async) &&
         sym("aclrtSynchronizeDevice", acl.synchronize_device) && sym("aclrtCreateStream", acl.create_stream) &&
         sym("aclrtSynchronizeStream", acl.synchronize_stream) && sym("aclrtDeviceGetBareTgid", acl.get_bare_tgid) &&
         sym("aclrtIpcMemGetExportKey", acl.export_key) && sym("aclrtIpcMemSetImportPid", acl.set_import_pid) &&
         sym("aclrtIpcMemImportByKey", acl.import_by_key) && sym("aclrtIpcMemClose", acl.ipc_close);
}

// A device number from the variable name: -1 when unset, -2 malformed.
int device_from(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') {
    return -1;
  }
  char* end = nullptr;
  errno = 0;
  const long id = std::strtol(v, &end, 10);
  if (*end != '\0' || errno != 0 || id < 0 || id > 4096) {
    say("%s=\"%s\" is not a device number", name, v);
    return -2;
  }
  return static_cast<int>(id);
}

// Whether the runtime's visible-device list names exactly one device.
bool sees_one_device() {
  const char* v = std::getenv("ASCEND_RT_VISIBLE_DEVICES");
  if (v == nullptr) {
    v = std::getenv("ASCEND_VISIBLE_DEVICES");
  }
  return v != nullptr && v[0] != '\0' && std::strchr(v, ',') == nullptr;
}

// The header's device rule: the logical device, or -1 (said why).
int choose_device() {
  const int forced = device_from("TRAINIT_COLL_DEVICE");
  if (forced != -1) {
    return forced < 0 ? -1 : forced;
  }
  if (sees_one_device()) {
    return 0;
  }
  for (const char* name : {"ASCEND_DEVICE_ID", "DEVICE_ID"}) {
    const int id = device_from(name);
    if (id != -1) {
      return id < 0 ? -1 : id;
    }
  }
  return 0;
}

int as_init() {
  if (ready_pid == getpid()) {
    return 0;
  }
  if (acl_lib == nullptr) {
    acl_lib = dlopen("libascendcl.so", RTLD_NOW | RTLD_LOCAL);
    if (acl_lib == nullptr) {
      say("no AscendCL runtime: %s (install CANN or put its lib64 on LD_LIBRARY_PATH)", dlerror());
      return -ENODEV;
    }
    if (!resolve()) {
      return -ENOSYS;
    }
  }
  const aclError e = acl.init(nullptr);
  if (e != ACL_SUCCESS && e != ACL_ERROR_REPEAT_INITIALIZE) {
    return acl_failed("aclInit", e);
  }
  const int chosen = choose_device();
  if (chosen < 0) {
    return -EINVAL;
  }
  const aclError set = acl.set_device(chosen);
  if (set != ACL_SUCCESS) {
    say("no usable device %d: aclrtSetDevice failed: aclError %d", chosen, set);
    return from_acl(set);
  }
  aclrtStream made = nullptr;
  const aclError created = acl.create_stream(&made);
  if (created != ACL_SUCCESS) {
    return acl_failed("aclrtCreateStream", created);
  }
  device = chosen;
  stream = made;
  ready_pid = getpid();
  return 0;
}

int ready() {
  return ready_pid == getpid() ? 0 : -ENODEV;
}

// --- copies ------------------------------------------------------------------

// Everything queued on the plugin's stream is done.
int drain() {
  return check("aclrtSynchronizeStream", acl.synchronize_stream(stream));
}

// Device to device (either may be another device's import): queued on the
// plugin's stream.
int copy_d2d(void* dst, const void* src, size_t bytes) {
  return check("aclrtMemcpyAsync", acl.memcpy_async(dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
}

// Host memory to or from an import: through a buffer of this device.
int copy_bounced(void* dst, const void* src, size_t bytes, bool to_device) {
  void* bounce = nullptr;
  int rc = check("aclrtMalloc", acl.malloc(&bounce, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  if (rc != 0) {
    return rc;
  }
  if (to_device) {
    rc = check("aclrtMemcpy", acl.memcpy(bounce, bytes, src, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    rc = rc != 0 ? rc : copy_d2d(dst, bounce, bytes);
  } else {
    rc = copy_d2d(bounce, src, bytes);
    rc = rc != 0 ? rc : drain();
    rc = rc != 0 ? rc : check("aclrtMemcpy", acl.memcpy(dst, bytes, bounce, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
  }
  const int drained = drain();  // before the bounce buffer goes
  rc = rc != 0 ? rc : drained;
  const int freed = check("aclrtFree", acl.free(bounce));
  return rc != 0 ? rc : freed;
}

// A copy between any two of: host memory, this process's allocations, its
// imports. dst_kind and src_kind from find() (kNone: host). One that
// involves host memory is done when it returns, after the queued work.
int copy_any(void* dst, Kind dst_kind, const void* src, Kind src_kind, size_t bytes) {
  if (dst_kind == Kind::kNone && src_kind == Kind::kNone) {
    std::memmove(dst, src, bytes);
    return 0;
  }
  if (dst_kind != Kind::kNone && src_kind != Kind::kNone) {
    return copy_d2d(dst, src, bytes);
  }
  if (const int rc = drain(); rc != 0) {
    return rc;
  }
  if (dst_kind == Kind::kImport || src_kind == Kind::kImport) {
    return copy_bounced(dst, src, bytes, dst_kind == Kind::kImport);
  }
  return dst_kind == Kind::kAlloc ? check("aclrtMemcpy", acl.memcpy(dst, bytes, src, bytes, ACL_MEMCPY_HOST_TO_DEVICE))
                                  : check("aclrtMemcpy", acl.memcpy(dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
}

// The kind of memory [p, p + len) is; *kind kNone for host memory. -EFAULT
// for a range that runs out of its device buffer.
int kind_of(const void* p, size_t len, Kind* kind) {
  const Locked guard;
  const Buffer* b = find(p, len);
  *kind = b != nullptr ? b->kind : Kind::kNone;
  const auto* c = static_cast<const char*>(p);
  if (b != nullptr && (c < b->ptr || c + len > b->ptr + b->bytes)) {
    return misuse(-EFAULT, "%p + %zu runs outside its %llu-byte device buffer", p, len,
                  static_cast<unsigned long long>(b->bytes));
  }
  return 0;
}

// --- the vtable ----------------------------------------------------------------

int as_alloc(size_t bytes, void** ptr) {
  if (ptr == nullptr) {
    return -EINVAL;
  }
  *ptr = nullptr;
  int rc = ready();
  if (rc != 0) {
    return rc;
  }
  const size_t size = bytes == 0 ? 1 : bytes;
  const Locked guard;
  Buffer* slot = new_slot();
  if (slot == nullptr) {
    return -ENOMEM;
  }
  void* p = nullptr;
  if ((rc = check("aclrtMalloc", acl.malloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST))) != 0) {
    return rc;
  }
  *slot = Buffer{};
  slot->kind = Kind::kAlloc;
  slot->pid = getpid();
  slot->ptr = static_cast<char*>(p);
  slot->bytes = size;
  *ptr = p;
  return 0;
}

// The documented order: the exporter closes its key (refused while an
// importer has not closed its own), then frees.
int as_free(void* ptr) {
  if (ptr == nullptr) {
    return 0;
  }
  int rc = ready();
  rc = rc != 0 ? rc : drain();  // no queued copy still uses it
  if (rc != 0) {
    return rc;
  }
  const Locked guard;
  Buffer* b = find(ptr, 1);
  if (b == nullptr || b->ptr != ptr) {
    return misuse(-EINVAL, "free of %p, not an allocation of this process (freed twice?)", ptr);
  }
  if (b->kind == Kind::kImport) {
    return misuse(-EINVAL, "free of the import %p (close_import it)", ptr);
  }
  if (b->exported) {
    if ((rc = ipc_check("aclrtIpcMemClose (exporter)", acl.ipc_close(b->key))) != 0) {
      return rc;
    }
    b->exported = false;
  }
  if ((rc = ipc_check("aclrtFree", acl.free(ptr))) != 0) {
    return rc;
  }
  *b = Buffer{};
  return 0;
}

int as_export(void* ptr, size_t bytes, void* handle, size_t* handle_len, int* fd) {
  if (handle == nullptr || handle_len == nullptr || fd == nullptr) {
    return -EINVAL;
  }
  *fd = -1;
  int rc = ready();
  if (rc != 0) {
    return rc;
  }
  const Locked guard;
  Buffer* b = find(ptr, 1);
  if (b == nullptr || b->ptr != ptr || b->kind != Kind::kAlloc) {
    return misuse(-EINVAL, "export of %p, not an allocation of this process", ptr);
  }
  if (bytes > b->bytes) {
    return misuse(-EINVAL, "export of %zu bytes of a %llu-byte buffer", bytes,
                  static_cast<unsigned long long>(b->bytes));
  }
  if (*handle_len < sizeof(Handle)) {
    return -ENOSPC;
  }
  // One key per allocation, open until its free: later exports reuse it.
  if (!b->exported) {
    rc = ipc_check("aclrtIpcMemGetExportKey",
                   acl.export_key(ptr, b->bytes, b->key, sizeof b->key, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT));
    if (rc != 0) {
      return rc;
    }
    b->exported = true;
  }
  int32_t me = 0;
  if ((rc = check("aclrtDeviceGetBareTgid", acl.get_bare_tgid(&me))) != 0) {
    return rc;
  }
  Handle out{kMagic, b->bytes, me, device, {}};
  std::memcpy(out.key, b->key, kKeyLen);
  std::memcpy(handle, &out, sizeof out);
  *handle_len = sizeof out;
  return 0;
}

// The handle's key, checked: nullptr (said why) when it is not one of ours.
bool parse_handle(const void* handle, size_t handle_len, Handle* out) {
  if (handle == nullptr || handle_len != sizeof(Handle)) {
    misuse(-EINVAL, "a %zu-byte handle (the Ascend backend's are %zu)", handle_len, sizeof(Handle));
    return false;
  }
  std::memcpy(out, handle, sizeof *out);
  if (out->magic != kMagic || out->key[kKeyLen - 1] != '\0') {
    misuse(-EINVAL, "a handle that is not the Ascend backend's");
    return false;
  }
  return true;
}

int as_process_id(int32_t* id) {
  if (id == nullptr) {
    return -EINVAL;
  }
  const int rc = ready();
  return rc != 0 ? rc : check("aclrtDeviceGetBareTgid", acl.get_bare_tgid(id));
}

int as_allow_import(const void* handle, size_t handle_len, const int32_t* ids, size_t n) {
  int rc = ready();
  if (rc != 0) {
    return rc;
  }
  Handle h{};
  if (!parse_handle(handle, handle_len, &h)) {
    return -EINVAL;
  }
  if (n == 0) {
    return 0;
  }
  if (ids == nullptr || n > static_cast<size_t>(kMaxRanks)) {
    return -EINVAL;
  }
  int32_t copy[kMaxRanks];  // AscendCL takes a non-const array
  std::memcpy(copy, ids, n * sizeof *ids);
  return ipc_check("aclrtIpcMemSetImportPid", acl.set_import_pid(h.key, copy, n));
}

int as_import(const void* handle, size_t handle_len, int fd, void** ptr) {
  if (ptr == nullptr) {
    return -EINVAL;
  }
  *ptr = nullptr;
  int rc = ready();
  if (rc != 0) {
    return rc;
  }
  Handle h{};
  if (!parse_handle(handle, handle_len, &h)) {
    return -EINVAL;
  }
  if (fd >= 0) {
    return misuse(-EINVAL, "import with an fd: AscendCL shares memory by key only");
  }
  const Locked guard;
  Buffer* slot = new_slot();
  if (slot == nullptr) {
    return -ENOMEM;
  }
  void* p = nullptr;
  rc = ipc_check("aclrtIpcMemImportByKey", acl.import_by_key(&p, h.key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS));
  if (rc != 0) {
    return rc;
  }
  *slot = Buffer{};
  slot->kind = Kind::kImport;
  slot->pid = getpid();
  slot->ptr = static_cast<char*>(p);
  slot->bytes = h.bytes;
  std::memcpy(slot->key, h.key, kKeyLen);
  *ptr = p;
  return 0;
}

// The key's buffer must hold what this process will touch, as its handle
// says (AscendCL tells an importer no size: the exporter's word, checked
// against the bytes the exchange agreed on).
int as_import_sized(const void* handle, size_t handle_len, int fd, size_t bytes, void** ptr) {
  Handle h{};
  if (ptr != nullptr && handle != nullptr && handle_len == sizeof h) {
    std::memcpy(&h, handle, sizeof h);
    if (h.magic == kMagic && h.bytes < bytes) {
      *ptr = nullptr;
      return -EINVAL;
    }
  }
  return as_import(handle, handle_len, fd, ptr);
}

int as_close_import(void* ptr) {
  int rc = ready();
  rc = rc != 0 ? rc : drain();  // no queued copy still uses it
  if (rc != 0) {
    return rc;
  }
  const Locked guard;
  Buffer* b = find(ptr, 1);
  if (b == nullptr || b->ptr != ptr || b->kind != Kind::kImport) {
    return misuse(-EINVAL, "close_import of %p, not an import of this process (closed twice?)", ptr);
  }
  if ((rc = ipc_check("aclrtIpcMemClose (importer)", acl.ipc_close(b->key))) != 0) {
    return rc;
  }
  *b = Buffer{};
  return 0;
}

int as_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) {
    return 0;
  }
  if (dst == nullptr || src == nullptr) {
    return -EINVAL;
  }
  int rc = ready();
  Kind dk = Kind::kNone;
  Kind sk = Kind::kNone;
  rc = rc != 0 ? rc : kind_of(dst, bytes, &dk);
  rc = rc != 0 ? rc : kind_of(src, bytes, &sk);
  return rc != 0 ? rc : copy_any(dst, dk, src, sk, bytes);
}

// On the device through aclnn where it can run (dst this process's own),
// else staged: every input to host memory, the host kernels' n-input fold
// (f16/bf16 round once, as on the host path), the result back.
int as_fold(void* dst, const void* const* srcs, int n, size_t count, int dtype, int op) {
  if (const int rc = check_fold_args(dtype, op, count, dst, srcs, n); rc != 0) {
    return rc < 0 ? rc : 0;
  }
  const size_t size = dtype_size(dtype);
  int rc = ready();
  const size_t bytes = count * size;
  Kind dk = Kind::kNone;
  rc = rc != 0 ? rc : kind_of(dst, bytes, &dk);
  if (rc != 0) {
    return rc;
  }
  if (dk == Kind::kNone) {
    return misuse(-EFAULT, "fold into host memory %p (device buffers only)", dst);
  }
  for (int i = 0; rc == 0 && i < n; ++i) {
    Kind sk = Kind::kNone;
    rc = kind_of(srcs[i], bytes, &sk);
    if (rc == 0 && sk == Kind::kNone) {
      rc = misuse(-EFAULT, "fold from host memory %p (device buffers only)", srcs[i]);
    }
  }
  if (rc != 0 || (dk == Kind::kAlloc && aclnn_ready())) {
    return rc != 0 ? rc : aclnn_fold(acl, stream, dst, srcs, n, count, dtype, op);
  }
  auto* staged = static_cast<unsigned char*>(std::malloc(static_cast<size_t>(n + 1) * bytes));
  const void** ins = static_cast<const void**>(std::malloc(sizeof(void*) * static_cast<size_t>(n)));
  if (staged == nullptr || ins == nullptr) {
    std::free(staged);
    std::free(static_cast<void*>(ins));
    return -ENOMEM;
  }
  for (int i = 0; rc == 0 && i < n; ++i) {
    Kind sk = Kind::kNone;
    unsigned char* host = staged + static_cast<size_t>(i + 1) * bytes;
    rc = kind_of(srcs[i], bytes, &sk);
    rc = rc != 0 ? rc : copy_any(host, Kind::kNone, srcs[i], sk, bytes);
    ins[i] = host;
  }
  if (rc == 0) {
    kernels_best()->fold[dtype][op](staged, ins, n, count);
    rc = copy_any(dst, dk, staged, Kind::kNone, bytes);
  }
  std::free(staged);
  std::free(static_cast<void*>(ins));
  return rc;
}

// dst = dst op src: a fold of the two.
int as_reduce(void* dst, const void* src, size_t count, int dtype, int op) {
  const void* ins[2] = {dst, src};
  return as_fold(dst, ins, 2, count, dtype, op);
}

int as_signal() {
  return ready();
}

int as_wait() {
  const int rc = ready();
  return rc != 0 ? rc : check("aclrtSynchronizeDevice", acl.synchronize_device());
}

int as_drain() {
  const int rc = ready();
  return rc != 0 ? rc : drain();
}

uint64_t as_violations() {
  return violation_count.load(std::memory_order_relaxed);
}

constexpr trainit_coll_backend kAscend = {
    TRAINIT_COLL_BACKEND_ABI,
    "ascend",
    as_init,
    as_alloc,
    as_free,
    as_export,
    as_import,
    as_close_import,
    as_copy,
    as_reduce,
    as_signal,
    as_wait,
    as_violations,
    as_process_id,
    as_allow_import,
    as_fold,
    as_import_sized,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    as_drain,
};

}  // namespace
}  // namespace trainit::coll::ascend

extern "C" __attribute__((visibility("default"))) const trainit_coll_backend* trainit_coll_backend_v1() {
  return &trainit::coll::ascend::kAscend;
}

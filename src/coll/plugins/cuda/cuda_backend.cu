// libtrainit_coll_cuda.so: device memory from cuMemCreate, requested
// shareable as a POSIX fd (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), so that
// it can be exported (cuMemExportToShareableHandle), sent over SCM_RIGHTS and
// imported (cuMemImportFromShareableHandle, cuMemMap, cuMemSetAccess) by
// another rank — unlike cudaIpcGetMemHandle, which fails on such memory.
// The driver API is reached through dlopen("libcuda.so.1"): no link-time
// dependency; without a driver, init() returns -ENODEV.
//
// copy is cuMemcpy (unified addressing: device or host on either side);
// reduce launches on the legacy default stream, so later copies are ordered
// after it; signal is a no-op and wait synchronises the context (the work
// issued so far is done when it returns). The device is the CUDA runtime's
// current one when init() runs.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coll/backend.h"
#include "coll/device_algo.h"
#include "coll/plugins/cuda/reduce_kernels.h"

namespace trainit::coll::cuda {
namespace {

struct Driver {
  decltype(&::cuInit) init;
  decltype(&::cuDeviceGet) device_get;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain;
  decltype(&::cuCtxSetCurrent) ctx_set_current;
  decltype(&::cuCtxSynchronize) ctx_synchronize;
  decltype(&::cuCtxGetCurrent) ctx_get_current;
  decltype(&::cuCtxGetDevice) ctx_get_device;
  decltype(&::cuDeviceGetCount) device_get_count;
  decltype(&::cuMemGetAllocationGranularity) granularity;
  decltype(&::cuMemCreate) mem_create;
  decltype(&::cuMemRelease) mem_release;
  decltype(&::cuMemAddressReserve) address_reserve;
  decltype(&::cuMemAddressFree) address_free;
  decltype(&::cuMemMap) mem_map;
  decltype(&::cuMemUnmap) mem_unmap;
  decltype(&::cuMemSetAccess) set_access;
  decltype(&::cuMemExportToShareableHandle) export_handle;
  decltype(&::cuMemImportFromShareableHandle) import_handle;
  decltype(&::cuMemcpy) memcpy;
};

Driver drv;
CUdevice device;
CUcontext context;
bool ready = false;
thread_local bool bound = false;  // this thread has the context current

// Whether the backend is set up, making its context current on the calling
// thread first: the driver's calls (cuMemcpy, cuCtxSynchronize) act on the
// thread's current context, which a thread other than the one that ran
// cu_init (an application's worker, a framework's autograd thread) has
// not; the plugin's runtime then uses that context too.
bool usable() {
  if (!ready) {
    return false;
  }
  if (!bound) {
    bound = drv.ctx_set_current(context) == CUDA_SUCCESS;
  }
  return bound;
}

constexpr uint64_t kMagic = 0x7472616e63756461;  // "trancuda"

struct Handle {
  uint64_t magic;
  uint64_t size;   // the mapping's size (granularity-rounded)
  uint64_t bytes;  // what was asked for
  int32_t exporter_pid;
  int32_t device;
};
static_assert(sizeof(Handle) <= TRAINIT_COLL_HANDLE_MAX);

struct Mapping {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool imported = false;
  pid_t pid = 0;
};
constexpr int kMappings = 1024;
Mapping mappings[kMappings];
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct Locked {
  Locked() { pthread_mutex_lock(&lock); }
  ~Locked() { pthread_mutex_unlock(&lock); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
};

int from_cu(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return 0;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return -ENOMEM;
    case CUDA_ERROR_INVALID_VALUE:
      return -EINVAL;
    case CUDA_ERROR_NOT_SUPPORTED:
      return -EOPNOTSUPP;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
      return -ENODEV;
    default:
      return -EIO;
  }
}

template <class F>
bool sym(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (out == nullptr) {
    std::fprintf(stderr, "trainit cuda backend: libcuda.so.1 lacks %s\n", name);
  }
  return out != nullptr;
}

// The device, an ordinal among the visible ones: TRAINIT_COLL_DEVICE; else
// the device of the thread's current context (the caller's: torch sets it
// with torch.cuda.set_device); else LOCAL_RANK modulo the devices
// (torchrun's convention); else 0.
int choose_device(int* ordinal) {
  const char* chosen = std::getenv("TRAINIT_COLL_DEVICE");
  if (chosen != nullptr && *chosen != '\0') {
    char* end = nullptr;
    const long v = std::strtol(chosen, &end, 10);
    if (*end != '\0' || v < 0 || v > 1024) {
      std::fprintf(stderr, "trainit cuda backend: TRAINIT_COLL_DEVICE=\"%s\" is not a device number\n", chosen);
      return -EINVAL;
    }
    *ordinal = static_cast<int>(v);
    return 0;
  }
  CUcontext current = nullptr;
  CUdevice of_current = 0;
  if (drv.ctx_get_current(&current) == CUDA_SUCCESS && current != nullptr &&
      drv.ctx_get_device(&of_current) == CUDA_SUCCESS) {
    *ordinal = static_cast<int>(of_current);
    return 0;
  }
  int count = 0;
  const char* local = std::getenv("LOCAL_RANK");
  if (local != nullptr && *local != '\0' && drv.device_get_count(&count) == CUDA_SUCCESS && count > 0) {
    *ordinal = static_cast<int>(std::strtol(local, nullptr, 10) % count);
    *ordinal = *ordinal < 0 ? 0 : *ordinal;
    return 0;
  }
  *ordinal = 0;
  return 0;
}

int cu_init() {
  if (ready) {
    return 0;
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "trainit cuda backend: no CUDA driver (%s)\n", dlerror());
    return -ENODEV;
  }
  const bool all =
      sym(lib, "cuInit", drv.init) && sym(lib, "cuDeviceGet", drv.device_get) &&
      sym(lib, "cuDevicePrimaryCtxRetain", drv.primary_ctx_retain) &&
      sym(lib, "cuCtxSetCurrent", drv.ctx_set_current) && sym(lib, "cuCtxSynchronize", drv.ctx_synchronize) &&
      sym(lib, "cuCtxGetCurrent", drv.ctx_get_current) && sym(lib, "cuCtxGetDevice", drv.ctx_get_device) &&
      sym(lib, "cuDeviceGetCount", drv.device_get_count) &&
      sym(lib, "cuMemGetAllocationGranularity", drv.granularity) && sym(lib, "cuMemCreate", drv.mem_create) &&
      sym(lib, "cuMemRelease", drv.mem_release) && sym(lib, "cuMemAddressReserve", drv.address_reserve) &&
      sym(lib, "cuMemAddressFree", drv.address_free) && sym(lib, "cuMemMap", drv.mem_map) &&
      sym(lib, "cuMemUnmap", drv.mem_unmap) && sym(lib, "cuMemSetAccess", drv.set_access) &&
      sym(lib, "cuMemExportToShareableHandle", drv.export_handle) &&
      sym(lib, "cuMemImportFromShareableHandle", drv.import_handle) && sym(lib, "cuMemcpy", drv.memcpy);
  if (!all) {
    return -ENOSYS;
  }
  int rc = from_cu(drv.init(0));
  if (rc != 0) {
    return rc;
  }
  int ordinal = 0;
  if ((rc = choose_device(&ordinal)) != 0) {
    return rc;
  }
  // The plugin's own (static) runtime launches the kernels: on that device.
  if (cudaSetDevice(ordinal) != cudaSuccess) {
    std::fprintf(stderr, "trainit cuda backend: cannot use CUDA device %d\n", ordinal);
    return -ENODEV;
  }
  if ((rc = from_cu(drv.device_get(&device, ordinal))) != 0 ||
      (rc = from_cu(drv.primary_ctx_retain(&context, device))) != 0 ||
      (rc = from_cu(drv.ctx_set_current(context))) != 0) {
    return rc;
  }
  ready = true;
  return 0;
}

CUmemAllocationProp allocation_prop() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<int>(device);
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

Mapping* slot_of(CUdeviceptr ptr) {
  const pid_t me = getpid();
  for (Mapping& m : mappings) {
    if (m.ptr == ptr && m.ptr != 0 && m.pid == me) {
      return &m;
    }
  }
  return nullptr;
}

// Reserves addresses for size bytes of handle and maps them read-write for
// this device.
int map(CUmemGenericAllocationHandle handle, size_t size, CUdeviceptr* ptr) {
  int rc = from_cu(drv.address_reserve(ptr, size, 0, 0, 0));
  if (rc != 0) {
    return rc;
  }
  if ((rc = from_cu(drv.mem_map(*ptr, size, 0, handle, 0))) != 0) {
    drv.address_free(*ptr, size);
    return rc;
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = static_cast<int>(device);
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((rc = from_cu(drv.set_access(*ptr, size, &access, 1))) != 0) {
    drv.mem_unmap(*ptr, size);
    drv.address_free(*ptr, size);
  }
  return rc;
}

int unmap(Mapping& m) {
  drv.ctx_synchronize();  // nothing may still use it
  int rc = from_cu(drv.mem_unmap(m.ptr, m.size));
  const int rc2 = from_cu(drv.mem_release(m.handle));
  const int rc3 = from_cu(drv.address_free(m.ptr, m.size));
  m = Mapping{};
  return rc != 0 ? rc : rc2 != 0 ? rc2 : rc3;
}

int cu_alloc(size_t bytes, void** ptr) {
  if (!usable() || ptr == nullptr) {
    return ready ? -EINVAL : -ENODEV;
  }
  const CUmemAllocationProp prop = allocation_prop();
  size_t gran = 0;
  int rc = from_cu(drv.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  if (rc != 0) {
    return rc;
  }
  const size_t size = ((bytes == 0 ? 1 : bytes) + gran - 1) / gran * gran;
  const Locked guard;
  Mapping* slot = slot_of(0);
  for (Mapping& m : mappings) {
    if (slot == nullptr && m.ptr == 0) {
      slot = &m;
    }
  }
  if (slot == nullptr) {
    return -ENOMEM;
  }
  CUmemGenericAllocationHandle handle = 0;
  if ((rc = from_cu(drv.mem_create(&handle, size, &prop, 0))) != 0) {
    return rc;
  }
  CUdeviceptr dptr = 0;
  if ((rc = map(handle, size, &dptr)) != 0) {
    drv.mem_release(handle);
    return rc;
  }
  // Zeros (backend.h: a launching backend's memory reads so).
  if (cudaMemset(reinterpret_cast<void*>(dptr), 0, size) != cudaSuccess ||
      cudaStreamSynchronize(nullptr) != cudaSuccess) {
    Mapping failed{dptr, size, handle, false, getpid()};
    (void)unmap(failed);
    return -EIO;
  }
  *slot = Mapping{dptr, size, handle, false, getpid()};
  *ptr = reinterpret_cast<void*>(dptr);
  return 0;
}

int cu_free(void* ptr) {
  (void)usable();  // the thread makes the context current, if it can
  if (ptr == nullptr) {
    return 0;
  }
  const Locked guard;
  Mapping* m = slot_of(reinterpret_cast<CUdeviceptr>(ptr));
  if (m == nullptr || m->imported) {
    return -EINVAL;
  }
  return unmap(*m);
}

int cu_export(void* ptr, size_t bytes, void* handle, size_t* handle_len, int* fd) {
  if (handle == nullptr || handle_len == nullptr || fd == nullptr) {
    return -EINVAL;
  }
  *fd = -1;
  const Locked guard;
  const Mapping* m = slot_of(reinterpret_cast<CUdeviceptr>(ptr));
  if (m == nullptr || m->imported || bytes > m->size) {
    return -EINVAL;
  }
  if (*handle_len < sizeof(Handle)) {
    return -ENOSPC;
  }
  int shared = -1;
  const int rc = from_cu(drv.export_handle(&shared, m->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  if (rc != 0) {
    return rc;
  }
  const Handle out{kMagic, m->size, bytes, static_cast<int32_t>(getpid()), static_cast<int32_t>(device)};
  std::memcpy(handle, &out, sizeof out);
  *handle_len = sizeof out;
  *fd = shared;
  return 0;
}

int cu_import(const void* handle, size_t handle_len, int fd, void** ptr) {
  if (ptr == nullptr || handle == nullptr || fd < 0) {
    return -EINVAL;
  }
  *ptr = nullptr;
  if (handle_len > TRAINIT_COLL_HANDLE_MAX) {
    return -EMSGSIZE;
  }
  Handle in{};
  if (!usable() || handle_len != sizeof in) {
    return ready ? -EINVAL : -ENODEV;
  }
  std::memcpy(&in, handle, sizeof in);
  if (in.magic != kMagic || in.exporter_pid == getpid()) {
    return -EINVAL;
  }
  const Locked guard;
  Mapping* slot = nullptr;
  for (Mapping& m : mappings) {
    if (slot == nullptr && m.ptr == 0) {
      slot = &m;
    }
  }
  if (slot == nullptr) {
    return -ENOMEM;
  }
  CUmemGenericAllocationHandle h = 0;
  int rc = from_cu(drv.import_handle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  if (rc != 0) {
    return rc;
  }
  CUdeviceptr dptr = 0;
  if ((rc = map(h, in.size, &dptr)) != 0) {
    drv.mem_release(h);
    return rc;
  }
  *slot = Mapping{dptr, in.size, h, true, getpid()};
  *ptr = reinterpret_cast<void*>(dptr);
  return 0;
}

// The handle's mapping must hold what this process will touch: a smaller
// one (a peer that lies) is refused before it is mapped; one larger than
// the exporter's allocation the driver refuses in cuMemMap.
int cu_import_sized(const void* handle, size_t handle_len, int fd, size_t bytes, void** ptr) {
  Handle in{};
  if (ptr != nullptr && handle != nullptr && handle_len == sizeof in) {
    std::memcpy(&in, handle, sizeof in);
    if (in.magic == kMagic && (in.size < bytes || in.bytes < bytes || in.bytes > in.size)) {
      *ptr = nullptr;
      return -EINVAL;
    }
  }
  return cu_import(handle, handle_len, fd, ptr);
}

int cu_close_import(void* ptr) {
  (void)usable();  // the thread makes the context current, if it can
  const Locked guard;
  Mapping* m = slot_of(reinterpret_cast<CUdeviceptr>(ptr));
  if (m == nullptr || !m->imported) {
    return -EINVAL;
  }
  return unmap(*m);
}

int cu_copy(void* dst, const void* src, size_t bytes) {
  if (!usable()) {
    return -ENODEV;
  }
  if (bytes == 0) {
    return 0;
  }
  return from_cu(drv.memcpy(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes));
}

int cu_reduce(void* dst, const void* src, size_t count, int dtype, int op) {
  if (!usable()) {
    return -ENODEV;
  }
  const int rc = launch_reduce(dst, src, count, dtype, op);
  return rc < 0 ? rc : rc == 0 ? 0 : -EIO;
}

int cu_fold(void* dst, const void* const* srcs, int n, size_t count, int dtype, int op) {
  if (!usable()) {
    return -ENODEV;
  }
  const int rc = launch_fold(dst, srcs, n, count, dtype, op);
  return rc < 0 ? rc : rc == 0 ? 0 : -EIO;
}

int cu_signal() {
  return 0;
}

int cu_wait() {
  return usable() ? from_cu(drv.ctx_synchronize()) : -ENODEV;
}

uint64_t cu_violations() {
  return 0;
}

int cu_launch(const void* call, void* stream) {
  const auto* a = static_cast<const dev::Call*>(call);
  if (!usable()) {
    return -ENODEV;
  }
  if (a == nullptr || a->n < 1 || a->n > dev::kMaxRanks || a->blocks < 1 || a->lines < a->blocks ||
      a->lines > dev::kMaxBlocks) {
    return -EINVAL;
  }
  const int rc = launch_collective(*a, static_cast<cudaStream_t>(stream));
  return rc < 0 ? rc : rc == 0 ? 0 : -EIO;
}

int cu_query(void* stream) {
  if (!usable()) {
    return -ENODEV;
  }
  const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  if (e == cudaErrorNotReady) {
    // Not an error, but a runtime may keep it as the thread's last error,
    // which the next launch's check would take for a failed launch.
    (void)cudaGetLastError();
    return -EINPROGRESS;
  }
  return e == cudaSuccess ? 0 : -EIO;
}

// Pinned host memory mapped into the device (the status and abort words).
int cu_host_mapped(size_t bytes, void** host, void** device_view) {
  if (!usable()) {
    return -ENODEV;
  }
  if (host == nullptr || device_view == nullptr || bytes == 0) {
    return -EINVAL;
  }
  if (cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
    return -ENOMEM;
  }
  std::memset(*host, 0, bytes);
  if (cudaHostGetDevicePointer(device_view, *host, 0) != cudaSuccess) {
    (void)cudaFreeHost(*host);
    return -EIO;
  }
  return 0;
}

int cu_free_host_mapped(void* host) {
  (void)usable();  // the thread makes the context current, if it can
  return host == nullptr || cudaFreeHost(host) == cudaSuccess ? 0 : -EIO;
}

constexpr trainit_coll_backend kCuda = {
    TRAINIT_COLL_BACKEND_ABI,
    "cuda",
    cu_init,
    cu_alloc,
    cu_free,
    cu_export,
    cu_import,
    cu_close_import,
    cu_copy,
    cu_reduce,
    cu_signal,
    cu_wait,
    cu_violations,
    nullptr,
    nullptr,
    cu_fold,
    cu_import_sized,
    cu_launch,
    cu_query,
    cu_host_mapped,
    cu_free_host_mapped,
    nullptr,
};

}  // namespace
}  // namespace trainit::coll::cuda

extern "C" __attribute__((visibility("default"))) const trainit_coll_backend* trainit_coll_backend_v1() {
  return &trainit::coll::cuda::kCuda;
}

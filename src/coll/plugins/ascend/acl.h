// The subset of AscendCL the Ascend backend calls (ascend_backend.cpp),
// declared from the public reference (acl_base.h, acl_rt.h): its types,
// constants, error numbers, the entry points as dlsym() finds them, and each
// error as a negative errno.
#pragma once

#include <cstddef>
#include <cstdint>

// At global scope, as AscendCL's C header declares them: an entry point's
// type here is then the library's own (a call through a pointer of another
// function type is undefined, and -fsanitize=function says so).
enum aclrtMemcpyKind : int {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
};
enum aclrtMemMallocPolicy : int { ACL_MEM_MALLOC_HUGE_FIRST = 0 };

namespace trainit::coll::ascend {

using aclError = int;
using aclrtStream = void*;
constexpr uint64_t ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0x0;  // importers are named (SetImportPid)
constexpr uint64_t ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS = 0x1;
constexpr size_t kKeyLen = 65;  // what aclrtIpcMemGetExportKey writes

constexpr aclError ACL_SUCCESS = 0;
constexpr aclError ACL_ERROR_INVALID_PARAM = 100000;
constexpr aclError ACL_ERROR_UNINITIALIZE = 100001;
constexpr aclError ACL_ERROR_REPEAT_INITIALIZE = 100002;
constexpr aclError ACL_ERROR_BAD_ALLOC = 200000;
constexpr aclError ACL_ERROR_API_NOT_SUPPORT = 200001;
constexpr aclError ACL_ERROR_INVALID_DEVICE = 200002;
constexpr aclError ACL_ERROR_FEATURE_UNSUPPORTED = 200006;
constexpr aclError ACL_ERROR_RT_PARAM_INVALID = 107000;
constexpr aclError ACL_ERROR_RT_INVALID_DEVICEID = 107001;
constexpr aclError ACL_ERROR_RT_CONTEXT_NULL = 107002;
constexpr aclError ACL_ERROR_RT_INVALID_HANDLE = 107017;
constexpr aclError ACL_ERROR_RT_WAIT_TIMEOUT = 107019;
constexpr aclError ACL_ERROR_RT_TASK_TIMEOUT = 107020;
constexpr aclError ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000;
constexpr aclError ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;
constexpr aclError ACL_ERROR_RT_MEMORY_FREE = 207002;
constexpr aclError ACL_ERROR_RT_NO_DEVICE = 207004;
constexpr aclError ACL_ERROR_RT_NO_PERMISSION = 207006;
constexpr aclError ACL_ERROR_RT_DEVICE_OOM = 207018;
constexpr aclError ACL_ERROR_RT_TIMEOUT = 207020;
constexpr aclError ACL_ERROR_RT_IPC_ERROR = 507022;
constexpr aclError ACL_ERROR_RT_DEV_SETUP_ERROR = 507033;
constexpr aclError ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046;

struct Acl {
  aclError (*init)(const char* config_path);
  aclError (*set_device)(int32_t device_id);
  aclError (*malloc)(void** dev_ptr, size_t size, aclrtMemMallocPolicy policy);
  aclError (*free)(void* dev_ptr);
  aclError (*memcpy)(void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind);
  aclError (*memcpy_async)(void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind,
                           aclrtStream stream);
  aclError (*synchronize_device)();
  aclError (*create_stream)(aclrtStream* stream);
  aclError (*synchronize_stream)(aclrtStream stream);
  aclError (*get_bare_tgid)(int32_t* pid);
  aclError (*export_key)(void* dev_ptr, size_t size, char* key, size_t len, uint64_t flags);
  aclError (*set_import_pid)(const char* key, int32_t* pid, size_t num);
  aclError (*import_by_key)(void** dev_ptr, const char* key, uint64_t flags);
  aclError (*ipc_close)(const char* key);
};

// An aclError as a negative errno (0 for ACL_SUCCESS; -EIO for one not
// known here).
int from_acl(aclError e);

}  // namespace trainit::coll::ascend

#include "coll/plugins/ascend/acl.h"

#include <cerrno>

namespace trainit::coll::ascend {

int from_acl(aclError e) {
  switch (e) {
    case ACL_SUCCESS:
      return 0;
    case ACL_ERROR_INVALID_PARAM:
    case ACL_ERROR_RT_PARAM_INVALID:
      return -EINVAL;
    case ACL_ERROR_UNINITIALIZE:
    case ACL_ERROR_RT_CONTEXT_NULL:
    case ACL_ERROR_INVALID_DEVICE:
    case ACL_ERROR_RT_INVALID_DEVICEID:
    case ACL_ERROR_RT_NO_DEVICE:
    case ACL_ERROR_RT_DEV_SETUP_ERROR:
      return -ENODEV;
    case ACL_ERROR_BAD_ALLOC:
    case ACL_ERROR_RT_MEMORY_ALLOCATION:
    case ACL_ERROR_RT_DEVICE_OOM:
      return -ENOMEM;
    case ACL_ERROR_RT_NO_PERMISSION:
      return -EACCES;  // not an allowed importer
    case ACL_ERROR_RT_INVALID_HANDLE:
      return -ENOENT;             // no memory has that key (or not open here)
    case ACL_ERROR_RT_IPC_ERROR:  // the key is still in use elsewhere
    case ACL_ERROR_RT_MEMORY_FREE:
      return -EBUSY;  // memory still shared
    case ACL_ERROR_API_NOT_SUPPORT:
    case ACL_ERROR_FEATURE_UNSUPPORTED:
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT:
      return -EOPNOTSUPP;
    case ACL_ERROR_RT_WAIT_TIMEOUT:
    case ACL_ERROR_RT_TASK_TIMEOUT:
    case ACL_ERROR_RT_TIMEOUT:
    case ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
      return -ETIMEDOUT;
    default:
      return -EIO;
  }
}

}  // namespace trainit::coll::ascend

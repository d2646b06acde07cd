// The device check (trainit-device-check, device_check.cpp) and what it
// shares with the init that runs it (init/job/device_preflight.h) and with the
// fake device: its steps, its exit statuses, and which device a process's
// environment names.
//
// Header only, no allocation, no libstdc++ at run time: the fake-device
// plugin and the helper use it as the static init does.
#pragma once

#include <cstddef>
#include <cstring>
#include <initializer_list>

namespace trainit::coll {

// The steps, in order. Before each, the check writes its name as one line
// to stdout; the init accepts nothing else there.
//   open       load the backend (it picks its device from the environment)
//   alloc      device buffers for the pattern and the result
//   join       the communicator with the other devices' checks
//   allreduce  the pattern in, an f32 and an i32 sum, the results out
//   check      every element against the exact sum
inline constexpr const char* kDeviceCheckSteps[] = {"open", "alloc", "join", "allreduce", "check"};
inline constexpr int kDeviceCheckStepCount = sizeof(kDeviceCheckSteps) / sizeof(kDeviceCheckSteps[0]);

// Its index in kDeviceCheckSteps, or -1 for a name that is none.
inline int device_check_step(const char* name, size_t len) noexcept {
  for (int i = 0; i < kDeviceCheckStepCount; ++i) {
    if (std::strlen(kDeviceCheckSteps[i]) == len && std::memcmp(kDeviceCheckSteps[i], name, len) == 0) {
      return i;
    }
  }
  return -1;
}

// Its exit statuses. kPeer: the step failed waiting for another device's
// check (a join or a collective that timed out or was aborted), which the
// init blames on that other one; anything else but 0 is this device's.
inline constexpr int kDeviceCheckPassed = 0;
inline constexpr int kDeviceCheckFailed = 1;
inline constexpr int kDeviceCheckPeer = 2;
inline constexpr int kDeviceCheckUsage = 64;

namespace detail {

// A non-negative decimal number at the start of [s, end) that ends there or
// at a ','; -1 otherwise.
inline long leading_number(const char* s, const char* end) noexcept {
  long v = 0;
  const char* p = s;
  for (; p < end && *p != ','; ++p) {
    if (*p < '0' || *p > '9' || v > 100'000'000) {
      return -1;
    }
    v = v * 10 + (*p - '0');
  }
  return p == s ? -1 : v;
}

// Entry `index` of a comma-separated list; -1 when it is not a number.
inline long list_entry(const char* list, long index) noexcept {
  const char* end = list + std::strlen(list);
  const char* at = list;
  for (long i = 0; i < index; ++i) {
    const char* comma = static_cast<const char*>(std::memchr(at, ',', static_cast<size_t>(end - at)));
    if (comma == nullptr) {
      return -1;
    }
    at = comma + 1;
  }
  return leading_number(at, end);
}

inline bool set(const char* value) noexcept {
  return value != nullptr && *value != '\0';
}

}  // namespace detail

// The device a process uses, from the variables a launcher gives it (null:
// unset):
//   0. TRAINIT_COLL_DEVICE (the backends' own override);
//   1. DEVICE_ID (trainit's Ascend and MindSpore modes set it per rank);
//   2. else the visible-devices list, CUDA_VISIBLE_DEVICES or else
//      ASCEND_VISIBLE_DEVICES: its only entry, or entry LOCAL_RANK of
//      several (the device a framework picks by its local rank), or its
//      first;
//   3. else LOCAL_RANK (torchrun's and msrun's workers);
//   4. else 0.
// A value that is not a plain number counts as unset (a GPU's UUID).
inline long device_number(const char* coll_device, const char* device_id, const char* cuda_visible,
                          const char* ascend_visible, const char* local_rank) noexcept {
  for (const char* id : {coll_device, device_id}) {
    if (detail::set(id)) {
      if (long d = detail::leading_number(id, id + std::strlen(id)); d >= 0) {
        return d;
      }
    }
  }
  const long local =
      detail::set(local_rank) ? detail::leading_number(local_rank, local_rank + std::strlen(local_rank)) : -1;
  const char* visible = detail::set(cuda_visible) ? cuda_visible : ascend_visible;
  if (detail::set(visible)) {
    long d = local >= 0 ? detail::list_entry(visible, local) : -1;
    if (d < 0 || std::strchr(visible, ',') == nullptr) {
      d = detail::list_entry(visible, 0);
    }
    if (d >= 0) {
      return d;
    }
  }
  return local >= 0 ? local : 0;
}

}  // namespace trainit::coll

// trainit-device-check: proves one device works with the others of its host
// through the collective library, as a rank would use it. The init's device
// preflight (init/job/device_preflight.h, --preflight devices) runs one per local
// device, each with the environment of the rank that device is for, before
// any rank starts; it runs by hand too:
//
//   trainit-device-check NAME INDEX COUNT BACKEND [TIMEOUT]
//
// NAME: the meeting (every check of one preflight passes the same); INDEX:
// this check's place in 0..COUNT-1; BACKEND: as TRAINIT_COLL_BACKEND (host,
// cuda, ascend, NAME or a plugin's path); TIMEOUT: seconds the join and each
// collective may wait for the other checks (TRAINIT_COLL_TIMEOUT), so that
// the checks of working devices give up before the init's bound and only a
// hung device is still in its step when the init looks.
//
// The steps (device_check.h): open (the backend loads and picks its device
// from the environment), alloc, join, allreduce (an f32 and an i32 sum of a
// pattern of (INDEX + 1) multiples, copied to and from the device), check
// (every element equals its exact sum; after a wrong one this device reads
// its pattern back and sums it alone, to tell its fault from another's). Before each step its name goes to
// stdout as one line; a failure writes one line to stderr, the reason, and
// exits 1, or 2 when the step failed for another device (a join or a
// collective that timed out or was aborted waiting for one, a wrong sum this
// device alone gets right); 0 when every step passed; 64 for bad arguments.
#include "coll/device_check.h"

#include <errno.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace trainit::coll {
namespace {

// Elements of each buffer: several pages, an odd count.
constexpr size_t kCount = 4099;

struct Args {
  const char* name = nullptr;
  int index = 0;
  int count = 0;
  const char* backend = nullptr;
  const char* timeout = nullptr;
};

// Writes all of `text` to `fd`; what cannot be written is lost (the init
// reads a step it did not get as the one before).
void write_all(int fd, const char* text, size_t len) {
  while (len > 0) {
    const ssize_t n = write(fd, text, len);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    text += n;
    len -= static_cast<size_t>(n);
  }
}

void announce(int step) {
  char line[32];
  const int n = std::snprintf(line, sizeof line, "%s\n", kDeviceCheckSteps[step]);
  write_all(STDOUT_FILENO, line, static_cast<size_t>(n));
}

// The one line of a failure: "STEP: REASON".
__attribute__((format(printf, 2, 3))) void reason(int step, const char* fmt, ...) {
  char line[512];
  int n = std::snprintf(line, sizeof line, "%s: ", kDeviceCheckSteps[step]);
  va_list ap;
  va_start(ap, fmt);
  const int m = vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  n = m < 0 ? n : std::min<int>(n + m, static_cast<int>(sizeof line) - 2);
  line[n++] = '\n';
  write_all(STDERR_FILENO, line, static_cast<size_t>(n));
}

// A collective's error: another check's fault (it timed out or was
// aborted while waiting for one), or this device's.
int status_of(int err) {
  return err == -ETIMEDOUT || err == -ECONNABORTED ? kDeviceCheckPeer : kDeviceCheckFailed;
}

bool parse_int(const char* text, int max, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > max) {
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool parse_args(int argc, char** argv, Args* a) {
  if (argc < 5 || argc > 6) {
    return false;
  }
  a->name = argv[1];
  a->backend = argv[4];
  a->timeout = argc == 6 ? argv[5] : nullptr;
  return *a->name != '\0' && *a->backend != '\0' && parse_int(argv[3], 4096, &a->count) && a->count > 0 &&
         parse_int(argv[2], a->count - 1, &a->index);
}

// The pattern: check `index` holds (index + 1) * m at element j, m a small
// number of j, so every sum is exact in f32 and in i32.
int32_t multiple(size_t j) {
  return static_cast<int32_t>(j % 251) + 1;
}

struct Buffers {
  void* send_f32 = nullptr;
  void* recv_f32 = nullptr;
  void* send_i32 = nullptr;
  void* recv_i32 = nullptr;
};

class Check {
 public:
  explicit Check(const Args& a) : a_(a) {}
  Check(const Check&) = delete;
  Check& operator=(const Check&) = delete;
  ~Check() {
    for (void* p : {bufs_.send_f32, bufs_.recv_f32, bufs_.send_i32, bufs_.recv_i32}) {
      if (p != nullptr) {
        (void)trainit_device_free(solo_, p);
      }
    }
    if (comm_ != nullptr) {
      (void)trainit_comm_destroy(comm_);
    }
    if (solo_ != nullptr) {
      (void)trainit_comm_destroy(solo_);
    }
  }

  int run() {
    int status = open();
    if (status == kDeviceCheckPassed) {
      status = alloc();
    }
    if (status == kDeviceCheckPassed) {
      status = join();
    }
    if (status == kDeviceCheckPassed) {
      status = allreduce();
    }
    if (status == kDeviceCheckPassed) {
      status = check();
    }
    return status;
  }

 private:
  enum Step { kOpen, kAlloc, kJoin, kAllreduce, kCheck };

  // The backend, in a communicator of this check alone: loading it, and the
  // device it picks, is a step of its own before any other check is met.
  int open() {
    announce(kOpen);
    char solo_name[256];
    // Cut short only for a NAME near 256 bytes, which the meeting refuses anyway.
    (void)std::snprintf(solo_name, sizeof solo_name, "%s.open.%d", a_.name, a_.index);
    if (int r = trainit_comm_init_backend(&solo_, solo_name, 0, 1, a_.backend); r != 0) {
      const char* why = trainit_backend_error();
      reason(kOpen, "backend %s: %s", a_.backend, why != nullptr && *why != '\0' ? why : trainit_strerror(r));
      return kDeviceCheckFailed;
    }
    return kDeviceCheckPassed;
  }

  int alloc() {
    announce(kAlloc);
    for (void** p : {&bufs_.send_f32, &bufs_.recv_f32, &bufs_.send_i32, &bufs_.recv_i32}) {
      if (int r = trainit_device_alloc(solo_, kCount * 4, p); r != 0) {
        *p = nullptr;
        reason(kAlloc, "%zu bytes of device memory: %s", kCount * 4, trainit_strerror(r));
        return kDeviceCheckFailed;
      }
    }
    return kDeviceCheckPassed;
  }

  int join() {
    announce(kJoin);
    if (int r = trainit_comm_init_backend(&comm_, a_.name, a_.index, a_.count, a_.backend); r != 0) {
      comm_ = nullptr;
      reason(kJoin, "with the other %d device check(s): %s", a_.count - 1, trainit_strerror(r));
      return status_of(r);
    }
    return kDeviceCheckPassed;
  }

  int allreduce() {
    announce(kAllreduce);
    const auto scale = static_cast<int32_t>(a_.index + 1);
    for (size_t j = 0; j < kCount; ++j) {
      host_f32_[j] = static_cast<float>(scale * multiple(j));
      host_i32_[j] = scale * multiple(j) * 1000 + static_cast<int32_t>(j);
    }
    int r = copy(bufs_.send_f32, host_f32_);
    if (r == 0) {
      r = copy(bufs_.send_i32, host_i32_);
    }
    if (r != 0) {
      reason(kAllreduce, "copying the pattern to the device: %s", trainit_strerror(r));
      return kDeviceCheckFailed;
    }
    if (r = trainit_allreduce(comm_, bufs_.send_f32, bufs_.recv_f32, kCount, TRAINIT_F32, TRAINIT_SUM); r != 0) {
      reason(kAllreduce, "f32 sum: %s", trainit_strerror(r));
      return status_of(r);
    }
    if (r = trainit_allreduce(comm_, bufs_.send_i32, bufs_.recv_i32, kCount, TRAINIT_I32, TRAINIT_SUM); r != 0) {
      reason(kAllreduce, "i32 sum: %s", trainit_strerror(r));
      return status_of(r);
    }
    if (r = copy_back(bufs_.recv_f32, bufs_.recv_i32); r != 0) {
      reason(kAllreduce, "copying the sums from the device: %s", trainit_strerror(r));
      return kDeviceCheckFailed;
    }
    return kDeviceCheckPassed;
  }

  // The sums against the exact ones. A wrong one is this device's fault or
  // another's: each device folds a share of the elements for all, so every
  // check sees a wrong element; blame() tells which.
  int check() {
    announce(kCheck);
    char what[200];
    if (!sums_right(a_.count * (a_.count + 1) / 2, a_.count, what, sizeof what)) {
      return blame(what);
    }
    return kDeviceCheckPassed;
  }

  // Whether host_f32_ and host_i32_ hold `copies` patterns summed, whose
  // (index + 1) factors add up to `factor`; else the first wrong element in
  // words.
  bool sums_right(int32_t factor, int32_t copies, char* what, size_t room) const {
    for (size_t j = 0; j < kCount; ++j) {
      const auto want = static_cast<float>(factor * multiple(j));
      // Bit for bit: every sum is a small integer, exact in f32.
      if (std::bit_cast<uint32_t>(host_f32_[j]) != std::bit_cast<uint32_t>(want)) {
        (void)std::snprintf(what, room, "wrong f32 sum at element %zu: %.9g, not %.9g", j,
                            static_cast<double>(host_f32_[j]), static_cast<double>(want));
        return false;
      }
    }
    for (size_t j = 0; j < kCount; ++j) {
      const int32_t want = factor * multiple(j) * 1000 + copies * static_cast<int32_t>(j);
      if (host_i32_[j] != want) {
        (void)std::snprintf(what, room, "wrong i32 sum at element %zu: %" PRId32 ", not %" PRId32, j, host_i32_[j],
                            want);
        return false;
      }
    }
    return true;
  }

  // A wrong joint sum: this device's fault when it alone gets its own
  // pattern wrong, read back as it was written (its memory or its copies) or
  // summed alone (its reduction); else another device's.
  int blame(const char* joint) {
    char alone[200];
    int r = copy_back(bufs_.send_f32, bufs_.send_i32);
    if (r == 0 && !sums_right(a_.index + 1, 1, alone, sizeof alone)) {
      reason(kCheck, "%s (this device reads its own pattern back wrong: %s)", joint, alone);
      return kDeviceCheckFailed;
    }
    if (r == 0) {
      r = trainit_allreduce(solo_, bufs_.send_f32, bufs_.recv_f32, kCount, TRAINIT_F32, TRAINIT_SUM);
    }
    if (r == 0) {
      r = trainit_allreduce(solo_, bufs_.send_i32, bufs_.recv_i32, kCount, TRAINIT_I32, TRAINIT_SUM);
    }
    if (r == 0) {
      r = copy_back(bufs_.recv_f32, bufs_.recv_i32);
    }
    if (r != 0) {
      reason(kCheck, "%s; checking this device alone then failed: %s", joint, trainit_strerror(r));
      return kDeviceCheckFailed;
    }
    if (!sums_right(a_.index + 1, 1, alone, sizeof alone)) {
      reason(kCheck, "%s (alone, this device sums wrong too: %s)", joint, alone);
      return kDeviceCheckFailed;
    }
    reason(kCheck, "%s (alone, this device sums right: another device's fault)", joint);
    return kDeviceCheckPeer;
  }

  int copy(void* dst, const void* src) { return trainit_device_copy(comm_, dst, src, kCount * 4); }

  // Device buffers into host_f32_ and host_i32_.
  int copy_back(const void* f32, const void* i32) {
    const int r = copy(host_f32_, f32);
    return r != 0 ? r : copy(host_i32_, i32);
  }

  const Args& a_;
  trainit_comm* solo_ = nullptr;
  trainit_comm* comm_ = nullptr;
  Buffers bufs_;
  float host_f32_[kCount] = {};  // 16 KiB each: the check lives in main()'s frame
  int32_t host_i32_[kCount] = {};
};

}  // namespace
}  // namespace trainit::coll

int main(int argc, char** argv) {
  using namespace trainit::coll;
  Args args;
  if (!parse_args(argc, argv, &args)) {
    static const char kUsage[] =
        "usage: trainit-device-check NAME INDEX COUNT BACKEND [TIMEOUT]\n"
        "  checks one device with COUNT - 1 others meeting as NAME (INDEX in 0..COUNT-1, COUNT at most 4096)\n";
    write_all(STDERR_FILENO, kUsage, sizeof kUsage - 1);
    return kDeviceCheckUsage;
  }
  if (args.timeout != nullptr) {
    setenv("TRAINIT_COLL_TIMEOUT", args.timeout, 1);
  }
  // No trainit_alloc heap, and small device staging: the check sums a few
  // pages of device memory, and takes little of a device a job will fill.
  setenv("TRAINIT_COLL_HEAP", "0", 1);
  setenv("TRAINIT_COLL_DEVICE_STAGING", "1048576", 1);
  Check check(args);
  return check.run();
}

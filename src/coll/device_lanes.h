// Host lanes for the device algorithm (device_algo.h): a block is one host
// thread, its steps the lines in the ranks' staging, read and written with
// the C++ memory model's acquire and release, as the GPU's kernel does at
// system scope. The fake device runs every call's blocks on a thread of its
// own with these; the tests run ranks as threads of one process with them,
// so that ThreadSanitizer sees every hand-over of the GPU's protocol.
#pragma once

#include <sched.h>
#include <time.h>

#include <cstring>

#include "coll/device_algo.h"
#include "coll/kernels.h"

namespace trainit::coll::dev {

class HostLanes {
 public:
  // fold: the host kernel for the call's dtype and op (unused by copies).
  explicit HostLanes(FoldFn fold) : fold_(fold) {}

  static int sync() { return 0; }

  static int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

  static uint64_t last_step(int b, const Call& a) {
    return __atomic_load_n(&line(a.staging[a.rank], b)->seq, __ATOMIC_RELAXED);
  }

  static void publish(int b, uint64_t s, const Call& a, bool first) {
    Line* l = line(a.staging[a.rank], b);
    if (first) {
      l->desc[s & 1] = a.desc;
      l->count[s & 1] = a.count;
    }
    __atomic_store_n(&l->seq, s, __ATOMIC_RELEASE);
  }

  // Polls, then yields: the fake device's ranks often outnumber the cores.
  static int wait(int b, uint64_t s, const Call& a, int64_t start) {
    for (int p = 0; p < a.n; ++p) {
      const Line* l = line(a.staging[p], b);
      for (uint32_t polls = 1; __atomic_load_n(&l->seq, __ATOMIC_ACQUIRE) < s; ++polls) {
        if ((polls & 63) == 0) {
          if (__atomic_load_n(a.abort, __ATOMIC_ACQUIRE) != 0) {
            return -ECONNABORTED;
          }
          if (a.timeout_ns > 0 && now_ns() - start > a.timeout_ns) {
            return -ETIMEDOUT;
          }
        }
        if (polls > 256) {
          sched_yield();
        }
      }
    }
    return 0;
  }

  static bool agrees(int b, uint64_t s, const Call& a) {
    bool all = a.valid != 0;
    for (int p = 0; p < a.n; ++p) {
      const Line* l = line(a.staging[p], b);
      all = all && l->desc[s & 1] == a.desc && l->count[s & 1] == a.count;
    }
    return all;
  }

  static int copy(void* dst, const void* src, size_t bytes) {
    if (bytes != 0 && dst != src) {
      std::memmove(dst, src, bytes);
    }
    return 0;
  }

  int fold(void* dst, const void* const* srcs, int n, size_t count) const {
    if (count != 0) {
      fold_(dst, srcs, n, count);
    }
    return 0;
  }

 private:
  FoldFn fold_;
};

// Runs every block of a call, one after the other (each waits only on its
// own slices' lines), with lanes x: the call's error, also put in
// *a.status when it has one.
template <class X>
int run_blocks(X& x, const Call& a) {
  for (int b = 0; b < a.blocks; ++b) {
    Block<X> block(x, a, b);
    const int r = block.run();
    if (r != 0) {
      int32_t none = 0;
      (void)__atomic_compare_exchange_n(a.status, &none, r, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
      return r;
    }
  }
  return 0;
}

}  // namespace trainit::coll::dev

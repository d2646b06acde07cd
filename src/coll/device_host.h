// Host threads as a device's thread block, for the lanes every chip shares
// (device_lanes.h): the fake device runs each launched call on a block of
// its own threads with them, and the tests run ranks as threads of one
// process with them, so that ThreadSanitizer sees every hand-over of the
// GPU's protocol (a block's barrier, thread 0's release and acquire, a
// peer's data read after them).
#pragma once

#include <sched.h>
#include <time.h>

#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "coll/device_lanes.h"
#include "coll/kernels.h"

namespace trainit::coll::dev {

// What a block's threads share: the barrier they meet at, and the slot
// thread 0 tells the others a wait's outcome in.
struct HostBlock {
  explicit HostBlock(unsigned threads) : barrier(threads), threads(threads) {}
  std::barrier<> barrier;
  unsigned threads;
  int slot = 0;
};

struct HostVec16 {
  uint64_t lo;
  uint64_t hi;
};

// One host thread of a block. Steps are C++ acquire and release; a fold is
// the host kernel's, element by element (each thread its strided share).
class HostChip {
 public:
  using Vec16 = HostVec16;
  static constexpr uint32_t kPollsPerCheck = 64;

  // fold: the host kernel for the call's dtype and op (unused by copies).
  HostChip(HostBlock& block, unsigned tid, FoldFn fold, size_t elem)
      : block_(block), tid_(tid), fold_(fold), elem_(elem) {}

  unsigned tid() const { return tid_; }
  unsigned threads() const { return block_.threads; }
  void barrier() { block_.barrier.arrive_and_wait(); }
  int* slot() { return &block_.slot; }

  static uint64_t load_acquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static void store_release(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static void fence() {}  // the release store orders what the barrier gathered
  static uint32_t load_abort(const volatile uint32_t* p) {
    return __atomic_load_n(const_cast<const uint32_t*>(p), __ATOMIC_ACQUIRE);
  }
  static int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
  // Ranks often outnumber the cores here: a long wait yields.
  static void relax(uint32_t polls) {
    if (polls > 256) {
      sched_yield();
    }
  }
  template <class T>
  static T load_peer(const T* p) {
    return *p;
  }

  int fold(void* dst, const void* const* srcs, int n, size_t count, size_t first, size_t stride) const {
    const void* at[kMaxRanks];
    for (size_t i = first; i < count; i += stride) {
      for (int k = 0; k < n; ++k) {
        at[k] = static_cast<const unsigned char*>(srcs[k]) + i * elem_;
      }
      fold_(static_cast<unsigned char*>(dst) + i * elem_, at, n, 1);
    }
    return 0;
  }

 private:
  HostBlock& block_;
  unsigned tid_;
  FoldFn fold_;
  size_t elem_;
};

// The host fold a call's chips take: nullptr for copies only.
inline FoldFn host_fold(const Call& a, const Kernels* table) {
  return reduces(a.kind) && a.valid != 0 ? table->fold[a.dtype][a.op] : nullptr;
}

// One thread's part of every block of the call, one block after the other
// (each waits only on its own lines): the call's error, the same on every
// thread of the block; thread 0 also puts it in *a.status.
template <class C>
int run_blocks(C& chip, const Call& a) {
  Lanes<C> lanes(chip);
  for (int b = 0; b < a.blocks; ++b) {
    Block<Lanes<C>> block(lanes, a, b);
    const int r = block.run();
    if (r != 0) {
      int32_t none = 0;
      if (chip.tid() == 0) {
        (void)__atomic_compare_exchange_n(a.status, &none, r, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
      }
      return r;
    }
  }
  return 0;
}

// The whole call on `threads` host threads (this one among them), each with
// a chip C (HostChip, or one made like it): the call's error.
template <class C = HostChip>
int run_on_threads(const Call& a, unsigned threads, FoldFn fold) {
  HostBlock block(threads);
  std::vector<std::thread> others;
  for (unsigned t = 1; t < threads; ++t) {
    others.emplace_back([&, t] {
      C chip(block, t, fold, a.elem);
      (void)run_blocks(chip, a);
    });
  }
  C chip(block, 0, fold, a.elem);
  const int r = run_blocks(chip, a);
  for (auto& t : others) {
    t.join();
  }
  return r;
}

}  // namespace trainit::coll::dev

// Host threads as a device's thread block, for the lanes every chip shares
// (device_lanes.h): the fake device runs each launched call on a block of
// its own threads with them, and the tests run ranks as threads of one
// process with them, so that ThreadSanitizer sees every hand-over of the
// GPU's protocol (a block's barrier, thread 0's release and acquire, a
// peer's data read after them).
#pragma once

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <barrier>
#include <cstring>
#include <optional>

#include "coll/device_lanes.h"
#include "coll/kernels.h"

namespace trainit::coll::dev {

// What a block's threads share: how many they are, the barrier they meet
// at and what its last phase ORed (barrier_or); set once by start(), before
// `go` (run_on_threads).
struct HostBlock {
  // A phase's end, run once all threads arrived and before any leaves: the
  // phase's OR, read by each thread before it arrives at the next one.
  struct OrAll {
    HostBlock* block;
    void operator()() noexcept { block->ored = block->pending.exchange(0, std::memory_order_relaxed); }
  };
  void start(unsigned n) {
    threads = n;
    barrier.emplace(n, OrAll{this});
  }

  unsigned threads = 1;
  std::optional<std::barrier<OrAll>> barrier;
  std::atomic<int> pending{0};
  int ored = 0;
  std::atomic<bool> go{false};
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
  void barrier() { block_.barrier->arrive_and_wait(); }
  int barrier_or(int v) {
    if (v != 0) {
      block_.pending.fetch_or(v, std::memory_order_relaxed);
    }
    block_.barrier->arrive_and_wait();
    return block_.ored != 0 ? 1 : 0;  // as a GPU's __syncthreads_or: whether any was, not their bits
  }

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

  int fold(void* dst, void* also, const void* const* srcs, int n, size_t count, size_t first, size_t stride) const {
    const void* at[kMaxRanks];
    for (size_t i = first; i < count; i += stride) {
      for (int k = 0; k < n; ++k) {
        at[k] = static_cast<const unsigned char*>(srcs[k]) + i * elem_;
      }
      unsigned char* to = static_cast<unsigned char*>(dst) + i * elem_;
      fold_(to, at, n, 1);
      if (also != nullptr) {
        std::memcpy(static_cast<unsigned char*>(also) + i * elem_, to, elem_);
      }
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
// thread of the block; thread 0 also puts it in *a.status, unless a
// block of the call did first, and sets the abort word where it
// fails_for_good(). Once a block's threads are done, thread 0 stores the
// tag in its done word (a synchronous call's), as the GPU's blocks do; the
// blocks after one that failed for good, which do not run, at once. After
// ranks disagreed (-EINVAL) every block still takes its first step, as a
// GPU's, so that each line is one step on whichever blocks a peer ran.
template <class C>
int run_blocks(C& chip, const Call& a) {
  Lanes<C> lanes(chip);
  int r = 0;
  for (int b = 0; b < a.blocks; ++b) {
    if (!fails_for_good(r)) {
      Block<Lanes<C>> block(lanes, a, b);
      const int rb = block.run();
      r = r == 0 || fails_for_good(rb) ? rb : r;
      if (r != 0 && chip.tid() == 0 && a.status != nullptr) {
        uint64_t seen = __atomic_load_n(a.status, __ATOMIC_RELAXED);
        while (status_tag(seen) != (a.tag & kTagMask) &&
               !__atomic_compare_exchange_n(a.status, &seen, status_of(a.tag, r), false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED)) {
        }
        if (fails_for_good(r) && a.abort != nullptr) {
          __atomic_store_n(a.abort, 1U, __ATOMIC_RELEASE);
        }
      }
      chip.barrier();  // every thread's writes of the block are done
    }
    if (chip.tid() == 0 && a.done != nullptr) {
      __atomic_store_n(&a.done[b], a.tag, __ATOMIC_RELEASE);
    }
  }
  return r;
}

// What a helper thread of run_on_threads() runs.
template <class C>
struct HostThread {
  HostBlock* block;
  const Call* call;
  FoldFn fold;
  unsigned tid;

  static void* main(void* arg) {
    const auto* t = static_cast<const HostThread*>(arg);
    t->block->go.wait(false);
    C chip(*t->block, t->tid, t->fold, t->call->elem);
    (void)run_blocks(chip, *t->call);
    return nullptr;
  }
};

// The whole call on up to `threads` host threads (this one among them; as
// many as could be started, at most 16), each with a chip C (HostChip, or
// one made like it): the call's error.
template <class C = HostChip>
int run_on_threads(const Call& a, unsigned threads, FoldFn fold) {
  constexpr unsigned kMaxThreads = 16;
  HostBlock block;
  HostThread<C> args[kMaxThreads];
  pthread_t ids[kMaxThreads];
  unsigned started = 0;
  for (unsigned t = 1; t < threads && t < kMaxThreads; ++t) {
    args[t] = HostThread<C>{&block, &a, fold, t};
    if (pthread_create(&ids[t], nullptr, HostThread<C>::main, &args[t]) != 0) {
      break;  // no more threads: the block is the ones started
    }
    started = t;
  }
  block.start(started + 1);
  block.go.store(true, std::memory_order_release);
  block.go.notify_all();
  C chip(block, 0, fold, a.elem);
  const int r = run_blocks(chip, a);
  for (unsigned t = 1; t <= started; ++t) {
    pthread_join(ids[t], nullptr);
  }
  return r;
}

}  // namespace trainit::coll::dev

// The lanes of one block of the device algorithm (device_algo.h), written
// once for every chip that runs it with a block of threads: the CUDA
// plugin's kernel (a thread block; collective_kernel.cu) and the fake device
// and the tests (host threads; device_host.h). Each thread of the block
// holds its own Lanes and runs the same Block::run(), so every thread takes
// the same branches and meets at the same barriers:
//   - copy and fold: each thread its share of the elements, strided by the
//     block's thread count (on a GPU, neighbouring threads touch
//     neighbouring bytes);
//   - sync(): the block's barrier, after which the step's data of every
//     thread is written (or read);
//   - publish: thread 0, after that barrier, writes a first step's
//     descriptor, fences and stores the step with release semantics;
//   - step_idle: thread t the lines a.blocks + t, + t + threads, …;
//   - wait and agrees: thread p (p < n) loads peer p's step with acquire
//     semantics (then its descriptor), all peers at once, and the block
//     meets at a barrier that ORs the threads' outcomes: one memory
//     latency for every peer, not one a peer.
// The chip C gives what differs (all callable where the lanes run):
//   unsigned tid() const, threads() const;  void barrier();
//   int barrier_or(int v) — a barrier that returns nonzero where any
//     thread's v was (as a GPU's __syncthreads_or: 1, not the OR of the
//     values);
//   static uint64_t load_acquire(const uint64_t*);
//   static void store_release(uint64_t*, uint64_t);  static void fence();
//   static uint32_t load_abort(const volatile uint32_t*);
//   static int64_t now_ns();  static void relax(uint32_t polls);
//   kPollsPerCheck — how often a wait reads the abort word and the clock;
//   template <class T> static T load_peer(const T*) — a load of memory a
//     peer writes (past any cache the peer's writes do not reach);
//   using Vec16 — a 16-byte type to copy with;
//   int fold(dst, also, srcs, n, count, first, stride) — elements first,
//     first + stride, … of dst (and of `also`, unless null) = srcs[0] op …
//     op srcs[n-1], each element's srcs read before it is written.
#pragma once

#include "coll/device_algo.h"

namespace trainit::coll::dev {

template <class C>
class Lanes {
 public:
  TRAINIT_HD explicit Lanes(C& chip) : c_(chip) {}

  TRAINIT_HD int sync() {
    c_.barrier();
    return 0;
  }

  TRAINIT_HD static int64_t now_ns() { return C::now_ns(); }

  // The rank's own line, which only its earlier launches wrote (ordered
  // before this one): no acquire, so the call's first loads need not wait
  // for this one.
  TRAINIT_HD uint64_t last_step(int b, const Call& a) const { return C::load_peer(&line(a.staging[a.rank], b)->seq); }

  // After sync(): every thread's data of step s is written.
  TRAINIT_HD void publish(int b, uint64_t s, const Call& a, bool first) {
    if (c_.tid() == 0) {
      Line* l = line(a.staging[a.rank], b);
      if (first) {
        l->desc[s & 1] = a.desc;
        l->count[s & 1] = a.count;
        l->where[s & 1] = a.where;
      }
      C::fence();
      C::store_release(&l->seq, s);
    }
  }

  // Lines a.blocks … a.lines - 1, which the call runs no block on: the
  // first step, each at its own last step + 1, carrying the call's
  // descriptor and no data (a thread a line).
  TRAINIT_HD void step_idle(const Call& a) {
    for (int b = a.blocks + static_cast<int>(c_.tid()); b < a.lines; b += static_cast<int>(c_.threads())) {
      Line* l = line(a.staging[a.rank], b);
      const uint64_t s = last_step(b, a) + 1;
      l->desc[s & 1] = a.desc;
      l->count[s & 1] = a.count;
      l->where[s & 1] = a.where;
      C::store_release(&l->seq, s);
    }
  }

  // Thread p waits until peer p published s (with fewer threads than
  // peers, peers p, p + threads, …; the abort word and the timeout read
  // every C::kPollsPerCheck polls); the block learns the outcome.
  TRAINIT_HD int wait(int b, uint64_t s, const Call& a, int64_t start) {
    int why = 0;  // 1: aborted, 2: timed out
    for (int p = static_cast<int>(c_.tid()); why == 0 && p < a.n; p += static_cast<int>(c_.threads())) {
      const uint64_t* seq = &line(a.staging[p], b)->seq;
      for (uint32_t polls = 1; why == 0 && C::load_acquire(seq) < s; ++polls) {
        if (polls % C::kPollsPerCheck == 0) {
          if (C::load_abort(a.abort) != 0) {
            why = 1;
          } else if (a.timeout_ns > 0 && C::now_ns() - start > a.timeout_ns) {
            why = 2;
          }
        }
        C::relax(polls);
      }
    }
    if (c_.barrier_or(why) == 0) {
      return 0;
    }
    return c_.barrier_or(why & 1) != 0 ? -ECONNABORTED : -ETIMEDOUT;  // which, in a second barrier
  }

  // After wait(s): whether every rank's step s carried this descriptor
  // (thread p reads peer p's).
  TRAINIT_HD bool agrees(int b, uint64_t s, const Call& a) {
    int differs = c_.tid() == 0 && a.valid == 0 ? 1 : 0;
    for (int p = static_cast<int>(c_.tid()); p < a.n; p += static_cast<int>(c_.threads())) {
      const Line* l = line(a.staging[p], b);
      const uint64_t desc = C::load_peer(&l->desc[s & 1]);
      const uint64_t count = C::load_peer(&l->count[s & 1]);
      const uint64_t where = C::load_peer(&l->where[s & 1]);
      differs |= desc != a.desc || count != a.count || where != a.where ? 1 : 0;
    }
    return c_.barrier_or(differs) == 0;
  }

  // 16 bytes a thread where both ends and the length allow, else 4, else 1.
  TRAINIT_HD int copy(void* dst, const void* src, size_t bytes) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    if (bytes == 0 || d == s) {
      return 0;
    }
    const uintptr_t bits = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s) | bytes;
    if ((bits & 15) == 0) {
      strided<typename C::Vec16>(d, s, bytes / 16);
    } else if ((bits & 3) == 0) {
      strided<uint32_t>(d, s, bytes / 4);
    } else {
      strided<unsigned char>(d, s, bytes);
    }
    return 0;
  }

  TRAINIT_HD int fold(void* dst, void* also, const void* const* srcs, int n, size_t count) {
    return c_.fold(dst, also, srcs, n, count, c_.tid(), c_.threads());
  }

 private:
  // Each thread kCopyUnroll words loaded before any is stored: as many
  // loads in flight, where one at a time would leave a GPU's memory idle.
  static constexpr unsigned kCopyUnroll = 4;

  template <class T>
  TRAINIT_HD void strided(unsigned char* d, const unsigned char* s, size_t words) {
    auto* to = reinterpret_cast<T*>(d);
    const auto* from = reinterpret_cast<const T*>(s);
    const size_t step = c_.threads();
    size_t i = c_.tid();
    for (; i + (kCopyUnroll - 1) * step < words; i += kCopyUnroll * step) {
      T v[kCopyUnroll];
      for (unsigned u = 0; u < kCopyUnroll; ++u) {
        v[u] = C::load_peer(from + i + u * step);
      }
      for (unsigned u = 0; u < kCopyUnroll; ++u) {
        to[i + u * step] = v[u];
      }
    }
    for (; i < words; i += step) {
      to[i] = C::load_peer(from + i);
    }
  }

  C& c_;
};

}  // namespace trainit::coll::dev

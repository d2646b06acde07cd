// The collectives' protocol: how one call's data travels between the ranks
// of a node, whatever the collective. The algorithms (collectives.cpp) say
// what each rank contributes and what it makes of its peers' contributions;
// this layer moves the data, picks the size tier and runs it, the same for
// every collective.
//
// Everything is built from one primitive: a rank publishes step s (its line
// s & 1, and its staging half s & 1) and waits until every peer has
// published s. What a rank publishes at step s stays unchanged until every
// peer has published s + 1, so a rank reads its peers' step-s data between
// its own wait for s and its publish of s + 1, and never later.
//
// Every call's first step carries a descriptor (kind, dtype, op, root,
// count, an "invalid arguments" bit): every rank compares all of them after
// that first step, so ranks that disagree (a count mismatch, one rank in a
// barrier and another in an allreduce, a root out of range on one rank) all
// return -EINVAL after the same single step and stay in step for the next
// call. What the first step also carries depends only on the bytes each rank
// contributes, the same on every rank that agrees — the tier:
//  - inline (≤ kInlineBytes): the data itself, in the line beside the flag
//    (NCCL's LL idea): one cache-line hand-off, one synchronisation;
//  - staging (≤ kChunkBytes): the data in the rank's staging (one-shot): one
//    synchronisation, then every rank reads all contributions;
//  - large: the buffers' heap offsets. If every rank's buffers came from
//    trainit_alloc, ranks read (and write) each other's buffers in place —
//    zero copy — and one more step closes the call; otherwise the data goes
//    through staging in pipelined chunks, one chunk per step — chunked.
// Reductions fold rank 0, 1, … n-1 in that order for every element, so every
// rank's result is bitwise the same.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "coll/comm.h"
#include "coll/device_algo.h"

namespace trainit::coll {

// Counts at or above this do not fit the descriptor: invalid arguments.
inline constexpr uint64_t kMaxCount = 1ULL << 40;

// The descriptor's layout: kind 4 bits, dtype 4, op 2, root 11 (10–20), the
// three flags (21–23), count from bit 24. Streaming: rank 0's choice of
// how a chunked call hands its data over, which every rank follows.
inline constexpr uint64_t kDescInvalid = dev::kDescInvalid;
inline constexpr uint64_t kDescZeroCopy = 1ULL << 22;
inline constexpr uint64_t kDescStream = 1ULL << 23;
inline constexpr uint64_t kDescFlags = kDescInvalid | kDescZeroCopy | kDescStream;

// What a call declares at its first step.
struct Request {
  CollOp kind;
  int dtype;
  int op;
  int root;
  uint64_t count;    // the count every rank must pass alike
  bool valid;        // this rank's arguments are valid
  size_t bytes;      // what each rank contributes (0 when not valid): picks the tier
  const void* send;  // this rank's contribution; nullptr: none (a broadcast's non-root)
  void* recv;        // zero copy: where peers may write this rank's result; nullptr: nowhere
};

// Whether the call is large: zero copy or chunked, as the ranks' buffers allow.
inline bool is_large(const Request& q) {
  return q.bytes > kChunkBytes;
}

enum class Tier : uint8_t { kInline, kStaging, kZeroCopy, kChunked };

// Where every rank's data of one step lies, as this rank sees it. in(p) is
// what rank p contributed; out(p) a place for rank p's result:
//  - kLine: the step's sequence line (in only);
//  - kStaging: the step's staging half (in, then out);
//  - kBuffers: the ranks' own buffers, at the offsets published at the step
//    (zero copy): in is the send buffer, out the recv buffer.
// A rank writes only its own in and out of kLine and kStaging; kBuffers' out
// is written by whichever rank the algorithm makes its owner.
class Window {
 public:
  enum class Where : uint8_t { kLine, kStaging, kBuffers };

  Window(trainit_comm* c, uint32_t s, Where where) : c_(c), s_(s), where_(where) {}

  unsigned char* in(int p) const {
    switch (where_) {
      case Where::kLine:
        return arena_line(c_->base, p, s_)->data;
      case Where::kStaging:
        return arena_staging(c_->base, p, s_);
      case Where::kBuffers:
        return buffer(p, 0);
    }
    return nullptr;
  }

  unsigned char* out(int p) const {
    return where_ == Where::kBuffers ? buffer(p, 1) : arena_staging(c_->base, p, s_) + kChunkBytes;
  }

 private:
  unsigned char* buffer(int p, int which) const;

  trainit_comm* c_;
  uint32_t s_;
  Where where_;
};

// What the first step gave: the tier every rank runs on.
struct Opening {
  int rc;  // 0, or a negative errno: the call ends here
  Tier tier;
  uint32_t s;  // the first step: its line or staging holds what it carried
};

// One call: the slot's op and start time for the init's hang detection, the
// deadline, the completed count, and the steps.
class Call {
 public:
  Call(trainit_comm* c, CollOp kind);
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  ~Call();

  // The first step: publishes what q's tier carries (its data inline or in
  // staging, or its buffers' offsets, and whether this rank's buffers allow
  // zero copy) and its descriptor, waits for every peer and compares their
  // descriptors.
  Opening open(const Request& q, bool zero_copy_ok, bool stream) const;

  // Publishes step s and waits for every peer's: 0 or a negative errno.
  int step(uint32_t s) const;

  // The chunked tier's loop: `steps` steps after the first. Before it
  // publishes step t a rank runs produce(t, now, before): it fills its own
  // part of now (this step's staging) and may read every rank's part of
  // before (the previous step's, unchanged until every rank has published
  // this one). Once every rank has published step t it runs consume(t, now),
  // which may read every rank's part of now.
  template <class Produce, class Consume>
  int pipeline(size_t steps, const Produce& produce, const Consume& consume) const {
    for (size_t t = 0; t < steps; ++t) {
      const uint32_t s = ++c_->seq;
      const Window now(c_, s, Window::Where::kStaging);
      produce(t, now, Window(c_, s - 1, Window::Where::kStaging));
      const int r = step(s);
      if (r < 0) {
        return r;
      }
      consume(t, now);
    }
    return 0;
  }

 private:
  int first_step(SeqLine* mine, uint32_t s, uint64_t desc) const;
  bool all_zero_copy(uint32_t s) const;
  // Large calls: the buffers' offsets, in the line's data (Window::buffer).
  void put_offsets(SeqLine* l, const void* send, const void* recv) const;

  trainit_comm* c_;
  int64_t deadline_;
};

// How a chunked call hands its data over (hand_over): streaming stores
// cost more where the ranks' cores share a cache (the peer then reads from
// memory, not from this core's cache), and save four fifths of the call
// where they reach each other slowly — the same pair of processes can see
// both, as a VM's host moves its cores. So rank 0 measures each way's cost
// per KiB as calls go and picks for every rank (kDescStream): the cheaper,
// and now and then the other, to notice a change — every 32nd call, or
// more rarely where that way costs more (up to every 256th where it costs
// 8 times as much), and that try's figure replaces the way's; a slow call
// of the chosen way moves its average by an eighth at most.
struct Handover {
  bool stream;
  bool explore;      // a try of the dearer way
  int64_t start_ns;  // 0: not measured (ranks other than 0)
};
Handover choose_handover(trainit_comm* c);
// The call that began at h.start_ns ended at now_ns: its cost per KiB
// goes into its way's figure (rank 0).
void learn_handover(trainit_comm* c, Handover h, size_t bytes, int64_t now_ns);

// Runs one collective: its first step in the tier its size picks, then the
// algorithm's part for that tier. An Algorithm provides:
//   Request request() const;         what the first step declares
//   bool zero_copy_ok() const;       whether peers may use this rank's
//                                    buffers in place (asked when large)
//   void direct(Window) const;       the whole call's data is in the window
//                                    (inline, staging): the result
//   void zero_copy(Window) const;    the same from the ranks' buffers; one
//                                    more step ends the call
//   int chunked(const Call&) const;  the pipelined chunks (Call::pipeline)
template <class Algorithm>
[[gnu::always_inline]] inline int run(trainit_comm* c, const Algorithm& a) {
  const Request q = a.request();
  const Call call(c, q.kind);
  const Handover h = is_large(q) && c->rank == 0 ? choose_handover(c) : Handover{false, false, 0};
  const Opening o = call.open(q, is_large(q) && a.zero_copy_ok(), h.stream);
  if (o.rc < 0 || !q.valid) {
    // The first step failed on this rank's invalid bit already: never read on.
    return o.rc < 0 ? o.rc : -EINVAL;
  }
  switch (o.tier) {
    case Tier::kInline:
      a.direct(Window(c, o.s, Window::Where::kLine));
      return 0;
    case Tier::kStaging:
      a.direct(Window(c, o.s, Window::Where::kStaging));
      return 0;
    case Tier::kZeroCopy:
      ++c->zero_copy_calls;
      a.zero_copy(Window(c, o.s, Window::Where::kBuffers));
      // No rank returns (and lets its caller reuse its buffers) while a peer
      // may still read or write them.
      return call.step(++c->seq);
    case Tier::kChunked: {
      c->stream_handover = (arena_line(c->base, 0, o.s)->desc & kDescStream) != 0;
      const int r = a.chunked(call);
      if (r == 0 && c->rank == 0) {
        learn_handover(c, h, q.bytes, comm_now_ns());
      }
      return r;
    }
  }
  return 0;
}

// Transfer primitives.

// Copies bytes; none (and src, dst may be null) when bytes is 0.
inline void copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) {
    std::memcpy(dst, src, bytes);
  }
}

// Copies bytes into the arena for peers to read, with streaming stores
// (x86-64; elsewhere a copy): the lines go to memory, out of every cache.
// Writing a line a peer's cache still holds (it read the staging at an
// earlier step) stalls on taking it back, line by line: 512 KiB that a peer
// had read took 52 µs with ordinary stores and 18 µs with streaming ones on
// a 2-core EPYC VM, the peer's read of it 11 and 23 µs. The larger gain is
// on machines whose cores reach each other slowly (where that guest's two
// cores sometimes sit: a cache-line round trip of 350 ns instead of 60).
void hand_over(const trainit_comm* c, void* dst, const void* src, size_t bytes);

// Copies unless dst is src (a rank's own part, in place).
inline void place(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) {
    std::memmove(dst, src, bytes);
  }
}

// Ranks whose fold inputs fit on the stack. The pointers live in a line the
// call touches anyway: the communicator's scratch (for more ranks) is one
// more line to fetch, cold after every context switch — 3–5 % of a 1–4 KiB
// allreduce between two ranks on one core.
inline constexpr int kFoldOnStack = 64;

// out = in(0) op in(1) op … op in(n-1), each at byte offset of w, count
// elements of dtype, in rank order; own, when given, is where this rank's
// input lies instead of its part of w.
inline void fold(trainit_comm* c, int dtype, int op, void* out, Window w, size_t offset, size_t count,
                 const void* own = nullptr) {
  if (count == 0) {
    return;
  }
  const void* on_stack[kFoldOnStack];
  const void** ins = c->n <= kFoldOnStack ? on_stack : c->ins;
  for (int p = 0; p < c->n; ++p) {
    ins[p] = w.in(p) + offset;
  }
  if (own != nullptr) {
    ins[c->rank] = own;
  }
  c->kernels->fold[dtype][op](out, ins, c->n, count);
}

// Element range [lo, hi) of len that rank i owns: its share of a reduction.
struct Share {
  size_t lo;
  size_t hi;
  size_t len() const { return hi - lo; }
};
Share share(size_t len, int n, int i);

// total elements cut into chunks of per, the last one shorter.
struct Chunks {
  size_t total;
  size_t per;
  size_t count() const { return (total + per - 1) / per; }
  size_t at(size_t t) const { return t * per; }
  size_t len(size_t t) const { return total - at(t) < per ? total - at(t) : per; }
};

// Whether bytes at p lie in the arena's heap (peers can read them there).
bool in_heap(const trainit_comm* c, const void* p, size_t bytes);

bool overlap(const void* a, size_t alen, const void* b, size_t blen);

// Every call starts here: no communicator, or an arena already aborted,
// ends it before any step (-EINVAL, -ECONNABORTED).
inline int precheck(const trainit_comm* c) {
  if (c == nullptr) {
    return -EINVAL;
  }
  return coll_arena_aborted(c->base) ? -ECONNABORTED : 0;
}

// Every call's path, inline (open() and run() forced): a small call is
// little more than its first step, and calls, spills and a generic
// descriptor between the entry point and that step would be a measurable
// share of it. Inlined, each entry point folds its collective's constants in.

// The device algorithm's fields (dev::pack), the count where its blocks are.
inline uint64_t descriptor(const Request& q) {
  return dev::pack(q.kind, q.dtype, q.op, q.root) | (q.count & (kMaxCount - 1)) << 24 | (q.valid ? 0 : kDescInvalid);
}

inline Call::Call(trainit_comm* c, CollOp kind) : c_(c), deadline_(0) {
  const int64_t now = comm_now_ns();
  if (c_->timeout_ns > 0) {
    deadline_ = now + c_->timeout_ns;
  }
  ArenaSlot* slot = arena_slot(c_->base, c_->rank);
  slot->start_ns.store(static_cast<uint64_t>(now), std::memory_order_relaxed);
  slot->op.store(kind, std::memory_order_relaxed);
}

inline Call::~Call() {
  ArenaSlot* slot = arena_slot(c_->base, c_->rank);
  slot->op.store(kOpNone, std::memory_order_relaxed);
  slot->progress.fetch_add(1, std::memory_order_relaxed);
}

inline int Call::step(uint32_t s) const {
  comm_publish(c_, s);
  return comm_wait_all(c_, s, deadline_);
}

// Publishes desc in this rank's line (its data already written), waits for
// every peer, and compares every rank's descriptor: 0, -EINVAL (they
// disagree) or the wait's error.
inline int Call::first_step(SeqLine* mine, uint32_t s, uint64_t desc) const {
  mine->desc = desc;
  const int r = step(s);
  if (r < 0) {
    return r;
  }
  bool agree = true;
  for (int p = 0; p < c_->n; ++p) {
    const uint64_t d = arena_line(c_->base, p, s)->desc;
    agree = agree && (d & kDescInvalid) == 0 && (d & ~kDescFlags) == (desc & ~kDescFlags);
  }
  return agree ? 0 : -EINVAL;
}

[[gnu::always_inline]] inline Opening Call::open(const Request& q, bool zero_copy_ok, bool stream) const {
  const uint32_t s = ++c_->seq;
  SeqLine* mine = arena_line(c_->base, c_->rank, s);
  uint64_t desc = descriptor(q);
  Tier tier = Tier::kChunked;
  if (q.bytes <= kInlineBytes) {
    tier = Tier::kInline;
    if (q.send != nullptr) {
      copy(mine->data, q.send, q.bytes);
    }
  } else if (!is_large(q)) {
    tier = Tier::kStaging;
    if (q.send != nullptr) {
      copy(arena_staging(c_->base, c_->rank, s), q.send, q.bytes);
    }
  } else {
    put_offsets(mine, q.send, q.recv);
    desc |= (zero_copy_ok ? kDescZeroCopy : 0) | (stream ? kDescStream : 0);
  }
  const int r = first_step(mine, s, desc);
  if (r == 0 && tier == Tier::kChunked && zero_copy_ok && all_zero_copy(s)) {
    tier = Tier::kZeroCopy;
  }
  return {r, tier, s};
}

}  // namespace trainit::coll

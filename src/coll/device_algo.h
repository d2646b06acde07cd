// The device collectives' algorithm, written once: compiled into the CUDA
// plugin's kernel (one launch per call), run by the fake device on a host
// thread of its own, and driven from the host over a backend's copy and fold
// where the device runs no code of ours (Ascend). Whatever runs it, a call
// is the host protocol's primitive (protocol.h) repeated: a rank publishes
// step s (its data of s written first) and waits until every peer has
// published s; what it published at s stays unchanged until every peer has
// published s + 1, so a rank reads its peers' step-s data between its wait
// for s and its publish of s + 1.
//
// Each rank's staging (mapped by every peer once, at init) holds a step
// line per block and, per step parity, an "in" and an "out" quarter. The
// call's elements are split between `blocks` blocks (of every segment, for
// a reduce_scatter); block b moves its share in pieces through its own
// region of each quarter and its own line, for good, on every rank alike:
// blocks never wait for each other, in one call or across calls (a GPU runs
// them side by side, the fake device one after the other).
//   - broadcast, allgather and reduce_scatter, and an allreduce or reduce of
//     at most Call::one_shot_max bytes a rank, go one step a piece
//     (one-shot): every rank stages its piece, then reads all of them, and a
//     reduction folds ranks 0, 1, …, n-1 in that order;
//   - a larger allreduce or reduce goes two steps a piece (two-shot): each
//     rank folds its share of the piece from every rank, in rank order, into
//     its out region (and a writer's recv); after the next step the writers
//     copy their peers' shares.
// What a rank alone reads stays where it is, unstaged: a reduce_scatter's
// own segment, a two-shot rank's own share. Both give every writer bitwise
// the same result, and the host path's. A call past the one-shot bound
// whose buffer lies in a registered window (Call::where, window_buffer())
// stages nothing (Block::zero_copy()), but an allreduce out of place and a
// reduce, whose results stage as two-shot's (their recv lies in no window):
// their inputs are read where they lie (stages_results()).
//
// A call's first step carries a descriptor (Call::desc, Call::count) beside
// the step: ranks that disagree, or one whose arguments are invalid, all end
// the call with -EINVAL after that one step, and stay in step. Every wait
// ends on the abort word (the host side sets it from the arena: a peer that
// died, the init's stop, another rank's failure) with -ECONNABORTED, and
// after Call::timeout_ns with -ETIMEDOUT.
//
// What runs it provides the lanes X (device_lanes.h, a block of threads on
// a chip: the CUDA plugin's kernel, the fake device and the tests;
// device_call.cpp's backend-driven lanes):
//   int sync() — the block's threads (or the backend's queued work) are
//     done with the step's data: 0 or a negative errno;
//   int64_t now_ns();  uint64_t last_step(b, const Call&);
//   void publish(b, s, const Call&, bool first);
//   int wait(b, s, const Call&, int64_t start);  bool agrees(b, s, const Call&)
//     — the steps (publish: after the block's data of s is written);
//   void step_idle(const Call&) — the call's first step, with its
//     descriptor and no data, on lines a.blocks … a.lines - 1;
//   int copy(dst, src, bytes);  int fold(dst, also, srcs, n, count) — the
//     data, each thread its part (a fold's result into dst and, unless
//     null, also into `also`, which may be one of srcs): 0 or a negative
//     errno.
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define TRAINIT_HD __host__ __device__ __forceinline__
#else
#define TRAINIT_HD inline
#endif

namespace trainit::coll::dev {

inline constexpr int kMaxRanks = 16;
inline constexpr int kMaxBlocks = 32;
inline constexpr size_t kLineBytes = 64;
// The step lines at the front of every rank's staging, one per block.
inline constexpr size_t kHeaderBytes = kMaxBlocks * kLineBytes;
// A staging buffer holds the header and four quarters of at least this.
inline constexpr size_t kQuarterAlign = 256;

// What kind of collective a call is (CollOp's values).
// A barrier is a call of no elements: its one step, and the agreement.
enum Kind : uint32_t { kAllreduce = 1, kReduce = 2, kReduceScatter = 3, kAllgather = 4, kBroadcast = 5, kBarrier = 6 };

// A block's step line in a rank's staging. A first step's descriptor goes
// in the slot of its parity: peers may still read the previous step's.
struct Line {
  uint64_t seq;       // the last step published
  uint64_t desc[2];   // a call's descriptor, at its first step s: [s & 1]
  uint64_t count[2];  // and its count
  uint64_t where[2];  // and its Call::where
};
static_assert(sizeof(Line) <= kLineBytes);

// One call, as every lane sees it: trivially copyable (a kernel's argument).
struct Call {
  uint32_t kind;
  int32_t dtype;
  int32_t op;
  int32_t root;
  int32_t n;
  int32_t rank;
  int32_t blocks;  // the blocks the call runs on (blocks_for()): its elements' slices
  int32_t lines;   // the communicator's blocks: the step lines and regions there are
  int32_t valid;   // this rank's arguments are valid (it moves no data when not)
  uint32_t elem;   // bytes per element
  uint64_t count;  // as the API takes it: all, recvcount (reduce_scatter) or sendcount (allgather)
  uint64_t desc;   // descriptor(): what every rank compares at the first step
  const unsigned char* send;
  unsigned char* recv;
  unsigned char* staging[kMaxRanks];  // every rank's, as this rank maps it
  uint64_t quarter;                   // bytes of an in or out quarter
  uint64_t one_shot_max;              // larger allreduce and reduce pieces go in two steps
  int64_t timeout_ns;                 // 0: none
  volatile uint32_t* abort;           // nonzero: every wait ends (fails_for_good() sets it)
  uint64_t* status;                   // where a block that fails puts status_of(tag, error) (first one wins)
  uint64_t tag;                       // the call's: the host's count of launches (from 1)
  uint64_t* done;                     // a synchronous call's: block b stores tag in done[b] once its writes are visible
  // Zero copy (window_buffer() in a registered window): where that
  // buffer lies, window_where(slot, offset), the same on every rank, and
  // every rank's buffer there as this rank maps it; where 0: staged.
  uint64_t where;
  unsigned char* window[kMaxRanks];
};

// A registered window's slot and a buffer's offset in it, as Call::where.
inline constexpr uint64_t kWhereOffsetBits = 48;
TRAINIT_HD uint64_t window_where(int slot, uint64_t offset) {
  return static_cast<uint64_t>(slot + 1) << kWhereOffsetBits | (offset & ((1ULL << kWhereOffsetBits) - 1));
}

// The host's words, mapped into the device (backend.h, host_mapped): the
// abort word the host writes on the first page, the status ring the device
// writes on the second. The host only reads the ring: over PCIe a host's
// read-modify-write of a word the device writes is no atomic, so a status
// the host cleared could be the one the device had just put there. Launch
// t writes slot t % kStatusSlots, its error tagged with t (48 bits: no
// wrap); the host keeps at most kStatusSlots launches unread. After the
// ring, the done words (Call::done), one a block: a synchronous call ends
// when the host reads its tag in every block's, without asking the
// device's stream (a round trip through the driver that notices a kernel's
// end microseconds after its last store).
inline constexpr size_t kStatusRingOffset = 4096;
inline constexpr uint32_t kStatusSlots = 512;
inline constexpr size_t kDoneOffset = kStatusRingOffset + kStatusSlots * sizeof(uint64_t);
inline constexpr size_t kWordsBytes = kDoneOffset + kMaxBlocks * sizeof(uint64_t);
inline constexpr uint64_t kTagMask = (1ULL << 48) - 1;

// A call's error after which its rank is out of step with its peers: any
// but -EINVAL (ranks that disagreed, still in step). The block that puts it
// in the status ring also sets the abort word (the host only ever sets it
// too), so that the calls queued behind it on its stream end at their first
// check rather than each wait out its own timeout: the host aborts the
// arena once it reads the status anyway.
TRAINIT_HD bool fails_for_good(int err) {
  return err != 0 && err != -EINVAL;
}

TRAINIT_HD uint64_t status_of(uint64_t tag, int err) {
  return (tag & kTagMask) << 16 | static_cast<uint16_t>(-err);
}
TRAINIT_HD uint64_t status_tag(uint64_t status) {
  return status >> 16;
}
TRAINIT_HD int status_error(uint64_t status) {
  return -static_cast<int>(status & 0xffff);
}

// The descriptor's layout: kind 4 bits, dtype 4, op 2, root 11, flags 21-23,
// blocks 24-31, a flag at 32; the count beside it. The host protocol's
// (protocol.h) has the count where the blocks are.
inline constexpr uint64_t kDescInvalid = 1ULL << 21;
inline constexpr uint64_t kDescTwoShot = 1ULL << 22;
inline constexpr uint64_t kDescZeroCopy = 1ULL << 23;
// In a window, the results staged (stages_results()): an allreduce out of
// place takes the staged two-shot's steps where one in place, at the same
// place, takes zero copy's two.
inline constexpr uint64_t kDescStagedResults = 1ULL << 32;

TRAINIT_HD uint64_t pack(uint32_t kind, int dtype, int op, int root) {
  const auto field = [](int v, int bits) { return static_cast<uint64_t>(v) & ((1ULL << bits) - 1); };
  return field(static_cast<int>(kind), 4) | field(dtype, 4) << 4 | field(op, 2) << 8 | field(root, 11) << 10;
}

TRAINIT_HD bool reduces(uint32_t kind) {
  return kind == kAllreduce || kind == kReduce || kind == kReduceScatter;
}

// A block's region of each quarter: its line's for good, whatever blocks a
// call runs on, so that blocks that run apart in time never touch each
// other's bytes.
TRAINIT_HD uint64_t region(const Call& a) {
  return a.quarter / static_cast<uint64_t>(a.lines) / 64 * 64;
}

// What a rank moves in a call of `count` elements of `elem` bytes: its send
// or recv (every rank's part of an allgather or reduce_scatter).
TRAINIT_HD uint64_t moved_bytes(uint32_t kind, uint64_t count, uint32_t elem, int n) {
  return count * elem * (kind == kAllgather || kind == kReduceScatter ? static_cast<uint64_t>(n) : 1);
}

// The blocks a call of `count` elements of `elem` bytes runs on, of the
// communicator's `lines`: one per `block_bytes` it moves (moved_bytes()),
// at least one, at most `lines`; 0 block_bytes: every line. Blocks beyond
// need not take a step: a small call meets its peers once, not once a
// line. From what every rank's call carries alone (a rank whose count
// differs runs on other blocks: Block's disagreement keeps every line in
// step).
TRAINIT_HD int blocks_for(uint32_t kind, uint64_t count, uint32_t elem, int n, int lines, uint64_t block_bytes) {
  if (block_bytes == 0) {
    return lines;
  }
  const uint64_t bytes = moved_bytes(kind, count, elem, n);
  const uint64_t want = bytes / block_bytes + (bytes % block_bytes != 0 ? 1 : 0);
  return want < 1 ? 1 : want > static_cast<uint64_t>(lines) ? lines : static_cast<int>(want);
}

// The elements of 16 bytes: what a call's parts and pieces are multiples
// of where they can be, so that each starts as aligned as the whole and
// moves in 16-byte vectors.
TRAINIT_HD uint64_t grain(const Call& a) {
  return a.elem >= 16 ? 1 : 16 / a.elem;
}

// Elements of one piece, per rank (reduce_scatter: per segment).
TRAINIT_HD uint64_t piece_elems(const Call& a) {
  uint64_t per = region(a) / a.elem;
  if (a.kind == kReduceScatter) {
    per /= static_cast<uint64_t>(a.n);
    per = per >= grain(a) ? per / grain(a) * grain(a) : per;
  }
  return per == 0 ? 1 : per;
}

TRAINIT_HD bool two_shot(const Call& a) {
  return (a.kind == kAllreduce || a.kind == kReduce) && a.n > 1 && a.count * a.elem > a.one_shot_max;
}

// The buffer of a call that goes zero copy where every rank's lies in a
// window (Block::zero_copy()), else null: past the one-shot bound (smaller
// calls take one step staged, where zero copy takes two), with more than
// one rank,
//   - an allreduce in place: its buffer;
//   - an allreduce out of place, a reduce: send (the results go through
//     staging as two-shot's: stages_results());
//   - an allgather, in place or not: recv (each rank writes its part into
//     every rank's);
//   - a reduce_scatter out of place: send (each rank folds its segment from
//     every rank's; in place, a rank's result would overwrite a segment a
//     peer still reads);
//   - a broadcast: recv (the root's is read by every rank).
TRAINIT_HD const unsigned char* window_buffer(const Call& a) {
  if (a.valid == 0 || a.n < 2 || a.count * a.elem <= a.one_shot_max) {
    return nullptr;
  }
  switch (a.kind) {
    case kAllreduce:
    case kReduce:
      return a.send;
    case kAllgather:
    case kBroadcast:
      return a.recv;
    case kReduceScatter:
      return a.send != a.recv ? a.send : nullptr;
    default:
      return nullptr;
  }
}

// Whether a call in a window reads its inputs there but stages its results,
// two-shot (Block::staged()): an allreduce out of place, a reduce.
TRAINIT_HD bool stages_results(const Call& a) {
  return a.kind == kReduce || (a.kind == kAllreduce && a.send != a.recv);
}

// The bytes of window_buffer() the call reads or writes.
TRAINIT_HD uint64_t window_bytes(const Call& a) {
  const uint64_t all = a.count * a.elem;
  return a.kind == kAllgather || a.kind == kReduceScatter ? all * static_cast<uint64_t>(a.n) : all;
}

// The descriptor of a call whose other fields are set.
TRAINIT_HD uint64_t descriptor(const Call& a) {
  return pack(a.kind, a.dtype, a.op, a.root) | (a.valid != 0 ? 0 : kDescInvalid) | (two_shot(a) ? kDescTwoShot : 0) |
         (a.where != 0 ? kDescZeroCopy : 0) | static_cast<uint64_t>(a.blocks & 0xff) << 24 |
         (a.where != 0 && stages_results(a) ? kDescStagedResults : 0);
}

// What a call reads from send and writes to recv, in bytes (0: nothing).
TRAINIT_HD uint64_t send_bytes(const Call& a) {
  const uint64_t all = a.count * a.elem;
  switch (a.kind) {
    case kReduceScatter:
      return all * static_cast<uint64_t>(a.n);
    case kBroadcast:
      return 0;
    default:
      return all;
  }
}

TRAINIT_HD uint64_t recv_bytes(const Call& a) {
  const uint64_t all = a.count * a.elem;
  switch (a.kind) {
    case kAllgather:
      return all * static_cast<uint64_t>(a.n);
    case kReduce:
      return a.rank == a.root ? all : 0;
    default:
      return all;
  }
}

TRAINIT_HD Line* line(unsigned char* staging, int block) {
  return reinterpret_cast<Line*>(staging + static_cast<size_t>(block) * kLineBytes);
}

// Block b's region of rank p's in and out quarters of step s.
TRAINIT_HD unsigned char* in(const Call& a, int p, uint64_t s, int b) {
  return a.staging[p] + kHeaderBytes + (s & 1) * 2 * a.quarter + static_cast<uint64_t>(b) * region(a);
}

TRAINIT_HD unsigned char* out(const Call& a, int p, uint64_t s, int b) {
  return in(a, p, s, b) + a.quarter;
}

// Element range [lo, hi) of len that part i of k owns: its bounds but the
// last are multiples of g elements (grain()).
struct Range {
  uint64_t lo;
  uint64_t hi;
  TRAINIT_HD uint64_t len() const { return hi - lo; }
};

TRAINIT_HD Range part(uint64_t len, int k, int i, uint64_t g) {
  const auto bound = [&](int j) {
    return j == k ? len : len * static_cast<uint64_t>(j) / static_cast<uint64_t>(k) / g * g;
  };
  return {bound(i), bound(i + 1)};
}

// One block's whole call: its share of the elements (of every segment, for
// a reduce_scatter), in pieces through its regions: 0 or a negative errno.
template <class X>
class Block {
 public:
  TRAINIT_HD Block(X& x, const Call& a, int b) : x_(x), a_(a), b_(b), es_(a.elem) {}

  TRAINIT_HD int run() { return a_.where != 0 && !stages_results(a_) ? zero_copy() : staged(); }

  // A call through staging; an allreduce or a reduce in a window
  // (stages_results()) reads its peers' shares from their sends, where
  // they lie, and stages only the folded shares.
  TRAINIT_HD int staged() {
    const int64_t start = x_.now_ns();
    uint64_t s = x_.last_step(b_, a_);
    const uint64_t per = piece_elems(a_);
    const bool two = two_shot(a_);
    const Range mine = part(a_.count, a_.blocks, b_, grain(a_));
    bool first = true;
    for (uint64_t at = mine.lo; first || at < mine.hi; at += per) {
      const Range piece{at, mine.hi - at < per ? mine.hi : at + per};
      ++s;
      int r = a_.valid != 0 ? produce(s, piece) : 0;
      r = settle(r);
      x_.publish(b_, s, a_, first);
      r = r != 0 ? r : x_.wait(b_, s, a_, start);
      if (r == 0 && first && !x_.agrees(b_, s, a_)) {
        r = disagreed();
      }
      first = false;
      if (r != 0 || piece.len() == 0) {
        return r;
      }
      if (two) {
        r = settle(fold_share(s, piece));
        x_.publish(b_, ++s, a_, false);
        r = r != 0 ? r : x_.wait(b_, s, a_, start);
        r = r != 0 ? r : gather_shares(s - 1, piece);
      } else {
        r = consume(s, piece);
      }
      if (r != 0) {
        return r;
      }
    }
    return 0;
  }

  // Zero copy (Call::where, not stages_results()): every rank's buffer
  // (window_buffer()) read and written where it lies, in two steps whatever
  // the size. The first says every rank's input is there (and carries the
  // descriptor); then each rank moves its part of the block's elements
  // (in_windows()), which no other rank touches; the second says every part
  // is written: no rank returns (and lets its caller reuse its buffer)
  // before.
  TRAINIT_HD int zero_copy() {
    const int64_t start = x_.now_ns();
    uint64_t s = x_.last_step(b_, a_) + 1;
    int r = settle(0);
    x_.publish(b_, s, a_, true);
    r = r != 0 ? r : x_.wait(b_, s, a_, start);
    if (r == 0 && !x_.agrees(b_, s, a_)) {
      r = disagreed();
    }
    if (r != 0) {
      return r;
    }
    r = settle(in_windows(part(a_.count, a_.blocks, b_, grain(a_))));
    x_.publish(b_, ++s, a_, false);
    const int waited = x_.wait(b_, s, a_, start);
    return r != 0 ? r : waited;
  }

 private:
  TRAINIT_HD uint64_t off(uint64_t elems) const { return elems * es_; }

  // Zero copy's data, the block's elements `mine` (of every part or
  // segment), between the two steps; a_.window[p] is rank p's buffer.
  TRAINIT_HD int in_windows(Range mine) {
    const void* srcs[kMaxRanks] = {};
    const uint64_t rank_part = off(static_cast<uint64_t>(a_.rank) * a_.count);
    switch (a_.kind) {
      case kAllreduce: {
        // Rank r folds share r from every buffer, in rank order, into ranks
        // 0 and 1's as it folds; once every lane's fold is written, it
        // copies the share into the others'.
        const Range share = part(mine.len(), a_.n, a_.rank, grain(a_));
        const uint64_t at = off(mine.lo + share.lo);
        for (int p = 0; p < a_.n; ++p) {
          srcs[p] = a_.window[p] + at;
        }
        int r = settle(x_.fold(a_.window[0] + at, a_.n > 1 ? a_.window[1] + at : nullptr, srcs, a_.n, share.len()));
        for (int p = 2; r == 0 && p < a_.n; ++p) {
          r = x_.copy(a_.window[p] + at, a_.window[0] + at, off(share.len()));
        }
        return r;
      }
      case kReduceScatter:  // segment r from every rank's send, in rank order, into recv
        for (int p = 0; p < a_.n; ++p) {
          srcs[p] = a_.window[p] + rank_part + off(mine.lo);
        }
        return x_.fold(a_.recv + off(mine.lo), nullptr, srcs, a_.n, mine.len());
      case kAllgather: {  // part r into every rank's recv (its own: unless there already)
        int r = 0;
        for (int p = 0; r == 0 && p < a_.n; ++p) {
          r = x_.copy(a_.window[p] + rank_part + off(mine.lo), own_part() + off(mine.lo), off(mine.len()));
        }
        return r;
      }
      case kBroadcast:
        return a_.rank == a_.root
                   ? 0
                   : x_.copy(a_.window[a_.rank] + off(mine.lo), a_.window[a_.root] + off(mine.lo), off(mine.len()));
      default:
        return -EINVAL;
    }
  }

  // Ranks that disagree may run on different blocks (blocks_for()): block
  // 0 takes the call's first step on every line this rank runs no block
  // on, so that a peer's block there meets it (and disagrees in turn), and
  // every line of every rank is one step on, as after a call they agree on
  // that runs on every line.
  TRAINIT_HD int disagreed() {
    if (b_ == 0) {
      x_.step_idle(a_);
    }
    return -EINVAL;
  }

  TRAINIT_HD bool writer() const { return a_.kind != kReduce || a_.rank == a_.root; }
  TRAINIT_HD unsigned char* in_of(int p, uint64_t s) const { return in(a_, p, s, b_); }

  // Before a publish: every lane's data of the step is written (the
  // block's threads, the backend's queued work): r, else sync()'s error.
  TRAINIT_HD int settle(int r) {
    const int synced = x_.sync();
    return r != 0 ? r : synced;
  }

  // This rank's contribution to the piece, into its in region (a
  // reduce_scatter's: the piece of every segment, one after the other).
  TRAINIT_HD int produce(uint64_t s, Range piece) {
    unsigned char* mine = in_of(a_.rank, s);
    switch (a_.kind) {
      case kAllreduce:
      case kReduce: {
        if (a_.where != 0) {  // every rank's send is read where it lies
          return 0;
        }
        // Two-shot, this rank folds its own share from send: only its
        // peers' shares are staged.
        const Range own = two_shot(a_) ? part(piece.len(), a_.n, a_.rank, grain(a_)) : Range{piece.len(), piece.len()};
        const int r = x_.copy(mine, a_.send + off(piece.lo), off(own.lo));
        return r != 0 ? r : x_.copy(mine + off(own.hi), a_.send + off(piece.lo + own.hi), off(piece.len() - own.hi));
      }
      case kReduceScatter: {  // every segment but its own, which it folds from send
        int r = 0;
        for (int q = 0; r == 0 && q < a_.n; ++q) {
          const uint64_t seg = static_cast<uint64_t>(q);
          r = q == a_.rank
                  ? 0
                  : x_.copy(mine + off(seg * piece.len()), a_.send + off(seg * a_.count + piece.lo), off(piece.len()));
        }
        return r;
      }
      case kAllgather:
        return x_.copy(mine, own_part() + off(piece.lo), off(piece.len()));
      case kBroadcast:
        return a_.rank == a_.root ? x_.copy(mine, a_.recv + off(piece.lo), off(piece.len())) : 0;
      case kBarrier:
        return 0;
      default:
        return -EINVAL;
    }
  }

  // An allgather's own part: its send, or in place (send == recv) its
  // place in recv already.
  TRAINIT_HD const unsigned char* own_part() const {
    return a_.send == a_.recv ? a_.recv + off(static_cast<uint64_t>(a_.rank) * a_.count) : a_.send;
  }

  // The one-shot step's reading: every rank's piece is staged.
  TRAINIT_HD int consume(uint64_t s, Range piece) {
    const void* srcs[kMaxRanks];
    switch (a_.kind) {
      case kAllreduce:
      case kReduce:
        if (!writer()) {
          return 0;
        }
        for (int p = 0; p < a_.n; ++p) {
          srcs[p] = in_of(p, s);
        }
        return x_.fold(a_.recv + off(piece.lo), nullptr, srcs, a_.n, piece.len());
      case kReduceScatter:
        for (int p = 0; p < a_.n; ++p) {
          srcs[p] = in_of(p, s) + off(static_cast<uint64_t>(a_.rank) * piece.len());
        }
        srcs[a_.rank] = a_.send + off(static_cast<uint64_t>(a_.rank) * a_.count + piece.lo);
        return x_.fold(a_.recv + off(piece.lo), nullptr, srcs, a_.n, piece.len());
      case kAllgather: {
        int r = 0;
        for (int p = 0; r == 0 && p < a_.n; ++p) {
          unsigned char* to = a_.recv + off(static_cast<uint64_t>(p) * a_.count + piece.lo);
          if (p != a_.rank || to != own_part() + off(piece.lo)) {
            r = x_.copy(to, in_of(p, s), off(piece.len()));
          }
        }
        return r;
      }
      case kBroadcast:
        return a_.rank == a_.root ? 0 : x_.copy(a_.recv + off(piece.lo), in_of(a_.root, s), off(piece.len()));
      default:
        return -EINVAL;
    }
  }

  // Two-shot, step s: this rank's share of the piece from every rank (its
  // own from send; in a window, every rank's from its send), in rank order,
  // into its out region and, a writer's, into recv.
  TRAINIT_HD int fold_share(uint64_t s, Range piece) {
    const Range share = part(piece.len(), a_.n, a_.rank, grain(a_));
    const void* srcs[kMaxRanks];
    for (int p = 0; p < a_.n; ++p) {
      srcs[p] = a_.where != 0 ? a_.window[p] + off(piece.lo + share.lo) : in_of(p, s) + off(share.lo);
    }
    srcs[a_.rank] = a_.send + off(piece.lo + share.lo);
    unsigned char* also = writer() ? a_.recv + off(piece.lo + share.lo) : nullptr;
    return x_.fold(out(a_, a_.rank, s, b_) + off(share.lo), also, srcs, a_.n, share.len());
  }

  // Two-shot, after step s + 1: a writer copies its peers' shares of step s.
  TRAINIT_HD int gather_shares(uint64_t s, Range piece) {
    int r = 0;
    for (int p = 0; r == 0 && writer() && p < a_.n; ++p) {
      const Range share = part(piece.len(), a_.n, p, grain(a_));
      r = p == a_.rank
              ? 0
              : x_.copy(a_.recv + off(piece.lo + share.lo), out(a_, p, s, b_) + off(share.lo), off(share.len()));
    }
    return r;
  }

  X& x_;
  const Call& a_;
  int b_;
  uint64_t es_;
};

}  // namespace trainit::coll::dev

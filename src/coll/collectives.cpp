// The collectives' algorithms: what each rank contributes to a call, and
// what it makes of every rank's contribution, in each of the protocol's tiers
// (protocol.h: the steps, the tiers, the transfer primitives). Each algorithm
// is one small class that run() drives; what one tier does is most often
// another's with other bounds: the one-shot tiers and zero copy see the whole
// data, the chunked tier one chunk of it per step.
#include <trainit/coll.h>

#include "coll/protocol.h"

namespace {

using namespace trainit::coll;

bool valid_type(int dtype) {
  return dtype >= 0 && dtype < kDtypes;
}

bool valid_op(int op) {
  return op >= 0 && op < kOps;
}

const unsigned char* bytes_of(const void* p) {
  return static_cast<const unsigned char*>(p);
}

unsigned char* bytes_of(void* p) {
  return static_cast<unsigned char*>(p);
}

// The largest allreduce between 2 ranks that chunked_pair() takes: both
// ranks' data and its staged copies fit a 32 MiB last-level cache.
constexpr size_t kPairMaxBytes = size_t{8} << 20;

// allreduce (every rank writes recv) and reduce (only the root does). Each
// rank contributes its whole send buffer.
class Reduce {
 public:
  Reduce(trainit_comm* c, CollOp kind, const void* send, void* recv, size_t count, int dtype, int op, int root)
      : c_(c),
        all_(kind == kOpAllreduce),
        writer_(all_ || c->rank == root),
        root_(all_ ? 0 : root),
        send_(send),
        recv_(recv),
        count_(count),
        dtype_(dtype),
        op_(op),
        es_(dtype_size(dtype)) {}

  Request request() const {
    const bool valid = valid_type(dtype_) && valid_op(op_) && (all_ || (root_ >= 0 && root_ < c_->n)) &&
                       count_ < kMaxCount && (count_ == 0 || (send_ != nullptr && (!writer_ || recv_ != nullptr)));
    return {all_ ? kOpAllreduce : kOpReduce, dtype_, op_, root_, count_, valid, valid ? count_ * es_ : 0, send_,
            writer_ ? recv_ : nullptr};
  }

  // Every send (and the recv buffers written) lies in the arena heap; an
  // exact in-place recv is fine, a partial overlap is not.
  bool zero_copy_ok() const {
    const size_t bytes = count_ * es_;
    return in_heap(c_, send_, bytes) &&
           (!writer_ || (in_heap(c_, recv_, bytes) && (recv_ == send_ || !overlap(send_, bytes, recv_, bytes))));
  }

  // The chunked tier: this rank's share of chunk t, from its own send and
  // its peers' staging (before), into its staging's out half (now) — for a
  // writer through its recv, where the share belongs.
  void fold_share(size_t t, const Chunks& chunks, Window now, Window before) const {
    const Share mine = share(chunks.len(t), c_->n, c_->rank);
    const size_t at = (chunks.at(t) + mine.lo) * es_;
    unsigned char* out = now.out(c_->rank) + mine.lo * es_;
    if (!writer_) {
      fold(c_, dtype_, op_, out, before, mine.lo * es_, mine.len(), bytes_of(send_) + at);
      return;
    }
    // In place, the fold overwrites exactly the input it reads: elementwise.
    fold(c_, dtype_, op_, bytes_of(recv_) + at, before, mine.lo * es_, mine.len(), bytes_of(send_) + at);
    hand_over(c_, out, bytes_of(recv_) + at, mine.len() * es_);
  }

  // Every writer folds every rank's whole contribution.
  void direct(Window w) const {
    if (writer_) {
      fold(c_, dtype_, op_, recv_, w, 0, count_);
    }
  }

  // Reduce-scatter, then allgather, in the buffers themselves: this rank
  // folds its share from every send buffer into a writer's recv, then copies
  // it into every other writer's.
  void zero_copy(Window w) const {
    const Share mine = share(count_, c_->n, c_->rank);
    unsigned char* folded = w.out(all_ ? c_->rank : root_) + mine.lo * es_;
    fold(c_, dtype_, op_, folded, w, mine.lo * es_, mine.len());
    if (!all_) {
      return;  // reduce: the root's recv is the only one
    }
    for (int p = 0; p < c_->n; ++p) {
      if (p != c_->rank) {
        copy(w.out(p) + mine.lo * es_, folded, mine.len() * es_);
      }
    }
  }

  // Chunk t of every send goes into staging at step t; at step t + 1 each
  // rank folds its share of it (while chunk t + 1 goes in) and puts the
  // result in its staging's out half, from where the writers copy every
  // share. What moves between the ranks is handed over with streaming
  // stores (hand_over). A rank's own share of a chunk is only ever read by
  // itself: it stays out of staging, the fold reads it from the send buffer
  // (unchanged until the folded chunk comes back, one step later), and a
  // writer folds it straight into its recv — for 2 ranks (a reduce, or an
  // allreduce past kPairMaxBytes: chunked_pair below), half the copy into
  // staging and half the copy out saved.
  int chunked(const Call& call) const {
    if (all_ && c_->n == 2 && count_ * es_ <= kPairMaxBytes) {
      return chunked_pair(call);
    }
    const Chunks chunks{count_, kChunkBytes / es_};
    const int me = c_->rank;
    return call.pipeline(
        chunks.count() + 1,
        [&](size_t t, Window now, Window before) {
          if (t < chunks.count()) {
            const Share mine = share(chunks.len(t), c_->n, me);
            const unsigned char* chunk = bytes_of(send_) + chunks.at(t) * es_;
            hand_over(c_, now.in(me), chunk, mine.lo * es_);
            hand_over(c_, now.in(me) + mine.hi * es_, chunk + mine.hi * es_, (chunks.len(t) - mine.hi) * es_);
          }
          if (t > 0) {
            fold_share(t - 1, chunks, now, before);
          }
        },
        [&](size_t t, Window now) {
          if (t == 0 || !writer_) {
            return;
          }
          for (int p = 0; p < c_->n; ++p) {
            const Share theirs = share(chunks.len(t - 1), c_->n, p);
            if (p != me) {
              copy(bytes_of(recv_) + (chunks.at(t - 1) + theirs.lo) * es_, now.out(p) + theirs.lo * es_,
                   theirs.len() * es_);
            }
          }
        });
  }

  // An allreduce between 2 ranks: each hands its whole chunk t over at step
  // t and folds both of chunk t - 1 into its recv at step t + 1, the staging
  // tier's way, in chunks of a whole staging half (in and out). Every byte
  // still crosses between the cores once, and no rank waits on its peer's
  // fold: the result's round trip (the peer's share folded, handed back,
  // copied out) is gone, and with it half the steps — 49 µs a 1 MiB call on
  // a 2-core EPYC VM where the shares' way took 58 (bench/coll/fresh_runs.sh).
  // Both ranks fold in rank order: the results are bitwise the same. Past
  // kPairMaxBytes each rank's second read of its own data comes from memory
  // and the shares' way is faster again (12 MiB: 7-13 %, 64 MiB in place: 12 %).
  int chunked_pair(const Call& call) const {
    const Chunks chunks{count_, kStagingHalfBytes / es_};
    return call.pipeline(
        chunks.count() + 1,
        [&](size_t t, Window now, Window before) {
          if (t < chunks.count()) {
            hand_over(c_, now.in(c_->rank), bytes_of(send_) + chunks.at(t) * es_, chunks.len(t) * es_);
          }
          if (t > 0) {
            const size_t at = chunks.at(t - 1) * es_;
            fold(c_, dtype_, op_, bytes_of(recv_) + at, before, 0, chunks.len(t - 1), bytes_of(send_) + at);
          }
        },
        [](size_t, Window) {});
  }

 private:
  trainit_comm* c_;
  bool all_;
  bool writer_;
  int root_;
  const void* send_;
  void* recv_;
  size_t count_;
  int dtype_;
  int op_;
  size_t es_;
};

// reduce_scatter: each rank contributes its whole send buffer (n segments of
// rc elements) and folds segment rank of every contribution.
class ReduceScatter {
 public:
  ReduceScatter(trainit_comm* c, const void* send, void* recv, size_t rc, int dtype, int op)
      : c_(c),
        n_(static_cast<size_t>(c->n)),
        send_(send),
        recv_(recv),
        rc_(rc),
        dtype_(dtype),
        op_(op),
        es_(dtype_size(dtype)) {}

  Request request() const {
    const bool valid = valid_type(dtype_) && valid_op(op_) && rc_ < kMaxCount / n_ &&
                       (rc_ == 0 || (send_ != nullptr && recv_ != nullptr));
    return {kOpReduceScatter, dtype_, op_, 0, rc_, valid, valid ? n_ * rc_ * es_ : 0, send_, nullptr};
  }

  bool zero_copy_ok() const {
    return in_heap(c_, send_, n_ * rc_ * es_) && !overlap(send_, n_ * rc_ * es_, recv_, rc_ * es_);
  }

  void direct(Window w) const { fold_piece(w, 0, rc_); }

  void zero_copy(Window w) const { fold_piece(w, 0, rc_); }

  // Chunk t holds piece t of every segment, one after the other; each rank
  // folds its segment's piece one step later, while the next piece goes in.
  int chunked(const Call& call) const {
    const size_t piece = kChunkBytes / es_ / n_;
    const Chunks chunks{rc_, piece == 0 ? 1 : piece};
    return call.pipeline(
        chunks.count() + 1,
        [&](size_t t, Window now, Window before) {
          if (t < chunks.count()) {
            const size_t len = chunks.len(t);
            for (size_t q = 0; q < n_; ++q) {
              copy(now.in(c_->rank) + q * len * es_, bytes_of(send_) + (q * rc_ + chunks.at(t)) * es_, len * es_);
            }
          }
          if (t > 0) {
            fold_piece(before, chunks.at(t - 1), chunks.len(t - 1));
          }
        },
        [](size_t, Window) {});
  }

 private:
  // Folds elements [at, at + len) of this rank's segment into recv; in w,
  // each rank's data holds those elements of every segment, one after the
  // other.
  void fold_piece(Window w, size_t at, size_t len) const {
    fold(c_, dtype_, op_, bytes_of(recv_) + at * es_, w, static_cast<size_t>(c_->rank) * len * es_, len);
  }

  trainit_comm* c_;
  size_t n_;
  const void* send_;
  void* recv_;
  size_t rc_;
  int dtype_;
  int op_;
  size_t es_;
};

// allgather: each rank contributes its part (sc elements), and places every
// rank's at that rank's place in recv.
class Allgather {
 public:
  Allgather(trainit_comm* c, const void* send, void* recv, size_t sc, int dtype)
      : c_(c), out_(bytes_of(recv)), sc_(sc), dtype_(dtype), es_(dtype_size(dtype)) {
    valid_ = valid_type(dtype) && sc < kMaxCount / static_cast<size_t>(c->n) &&
             (sc == 0 || (send != nullptr && recv != nullptr));
    // In place (send == recv): this rank's part already sits at its place.
    src_ = send == recv && valid_ ? out_ + static_cast<size_t>(c->rank) * sc * es_ : bytes_of(send);
  }

  Request request() const { return {kOpAllgather, dtype_, 0, 0, sc_, valid_, valid_ ? sc_ * es_ : 0, src_, nullptr}; }

  bool zero_copy_ok() const { return in_heap(c_, src_, sc_ * es_); }

  void direct(Window w) const { gather(w, 0, sc_); }

  void zero_copy(Window w) const { gather(w, 0, sc_); }

  int chunked(const Call& call) const {
    const Chunks chunks{sc_, kChunkBytes / es_};
    return call.pipeline(
        chunks.count(),
        [&](size_t t, Window now, Window) { copy(now.in(c_->rank), src_ + chunks.at(t) * es_, chunks.len(t) * es_); },
        [&](size_t t, Window now) { gather(now, chunks.at(t), chunks.len(t)); });
  }

 private:
  // Elements [at, at + len) of every rank's part, from where w shows them
  // (this rank's own from its source, if not already in place).
  void gather(Window w, size_t at, size_t len) const {
    for (int p = 0; p < c_->n; ++p) {
      place(out_ + (static_cast<size_t>(p) * sc_ + at) * es_, p == c_->rank ? src_ + at * es_ : w.in(p), len * es_);
    }
  }

  trainit_comm* c_;
  unsigned char* out_;
  const unsigned char* src_;
  size_t sc_;
  int dtype_;
  size_t es_;
  bool valid_;
};

// broadcast: the root contributes its buffer, the others copy it.
class Broadcast {
 public:
  Broadcast(trainit_comm* c, void* buf, size_t count, int dtype, int root)
      : c_(c),
        buf_(bytes_of(buf)),
        count_(count),
        dtype_(dtype),
        root_(root),
        is_root_(c->rank == root),
        es_(dtype_size(dtype)) {}

  Request request() const {
    const bool valid =
        valid_type(dtype_) && root_ >= 0 && root_ < c_->n && count_ < kMaxCount && (count_ == 0 || buf_ != nullptr);
    return {kOpBroadcast, dtype_, 0, root_, count_, valid, valid ? count_ * es_ : 0, is_root_ ? buf_ : nullptr,
            nullptr};
  }

  // A rank other than the root only writes its own buffer: any will do.
  bool zero_copy_ok() const { return !is_root_ || in_heap(c_, buf_, count_ * es_); }

  void direct(Window w) const { receive(w, 0, count_); }

  void zero_copy(Window w) const { receive(w, 0, count_); }

  int chunked(const Call& call) const {
    const Chunks chunks{count_, kChunkBytes / es_};
    return call.pipeline(
        chunks.count(),
        [&](size_t t, Window now, Window) {
          if (is_root_) {
            copy(now.in(c_->rank), buf_ + chunks.at(t) * es_, chunks.len(t) * es_);
          }
        },
        [&](size_t t, Window now) { receive(now, chunks.at(t), chunks.len(t)); });
  }

 private:
  // Elements [at, at + len) of the root's buffer, from where w shows them.
  void receive(Window w, size_t at, size_t len) const {
    if (!is_root_) {
      copy(buf_ + at * es_, w.in(root_), len * es_);
    }
  }

  trainit_comm* c_;
  unsigned char* buf_;
  size_t count_;
  int dtype_;
  int root_;
  bool is_root_;
  size_t es_;
};

// barrier: the first step alone; no data, so always the inline tier.
struct Barrier {
  static Request request() { return {kOpBarrier, 0, 0, 0, 0, true, 0, nullptr, nullptr}; }
  static bool zero_copy_ok() { return false; }
  static void direct(Window) {}
  static void zero_copy(Window) {}
  static int chunked(const Call&) { return 0; }
};

// An agreement: a barrier whose descriptor carries a value and whether
// this rank can go on.
struct Agreement {
  Request request() const { return {kOpBarrier, 0, 0, 0, value, ok, 0, nullptr, nullptr}; }
  static bool zero_copy_ok() { return false; }
  static void direct(Window) {}
  static void zero_copy(Window) {}
  static int chunked(const Call&) { return 0; }
  uint64_t value;
  bool ok;
};

}  // namespace

int trainit::coll::host_barrier(trainit_comm* comm) {
  return run(comm, Barrier{});
}

int trainit::coll::host_agree(trainit_comm* comm, uint64_t value, bool ok) {
  return run(comm, Agreement{value, ok});
}

extern "C" {

int trainit_allreduce(trainit_comm* comm, const void* send, void* recv, size_t count, trainit_dtype dtype,
                      trainit_op op) {
  const int r = precheck(comm);
  if (r == 0 && comm->device_call != nullptr) {
    return comm->device_call(comm, {kOpAllreduce, send, recv, count, dtype, op, 0});
  }
  return r < 0 ? r : run(comm, Reduce(comm, kOpAllreduce, send, recv, count, dtype, op, -1));
}

int trainit_reduce(trainit_comm* comm, const void* send, void* recv, size_t count, trainit_dtype dtype, trainit_op op,
                   int root) {
  const int r = precheck(comm);
  if (r == 0 && comm->device_call != nullptr) {
    return comm->device_call(comm, {kOpReduce, send, recv, count, dtype, op, root});
  }
  return r < 0 ? r : run(comm, Reduce(comm, kOpReduce, send, recv, count, dtype, op, root));
}

int trainit_reduce_scatter(trainit_comm* comm, const void* send, void* recv, size_t recvcount, trainit_dtype dtype,
                           trainit_op op) {
  const int r = precheck(comm);
  if (r == 0 && comm->device_call != nullptr) {
    return comm->device_call(comm, {kOpReduceScatter, send, recv, recvcount, dtype, op, 0});
  }
  return r < 0 ? r : run(comm, ReduceScatter(comm, send, recv, recvcount, dtype, op));
}

int trainit_allgather(trainit_comm* comm, const void* send, void* recv, size_t sendcount, trainit_dtype dtype) {
  const int r = precheck(comm);
  if (r == 0 && comm->device_call != nullptr) {
    return comm->device_call(comm, {kOpAllgather, send, recv, sendcount, dtype, 0, 0});
  }
  return r < 0 ? r : run(comm, Allgather(comm, send, recv, sendcount, dtype));
}

int trainit_broadcast(trainit_comm* comm, void* buf, size_t count, trainit_dtype dtype, int root) {
  const int r = precheck(comm);
  if (r == 0 && comm->device_call != nullptr) {
    return comm->device_call(comm, {kOpBroadcast, buf, buf, count, dtype, 0, root});
  }
  return r < 0 ? r : run(comm, Broadcast(comm, buf, count, dtype, root));
}

// On a device communicator a barrier is one of its calls, so that it meets
// (and disagrees with) its peers' device calls where they wait.
int trainit_barrier(trainit_comm* comm) {
  const int r = precheck(comm);
  if (r == 0 && comm->device_call != nullptr) {
    return comm->device_call(comm, {kOpBarrier, nullptr, nullptr, 0, TRAINIT_F32, TRAINIT_SUM, 0});
  }
  return r < 0 ? r : host_barrier(comm);
}

}  // extern "C"

// The collectives, built from one primitive: a rank publishes step s (its
// line s & 1, and its staging half s & 1) and waits until every peer has
// published s. What a rank publishes at step s stays unchanged until every
// peer has published s + 1, so a rank reads its peers' step-s data between
// its own wait for s and its publish of s + 1, and never later.
//
// Every call's first step carries a descriptor (kind, dtype, op, root,
// count, an "invalid arguments" bit): every rank compares all of them after
// that first step, so ranks that disagree (a count mismatch, one rank in a
// barrier and another in an allreduce, a root out of range on one rank) all
// return -EINVAL after the same single step and stay in step for the next
// call. What the first step also carries depends only on the byte size, the
// same on every rank that agrees:
//  - small (≤ kInlineBytes): the data itself, in the line beside the flag
//    (NCCL's LL idea): one cache-line hand-off, one synchronisation;
//  - medium (≤ kChunkBytes): the data in the rank's staging (one-shot): one
//    synchronisation, then every rank folds all inputs in rank order;
//  - large: the buffers' heap offsets. If every rank's buffers came from
//    trainit_alloc, ranks read each other's buffers in place (zero copy) and
//    one more step closes the call; otherwise reduce-scatter + allgather in
//    pipelined chunks: at step t a rank copies chunk t in and folds its share
//    of chunk t-1 at once.
// Reductions fold rank 0, 1, … n-1 in that order for every element, so every
// rank's result is bitwise the same.
#include <trainit/coll.h>

#include <cerrno>
#include <cstring>

#include "coll/comm.h"

namespace {

using namespace trainit::coll;

constexpr uint64_t kMaxCount = 1ULL << 40;
constexpr uint64_t kInvalid = 1ULL << 21;
constexpr uint64_t kZeroCopy = 1ULL << 22;
constexpr uint64_t kFlags = kInvalid | kZeroCopy;

uint64_t make_desc(CollOp kind, int dtype, int op, int root, uint64_t count, bool valid) {
  const auto field = [](int v, int bits) { return static_cast<uint64_t>(v) & ((1ULL << bits) - 1); };
  return field(static_cast<int>(kind), 4) | field(dtype, 4) << 4 | field(op, 2) << 8 | field(root, 11) << 10 |
         (count & (kMaxCount - 1)) << 24 | (valid ? 0 : kInvalid);
}

struct Range {
  size_t lo;
  size_t hi;
};

// Element range [lo, hi) of len that rank i reduces.
Range split(size_t len, int n, int i) {
  return {len * static_cast<size_t>(i) / static_cast<size_t>(n),
          len * static_cast<size_t>(i + 1) / static_cast<size_t>(n)};
}

bool in_heap(const trainit_comm* c, const void* p, size_t bytes) {
  const auto* q = static_cast<const unsigned char*>(p);
  return q != nullptr && q >= c->heap_all && bytes <= c->heap_all_bytes &&
         static_cast<size_t>(q - c->heap_all) <= c->heap_all_bytes - bytes;
}

bool overlap(const void* a, size_t alen, const void* b, size_t blen) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  return alen != 0 && blen != 0 && x < y + blen && y < x + alen;
}

void put_offsets(trainit_comm* c, SeqLine* l, const void* send, const void* recv) {
  const uint64_t off[2] = {
      send != nullptr ? static_cast<uint64_t>(static_cast<const unsigned char*>(send) - c->base) : 0,
      recv != nullptr ? static_cast<uint64_t>(static_cast<const unsigned char*>(recv) - c->base) : 0};
  std::memcpy(l->data, off, sizeof(off));
}

unsigned char* peer_buffer(trainit_comm* c, int p, uint32_t s, int which) {
  uint64_t off[2];
  std::memcpy(off, arena_line(c->base, p, s)->data, sizeof(off));
  return c->base + off[which];
}

unsigned char* staging_in(trainit_comm* c, int p, uint32_t s) {
  return arena_staging(c->base, p, s);
}

unsigned char* staging_out(trainit_comm* c, int p, uint32_t s) {
  return arena_staging(c->base, p, s) + kChunkBytes;
}

// One call's bookkeeping: the slot's op and start time for the init's hang
// detection, the deadline, the completed count.
struct Call {
  trainit_comm* c;
  int64_t deadline;

  Call(trainit_comm* comm, CollOp kind) : c(comm), deadline(0) {
    const int64_t now = comm_now_ns();
    if (c->timeout_ns > 0) {
      deadline = now + c->timeout_ns;
    }
    ArenaSlot* slot = arena_slot(c->base, c->rank);
    slot->start_ns.store(static_cast<uint64_t>(now), std::memory_order_relaxed);
    slot->op.store(kind, std::memory_order_relaxed);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  ~Call() {
    ArenaSlot* slot = arena_slot(c->base, c->rank);
    slot->op.store(kOpNone, std::memory_order_relaxed);
    slot->progress.fetch_add(1, std::memory_order_relaxed);
  }

  // Publishes step s and waits for every peer's.
  int step(uint32_t s) const {
    comm_publish(c, s);
    for (int p = 0; p < c->n; ++p) {
      if (p != c->rank) {
        const int r = comm_wait(c, p, s, deadline);
        if (r < 0) {
          return r;
        }
      }
    }
    return 0;
  }

  // The first step: publishes desc (the line's data already written),
  // waits, and compares every rank's descriptor. *zero_copy: whether every
  // rank set kZeroCopy.
  int first_step(uint32_t s, uint64_t desc, bool* zero_copy = nullptr) const {
    arena_line(c->base, c->rank, s)->desc = desc;
    const int r = step(s);
    if (r < 0) {
      return r;
    }
    bool all_zc = true;
    bool agree = true;
    for (int p = 0; p < c->n; ++p) {
      const uint64_t d = arena_line(c->base, p, s)->desc;
      agree = agree && (d & kInvalid) == 0 && (d & ~kFlags) == (desc & ~kFlags);
      all_zc = all_zc && (d & kZeroCopy) != 0;
    }
    if (zero_copy != nullptr) {
      *zero_copy = all_zc;
    }
    return agree ? 0 : -EINVAL;
  }
};

bool valid_type(int dtype) {
  return dtype >= 0 && dtype < kDtypes;
}

bool valid_op(int op) {
  return op >= 0 && op < kOps;
}

int fold_inputs(trainit_comm* c, int dtype, int op, void* out, const void* const* ins, size_t count) {
  if (count != 0) {
    c->kernels->fold[dtype][op](out, ins, c->n, count);
  }
  return 0;
}

// allreduce (root < 0) and reduce (only root writes recv).
int reduce_like(trainit_comm* c, CollOp kind, const void* send, void* recv, size_t count, int dtype, int op, int root) {
  const Call call(c, kind);
  const bool all = kind == kOpAllreduce;
  const bool writer = all || c->rank == root;
  const size_t es = dtype_size(dtype);
  const bool valid = valid_type(dtype) && valid_op(op) && (all || (root >= 0 && root < c->n)) && count < kMaxCount &&
                     (count == 0 || (send != nullptr && (!writer || recv != nullptr)));
  uint64_t desc = make_desc(kind, dtype, op, all ? 0 : root, count, valid);
  const size_t bytes = valid ? count * es : 0;
  const auto** ins = static_cast<const void**>(__builtin_alloca(sizeof(void*) * static_cast<size_t>(c->n)));
  uint32_t s = ++c->seq;
  SeqLine* mine = arena_line(c->base, c->rank, s);

  if (!valid || bytes <= kInlineBytes) {
    if (bytes != 0) {
      std::memcpy(mine->data, send, bytes);
    }
    int r = call.first_step(s, desc);
    if (r < 0 || !valid) {
      return r < 0 ? r : -EINVAL;
    }
    for (int p = 0; p < c->n; ++p) {
      ins[p] = arena_line(c->base, p, s)->data;
    }
    return writer ? fold_inputs(c, dtype, op, recv, ins, count) : 0;
  }
  if (bytes <= kChunkBytes) {
    std::memcpy(staging_in(c, c->rank, s), send, bytes);
    int r = call.first_step(s, desc);
    if (r < 0) {
      return r;
    }
    for (int p = 0; p < c->n; ++p) {
      ins[p] = staging_in(c, p, s);
    }
    return writer ? fold_inputs(c, dtype, op, recv, ins, count) : 0;
  }

  // Large. Zero copy when every send (and the recv buffers written) lies in
  // the arena heap; an exact in-place recv is fine, a partial overlap is not.
  const bool recv_ok = !writer || (in_heap(c, recv, bytes) && (recv == send || !overlap(send, bytes, recv, bytes)));
  const bool zc = in_heap(c, send, bytes) && recv_ok;
  if (zc) {
    desc |= kZeroCopy;
  }
  put_offsets(c, mine, send, writer ? recv : nullptr);
  bool all_zc = false;
  int r = call.first_step(s, desc, &all_zc);
  if (r < 0) {
    return r;
  }
  const size_t chunk = kChunkBytes / es;
  if (all_zc) {
    ++c->zero_copy_calls;
    // Each rank folds its share from every send buffer and writes it into
    // every writer's recv buffer; one more step and all are done.
    const Range mine_r = split(count, c->n, c->rank);
    for (int p = 0; p < c->n; ++p) {
      ins[p] = peer_buffer(c, p, s, 0) + mine_r.lo * es;
    }
    const size_t len = mine_r.hi - mine_r.lo;
    unsigned char* first = peer_buffer(c, all ? c->rank : root, s, 1) + mine_r.lo * es;
    fold_inputs(c, dtype, op, first, ins, len);
    if (all) {
      for (int p = 0; p < c->n; ++p) {
        if (p != c->rank && len != 0) {
          std::memcpy(peer_buffer(c, p, s, 1) + mine_r.lo * es, first, len * es);
        }
      }
    }
    return call.step(++c->seq);
  }
  const size_t chunks = (count + chunk - 1) / chunk;
  for (size_t t = 0; t <= chunks; ++t) {
    s = ++c->seq;
    if (t < chunks) {
      const size_t at = t * chunk;
      const size_t len = count - at < chunk ? count - at : chunk;
      std::memcpy(staging_in(c, c->rank, s), static_cast<const unsigned char*>(send) + at * es, len * es);
    }
    size_t prev_at = 0;
    size_t prev_len = 0;
    if (t > 0) {
      prev_at = (t - 1) * chunk;
      prev_len = count - prev_at < chunk ? count - prev_at : chunk;
      const Range share = split(prev_len, c->n, c->rank);
      for (int p = 0; p < c->n; ++p) {
        ins[p] = staging_in(c, p, s - 1) + share.lo * es;
      }
      fold_inputs(c, dtype, op, staging_out(c, c->rank, s) + share.lo * es, ins, share.hi - share.lo);
    }
    r = call.step(s);
    if (r < 0) {
      return r;
    }
    if (t > 0 && writer) {
      for (int p = 0; p < c->n; ++p) {
        const Range share = split(prev_len, c->n, p);
        std::memcpy(static_cast<unsigned char*>(recv) + (prev_at + share.lo) * es, staging_out(c, p, s) + share.lo * es,
                    (share.hi - share.lo) * es);
      }
    }
  }
  return 0;
}

int reduce_scatter(trainit_comm* c, const void* send, void* recv, size_t rc, int dtype, int op) {
  const Call call(c, kOpReduceScatter);
  const size_t es = dtype_size(dtype);
  const auto n = static_cast<size_t>(c->n);
  const bool valid =
      valid_type(dtype) && valid_op(op) && rc < kMaxCount / n && (rc == 0 || (send != nullptr && recv != nullptr));
  uint64_t desc = make_desc(kOpReduceScatter, dtype, op, 0, rc, valid);
  const size_t bytes = valid ? n * rc * es : 0;
  const auto** ins = static_cast<const void**>(__builtin_alloca(sizeof(void*) * n));
  uint32_t s = ++c->seq;
  SeqLine* mine = arena_line(c->base, c->rank, s);
  const size_t my_at = static_cast<size_t>(c->rank) * rc * es;

  if (!valid || bytes <= kInlineBytes) {
    if (bytes != 0) {
      std::memcpy(mine->data, send, bytes);
    }
    int r = call.first_step(s, desc);
    if (r < 0 || !valid) {
      return r < 0 ? r : -EINVAL;
    }
    for (int p = 0; p < c->n; ++p) {
      ins[p] = arena_line(c->base, p, s)->data + my_at;
    }
    return fold_inputs(c, dtype, op, recv, ins, rc);
  }
  if (bytes <= kChunkBytes) {
    std::memcpy(staging_in(c, c->rank, s), send, bytes);
    int r = call.first_step(s, desc);
    if (r < 0) {
      return r;
    }
    for (int p = 0; p < c->n; ++p) {
      ins[p] = staging_in(c, p, s) + my_at;
    }
    return fold_inputs(c, dtype, op, recv, ins, rc);
  }
  if (in_heap(c, send, bytes) && !overlap(send, bytes, recv, rc * es)) {
    desc |= kZeroCopy;
  }
  put_offsets(c, mine, send, nullptr);
  bool all_zc = false;
  int r = call.first_step(s, desc, &all_zc);
  if (r < 0) {
    return r;
  }
  if (all_zc) {
    ++c->zero_copy_calls;
    for (int p = 0; p < c->n; ++p) {
      ins[p] = peer_buffer(c, p, s, 0) + my_at;
    }
    fold_inputs(c, dtype, op, recv, ins, rc);
    return call.step(++c->seq);
  }
  // Chunk t holds piece t of every rank's segment, one after the other.
  size_t piece = kChunkBytes / es / n;
  piece = piece == 0 ? 1 : piece;
  const size_t chunks = (rc + piece - 1) / piece;
  for (size_t t = 0; t <= chunks; ++t) {
    s = ++c->seq;
    if (t < chunks) {
      const size_t at = t * piece;
      const size_t len = rc - at < piece ? rc - at : piece;
      for (size_t q = 0; q < n; ++q) {
        std::memcpy(staging_in(c, c->rank, s) + q * len * es,
                    static_cast<const unsigned char*>(send) + (q * rc + at) * es, len * es);
      }
    }
    if (t > 0) {
      const size_t at = (t - 1) * piece;
      const size_t len = rc - at < piece ? rc - at : piece;
      for (int p = 0; p < c->n; ++p) {
        ins[p] = staging_in(c, p, s - 1) + static_cast<size_t>(c->rank) * len * es;
      }
      fold_inputs(c, dtype, op, static_cast<unsigned char*>(recv) + at * es, ins, len);
    }
    r = call.step(s);
    if (r < 0) {
      return r;
    }
  }
  return 0;
}

// Copies a peer's part into recv; the rank's own part only when it is not
// already there (in place).
void place(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) {
    std::memmove(dst, src, bytes);
  }
}

int allgather(trainit_comm* c, const void* send, void* recv, size_t sc, int dtype) {
  const Call call(c, kOpAllgather);
  const size_t es = dtype_size(dtype);
  const auto n = static_cast<size_t>(c->n);
  const bool valid = valid_type(dtype) && sc < kMaxCount / n && (sc == 0 || (send != nullptr && recv != nullptr));
  uint64_t desc = make_desc(kOpAllgather, dtype, 0, 0, sc, valid);
  const size_t bytes = valid ? sc * es : 0;
  auto* out = static_cast<unsigned char*>(recv);
  // In place (send == recv): this rank's part already sits at its place.
  const unsigned char* src =
      send == recv && valid ? out + static_cast<size_t>(c->rank) * bytes : static_cast<const unsigned char*>(send);
  uint32_t s = ++c->seq;
  SeqLine* mine = arena_line(c->base, c->rank, s);

  if (!valid || bytes <= kChunkBytes) {
    const bool inline_data = bytes <= kInlineBytes;
    if (bytes != 0) {
      std::memcpy(inline_data ? mine->data : staging_in(c, c->rank, s), src, bytes);
    }
    int r = call.first_step(s, desc);
    if (r < 0 || !valid) {
      return r < 0 ? r : -EINVAL;
    }
    for (int p = 0; p < c->n; ++p) {
      unsigned char* dst = out + static_cast<size_t>(p) * bytes;
      if (p == c->rank) {
        place(dst, src, bytes);
      } else if (bytes != 0) {
        std::memcpy(dst, inline_data ? arena_line(c->base, p, s)->data : staging_in(c, p, s), bytes);
      }
    }
    return 0;
  }
  if (in_heap(c, src, bytes)) {
    desc |= kZeroCopy;
  }
  put_offsets(c, mine, src, nullptr);
  bool all_zc = false;
  int r = call.first_step(s, desc, &all_zc);
  if (r < 0) {
    return r;
  }
  if (all_zc) {
    ++c->zero_copy_calls;
    for (int p = 0; p < c->n; ++p) {
      place(out + static_cast<size_t>(p) * bytes, p == c->rank ? src : peer_buffer(c, p, s, 0), bytes);
    }
    return call.step(++c->seq);
  }
  const size_t chunk = kChunkBytes / es;
  const size_t chunks = (sc + chunk - 1) / chunk;
  for (size_t t = 0; t < chunks; ++t) {
    s = ++c->seq;
    const size_t at = t * chunk;
    const size_t len = sc - at < chunk ? sc - at : chunk;
    std::memcpy(staging_in(c, c->rank, s), src + at * es, len * es);
    r = call.step(s);
    if (r < 0) {
      return r;
    }
    for (int p = 0; p < c->n; ++p) {
      unsigned char* dst = out + (static_cast<size_t>(p) * sc + at) * es;
      if (p == c->rank) {
        place(dst, src + at * es, len * es);
      } else {
        std::memcpy(dst, staging_in(c, p, s), len * es);
      }
    }
  }
  return 0;
}

int broadcast(trainit_comm* c, void* buf, size_t count, int dtype, int root) {
  const Call call(c, kOpBroadcast);
  const size_t es = dtype_size(dtype);
  const bool valid =
      valid_type(dtype) && root >= 0 && root < c->n && count < kMaxCount && (count == 0 || buf != nullptr);
  uint64_t desc = make_desc(kOpBroadcast, dtype, 0, root, count, valid);
  const size_t bytes = valid ? count * es : 0;
  const bool is_root = c->rank == root;
  uint32_t s = ++c->seq;
  SeqLine* mine = arena_line(c->base, c->rank, s);

  if (!valid || bytes <= kChunkBytes) {
    const bool inline_data = bytes <= kInlineBytes;
    if (is_root && bytes != 0) {
      std::memcpy(inline_data ? mine->data : staging_in(c, c->rank, s), buf, bytes);
    }
    int r = call.first_step(s, desc);
    if (r < 0 || !valid) {
      return r < 0 ? r : -EINVAL;
    }
    if (!is_root && bytes != 0) {
      std::memcpy(buf, inline_data ? arena_line(c->base, root, s)->data : staging_in(c, root, s), bytes);
    }
    return 0;
  }
  if (!is_root || in_heap(c, buf, bytes)) {
    desc |= kZeroCopy;
  }
  put_offsets(c, mine, is_root ? buf : nullptr, nullptr);
  bool all_zc = false;
  int r = call.first_step(s, desc, &all_zc);
  if (r < 0) {
    return r;
  }
  if (all_zc) {
    ++c->zero_copy_calls;
    if (!is_root) {
      std::memcpy(buf, peer_buffer(c, root, s, 0), bytes);
    }
    return call.step(++c->seq);
  }
  const size_t chunk = kChunkBytes / es;
  const size_t chunks = (count + chunk - 1) / chunk;
  for (size_t t = 0; t < chunks; ++t) {
    s = ++c->seq;
    const size_t at = t * chunk;
    const size_t len = count - at < chunk ? count - at : chunk;
    if (is_root) {
      std::memcpy(staging_in(c, c->rank, s), static_cast<const unsigned char*>(buf) + at * es, len * es);
    }
    r = call.step(s);
    if (r < 0) {
      return r;
    }
    if (!is_root) {
      std::memcpy(static_cast<unsigned char*>(buf) + at * es, staging_in(c, root, s), len * es);
    }
  }
  return 0;
}

// Every call starts here: no communicator, or an arena already aborted,
// ends it before any step.
int precheck(const trainit_comm* c) {
  if (c == nullptr) {
    return -EINVAL;
  }
  return coll_arena_aborted(c->base) ? -ECONNABORTED : 0;
}

}  // namespace

extern "C" {

int trainit_allreduce(trainit_comm* comm, const void* send, void* recv, size_t count, trainit_dtype dtype,
                      trainit_op op) {
  const int r = precheck(comm);
  return r < 0 ? r : reduce_like(comm, kOpAllreduce, send, recv, count, dtype, op, -1);
}

int trainit_reduce(trainit_comm* comm, const void* send, void* recv, size_t count, trainit_dtype dtype, trainit_op op,
                   int root) {
  const int r = precheck(comm);
  return r < 0 ? r : reduce_like(comm, kOpReduce, send, recv, count, dtype, op, root);
}

int trainit_reduce_scatter(trainit_comm* comm, const void* send, void* recv, size_t recvcount, trainit_dtype dtype,
                           trainit_op op) {
  const int r = precheck(comm);
  return r < 0 ? r : reduce_scatter(comm, send, recv, recvcount, dtype, op);
}

int trainit_allgather(trainit_comm* comm, const void* send, void* recv, size_t sendcount, trainit_dtype dtype) {
  const int r = precheck(comm);
  return r < 0 ? r : allgather(comm, send, recv, sendcount, dtype);
}

int trainit_broadcast(trainit_comm* comm, void* buf, size_t count, trainit_dtype dtype, int root) {
  const int r = precheck(comm);
  return r < 0 ? r : broadcast(comm, buf, count, dtype, root);
}

int trainit_barrier(trainit_comm* comm) {
  int r = precheck(comm);
  if (r < 0) {
    return r;
  }
  const Call call(comm, kOpBarrier);
  return call.first_step(++comm->seq, make_desc(kOpBarrier, 0, 0, 0, 0, true));
}

}  // extern "C"

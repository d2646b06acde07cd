// A device communicator's calls: the device algorithm (device_algo.h), as
// one launch on the backend where it runs the algorithm (CUDA, the fake
// device), else driven from here over the backend's copy and fold, with the
// arena's steps (Ascend).
//
// Synchronous calls (no stream set) first wait for the work this process
// has issued on its device (the backend's signal and wait), launch, and wait
// for the launch while this thread watches the arena: an abort, or a peer
// dead for the death grace, sets the call's abort word, which every wait of
// the algorithm reads, so the call ends with -ECONNABORTED. A stream-ordered
// call (trainit_comm_set_stream) enqueues and returns; the error of an
// earlier one is returned by the next call or trainit_comm_query, once, and
// aborts the arena (ranks may have seen it at different calls: none must
// wait for another again), and a thread of the communicator's watches the
// arena while calls are in flight.
#include <sched.h>
#include <time.h>
#include <trainit/coll.h>

#include <cerrno>
#include <cstring>

#include "coll/device.h"
#include "coll/device_algo.h"
#include "coll/kernels.h"
#include "coll/protocol.h"

namespace trainit::coll {
namespace {

// The backend's own queued work (between a driven call's steps).
int drain(const trainit_coll_backend* b) {
  return b->drain != nullptr ? b->drain() : device_sync(b);
}

bool arguments_valid(const trainit_comm* c, const DeviceCall& q) {
  const size_t es = dtype_size(q.dtype);
  if (es == 0 || q.count >= kMaxCount) {
    return false;
  }
  const bool reduces = q.kind == kOpAllreduce || q.kind == kOpReduce || q.kind == kOpReduceScatter;
  if (reduces && (q.op < 0 || q.op >= kOps)) {
    return false;
  }
  if ((q.kind == kOpReduce || q.kind == kOpBroadcast) && (q.root < 0 || q.root >= c->n)) {
    return false;
  }
  if (q.count == 0) {
    return true;
  }
  const size_t bytes = q.count * es;
  const size_t n = static_cast<size_t>(c->n);
  if ((q.kind == kOpReduceScatter || q.kind == kOpAllgather) && q.count >= kMaxCount / n) {
    return false;  // the whole, n parts, past the bound: as the host communicator says
  }
  switch (q.kind) {
    case kOpAllreduce:
    case kOpReduce: {
      const bool writes = q.kind == kOpAllreduce || c->rank == q.root;
      return q.send != nullptr &&
             (!writes || (q.recv != nullptr && (q.recv == q.send || !overlap(q.send, bytes, q.recv, bytes))));
    }
    case kOpReduceScatter:
      return q.send != nullptr && q.recv != nullptr && (q.recv == q.send || !overlap(q.send, bytes * n, q.recv, bytes));
    case kOpAllgather: {
      // In place (send == recv), the rank's part is at recv + rank * count;
      // a send that is that part already is in place too.
      const void* own = static_cast<const unsigned char*>(q.recv) + bytes * static_cast<size_t>(c->rank);
      return q.send != nullptr && q.recv != nullptr &&
             (q.send == q.recv || q.send == own || !overlap(q.send, bytes, q.recv, bytes * n));
    }
    case kOpBroadcast:
      return q.recv != nullptr;
    default:
      return false;
  }
}

// Where the call tagged `tag` puts its error, in the view `words` of the
// host's words.
uint64_t* status_slot(void* words, uint64_t tag) {
  return reinterpret_cast<uint64_t*>(static_cast<unsigned char*>(words) + dev::kStatusRingOffset) +
         tag % dev::kStatusSlots;
}

// The done words (device_algo.h) in the view `words` of the host's words.
uint64_t* done_words(void* words) {
  return reinterpret_cast<uint64_t*>(static_cast<unsigned char*>(words) + dev::kDoneOffset);
}

// Zero copy (device_algo.h): a launched call whose buffer (window_buffer())
// lies in a registered window reads and writes the ranks' buffers where
// they are; the ranks compare where at the call's first step.
void place_in_window(const trainit_comm* c, const DeviceComm* d, dev::Call& a) {
  const unsigned char* buf = dev::window_buffer(a);
  uint64_t offset = 0;
  if (buf == nullptr || d->words == nullptr) {
    return;
  }
  const int slot = window_of(d, buf, dev::window_bytes(a), &offset);
  if (slot < 0) {
    return;
  }
  a.where = dev::window_where(slot, offset);
  for (int p = 0; p < c->n; ++p) {
    a.window[p] = d->windows[slot].peers[p] + offset;
  }
}

dev::Call make_call(const trainit_comm* c, const DeviceComm* d, const DeviceCall& q) {
  dev::Call a{};
  const bool valid = arguments_valid(c, q);
  a.kind = q.kind;
  a.dtype = q.dtype;
  a.op = q.op;
  a.root = q.root;
  a.n = c->n;
  a.rank = c->rank;
  a.lines = d->blocks;
  a.valid = valid ? 1 : 0;
  a.elem = valid ? static_cast<uint32_t>(dtype_size(q.dtype)) : 1;
  a.count = q.count;
  a.blocks = dev::blocks_for(a.kind, a.count, a.elem, a.n, a.lines, d->block_bytes);
  a.send = static_cast<const unsigned char*>(q.send);
  // An allgather whose send is its part of recv is in place.
  const bool own_part = q.kind == kOpAllgather && valid &&
                        q.send == static_cast<unsigned char*>(q.recv) + q.count * a.elem * static_cast<size_t>(c->rank);
  a.send = own_part ? static_cast<const unsigned char*>(q.recv) : a.send;
  a.recv = static_cast<unsigned char*>(q.recv);
  for (int p = 0; p < c->n; ++p) {
    a.staging[p] = d->peers[p];
  }
  a.quarter = d->quarter;
  a.one_shot_max = d->one_shot_max;
  a.timeout_ns = c->timeout_ns;
  if (d->words_device != nullptr) {
    a.abort = static_cast<volatile uint32_t*>(d->words_device);
    a.tag = d->launched + 1;
    a.status = status_slot(d->words_device, a.tag);
    a.done = d->stream == nullptr ? done_words(d->words_device) : nullptr;
  }
  place_in_window(c, d, a);
  a.desc = dev::descriptor(a);
  if (!valid) {  // it moves no data: any dtype and op the backend takes
    a.dtype = TRAINIT_F32;
    a.op = TRAINIT_SUM;
  }
  return a;
}

// Lanes driven from this thread: the arena's steps (comm_publish,
// comm_wait_all: a dead peer, the deadline and the abort as for every host
// call), the data moved by the backend's copy and fold.
class ArenaLanes {
 public:
  ArenaLanes(trainit_comm* c, const trainit_coll_backend* b) : c_(c), b_(b) {}

  int sync() { return record(drain(b_)); }
  static int64_t now_ns() { return comm_now_ns(); }
  uint64_t last_step(int, const dev::Call&) const { return c_->seq; }

  void publish(int, uint64_t s, const dev::Call& a, bool first) {
    const auto step = static_cast<uint32_t>(s);
    if (first) {
      SeqLine* l = arena_line(c_->base, c_->rank, step);
      l->desc = a.desc;
      std::memcpy(l->data, &a.count, sizeof a.count);
    }
    c_->seq = step;
    comm_publish(c_, step);
  }

  int wait(int, uint64_t s, const dev::Call& a, int64_t start) {
    return comm_wait_all(c_, static_cast<uint32_t>(s), a.timeout_ns > 0 ? start + a.timeout_ns : 0);
  }

  // One line, one block (prepare_launches): no line is ever idle.
  static void step_idle(const dev::Call&) {}

  bool agrees(int, uint64_t s, const dev::Call& a) const {
    bool all = a.valid != 0;
    for (int p = 0; p < c_->n; ++p) {
      const SeqLine* l = arena_line(c_->base, p, static_cast<uint32_t>(s));
      uint64_t count = 0;
      std::memcpy(&count, l->data, sizeof count);
      all = all && l->desc == a.desc && count == a.count;
    }
    return all;
  }

  int copy(void* dst, const void* src, size_t bytes) {
    return bytes == 0 || dst == src ? 0 : record(b_->copy(dst, src, bytes));
  }

  int fold(void* dst, void* also, const void* const* srcs, int n, size_t count) {
    if (count == 0) {
      return 0;
    }
    const size_t bytes = count * dtype_size(dtype_);
    int r = 0;
    if (b_->fold != nullptr) {
      r = b_->fold(dst, srcs, n, count, dtype_, op_);
    } else {
      r = b_->copy(dst, srcs[0], bytes);
      for (int p = 1; r == 0 && p < n; ++p) {
        r = b_->reduce(dst, srcs[p], count, dtype_, op_);
      }
    }
    return record(r != 0 || also == nullptr ? r : b_->copy(also, dst, bytes));
  }

  void set_op(int dtype, int op) {
    dtype_ = dtype;
    op_ = op;
  }
  bool backend_failed() const { return failed_; }

 private:
  int record(int r) {
    failed_ = failed_ || r != 0;
    return r;
  }

  trainit_comm* c_;
  const trainit_coll_backend* b_;
  int dtype_ = 0;
  int op_ = 0;
  bool failed_ = false;
};

void relax(uint32_t i) {
  if (i < 256) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  } else if (i < 4096) {
    sched_yield();
  } else {
    const timespec ts{0, 20'000};
    nanosleep(&ts, nullptr);
  }
}

// Waits for the launched call, watching the arena every millisecond: a
// call that cannot go on is told so through its abort word.
int await_launch(trainit_comm* c, const DeviceComm* d) {
  int64_t next_watch = 0;
  for (uint32_t i = 0;; ++i) {
    const int r = d->b->query(d->stream);
    if (r != -EINPROGRESS) {
      return r;
    }
    if ((i & 15) == 0) {
      const int64_t now = comm_now_ns();
      if (now >= next_watch) {
        next_watch = now + 1'000'000;
        if (comm_lost(c)) {
          __atomic_store_n(&d->words[0], 1U, __ATOMIC_RELEASE);
        }
      }
    }
    relax(i);
  }
}

// Waits for the synchronous call `a`: until every block's done word holds
// its tag, or the stream says it ended (asked every 100 µs: a call that
// faulted writes none), while watching the arena as await_launch() does.
int await_done(trainit_comm* c, const DeviceComm* d, const dev::Call& a) {
  const uint64_t* done = done_words(d->words);
  int64_t next_query = comm_now_ns() + 100'000;
  int64_t next_watch = 0;
  for (uint32_t i = 0;; ++i) {
    int b = 0;
    while (b < a.blocks && __atomic_load_n(&done[b], __ATOMIC_ACQUIRE) == a.tag) {
      ++b;
    }
    if (b == a.blocks) {
      return 0;
    }
    if ((i & 15) == 0) {
      const int64_t now = comm_now_ns();
      if (now >= next_query) {
        next_query = now + 100'000;
        if (const int r = d->b->query(d->stream); r != -EINPROGRESS) {
          return r;
        }
      }
      if (now >= next_watch) {
        next_watch = now + 1'000'000;
        if (comm_lost(c)) {
          __atomic_store_n(&d->words[0], 1U, __ATOMIC_RELEASE);
        }
      }
    }
    relax(i);
  }
}

// The launched call's end: its error (-EINVAL, ranks that disagreed, leaves
// the communicator usable; any other aborts the arena: peers would wait).
int launched(trainit_comm* c, DeviceComm* d, const dev::Call& a) {
  int r = d->b->launch(&a, d->stream);
  if (r != 0) {  // not enqueued: this rank never takes the call's steps
    coll_arena_abort(c->base, c->n);
    return r;
  }
  d->launched = a.tag;
  if (d->stream != nullptr) {
    return 0;
  }
  r = await_done(c, d, a);
  const int32_t status = take_status(d, r == 0);
  r = r != 0 ? r : status;
  if (r != 0 && r != -EINVAL) {
    coll_arena_abort(c->base, c->n);
  }
  return r;
}

// The call's progress slot, for the init's hang detection: the whole call.
class ShownInSlot {
 public:
  ShownInSlot(trainit_comm* c, CollOp kind) : c_(c) {
    ArenaSlot* slot = arena_slot(c_->base, c_->rank);
    slot->start_ns.store(static_cast<uint64_t>(comm_now_ns()), std::memory_order_relaxed);
    slot->op.store(kind, std::memory_order_relaxed);
  }
  ~ShownInSlot() {
    ArenaSlot* slot = arena_slot(c_->base, c_->rank);
    slot->op.store(kOpNone, std::memory_order_relaxed);
    slot->progress.fetch_add(1, std::memory_order_relaxed);
  }
  ShownInSlot(const ShownInSlot&) = delete;
  ShownInSlot& operator=(const ShownInSlot&) = delete;

 private:
  trainit_comm* c_;
};

}  // namespace

int device_sync(const trainit_coll_backend* b) {
  const int r = b->signal();
  return r != 0 ? r : b->wait();
}

// Reads the ring only: the calls tagged after `reported`, oldest first
// (device_call keeps them within the ring).
int32_t take_status(DeviceComm* d, bool done) {
  for (uint64_t tag = d->reported + 1; tag <= d->launched; ++tag) {
    const uint64_t status = __atomic_load_n(status_slot(d->words, tag), __ATOMIC_ACQUIRE);
    if (dev::status_tag(status) == (tag & dev::kTagMask)) {
      d->reported = tag;
      return dev::status_error(status);
    }
  }
  if (done) {
    d->reported = d->launched;
  }
  return 0;
}

int device_meet(trainit_comm* c, Meeting why) {
  DeviceComm* d = c->device;
  int r = device_call(c, {kOpBarrier, nullptr, nullptr, 0, TRAINIT_F32, TRAINIT_SUM, why});
  if (r == 0 && d->stream != nullptr) {
    const int drained = drain_calls(c);
    const int32_t failed = take_status(d, drained == 0);
    // The meeting's own -EINVAL (the oldest error, so no earlier call's):
    // waited for here, it is this call's, and the ranks stay in step.
    if (drained == 0 && failed == -EINVAL && d->reported == d->launched) {
      return failed;
    }
    if (failed != 0 || drained != 0) {
      r = stream_failed(c, failed != 0 ? failed : drained);
    }
  }
  return r;
}

int stream_failed(trainit_comm* c, int err) {
  coll_arena_abort(c->base, c->n);
  c->device->reported = c->device->launched;  // once: what the calls in flight end with is this error's doing
  return err;
}

int drain_calls(trainit_comm* c) {
  return c->device->stream == nullptr ? 0 : await_launch(c, c->device);
}

int device_call(trainit_comm* c, const DeviceCall& q) {
  DeviceComm* d = c->device;
  if (d->stream != nullptr) {  // an earlier stream-ordered call's error
    // A full ring of calls not known done: the stream drains first, so that
    // this call's slot holds no status still unread.
    const bool full = d->launched - d->reported >= dev::kStatusSlots;
    const int drained = full ? await_launch(c, d) : 0;
    if (const int32_t earlier = take_status(d, full && drained == 0); earlier != 0 || drained != 0) {
      return stream_failed(c, earlier != 0 ? earlier : drained);
    }
  }
  const ShownInSlot shown(c, q.kind);
  const dev::Call a = make_call(c, d, q);
  c->zero_copy_calls += a.where != 0 ? 1 : 0;
  int r = d->stream == nullptr ? device_sync(d->b) : 0;  // the caller's work on its buffers is done
  if (r != 0) {
    coll_arena_abort(c->base, c->n);
    return r;
  }
  if (d->words != nullptr) {  // the backend launches (prepare_launches)
    return launched(c, d, a);
  }
  ArenaLanes lanes(c, d->b);
  lanes.set_op(a.dtype, a.op);
  r = 0;
  for (int b = 0; r == 0 && b < a.blocks; ++b) {
    dev::Block<ArenaLanes> block(lanes, a, b);
    r = block.run();
  }
  r = r != 0 ? r : lanes.sync();
  if (lanes.backend_failed()) {
    coll_arena_abort(c->base, c->n);  // its peers would wait for this rank's part forever
  }
  return r;
}

}  // namespace trainit::coll

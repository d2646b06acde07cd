// Device communicators: the collectives of coll.h on device memory, through
// one backend (backend.h) chosen when the communicator is made.
//
// At init each rank allocates one staging buffer on its device (an "in"
// half and an "out" half), swaps its handle with every local peer over the
// sockets between them (from trainit, or from rank 0 of a standalone
// communicator) after a hello that proves the socket leads to that peer of
// this arena, and maps every peer's staging once, for the communicator's
// life. Each call then goes in pieces of at most a half:
//   1. every rank copies its contribution into its in half;
//   2. barrier (the arena's, host memory): every contribution is staged;
//   3. each rank reads what it needs from its peers' in halves: a reduction
//      folds its own share of every rank's piece, in rank order, into its
//      out half (barrier, then every rank copies each share from its owner's
//      out half), so each element is folded exactly once, by one rank;
//   4. a barrier before the next piece overwrites the halves. The next call's
//      first step (the agreement below) is that barrier for the last piece.
// A call's first step is a host allgather of what each rank was asked
// (kind, dtype, op, root, count, valid): ranks that disagree all get -EINVAL
// and stay in step. A backend error on one rank aborts the arena, so that
// its peers return -ECONNABORTED instead of waiting for it.
//
// Ordering: a call begins with the backend's signal/wait (the caller's
// device work is done) and ends with it (none of the call's is left).
#include <sys/socket.h>
#include <sys/time.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coll/arena.h"
#include "coll/backend.h"
#include "coll/comm.h"
#include "coll/kernels.h"

namespace trainit::coll {

struct DeviceComm {
  const trainit_coll_backend* b;
  unsigned char* staging;  // this rank's: [0, half) in, [half, 2 half) out
  size_t half;
  unsigned char* peers[kMaxPeerSockRanks];  // every rank's staging; this rank's own at [rank]
};

namespace {

constexpr size_t kDefaultStaging = size_t{32} << 20;
constexpr size_t kMinStaging = 4096;
constexpr int64_t kDefaultExchangeTimeout = 60'000'000'000;
constexpr uint64_t kPeerMagic = 0x31726565506c6f43ULL;  // "ColPeer1"

thread_local char last_error[512];

int fail(int err, const char* why) {
  if (std::snprintf(last_error, sizeof last_error, "%s", why) < 0) {
    last_error[0] = '\0';
  }
  return err;
}

// The backend a communicator is made with: the argument, else
// TRAINIT_COLL_BACKEND, else host memory.
const char* chosen_backend(const char* arg) {
  if (arg != nullptr && *arg != '\0') {
    return arg;
  }
  const char* env = std::getenv("TRAINIT_COLL_BACKEND");
  return env != nullptr && *env != '\0' ? env : "host";
}

// TRAINIT_COLL_DEVICE_STAGING: both halves, a multiple of 128 bytes.
size_t staging_bytes() {
  const char* v = std::getenv("TRAINIT_COLL_DEVICE_STAGING");
  size_t bytes = kDefaultStaging;
  if (v != nullptr && *v != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (errno == 0 && *end == '\0' && n >= kMinStaging) {
      bytes = static_cast<size_t>(n);
    }
  }
  return bytes / 128 * 128;
}

int sync(const trainit_coll_backend* b) {
  const int r = b->signal();
  return r != 0 ? r : b->wait();
}

// What a socket's error means to the caller: a peer that went away is a
// peer that died (-ECONNABORTED), a receive timeout is -ETIMEDOUT.
int transport_error(int r) {
  if (r == -EAGAIN || r == -EWOULDBLOCK) {
    return -ETIMEDOUT;
  }
  if (r == -ECONNRESET || r == -EPIPE || r == -ENOTCONN) {
    return -ECONNABORTED;
  }
  return r;
}

// Bounds every send and receive on the peer sockets: a peer that never
// takes part cannot hold this rank forever.
void set_socket_timeouts(const trainit_comm* c) {
  const int64_t ns = c->timeout_ns > 0 ? c->timeout_ns : kDefaultExchangeTimeout;
  const timeval tv{static_cast<time_t>(ns / 1'000'000'000), static_cast<suseconds_t>(ns % 1'000'000'000 / 1000)};
  for (int p = 0; p < c->n; ++p) {
    if (c->peer_socks[p] >= 0) {
      (void)setsockopt(c->peer_socks[p], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      (void)setsockopt(c->peer_socks[p], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
  }
}

struct PeerHello {
  uint64_t magic;
  uint64_t arena_id;
  int32_t rank;
  int32_t size;
};

// Every socket must lead to the peer of this arena it stands for: each side
// says who it is, and checks the other.
int greet_peers(const trainit_comm* c) {
  const PeerHello mine{kPeerMagic, arena_header(c->base)->job_id, c->rank, c->n};
  for (int p = 0; p < c->n; ++p) {
    if (p != c->rank) {
      const int r = coll_send_handle(c->peer_socks[p], &mine, sizeof mine, -1);
      if (r < 0) {
        return fail(transport_error(r), "cannot greet a local peer over its socket (gone, or not a device rank)");
      }
    }
  }
  for (int p = 0; p < c->n; ++p) {
    if (p == c->rank) {
      continue;
    }
    PeerHello theirs{};
    size_t len = sizeof theirs;
    int fd = -1;
    const int r = coll_recv_handle(c->peer_socks[p], &theirs, &len, &fd);
    if (fd >= 0) {
      close(fd);
    }
    if (r < 0) {
      return fail(transport_error(r), "a local peer did not answer on its socket (gone, or not a device rank)");
    }
    if (len != sizeof theirs || fd >= 0 || theirs.magic != kPeerMagic || theirs.arena_id != mine.arena_id ||
        theirs.rank != p || theirs.size != c->n) {
      return fail(-EPROTO, "a peer socket does not lead to that local rank of this communicator");
    }
  }
  return 0;
}

void close_imports(DeviceComm* d, int n, int rank) {
  for (int p = 0; p < n; ++p) {
    if (p != rank && d->peers[p] != nullptr) {
      (void)d->b->close_import(d->peers[p]);
      d->peers[p] = nullptr;
    }
  }
}

void device_destroy(trainit_comm* c) {
  DeviceComm* d = c->device;
  // Every rank is done reading its peers' staging before any import closes,
  // and every import is closed before any exporter frees.
  const bool live = !coll_arena_aborted(c->base) && trainit_barrier(c) == 0;
  close_imports(d, c->n, c->rank);
  if (live && trainit_barrier(c) == 0) {
    (void)d->b->free(d->staging);
  }
  // After an abort a dead peer's import may never close: the staging goes
  // with this process rather than break the backend's rules.
  std::free(d);
  c->device = nullptr;
  c->device_call = nullptr;
  c->device_destroy = nullptr;
}

// dst = srcs[0] op ... op srcs[n-1].
int fold(const trainit_coll_backend* b, void* dst, const void* const* srcs, int n, size_t count, int dtype, int op) {
  if (b->fold != nullptr) {
    return b->fold(dst, srcs, n, count, dtype, op);
  }
  int r = b->copy(dst, srcs[0], count * dtype_size(dtype));
  for (int p = 1; r == 0 && p < n; ++p) {
    r = b->reduce(dst, srcs[p], count, dtype, op);
  }
  return r;
}

bool overlap(const void* a, size_t a_len, const void* b, size_t b_len) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return a_len != 0 && b_len != 0 && x < y + b_len && y < x + a_len;
}

// This rank's share [lo, hi) of len elements.
struct Share {
  size_t lo;
  size_t hi;
};
Share share_of(size_t len, int n, int rank) {
  return {len * static_cast<size_t>(rank) / static_cast<size_t>(n),
          len * static_cast<size_t>(rank + 1) / static_cast<size_t>(n)};
}

bool arguments_valid(const trainit_comm* c, const DeviceCall& q) {
  const size_t es = dtype_size(q.dtype);
  if (es == 0 || q.count >= (uint64_t{1} << 40)) {
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

// The call's first step: every rank's request, compared.
int agree(trainit_comm* c, const DeviceCall& q) {
  const bool valid = arguments_valid(c, q);
  const uint64_t mine[2] = {static_cast<uint64_t>(q.kind) | static_cast<uint64_t>(q.dtype & 0xff) << 8 |
                                static_cast<uint64_t>(q.op & 0xff) << 16 |
                                static_cast<uint64_t>(q.root & 0xffff) << 24 | (valid ? 0 : uint64_t{1} << 63),
                            static_cast<uint64_t>(q.count)};
  uint64_t all[2 * kMaxPeerSockRanks];
  const int r = host_allgather(c, mine, all, 2, TRAINIT_I64);
  if (r < 0) {
    return r;
  }
  for (size_t p = 0; p < static_cast<size_t>(c->n); ++p) {
    if (all[2 * p] != (mine[0] & ~(uint64_t{1} << 63)) || all[2 * p + 1] != mine[1]) {
      return -EINVAL;
    }
  }
  return 0;
}

// The collectives, piece by piece. Each returns the first error; `backend`
// is set when it was the backend's (not the arena's).
class Pieces {
 public:
  Pieces(trainit_comm* c, const DeviceCall& q)
      : c_(c), d_(c->device), b_(d_->b), q_(q), es_(dtype_size(q.dtype)), n_(c->n), rank_(c->rank) {}

  int run() {
    switch (q_.kind) {
      case kOpAllreduce:
      case kOpReduce:
        return reduce();
      case kOpReduceScatter:
        return reduce_scatter();
      case kOpAllgather:
        return allgather();
      case kOpBroadcast:
        return broadcast();
      default:
        return -EINVAL;
    }
  }

  bool backend_failed() const { return backend_failed_; }

 private:
  // A backend call, then its completion.
  int dev(int r) {
    r = r == 0 ? sync(b_) : r;
    backend_failed_ = backend_failed_ || r != 0;
    return r;
  }
  int barrier() { return trainit_barrier(c_); }
  unsigned char* in(int p) const { return d_->peers[p]; }
  unsigned char* out(int p) const { return d_->peers[p] + d_->half; }
  const unsigned char* send() const { return static_cast<const unsigned char*>(q_.send); }
  unsigned char* recv() const { return static_cast<unsigned char*>(q_.recv); }

  int reduce() {
    const size_t piece = d_->half / es_;
    const bool writes = q_.kind == kOpAllreduce || rank_ == q_.root;
    for (size_t at = 0; at < q_.count; at += piece) {
      const size_t len = q_.count - at < piece ? q_.count - at : piece;
      int r = dev(b_->copy(in(rank_), send() + at * es_, len * es_));
      r = r != 0 ? r : barrier();
      const Share mine = share_of(len, n_, rank_);
      const void* srcs[kMaxPeerSockRanks] = {};
      for (int p = 0; p < n_; ++p) {
        srcs[p] = in(p) + mine.lo * es_;
      }
      if (r == 0 && mine.hi > mine.lo) {
        r = dev(fold(b_, out(rank_) + mine.lo * es_, srcs, n_, mine.hi - mine.lo, q_.dtype, q_.op));
      }
      r = r != 0 ? r : barrier();
      if (r != 0) {
        return r;
      }
      for (int p = 0; r == 0 && writes && p < n_; ++p) {
        const Share theirs = share_of(len, n_, p);
        if (theirs.hi > theirs.lo) {
          r = b_->copy(recv() + (at + theirs.lo) * es_, out(p) + theirs.lo * es_, (theirs.hi - theirs.lo) * es_);
        }
      }
      if (writes && (r = dev(r)) != 0) {
        return r;
      }
    }
    return 0;
  }

  int reduce_scatter() {
    const size_t piece = d_->half / (es_ * static_cast<size_t>(n_));
    for (size_t at = 0; at < q_.count; at += piece) {
      const size_t len = q_.count - at < piece ? q_.count - at : piece;
      int r = at == 0 ? 0 : barrier();
      for (int p = 0; r == 0 && p < n_; ++p) {
        r = b_->copy(in(rank_) + static_cast<size_t>(p) * len * es_,
                     send() + (static_cast<size_t>(p) * q_.count + at) * es_, len * es_);
      }
      r = dev(r);
      r = r != 0 ? r : barrier();
      const void* srcs[kMaxPeerSockRanks] = {};
      for (int p = 0; p < n_; ++p) {
        srcs[p] = in(p) + static_cast<size_t>(rank_) * len * es_;
      }
      r = r != 0 ? r : dev(fold(b_, recv() + at * es_, srcs, n_, len, q_.dtype, q_.op));
      if (r != 0) {
        return r;
      }
    }
    return 0;
  }

  int allgather() {
    const size_t piece = d_->half / es_;
    const unsigned char* own = recv() + q_.count * es_ * static_cast<size_t>(rank_);
    const bool in_place = q_.send == q_.recv || send() == own;
    const unsigned char* mine = in_place ? own : send();
    for (size_t at = 0; at < q_.count; at += piece) {
      const size_t len = q_.count - at < piece ? q_.count - at : piece;
      int r = at == 0 ? 0 : barrier();
      r = r != 0 ? r : dev(b_->copy(in(rank_), mine + at * es_, len * es_));
      r = r != 0 ? r : barrier();
      for (int p = 0; r == 0 && p < n_; ++p) {
        if (p != rank_ || !in_place) {
          r = b_->copy(recv() + (static_cast<size_t>(p) * q_.count + at) * es_, in(p), len * es_);
        }
      }
      if ((r = dev(r)) != 0) {
        return r;
      }
    }
    return 0;
  }

  int broadcast() {
    const size_t piece = d_->half / es_;
    const bool root = rank_ == q_.root;
    for (size_t at = 0; at < q_.count; at += piece) {
      const size_t len = q_.count - at < piece ? q_.count - at : piece;
      int r = at == 0 ? 0 : barrier();
      if (r == 0 && root) {
        r = dev(b_->copy(in(rank_), recv() + at * es_, len * es_));
      }
      r = r != 0 ? r : barrier();
      if (r == 0 && !root) {
        r = dev(b_->copy(recv() + at * es_, in(q_.root), len * es_));
      }
      if (r != 0) {
        return r;
      }
    }
    return 0;
  }

  trainit_comm* c_;
  DeviceComm* d_;
  const trainit_coll_backend* b_;
  const DeviceCall& q_;
  size_t es_;
  int n_;
  int rank_;
  bool backend_failed_ = false;
};

// The call's progress slot, as a host collective's (protocol.h's Call),
// but for the whole device call.
class ShownInSlot {
 public:
  ShownInSlot(trainit_comm* c, CollOp kind) : c_(c) {
    ArenaSlot* slot = arena_slot(c_->base, c_->rank);
    slot->start_ns.store(static_cast<uint64_t>(comm_now_ns()), std::memory_order_relaxed);
    slot->op.store(kind, std::memory_order_relaxed);
    c_->device_op = kind;
  }
  ~ShownInSlot() {
    c_->device_op = kOpNone;
    ArenaSlot* slot = arena_slot(c_->base, c_->rank);
    slot->op.store(kOpNone, std::memory_order_relaxed);
    slot->progress.fetch_add(1, std::memory_order_relaxed);
  }
  ShownInSlot(const ShownInSlot&) = delete;
  ShownInSlot& operator=(const ShownInSlot&) = delete;

 private:
  trainit_comm* c_;
};

int device_call(trainit_comm* c, const DeviceCall& q) {
  const ShownInSlot shown(c, q.kind);
  int r = agree(c, q);
  if (r < 0 || q.count == 0) {
    return r;
  }
  // The caller's work on its buffers is done before any rank reads them.
  r = sync(c->device->b);
  bool backend_failed = r != 0;
  if (r == 0) {
    Pieces pieces(c, q);
    r = pieces.run();
    backend_failed = pieces.backend_failed();
  }
  if (backend_failed) {
    coll_arena_abort(c->base, c->n);  // its peers would wait for this rank's part forever
  }
  return r;
}

// Makes c a communicator of the named backend's memory.
int attach_device(trainit_comm* c, const char* name) {
  if (std::strcmp(name, "host") == 0) {
    comm_drop_peer_socks(c);  // host memory goes through the arena
    return 0;
  }
  const trainit_coll_backend* b = nullptr;
  int r = coll_backend_load(name, &b);
  if (r < 0) {
    return fail(r, coll_backend_last_error());
  }
  if (c->n > kMaxPeerSockRanks) {
    return fail(-EOPNOTSUPP, "device communicators take at most 16 local ranks");
  }
  if (c->n > 1 && c->peer_socks == nullptr) {
    return fail(
        -EOPNOTSUPP,
        "no sockets to the local peers (TRAINIT_COLL_PEER_FDS unset: not started by trainit, or trainit could not "
        "make them; see its log)");
  }
  auto* d = static_cast<DeviceComm*>(std::calloc(1, sizeof(DeviceComm)));
  if (d == nullptr) {
    return -ENOMEM;
  }
  d->b = b;
  const size_t bytes = staging_bytes();
  d->half = bytes / 2;
  void* staging = nullptr;
  r = b->alloc(bytes, &staging);
  if (r < 0) {
    std::free(d);
    return fail(r, "cannot allocate the staging buffer on the device");
  }
  d->staging = static_cast<unsigned char*>(staging);
  d->peers[c->rank] = d->staging;
  if (c->n > 1) {
    set_socket_timeouts(c);
    r = greet_peers(c);
    void* peers[kMaxPeerSockRanks] = {};
    if (r == 0 && (r = coll_backend_exchange(b, c->peer_socks, staging, bytes, c->n, c->rank, peers)) < 0) {
      r = r == -EINVAL && coll_backend_last_error()[0] != '\0'
              ? fail(r, coll_backend_last_error())  // a staging of another size: which rank's
              : fail(transport_error(r), "the device handle exchange with the local peers failed");
    }
    for (int p = 0; p < c->n; ++p) {
      if (p != c->rank) {
        d->peers[p] = static_cast<unsigned char*>(peers[p]);
      }
    }
  }
  if (r < 0) {
    close_imports(d, c->n, c->rank);
    (void)b->free(staging);
    std::free(d);
    return r;
  }
  c->device = d;
  c->device_call = device_call;
  c->device_destroy = device_destroy;
  return 0;
}

int finish_init(trainit_comm** comm, int r, const char* backend) {
  if (r < 0) {
    return r;
  }
  r = attach_device(*comm, chosen_backend(backend));
  if (r < 0) {
    (void)trainit_comm_destroy(*comm);
    *comm = nullptr;
  }
  return r;
}

const trainit_coll_backend* backend_of(const trainit_comm* c) {
  return c->device != nullptr ? c->device->b : coll_backend_host();
}

}  // namespace
}  // namespace trainit::coll

using namespace trainit::coll;

extern "C" {

int trainit_comm_init_from_env_backend(trainit_comm** comm, const char* backend) {
  last_error[0] = '\0';
  return finish_init(comm, comm_init_from_env_host(comm), backend);
}

int trainit_comm_init_backend(trainit_comm** comm, const char* name, int rank, int size, const char* backend) {
  last_error[0] = '\0';
  return finish_init(comm, comm_init_named_host(comm, name, rank, size), backend);
}

int trainit_comm_init_from_env(trainit_comm** comm) {
  return trainit_comm_init_from_env_backend(comm, nullptr);
}

int trainit_comm_init(trainit_comm** comm, const char* name, int rank, int size) {
  return trainit_comm_init_backend(comm, name, rank, size, nullptr);
}

const char* trainit_comm_backend(const trainit_comm* comm) {
  return comm == nullptr ? nullptr : backend_of(comm)->name;
}

const char* trainit_backend_error(void) {
  return last_error;
}

int trainit_device_alloc(trainit_comm* comm, size_t bytes, void** ptr) {
  if (comm == nullptr || ptr == nullptr) {
    return -EINVAL;
  }
  return backend_of(comm)->alloc(bytes, ptr);
}

int trainit_device_free(trainit_comm* comm, void* ptr) {
  if (comm == nullptr) {
    return -EINVAL;
  }
  return ptr == nullptr ? 0 : backend_of(comm)->free(ptr);
}

int trainit_device_copy(trainit_comm* comm, void* dst, const void* src, size_t bytes) {
  if (comm == nullptr) {
    return -EINVAL;
  }
  const trainit_coll_backend* b = backend_of(comm);
  const int r = b->copy(dst, src, bytes);
  return r != 0 ? r : sync(b);
}

}  // extern "C"

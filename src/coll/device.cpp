// Device communicators: the collectives of coll.h on device memory, through
// one backend (backend.h) chosen when the communicator is made.
//
// At init each rank allocates one staging buffer on its device (its step
// lines and four quarters: device_algo.h), swaps its handle with every
// local peer over the sockets between them (from trainit, or from rank 0 of
// a standalone communicator) after a hello that proves the socket leads to
// that peer of this arena, and maps every peer's staging once, for the
// communicator's life. Each call is then the device algorithm over those
// (device_call.cpp).
#include "coll/device.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coll/arena.h"
#include "coll/backend.h"
#include "coll/comm.h"
#include "coll/device_algo.h"
#include "coll/kernels.h"

namespace trainit::coll {

namespace {

constexpr size_t kDefaultStaging = size_t{32} << 20;
constexpr size_t kMinStaging = 4096;
// Allreduce and reduce pieces past this go two-shot (TRAINIT_COLL_DEVICE_ONE_SHOT).
// 1 MiB: on an H200 shared by 2 ranks, a 1 MiB allreduce took 25.5 µs one-shot
// and 28.3 two-shot; 256 KiB and 4 MiB were alike either way.
constexpr size_t kDefaultOneShotMax = size_t{1} << 20;
// A call on a GPU runs on one block per this many bytes a rank moves
// (TRAINIT_COLL_DEVICE_BLOCK_BYTES; dev::blocks_for): a small call meets
// its peers once, not once a block, and a 1 MiB allreduce still takes 32
// blocks. Not yet measured against every block on a GPU (gpu_allreduce
// sweep does); the fake device runs every call on all of its (0), so that
// its tests cross blocks.
constexpr size_t kDefaultBlockBytes = size_t{16} << 10;
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

// A byte count from the environment: dflt when unset or empty (or, where
// `ignored_below` is set, under it); -EINVAL, said why, when it is not a
// decimal count from `least` to kMaxEnvBytes.
constexpr uint64_t kMaxEnvBytes = uint64_t{1} << 36;

int64_t env_bytes(const char* name, size_t dflt, size_t least, size_t ignored_below = 0) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    return static_cast<int64_t>(dflt);
  }
  uint64_t n = 0;
  for (const char* at = v; n <= kMaxEnvBytes && *at != '\0'; ++at) {
    n = *at >= '0' && *at <= '9' ? n * 10 + static_cast<uint64_t>(*at - '0') : kMaxEnvBytes + 1;
  }
  if (n < ignored_below) {
    return static_cast<int64_t>(dflt);
  }
  if (n < least || n > kMaxEnvBytes) {
    char why[160];
    (void)std::snprintf(why, sizeof why, "%s=\"%.40s\" is not a byte count from %zu to %llu", name, v, least,
                        static_cast<unsigned long long>(kMaxEnvBytes));
    return fail(-EINVAL, why);
  }
  return static_cast<int64_t>(n);
}

// TRAINIT_COLL_DEVICE_STAGING: the step lines and four quarters, each a
// multiple of dev::kQuarterAlign bytes (values under kMinStaging are
// ignored); or -EINVAL.
int64_t quarter_bytes() {
  const int64_t bytes = env_bytes("TRAINIT_COLL_DEVICE_STAGING", kDefaultStaging, kMinStaging, kMinStaging);
  if (bytes < 0) {
    return bytes;
  }
  return static_cast<int64_t>((static_cast<uint64_t>(bytes) - dev::kHeaderBytes) / 4 / dev::kQuarterAlign *
                              dev::kQuarterAlign);
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
  // What shapes every call's steps: ranks that differ would wait on steps
  // their peers never take.
  int32_t blocks;
  int32_t launches;  // 1: calls are launched (TRAINIT_COLL_DEVICE_LAUNCH), 0: driven from the host
  uint64_t one_shot_max;
  uint64_t block_bytes;
  // What sizes the staging: ranks that differ would be refused at the
  // exchange, one after another, and a rank's refusal could free its
  // staging under a peer still importing it.
  uint64_t quarter;
};
static_assert(sizeof(PeerHello) == 56);

// Every socket must lead to the peer of this arena it stands for: each side
// says who it is, and checks the other; then that the peer splits calls as
// this rank does.
int greet_peers(const trainit_comm* c, const DeviceComm* d) {
  PeerHello mine{};
  mine.magic = kPeerMagic;
  mine.arena_id = arena_header(c->base)->job_id;
  mine.rank = c->rank;
  mine.size = c->n;
  mine.blocks = d->blocks;
  mine.launches = d->words != nullptr ? 1 : 0;
  mine.one_shot_max = d->one_shot_max;
  mine.block_bytes = d->block_bytes;
  mine.quarter = d->quarter;
  for (int p = 0; p < c->n; ++p) {
    if (p != c->rank) {
      const int r = coll_send_handle(c->peer_socks[p], &mine, sizeof mine, -1);
      if (r < 0) {
        return fail(transport_error(r), "cannot greet a local peer over its socket (gone, or not a device rank)");
      }
    }
  }
  const char* differ = nullptr;  // the first setting a peer has otherwise
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
      char why[160];
      (void)std::snprintf(why, sizeof why,
                          "local rank %d's socket does not lead to that local rank of this communicator (its "
                          "hello is %s)",
                          p,
                          len != sizeof theirs || fd >= 0 || theirs.magic != kPeerMagic ? "no peer's hello"
                          : theirs.arena_id != mine.arena_id                            ? "another arena's"
                                                                                        : "another rank's");
      return fail(-EPROTO, why);
    }
    if (differ == nullptr) {
      differ = theirs.launches != mine.launches           ? "TRAINIT_COLL_DEVICE_LAUNCH"
               : theirs.quarter != mine.quarter           ? "TRAINIT_COLL_DEVICE_STAGING"
               : theirs.blocks != mine.blocks             ? "TRAINIT_COLL_DEVICE_BLOCKS"
               : theirs.one_shot_max != mine.one_shot_max ? "TRAINIT_COLL_DEVICE_ONE_SHOT"
               : theirs.block_bytes != mine.block_bytes   ? "TRAINIT_COLL_DEVICE_BLOCK_BYTES"
                                                          : nullptr;
    }
  }
  if (differ == nullptr) {
    return 0;
  }
  char why[160];
  (void)std::snprintf(why, sizeof why, "the local ranks differ in %s (every rank must set it alike)", differ);
  return fail(-EINVAL, why);
}

void close_imports(DeviceComm* d, int n, int rank) {
  for (int p = 0; p < n; ++p) {
    if (p != rank && d->peers[p] != nullptr) {
      (void)d->b->close_import(d->peers[p]);
      d->peers[p] = nullptr;
    }
  }
}

// The blocks a call's elements are split between (device_algo.h), for a
// backend that launches: a GPU runs them side by side (a block of threads
// each), 64 / n of them, at most dev::kMaxBlocks: the blocks of n ranks
// sharing one GPU all resident at once (two an SM, and the small GPUs the
// kernels run on have 56 SMs or more: an A30, an L4), since a block waits
// for its peers' (on an H200 shared by 2 ranks, 32 blocks moved 256 MiB at
// 224 GB/s busbw where 16 moved it at 143); the fake device runs them one
// after the other, two of them, so that its tests cross blocks.
// TRAINIT_COLL_DEVICE_BLOCKS sets another count (1 … dev::kMaxBlocks),
// the same on every rank (the hello checks it). Each region still holds a
// reduce_scatter's element of every rank: at most that many. The count,
// or -EINVAL (said why) for a malformed value.
int blocks_of(const trainit_coll_backend* b, uint64_t quarter, int n) {
  constexpr int kResidentBlocks = 64;
  const int per_rank = kResidentBlocks / (n < 1 ? 1 : n);
  int want = std::strcmp(b->name, "cuda") != 0 ? 2 : per_rank < dev::kMaxBlocks ? per_rank : dev::kMaxBlocks;
  if (const char* v = std::getenv("TRAINIT_COLL_DEVICE_BLOCKS"); v != nullptr && *v != '\0') {
    long n = 0;
    for (const char* at = v; n <= dev::kMaxBlocks && *at != '\0'; ++at) {
      n = *at >= '0' && *at <= '9' ? n * 10 + (*at - '0') : dev::kMaxBlocks + 1;
    }
    if (n < 1 || n > dev::kMaxBlocks) {
      char why[128];
      (void)std::snprintf(why, sizeof why, "TRAINIT_COLL_DEVICE_BLOCKS=\"%.40s\" is not a block count from 1 to %d", v,
                          dev::kMaxBlocks);
      return fail(-EINVAL, why);
    }
    want = static_cast<int>(n);
  }
  const auto fits = static_cast<int>(quarter / (kMaxPeerSockRanks * sizeof(uint64_t)));
  return want < fits ? want : fits;
}

// TRAINIT_COLL_DEVICE_LAUNCH: 1 (or unset) where a backend can launch, 0
// to drive its calls from the host anyway (what ranks sharing one GPU
// without MPS may prefer: there the driver runs one rank's kernel at a
// time, and a kernel that waits for a peer's waits out its time slice).
// 1, 0, or -EINVAL (said why).
int launch_wanted() {
  const char* v = std::getenv("TRAINIT_COLL_DEVICE_LAUNCH");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0) {
    return 1;
  }
  if (std::strcmp(v, "0") == 0) {
    return 0;
  }
  char why[128];
  (void)std::snprintf(why, sizeof why, "TRAINIT_COLL_DEVICE_LAUNCH=\"%.40s\" is neither 0 nor 1", v);
  return fail(-EINVAL, why);
}

// A backend that launches has its four entries (backend.h) and a status
// and abort word for its calls (words); one without them, or with only some,
// or told not to launch, is driven from the host, one block.
int prepare_launches(DeviceComm* d, int n) {
  const trainit_coll_backend* b = d->b;
  d->blocks = blocks_of(b, d->quarter, n);  // checked whichever runs the blocks
  if (d->blocks < 0) {
    return d->blocks;
  }
  const int64_t block_bytes =
      env_bytes("TRAINIT_COLL_DEVICE_BLOCK_BYTES", std::strcmp(b->name, "cuda") == 0 ? kDefaultBlockBytes : 0, 0);
  if (block_bytes < 0) {
    return static_cast<int>(block_bytes);
  }
  d->block_bytes = static_cast<uint64_t>(block_bytes);
  const int launch = launch_wanted();
  if (launch < 0) {
    return launch;
  }
  if (launch == 0 || b->launch == nullptr || b->query == nullptr || b->host_mapped == nullptr ||
      b->free_host_mapped == nullptr) {
    d->blocks = 1;
    return 0;
  }
  void* host = nullptr;
  const int r = b->host_mapped(dev::kWordsBytes, &host, &d->words_device);
  if (r < 0) {
    return fail(r, "cannot allocate the collectives' status words");
  }
  d->words = static_cast<uint32_t*>(host);
  return 0;
}

void device_destroy(trainit_comm* c) {
  DeviceComm* d = c->device;
  (void)drain_calls(c);
  stop_watching(d);
  d->stream = nullptr;
  // Every rank is done reading its peers' staging before any import closes,
  // and every import is closed before any exporter frees. The first meeting
  // is where device calls meet: a peer still in one (its program on, this
  // one ended) gets -EINVAL there instead of waiting for good, and the
  // arena ends, so that its next call ends too.
  const bool live = !coll_arena_aborted(c->base) && device_meet(c, kMeetDestroy) == 0;
  if (!live) {
    coll_arena_abort(c->base, c->n);
  }
  close_imports(d, c->n, c->rank);
  close_windows(d, c->n, c->rank);
  if (live && host_barrier(c) == 0) {
    (void)d->b->free(d->staging);
  }
  if (d->words != nullptr) {
    (void)d->b->free_host_mapped(d->words);
  }
  // After an abort a dead peer's import may never close: the staging goes
  // with this process rather than break the backend's rules.
  std::free(d);
  c->device = nullptr;
  c->device_call = nullptr;
  c->device_destroy = nullptr;
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
  const int64_t quarter = quarter_bytes();
  const int64_t one_shot = env_bytes("TRAINIT_COLL_DEVICE_ONE_SHOT", kDefaultOneShotMax, 1);
  if (quarter < 0 || one_shot < 0) {
    std::free(d);
    return static_cast<int>(quarter < 0 ? quarter : one_shot);
  }
  d->quarter = static_cast<uint64_t>(quarter);
  d->one_shot_max = static_cast<uint64_t>(one_shot);
  const size_t bytes = dev::kHeaderBytes + 4 * d->quarter;
  void* staging = nullptr;
  r = b->alloc(bytes, &staging);
  if (r < 0) {
    std::free(d);
    return fail(r, "cannot allocate the staging buffer on the device");
  }
  d->staging = static_cast<unsigned char*>(staging);
  // A launching backend's memory reads as zeros (backend.h): no step
  // published yet in its step lines.
  r = prepare_launches(d, c->n);
  if (r < 0) {
    (void)b->free(staging);
    std::free(d);
    return r;
  }
  d->peers[c->rank] = d->staging;
  if (c->n > 1) {
    set_socket_timeouts(c);
    r = greet_peers(c, d);
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
    if (d->words != nullptr) {
      (void)b->free_host_mapped(d->words);
    }
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

int transport_error(int r) {
  if (r == -EAGAIN || r == -EWOULDBLOCK) {
    return -ETIMEDOUT;
  }
  if (r == -ECONNRESET || r == -EPIPE || r == -ENOTCONN) {
    return -ECONNABORTED;
  }
  return r;
}

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
  return r != 0 ? r : device_sync(b);
}

}  // extern "C"

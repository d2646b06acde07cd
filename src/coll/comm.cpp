// Joining a communicator: from trainit's environment, or standalone over an
// abstract unix socket (rendezvous.cpp); a rank's sockets to its peers. A
// step's wait and a peer's death: waits.cpp (kEnvDeathGrace: see there).
#include "coll/comm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace trainit::coll {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kJoinTimeout = 60 * kSecond;
constexpr size_t kDefaultHeap = 32UL << 20;
constexpr int64_t kEnvDeathGrace = kSecond;

// A non-negative int from the environment: the value, -1 if unset or bad.
long env_int(const char* name) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') {
    return -1;
  }
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) {
    return -1;
  }
  return v;
}

// TRAINIT_COLL_TIMEOUT in nanoseconds (seconds, fractions allowed), 0 if unset.
int64_t env_timeout_ns() {
  const char* s = std::getenv("TRAINIT_COLL_TIMEOUT");
  if (s == nullptr || *s == '\0') {
    return 0;
  }
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (*end != '\0' || !(v > 0) || v > 1e9) {
    return 0;
  }
  return static_cast<int64_t>(v * 1e9);
}

int map_arena(int fd, void** base, size_t* size) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return -errno;
  }
  if (st.st_size <= 0) {
    return -EPROTO;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return -errno;
  }
  const int r = coll_arena_check(p, static_cast<size_t>(st.st_size));
  if (r < 0) {
    munmap(p, static_cast<size_t>(st.st_size));
    return r;
  }
  *base = p;
  *size = static_cast<size_t>(st.st_size);
  return 0;
}

// Rank 0: creates the arena, committed up front, and serves it to size - 1
// peers of this user; returns the arena's fd (close-on-exec) or -errno.
int create_arena(int size, int* out_fd, void** base, size_t* bytes) {
  long heap = env_int("TRAINIT_COLL_HEAP");
  const size_t total = coll_arena_size(size, heap >= 0 ? static_cast<size_t>(heap) : kDefaultHeap);
  if (total == 0) {
    return -EINVAL;
  }
  const int fd = memfd_create("trainit-coll", MFD_CLOEXEC);
  if (fd < 0) {
    return -errno;
  }
  int r = 0;
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    r = -errno;
  } else if ((r = posix_fallocate(fd, 0, static_cast<off_t>(total))) != 0) {
    // Pages committed now: a small memory limit fails here, not as SIGBUS later.
    r = -r;
  } else {
    void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      r = -errno;
    } else {
      r = coll_arena_format(p, total, size, (static_cast<uint64_t>(getpid()) << 32) ^ comm_now_ns());
      if (r == 0) {
        *base = p;
        *bytes = total;
        *out_fd = fd;
        return 0;
      }
      munmap(p, total);
    }
  }
  close(fd);
  return r;
}

}  // namespace

int64_t comm_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

int comm_attach(trainit_comm** out, void* base, size_t size, int rank) {
  ArenaHeader* h = arena_header(base);
  const int n = static_cast<int>(h->local_size);
  if (n < 1 || rank < 0 || rank >= n) {
    return -EINVAL;
  }
  auto* c = static_cast<trainit_comm*>(std::calloc(1, sizeof(trainit_comm)));
  int* pidfds = static_cast<int*>(std::malloc(sizeof(int) * static_cast<size_t>(n)));
  const auto** ins = static_cast<const void**>(std::malloc(sizeof(void*) * static_cast<size_t>(n)));
  if (c == nullptr || pidfds == nullptr || ins == nullptr) {
    std::free(c);
    std::free(pidfds);
    std::free(static_cast<void*>(ins));
    return -ENOMEM;
  }
  for (int i = 0; i < n; ++i) {
    pidfds[i] = -1;
  }
  c->base = static_cast<unsigned char*>(base);
  c->size = size;
  c->rank = rank;
  c->n = n;
  c->pidfds = pidfds;
  c->ins = ins;
  c->timeout_ns = env_timeout_ns();
  comm_init_waiting(c);
  c->kernels = kernels_best();
  const uint64_t share = h->heap_bytes / static_cast<uint64_t>(n);
  c->heap_all = c->base + h->heap_off;
  c->heap_all_bytes = h->heap_bytes;
  c->heap = c->heap_all + share * static_cast<uint64_t>(rank);
  c->heap_bytes = share;
  // This rank's seq starts where its lines left off (0 in a fresh arena).
  const uint32_t s0 = arena_line(base, rank, 0)->seq.load(std::memory_order_acquire);
  const uint32_t s1 = arena_line(base, rank, 1)->seq.load(std::memory_order_acquire);
  c->seq = static_cast<int32_t>(s0 - s1) >= 0 ? s0 : s1;
  c->handover_forced = -1;
  arena_slot(base, rank)->pid.store(getpid(), std::memory_order_relaxed);
  *out = c;
  return 0;
}

}  // namespace trainit::coll

namespace trainit::coll {
namespace {

// Keeps the sockets to the peers (socks: n entries, -1 where none) in c.
int keep_peer_socks(trainit_comm* c, const int* socks) {
  bool any = false;
  for (int p = 0; p < c->n; ++p) {
    any = any || socks[p] >= 0;
  }
  if (!any) {
    return 0;
  }
  c->peer_socks = static_cast<int*>(std::malloc(sizeof(int) * static_cast<size_t>(c->n)));
  if (c->peer_socks == nullptr) {
    return -ENOMEM;
  }
  std::memcpy(c->peer_socks, socks, sizeof(int) * static_cast<size_t>(c->n));
  return 0;
}

void close_socks(const int* socks, int n) {
  for (int p = 0; p < n; ++p) {
    if (socks[p] >= 0) {
      close(socks[p]);
    }
  }
}

// socks: kMaxPeerSockRanks entries.
// TRAINIT_COLL_PEER_FDS: one entry per local rank, "-" at the rank's own,
// each a descriptor of a unix SOCK_SEQPACKET socket (what trainit passes).
// Unset: none (socks all -1). Anything else is -EINVAL. Every socket becomes
// close-on-exec: what the rank runs from now on does not get it.
int peer_fds_from_env(int rank, int size, int* socks) {
  for (int p = 0; p < kMaxPeerSockRanks; ++p) {
    socks[p] = -1;
  }
  const char* v = std::getenv("TRAINIT_COLL_PEER_FDS");
  if (v == nullptr || *v == '\0') {
    return 0;
  }
  if (size > kMaxPeerSockRanks) {
    return -EINVAL;
  }
  for (int p = 0; p < size; ++p) {
    if (p == rank) {
      if (*v != '-') {
        return -EINVAL;
      }
      ++v;
    } else {
      char* end = nullptr;
      errno = 0;
      const long fd = std::strtol(v, &end, 10);
      int type = 0;
      int domain = 0;
      socklen_t len = sizeof(int);
      socklen_t dlen = sizeof(int);
      if (errno != 0 || end == v || fd < 0 || fd > INT32_MAX ||
          getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET ||
          getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0 || domain != AF_UNIX) {
        return -EINVAL;
      }
      socks[p] = static_cast<int>(fd);
      v = end;
    }
    if (*v != (p + 1 < size ? ',' : '\0')) {
      return -EINVAL;
    }
    v += *v == ',' ? 1 : 0;
  }
  for (int p = 0; p < size; ++p) {
    if (socks[p] >= 0) {
      (void)fcntl(socks[p], F_SETFD, fcntl(socks[p], F_GETFD) | FD_CLOEXEC);
    }
  }
  return 0;
}

}  // namespace

void comm_drop_peer_socks(trainit_comm* c) {
  if (c->peer_socks != nullptr) {
    if (c->peer_socks_owned) {
      close_socks(c->peer_socks, c->n);
    }
    std::free(c->peer_socks);
    c->peer_socks = nullptr;
  }
}

int comm_init_from_env_host(trainit_comm** comm) {
  if (comm == nullptr) {
    return -EINVAL;
  }
  *comm = nullptr;
  const long fd = env_int("TRAINIT_COLL_FD");
  const long rank = env_int("TRAINIT_LOCAL_RANK");
  const long size = env_int("TRAINIT_LOCAL_SIZE");
  if (fd < 0 || fd > INT32_MAX || rank < 0 || size < 1 || size > kMaxRanks || rank >= size) {
    return -EINVAL;
  }
  int socks[kMaxPeerSockRanks];
  int r = peer_fds_from_env(static_cast<int>(rank), static_cast<int>(size), socks);
  if (r < 0) {
    return r;
  }
  void* base = nullptr;
  size_t bytes = 0;
  r = map_arena(static_cast<int>(fd), &base, &bytes);
  if (r < 0) {
    return r == -EBADF ? -EINVAL : r;
  }
  if (static_cast<long>(arena_header(base)->local_size) != size) {
    munmap(base, bytes);
    return -EINVAL;
  }
  // TRAINIT_COLL_ID (the job id in 16 hex digits), when set, must name this
  // arena: an fd left over from another job or start is refused.
  if (const char* id = std::getenv("TRAINIT_COLL_ID"); id != nullptr && *id != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long want = std::strtoull(id, &end, 16);
    if (errno != 0 || *end != '\0' || want != arena_header(base)->job_id) {
      munmap(base, bytes);
      return -EPROTO;
    }
  }
  r = comm_attach(comm, base, bytes, static_cast<int>(rank));
  if (r < 0) {
    munmap(base, bytes);
    return r;
  }
  if (size <= kMaxPeerSockRanks && (r = keep_peer_socks(*comm, socks)) < 0) {
    trainit_comm_destroy(*comm);
    *comm = nullptr;
    return r;
  }
  // The rank trainit started needed the descriptor across its exec; what it
  // runs from now on (a shell's commands, a daemon) does not get it.
  (void)fcntl(static_cast<int>(fd), F_SETFD, fcntl(static_cast<int>(fd), F_GETFD) | FD_CLOEXEC);
  (*comm)->death_grace_ns = kEnvDeathGrace;  // the init aborts first (waits.cpp)
  return 0;
}

int comm_init_named_host(trainit_comm** comm, const char* name, int rank, int size) {
  if (comm == nullptr) {
    return -EINVAL;
  }
  *comm = nullptr;
  if (name == nullptr || *name == '\0' || size < 1 || size > kMaxRanks || rank < 0 || rank >= size) {
    return -EINVAL;
  }
  const int64_t timeout = env_timeout_ns();
  const int64_t deadline = comm_now_ns() + (timeout > 0 ? timeout : kJoinTimeout);
  void* base = nullptr;
  size_t bytes = 0;
  int socks[kMaxPeerSockRanks];
  for (int& sock : socks) {
    sock = -1;
  }
  int r = 0;
  if (rank == 0) {
    int fd = -1;
    r = create_arena(size, &fd, &base, &bytes);
    if (r < 0) {
      return r;
    }
    if (size > 1) {
      r = serve_arena(name, size, fd, base, deadline, socks);
    }
    close(fd);  // the mappings keep the memory; nothing is left once they go
  } else {
    int fd = -1;
    r = join_arena(name, rank, size, deadline, &fd, socks);
    if (r < 0) {
      return r;
    }
    r = map_arena(fd, &base, &bytes);
    close(fd);
    if (r == 0 && static_cast<int>(arena_header(base)->local_size) != size) {
      munmap(base, bytes);
      base = nullptr;
      r = -EPROTO;
    }
  }
  const int socks_n = size <= kMaxPeerSockRanks ? size : 0;
  if (r < 0) {
    if (base != nullptr) {
      munmap(base, bytes);
    }
    close_socks(socks, socks_n);
    return r;
  }
  r = comm_attach(comm, base, bytes, rank);
  if (r < 0) {
    munmap(base, bytes);
    close_socks(socks, socks_n);
    return r;
  }
  (*comm)->peer_socks_owned = true;
  if (socks_n > 0 && (r = keep_peer_socks(*comm, socks)) < 0) {
    close_socks(socks, socks_n);
    trainit_comm_destroy(*comm);
    *comm = nullptr;
  }
  return r;
}

}  // namespace trainit::coll

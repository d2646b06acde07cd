// The fake device's stream: calls launched run in order on a thread of the
// process's own, each as a block of kThreads host threads running the code
// the GPU's kernel runs (device_algo.h, device_lanes.h, over device_host.h's
// chip); copies, reduces and folds wait for it to drain, as on a device's
// one stream.
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "coll/device_host.h"
#include "coll/kernels.h"
#include "coll/plugins/fakedev/fakedev.h"

namespace trainit::coll::fakedev {
namespace {

struct Stream {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
  static constexpr int kDepth = 16;
  dev::Call calls[kDepth];
  int head = 0;     // the next call to run
  int pending = 0;  // launched, not yet done (the one running included)
  pid_t owner = 0;  // the process whose thread runs it (a fork()ed child starts its own)
};
Stream stream;

// A fork()ed child has no stream thread, though the parent's may have been
// waiting on the condition variable: the child gets a lock and a condition
// variable of its own (glibc's would wait for that waiter, which is not
// there), taken in a consistent state by holding the lock across fork().
void before_fork() {
  pthread_mutex_lock(&stream.lock);
}
void after_fork_in_parent() {
  pthread_mutex_unlock(&stream.lock);
}
void after_fork_in_child() {
  pthread_mutex_init(&stream.lock, nullptr);
  pthread_cond_init(&stream.changed, nullptr);
  stream.owner = 0;
}
[[maybe_unused]] const int fork_handlers = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);

// A block's threads: more than one, so that the tests cross threads as the
// GPU's blocks do; two, since the fake device's ranks often share two cores
// with other tests (one test of the algorithm runs three).
constexpr unsigned kThreads = 2;

// A chip whose folds suffer the device's "wrong" fault, as fd_fold's do
// (thread 0 folds the first element).
class FakedevChip : public dev::HostChip {
 public:
  using HostChip::HostChip;
  int fold(void* dst, void* also, const void* const* srcs, int n, size_t count, size_t first, size_t stride) const {
    const int r = HostChip::fold(dst, also, srcs, n, count, first, stride);
    if (count != 0 && first == 0) {
      corrupt_if_asked(dst);
      if (also != nullptr) {
        corrupt_if_asked(also);
      }
    }
    return r;
  }
};

void* run_stream(void*) {
  pthread_mutex_lock(&stream.lock);
  for (;;) {
    while (stream.pending == 0) {
      pthread_cond_wait(&stream.changed, &stream.lock);
    }
    dev::Call call = stream.calls[stream.head];
    pthread_mutex_unlock(&stream.lock);
    maybe_hang("a launch");
    if (writes_no_done_words()) {
      call.done = nullptr;
    }
    (void)dev::run_on_threads<FakedevChip>(call, kThreads, dev::host_fold(call, kernels_best()));
    if (retires_late()) {
      const timespec late{2, 0};
      nanosleep(&late, nullptr);
    }
    pthread_mutex_lock(&stream.lock);
    stream.head = (stream.head + 1) % Stream::kDepth;
    --stream.pending;
    pthread_cond_broadcast(&stream.changed);
  }
  return nullptr;
}

}  // namespace

// Waits until every launched call is done (copies are ordered after them).
void drain() {
  pthread_mutex_lock(&stream.lock);
  while (stream.owner == getpid() && stream.pending > 0) {
    pthread_cond_wait(&stream.changed, &stream.lock);
  }
  pthread_mutex_unlock(&stream.lock);
}

int launch(const void* call, void*) {
  const auto* a = static_cast<const dev::Call*>(call);
  if (a == nullptr || a->n < 1 || a->n > dev::kMaxRanks || a->blocks < 1 || a->lines < a->blocks ||
      a->lines > dev::kMaxBlocks ||
      (dev::reduces(a->kind) && (dtype_size(a->dtype) == 0 || a->op < 0 || a->op >= kOps))) {
    return -EINVAL;
  }
  if (const int r = check_launch(*a); r < 0) {
    return r;
  }
  pthread_mutex_lock(&stream.lock);
  if (stream.owner != getpid()) {  // none yet in this process
    stream.head = 0;
    stream.pending = 0;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const int r = pthread_create(&thread, &attr, run_stream, nullptr);
    pthread_attr_destroy(&attr);
    if (r != 0) {
      pthread_mutex_unlock(&stream.lock);
      return -r;
    }
    stream.owner = getpid();
  }
  while (stream.pending == Stream::kDepth) {
    pthread_cond_wait(&stream.changed, &stream.lock);
  }
  stream.calls[(stream.head + stream.pending) % Stream::kDepth] = *a;
  ++stream.pending;
  pthread_cond_broadcast(&stream.changed);
  pthread_mutex_unlock(&stream.lock);
  return 0;
}

int query(void*) {
  pthread_mutex_lock(&stream.lock);
  const bool busy = stream.owner == getpid() && stream.pending > 0;
  pthread_mutex_unlock(&stream.lock);
  return busy ? -EINPROGRESS : 0;
}

// Host memory the device sees: one memfd mapped twice, the device's view
// read-write, the host's read-write for its first page only (the abort
// word) and read-only past it, where the device writes (device_algo.h's
// status ring, a 4 KiB page further: with larger pages the ring shares the
// first and is not guarded): a host that writes there faults here, as its
// write could undo the device's over PCIe.
namespace {

struct Mapped {
  void* host;
  void* device;
  size_t bytes;
};
constexpr int kMaxMapped = 256;
Mapped mapped[kMaxMapped];
pthread_mutex_t mapped_lock = PTHREAD_MUTEX_INITIALIZER;

}  // namespace

int host_mapped(size_t bytes, void** host, void** device_view) {
  if (host == nullptr || device_view == nullptr || bytes == 0) {
    return -EINVAL;
  }
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bytes = (bytes + page - 1) / page * page;
  const int fd = memfd_create("trainit-fakedev-words", MFD_CLOEXEC);
  if (fd < 0) {
    return -errno;
  }
  void* dev = MAP_FAILED;
  void* mine = MAP_FAILED;
  int r = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : -errno;
  if (r == 0) {
    dev = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    mine = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    r = dev == MAP_FAILED || mine == MAP_FAILED ? -ENOMEM : 0;
  }
  if (r == 0 && bytes > page && mprotect(static_cast<char*>(mine) + page, bytes - page, PROT_READ) != 0) {
    r = -errno;
  }
  close(fd);
  pthread_mutex_lock(&mapped_lock);
  int at = 0;
  while (r == 0 && at < kMaxMapped && mapped[at].host != nullptr) {
    ++at;
  }
  r = r == 0 && at == kMaxMapped ? -ENOMEM : r;
  if (r == 0) {
    mapped[at] = Mapped{mine, dev, bytes};
  }
  pthread_mutex_unlock(&mapped_lock);
  if (r != 0) {
    if (dev != MAP_FAILED) {
      munmap(dev, bytes);
    }
    if (mine != MAP_FAILED) {
      munmap(mine, bytes);
    }
    return r;
  }
  *host = mine;
  *device_view = dev;
  return 0;
}

int free_host_mapped(void* host) {
  if (host == nullptr) {
    return 0;
  }
  pthread_mutex_lock(&mapped_lock);
  Mapped found{};
  for (Mapped& m : mapped) {
    if (m.host == host) {
      found = m;
      m = Mapped{};
      break;
    }
  }
  pthread_mutex_unlock(&mapped_lock);
  if (found.host == nullptr) {
    return -EINVAL;  // not host_mapped memory
  }
  munmap(found.device, found.bytes);
  munmap(found.host, found.bytes);
  return 0;
}

}  // namespace trainit::coll::fakedev

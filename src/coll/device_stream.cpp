// Stream-ordered device collectives (coll.h): the stream a communicator's
// calls are enqueued on, and the thread that watches its peers while one is
// set — no caller's thread waits in the library then, so none would notice
// a dead peer or the init's stop for the calls in flight.
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "coll/device.h"

namespace trainit::coll {

struct Watcher {
  pthread_t thread;
  void* base;  // the arena
  int n;
  int64_t grace_ns;
  uint32_t* abort_word;
  uint32_t stop;
  int pidfds[kMaxPeerSockRanks];  // -1: none (this rank, or a peer whose pidfd could not be had)
};

namespace {

constexpr int64_t kPeriodNs = 2'000'000;

constexpr int kGone = -2;  // a peer already reaped when the watch began

bool a_peer_exited(const Watcher* w) {
  for (int p = 0; p < w->n; ++p) {
    if (w->pidfds[p] == kGone) {
      return true;
    }
    if (w->pidfds[p] >= 0) {
      pollfd pfd{w->pidfds[p], POLLIN, 0};
      if (poll(&pfd, 1, 0) > 0) {
        return true;
      }
    }
  }
  return false;
}

// Every 2 ms: the arena aborted, or a peer dead for the death grace (then
// the arena is marked aborted for everyone), sets the calls' abort word.
void* watch(void* arg) {
  auto* w = static_cast<Watcher*>(arg);
  int64_t dead_since = 0;
  const timespec period{0, kPeriodNs};
  while (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE) == 0) {
    bool lost = coll_arena_aborted(w->base);
    if (!lost && a_peer_exited(w)) {
      const int64_t now = comm_now_ns();
      dead_since = dead_since == 0 ? now : dead_since;
      if (now - dead_since >= w->grace_ns) {
        coll_arena_abort(w->base, w->n);
        lost = true;
      }
    }
    if (lost) {
      __atomic_store_n(w->abort_word, 1U, __ATOMIC_RELEASE);
    }
    nanosleep(&period, nullptr);
  }
  return nullptr;
}

int start_watching(trainit_comm* c) {
  auto* w = static_cast<Watcher*>(std::calloc(1, sizeof(Watcher)));
  if (w == nullptr) {
    return -ENOMEM;
  }
  w->base = c->base;
  w->n = c->n;
  w->grace_ns = c->death_grace_ns;
  w->abort_word = c->device->words;
  for (int p = 0; p < c->n; ++p) {
    const int32_t pid = arena_slot(c->base, p)->pid.load(std::memory_order_relaxed);
    const long fd = p == c->rank || pid <= 0 ? -1 : syscall(SYS_pidfd_open, pid, 0);
    w->pidfds[p] = fd < 0 && p != c->rank && pid > 0 && errno == ESRCH ? kGone : static_cast<int>(fd);
  }
  const int r = pthread_create(&w->thread, nullptr, watch, w);
  if (r != 0) {
    for (int p = 0; p < c->n; ++p) {
      if (w->pidfds[p] >= 0) {
        close(w->pidfds[p]);
      }
    }
    std::free(w);
    return -r;
  }
  c->device->watcher = w;
  return 0;
}

}  // namespace

void stop_watching(DeviceComm* d) {
  Watcher* w = d->watcher;
  if (w == nullptr) {
    return;
  }
  __atomic_store_n(&w->stop, 1U, __ATOMIC_RELEASE);
  (void)pthread_join(w->thread, nullptr);
  for (int p = 0; p < w->n; ++p) {
    if (w->pidfds[p] >= 0) {
      close(w->pidfds[p]);
    }
  }
  std::free(w);
  d->watcher = nullptr;
}

}  // namespace trainit::coll

using namespace trainit::coll;

extern "C" {

int trainit_comm_set_stream(trainit_comm* comm, void* stream) {
  if (comm == nullptr) {
    return -EINVAL;
  }
  DeviceComm* d = comm->device;
  if (d == nullptr || d->words == nullptr) {
    return -EOPNOTSUPP;
  }
  if (stream == d->stream) {
    return 0;
  }
  // Calls on two streams would race for the same steps: the old one's first.
  int r = drain_calls(comm);
  if (stream == nullptr) {
    stop_watching(d);
  } else if (d->watcher == nullptr && (r = r != 0 ? r : start_watching(comm)) != 0) {
    return r;
  }
  const bool streamed = d->stream != nullptr;
  d->stream = stream;
  const int32_t earlier = take_status(d, r == 0);
  if (earlier != 0 && streamed) {
    (void)stream_failed(comm, earlier);
  }
  return r != 0 ? r : earlier;
}

int trainit_comm_query(trainit_comm* comm) {
  if (comm == nullptr) {
    return -EINVAL;
  }
  DeviceComm* d = comm->device;
  if (d == nullptr || d->words == nullptr || d->stream == nullptr) {
    return 0;  // every call has returned done
  }
  const int r = d->b->query(d->stream);
  if (r == -EINPROGRESS) {
    return r;
  }
  const int32_t status = take_status(d, r == 0);
  if (status != 0 && d->stream != nullptr) {
    return stream_failed(comm, status);
  }
  return status != 0 ? status : r;
}

}  // extern "C"

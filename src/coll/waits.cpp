// Waiting on peers: a step's publish and wait (poll, yield, futex), how a
// rank polls for where the ranks run, and a peer's death.
//
// Peer death: trainit's init marks the arena aborted when a rank exits. A
// standalone communicator has no such watcher, so every rank watches the
// others itself: a rank that has slept one slice (10 ms) on a futex checks
// each peer's pidfd (pidfd_open of the pid in the peer's slot; kill(pid, 0) on
// kernels before 5.3, which cannot see a dead but unreaped peer) and, if one
// is gone without having published the step being waited for, marks the
// arena aborted and wakes every waiter. So a death is seen within about one
// slice by every rank, whichever rank it waited on. A rank that exits after
// its last call aborts nothing: its peers have what they need from it.
//
// Under trainit (an arena from the environment) the init does that: it reaps
// the dead rank, records its exit status as the job's, then aborts the
// arena. A rank that aborted first would exit first and could be taken for
// the failing one, so there the ranks' own check waits kEnvDeathGrace (1 s)
// before acting: a fallback, should nobody abort.
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "coll/comm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace trainit::coll {
namespace {

constexpr int64_t kSleepSlice = 10'000'000;  // futex slice; peer liveness is checked after each
// Polls of a step's wait: kSpin (about 0.5 ms) while every rank has a core
// of its own, then a futex sleep; kOversubscribedSpin when they share cores,
// where the peer a rank waits for most often needs this very core, then
// kOversubscribedYields sched_yield()s, then a sleep. 4 ranks on 2 cores
// took 13.2 µs a 4-byte allreduce with 64 polls, 8.3 with 16, 6.9 with 1.
constexpr int kSpin = 20000;
constexpr int kOversubscribedSpin = 1;
constexpr int kOversubscribedYields = 200;

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

int online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// Writes the CPUs this rank may run on into its slot (before its first step).
void publish_cpus(trainit_comm* c) {
  ArenaSlot* slot = arena_slot(c->base, c->rank);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    CPU_ZERO(&set);
    for (int cpu = 0; cpu < online_cpus() && cpu < CPU_SETSIZE; ++cpu) {
      CPU_SET(cpu, &set);
    }
  }
  uint64_t words[kSlotCpus / 64] = {};
  uint32_t beyond = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) {
      if (cpu < kSlotCpus) {
        words[cpu / 64] |= uint64_t{1} << (cpu % 64);
      } else {
        ++beyond;
      }
    }
  }
  for (int w = 0; w < kSlotCpus / 64; ++w) {
    slot->cpus[w].store(words[w], std::memory_order_relaxed);
  }
  slot->cpus_beyond.store(beyond, std::memory_order_relaxed);
  slot->cpu.store(sched_getcpu(), std::memory_order_relaxed);
}

// How a rank waits: poll long when every rank can have a core of its own
// (as MPI libraries do), never yielding: on a loaded machine a yield hands
// the core to another program for a whole time slice (2-rank 64 B calls
// took 209 µs at the 90th percentile that way, 0.25 without), and the peer runs elsewhere
// anyway. When the ranks outnumber the cores they may run on, a poller
// steals the time slice of the peer it waits for: poll once, then yield
// the core, then sleep.
void set_waiting(trainit_comm* c, bool oversubscribed) {
  c->oversubscribed = oversubscribed;
  c->spin_max = oversubscribed ? kOversubscribedSpin : kSpin;
  c->yield_iters = oversubscribed ? kOversubscribedYields : 0;
}

// Once every rank has published a step (so every slot holds its CPUs):
// whether the ranks outnumber the CPUs they may run on, all together. A
// rank's own affinity says nothing of that: ranks pinned one to a core each
// (taskset, a launcher's binding) see one CPU apiece.
void judge_placement(trainit_comm* c) {
  uint64_t any[kSlotCpus / 64] = {};
  uint64_t beyond = 0;
  for (int p = 0; p < c->n; ++p) {
    const ArenaSlot* slot = arena_slot(c->base, p);
    for (int w = 0; w < kSlotCpus / 64; ++w) {
      any[w] |= slot->cpus[w].load(std::memory_order_relaxed);
    }
    // CPUs past kSlotCpus are counted as if no two ranks shared one.
    beyond += slot->cpus_beyond.load(std::memory_order_relaxed);
  }
  uint64_t cpus = beyond;
  for (uint64_t word : any) {
    cpus += static_cast<uint64_t>(__builtin_popcountll(word));
  }
  set_waiting(c, static_cast<uint64_t>(c->n) > (cpus == 0 ? 1 : cpus));
  c->placement_known = true;
}

bool seq_reached(uint32_t seen, uint32_t s) {
  return static_cast<int32_t>(seen - s) >= 0;
}

// Whether rank p's process is gone (never for a peer not yet known).
bool peer_dead(trainit_comm* c, int p) {
  const int32_t pid = arena_slot(c->base, p)->pid.load(std::memory_order_relaxed);
  if (pid <= 0) {
    return false;
  }
  if (c->pidfds[p] == -1) {
    const long fd = syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
      c->pidfds[p] = static_cast<int>(fd);
    } else if (errno == ESRCH) {
      return true;
    } else {
      c->pidfds[p] = -2;
    }
  }
  if (c->pidfds[p] >= 0) {
    pollfd pfd{c->pidfds[p], POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;
  }
  return kill(pid, 0) == -1 && errno == ESRCH;
}

// Whether a peer died before publishing step s: it never will. (A peer that
// published s and then exited, its last call done, harms nobody's step s.)
bool a_peer_died_before(trainit_comm* c, uint32_t s) {
  for (int p = 0; p < c->n; ++p) {
    if (p != c->rank && peer_dead(c, p) &&
        !seq_reached(arena_line(c->base, p, s)->seq.load(std::memory_order_acquire), s)) {
      return true;
    }
  }
  return false;
}

}  // namespace

void comm_init_waiting(trainit_comm* c) {
  // Until every rank's CPUs are known (the first step): this rank's own.
  cpu_set_t own;
  set_waiting(c, c->n > (sched_getaffinity(0, sizeof(own), &own) == 0 ? CPU_COUNT(&own) : online_cpus()));
  publish_cpus(c);
}

void comm_publish(trainit_comm* c, uint32_t s) {
  SeqLine* l = arena_line(c->base, c->rank, s);
  // Both seq_cst, as the waiter's fetch_add on the sleepers count and its
  // load of seq (Dekker): either it sees s before sleeping, or this sees it
  // asleep and wakes it.
  l->seq.store(s, std::memory_order_seq_cst);
  if (arena_sleepers(c->base)->count.load(std::memory_order_seq_cst) != 0) {
    coll_futex_wake(&l->seq);
  }
}

namespace {

// The first rank at or after p, other than this one, that has not published
// step s: c->n when every one has.
int next_unpublished(trainit_comm* c, uint32_t s, int p) {
  for (; p < c->n; ++p) {
    if (p != c->rank && !seq_reached(arena_line(c->base, p, s)->seq.load(std::memory_order_acquire), s)) {
      return p;
    }
  }
  return p;
}

// Sleeps on peer's line until it publishes step s (in slices: peer death
// and the deadline are checked after each): 0 or a negative errno.
int sleep_until_published(trainit_comm* c, int peer, uint32_t s, int64_t deadline_ns) {
  SeqLine* l = arena_line(c->base, peer, s);
  ArenaAbort* abort_word = arena_abort_word(c->base);
  std::atomic<uint32_t>& sleepers = arena_sleepers(c->base)->count;
  int64_t last_check = comm_now_ns();
  for (;;) {
    if (abort_word->aborted.load(std::memory_order_acquire) != 0) {
      return -ECONNABORTED;
    }
    const int64_t now = comm_now_ns();
    int64_t slice = kSleepSlice;
    if (deadline_ns != 0) {
      if (now >= deadline_ns) {
        coll_arena_abort(c->base, c->n);
        return -ETIMEDOUT;
      }
      slice = deadline_ns - now < slice ? deadline_ns - now : slice;
    }
    if (now - last_check >= kSleepSlice) {
      last_check = now;
      if (a_peer_died_before(c, s)) {
        if (c->peer_dead_since == 0) {
          c->peer_dead_since = now;
        }
        if (now - c->peer_dead_since >= c->death_grace_ns) {
          coll_arena_abort(c->base, c->n);
          return -ECONNABORTED;
        }
      }
    }
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = l->seq.load(std::memory_order_seq_cst);
    if (!seq_reached(seen, s)) {
      (void)coll_futex_wait(&l->seq, seen, slice);
    }
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (seq_reached(l->seq.load(std::memory_order_acquire), s)) {
      return 0;
    }
  }
}

int wait_for_peers(trainit_comm* c, uint32_t s, int64_t deadline_ns) {
  int p = next_unpublished(c, s, 0);
  if (p == c->n) {
    return 0;
  }
  ArenaAbort* abort_word = arena_abort_word(c->base);
  // Ranks with a core each can still land on one CPU together, unpinned on
  // a busy machine: a rank polling there keeps the peer it waits for off
  // the core (a 1 MiB call took 2 ms so, 114 µs yielding). Each rank says
  // where it waits, and a poller whose awaited peer last waited on this very
  // CPU yields to it, every 64 polls.
  // (Ranks that outnumber their cores yield after one poll anyway.)
  const int cpu = c->oversubscribed ? -1 : sched_getcpu();
  if (cpu >= 0) {
    arena_slot(c->base, c->rank)->cpu.store(cpu, std::memory_order_relaxed);
  }
  bool yielded = false;
  // One budget for the whole step, whichever peers it waits for (spent peer
  // by peer, 4 ranks on 2 cores polled three times as long before yielding
  // the core to the peer that shares it). A fixed one: the adaptive budget
  // this replaces (halved after every wait that outlasted it) trapped a pair
  // of ranks whose steps differ by more than its floor (a 1 MiB call's
  // chunks) at that floor for good, every wait then ending on the futex.
  for (int i = 0; i < c->spin_max; ++i) {
    cpu_relax();
    p = next_unpublished(c, s, p);
    if (p == c->n) {
      ++(yielded ? c->waits_yielded : c->waits_spun);
      return 0;
    }
    if ((i & 63) == 0) {
      if (abort_word->aborted.load(std::memory_order_relaxed) != 0) {
        return -ECONNABORTED;
      }
      if (cpu >= 0 && arena_slot(c->base, p)->cpu.load(std::memory_order_relaxed) == cpu) {
        sched_yield();
        yielded = true;
      }
    }
  }
  for (int i = 0; i < c->yield_iters; ++i) {
    sched_yield();
    p = next_unpublished(c, s, p);
    if (p == c->n) {
      ++c->waits_yielded;
      return 0;
    }
    if (abort_word->aborted.load(std::memory_order_relaxed) != 0) {
      return -ECONNABORTED;
    }
  }
  for (; p < c->n; p = next_unpublished(c, s, p)) {
    const int r = sleep_until_published(c, p, s, deadline_ns);
    if (r < 0) {
      return r;
    }
  }
  ++c->waits_slept;
  return 0;
}

}  // namespace

bool comm_lost(trainit_comm* c) {
  if (coll_arena_aborted(c->base)) {
    return true;
  }
  for (int p = 0; p < c->n; ++p) {
    if (p != c->rank && peer_dead(c, p)) {
      const int64_t now = comm_now_ns();
      if (c->peer_dead_since == 0) {
        c->peer_dead_since = now;
      }
      if (now - c->peer_dead_since >= c->death_grace_ns) {
        coll_arena_abort(c->base, c->n);
        return true;
      }
      return false;
    }
  }
  return false;
}

int comm_wait_all(trainit_comm* c, uint32_t s, int64_t deadline_ns) {
  const int r = wait_for_peers(c, s, deadline_ns);
  if (r == 0 && !c->placement_known) {
    judge_placement(c);
  }
  return r;
}

}  // namespace trainit::coll

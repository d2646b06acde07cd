// The communicator's private state and the step primitives the collectives'
// protocol (protocol.h) is built from; one thread per rank calls them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "coll/arena.h"
#include "coll/kernels.h"

namespace trainit::coll {
struct DeviceComm;
struct DeviceCall;
}  // namespace trainit::coll

struct trainit_comm {
  unsigned char* base;  // the arena, mapped shared
  size_t size;
  int rank;
  int n;
  uint32_t seq;                   // the last step this rank published
  int64_t timeout_ns;             // TRAINIT_COLL_TIMEOUT, 0: none
  int spin_max;                   // polls before yielding or sleeping (one when ranks outnumber cores)
  bool placement_known;           // spin_max and yield_iters judged from every rank's CPUs
  bool oversubscribed;            // the ranks outnumber the CPUs they may run on (as judged)
  bool stream_handover;           // hand_over() with streaming stores (protocol.h)
  int handover_forced;            // -1: chosen by measurement (choose_handover), 0 plain, 1 streaming (bench)
  uint64_t handover_calls;        // chunked calls so far
  uint64_t handover_untried;      // chunked calls since the dearer way was last tried
  double handover_ns_per_kib[2];  // a moving average of each way's chunked calls (plain, streaming), 0: none yet
  int yield_iters;                // sched_yield()s before sleeping on the futex (none when they do not)
  int* pidfds;                    // per rank: a pidfd of that peer, -1 none yet, -2 use kill(pid, 0)
  const void** ins;               // per rank: a fold's inputs, past kFoldOnStack ranks (protocol.h)
  const trainit::coll::Kernels* kernels;
  unsigned char* heap;  // this rank's share of the arena heap
  size_t heap_bytes;
  unsigned char* heap_all;  // the whole heap: pointers in it are read in place
  size_t heap_all_bytes;
  uint64_t zero_copy_calls;  // large calls that read peers' buffers in place (tests)
  // How each step's wait for peers that had not all published ended (tests, bench):
  uint64_t waits_spun;      // while polling
  uint64_t waits_yielded;   // between sched_yield()s
  uint64_t waits_slept;     // after sleeping on the futex at least once
  int64_t death_grace_ns;   // how long a dead peer goes unanswered before this rank aborts
  int64_t peer_dead_since;  // when this rank first saw a peer dead (0: never)
  // Per rank, a SOCK_SEQPACKET socket to that peer for swapping device
  // handles (-1 at this rank's own index); nullptr when none came.
  int* peer_socks;
  // Whether they are this communicator's to close: a standalone one's are;
  // those from trainit (TRAINIT_COLL_PEER_FDS) are the process's, lent to
  // each communicator made from the environment in turn.
  bool peer_socks_owned;
  // A device communicator's state and its collectives (device.cpp), reached
  // only through these pointers: a program that never makes one (PID 1)
  // links no backend loader.
  trainit::coll::DeviceComm* device;
  int (*device_call)(trainit_comm* c, const trainit::coll::DeviceCall& call);
  void (*device_destroy)(trainit_comm* c);
};

namespace trainit::coll {

// Builds a communicator over a mapped, formatted arena (takes the mapping):
// 0 or a negative errno.
int comm_attach(trainit_comm** out, void* base, size_t size, int rank);

// Waits until every peer has published step s: 0, -ECONNABORTED (aborted,
// or a peer died: then the arena is marked aborted for everyone) or
// -ETIMEDOUT (the deadline passed: the arena is marked aborted too, as the
// ranks are no longer in step). Polls, then yields, then sleeps on the
// futex of the first peer still missing.
int comm_wait_all(trainit_comm* c, uint32_t s, int64_t deadline_ns);

// How c waits, from the CPUs it may run on (until its first step shows
// every rank's), and those CPUs in its slot for its peers (waits.cpp).
void comm_init_waiting(trainit_comm* c);

// Whether c's calls cannot go on: its arena is aborted, or a peer has been
// dead for the death grace (then this marks the arena aborted). For waits
// that comm_wait_all does not make (a device's).
bool comm_lost(trainit_comm* c);

// Publishes step s (its line's data written before): release, then wakes
// sleepers if any.
void comm_publish(trainit_comm* c, uint32_t s);

int64_t comm_now_ns();

// The arena's barrier, whatever c's backend (trainit_barrier on a device
// communicator is one of its device calls): what the device set-up and
// tear-down meet at, with no device call in flight.
int host_barrier(trainit_comm* c);

// host_barrier that also fails (-EINVAL, on every rank) where any rank's ok
// is false or its value (below 2^40) differs from another's.
int host_agree(trainit_comm* c, uint64_t value, bool ok);

// Communicators of host memory (the "host" backend), before device.cpp
// chooses a backend: trainit_comm_init_from_env() and trainit_comm_init()
// without TRAINIT_COLL_BACKEND. PID 1's preflight calls these, so that the
// variable in its environment never makes it load a plugin.
int comm_init_from_env_host(trainit_comm** comm);
int comm_init_named_host(trainit_comm** comm, const char* name, int rank, int size);

// The standalone rendezvous (rendezvous.cpp), each by `deadline` (ns, as
// comm_now_ns()): rank 0 serves the arena `arena_fd` (mapped at `base`),
// and with a mesh each rank's sockets to its peers, to size - 1 ranks of
// this user, keeping its own row in own_socks (size entries); another rank
// joins `name`, getting the arena's fd and its sockets (size entries, -1
// where none). 0 or a negative errno.
int serve_arena(const char* name, int size, int arena_fd, void* base, int64_t deadline, int* own_socks);
int join_arena(const char* name, int rank, int size, int64_t deadline, int* arena_fd, int* socks);

// Forgets c's sockets to its peers, closing those it owns.
void comm_drop_peer_socks(trainit_comm* c);

// Ranks up to this many get a socket to each peer (n(n-1)/2 pairs): from
// trainit (TRAINIT_COLL_PEER_FDS) or from rank 0 of a standalone
// communicator. Device communicators need them.
inline constexpr int kMaxPeerSockRanks = 16;

// One device collective's arguments (device.cpp).
struct DeviceCall {
  CollOp kind;
  const void* send;
  void* recv;
  size_t count;  // allreduce, reduce, broadcast: all; reduce_scatter: recvcount; allgather: sendcount
  int dtype;
  int op;
  int root;
};

}  // namespace trainit::coll

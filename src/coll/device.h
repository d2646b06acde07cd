// A device communicator's state (device.cpp makes it, device_call.cpp runs
// its calls).
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/backend.h"
#include "coll/comm.h"

namespace trainit::coll {

// A registered window (trainit_comm_register): one buffer of every rank's,
// mapped by every peer until it is deregistered.
inline constexpr int kMaxWindows = 16;
struct DeviceWindow {
  unsigned char* base;                      // this rank's buffer (nullptr: the slot is free)
  uint64_t bytes;                           // every rank's alike
  unsigned char* peers[kMaxPeerSockRanks];  // every rank's, as this rank maps it; its own at [rank]
};

struct DeviceComm {
  const trainit_coll_backend* b;
  unsigned char* staging;                   // this rank's (device_algo.h's layout)
  uint64_t quarter;                         // bytes of each of its in and out quarters
  unsigned char* peers[kMaxPeerSockRanks];  // every rank's staging; this rank's own at [rank]
  // Backends that launch (backend.h, ABI 4: all four entries): the abort
  // word at [0] and the status ring (device_algo.h), host memory the device
  // sees at words_device; nullptr for a backend the host drives.
  uint32_t* words;
  void* words_device;
  uint64_t launched;                  // the tag of the last call launched (0: none yet)
  uint64_t reported;                  // every error of the calls tagged up to it is reported
  int blocks;                         // the step lines and regions: the same on every rank of a backend
  uint64_t block_bytes;               // a call runs on a block per this many bytes (dev::blocks_for; 0: on all)
  uint64_t one_shot_max;              // allreduce and reduce pieces larger go two-shot
  void* stream;                       // trainit_comm_set_stream's: calls enqueue there and return (nullptr: none)
  struct Watcher* watcher;            // while a stream is set (device_stream.cpp)
  DeviceWindow windows[kMaxWindows];  // the same slots on every rank
};

// What a peer socket's error means to the caller (device.cpp): a peer that
// went away is a peer that died (-ECONNABORTED), a timeout -ETIMEDOUT.
int transport_error(int r);

// Waits until the work this process has issued on b's device is done
// (signal, then wait): 0 or a negative errno.
int device_sync(const trainit_coll_backend* b);

// Runs one collective on c's device: 0 or a negative errno.
int device_call(trainit_comm* c, const DeviceCall& q);

// Meets the peers where their device calls meet, every call in flight
// done: a barrier whose root says why, so that one rank's meeting against
// a peer's collective, barrier or other meeting is -EINVAL on both, as a
// barrier against an allreduce is. 0 or a negative errno.
enum Meeting { kMeetRegister = 1, kMeetDeregister = 2, kMeetDestroy = 3 };
int device_meet(trainit_comm* c, Meeting why);

// The first error of a launched call not reported yet (0: none), once;
// `done`: every call launched has ended, so none can fail any more.
int32_t take_status(DeviceComm* d, bool done);

// A stream-ordered call's error, seen: the arena is aborted; err.
int stream_failed(trainit_comm* c, int err);

// Waits for every call enqueued on d's stream, telling them through the
// abort word when c cannot go on: 0 or the stream's error.
int drain_calls(trainit_comm* c);

// Stops d's watcher, if any (device_stream.cpp).
void stop_watching(DeviceComm* d);

// The registered window holding [p, p + bytes) (device_window.cpp): its
// slot, and p's offset in it; -1 when none does.
int window_of(const DeviceComm* d, const void* p, uint64_t bytes, uint64_t* offset);

// Closes this rank's imports of its peers' windows (the communicator's end).
void close_windows(DeviceComm* d, int n, int rank);

}  // namespace trainit::coll

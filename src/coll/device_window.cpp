// Registered windows (trainit_comm_register): a buffer of every rank's that
// every peer maps until it is deregistered, so that a large allreduce in
// place on it reads and writes the ranks' buffers where they lie (the zero
// copy of device_algo.h) instead of passing every byte through staging.
//
// Both calls are collective, made by every rank in the same order, so that
// a window has the same slot on every rank (the ranks compare it).
// Registering swaps handles over the peer sockets, as the staging's exchange
// at init does, and then the ranks agree that each mapped every peer's: one
// that failed makes every rank fail, with nothing kept. Deregistering waits
// for the calls in flight; then every rank is done with its peers' buffers
// before any import closes, and every import is closed before any rank
// returns (and its caller frees the buffer).
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "coll/arena.h"
#include "coll/backend.h"
#include "coll/comm.h"
#include "coll/device.h"
#include "coll/device_algo.h"

namespace trainit::coll {
namespace {

void close_window(DeviceComm* d, DeviceWindow& w, int n, int rank) {
  for (int p = 0; p < n; ++p) {
    if (p != rank && w.peers[p] != nullptr) {
      (void)d->b->close_import(w.peers[p]);
    }
  }
  w = DeviceWindow{};
}

int free_slot(const DeviceComm* d) {
  for (int k = 0; k < kMaxWindows; ++k) {
    if (d->windows[k].base == nullptr) {
      return k;
    }
  }
  return -1;
}

int slot_of(const DeviceComm* d, const void* base) {
  for (int k = 0; k < kMaxWindows; ++k) {
    if (base != nullptr && d->windows[k].base == base) {
      return k;
    }
  }
  return -1;
}

// What the ranks compare of a slot (0: none).
uint64_t slot_value(int slot) {
  return slot < 0 ? 0 : static_cast<uint64_t>(slot) + 1;
}

// Whether this backend can export buf (bytes of it): what the exchange
// would do first, tried before any peer waits on it.
bool exportable(const trainit_coll_backend* b, void* buf, size_t bytes) {
  unsigned char handle[TRAINIT_COLL_HANDLE_MAX];
  size_t len = sizeof handle;
  int fd = -1;
  const int r = b->export_handle(buf, bytes, handle, &len, &fd);
  if (fd >= 0) {
    close(fd);
  }
  return r == 0;
}

// The communicator's device state where it has windows (a backend that
// launches), else nullptr and *err.
DeviceComm* windowed(trainit_comm* comm, int* err) {
  if (comm == nullptr) {
    *err = -EINVAL;
    return nullptr;
  }
  DeviceComm* d = comm->device;
  if (d == nullptr || d->words == nullptr) {
    *err = -EOPNOTSUPP;
    return nullptr;
  }
  if (coll_arena_aborted(comm->base)) {
    *err = -ECONNABORTED;
    return nullptr;
  }
  return d;
}

}  // namespace

int window_of(const DeviceComm* d, const void* p, uint64_t bytes, uint64_t* offset) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (int k = 0; k < kMaxWindows; ++k) {
    const DeviceWindow& w = d->windows[k];
    const auto base = reinterpret_cast<uintptr_t>(w.base);
    if (w.base != nullptr && at >= base && bytes <= w.bytes && at - base <= w.bytes - bytes) {
      *offset = at - base;
      return k;
    }
  }
  return -1;
}

void close_windows(DeviceComm* d, int n, int rank) {
  for (DeviceWindow& w : d->windows) {
    if (w.base != nullptr) {
      close_window(d, w, n, rank);
    }
  }
}

}  // namespace trainit::coll

using namespace trainit::coll;

extern "C" {

int trainit_comm_register(trainit_comm* comm, void* buf, size_t bytes) {
  int r = 0;
  DeviceComm* d = windowed(comm, &r);
  if (d == nullptr) {
    return r;
  }
  const int slot = free_slot(d);
  uint64_t offset = 0;
  const bool ok = buf != nullptr && bytes != 0 && bytes < (uint64_t{1} << dev::kWhereOffsetBits) && slot >= 0 &&
                  window_of(d, buf, 1, &offset) < 0 && exportable(d->b, buf, bytes);
  const uint64_t value = slot_value(slot);
  if ((r = device_meet(comm, kMeetRegister)) != 0 || (r = host_agree(comm, value, ok)) != 0) {
    return r;
  }
  DeviceWindow& w = d->windows[slot];
  void* peers[kMaxPeerSockRanks] = {};
  bool in_step = true;
  if (comm->n > 1) {
    r = coll_backend_exchange(d->b, comm->peer_socks, buf, bytes, comm->n, comm->rank, peers, &in_step);
  }
  for (int p = 0; p < comm->n; ++p) {
    w.peers[p] = p == comm->rank ? static_cast<unsigned char*>(buf) : static_cast<unsigned char*>(peers[p]);
  }
  if (!in_step) {
    // A handle may still wait on a socket, for a later exchange to take as
    // its own: the peer sockets, and so the communicator, are done for.
    coll_arena_abort(comm->base, comm->n);
    close_window(d, w, comm->n, comm->rank);
    return transport_error(r);
  }
  const int agreed = host_agree(comm, value, r == 0);
  if (r != 0 || agreed != 0) {
    // Nobody keeps it; every rank has its imports closed before any returns.
    close_window(d, w, comm->n, comm->rank);
    (void)host_barrier(comm);
    return r != 0 ? r : agreed;
  }
  w.base = static_cast<unsigned char*>(buf);
  w.bytes = bytes;
  return 0;
}

int trainit_comm_deregister(trainit_comm* comm, void* buf) {
  int r = 0;
  DeviceComm* d = windowed(comm, &r);
  if (d == nullptr) {
    return r;
  }
  // Calls in flight may read any rank's window: every rank's are done
  // before the agreement ends.
  const int slot = slot_of(d, buf);
  if ((r = device_meet(comm, kMeetDeregister)) != 0 || (r = host_agree(comm, slot_value(slot), slot >= 0)) != 0) {
    return r;
  }
  close_window(d, d->windows[slot], comm->n, comm->rank);
  return host_barrier(comm);
}

}  // extern "C"

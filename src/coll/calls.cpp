// The communicator's small calls of the C API (trainit/coll.h): its rank
// and size, destroying it, trainit_alloc and trainit_free over the arena's
// heap, trainit_strerror.
#include <sys/mman.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "coll/arena.h"
#include "coll/comm.h"

extern "C" {

int trainit_comm_rank(const trainit_comm* comm) {
  return comm == nullptr ? -EINVAL : comm->rank;
}

int trainit_comm_size(const trainit_comm* comm) {
  return comm == nullptr ? -EINVAL : comm->n;
}

int trainit_comm_destroy(trainit_comm* comm) {
  if (comm == nullptr) {
    return 0;
  }
  if (comm->device_destroy != nullptr) {
    comm->device_destroy(comm);  // while the arena's barrier still works
  }
  trainit::coll::comm_drop_peer_socks(comm);
  for (int p = 0; p < comm->n; ++p) {
    if (comm->pidfds[p] >= 0) {
      close(comm->pidfds[p]);
    }
  }
  const int r = munmap(comm->base, comm->size) == 0 ? 0 : -errno;
  std::free(comm->pidfds);
  std::free(static_cast<void*>(comm->ins));
  std::free(comm);
  return r;
}

// trainit_alloc: each rank carves its own share of the arena heap (only its
// thread touches the block headers), first fit with 64-byte headers and
// coalescing on free. Peers read such buffers in place (protocol.h).
namespace {

struct Block {
  uint64_t size;  // payload bytes, a multiple of 64
  uint64_t used;
  unsigned char pad[48];
};
static_assert(sizeof(Block) == trainit::coll::kLineBytes);

}  // namespace

void* trainit_alloc(trainit_comm* comm, size_t bytes) {
  if (comm == nullptr || bytes == 0 || comm->heap_bytes < 2 * sizeof(Block) ||
      bytes > comm->heap_bytes - sizeof(Block)) {
    return nullptr;
  }
  const uint64_t need = (bytes + 63) / 64 * 64;
  auto* first = reinterpret_cast<Block*>(comm->heap);
  if (first->size == 0) {
    first->size = comm->heap_bytes - sizeof(Block);
    first->used = 0;
  }
  unsigned char* p = comm->heap;
  unsigned char* end = comm->heap + comm->heap_bytes;
  while (p < end) {
    auto* b = reinterpret_cast<Block*>(p);
    if (b->used == 0 && b->size >= need) {
      if (b->size - need >= 2 * sizeof(Block)) {
        auto* rest = reinterpret_cast<Block*>(p + sizeof(Block) + need);
        rest->size = b->size - need - sizeof(Block);
        rest->used = 0;
        b->size = need;
      }
      b->used = 1;
      return p + sizeof(Block);
    }
    p += sizeof(Block) + b->size;
  }
  return nullptr;
}

void trainit_free(trainit_comm* comm, void* ptr) {
  if (comm == nullptr || ptr == nullptr) {
    return;
  }
  auto* at = static_cast<unsigned char*>(ptr);
  if (at < comm->heap + sizeof(Block) || at >= comm->heap + comm->heap_bytes) {
    return;
  }
  unsigned char* end = comm->heap + comm->heap_bytes;
  for (unsigned char* p = comm->heap; p < end;) {
    auto* b = reinterpret_cast<Block*>(p);
    if (p + sizeof(Block) == at) {
      b->used = 0;
      break;
    }
    p += sizeof(Block) + b->size;
  }
  // Merge every run of free blocks.
  for (unsigned char* p = comm->heap; p < end;) {
    auto* b = reinterpret_cast<Block*>(p);
    unsigned char* next = p + sizeof(Block) + b->size;
    if (b->used == 0 && next < end && reinterpret_cast<Block*>(next)->used == 0) {
      b->size += sizeof(Block) + reinterpret_cast<Block*>(next)->size;
      continue;
    }
    p = next;
  }
}

const char* trainit_strerror(int err) {
  switch (err) {
    case 0:
      return "success";
    case -EINVAL:
      return "invalid argument (a null pointer, a bad count, dtype, op or root, or ranks that disagree on the call)";
    case -ECONNABORTED:
      return "collective aborted: a peer rank died or the job is stopping";
    case -ETIMEDOUT:
      return "collective timed out (TRAINIT_COLL_TIMEOUT)";
    case -EPROTO:
      return "not a trainit collective arena (or another version of it)";
    case -EADDRINUSE:
      return "another communicator of this name is being set up";
    case -ENOMEM:
      return "out of memory";
    default:
      return err < 0 ? strerror(-err) : "unknown error";
  }
}

}  // extern "C"

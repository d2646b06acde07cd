#include "coll/arena.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

namespace trainit::coll {
namespace {

constexpr uint64_t kPage = 4096;

constexpr uint64_t round_up(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

const ArenaHeader* header(const void* base) {
  return static_cast<const ArenaHeader*>(base);
}

}  // namespace

ArenaLayout coll_arena_layout(int local_size) {
  ArenaLayout l{};
  const auto n = static_cast<uint64_t>(local_size);
  l.abort_off = round_up(sizeof(ArenaHeader), kLineBytes);
  l.sleepers_off = l.abort_off + kLineBytes;
  l.slots_off = l.sleepers_off + kLineBytes;
  l.lines_off = l.slots_off + n * sizeof(ArenaSlot);
  // Staging starts on a page: the pipeline's chunks stream through it.
  l.staging_off = round_up(l.lines_off + n * 2 * sizeof(SeqLine), kPage);
  l.staging_stride = 2 * kStagingHalfBytes;
  l.heap_off = l.staging_off + n * l.staging_stride;
  l.min_size = l.heap_off;
  return l;
}

size_t coll_arena_size(int local_size, size_t heap_bytes) {
  if (local_size < 1 || local_size > kMaxRanks) {
    return 0;
  }
  const ArenaLayout l = coll_arena_layout(local_size);
  // Each rank's share of the heap is a whole number of pages.
  const uint64_t share = round_up((heap_bytes + local_size - 1) / local_size, kPage);
  if (share > (UINT64_MAX - l.min_size) / static_cast<uint64_t>(local_size)) {
    return 0;
  }
  return l.min_size + share * static_cast<uint64_t>(local_size);
}

int coll_arena_format(void* base, size_t size, int local_size, uint64_t job_id) {
  if (base == nullptr || local_size < 1 || local_size > kMaxRanks || size < coll_arena_size(local_size, 0)) {
    return -EINVAL;
  }
  const ArenaLayout l = coll_arena_layout(local_size);
  auto* h = arena_header(base);
  h->version = kArenaVersion;
  h->local_size = static_cast<uint32_t>(local_size);
  h->size = size;
  h->job_id = job_id;
  h->chunk_bytes = kChunkBytes;
  h->slots_off = l.slots_off;
  h->lines_off = l.lines_off;
  h->staging_off = l.staging_off;
  h->staging_stride = l.staging_stride;
  h->heap_off = l.heap_off;
  const uint64_t share = (size - l.heap_off) / static_cast<uint64_t>(local_size) / kPage * kPage;
  h->heap_bytes = share * static_cast<uint64_t>(local_size);
  for (int r = 0; r < local_size; ++r) {
    ArenaSlot* slot = arena_slot(base, r);
    slot->pid.store(0, std::memory_order_relaxed);
    slot->op.store(kOpNone, std::memory_order_relaxed);
    slot->progress.store(0, std::memory_order_relaxed);
    slot->start_ns.store(0, std::memory_order_relaxed);
  }
  arena_abort_word(base)->aborted.store(0, std::memory_order_relaxed);
  arena_sleepers(base)->count.store(0, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(h->magic).store(kArenaMagic, std::memory_order_release);
  return 0;
}

int coll_arena_check(const void* base, size_t size) {
  if (base == nullptr || size < sizeof(ArenaHeader)) {
    return -EINVAL;
  }
  const ArenaHeader* h = header(base);
  const uint64_t magic = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(h->magic)).load(std::memory_order_acquire);
  if (magic != kArenaMagic || h->version != kArenaVersion) {
    return -EPROTO;
  }
  if (h->size != size || h->local_size < 1 || h->local_size > kMaxRanks ||
      coll_arena_size(static_cast<int>(h->local_size), 0) > size) {
    return -EINVAL;
  }
  const ArenaLayout l = coll_arena_layout(static_cast<int>(h->local_size));
  if (h->chunk_bytes != kChunkBytes || h->slots_off != l.slots_off || h->lines_off != l.lines_off ||
      h->staging_off != l.staging_off || h->staging_stride != l.staging_stride || h->heap_off != l.heap_off ||
      h->heap_bytes > size - h->heap_off) {
    return -EPROTO;
  }
  return 0;
}

ArenaAbort* arena_abort_word(void* base) {
  return reinterpret_cast<ArenaAbort*>(static_cast<unsigned char*>(base) + coll_arena_layout(0).abort_off);
}

ArenaSleepers* arena_sleepers(void* base) {
  return reinterpret_cast<ArenaSleepers*>(static_cast<unsigned char*>(base) + coll_arena_layout(0).sleepers_off);
}

ArenaSlot* arena_slot(void* base, int rank) {
  return reinterpret_cast<ArenaSlot*>(static_cast<unsigned char*>(base) + coll_arena_layout(0).slots_off) + rank;
}

SeqLine* arena_line(void* base, int rank, uint32_t seq) {
  const ArenaHeader* h = arena_header(base);
  return reinterpret_cast<SeqLine*>(static_cast<unsigned char*>(base) + h->lines_off) +
         2 * static_cast<ptrdiff_t>(rank) + (seq & 1U);
}

unsigned char* arena_staging(void* base, int rank, uint32_t seq) {
  const ArenaHeader* h = arena_header(base);
  return static_cast<unsigned char*>(base) + h->staging_off + static_cast<uint64_t>(rank) * h->staging_stride +
         static_cast<uint64_t>(seq & 1U) * 2 * h->chunk_bytes;
}

void coll_arena_abort(void* base, int local_size) {
  if (base == nullptr || local_size < 1 || local_size > kMaxRanks) {
    return;
  }
  ArenaAbort* a = arena_abort_word(base);
  a->aborted.store(1, std::memory_order_seq_cst);
  coll_futex_wake(&a->aborted);
  auto* lines = reinterpret_cast<SeqLine*>(static_cast<unsigned char*>(base) + coll_arena_layout(local_size).lines_off);
  for (int i = 0; i < 2 * local_size; ++i) {
    coll_futex_wake(&lines[i].seq);
  }
}

bool coll_arena_aborted(const void* base) {
  return arena_abort_word(const_cast<void*>(base))->aborted.load(std::memory_order_acquire) != 0;
}

int coll_arena_progress(const void* base, int local_size, int rank, CollProgress* out) {
  if (base == nullptr || out == nullptr || rank < 0 || rank >= local_size || local_size > kMaxRanks) {
    return -EINVAL;
  }
  const ArenaSlot* slot = arena_slot(const_cast<void*>(base), rank);
  out->pid = slot->pid.load(std::memory_order_relaxed);
  out->op = slot->op.load(std::memory_order_relaxed);
  out->completed = slot->progress.load(std::memory_order_relaxed);
  out->start_ns = slot->start_ns.load(std::memory_order_relaxed);
  return 0;
}

int coll_futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
  // A shared mapping between processes: no FUTEX_PRIVATE_FLAG.
  if (syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0) == 0) {
    return 0;
  }
  return -errno;
}

void coll_futex_wake(std::atomic<uint32_t>* word) {
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace trainit::coll

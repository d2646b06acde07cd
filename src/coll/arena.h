// The collective core's arena: one shared mapping per job on a node, laid out
// here so that the two sides that touch it agree on every byte.
//
// Who writes what:
//  - the creator (trainit's init, or rank 0 of a standalone communicator)
//    sizes it with coll_arena_size(), formats it once with
//    coll_arena_format() before any rank maps it, and may at any time mark it
//    aborted with coll_arena_abort() (a rank died, the job is stopping);
//  - each rank writes only its own slot, its own two sequence lines, its own
//    staging block and its own share of the heap (a zero-copy allreduce also
//    writes its share of the result into its peers' buffers there); it reads
//    its peers' lines, staging and heap only inside the step windows the
//    protocol defines (protocol.h);
//  - the init reads the per-rank progress with coll_arena_progress() (hang
//    detection) and never writes there.
//
// The init trusts none of it: every rank can write every byte (a bug or an
// attack), so the init locates what it touches from the rank count it
// formatted, not from the header, and the memfd's size is sealed once
// committed (no rank can shrink it under the init's mapping: no SIGBUS).
//
// Sequence numbers only grow (never reset): a rank's step s is published in
// its line s & 1 by storing s into that line's seq word (release). Data a rank
// publishes at step s stays unchanged until every peer has published step
// s + 1. Every 32-bit word a rank may wait on is a futex word in the mapping
// (shared, not FUTEX_PRIVATE).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace trainit::coll {

inline constexpr uint64_t kArenaMagic = 0x314c4c4f434e5254ULL;  // "TRNCOLL1", little endian
// 2: a chunked call's staging lacks each rank's own share, and rank 0's
// descriptor picks the hand-over (protocol.h): ranks of version 1 would
// read wrong bytes there, so they refuse each other's arenas.
// 3: an allreduce between 2 ranks hands each rank's whole chunk over and
// every rank folds it all (collectives.cpp): version 2 would wait for a
// share it is never given.
inline constexpr uint32_t kArenaVersion = 3;
inline constexpr size_t kLineBytes = 64;
inline constexpr int kMaxRanks = 1024;
// What fits in a sequence line beside its seq word and descriptor: the
// small-message (LL) path's payload per rank.
inline constexpr size_t kInlineBytes = 48;
// One pipeline chunk; each rank's staging holds 2 halves of (in, out) chunks.
inline constexpr size_t kChunkBytes = size_t{512} * 1024;
inline constexpr size_t kStagingHalfBytes = 2 * kChunkBytes;

struct alignas(kLineBytes) ArenaHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t local_size;
  uint64_t size;  // bytes of the whole mapping
  uint64_t job_id;
  uint64_t chunk_bytes;
  uint64_t slots_off;
  uint64_t lines_off;
  uint64_t staging_off;
  uint64_t staging_stride;  // bytes of one rank's staging block
  uint64_t heap_off;
  uint64_t heap_bytes;  // split evenly between the ranks, page-aligned shares
};

// Set once (never cleared) by coll_arena_abort(): every wait returns
// -ECONNABORTED from then on. Its own cache line: ranks poll it while spinning.
struct alignas(kLineBytes) ArenaAbort {
  std::atomic<uint32_t> aborted;
};

// How many ranks are asleep in FUTEX_WAIT on any word of the arena: a rank
// that publishes a step issues FUTEX_WAKE only when this is non-zero.
struct alignas(kLineBytes) ArenaSleepers {
  std::atomic<uint32_t> count;
};

// CPUs 0 … kSlotCpus - 1 a slot names one by one.
inline constexpr int kSlotCpus = 256;

// Per rank, written by that rank only (pid also by a standalone rank 0 at join).
struct alignas(kLineBytes) ArenaSlot {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> op;        // the collective in progress (CollOp), 0 when none
  std::atomic<uint64_t> progress;  // collectives completed
  std::atomic<uint64_t> start_ns;  // CLOCK_MONOTONIC when the current one began
  // The CPUs the rank may run on (its affinity when it attached): the ranks
  // judge from all of them whether each can have a core of its own.
  std::atomic<uint64_t> cpus[kSlotCpus / 64];
  std::atomic<uint32_t> cpus_beyond;  // how many more, numbered kSlotCpus and up
  std::atomic<int32_t> cpu;           // where the rank last began a wait for its peers (-1: unknown)
};
static_assert(sizeof(ArenaSlot) == kLineBytes);

// One of a rank's two sequence lines: data and flag share the cache line.
struct alignas(kLineBytes) SeqLine {
  std::atomic<uint32_t> seq;  // the step published here (futex word)
  uint32_t pad;
  uint64_t desc;  // the call's descriptor (protocol.h), written before seq
  unsigned char data[kInlineBytes];
};
static_assert(sizeof(SeqLine) == kLineBytes);

// The collectives a slot's op names.
enum CollOp : uint32_t {
  kOpNone = 0,
  kOpAllreduce,
  kOpReduce,
  kOpReduceScatter,
  kOpAllgather,
  kOpBroadcast,
  kOpBarrier,
};

// Where each part of the arena lies (offsets from its base).
struct ArenaLayout {
  uint64_t abort_off;
  uint64_t sleepers_off;
  uint64_t slots_off;
  uint64_t lines_off;
  uint64_t staging_off;
  uint64_t staging_stride;
  uint64_t heap_off;
  uint64_t min_size;  // everything but the heap, page-aligned
};
ArenaLayout coll_arena_layout(int local_size);

// Bytes of an arena for local_size ranks with heap_bytes for trainit_alloc
// (a page multiple); 0 if local_size is out of range or the sum overflows.
size_t coll_arena_size(int local_size, size_t heap_bytes);

// Formats a zero-filled mapping of size bytes: 0, or -EINVAL (local_size out
// of range, size below coll_arena_size(local_size, 0)). The header's magic is
// stored last: a reader that sees it sees the rest.
int coll_arena_format(void* base, size_t size, int local_size, uint64_t job_id);

// Checks a mapping's header against the size it was mapped with: 0, -EPROTO
// (not a formatted arena, another version) or -EINVAL (size disagrees).
int coll_arena_check(const void* base, size_t size);

// Marks the arena of local_size ranks aborted and wakes every waiter on any
// of its words. Safe to call from any process that maps the arena (at least
// up to its staging), any number of times. Where the words lie comes from
// local_size, never from the header: the init passes the size it formatted,
// and no byte a rank scribbled can send it elsewhere.
void coll_arena_abort(void* base, int local_size);
bool coll_arena_aborted(const void* base);

struct CollProgress {
  int32_t pid;
  uint32_t op;         // CollOp in progress, kOpNone when idle
  uint64_t completed;  // collectives completed
  uint64_t start_ns;   // when the one in progress began (CLOCK_MONOTONIC)
};
// One rank's progress, as the init reads it for hang detection: 0 or -EINVAL
// (rank not below local_size, the caller's own count: not the header's).
// Each field is what that rank last wrote, or what a rank scribbled: the
// reader bounds every value before it uses one.
int coll_arena_progress(const void* base, int local_size, int rank, CollProgress* out);

// Typed views of a formatted arena.
inline ArenaHeader* arena_header(void* base) {
  return static_cast<ArenaHeader*>(base);
}
ArenaAbort* arena_abort_word(void* base);
ArenaSleepers* arena_sleepers(void* base);
ArenaSlot* arena_slot(void* base, int rank);
SeqLine* arena_line(void* base, int rank, uint32_t seq);
unsigned char* arena_staging(void* base, int rank, uint32_t seq);  // this step's half: in, then out

// Shared futex words (the arena is MAP_SHARED): FUTEX_WAIT while *word ==
// expected, at most timeout_ns; FUTEX_WAKE everyone.
int coll_futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
void coll_futex_wake(std::atomic<uint32_t>* word);

}  // namespace trainit::coll

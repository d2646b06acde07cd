#include "job/coll_arena.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <linux/io_uring.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "coll/arena.h"
#include "coll/comm.h"
#include "job/memory_headroom.h"
#include "proc/signals.h"

namespace trainit {
namespace {

std::string mib(size_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

const char* op_name(uint32_t op) {
  switch (op) {
    case coll::kOpAllreduce:
      return "allreduce";
    case coll::kOpReduce:
      return "reduce";
    case coll::kOpReduceScatter:
      return "reduce_scatter";
    case coll::kOpAllgather:
      return "allgather";
    case coll::kOpBroadcast:
      return "broadcast";
    case coll::kOpBarrier:
      return "barrier";
    default:
      return "a collective";
  }
}

constexpr uint32_t kLastOp = coll::kOpBarrier;
static_assert(offsetof(coll::ArenaHeader, heap_bytes) + sizeof(uint64_t) == 88, "CollArena::header_ holds every field");
// How far ahead of PID 1's reading a rank's CLOCK_MONOTONIC start may lie:
// the same clock, read a moment apart.
constexpr int64_t kClockSlack = 1'000'000'000;

// The header's fields, by offset, for the line that names one overwritten.
const char* header_field(size_t offset) {
  struct Field {
    size_t end;
    const char* name;
  };
  static constexpr Field kFields[] = {
      {offsetof(coll::ArenaHeader, version), "magic"},
      {offsetof(coll::ArenaHeader, local_size), "version"},
      {offsetof(coll::ArenaHeader, size), "local_size"},
      {offsetof(coll::ArenaHeader, job_id), "size"},
      {offsetof(coll::ArenaHeader, chunk_bytes), "job_id"},
      {offsetof(coll::ArenaHeader, slots_off), "chunk_bytes"},
      {offsetof(coll::ArenaHeader, lines_off), "slots_off"},
      {offsetof(coll::ArenaHeader, staging_off), "lines_off"},
      {offsetof(coll::ArenaHeader, staging_stride), "staging_off"},
      {offsetof(coll::ArenaHeader, heap_off), "staging_stride"},
      {offsetof(coll::ArenaHeader, heap_bytes), "heap_off"},
  };
  for (const Field& f : kFields) {
    if (offset < f.end) {
      return f.name;
    }
  }
  return "heap_bytes";
}

// Closes the arena's memfd without waiting for the kernel to free its pages.
// The last close() of a shared-memory file frees every page before it
// returns (about 6 ms for 8 ranks' 48 MiB on an idle core, three times that
// on a busy one), and PID 1's exit, the moment its parent sees the job end,
// would wait for it. A file registered with an io_uring is held by the ring
// instead; closing the ring hands its teardown, and that last reference, to
// the kernel's workqueue, which frees the pages a few milliseconds later,
// owned by no process. Where io_uring is refused (a seccomp profile,
// kernel.io_uring_disabled, a kernel before 5.1) the memfd is closed as
// before. Either way nothing of it is left open here.
void close_without_waiting_for_free(Fd memfd) noexcept {
  io_uring_params params{};
  Fd ring(static_cast<int>(::syscall(__NR_io_uring_setup, 1, &params)));
  if (ring) {
    int fd = memfd.get();
    (void)::syscall(__NR_io_uring_register, ring.get(), IORING_REGISTER_FILES, &fd, 1);
  }
  memfd.reset();  // the ring's reference, if registered, is now the last
  ring.reset();
}

int64_t monotonic_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A preflight helper: joins through the library as a rank does, then a
// barrier and an allreduce of (rank + 1) in three i32s. Exit 0, else the
// step that failed (10 + step).
[[noreturn]] void preflight_helper(int fd, unsigned rank, unsigned ranks) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::setenv("TRAINIT_COLL_FD", std::to_string(fd).c_str(), 1);
  ::setenv("TRAINIT_LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("TRAINIT_LOCAL_SIZE", std::to_string(ranks).c_str(), 1);
  trainit_comm* comm = nullptr;
  if (coll::comm_init_from_env_host(&comm) != 0)
    ::_exit(10);
  if (trainit_barrier(comm) != 0)
    ::_exit(11);
  int32_t send[3] = {static_cast<int32_t>(rank + 1), static_cast<int32_t>(rank + 1), static_cast<int32_t>(rank + 1)};
  int32_t recv[3] = {};
  if (trainit_allreduce(comm, send, recv, 3, TRAINIT_I32, TRAINIT_SUM) != 0)
    ::_exit(12);
  const auto want = static_cast<int32_t>(ranks * (ranks + 1) / 2);
  if (recv[0] != want || recv[1] != want || recv[2] != want)
    ::_exit(13);
  ::_exit(trainit_comm_destroy(comm) == 0 ? 0 : 14);
}

const char* preflight_step(int code) {
  switch (code) {
    case 10:
      return "could not join the arena";
    case 11:
      return "a barrier failed";
    case 12:
      return "an allreduce failed";
    case 13:
      return "an allreduce gave a wrong sum";
    case 14:
      return "could not leave the arena";
    default:
      return "failed";
  }
}

std::string commit_failed(size_t bytes, unsigned ranks, std::string_view why) {
  return fmt::format(
      "collective arena: cannot commit {} for {} local ranks: {} (lower --coll-arena, or raise the "
      "container's memory limit)",
      mib(bytes), ranks, why);
}

}  // namespace

Result<CollArena> CollArena::create(unsigned ranks, size_t heap, uint64_t job_id, Pages pages) {
  const size_t bytes = coll::coll_arena_size(static_cast<int>(ranks), heap);
  if (ranks > static_cast<unsigned>(coll::kMaxRanks)) {
    return Error{fmt::format("collective arena: {} local ranks, where one arena serves at most {} (--coll-arena off "
                             "runs the job without one)",
                             ranks, coll::kMaxRanks),
                 EINVAL};
  }
  if (bytes == 0) {
    return Error{fmt::format("collective arena: a heap of {} for {} local ranks is out of range", mib(heap), ranks),
                 EINVAL};
  }
  // More than the memory can hold is not refused by the commit: the OOM
  // killer takes some process instead (where no cgroup limit catches it).
  if (pages != Pages::kOnTouch) {
    if (auto room = memory_headroom_now(); room && bytes > room->bytes) {
      return Error{commit_failed(bytes, ranks, fmt::format("{} leaves only {}", room->what, mib(room->bytes))), ENOMEM};
    }
  }
  CollArena arena;
  arena.fd_ = Fd(::memfd_create("trainit-coll", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!arena.fd_) {
    return Error{fmt::format("collective arena: memfd_create: {}", errno_string(errno)), errno};
  }
  // Sized now; its pages are committed by commit_step() (all at once here
  // for kCommitted), made on first touch for kOnTouch.
  if (::ftruncate(arena.fd_.get(), static_cast<off_t>(bytes)) != 0) {
    return Error{commit_failed(bytes, ranks, errno_string(errno)), errno};
  }
  // Its size is final: a rank's ftruncate() can no longer pull pages from
  // under PID 1's mapping (a SIGBUS in PID 1) or grow it.
  if (::fcntl(arena.fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
    return Error{fmt::format("collective arena: cannot seal its size: {}", errno_string(errno)), errno};
  }
  // PID 1 maps the control part only: it never reads staging or heap.
  const size_t mapped = coll::coll_arena_layout(static_cast<int>(ranks)).staging_off;
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, arena.fd_.get(), 0);
  if (base == MAP_FAILED) {
    return Error{fmt::format("collective arena: mmap of {}: {}", mib(mapped), errno_string(errno)), errno};
  }
  arena.base_ = base;
  arena.mapped_ = mapped;
  arena.bytes_ = bytes;
  arena.ranks_ = ranks;
  if (int r = coll::coll_arena_format(base, bytes, static_cast<int>(ranks), job_id); r < 0) {
    return Error{fmt::format("collective arena: cannot format it: {}", errno_string(-r)), -r};
  }
  std::memcpy(arena.header_.data(), base, arena.header_.size());
  arena.committed_ = pages == Pages::kOnTouch ? bytes : 0;
  if (pages == Pages::kCommitted) {
    if (auto r = arena.commit_step(bytes); !r) {
      return r.error();
    }
  }
  return arena;
}

Result<bool> CollArena::commit_step(size_t most) {
  const size_t len = std::min(most, bytes_ - committed_);
  if (len == 0) {
    return committed_ == bytes_;
  }
  // Within the sealed size: F_SEAL_GROW refuses only what would grow it.
  if (const int r = ::posix_fallocate(fd_.get(), static_cast<off_t>(committed_), static_cast<off_t>(len)); r != 0) {
    return Error{commit_failed(bytes_, ranks_, errno_string(r)), r};
  }
  committed_ += len;
  return committed_ == bytes_;
}

CollArena::CollArena(CollArena&& other) noexcept
    : fd_(std::move(other.fd_)),
      base_(std::exchange(other.base_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)),
      bytes_(std::exchange(other.bytes_, 0)),
      committed_(std::exchange(other.committed_, 0)),
      ranks_(other.ranks_),
      header_(other.header_),
      aborted_(other.aborted_) {}

CollArena& CollArena::operator=(CollArena&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::move(other.fd_);
    base_ = std::exchange(other.base_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
    committed_ = std::exchange(other.committed_, 0);
    ranks_ = other.ranks_;
    header_ = other.header_;
    aborted_ = other.aborted_;
  }
  return *this;
}

CollArena::~CollArena() {
  release();
}

void CollArena::release() noexcept {
  if (base_ != nullptr) {
    ::munmap(base_, mapped_);
    base_ = nullptr;
  }
  if (fd_) {
    close_without_waiting_for_free(std::move(fd_));
  }
}

void CollArena::abort() noexcept {
  aborted_ = true;
  coll::coll_arena_abort(base_, static_cast<int>(ranks_));
}

std::optional<std::string> CollArena::corruption() noexcept {
  if (base_ == nullptr) {
    return std::nullopt;
  }
  const auto* bytes = static_cast<const unsigned char*>(base_);
  for (size_t i = 0; i < header_.size(); ++i) {
    if (bytes[i] != header_[i]) {
      return fmt::format("its header was overwritten ({})", header_field(i));
    }
  }
  const uint32_t word = coll::arena_abort_word(base_)->aborted.load(std::memory_order_acquire);
  if (word > 1) {
    return fmt::format("its abort word holds {:#x}, not 0 or 1", word);
  }
  if (aborted_ && word == 0) {
    log_debug("collective arena: a rank cleared its abort word; aborting again");
    abort();
  }
  const int64_t now = monotonic_ns();
  for (unsigned r = 0; r < ranks_; ++r) {
    coll::CollProgress p{};
    (void)coll::coll_arena_progress(base_, static_cast<int>(ranks_), static_cast<int>(r), &p);
    if (p.op > kLastOp) {
      return fmt::format("local rank {}'s progress names no collective (op {:#x})", r, p.op);
    }
    if (p.op != coll::kOpNone && static_cast<int64_t>(p.start_ns) > now + kClockSlack) {
      return fmt::format("local rank {}'s {} began {:.1f} s in the future", r, op_name(p.op),
                         static_cast<double>(static_cast<int64_t>(p.start_ns) - now) / 1e9);
    }
  }
  return std::nullopt;
}

std::vector<CollArena::Hang> CollArena::hangs(Duration limit) const {
  std::vector<Hang> out;
  if (base_ == nullptr) {
    return out;
  }
  const int64_t now = monotonic_ns();
  const int64_t limit_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
  for (unsigned r = 0; r < ranks_; ++r) {
    coll::CollProgress p{};
    (void)coll::coll_arena_progress(base_, static_cast<int>(ranks_), static_cast<int>(r), &p);
    const auto start = static_cast<int64_t>(p.start_ns);
    if (p.op == coll::kOpNone || p.op > kLastOp || start < 0 || start > now) {
      continue;  // idle, or a value corruption() names
    }
    if (now - start > limit_ns) {
      out.push_back(Hang{r, op_name(p.op), std::chrono::nanoseconds(now - start)});
    }
  }
  return out;
}

Result<std::unique_ptr<CollPreflight>> CollPreflight::start(Loop& loop, unsigned ranks, Duration timeout, DoneFn done) {
  // Its few pages are touched by the helpers: none committed up front.
  auto arena = CollArena::create(ranks, 0, 0, CollArena::Pages::kOnTouch);
  if (!arena) {
    return arena.error();
  }
  std::unique_ptr<CollPreflight> preflight(new CollPreflight(std::move(*arena), std::move(done)));
  CollPreflight& p = *preflight;
  p.helpers_.reserve(ranks);
  for (unsigned r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      const int e = errno;
      return Error{fmt::format("collective preflight: fork: {}", errno_string(e)), e};  // ~CollPreflight kills
    }
    if (pid == 0) {
      preflight_helper(p.arena_.fd(), r, ranks);
    }
    p.helpers_.push_back(loop.add_child(
        pid, [&p, r](const siginfo_t& info) { return p.on_end(r, info); }, fmt::format("preflight helper {}", r)));
  }
  p.left_ = ranks;
  p.deadline_ = loop.add_timer(
      Clock::now() + timeout,
      [&p, timeout] {
        if (p.failure_.empty()) {
          p.failure_ = fmt::format("not done within {:.1f} s", seconds(timeout));
        }
        p.finish();
        return 0;
      },
      "collective preflight deadline");
  return preflight;
}

int CollPreflight::on_end(unsigned slot, const siginfo_t& info) {
  helpers_[slot].reset();
  --left_;
  if (failure_.empty() && !(info.si_code == CLD_EXITED && info.si_status == 0)) {
    failure_ = info.si_code == CLD_EXITED
                   ? fmt::format("local slot {}: {}", slot, preflight_step(info.si_status))
                   : fmt::format("local slot {}: killed by {}", slot, signal_name(info.si_status));
    arena_.abort();  // the others return at once
  }
  if (left_ == 0) {
    finish();
  }
  return 0;
}

void CollPreflight::finish() {
  kill_helpers();  // those not done; the loop reaps them
  deadline_.reset();
  Result<void> result;
  if (!failure_.empty()) {
    result = Error{fmt::format("collective preflight across {} local slots: {}", arena_.ranks(), failure_), EPROTO};
  }
  // The last thing it does: the caller may destroy it from `done`.
  DoneFn done = std::move(done_);
  if (done) {
    done(std::move(result));
  }
}

void CollPreflight::kill_helpers() noexcept {
  arena_.abort();
  for (SourceHandle& h : helpers_) {
    if (h) {
      (void)h.send_signal(SIGKILL);
      h.reset();
    }
  }
}

CollPreflight::~CollPreflight() {
  kill_helpers();
}

Result<void> coll_preflight(unsigned ranks, Duration timeout) {
  Loop loop;
  if (int r = loop.init(); r < 0) {
    return Error{fmt::format("collective preflight: event loop: {}", errno_string(-r)), -r};
  }
  std::optional<Result<void>> outcome;
  auto preflight = CollPreflight::start(loop, ranks, timeout, [&outcome](Result<void> r) { outcome = std::move(r); });
  if (!preflight) {
    return preflight.error();
  }
  while (!outcome) {
    if (int r = loop.run_once(-1); r < 0) {
      return Error{fmt::format("collective preflight: event loop: {}", errno_string(-r)), -r};
    }
  }
  preflight->reset();
  // The helpers killed at the deadline, reaped before this returns.
  while (loop.has_children()) {
    if (int r = loop.run_once(-1); r < 0) {
      break;
    }
  }
  return std::move(*outcome);
}

}  // namespace trainit

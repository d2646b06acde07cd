#include "coll_arena.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <trainit/coll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "base/log.h"
#include "coll/arena.h"

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
  if (trainit_comm_init_from_env(&comm) != 0)
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

}  // namespace

Result<CollArena> CollArena::create(unsigned ranks, size_t heap, uint64_t job_id) {
  const size_t bytes = coll::coll_arena_size(static_cast<int>(ranks), heap);
  if (bytes == 0) {
    return Error{fmt::format("collective arena: {} local ranks and a {} heap are out of range (at most {} ranks)",
                             ranks, mib(heap), coll::kMaxRanks),
                 EINVAL};
  }
  CollArena arena;
  arena.fd_ = Fd(::memfd_create("trainit-coll", MFD_CLOEXEC));
  if (!arena.fd_) {
    return Error{fmt::format("collective arena: memfd_create: {}", errno_string(errno)), errno};
  }
  // Committed now: shmem pages the memory limit refuses are ENOSPC/ENOMEM
  // here, not a SIGBUS in a rank in the middle of training.
  if (int r = ::posix_fallocate(arena.fd_.get(), 0, static_cast<off_t>(bytes)); r != 0) {
    return Error{fmt::format("collective arena: cannot commit {} for {} local ranks: {} (lower --coll-arena, or "
                             "raise the container's memory limit)",
                             mib(bytes), ranks, errno_string(r)),
                 r};
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, arena.fd_.get(), 0);
  if (base == MAP_FAILED) {
    return Error{fmt::format("collective arena: mmap of {}: {}", mib(bytes), errno_string(errno)), errno};
  }
  arena.base_ = base;
  arena.bytes_ = bytes;
  arena.ranks_ = ranks;
  if (int r = coll::coll_arena_format(base, bytes, static_cast<int>(ranks), job_id); r < 0) {
    return Error{fmt::format("collective arena: cannot format it: {}", errno_string(-r)), -r};
  }
  return arena;
}

CollArena::CollArena(CollArena&& other) noexcept
    : fd_(std::move(other.fd_)), base_(other.base_), bytes_(other.bytes_), ranks_(other.ranks_) {
  other.base_ = nullptr;
  other.bytes_ = 0;
}

CollArena& CollArena::operator=(CollArena&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) {
      ::munmap(base_, bytes_);
    }
    fd_ = std::move(other.fd_);
    base_ = other.base_;
    bytes_ = other.bytes_;
    ranks_ = other.ranks_;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

CollArena::~CollArena() {
  if (base_ != nullptr) {
    ::munmap(base_, bytes_);
  }
}

void CollArena::abort() noexcept {
  if (base_ != nullptr) {
    coll::coll_arena_abort(base_);
  }
}

bool CollArena::aborted() const noexcept {
  return base_ != nullptr && coll::coll_arena_aborted(base_);
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
    if (coll::coll_arena_progress(base_, static_cast<int>(r), &p) < 0 || p.op == coll::kOpNone) {
      continue;
    }
    const int64_t stuck = now - static_cast<int64_t>(p.start_ns);
    if (stuck > limit_ns) {
      out.push_back(Hang{r, op_name(p.op), std::chrono::nanoseconds(stuck)});
    }
  }
  return out;
}

Result<void> coll_preflight(unsigned ranks, Duration timeout) {
  auto arena = CollArena::create(ranks, 0, 0);
  if (!arena) {
    return arena.error();
  }
  std::vector<pid_t> helpers;
  for (unsigned r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      const int e = errno;
      arena->abort();
      for (pid_t h : helpers) {
        ::kill(h, SIGKILL);
        ::waitpid(h, nullptr, 0);
      }
      return Error{fmt::format("collective preflight: fork: {}", errno_string(e)), e};
    }
    if (pid == 0) {
      preflight_helper(arena->fd(), r, ranks);
    }
    helpers.push_back(pid);
  }
  // Each helper's end, polled: a few milliseconds in all.
  const auto deadline = Clock::now() + timeout;
  std::string failure;
  size_t left = helpers.size();
  std::vector<bool> done(helpers.size(), false);
  while (left > 0) {
    for (size_t i = 0; i < helpers.size(); ++i) {
      int status = 0;
      if (done[i] || ::waitpid(helpers[i], &status, WNOHANG) != helpers[i]) {
        continue;
      }
      done[i] = true;
      --left;
      if (failure.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        failure = WIFEXITED(status) ? fmt::format("local slot {}: {}", i, preflight_step(WEXITSTATUS(status)))
                                    : fmt::format("local slot {}: killed by signal {}", i, WTERMSIG(status));
        arena->abort();  // the others return at once
      }
    }
    if (left > 0 && Clock::now() > deadline) {
      if (failure.empty()) {
        failure = fmt::format("not done within {:.1f} s", std::chrono::duration<double>(timeout).count());
      }
      arena->abort();
      for (size_t i = 0; i < helpers.size(); ++i) {
        if (!done[i]) {
          ::kill(helpers[i], SIGKILL);
          ::waitpid(helpers[i], nullptr, 0);
          done[i] = true;
        }
      }
      left = 0;
    } else if (left > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  if (!failure.empty()) {
    return Error{fmt::format("collective preflight across {} local slots: {}", ranks, failure), EPROTO};
  }
  return {};
}

}  // namespace trainit

// The collective core's arena, from the init's side (DESIGN.md "The
// collective core"): one per start of a job whose host runs more than one
// rank. trainit creates it before the ranks (memfd, every page committed up
// front: a memory limit too small is a clear error at start, never a SIGBUS
// in a rank later), hands it to each rank (TRAINIT_COLL_FD,
// TRAINIT_LOCAL_RANK, TRAINIT_LOCAL_SIZE, TRAINIT_COLL_ID), marks it aborted
// when a rank exits or the job stops (every collective in flight returns
// -ECONNABORTED), and reads the ranks' progress for hang detection. Nothing
// is named in /dev/shm; the memory goes with the last descriptor and mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "base/time.h"

namespace trainit {

// --coll-arena's default: the trainit_alloc heap shared by a host's ranks.
inline constexpr size_t kDefaultCollHeap = size_t{32} << 20;

class CollArena {
 public:
  // An arena for `ranks` local ranks with `heap` bytes for trainit_alloc,
  // committed; the error names the size and what refused it.
  static Result<CollArena> create(unsigned ranks, size_t heap, uint64_t job_id);

  CollArena(CollArena&& other) noexcept;
  CollArena& operator=(CollArena&& other) noexcept;
  CollArena(const CollArena&) = delete;
  CollArena& operator=(const CollArena&) = delete;
  ~CollArena();

  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  [[nodiscard]] size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] unsigned ranks() const noexcept { return ranks_; }

  // Every waiter wakes with -ECONNABORTED, now and in every later call.
  void abort() noexcept;
  [[nodiscard]] bool aborted() const noexcept;

  // A rank in a collective for longer than `limit`: which, which call, how
  // long. Empty when every rank is idle or within it.
  struct Hang {
    unsigned rank = 0;
    std::string call;
    Duration stuck{};
  };
  [[nodiscard]] std::vector<Hang> hangs(Duration limit) const;

 private:
  CollArena() = default;
  Fd fd_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  unsigned ranks_ = 0;
};

// The arena's self-test before any rank starts: `ranks` helper processes
// (forked, not exec'd) join an arena of their own through the library, as
// ranks do, and run a barrier and an allreduce whose result each checks;
// within `timeout`. Reaps its helpers itself. The error says what failed.
[[nodiscard]] Result<void> coll_preflight(unsigned ranks, Duration timeout);

}  // namespace trainit

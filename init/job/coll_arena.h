// The collective core's arena, from the init's side (docs/architecture.md "The
// collective core"): one per start of a job whose host runs more than one
// rank. trainit creates it before the ranks (memfd, every page committed up
// front: a memory limit too small is a clear error at start, never a SIGBUS
// in a rank later), hands it to each rank (TRAINIT_COLL_FD,
// TRAINIT_LOCAL_RANK, TRAINIT_LOCAL_SIZE, TRAINIT_COLL_ID), marks it aborted
// when a rank exits or the job stops (every collective in flight returns
// -ECONNABORTED), and reads the ranks' progress for hang detection. Nothing
// is named in /dev/shm; the memory goes with the last descriptor and mapping:
// PID 1's last one, at the end of a start, is closed without waiting for the
// kernel to free the pages (release()), so the job's end is not held up.
//
// Every rank can write every byte of it, so PID 1 trusts none of them: the
// memfd's size is sealed once committed (a rank's ftruncate() fails with
// EPERM: no SIGBUS in PID 1), PID 1 maps only the control part (header,
// abort word, progress slots, sequence lines) and locates what it touches
// from its own copy of the layout, and corruption() compares the header with
// that copy and bounds every progress value. A rank that rewrites the abort
// word after an abort has it set again at the next check.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "base/time.h"
#include "loop/loop.h"

namespace trainit {

class CollArena {
 public:
  // Its pages: all committed by create() (what the memory limit refuses is
  // an error here, not a SIGBUS in a rank mid-training); committed by
  // commit_step() (a job's: a step at a time from the loop, so that a large
  // arena never holds up PID 1's signals); or each made when first touched
  // (the preflight's, which touches a few). An arena larger than the memory
  // left (job/memory_headroom.h) is refused unless kOnTouch.
  enum class Pages { kCommitted, kInSteps, kOnTouch };

  // An arena for `ranks` local ranks with `heap` bytes for trainit_alloc;
  // the error names the size and what refused it.
  static Result<CollArena> create(unsigned ranks, size_t heap, uint64_t job_id, Pages pages = Pages::kCommitted);

  CollArena(CollArena&& other) noexcept;
  CollArena& operator=(CollArena&& other) noexcept;
  CollArena(const CollArena&) = delete;
  CollArena& operator=(const CollArena&) = delete;
  ~CollArena();

  // Commits up to `most` more bytes of its pages: true once every page is
  // (always, but for kInSteps); the error names the size and the refusal.
  [[nodiscard]] Result<bool> commit_step(size_t most);

  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  [[nodiscard]] size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] unsigned ranks() const noexcept { return ranks_; }

  // Every waiter wakes with -ECONNABORTED, now and in every later call.
  void abort() noexcept;
  // Whether PID 1 aborted it (its own record, not the shared word).
  [[nodiscard]] bool aborted() const noexcept { return aborted_; }

  // What a rank did to the arena that no rank may do, in words ("its header
  // was overwritten (local_size ...)"); nullopt when nothing. After an abort
  // it also sets the abort word again should a rank have cleared it.
  [[nodiscard]] std::optional<std::string> corruption() noexcept;

  // A rank in a collective for longer than `limit`: which, which call, how
  // long. Empty when every rank is idle or within it. Values corruption()
  // would name are skipped, not reported as hangs.
  struct Hang {
    unsigned rank = 0;
    std::string call;
    Duration stuck{};
  };
  [[nodiscard]] std::vector<Hang> hangs(Duration limit) const;

 private:
  CollArena() = default;
  // Unmaps the control part and closes the memfd; where the kernel allows
  // it, the pages are freed by its workqueue after close returns.
  void release() noexcept;

  Fd fd_;
  void* base_ = nullptr;  // the control part only: mapped_ bytes
  size_t mapped_ = 0;
  size_t bytes_ = 0;      // the whole arena, heap included
  size_t committed_ = 0;  // bytes from the start whose pages are committed
  unsigned ranks_ = 0;
  std::array<unsigned char, 88> header_{};  // the header's fields as formatted: no rank may change them
  bool aborted_ = false;
};

// The arena's self-test before any rank starts: `ranks` helper processes
// (forked, not exec'd) join an arena of their own through the library, as
// ranks do, and run a barrier and an allreduce whose result each checks.
// start() forks them and returns: they run on the other cores while the
// caller commits the job's arena. Their ends (pidfds) and the deadline are
// sources of `loop`: `done` is called once, from it, when every helper
// ended or the deadline passed (those left are killed, the loop reaps
// them), with what failed. Destroying it kills the helpers still running.
class CollPreflight {
 public:
  using DoneFn = std::function<void(Result<void>)>;

  [[nodiscard]] static Result<std::unique_ptr<CollPreflight>> start(Loop& loop, unsigned ranks, Duration timeout,
                                                                    DoneFn done);

  CollPreflight(const CollPreflight&) = delete;
  CollPreflight& operator=(const CollPreflight&) = delete;
  ~CollPreflight();

 private:
  CollPreflight(CollArena arena, DoneFn done) : arena_(std::move(arena)), done_(std::move(done)) {}
  int on_end(unsigned slot, const siginfo_t& info);
  void finish();
  void kill_helpers() noexcept;

  CollArena arena_;
  DoneFn done_;
  std::vector<SourceHandle> helpers_;  // slot i's, until it is reaped
  SourceHandle deadline_;
  unsigned left_ = 0;
  std::string failure_;
};

// start() in a loop of its own, run until it is done and every helper is
// reaped (tests, tools).
[[nodiscard]] Result<void> coll_preflight(unsigned ranks, Duration timeout);

}  // namespace trainit

// The console side of the log relay: a bounded buffer of whole lines that a
// dedicated writer thread drains to trainit's own stdout with blocking writes.
//
// Why a thread: the console is inherited from the container runtime and shared
// with it, so it must never be switched to O_NONBLOCK, and a blocking write(2)
// on the loop thread could stall every rank behind a reader that stopped
// reading. The loop thread (the producer) fills records in a single-producer
// single-consumer ring — the relay reads a rank's pipe straight into one — and
// the writer thread (the consumer) cuts them into lines, puts the prefix before
// each and writes them out with writev(2). The per-line work is the
// consumer's, and the loop thread copies nothing but a rank's unfinished line.
// When the ring is full, whole lines are dropped and counted, and once there
// is room again one line says so:
//   "[trainit] N bytes of rank output not shown on the console"
//
// Sides, as folly's ProducerConsumerQueue states them:
//   - producer: every public member, and the destructor. It is undefined to
//     call them from any thread but the one that constructed the writer (the
//     loop thread).
//   - consumer: the writer thread, private to this file's implementation; it
//     touches nothing but the ring and the descriptor.
// The ring's head (written by the producer) and tail (written by the consumer)
// sit on separate cache lines; every atomic access names its memory order.
//
// Lazy: neither the ring nor the thread exists until the first record; the
// thread is created with every signal blocked, so signals keep reaching the
// loop's signalfd. stop() waits a bounded time for the ring to drain; a writer
// still blocked in write(2) after that is detached with its own reference to
// the ring (the process is about to exit), never freed under it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <thread>

#include "base/fd.h"

namespace trainit {

class ConsoleWriter {
 public:
  // `fd` stays the caller's: the writer works on a close-on-exec duplicate of
  // it, made here (a failure, e.g. -EMFILE, shows in error() and every line is
  // dropped). `capacity`: the ring's size in bytes, rounded up to a power of
  // two and at least kMinCapacity; allocated at the first record.
  ConsoleWriter(int fd, size_t capacity) noexcept;
  ConsoleWriter(const ConsoleWriter&) = delete;
  ConsoleWriter& operator=(const ConsoleWriter&) = delete;
  // stop(kStopTimeout).
  ~ConsoleWriter();

  static constexpr size_t kMinCapacity = 256 << 10;
  static constexpr size_t kMaxPrefix = 1024;    // longer prefixes are cut
  static constexpr size_t kMaxLine = 64 << 10;  // longer lines are cut
  static constexpr std::chrono::milliseconds kStopTimeout{1000};

  // The producer queues records: a prefix and a run of whole lines, each
  // ending with '\n' but perhaps the last, which then gets a '\n' added. The
  // writer puts the prefix before every line, and cuts a line longer than
  // kMaxLine into kMaxLine pieces, each with a '\n' added. Bytes pass as they
  // are. What does not fit in the ring is dropped by the caller, whole lines
  // at a time, and counted with drop().
  //
  // Producer. Opens a record of `prefix` (cut to kMaxPrefix) and `lead`, and
  // returns the room after them: at least `min` and at most `max` bytes, into
  // which the caller reads or copies the rest of the record's lines. Returns
  // an empty span, with nothing opened, when the ring lacks that room, the
  // writer could not be started or was stopped (an empty span with min == 0
  // is success: see opened()). Lines dropped since the last notice are
  // announced first, when there is room for the notice and the record.
  std::span<char> begin(std::string_view prefix, std::string_view lead, size_t min, size_t max);
  // Producer. Closes the open record with the first `n` bytes of its room: its
  // text is lead + those bytes. The writer sees it at the next publish().
  void commit(size_t n) noexcept;
  // Producer. Abandons the open record.
  void cancel() noexcept;
  // Producer. Whether a record is open.
  [[nodiscard]] bool opened() const noexcept { return open_ != nullptr; }
  // Producer. Counts `bytes` of rank output the caller dropped (whole lines);
  // the notice announces them once there is room.
  void drop(uint64_t bytes) noexcept;
  // Producer. begin(prefix, a, b.size(), b.size()), b copied in, commit():
  // one record or nothing. Returns the bytes of a + b taken (0 when dropped and
  // counted).
  size_t append(std::string_view prefix, std::string_view a, std::string_view b);
  // Producer. Makes every appended line visible to the writer and wakes it.
  void publish();
  // Producer. Appends the "not shown" notice if lines were dropped and there is
  // room now, publishes, and waits up to `timeout` for the writer to have
  // written everything. Returns whether it did.
  bool flush(std::chrono::milliseconds timeout);
  // Producer. flush(timeout), then ends the writer thread within the same
  // `timeout`: joined when it finished, detached (still holding the ring) when
  // it is blocked in write(2). Later appends drop their lines, and later calls
  // return at once. Returns whether the thread was joined.
  bool stop(std::chrono::milliseconds timeout);

  // Producer. Bytes of rank output not shown: dropped for want of room, or
  // discarded by the writer after the console failed.
  [[nodiscard]] uint64_t dropped() const noexcept;
  // Producer. 0, or the negative errno that ended the console: the writer's
  // write(2) failure (it then discards what it is given), or the failure to
  // start the writer (-EAGAIN, -ENOMEM).
  [[nodiscard]] int error() const noexcept;
  // Producer. Whether the writer thread exists (it starts at the first record).
  [[nodiscard]] bool started() const noexcept { return state_ != nullptr; }

  struct Shared;  // the ring and its indices, shared with the writer thread

 private:
  int start() noexcept;
  bool ready() noexcept;
  [[nodiscard]] uint64_t free_bytes() noexcept;
  [[nodiscard]] size_t largest_record() noexcept;
  char* reserve(size_t size) noexcept;
  bool append_notice() noexcept;

  Fd fd_;  // the duplicate, until start() hands it to the writer
  size_t capacity_;
  std::shared_ptr<Shared> state_;  // null until started
  std::thread thread_;             // the consumer; joined or detached by stop()
  uint64_t head_ = 0;              // producer's copy of the head it publishes
  uint64_t tail_seen_ = 0;         // producer's last view of the consumer's tail
  uint64_t dropped_ = 0;           // bytes the producer dropped
  uint64_t notice_pending_ = 0;    // dropped bytes not yet announced
  char* open_ = nullptr;           // the open record's header, until commit() or cancel()
  size_t open_prefix_ = 0;
  size_t open_lead_ = 0;
  int start_error_ = 0;
  bool stopped_ = false;
  bool joined_ = false;
};

}  // namespace trainit

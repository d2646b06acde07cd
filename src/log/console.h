// The console: one bounded buffer of whole lines that a dedicated writer
// thread drains to trainit's own stdout and stderr with blocking writes. Rank
// output goes to stdout; trainit's own log lines (through the LogSink it is)
// go to stderr; both queue in the one ring, in the order they were given, so
// that on a shared console (`2>&1`, a terminal) a rank's last lines come
// before trainit's line about its exit.
//
// Why a thread: the console is inherited from the container runtime and shared
// with it, so it must never be switched to O_NONBLOCK, and a blocking write(2)
// on the loop thread could stall every rank, and trainit's answer to SIGTERM,
// behind a reader that stopped reading. The loop thread (the producer) fills
// records in a single-producer single-consumer ring — the relay reads a rank's
// pipe straight into one — and the writer thread (the consumer) cuts them into
// lines, puts the prefix before each and writes them out with writev(2). The
// per-line work is the consumer's, and the loop thread copies nothing but a
// rank's unfinished line. When the ring is full, whole lines are dropped and
// counted, and once there is room again one line says so:
//   "[trainit] N bytes of rank output not shown on the console"   (stdout)
//   "[trainit] N lines of trainit's log not shown on the console" (stderr)
//
// Sides, as folly's ProducerConsumerQueue states them:
//   - producer: every public member, and the destructor. It is undefined to
//     call them from any thread but the one that constructed the writer (the
//     loop thread).
//   - consumer: the writer thread, private to this file's implementation; it
//     touches nothing but the ring and the descriptors.
// The ring's head (written by the producer) and tail (written by the consumer)
// sit on separate cache lines; every atomic access names its memory order.
//
// Lazy: neither the ring nor the thread exists until the first record; the
// thread is created with every signal blocked, so signals keep reaching the
// loop's signalfd. stop() waits a bounded time for the ring to drain; a writer
// still blocked in write(2) after that is detached with its own reference to
// the ring (the process is about to exit), never freed under it. A console
// that made a flush run out of time, and wrote nothing since, is not waited
// for again.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <thread>

#include "base/fd.h"
#include "base/log.h"

namespace trainit {

// Where a record's lines go.
enum class Stream : uint8_t { kOut = 0, kErr = 1 };

class ConsoleWriter final : public LogSink {
 public:
  // `out_fd` and `err_fd` stay the caller's: the writer works on close-on-exec
  // duplicates of them, made here (< 0, or a failed duplicate: that stream's
  // lines are dropped; for stdout the failure shows in error()). `capacity`:
  // the ring's size in bytes, rounded up to a power of two and at least
  // kMinCapacity; allocated at the first record.
  ConsoleWriter(int out_fd, int err_fd, size_t capacity) noexcept;
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
  std::span<char> begin(std::string_view prefix, std::string_view lead, size_t min, size_t max,
                        Stream stream = Stream::kOut);
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
  size_t append(std::string_view prefix, std::string_view a, std::string_view b, Stream stream = Stream::kOut);
  // Producer. LogSink: one of trainit's own lines, to stderr, published at
  // once; dropped and counted when the ring lacks room (or a rank's record is
  // open), announced on stderr once there is room.
  void log_line(std::string_view line) noexcept override;
  void log_flush(int timeout_ms) noexcept override { (void)flush(std::chrono::milliseconds(timeout_ms)); }
  // Producer. Makes every appended line visible to the writer and wakes it.
  void publish();
  // Producer. Appends the "not shown" notices if lines were dropped and there
  // is room now, publishes, and waits up to `timeout` for the writer to have
  // written everything (not at all when an earlier flush ran out of time and
  // nothing was written since). Returns whether it did.
  bool flush(std::chrono::milliseconds timeout);
  // Producer. flush(timeout), then ends the writer thread within the same
  // `timeout`: joined when it finished, detached (still holding the ring) when
  // it is blocked in write(2). Later appends drop their lines, and later calls
  // return at once. Returns whether the thread was joined.
  bool stop(std::chrono::milliseconds timeout);

  // Producer. Bytes of rank output not shown: dropped for want of room, or
  // discarded by the writer after the console failed.
  [[nodiscard]] uint64_t dropped() const noexcept;
  // Producer. trainit's log lines dropped for want of room.
  [[nodiscard]] uint64_t log_lines_dropped() const noexcept { return log_dropped_; }
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
  bool append_notices() noexcept;
  bool append_notice(Stream stream, std::string_view text) noexcept;

  Fd fds_[2];  // the duplicates of stdout and stderr, until start() hands them to the writer
  size_t capacity_;
  std::shared_ptr<Shared> state_;  // null until started
  std::thread thread_;             // the consumer; joined or detached by stop()
  uint64_t head_ = 0;              // producer's copy of the head it publishes
  uint64_t tail_seen_ = 0;         // producer's last view of the consumer's tail
  uint64_t dropped_ = 0;           // bytes the producer dropped
  uint64_t notice_pending_ = 0;    // dropped bytes not yet announced
  uint64_t log_dropped_ = 0;       // log lines dropped
  uint64_t log_pending_ = 0;       // dropped log lines not yet announced
  uint64_t stuck_tail_ = 0;        // the tail when a flush last ran out of time
  bool stuck_ = false;             // one did, and the writer has written nothing since
  char* open_ = nullptr;           // the open record's header, until commit() or cancel()
  size_t open_prefix_ = 0;
  size_t open_lead_ = 0;
  Stream open_stream_ = Stream::kOut;
  int start_error_ = 0;
  bool stopped_ = false;
  bool joined_ = false;
};

}  // namespace trainit

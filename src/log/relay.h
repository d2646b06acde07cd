// Per-rank output: each rank's stdout and stderr go into one pipe that the
// loop drains. Every byte read goes, raw, into the rank's log file; each whole
// line goes, with the rank's prefix, to the console.
//
// Files only (no console, or once the console failed for good: its writer's
// write(2) failed, or it could not start): nothing of a rank's output is
// looked at or rewritten (rank output is the rank's own: it is not
// redacted), so it moves from the pipe to the file with splice(2), in the
// kernel: one copy instead of a read and a write, in chunks as large as the
// pipe. After a console failure, what is spliced counts as not shown
// (console_dropped()), as do the lines held back then. splice(2) refuses
// an O_APPEND descriptor, so such a file's descriptor is opened O_APPEND and
// then switched off it, and each chunk goes at the file's end as it is then,
// found just before (what O_APPEND does, for every writer in this thread).
// Where splice(2) cannot be had (a file system without it, an append-only
// file) the rank goes the read and write way, with O_APPEND again.
//
// Contract:
//   - Files are lossless. Everything read from a pipe is written to the file
//     before the next read, until EOF or finish(); a rank killed mid-line loses
//     nothing that reached the pipe. File writes are blocking (regular files
//     cannot be otherwise) and happen on the loop thread.
//   - Reads are batched: a pipe that gave less than kBatchBelow at a step is
//     left alone for kBatchDelay (1 ms), so a rank writing a line at a time
//     costs a wake-up per millisecond, not per line; its output reaches the
//     file and the console that much later. drain() and finish() never wait.
//   - The console never stalls a rank or the loop. Lines go through the
//     bounded ring of the process's ConsoleWriter, drained by its writer
//     thread (log/console.h), the same ring trainit's own log lines take, in
//     order with them; a read goes straight
//     into the ring. When the ring lacks room for a read (kMinConsoleRead),
//     the whole lines it completes are held back: each rank keeps its latest
//     lines, up to kHeldTail bytes, and drops the older ones, counted in
//     console_dropped() and announced on the console once there is room.
//     Held lines are shown, after the notice, when the ring has room for
//     them and a read after them, or within kHeldRetry when it has room for
//     them alone, and at the latest by finish() and flush_console(): a rank's
//     last lines (its traceback) reach the console although a flood before
//     them did not. A line longer than kHeldTail is not held. The console
//     descriptor's flags are never changed (it is shared with the container
//     runtime: no O_NONBLOCK).
//   - Console lines are whole: a line is shown when its '\n' arrives, or, with
//     a '\n' added, at EOF or finish(); a line longer than kMaxLine is shown in
//     kMaxLine pieces as it comes, each with a '\n' added. Bytes pass as they
//     are (no UTF-8 check); lines of different ranks never interleave.
//   - A log file that cannot be opened or written (EROFS, EACCES, EIO, ...) is
//     reported once for that rank through the error handler and kept in
//     errors(); the rank goes on with the console only. A full disk or quota
//     (ENOSPC, EDQUOT) is reported once a spell: the file is kept, the pipe
//     read (the rank is not held), what cannot go in counted, and written
//     again once there is room (said at info level, with the bytes that did
//     not go in; a warning at the rank's end if the disk is still full). So is anything but a
//     regular file of one name found where the file goes (the directory is
//     the job user's, PID 1 root): a symbolic or hard link, a FIFO (never
//     waited on), a directory. The same holds once for
//     the console itself (its writer failed or could not start).
//
// Threads: every member is called from the loop thread (the thread that runs
// `loop`); io handlers run there. The only other thread is the console writer,
// which touches nothing but its ring and the console descriptor.
//
// Lifetime: the Loop must outlive the LogRelay. The relay owns the pipes' read
// ends and the files; the caller owns the write ends add_rank() returns.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "log/console.h"
#include "loop/loop.h"

namespace trainit {

struct RankLog {
  std::string prefix;     // console prefix for each whole line, e.g. "[rank 3] "
  std::string file_path;  // the rank's log file (created 0640, appended to); empty: console only
};

class LogRelay {
 public:
  // The longest console line; longer ones are split.
  static constexpr size_t kMaxLine = ConsoleWriter::kMaxLine;
  // Bytes read from a pipe at a time, and the pipe size asked for.
  static constexpr size_t kReadSize = 1 << 20;
  // Bytes read at a time when the console has no room (or there is no
  // console): the file gets them, the console drops them. Small, so that a
  // console that falls behind costs no more resident memory than its ring.
  static constexpr size_t kDirectReadSize = 64 << 10;
  // A read goes straight into the console's ring when it has this much room
  // (else into a buffer of our own, and its lines are held).
  static constexpr size_t kMinConsoleRead = 64 << 10;
  // The most of a rank's latest lines kept back while the console has no
  // room for them, and how often they are offered to it again.
  static constexpr size_t kHeldTail = 8 << 10;
  static constexpr std::chrono::milliseconds kHeldRetry{50};
  // A rank that writes little at a time (a line, a 4 KiB buffer) would wake
  // the loop, and the console writer, for every write: after a step that
  // took less than kBatchBelow, its pipe is left alone for kBatchDelay (by
  // default) and read in one go then. Output reaches the file and the
  // console at most that much later; a rank that writes faster fills more
  // than kBatchBelow per step and is never paused.
  static constexpr size_t kBatchBelow = 64 << 10;
  static constexpr std::chrono::microseconds kBatchDelay{1000};

  // Called on the loop thread, once per failure, with the rank's index (or
  // kConsole for the console) and an Error naming the path and the errno.
  static constexpr size_t kConsole = static_cast<size_t>(-1);
  using ErrorFn = std::function<void(size_t rank, const Error& error)>;

  // console: where whole lines go (rank output to its stdout stream); the
  // caller's, and it must outlive the relay. nullptr: no console (files only).
  LogRelay(Loop& loop, ConsoleWriter* console);
  LogRelay(const LogRelay&) = delete;
  LogRelay& operator=(const LogRelay&) = delete;
  // Unregisters the pipes and closes them and the files, then waits for the
  // console to take the held lines: at most ConsoleWriter::kStopTimeout (1 s),
  // and not at all when an earlier flush already ran out of time. The console
  // itself goes on (its owner stops it).
  ~LogRelay();

  // Where failures go. The default handler logs each as a warning through the
  // diagnostic logger; the runner may route them to its own reporting instead.
  void set_error_handler(ErrorFn fn) { on_error_ = std::move(fn); }
  // A handler that says each kind (errno) of a rank's log failure once, as a
  // warning, then at debug level (16 ranks on a full disk make one line, not
  // 16); the console's always.
  [[nodiscard]] static ErrorFn each_kind_once();
  // A failure of a rank's log found elsewhere (its directory), to the handler.
  void report(size_t rank, Error error);
  // How long a pipe that gave little is left alone (kBatchDelay); 0: read
  // at every wake-up (tests that step the loop one read at a time).
  void set_batch_delay(std::chrono::microseconds delay) { batch_delay_ = delay; }

  // Opens the rank's file (reporting a failure once, then console only) and a
  // pipe; returns the pipe's write end (O_CLOEXEC) for the child's stdout and
  // stderr — the caller passes it to spawn() and closes its copy after
  // spawning — or an Error when no pipe could be made (EMFILE, ENFILE) or the
  // loop refused it. The rank's index is the number of earlier add_rank()
  // calls, failed ones included.
  Result<Fd> add_rank(const RankLog& log);

  // Reads whatever the pipes hold right now (non-blocking, bounded) through to
  // the files and the console, shows any unterminated last line with a '\n'
  // added, and closes the pipes. Called when every process is gone, so that a
  // grandchild holding a pipe open never keeps trainit alive. Afterwards
  // all_closed() is true. Does not wait for the console: see flush_console().
  void finish();
  // Reads what rank `rank`'s pipe holds right now (non-blocking, bounded),
  // through to its file and the console, and leaves the pipe open (unless it
  // reached EOF). For a rank that just exited: everything it wrote is in its
  // pipe, and shown before whatever is logged about its exit.
  void drain(size_t rank);

  // Waits up to `timeout` for the console writer to have written every line
  // given to it so far (announcing drops first), held lines included: those
  // still held at the deadline are dropped. Returns whether it did.
  bool flush_console(std::chrono::milliseconds timeout);

  [[nodiscard]] bool all_closed() const;              // every pipe saw EOF (or finish() ran)
  [[nodiscard]] uint64_t console_dropped() const;     // bytes not shown on the console
  [[nodiscard]] uint64_t bytes(size_t rank) const;    // bytes relayed for rank (index in add order)
  [[nodiscard]] uint64_t spliced(size_t rank) const;  // of those, bytes moved to its file by splice(2)
  [[nodiscard]] size_t ranks() const { return ranks_.size(); }
  [[nodiscard]] const std::vector<Error>& errors() const { return errors_; }  // every failure reported

 private:
  struct Rank;

  int on_readable(Rank& rank);
  ssize_t relay_once(Rank& rank);
  ssize_t read_once(Rank& rank);
  ssize_t splice_once(Rank& rank);
  void start_splicing(Rank& rank);
  void stop_splicing(Rank& rank);
  [[nodiscard]] bool console_shown() const;
  int to_file(Rank& rank, const char* data, size_t n);
  void drain_pipe(Rank& rank);
  void to_console(Rank& rank, const char* data, size_t n, bool queued);
  void hold(Rank& rank, std::string_view a, std::string_view b);
  bool show_held(Rank& rank, size_t spare);
  bool show_all_held();
  void drop_held(Rank& rank);
  // Arms `timer`, a one-shot made at its first use, to call `fire` `delay`
  // from now, unless it is armed already.
  void arm_once(SourceHandle& timer, bool& armed, std::chrono::nanoseconds delay, void (LogRelay::*fire)(),
                const char* name);
  void retry_held();
  void pause(Rank& rank);
  void resume_paused();
  void close_rank(Rank& rank);
  void check_console();

  Loop& loop_;
  ConsoleWriter* console_;  // null: no console
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unique_ptr<char[]> buffer_;  // kDirectReadSize, allocated at the first add_rank()
  SourceHandle retry_;              // timer: offers held lines again; made at the first hold
  bool retry_armed_ = false;
  SourceHandle resume_;  // timer: watches paused pipes again; made at the first pause
  bool resume_armed_ = false;
  std::chrono::microseconds batch_delay_ = kBatchDelay;
  std::vector<Error> errors_;
  ErrorFn on_error_;
  bool console_reported_ = false;
};

}  // namespace trainit

#include "log/relay.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <span>

#include "base/log.h"
#include "base/safe_fs.h"
#include "base/time.h"

namespace trainit {

struct LogRelay::Rank {
  size_t index = 0;
  std::string prefix;
  std::string path;
  Fd pipe;  // read end, O_NONBLOCK
  Fd file;  // closed after the first failure but a full disk: console only from then on
  SourceHandle io;
  std::string held;     // whole lines the console had no room for, at most kHeldTail bytes
  std::string partial;  // the unterminated line, at most kMaxLine bytes
  size_t pipe_size = 0;
  uint64_t bytes = 0;
  uint64_t spliced = 0;
  uint64_t lost = 0;       // bytes the file could not take while its disk was full
  bool full = false;       // the last write found the disk full; the next one tries again
  bool refilled = false;   // a write went in after the disk was full: to be said
  bool splice = false;     // the pipe goes to the file by splice(2); the file is off O_APPEND
  bool no_splice = false;  // the file refused splice(2): reads and writes for good
  bool paused = false;     // its pipe is out of the loop's watch until resume_ fires
  bool closed = false;
};

namespace {

// A rank's log file, in a directory the job's user may write while PID 1 is
// root: whatever was planted at the name or in the path (a symbolic link, a
// FIFO, a hard link to a file elsewhere, another user's file) is refused,
// never followed or waited on (base/safe_fs.h). Mode 0640: the job's group
// may read it, nobody else.
Result<Fd> open_log_file(const std::string& path) {
  return safe_fs::open_file(path, O_WRONLY | O_CREAT | O_APPEND, 0640);
}

// Turns O_APPEND on or off for `fd`. Off fails on an append-only file
// (chattr +a: EPERM).
bool set_append(const Fd& fd, bool on) {
  const int flags = ::fcntl(fd.get(), F_GETFL);
  return flags >= 0 && ::fcntl(fd.get(), F_SETFL, on ? flags | O_APPEND : flags & ~O_APPEND) == 0;
}

// splice(2) refuses this file (its file system has no splice_write, or the
// descriptor is O_APPEND after all): the bytes stay in the pipe.
bool splice_refused(int e) {
  return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP;
}

// A disk (or quota) full for now: the file is kept, and written again once
// there is room (a log deleted, a quota raised), not given up for the job.
bool disk_full(int e) {
  return e == ENOSPC || e == EDQUOT;
}

// Moves `fd` above 2 when trainit was started with a standard descriptor
// closed: the write end would otherwise be the child's own 1 or 2 already,
// which spawn() leaves alone, and close-on-exec would close it at exec.
bool above_stdio(Fd& fd) {
  if (fd.get() > STDERR_FILENO) {
    return true;
  }
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  if (moved < 0) {
    return false;
  }
  fd.reset(moved);
  return true;
}

}  // namespace

LogRelay::LogRelay(Loop& loop, ConsoleWriter* console) : loop_(loop), console_(console) {}

LogRelay::~LogRelay() {
  for (auto& rank : ranks_) {
    close_rank(*rank);  // shows the unterminated lines; reads nothing more
  }
  if (console_ != nullptr) {
    flush_console(ConsoleWriter::kStopTimeout);  // the held lines too
  }
}

LogRelay::ErrorFn LogRelay::each_kind_once() {
  return [reported = std::vector<int>()](size_t rank, const Error& error) mutable {
    if (rank == kConsole) {
      log_warning("{}", error.message);
    } else if (std::find(reported.begin(), reported.end(), error.errnum) != reported.end()) {
      log_debug("{}", error.message);
    } else {
      reported.push_back(error.errnum);
      log_warning(
          "{}; the job goes on (said once: other ranks' log files and directories failing alike are not named; "
          "-v names each)",
          error.message);
    }
  };
}

void LogRelay::report(size_t rank, Error error) {
  errors_.push_back(error);
  try {
    if (on_error_) {
      on_error_(rank, error);
    } else {
      log_warning("{}", error.message);
    }
  } catch (...) {
    // A throwing handler must not disable the pipe's source: the file would
    // stop receiving bytes. The failure is in errors() all the same.
    log_debug("log relay error handler threw");
  }
}

// Whether rank output is shown on a console: there is one, and it has not
// failed. Where it is not, the ranks' files are fed by splice(2).
bool LogRelay::console_shown() const {
  return console_ != nullptr && !console_reported_;
}

void LogRelay::check_console() {
  if (console_reported_ || console_ == nullptr) {
    return;
  }
  int r = console_->error();
  if (r < 0) {
    console_reported_ = true;
    report(kConsole,
           Error{fmt::format("console: {}; rank output is no longer shown on the console", errno_string(-r)), -r});
  }
}

Result<Fd> LogRelay::add_rank(const RankLog& log) {
  auto owned = std::make_unique<Rank>();
  Rank& rank = *owned;
  rank.index = ranks_.size();
  rank.prefix = log.prefix;
  rank.path = log.file_path;
  rank.closed = true;  // until the pipe is registered
  ranks_.push_back(std::move(owned));

  if (buffer_ == nullptr) {
    buffer_.reset(new (std::nothrow) char[kDirectReadSize]);
    if (buffer_ == nullptr) {
      return Error{"log relay: cannot allocate its read buffer", ENOMEM};
    }
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) {
    int e = errno;
    return Error{fmt::format("log pipe for rank #{}: {}", rank.index, errno_string(e)), e};
  }
  rank.pipe.reset(fds[0]);
  Fd write_end(fds[1]);
  if (!above_stdio(rank.pipe) || !above_stdio(write_end)) {
    int e = errno;
    return Error{fmt::format("log pipe for rank #{}: {}", rank.index, errno_string(e)), e};
  }
  // Only our end is non-blocking: the rank's end stays as a terminal or a
  // shell pipe would be, so a rank that outruns us waits instead of failing.
  int flags = ::fcntl(rank.pipe.get(), F_GETFL);
  if (flags < 0 || ::fcntl(rank.pipe.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    int e = errno;
    return Error{fmt::format("log pipe for rank #{}: O_NONBLOCK: {}", rank.index, errno_string(e)), e};
  }
  // A larger pipe lets a rank write 1 MiB ahead of us. Unprivileged users are
  // capped by pipe-max-size and pipe-user-pages-soft: keep the default then.
  int size = ::fcntl(rank.pipe.get(), F_SETPIPE_SZ, static_cast<int>(kReadSize));
  if (size < 0) {
    size = ::fcntl(rank.pipe.get(), F_GETPIPE_SZ);
  }
  rank.pipe_size = size > 0 ? static_cast<size_t>(size) : 65536;

  if (!rank.path.empty()) {
    if (auto file = open_log_file(rank.path); !file) {
      report(rank.index, Error{fmt::format("log file {}: {}; the rank's output goes to the console only", rank.path,
                                           file.error().message),
                               file.error().errnum});
    } else {
      rank.file = std::move(*file);
      if (!console_shown()) {
        start_splicing(rank);
      }
    }
  }

  Rank* r = &rank;
  rank.io = loop_.add_io(
      rank.pipe.get(), EPOLLIN, [this, r](uint32_t) { return on_readable(*r); },
      fmt::format("log pipe of rank #{}", rank.index));
  if (!rank.io.enabled()) {
    rank.io.reset();
    rank.pipe.reset();
    rank.file.reset();
    return Error{fmt::format("log pipe for rank #{}: the loop cannot watch it", rank.index), EINVAL};
  }
  rank.closed = false;
  return write_end;
}

// One step of relaying the rank's pipe: splice_once() for a file alone,
// else read_once(). Returns bytes relayed, 0 at EOF, -EAGAIN when the pipe is
// empty, or -errno.
ssize_t LogRelay::relay_once(Rank& rank) {
  if (!rank.splice && !rank.no_splice && rank.file && !console_shown()) {
    start_splicing(rank);  // the console failed since the last step
  }
  if (rank.splice) {
    const ssize_t n = splice_once(rank);
    if (rank.splice) {
      return n;
    }
    // The file refused splice(2) or failed: the pipe is read this time and from now on.
  }
  return read_once(rank);
}

// One read from the rank's pipe, through to the file and the console. With a
// console, the read goes straight into a console record (after the rank's
// held lines, then its unfinished line) when the ring has room for them all,
// and into buffer_ when it has not: those lines are then held. Returns as
// relay_once().
ssize_t LogRelay::read_once(Rank& rank) {
  std::span<char> room;
  if (console_ != nullptr && show_held(rank, kMinConsoleRead)) {
    room = console_->begin(rank.prefix, rank.partial, kMinConsoleRead, kReadSize);
  }
  const bool queued = console_ != nullptr && !room.empty();  // a record of console_'s is open
  char* const data = queued ? room.data() : buffer_.get();
  const size_t size = queued ? room.size() : kDirectReadSize;
  ssize_t n;
  do {
    n = ::read(rank.pipe.get(), data, size);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    const ssize_t r = n < 0 ? -errno : 0;
    if (queued) {
      console_->cancel();
    }
    return r;
  }
  rank.bytes += static_cast<uint64_t>(n);
  const int file_error = to_file(rank, data, static_cast<size_t>(n));
  if (console_ != nullptr) {
    to_console(rank, data, static_cast<size_t>(n), queued);
  }
  if (rank.refilled) {  // said once the console's record is closed, as a failure is
    rank.refilled = false;
    log_info("log file {}: written again; {} byte{} of the rank's output so far could not go in (the disk was full)",
             rank.path, rank.lost, rank.lost == 1 ? "" : "s");
  }
  if (file_error != 0) {  // reported once the console's record is closed: the report may log
    report(rank.index,
           Error{fmt::format("log file {}: write: {}; {}", rank.path, errno_string(file_error),
                             disk_full(file_error) ? "the rank's output is kept out of it (the console still shows it) "
                                                     "until there is room again, and counted"
                                                   : "the rank's output goes to the console only"),
                 file_error});
  }
  return n;
}

// Files only: what the pipe holds, up to its size, moves to the end of the
// file in the kernel. Returns as relay_once(). A file that fails (ENOSPC, EIO)
// took nothing of this chunk (or a short count was returned): reported once,
// closed, and the splicing ends, as it does when splice(2) is refused; the
// caller then reads the pipe (see relay_once()).
ssize_t LogRelay::splice_once(Rank& rank) {
  // The file's end now, for this chunk: another descriptor of this file
  // (another rank's, a rank that ran before) may have written since.
  ssize_t n = ::lseek(rank.file.get(), 0, SEEK_END);
  if (n >= 0) {
    do {
      n = ::splice(rank.pipe.get(), nullptr, rank.file.get(), nullptr, rank.pipe_size, SPLICE_F_NONBLOCK);
    } while (n < 0 && errno == EINTR);
  }
  if (n >= 0) {
    rank.bytes += static_cast<uint64_t>(n);
    rank.spliced += static_cast<uint64_t>(n);
    if (console_ != nullptr) {
      console_->drop(static_cast<uint64_t>(n));  // counted as not shown, as the failed console's writer counts
    }
    return n;
  }
  const int e = errno;
  if (e == EAGAIN) {
    return -EAGAIN;
  }
  if (splice_refused(e) || disk_full(e)) {
    stop_splicing(rank);  // full: read, so that the rank is not held, and written when there is room
    return -e;
  }
  rank.splice = false;
  rank.file.reset();
  report(rank.index, Error{fmt::format("log file {}: write: {}; the rank's output goes to the console only", rank.path,
                                       errno_string(e)),
                           e});
  return -e;
}

// From now on the rank's pipe goes to its file by splice(2), which takes no
// O_APPEND descriptor; an append-only file (chattr +a) cannot be taken off
// it, and is read and written. A rank's held lines and its unfinished line
// will never be shown: they are in the file already, and counted as dropped.
void LogRelay::start_splicing(Rank& rank) {
  if (console_ != nullptr) {
    drop_held(rank);
    console_->drop(rank.partial.size());
    rank.partial.clear();
    rank.partial.shrink_to_fit();
  }
  rank.splice = set_append(rank.file, false);
  rank.no_splice = !rank.splice;
}

// Back to reads and writes for this rank's file, O_APPEND again (or, should
// that fail, no file: a write at its start would overwrite it).
void LogRelay::stop_splicing(Rank& rank) {
  rank.splice = false;
  rank.no_splice = true;
  if (!set_append(rank.file, true)) {
    const int e = errno;
    rank.file.reset();
    report(rank.index, Error{fmt::format("log file {}: O_APPEND: {}; the rank's output goes to the console only",
                                         rank.path, errno_string(e)),
                             e});
  }
}

int LogRelay::on_readable(Rank& rank) {
  ssize_t n = relay_once(rank);
  if (n == 0 || (n < 0 && n != -EAGAIN)) {
    if (n < 0) {
      log_debug("log pipe of rank #{}: read: {}", rank.index, errno_string(static_cast<int>(-n)));
    }
    close_rank(rank);  // EOF: every writer is gone
  } else if (n > 0 && static_cast<size_t>(n) < kBatchBelow) {
    pause(rank);  // it writes little at a time: let its pipe fill a while
  }
  if (console_ != nullptr) {
    console_->publish();
    check_console();
  }
  return 0;
}

// Returns 0, or the errno that closed the rank's file (console only from then on).
int LogRelay::to_file(Rank& rank, const char* data, size_t n) {
  while (n > 0 && rank.file) {
    ssize_t w = ::write(rank.file.get(), data, n);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w < 0 && disk_full(errno)) {
      rank.lost += n;
      const bool first = !rank.full;
      rank.full = true;
      return first ? errno : 0;  // said once a spell
    }
    if (w <= 0) {
      rank.file.reset();
      return w < 0 ? errno : EIO;
    }
    rank.refilled = rank.refilled || rank.full;
    rank.full = false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

// `data` (n bytes, just read) follows rank.partial, the rank's unfinished
// line. The whole lines of partial + data go to the console — in the record
// begin() opened when `queued`, or held when not — and the
// unterminated rest becomes rank.partial. The rest is kept to at most kMaxLine
// bytes: beyond that a line is shown in kMaxLine pieces as it comes (the
// writer cuts them), each with a '\n' added.
void LogRelay::to_console(Rank& rank, const char* data, size_t n, bool queued) {
  const size_t lead = rank.partial.size();
  const auto* nl = static_cast<const char*>(::memrchr(data, '\n', n));
  // Bytes of partial + data shown now: up to the last '\n' ...
  size_t shown = nl != nullptr ? lead + static_cast<size_t>(nl - data) + 1 : 0;
  // ... and whole kMaxLine pieces of an unterminated rest longer than kMaxLine,
  // leaving 1 to kMaxLine bytes in partial.
  const size_t rest = lead + n - shown;
  if (rest > kMaxLine) {
    shown += (rest - 1) / kMaxLine * kMaxLine;
  }
  if (shown == 0) {
    if (queued) {
      console_->cancel();  // no line ended: nothing to show yet
    }
    rank.partial.append(data, n);
    return;
  }
  // shown >= lead: a line ended in data, or the pieces cover all of partial.
  const size_t taken = shown - lead;
  if (queued) {
    console_->commit(taken);
  } else {
    hold(rank, rank.partial, {data, taken});
  }
  rank.partial.assign(data + taken, n - taken);
}

// Keeps a + b (lines: those a read completed, or the last one at close) after
// the rank's held lines; beyond kHeldTail the oldest are dropped, whole, and
// counted. The retry timer offers them to the console until it takes them.
void LogRelay::hold(Rank& rank, std::string_view a, std::string_view b) {
  const std::string_view parts[] = {rank.held, a, b};
  const size_t total = rank.held.size() + a.size() + b.size();
  if (rank.held.capacity() < kHeldTail) {
    rank.held.reserve(kHeldTail);  // once: held never grows past it
  }
  if (total <= kHeldTail) {
    rank.held.append(a).append(b);
  } else {
    // Keep from the first line start within the last kHeldTail bytes: after
    // the first '\n' at `from` or later; nothing if there is none.
    const size_t from = total - kHeldTail - 1;
    size_t start = total;
    size_t base = 0;
    for (std::string_view part : parts) {
      if (from < base + part.size()) {
        size_t at = part.find('\n', from > base ? from - base : 0);
        if (at != std::string_view::npos) {
          start = base + at + 1;
          break;
        }
      }
      base += part.size();
    }
    // In place: what is kept fits the capacity reserved above.
    base = rank.held.size();
    rank.held.erase(0, std::min(start, base));
    for (std::string_view part : {a, b}) {
      const size_t skip = std::min(part.size(), start - std::min(start, base));
      rank.held.append(part.substr(skip));
      base += part.size();
    }
    console_->drop(start);
  }
  if (!rank.held.empty()) {
    arm_once(retry_, retry_armed_, kHeldRetry, &LogRelay::retry_held, "held console lines");
  }
}

void LogRelay::arm_once(SourceHandle& timer, bool& armed, std::chrono::nanoseconds delay, void (LogRelay::*fire)(),
                        const char* name) {
  if (armed) {
    return;
  }
  const auto deadline = Clock::now() + delay;
  if (!timer) {
    timer = loop_.add_timer(
        deadline,
        [this, fire] {
          (this->*fire)();
          return 0;
        },
        name);
  } else {
    timer.set_deadline(deadline);
  }
  armed = true;
}

// Shows the rank's held lines, after the drop notice, when the ring has room
// for them and `spare` bytes more. Returns whether none are held now.
bool LogRelay::show_held(Rank& rank, size_t spare) {
  if (rank.held.empty()) {
    return true;
  }
  console_->begin(rank.prefix, rank.held, spare, spare);
  if (console_->opened()) {
    console_->commit(0);  // the record is the held lines alone
    rank.held.clear();
  } else if (!console_->started()) {
    drop_held(rank);  // the writer could not start: nothing will be shown
  }
  return rank.held.empty();
}

bool LogRelay::show_all_held() {
  bool all = true;
  for (auto& rank : ranks_) {
    all = show_held(*rank, 0) && all;
  }
  return all;
}

void LogRelay::drop_held(Rank& rank) {
  console_->drop(rank.held.size());
  rank.held.clear();
}

void LogRelay::retry_held() {
  retry_armed_ = false;
  const bool all = show_all_held();
  console_->publish();
  check_console();
  if (!all) {
    arm_once(retry_, retry_armed_, kHeldRetry, &LogRelay::retry_held, "held console lines");
  }
}

// Leaves the rank's pipe out of the loop's watch until resume_ fires,
// batch_delay_ from the first of the pauses it ends. drain() and finish()
// read a paused pipe all the same.
void LogRelay::pause(Rank& rank) {
  if (batch_delay_.count() <= 0) {
    return;
  }
  rank.io.set_enabled(false);
  if (rank.io.enabled()) {
    return;
  }
  rank.paused = true;
  arm_once(resume_, resume_armed_, batch_delay_, &LogRelay::resume_paused, "paused log pipes");
}

// Watches every paused pipe again: what it holds is read at the next wake-up.
void LogRelay::resume_paused() {
  resume_armed_ = false;
  bool again = false;
  for (auto& rank : ranks_) {
    if (rank->paused && !rank->closed) {
      rank->io.set_enabled(true);
      if (!rank->io.enabled()) {  // epoll_ctl failed (ENOMEM): read it at the next resume instead
        drain_pipe(*rank);
        again = again || !rank->closed;
        continue;
      }
    }
    rank->paused = false;
  }
  if (console_ != nullptr) {
    console_->publish();
    check_console();
  }
  if (again) {
    arm_once(resume_, resume_armed_, batch_delay_, &LogRelay::resume_paused, "paused log pipes");
  }
}

void LogRelay::close_rank(Rank& rank) {
  if (rank.closed) {
    return;
  }
  rank.closed = true;
  rank.io.reset();  // out of the epoll set before the descriptor closes
  rank.pipe.reset();
  if (rank.full && rank.file) {
    log_warning("log file {}: {} byte{} of the rank's output are not in it: the disk was full", rank.path, rank.lost,
                rank.lost == 1 ? "" : "s");
  }
  rank.file.reset();
  rank.splice = false;
  if (console_ == nullptr) {
    return;
  }
  if (!rank.partial.empty()) {
    if (rank.held.empty() && rank.partial.size() > kHeldTail) {
      console_->append(rank.prefix, rank.partial, {});  // too long to hold: now or never
    } else {
      hold(rank, rank.partial, {});
    }
    rank.partial.clear();
    rank.partial.shrink_to_fit();
  }
  show_held(rank, 0);
}

// What the pipe holds now, and no more: a grandchild still writing must not
// keep us here. Closes the pipe at its EOF (or a read error).
void LogRelay::drain_pipe(Rank& rank) {
  size_t budget = 2 * std::max(rank.pipe_size, kReadSize);
  while (budget > 0 && !rank.closed) {
    ssize_t n = relay_once(rank);
    if (n == 0 || (n < 0 && n != -EAGAIN)) {
      close_rank(rank);  // every writer is gone, or the pipe failed
    }
    if (n <= 0) {
      break;
    }
    budget -= std::min(budget, static_cast<size_t>(n));
  }
}

void LogRelay::drain(size_t rank) {
  if (rank < ranks_.size() && !ranks_[rank]->closed) {
    drain_pipe(*ranks_[rank]);
    if (console_ != nullptr) {
      console_->publish();
      check_console();
    }
  }
}

void LogRelay::finish() {
  for (auto& rank : ranks_) {
    drain_pipe(*rank);
    close_rank(*rank);
  }
  if (console_ != nullptr) {
    console_->publish();
    check_console();
  }
}

bool LogRelay::flush_console(std::chrono::milliseconds timeout) {
  if (console_ == nullptr) {
    return true;
  }
  // Held lines wait for room: the ring empties, and then they fit (each rank
  // holds at most kHeldTail), unless the writer is stuck until the deadline.
  const auto deadline = Clock::now() + timeout;
  const auto held = [this] {
    return std::count_if(ranks_.begin(), ranks_.end(), [](const auto& rank) { return !rank->held.empty(); });
  };
  bool flushed = false;
  bool shown = false;
  for (int round = 0;; ++round) {
    const auto before = held();
    shown = show_all_held();
    const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
    flushed = console_->flush(std::chrono::ceil<std::chrono::milliseconds>(left));
    if (shown || !flushed || (round > 0 && held() == before)) {
      break;  // all shown; out of time; or an empty ring took none
    }
  }
  if (!shown) {
    for (auto& rank : ranks_) {
      drop_held(*rank);
    }
  }
  check_console();
  return flushed && shown;
}

bool LogRelay::all_closed() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const auto& rank) { return rank->closed; });
}

uint64_t LogRelay::console_dropped() const {
  return console_ != nullptr ? console_->dropped() : 0;
}

uint64_t LogRelay::bytes(size_t rank) const {
  return rank < ranks_.size() ? ranks_[rank]->bytes : 0;
}

uint64_t LogRelay::spliced(size_t rank) const {
  return rank < ranks_.size() ? ranks_[rank]->spliced : 0;
}

}  // namespace trainit

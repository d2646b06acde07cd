#include "log/console.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "base/log.h"

namespace trainit {

namespace {

constexpr size_t kCacheLine = 64;
constexpr size_t kAlign = 16;

// The head of every record in the ring. A record holds a prefix and a run of
// whole lines; a '\n' is added after the run when it lacks one. A pad record
// fills the ring's end when the next record does not fit there. Records never
// wrap, and are kAlign-aligned so that a pad header always fits at the end.
struct Record {
  uint32_t size;      // the whole record, header included, a multiple of kAlign
  uint32_t data_len;  // 0 for a pad
  uint16_t prefix_len;
  uint8_t pad;    // 1: skip to the ring's end
  Stream stream;  // where the lines go
  uint8_t unused[4];
};
static_assert(sizeof(Record) == kAlign);

constexpr size_t record_size(size_t prefix, size_t data) {
  return (sizeof(Record) + prefix + data + kAlign - 1) & ~(kAlign - 1);
}

constexpr size_t kNoticeMax = 96;  // "[trainit] N bytes ..." with N up to 20 digits
constexpr size_t kNoticeRecord = record_size(0, kNoticeMax);

size_t round_capacity(size_t capacity) {
  size_t c = ConsoleWriter::kMinCapacity;
  while (c < capacity && c < (size_t{1} << 30)) {
    c <<= 1;
  }
  return c;
}

}  // namespace

struct ConsoleWriter::Shared {
  Shared(Fd out, Fd err, size_t capacity_in)
      : fds{std::move(out), std::move(err)}, capacity(capacity_in), ring(new char[capacity_in]) {}

  const Fd fds[2];                     // our duplicates of stdout and stderr: closed with the last reference
  const size_t capacity;               // a power of two
  const std::unique_ptr<char[]> ring;  // records in [tail, head) modulo capacity are the consumer's

  // Written by the producer only (release, after the records it covers); read
  // by the consumer (acquire, before reading those records).
  alignas(kCacheLine) std::atomic<uint64_t> head{0};
  // Written by the consumer only (release, once the records before it are
  // written out); read by the producer (acquire, before reusing that room).
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};
  // Written by the consumer; read by the producer for reporting only, so
  // neither orders anything else: relaxed.
  std::atomic<uint64_t> discarded{0};  // rank output dropped after stdout failed
  std::atomic<int> write_error{0};     // the negative errno that ended stdout

  // Sleeping and waking. `stop` and `done` are guarded by `mutex`.
  alignas(kCacheLine) std::mutex mutex;
  std::condition_variable wake;  // consumer waits: records published, or stop
  std::condition_variable idle;  // producer waits: everything written, or done
  bool stop = false;
  bool done = false;
};

namespace {

// Writes the `n` buffers at `iov` to the console, blocking; `iov` is
// consumed. Returns 0 or -errno. EAGAIN (someone else made the shared
// descriptor non-blocking) waits for POLLOUT instead of spinning; the
// descriptor's flags are never changed.
int writev_all(int fd, struct iovec* iov, size_t n) noexcept {
  while (n > 0) {
    ssize_t w = ::writev(fd, iov, static_cast<int>(std::min<size_t>(n, IOV_MAX)));
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        struct pollfd p {};
        p.fd = fd;
        p.events = POLLOUT;
        ::poll(&p, 1, 100);
        continue;
      }
      return -errno;
    }
    auto left = static_cast<size_t>(w);
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return 0;
}

// The consumer: the writer thread's whole life. Lines go out straight from
// the ring, each as two or three iovecs (prefix, line, perhaps '\n'), many
// lines to a writev(2); records are released once their lines are written.
class Writer {
 public:
  explicit Writer(ConsoleWriter::Shared& s) noexcept
      : s_(s), mask_(s.capacity - 1), pos_(s.tail.load(std::memory_order_relaxed)), done_(pos_), released_(pos_) {}

  void run() noexcept {
    for (;;) {
      if (pos_ != s_.head.load(std::memory_order_acquire)) {
        take_record();
        continue;
      }
      if (count_ > 0 || released_ != done_) {
        flush();
        continue;
      }
      std::unique_lock lock(s_.mutex);
      s_.idle.notify_all();  // all written: a flush() may be waiting for this
      // The producer publishes head before it sets stop, so a stop seen here
      // with nothing new means everything has been written.
      if (s_.stop && s_.head.load(std::memory_order_acquire) == pos_) {
        s_.done = true;
        s_.idle.notify_all();
        return;
      }
      s_.wake.wait(lock, [&] { return s_.stop || s_.head.load(std::memory_order_acquire) != pos_; });
    }
  }

 private:
  static constexpr size_t kIov = 1020;         // a multiple of 3 below IOV_MAX
  static constexpr size_t kBatch = 256 << 10;  // bytes per writev, so room returns early

  // Queues the lines of the record at pos_.
  void take_record() noexcept {
    const char* at = s_.ring.get() + (pos_ & mask_);
    Record h;
    std::memcpy(&h, at, sizeof(h));
    if (h.pad == 0) {
      if (count_ > 0 && h.stream != stream_) {
        flush();  // one writev(2) per descriptor; the order between them is kept
      }
      stream_ = h.stream;
      const std::string_view prefix(at + sizeof(h), h.prefix_len);
      const char* p = at + sizeof(h) + h.prefix_len;
      const char* const end = p + h.data_len;
      if (failed_[index()]) {
        if (stream_ == Stream::kOut) {
          s_.discarded.fetch_add(h.data_len, std::memory_order_relaxed);
        }
      } else if (p == end) {
        line(prefix, p, 0);  // an empty line
      } else {
        while (p < end) {
          const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
          const char* const stop = nl != nullptr ? nl : end;  // the line's text ends here
          while (static_cast<size_t>(stop - p) > ConsoleWriter::kMaxLine) {
            line(prefix, p, ConsoleWriter::kMaxLine);  // too long: cut, each piece with a '\n' added
            p += ConsoleWriter::kMaxLine;
          }
          const char* const next = nl != nullptr ? nl + 1 : end;
          line(prefix, p, static_cast<size_t>(next - p));
          p = next;
        }
      }
    }
    pos_ += h.size;
    done_ = pos_;
  }

  void line(std::string_view prefix, const char* text, size_t len) noexcept {
    if (count_ + 3 > kIov || bytes_ >= kBatch) {
      flush();  // releases the records before this one
    }
    push(prefix.data(), prefix.size());
    push(text, len);
    if (len == 0 || text[len - 1] != '\n') {
      push(&kNewline, 1);
    }
    text_ += len;
  }

  void push(const char* data, size_t n) noexcept {
    if (n > 0) {
      iov_[count_].iov_base = const_cast<char*>(data);  // writev(2) only reads it
      iov_[count_].iov_len = n;
      ++count_;
      bytes_ += n;
    }
  }

  [[nodiscard]] size_t index() const noexcept { return static_cast<size_t>(stream_); }

  // Writes the queued lines out and releases the records they came from.
  // Stdout's failure ends the rank output on the console (error() says so);
  // stderr's only drops trainit's lines: there is nowhere left to say it.
  void flush() noexcept {
    if (count_ > 0 && !failed_[index()]) {
      int r = writev_all(s_.fds[index()].get(), iov_, count_);
      if (r < 0) {
        failed_[index()] = true;
        if (stream_ == Stream::kOut) {
          s_.write_error.store(r, std::memory_order_relaxed);
        }
      }
    }
    if (failed_[index()] && stream_ == Stream::kOut) {
      s_.discarded.fetch_add(text_, std::memory_order_relaxed);  // roughly: a failing writev may have written some
    }
    count_ = 0;
    bytes_ = 0;
    text_ = 0;
    if (released_ != done_) {
      released_ = done_;
      s_.tail.store(released_, std::memory_order_release);
    }
  }

  static constexpr char kNewline = '\n';

  ConsoleWriter::Shared& s_;
  const uint64_t mask_;
  uint64_t pos_;       // the next record to take
  uint64_t done_;      // records before it are queued or written
  uint64_t released_;  // the tail last stored
  struct iovec iov_[kIov];
  size_t count_ = 0;              // iovecs queued
  size_t bytes_ = 0;              // bytes queued
  uint64_t text_ = 0;             // of which line text: what is counted when lost
  Stream stream_ = Stream::kOut;  // where the queued lines go
  bool failed_[2] = {false, false};
};

}  // namespace

ConsoleWriter::ConsoleWriter(int out_fd, int err_fd, size_t capacity) noexcept : capacity_(round_capacity(capacity)) {
  // A duplicate shares the open file (offset, flags: nothing is changed on it)
  // and lets a writer left blocked in stop() outlive the caller's descriptor.
  // A stream without one fails at its first write (EBADF) and is dropped.
  const int fds[2] = {out_fd, err_fd};
  for (size_t i = 0; i < 2; ++i) {
    if (fds[i] >= 0) {
      fds_[i].reset(::fcntl(fds[i], F_DUPFD_CLOEXEC, 3));
    }
  }
}

ConsoleWriter::~ConsoleWriter() {
  stop(kStopTimeout);
}

int ConsoleWriter::start() noexcept {
  if (start_error_ != 0) {
    return start_error_;
  }
  std::shared_ptr<Shared> state;
  try {
    state = std::make_shared<Shared>(std::move(fds_[0]), std::move(fds_[1]), capacity_);
  } catch (const std::bad_alloc&) {
    return start_error_ = -ENOMEM;
  }
  // The thread inherits the creating thread's mask: block everything while it
  // is created, so no signal is ever delivered to it (they stay for the loop's
  // signalfd), and restore the loop thread's mask at once.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    thread_ = std::thread([state] {
      ::pthread_setname_np(::pthread_self(), "trainit-console");  // for ps, top and gdb
      Writer(*state).run();
    });
  } catch (const std::system_error& e) {
    start_error_ = e.code().value() > 0 ? -e.code().value() : -EAGAIN;
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (start_error_ != 0) {
    log_debug("console writer thread: {}", errno_string(-start_error_));
    return start_error_;
  }
  state_ = std::move(state);
  return 0;
}

uint64_t ConsoleWriter::free_bytes() noexcept {
  tail_seen_ = state_->tail.load(std::memory_order_acquire);
  return capacity_ - (head_ - tail_seen_);
}

// The largest record that fits now, padding the ring's end if need be.
size_t ConsoleWriter::largest_record() noexcept {
  const uint64_t free = free_bytes();
  const size_t end_room = capacity_ - (head_ & (capacity_ - 1));
  if (free < end_room) {
    return free;
  }
  return std::max<size_t>(end_room, free - end_room);
}

// `size` contiguous bytes at head_, after a pad record at the ring's end if
// they do not fit there; nullptr when the ring lacks room. head_ moves past the
// pad only.
char* ConsoleWriter::reserve(size_t size) noexcept {
  size_t offset = head_ & (capacity_ - 1);
  const size_t end_room = capacity_ - offset;
  const uint64_t need = size <= end_room ? size : end_room + size;
  // The cached tail first: most records fit without touching the consumer's line.
  if (capacity_ - (head_ - tail_seen_) < need && free_bytes() < need) {
    return nullptr;
  }
  char* ring = state_->ring.get();
  if (size > end_room) {
    Record pad{};
    pad.size = static_cast<uint32_t>(end_room);
    pad.pad = 1;
    std::memcpy(ring + offset, &pad, sizeof(pad));
    head_ += end_room;
    offset = 0;
  }
  return ring + offset;
}

bool ConsoleWriter::ready() noexcept {
  return !stopped_ && (state_ != nullptr || start() == 0);
}

std::span<char> ConsoleWriter::begin(std::string_view prefix, std::string_view lead, size_t min, size_t max,
                                     Stream stream) {
  open_ = nullptr;
  if (!ready()) {
    return {};
  }
  prefix = prefix.substr(0, kMaxPrefix);
  const size_t overhead = sizeof(Record) + prefix.size() + lead.size();
  if (notice_pending_ > 0 || log_pending_ > 0) {
    // The notices go first, and only together with the lines: alone they
    // would be followed at once by another. With this much free, all fit
    // whatever padding the ring's end needs.
    if (free_bytes() < 3 * (kNoticeRecord + overhead + min + kAlign) || !append_notices()) {
      return {};
    }
  }
  const size_t largest = largest_record();
  if (largest < overhead + min) {
    return {};
  }
  const size_t room = std::min(max, largest - overhead);
  char* at = reserve(record_size(prefix.size(), lead.size() + room));
  if (at == nullptr) {
    return {};  // cannot happen: largest_record() said it fits
  }
  char* out = at + sizeof(Record);
  for (std::string_view piece : {prefix, lead}) {
    if (!piece.empty()) {  // string_view{} may hold a null pointer, which memcpy must not see
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
  }
  open_ = at;
  open_prefix_ = prefix.size();
  open_lead_ = lead.size();
  open_stream_ = stream;
  return {out, room};
}

void ConsoleWriter::commit(size_t n) noexcept {
  if (open_ == nullptr) {
    return;
  }
  Record h{};
  h.data_len = static_cast<uint32_t>(open_lead_ + n);
  h.prefix_len = static_cast<uint16_t>(open_prefix_);
  h.stream = open_stream_;
  h.size = static_cast<uint32_t>(record_size(open_prefix_, h.data_len));
  std::memcpy(open_, &h, sizeof(h));
  open_ = nullptr;
  head_ += h.size;
  // Visible to the consumer now; it is woken at publish().
  state_->head.store(head_, std::memory_order_release);
}

void ConsoleWriter::cancel() noexcept {
  open_ = nullptr;
  if (state_ != nullptr) {
    state_->head.store(head_, std::memory_order_release);  // a pad, perhaps
  }
}

void ConsoleWriter::drop(uint64_t bytes) noexcept {
  dropped_ += bytes;
  notice_pending_ += bytes;
}

// Each stream's "not shown" notice, where something was dropped.
bool ConsoleWriter::append_notices() noexcept {
  char text[kNoticeMax];
  if (error() < 0) {
    // Stdout failed for good: there is nowhere to say it, and the writer
    // would count the notice's own text as rank output lost.
    notice_pending_ = 0;
  }
  if (notice_pending_ > 0) {
    auto end = fmt::format_to_n(text, sizeof(text), "[trainit] {} bytes of rank output not shown on the console\n",
                                notice_pending_);
    if (!append_notice(Stream::kOut, {text, std::min(end.size, sizeof(text))})) {
      return false;
    }
    notice_pending_ = 0;
  }
  if (log_pending_ > 0) {
    auto end = fmt::format_to_n(text, sizeof(text), "[trainit] {} line{} of trainit's log not shown on the console\n",
                                log_pending_, log_pending_ == 1 ? "" : "s");
    if (!append_notice(Stream::kErr, {text, std::min(end.size, sizeof(text))})) {
      return false;
    }
    log_pending_ = 0;
  }
  return true;
}

bool ConsoleWriter::append_notice(Stream stream, std::string_view text) noexcept {
  char* at = reserve(record_size(0, text.size()));
  if (at == nullptr) {
    return false;
  }
  Record h{};
  h.data_len = static_cast<uint32_t>(text.size());
  h.size = static_cast<uint32_t>(record_size(0, text.size()));
  h.stream = stream;
  std::memcpy(at, &h, sizeof(h));
  std::memcpy(at + sizeof(h), text.data(), text.size());
  head_ += h.size;
  state_->head.store(head_, std::memory_order_release);
  return true;
}

void ConsoleWriter::log_line(std::string_view line) noexcept {
  if (!ready()) {
    // No writer (it could not start, or was stopped): straight to stderr when
    // it takes the line now, else dropped.
    if (write_now(STDERR_FILENO, line)) {
      return;
    }
  } else if (open_ == nullptr) {
    // (A rank's record open, the relay between begin() and commit(), cannot
    // be interleaved: the line is dropped, as when the ring is full.)
    begin({}, line, 0, 0, Stream::kErr);
    if (open_ != nullptr) {
      commit(0);
      publish();
      return;
    }
  }
  ++log_dropped_;
  ++log_pending_;
}

size_t ConsoleWriter::append(std::string_view prefix, std::string_view a, std::string_view b, Stream stream) {
  const size_t text = a.size() + b.size();
  if (!ready()) {
    dropped_ += text;
    return 0;
  }
  std::span<char> room = begin(prefix, a, b.size(), b.size(), stream);
  if (open_ == nullptr) {
    drop(text);
    return 0;
  }
  if (!b.empty()) {
    std::memcpy(room.data(), b.data(), b.size());
  }
  commit(b.size());
  return text;
}

void ConsoleWriter::publish() {
  if (state_ == nullptr) {
    return;
  }
  {
    // Taking the mutex orders the head stored above before the consumer's
    // predicate check, so the wake-up cannot be lost.
    std::lock_guard lock(state_->mutex);
  }
  state_->wake.notify_one();
}

bool ConsoleWriter::flush(std::chrono::milliseconds timeout) {
  if (state_ == nullptr) {
    return true;
  }
  if ((notice_pending_ > 0 || log_pending_ > 0) && !stopped_ && open_ == nullptr) {
    append_notices();
  }
  publish();
  const uint64_t tail = state_->tail.load(std::memory_order_acquire);
  if (stuck_ && tail == stuck_tail_) {
    timeout = std::chrono::milliseconds(0);  // it made us wait in vain before, and has written nothing since
  }
  std::unique_lock lock(state_->mutex);
  const bool flushed = state_->idle.wait_for(
      lock, timeout, [&] { return state_->done || state_->tail.load(std::memory_order_acquire) == head_; });
  stuck_ = !flushed;
  stuck_tail_ = state_->tail.load(std::memory_order_acquire);
  return flushed;
}

bool ConsoleWriter::stop(std::chrono::milliseconds timeout) {
  if (stopped_) {
    return joined_;
  }
  if (state_ == nullptr) {
    stopped_ = true;
    return joined_ = true;
  }
  // A writer that could not write everything in time is blocked in write(2):
  // no second wait for it to end.
  const bool flushed = flush(timeout);
  const auto deadline = std::chrono::steady_clock::now() + (flushed ? timeout : std::chrono::milliseconds(0));
  stopped_ = true;
  std::unique_lock lock(state_->mutex);
  state_->stop = true;
  state_->wake.notify_one();
  joined_ = state_->idle.wait_until(lock, deadline, [&] { return state_->done; });
  lock.unlock();
  if (joined_) {
    thread_.join();  // it has set `done` and only returns now
  } else {
    // Blocked in write(2) to a console nobody reads. Its own reference keeps
    // the ring alive until it returns; the process is about to exit anyway.
    log_debug("console writer still blocked in write(2) after {} ms; leaving it", timeout.count());
    thread_.detach();
  }
  return joined_;
}

uint64_t ConsoleWriter::dropped() const noexcept {
  uint64_t discarded = state_ != nullptr ? state_->discarded.load(std::memory_order_relaxed) : 0;
  return dropped_ + discarded;
}

int ConsoleWriter::error() const noexcept {
  if (start_error_ != 0) {
    return start_error_;
  }
  return state_ != nullptr ? state_->write_error.load(std::memory_order_relaxed) : 0;
}

}  // namespace trainit

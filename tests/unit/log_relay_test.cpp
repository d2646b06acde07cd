// The log relay against the real kernel: real pipes, forked ranks, the loop
// stepped one run_once() at a time, a console pipe read (or not) by the test,
// and tmpfs mounts for full and read-only log directories.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "emulation.h"
#include "log/console.h"
#include "log/relay.h"
#include "loop/loop.h"
#include "proc/spawn.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;

// --- data ------------------------------------------------------------------

// xorshift64*: the same stream in the rank and in the test.
struct Random {
  uint64_t state;
  uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ULL;
  }
  void fill(char* out, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
      uint64_t v = next();
      std::memcpy(out + i, &v, std::min<size_t>(8, n - i));
    }
  }
};

uint64_t fnv1a(uint64_t hash, const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    hash = (hash ^ static_cast<unsigned char>(data[i])) * 1099511628211ULL;
  }
  return hash;
}
constexpr uint64_t kFnvBasis = 14695981039346656037ULL;

// `bytes` bytes of numbered text lines of varying length, ending with '\n'.
std::string text_lines(size_t bytes, uint64_t seed) {
  std::string out;
  out.reserve(bytes);
  Random random{seed};
  for (size_t i = 0; out.size() < bytes; ++i) {
    std::string line = "line " + std::to_string(i) + " ";
    line.append(random.next() % 160, static_cast<char>('a' + i % 26));
    line += '\n';
    out += line;
  }
  out.resize(bytes);
  out.back() = '\n';
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// /proc/self/task/TID of the console writer thread, or "" when there is none.
std::string writer_task() {
  std::string found;
  DIR* dir = ::opendir("/proc/self/task");
  while (dirent* e = ::readdir(dir)) {
    std::string task = std::string("/proc/self/task/") + e->d_name;
    if (e->d_name[0] != '.' && read_file(task + "/comm") == "trainit-console\n") {
      found = task;
    }
  }
  ::closedir(dir);
  return found;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  return lines;
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// --- a console the test reads ----------------------------------------------

// A pipe standing for trainit's stdout, read to EOF by a thread of its own.
class ConsoleCapture {
 public:
  ConsoleCapture() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    ::fcntl(write_.get(), F_SETPIPE_SZ, 1 << 20);
    thread_ = std::thread([this] {
      char buf[65536];
      ssize_t n;
      while ((n = ::read(read_.get(), buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
        data_.append(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
      }
    });
  }
  ~ConsoleCapture() { take(); }
  [[nodiscard]] int fd() const { return write_.get(); }
  // Closes the write end (the relay must be gone) and returns all that was read.
  std::string take() {
    write_.reset();
    if (thread_.joinable()) {
      thread_.join();
    }
    return data_;
  }

 private:
  Fd read_, write_;
  std::thread thread_;
  std::string data_;
};

// A console that falls behind: a one-page pipe nobody reads until resume()
// starts a thread reading it to EOF (or, should a test end early while the
// relay still holds the pipe, until the destructor stops it).
class StalledConsole {
 public:
  StalledConsole() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    ::fcntl(write_.get(), F_SETPIPE_SZ, 4096);  // full after a page
  }
  ~StalledConsole() {
    stop_ = true;
    take();
  }
  StalledConsole(const StalledConsole&) = delete;
  StalledConsole& operator=(const StalledConsole&) = delete;
  [[nodiscard]] int fd() const { return write_.get(); }
  // The read end, for a test that reads it itself or closes it.
  Fd& read_end() { return read_; }
  void resume() {
    thread_ = std::thread([this] {
      char buf[65536];
      while (!stop_) {
        pollfd readable{read_.get(), POLLIN, 0};
        if (::poll(&readable, 1, 50) <= 0) {
          continue;
        }
        ssize_t n = ::read(read_.get(), buf, sizeof(buf));
        if (n <= 0) {
          break;
        }
        std::lock_guard lock(mutex_);
        data_.append(buf, static_cast<size_t>(n));
      }
    });
  }
  [[nodiscard]] bool shows(const std::string& text) {
    std::lock_guard lock(mutex_);
    return data_.find(text) != std::string::npos;
  }
  // Closes the write end (the relay must be gone) and returns all that was read.
  std::string take() {
    write_.reset();
    if (thread_.joinable()) {
      thread_.join();
    }
    std::lock_guard lock(mutex_);
    return data_;
  }

 private:
  Fd read_, write_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::string data_;
};

// --- the fixture -------------------------------------------------------------

// A relay with a console of its own (rank output to `fd`, nothing to stderr),
// as the runner has the process's console: made before the relay, ended
// after it (its writer is stopped, and its duplicate of `fd` closed, last).
struct OwnConsole {
  OwnConsole(int fd, size_t capacity) {
    if (fd >= 0) {
      console.emplace(fd, -1, capacity);
    }
  }
  std::optional<ConsoleWriter> console;
};
class OwnedRelay : private OwnConsole, public LogRelay {
 public:
  OwnedRelay(Loop& loop, int fd, size_t capacity)
      : OwnConsole(fd, capacity), LogRelay(loop, console ? &*console : nullptr) {}
};

class LogRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(loop_.init(), 0);
    char tmpl[] = "/tmp/trainit-log-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    null_.reset(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(null_);
  }
  void TearDown() override {
    relay_.reset();
    for (const auto& m : mounts_) {
      ::umount2(m.c_str(), MNT_DETACH);
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Mounts a tmpfs with `options` on a new directory under dir_; "" when
  // mounting is not allowed here (the test then skips and says why).
  std::string mount_tmpfs(const std::string& name, const char* options, unsigned long flags = 0) {
    std::string path = dir_ + "/" + name;
    EXPECT_EQ(::mkdir(path.c_str(), 0755), 0);
    if (::mount("none", path.c_str(), "tmpfs", flags, options) < 0) {
      EXPECT_EQ(errno, EPERM) << "mount tmpfs: " << std::strerror(errno);
      return "";
    }
    mounts_.push_back(path);
    return path;
  }

  LogRelay& make_relay(int console_fd, size_t capacity = 8 << 20) {
    relay_.emplace(loop_, console_fd, capacity);
    relay_->set_error_handler([this](size_t rank, const Error& e) { reported_.emplace_back(rank, e.errnum); });
    return *relay_;
  }

  Fd add(const std::string& prefix, const std::string& file) {
    auto r = relay_->add_rank(RankLog{prefix, file});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : Fd();
  }

  // Forks a rank whose stdout and stderr are `out` (as spawn() would set
  // them), runs `body` and exits 0; closes the parent's copy of `out`.
  template <typename Body>
  pid_t fork_rank(Fd& out, Body body) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(out.get(), 1);
      ::dup2(out.get(), 2);
      ::close_range(3, ~0U, 0);
      body();
      ::_exit(0);
    }
    out.reset();
    return pid;
  }

  // Registers `pid` with the loop (the one reaper); `*gone` turns true when reaped.
  void watch(pid_t pid, bool* gone, int* status = nullptr) {
    children_.push_back(loop_.add_child(
        pid,
        [gone, status](const siginfo_t& info) {
          *gone = true;
          if (status != nullptr) {
            *status = info.si_code == CLD_KILLED ? 128 + info.si_status : info.si_status;
          }
          return 0;
        },
        "rank"));
  }

  template <typename Pred>
  bool step_until(Pred done, std::chrono::seconds limit = 20s) {
    auto until = Clock::now() + limit;
    while (!done() && Clock::now() < until) {
      EXPECT_GE(loop_.run_once(100), 0);
    }
    return done();
  }

  Loop loop_;
  std::string dir_;
  Fd null_;
  std::optional<OwnedRelay> relay_;
  std::vector<SourceHandle> children_;
  std::vector<std::string> mounts_;
  std::vector<std::pair<size_t, int>> reported_;  // (rank, errno) per report
};

// --- files -------------------------------------------------------------------

TEST_F(LogRelayTest, EveryByteReachesTheFileWhenTheRankIsKilledMidLine) {
  constexpr size_t kTotal = 64 << 20;
  constexpr uint64_t kSeed = 0x5eed;
  constexpr char kTail[] = "killed in the middle of this line";  // no '\n'
  auto& relay = make_relay(null_.get());
  const std::string file = dir_ + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  pid_t pid = fork_rank(out, [&] {
    static char block[65536];
    Random random{kSeed};
    for (size_t done = 0; done < kTotal; done += sizeof(block)) {
      random.fill(block, sizeof(block));
      write_all(1, block, sizeof(block));
    }
    write_all(1, kTail, sizeof(kTail) - 1);
    ::raise(SIGKILL);
  });
  bool gone = false;
  int status = 0;
  watch(pid, &gone, &status);
  ASSERT_TRUE(step_until([&] { return gone; }));
  EXPECT_EQ(status, 128 + SIGKILL);
  relay.finish();  // what the pipe still holds: the runner calls this once every process is gone
  EXPECT_TRUE(relay.all_closed());

  uint64_t expected = kFnvBasis;
  {
    std::vector<char> block(65536);
    Random random{kSeed};
    for (size_t done = 0; done < kTotal; done += block.size()) {
      random.fill(block.data(), block.size());
      expected = fnv1a(expected, block.data(), block.size());
    }
    expected = fnv1a(expected, kTail, sizeof(kTail) - 1);
  }
  const std::string got = read_file(file);
  EXPECT_EQ(got.size(), kTotal + sizeof(kTail) - 1);
  EXPECT_EQ(fnv1a(kFnvBasis, got.data(), got.size()), expected);
  EXPECT_EQ(relay.bytes(0), kTotal + sizeof(kTail) - 1);
  EXPECT_TRUE(relay.errors().empty());
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // the job's group may read it, nobody else
}

TEST_F(LogRelayTest, FinishDrainsWhatAGrandchildLeftAndClosesItsPipe) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  const std::string file = dir_ + "/r.log";
  // The test keeps the write end, as a grandchild of the rank would.
  Fd out = add("[r] ", file);
  const std::string data = "first\nsecond\npartial";
  ASSERT_TRUE(write_all(out.get(), data.data(), data.size()));
  relay.finish();  // nothing stepped: finish() alone reads it all
  EXPECT_TRUE(relay.all_closed());
  EXPECT_EQ(relay.bytes(0), data.size());
  EXPECT_EQ(read_file(file), data);
  // The pipe is closed: whoever still holds the write end gets EPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(::write(out.get(), "x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  ::signal(SIGPIPE, SIG_DFL);
  relay_.reset();
  EXPECT_EQ(console.take(), "[r] first\n[r] second\n[r] partial\n");
}

TEST_F(LogRelayTest, FinishIsBoundedWhileAGrandchildKeepsWriting) {
  auto& relay = make_relay(null_.get());
  Fd out = add("[r] ", dir_ + "/r.log");
  // A grandchild that never stops writing and never exits by itself.
  pid_t pid = fork_rank(out, [] {
    static char block[65536];
    std::memset(block, 'g', sizeof(block));
    while (write_all(1, block, sizeof(block))) {
    }
  });
  ASSERT_TRUE(step_until([&] { return relay.bytes(0) > (4u << 20); }));
  auto start = std::chrono::steady_clock::now();
  relay.finish();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(relay.all_closed());
  // Its next write fails (EPIPE / SIGPIPE): it ends.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED), 0);
  EXPECT_EQ(info.si_code, CLD_KILLED);
  EXPECT_EQ(info.si_status, SIGPIPE);
}

TEST_F(LogRelayTest, ASpawnedRanksStdoutAndStderrShareItsPipe) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  const std::string file = dir_ + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "echo out; echo err >&2; printf tail"};
  options.stdout_fd = out.get();
  options.stderr_fd = out.get();
  auto spawned = spawn(options);
  ASSERT_TRUE(spawned.ok()) << spawned.error().message;
  out.reset();  // the caller's copy: EOF comes when the rank's are gone
  bool gone = false;
  int status = -1;
  watch(spawned->pid, &gone, &status);
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  EXPECT_EQ(status, 0);
  EXPECT_EQ(read_file(file), "out\nerr\ntail");
  relay_.reset();
  EXPECT_EQ(console.take(), "[rank 0] out\n[rank 0] err\n[rank 0] tail\n");
}

TEST_F(LogRelayTest, TheWriteEndIsNeverAStandardDescriptor) {
  auto& relay = make_relay(-1);
  // A first rank opens the loop's own descriptors (epoll, signalfd, timerfd):
  // they must not take 0, 1 and 2 while those are closed below, or restoring
  // them would close the loop's.
  ASSERT_TRUE(relay.add_rank(RankLog{"", ""}).ok());
  // Started with 0, 1 and 2 closed, pipe2() would hand them out.
  int saved[3];
  for (int fd = 0; fd < 3; ++fd) {
    saved[fd] = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  }
  for (int fd = 0; fd < 3; ++fd) {
    ::close(fd);
  }
  auto r = relay.add_rank(RankLog{"", ""});
  const int got = r.ok() ? r->get() : -1;
  for (int fd = 0; fd < 3; ++fd) {
    ::dup2(saved[fd], fd);
    ::close(saved[fd]);
  }
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(got, 2);
  EXPECT_EQ(::fcntl(got, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

TEST_F(LogRelayTest, AFullFilesystemIsReportedOnceAndTheConsoleGoesOn) {
  const std::string mnt = mount_tmpfs("full", "size=1m");
  if (mnt.empty()) {
    GTEST_SKIP() << "mount(tmpfs) failed with EPERM: needs root (CAP_SYS_ADMIN)";
  }
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  const std::string data = text_lines(4 << 20, 7);
  const std::string file = mnt + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  bool gone = false;
  watch(fork_rank(out, [&] { write_all(1, data.data(), data.size()); }), &gone);
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  EXPECT_EQ(relay.bytes(0), data.size());
  ASSERT_EQ(relay.errors().size(), 1u);
  EXPECT_EQ(relay.errors()[0].errnum, ENOSPC);
  EXPECT_NE(relay.errors()[0].message.find(file), std::string::npos) << relay.errors()[0].message;
  ASSERT_EQ(reported_.size(), 1u);
  EXPECT_EQ(reported_[0], std::make_pair(size_t{0}, ENOSPC));
  // What the file holds is the start of the output, byte for byte.
  const std::string got = read_file(file);
  EXPECT_GT(got.size(), 0u);
  EXPECT_LE(got.size(), 1u << 20);
  EXPECT_EQ(got, data.substr(0, got.size()));
  // The console has every line.
  ASSERT_TRUE(relay.flush_console(5s));
  EXPECT_EQ(relay.console_dropped(), 0u);
  relay_.reset();
  const std::string shown = console.take();
  std::string unprefixed;
  for (const auto& line : split_lines(shown)) {
    ASSERT_EQ(line.rfind("[rank 0] ", 0), 0u) << line;
    unprefixed += line.substr(9) + "\n";
  }
  EXPECT_EQ(unprefixed, data);
}

TEST_F(LogRelayTest, AReadOnlyOrMissingLogDirectoryIsReportedAtOpen) {
  const std::string ro = mount_tmpfs("ro", "size=1m", MS_RDONLY);
  if (ro.empty()) {
    GTEST_SKIP() << "mount(tmpfs) failed with EPERM: needs root (CAP_SYS_ADMIN)";
  }
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  Fd a = add("[a] ", ro + "/a.log");
  Fd b = add("[b] ", dir_ + "/no/such/dir/b.log");
  Fd c = add("[c] ", dir_ + "/c.log");
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(reported_.size(), 2u);
  EXPECT_EQ(reported_[0], std::make_pair(size_t{0}, EROFS));
  EXPECT_EQ(reported_[1], std::make_pair(size_t{1}, ENOENT));
  for (Fd* fd : {&a, &b, &c}) {
    ASSERT_TRUE(write_all(fd->get(), "hello\n", 6));
    fd->reset();
  }
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  EXPECT_EQ(reported_.size(), 2u);  // once, at open; not again for each write
  EXPECT_EQ(read_file(dir_ + "/c.log"), "hello\n");
  relay_.reset();
  const std::string shown = console.take();
  for (const char* line : {"[a] hello\n", "[b] hello\n", "[c] hello\n"}) {
    EXPECT_NE(shown.find(line), std::string::npos) << shown;
  }
}

// The log directory is the job user's; PID 1 is root. Whatever was planted
// where a rank's log file goes (a FIFO, a symbolic or hard link to a file
// elsewhere, a directory) is refused at once with one report naming it: the
// relay neither blocks in open() nor writes through the link. The rank goes
// on with the console only.
TEST_F(LogRelayTest, APlantedFifoOrLinkInTheLogDirectoryIsRefusedWithoutBlockingOrWritingThrough) {
  const std::string victim = dir_ + "/victim";
  ASSERT_TRUE(write_all(Fd(::open(victim.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)).get(), "precious\n", 9));
  const std::string fifo = dir_ + "/fifo.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/symlink.log").c_str()), 0);
  ASSERT_EQ(::link(victim.c_str(), (dir_ + "/hardlink.log").c_str()), 0);
  ASSERT_EQ(::mkdir((dir_ + "/dir.log").c_str(), 0755), 0);
  // Should the relay block in open() on the FIFO, this opens its other end
  // after 2 s (the test then fails instead of hanging).
  std::atomic<bool> added{false};
  std::atomic<bool> had_to_unblock{false};
  std::thread guard([&] {
    for (int i = 0; i < 200 && !added; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    if (!added) {
      had_to_unblock = true;
      Fd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
      std::this_thread::sleep_for(500ms);
    }
  });
  ConsoleCapture console;
  make_relay(console.fd());
  std::vector<Fd> ends;
  for (const char* name : {"fifo.log", "symlink.log", "hardlink.log", "dir.log", "plain.log"}) {
    ends.push_back(add("[r] ", dir_ + "/" + name));
  }
  added = true;
  guard.join();
  EXPECT_FALSE(had_to_unblock) << "add_rank blocked in open() on a FIFO";
  ASSERT_EQ(reported_.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(reported_[i].first, i);
  }
  for (const Error& e : relay_->errors()) {
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(dir_), std::string::npos) << "names the file: " << e.message;
  }
  for (Fd& end : ends) {
    ASSERT_TRUE(end && write_all(end.get(), "output\n", 7));
    end.reset();
  }
  ASSERT_TRUE(step_until([&] { return relay_->all_closed(); }));
  EXPECT_EQ(read_file(victim), "precious\n") << "root wrote through a link planted in the log directory";
  EXPECT_EQ(read_file(dir_ + "/plain.log"), "output\n");
  relay_.reset();
  const std::string shown = console.take();
  size_t lines = 0;
  for (size_t at = shown.find("[r] output\n"); at != std::string::npos; at = shown.find("[r] output\n", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 5u) << "every rank still reaches the console: " << shown;
}

TEST_F(LogRelayTest, NoConsoleMeansFilesOnlyAndNoThread) {
  auto& relay = make_relay(-1);
  Fd out = add("[r] ", dir_ + "/r.log");
  ASSERT_TRUE(write_all(out.get(), "a\nb", 3));
  out.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  EXPECT_EQ(read_file(dir_ + "/r.log"), "a\nb");
  EXPECT_EQ(relay.console_dropped(), 0u);
  EXPECT_TRUE(relay.flush_console(0ms));
}

// --- files only: splice(2) ----------------------------------------------------

// Writes `total` bytes of the Random stream of `seed` to stdout in 64 KiB
// blocks, then `tail` (a line without its '\n'); in a rank.
void write_random(uint64_t seed, size_t total, std::string_view tail) {
  static char block[65536];
  Random random{seed};
  for (size_t done = 0; done < total; done += sizeof(block)) {
    random.fill(block, sizeof(block));
    write_all(1, block, sizeof(block));
  }
  write_all(1, tail.data(), tail.size());
}

// fnv1a of what write_random() writes.
uint64_t random_hash(uint64_t seed, size_t total, std::string_view tail) {
  uint64_t hash = kFnvBasis;
  std::vector<char> block(65536);
  Random random{seed};
  for (size_t done = 0; done < total; done += block.size()) {
    random.fill(block.data(), block.size());
    hash = fnv1a(hash, block.data(), block.size());
  }
  return fnv1a(hash, tail.data(), tail.size());
}

TEST_F(LogRelayTest, FilesOnlyOutputMovesByteExactToTheFileBySplice) {
  constexpr size_t kTotal = 32 << 20;
  constexpr uint64_t kSeed = 0xfeed;
  constexpr std::string_view kTail = "the last line, unterminated";
  auto& relay = make_relay(-1);
  const std::string file = dir_ + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  bool gone = false;
  int status = -1;
  watch(fork_rank(out, [&] { write_random(kSeed, kTotal, kTail); }), &gone, &status);
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  EXPECT_EQ(status, 0);
  const std::string got = read_file(file);
  EXPECT_EQ(got.size(), kTotal + kTail.size());
  EXPECT_EQ(fnv1a(kFnvBasis, got.data(), got.size()), random_hash(kSeed, kTotal, kTail));
  EXPECT_EQ(relay.bytes(0), kTotal + kTail.size());
  EXPECT_EQ(relay.spliced(0), relay.bytes(0)) << "every byte took the in-kernel path";
  EXPECT_TRUE(relay.errors().empty());
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

// The runner drains a rank's pipe when it exits, while a grandchild may still
// hold the pipe open: what the rank wrote before it was killed is in the file
// then, without waiting for EOF.
TEST_F(LogRelayTest, FilesOnlyARanksLastBytesAreInTheFileWhenItIsKilled) {
  constexpr size_t kTotal = 8 << 20;
  constexpr uint64_t kSeed = 0xdead;
  constexpr std::string_view kTail = "killed in the middle of this line";
  auto& relay = make_relay(-1);
  const std::string file = dir_ + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  Fd grandchild(::fcntl(out.get(), F_DUPFD_CLOEXEC, 3));  // keeps the pipe from EOF
  ASSERT_TRUE(grandchild);
  bool gone = false;
  int status = 0;
  watch(fork_rank(out,
                  [&] {
                    write_random(kSeed, kTotal, kTail);
                    (void)::raise(SIGKILL);
                  }),
        &gone, &status);
  ASSERT_TRUE(step_until([&] { return gone; }));
  EXPECT_EQ(status, 128 + SIGKILL);
  relay.drain(0);
  EXPECT_FALSE(relay.all_closed()) << "the grandchild still holds the pipe";
  const std::string got = read_file(file);
  EXPECT_EQ(got.size(), kTotal + kTail.size());
  EXPECT_EQ(fnv1a(kFnvBasis, got.data(), got.size()), random_hash(kSeed, kTotal, kTail));
  EXPECT_EQ(relay.spliced(0), kTotal + kTail.size());
  relay.finish();
  EXPECT_TRUE(relay.all_closed());
}

// splice(2) takes no O_APPEND descriptor; each chunk still goes at the end of
// the file as it is then, after what was there and what others added since.
TEST_F(LogRelayTest, FilesOnlyAppendsAfterWhatOthersWroteToTheFile) {
  const std::string file = dir_ + "/rank0.log";
  ASSERT_TRUE(write_all(Fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640)).get(), "before\n", 7));
  auto& relay = make_relay(-1);
  relay.set_batch_delay(0us);  // one read per step below
  Fd first = add("[rank 0] ", file);
  Fd second = add("[rank 0, again] ", file);  // a second relay descriptor of the same file
  Fd outside(::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  ASSERT_TRUE(outside);
  auto relay_now = [&](Fd& end, std::string_view text) {
    ASSERT_TRUE(write_all(end.get(), text.data(), text.size()));
    ASSERT_EQ(loop_.run_once(1000), 1);
  };
  relay_now(first, "one\n");
  ASSERT_TRUE(write_all(outside.get(), "outside\n", 8));
  relay_now(second, "two\n");
  relay_now(first, "three\n");
  first.reset();
  second.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  EXPECT_EQ(read_file(file), "before\none\noutside\ntwo\nthree\n");
  EXPECT_EQ(relay.spliced(0) + relay.spliced(1), 14u);
}

TEST_F(LogRelayTest, FilesOnlyAFullFilesystemIsReportedOnceAndTheRankRunsToItsEnd) {
  const std::string mnt = mount_tmpfs("full", "size=1m");
  if (mnt.empty()) {
    GTEST_SKIP() << "mount(tmpfs) failed with EPERM: needs root (CAP_SYS_ADMIN)";
  }
  auto& relay = make_relay(-1);
  const std::string data = text_lines(4 << 20, 11);
  const std::string file = mnt + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  bool gone = false;
  int status = -1;
  watch(fork_rank(out, [&] { write_all(1, data.data(), data.size()); }), &gone, &status);
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  EXPECT_EQ(status, 0) << "the rank was neither blocked nor killed by the full disk";
  EXPECT_EQ(relay.bytes(0), data.size()) << "the pipe is read to its end after the file failed";
  ASSERT_EQ(reported_.size(), 1u);
  EXPECT_EQ(reported_[0], std::make_pair(size_t{0}, ENOSPC));
  ASSERT_EQ(relay.errors().size(), 1u);
  EXPECT_NE(relay.errors()[0].message.find(file), std::string::npos) << relay.errors()[0].message;
  // What the file holds is the start of the output, byte for byte.
  const std::string got = read_file(file);
  EXPECT_GT(got.size(), 0u);
  EXPECT_LE(got.size(), 1u << 20);
  EXPECT_EQ(got, data.substr(0, got.size()));
  EXPECT_EQ(relay.spliced(0), got.size());
}

// A full disk is not the end of a rank's file: once there is room again
// (here the filler removed), what the rank writes goes in again, and what
// could not is counted; the pipe is read meanwhile, so the rank is not held.
TEST_F(LogRelayTest, FilesOnlyARanksFileIsWrittenAgainOnceTheFullDiskHasRoom) {
  const std::string mnt = mount_tmpfs("full", "size=1m");
  if (mnt.empty()) {
    GTEST_SKIP() << "mount(tmpfs) failed with EPERM: needs root (CAP_SYS_ADMIN)";
  }
  const std::string filler = mnt + "/filler";
  std::string block(4096, 'f');
  {
    Fd fd(::open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    while (::write(fd.get(), block.data(), block.size()) > 0) {
    }
  }
  auto& relay = make_relay(-1);
  const std::string file = mnt + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  const std::string go = dir_ + "/go";
  bool gone = false;
  int status = -1;
  watch(fork_rank(out,
                  [&] {
                    write_all(1, "lost\n", 5);
                    for (int i = 0; i < 20000 && ::access(go.c_str(), F_OK) != 0; ++i) {
                      ::usleep(1000);
                    }
                    write_all(1, "after\n", 6);
                  }),
        &gone, &status);
  ASSERT_TRUE(step_until([&] { return relay.bytes(0) == 5; }));
  ASSERT_EQ(reported_.size(), 1u);
  EXPECT_EQ(reported_[0], std::make_pair(size_t{0}, ENOSPC));
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  Fd(::open(go.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  EXPECT_EQ(status, 0);
  EXPECT_EQ(read_file(file), "after\n");
  EXPECT_EQ(reported_.size(), 1u) << "one report for the spell";
}

// An append-only file (chattr +a) cannot be switched off O_APPEND, which
// splice(2) would need: its rank goes the read and write way.
TEST_F(LogRelayTest, FilesOnlyAnAppendOnlyFileIsRelayedByReadsAndWrites) {
  const std::string file = dir_ + "/rank0.log";
  Fd created(::open(file.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0640));
  ASSERT_TRUE(created);
  int attributes = 0;
  if (::ioctl(created.get(), FS_IOC_GETFLAGS, &attributes) < 0) {
    GTEST_SKIP() << "no file attributes here: " << std::strerror(errno);
  }
  attributes |= FS_APPEND_FL;
  if (::ioctl(created.get(), FS_IOC_SETFLAGS, &attributes) < 0) {
    GTEST_SKIP() << "cannot make " << file << " append-only here (needs CAP_LINUX_IMMUTABLE): " << std::strerror(errno);
  }
  struct ClearAppendOnly {  // or TearDown could not remove it
    int fd;
    int attributes;
    ~ClearAppendOnly() {
      attributes &= ~FS_APPEND_FL;
      ::ioctl(fd, FS_IOC_SETFLAGS, &attributes);
    }
  } clear{created.get(), attributes};
  auto& relay = make_relay(-1);
  const std::string data = text_lines(1 << 20, 13);
  Fd out = add("[rank 0] ", file);
  bool gone = false;
  watch(fork_rank(out, [&] { write_all(1, data.data(), data.size()); }), &gone);
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  EXPECT_TRUE(relay.errors().empty());
  EXPECT_EQ(relay.spliced(0), 0u);
  EXPECT_EQ(relay.bytes(0), data.size());
  EXPECT_EQ(read_file(file), data);
}

// A console whose reader is gone fails at its writer's first write(2), for
// good: from then on the ranks' files are fed by splice(2), every byte still
// reaches them, and every byte is counted as not shown.
TEST_F(LogRelayTest, AfterTheConsoleFailsTheFilesAreSplicedAndKeepEveryByte) {
  constexpr size_t kTotal = 8 << 20;
  constexpr uint64_t kSeed = 0xc0de;
  constexpr std::string_view kTail = "no newline at the end";
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd console(fds[1]);
  ::close(fds[0]);  // nobody will ever read it: EPIPE (SIGPIPE stays blocked in the writer)
  auto& relay = make_relay(console.get());
  const std::string file = dir_ + "/rank0.log";
  Fd out = add("[rank 0] ", file);
  // Lines until the failure is noticed: the relay reports it once.
  std::string before;
  auto console_failed = [&] {
    return std::any_of(reported_.begin(), reported_.end(), [](const auto& r) { return r.first == LogRelay::kConsole; });
  };
  const auto until = Clock::now() + 10s;
  while (!console_failed() && Clock::now() < until) {
    const std::string line = "before the failure, held or unfinished " + std::to_string(before.size()) + "\npart";
    ASSERT_TRUE(write_all(out.get(), line.data(), line.size()));
    before += line;
    EXPECT_GE(loop_.run_once(100), 0);
  }
  ASSERT_TRUE(console_failed());
  EXPECT_EQ(relay.errors().front().errnum, EPIPE);
  bool gone = false;
  watch(fork_rank(out, [&] { write_random(kSeed, kTotal, kTail); }), &gone);
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  const std::string got = read_file(file);
  ASSERT_EQ(got.size(), before.size() + kTotal + kTail.size());
  EXPECT_EQ(got.substr(0, before.size()), before);
  EXPECT_EQ(fnv1a(kFnvBasis, got.data() + before.size(), got.size() - before.size()),
            random_hash(kSeed, kTotal, kTail));
  EXPECT_EQ(relay.bytes(0), got.size());
  // After the failure every byte went by splice(2): the random stream, and
  // what of the lines before it was still in the pipe then.
  EXPECT_GE(relay.spliced(0), kTotal + kTail.size());
  relay.flush_console(1s);  // the writer discards what it was given, counting it
  EXPECT_EQ(relay.console_dropped(), relay.bytes(0));
  EXPECT_EQ(relay.errors().size(), 1u) << "the console's failure alone";
}

// --- batches -----------------------------------------------------------------

// A rank that writes a line at a time is not read at every write: after a
// read that took little, its pipe is left alone for kBatchDelay, and what it
// wrote meanwhile is read in one go, in order, to the file and the console.
TEST_F(LogRelayTest, ARankWritingLittleAtATimeIsReadInBatches) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  const std::string file = dir_ + "/r.log";
  Fd out = add("[r] ", file);
  ASSERT_TRUE(write_all(out.get(), "one\n", 4));
  ASSERT_EQ(loop_.run_once(1000), 1);
  ASSERT_EQ(relay.bytes(0), 4u);
  ASSERT_TRUE(write_all(out.get(), "two\n", 4));
  ASSERT_TRUE(write_all(out.get(), "three\n", 6));
  // The pipe is out of the watch: this step reads nothing (at most the
  // pause ends in it, and the pipe is watched again from the next one).
  EXPECT_GE(loop_.run_once(0), 0);
  EXPECT_EQ(relay.bytes(0), 4u) << "read at once although the last read took 4 bytes";
  ASSERT_TRUE(step_until([&] { return relay.bytes(0) == 14; }, 5s));
  EXPECT_EQ(read_file(file), "one\ntwo\nthree\n");
  out.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }, 5s)) << "EOF on a paused pipe is seen";
  relay_.reset();
  EXPECT_EQ(console.take(), "[r] one\n[r] two\n[r] three\n");
}

// The runner drains a rank's pipe when the rank exits, paused or not: its
// last words are in the file and shown before anything logged about its end.
TEST_F(LogRelayTest, APausedPipeIsDrainedWhenItsRankExits) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  const std::string file = dir_ + "/r.log";
  Fd out = add("[r] ", file);
  Fd grandchild(::fcntl(out.get(), F_DUPFD_CLOEXEC, 3));  // keeps the pipe from EOF
  ASSERT_TRUE(write_all(out.get(), "working\n", 8));
  ASSERT_EQ(loop_.run_once(1000), 1);  // a small read: paused
  ASSERT_TRUE(write_all(out.get(), "Traceback: the last words", 25));
  out.reset();
  relay.drain(0);
  EXPECT_EQ(relay.bytes(0), 33u);
  EXPECT_EQ(read_file(file), "working\nTraceback: the last words");
  relay.finish();
  EXPECT_TRUE(relay.all_closed());
  relay_.reset();
  EXPECT_EQ(console.take(), "[r] working\n[r] Traceback: the last words\n");
}

// --- console lines -----------------------------------------------------------

TEST_F(LogRelayTest, TheConsoleGetsWholeLinesWithTheirRanksPrefix) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  relay.set_batch_delay(0us);  // one read per step below
  Fd a = add("[rank 0] ", dir_ + "/0.log");
  Fd b = add("[rank 1] ", "");  // console only
  auto put = [&](Fd& fd, std::string_view s) {
    ASSERT_TRUE(write_all(fd.get(), s.data(), s.size()));
    ASSERT_EQ(loop_.run_once(1000), 1);
  };
  put(a, "hel");
  put(b, "world\n");
  put(a, "lo\nand ");
  put(b, "two\nlines\n");
  put(a, "more");
  EXPECT_EQ(relay.bytes(0), 14u);
  EXPECT_EQ(relay.bytes(1), 16u);
  a.reset();
  b.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  EXPECT_EQ(read_file(dir_ + "/0.log"), "hello\nand more");
  relay_.reset();
  EXPECT_EQ(console.take(), "[rank 1] world\n[rank 0] hello\n[rank 1] two\n[rank 1] lines\n[rank 0] and more\n");
}

TEST_F(LogRelayTest, LongLinesAreSplitAndBytesPassAsTheyAre) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  Fd out = add("> ", dir_ + "/r.log");
  constexpr size_t kMax = LogRelay::kMaxLine;
  std::string data(kMax, 'x');                                 // exactly the longest line: one line
  data += "\n" + std::string(2 * kMax + 5, 'y');               // split into kMax, kMax, 5
  data += std::string("\n\xff\xfe\x00\x01\xc3(\r", 9) + "\n";  // no UTF-8 check; NUL and CR kept
  data += "\n";                                                // an empty line is still a line
  ASSERT_TRUE(write_all(out.get(), data.data(), data.size()));
  out.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  EXPECT_EQ(read_file(dir_ + "/r.log"), data);
  relay_.reset();
  std::string expected = "> " + std::string(kMax, 'x') + "\n";
  expected += "> " + std::string(kMax, 'y') + "\n> " + std::string(kMax, 'y') + "\n> yyyyy\n";
  expected += "> " + std::string("\xff\xfe\x00\x01\xc3(\r", 8) + "\n> \n";
  EXPECT_EQ(console.take(), expected);
}

TEST_F(LogRelayTest, ALineLongerThanTheLimitIsCutAsItComesAcrossReads) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd());
  relay.set_batch_delay(0us);  // one read per step below
  Fd out = add("> ", dir_ + "/r.log");
  constexpr size_t kMax = LogRelay::kMaxLine;
  auto put = [&](const std::string& s) {
    ASSERT_TRUE(write_all(out.get(), s.data(), s.size()));
    ASSERT_EQ(loop_.run_once(1000), 1);  // one read each
  };
  put(std::string(40 << 10, 'z'));
  put(std::string(kMax - (40 << 10), 'z'));  // exactly kMax unterminated: kept, a '\n' may come
  put("wwww");                               // it did not: the kMax piece is shown
  put("ww\n");
  put(std::string(2 * kMax, 'v') + "\n");  // exactly two pieces, no empty third line
  put("x");
  out.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  relay_.reset();
  const std::string expected = "> " + std::string(kMax, 'z') + "\n> wwwwww\n> " + std::string(kMax, 'v') + "\n> " +
                               std::string(kMax, 'v') + "\n> x\n";
  const std::string got = console.take();
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

TEST_F(LogRelayTest, TheWriterThreadStartsAtTheFirstLineWithEverySignalBlocked) {
  auto& relay = make_relay(null_.get());
  Fd out = add("[r] ", "");
  EXPECT_EQ(writer_task(), "");  // lazy: nothing to write yet
  sigset_t before;
  sigset_t after;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &before);
  ASSERT_TRUE(write_all(out.get(), "x\n", 2));
  ASSERT_EQ(loop_.run_once(1000), 1);
  ::pthread_sigmask(SIG_SETMASK, nullptr, &after);
  for (int s = 1; s < SIGRTMIN; ++s) {
    EXPECT_EQ(sigismember(&before, s), sigismember(&after, s)) << "the loop thread's mask changed: " << s;
  }
  std::string task;
  for (auto until = Clock::now() + 2s; task.empty() && Clock::now() < until; std::this_thread::sleep_for(1ms)) {
    task = writer_task();  // the thread names itself as it starts
  }
  ASSERT_NE(task, "");
  std::istringstream status(read_file(task + "/status"));
  std::string line;
  uint64_t blocked = 0;
  while (std::getline(status, line)) {
    if (line.rfind("SigBlk:", 0) == 0) {
      blocked = std::strtoull(line.c_str() + 7, nullptr, 16);
    }
  }
  for (int s = 1; s <= 31; ++s) {
    // Under emulation /proc shows the host thread's mask, in which qemu-user
    // never blocks SIGSEGV and SIGBUS: it takes its own faults with them.
    const bool qemu_own = trainit::test::kEmulated && (s == SIGSEGV || s == SIGBUS);
    if (s != SIGKILL && s != SIGSTOP && !qemu_own) {
      EXPECT_TRUE(blocked & (1ULL << (s - 1))) << "signal " << s << " not blocked in the writer";
    }
  }
  EXPECT_TRUE(relay.flush_console(1s));
}

// --- a slow or blocked console -------------------------------------------------

TEST_F(LogRelayTest, AConsoleNobodyReadsDoesNotStopFourRanks) {
  StalledConsole console;
  auto& relay = make_relay(console.fd(), ConsoleWriter::kMinCapacity);
  constexpr int kRanks = 4;
  std::vector<std::string> data;
  bool flags[kRanks] = {};
  for (int i = 0; i < kRanks; ++i) {
    data.push_back(text_lines(8 << 20, static_cast<uint64_t>(i + 1)));
    Fd out = add("[rank " + std::to_string(i) + "] ", dir_ + "/" + std::to_string(i) + ".log");
    const std::string& d = data.back();
    watch(fork_rank(out, [&d] { write_all(1, d.data(), d.size()); }), &flags[i]);
  }
  ASSERT_TRUE(step_until([&] { return relay.all_closed() && flags[0] && flags[1] && flags[2] && flags[3]; }));
  for (int i = 0; i < kRanks; ++i) {
    EXPECT_EQ(relay.bytes(static_cast<size_t>(i)), data[static_cast<size_t>(i)].size());
    EXPECT_TRUE(read_file(dir_ + "/" + std::to_string(i) + ".log") == data[static_cast<size_t>(i)]) << i;
  }
  EXPECT_GT(relay.console_dropped(), 0u);
  EXPECT_TRUE(relay.errors().empty());
  // The destructor gives the writer a bounded time, then leaves it blocked.
  auto start = std::chrono::steady_clock::now();
  relay_.reset();
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 1500ms);
  // What reached the console is whole prefixed lines (the last one may still
  // be half-written by the writer we left behind).
  ASSERT_EQ(::fcntl(console.read_end().get(), F_SETFL, O_NONBLOCK), 0);
  char buf[8192];
  ssize_t n = ::read(console.read_end().get(), buf, sizeof(buf));
  ASSERT_GT(n, 0);
  for (const auto& line : split_lines(std::string(buf, static_cast<size_t>(n)))) {
    EXPECT_EQ(line.rfind("[rank ", 0), 0u) << line;
    EXPECT_NE(line.find("] line "), std::string::npos) << line;
  }
  // Closing the read end fails the writer's write(2) (EPIPE): it ends. Only
  // then may the console descriptor close (the writer's contract).
  console.read_end().reset();
  auto until = Clock::now() + 5s;
  while (!writer_task().empty() && Clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(writer_task(), "") << "the writer left behind did not end";
}

TEST_F(LogRelayTest, AConsoleThatAlreadyRanOutOfTimeIsNotWaitedForAgain) {
  StalledConsole console;
  auto& relay = make_relay(console.fd(), ConsoleWriter::kMinCapacity);
  Fd out = add("[b] ", "");
  const std::string data = text_lines(1 << 19, 13);
  ASSERT_TRUE(write_all(out.get(), data.data(), data.size()));
  out.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(relay.flush_console(200ms)) << "nobody reads the console: it cannot be flushed";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  start = std::chrono::steady_clock::now();
  relay_.reset();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 100ms) << "the destructor waited again for a console already known to be stuck";
  // The writer left blocked in write(2) ends with EPIPE once nobody can read.
  console.read_end().reset();
  auto until = Clock::now() + 5s;
  while (!writer_task().empty() && Clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(writer_task(), "") << "the writer left behind did not end";
}

// The count each "[trainit] N bytes of rank output not shown" line announces,
// or -1 for any other line.
int64_t announced(const std::string& line) {
  long long n = -1;
  int end = 0;
  if (std::sscanf(line.c_str(), "[trainit] %lld bytes of rank output not shown on the console%n", &n, &end) != 1 ||
      static_cast<size_t>(end) != line.size()) {
    return -1;
  }
  return n;
}

TEST_F(LogRelayTest, DroppedLinesAreAnnouncedAndTheLatestShownOnceThereIsRoomAgain) {
  StalledConsole console;
  auto& relay = make_relay(console.fd(), ConsoleWriter::kMinCapacity);
  Fd out = add("[r] ", "");
  const std::string data = text_lines(1 << 20, 3);
  ASSERT_TRUE(write_all(out.get(), data.data(), data.size()));  // the pipe holds 1 MiB
  ASSERT_TRUE(step_until([&] { return relay.bytes(0) == data.size(); }));
  const uint64_t dropped = relay.console_dropped();
  EXPECT_GT(dropped, 0u);
  console.resume();  // someone reads the console again
  EXPECT_TRUE(relay.flush_console(5s));
  ASSERT_TRUE(write_all(out.get(), "after\n", 6));
  out.reset();
  ASSERT_TRUE(step_until([&] { return relay.all_closed(); }));
  EXPECT_TRUE(relay.flush_console(5s));
  EXPECT_EQ(relay.console_dropped(), dropped);  // nothing more was dropped
  relay_.reset();
  std::vector<std::string> lines = split_lines(console.take());
  const std::vector<std::string> sent = split_lines(data + "after\n");
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.back(), "[r] after");
  // The flood's last line was held, not dropped: it comes just before.
  EXPECT_EQ(lines[lines.size() - 2], "[r] " + sent[sent.size() - 2]);
  uint64_t notices = 0;
  uint64_t announced_bytes = 0;
  uint64_t shown_bytes = 0;
  size_t next = 0;  // shown lines are the rank's lines, whole and in order, some left out
  for (const auto& line : lines) {
    if (line.rfind("[trainit] ", 0) == 0) {
      ASSERT_GT(announced(line), 0) << line;
      announced_bytes += static_cast<uint64_t>(announced(line));
      ++notices;
      continue;
    }
    ASSERT_EQ(line.rfind("[r] ", 0), 0u) << line;
    std::string text = line.substr(4);
    while (next < sent.size() && sent[next] != text) {
      ++next;
    }
    ASSERT_LT(next, sent.size()) << "not a line the rank wrote, or out of order: " << text;
    shown_bytes += text.size() + 1;
  }
  EXPECT_GE(notices, 1u);
  EXPECT_EQ(announced_bytes, dropped) << "every dropped byte is announced, once";
  EXPECT_EQ(shown_bytes + dropped, data.size() + 6);
}

TEST_F(LogRelayTest, HeldLinesAreTheLatestWholeLinesAcrossManySmallReads) {
  StalledConsole console;
  auto& relay = make_relay(console.fd(), ConsoleWriter::kMinCapacity);
  Fd out = add("[s] ", "");
  std::string sent = text_lines(1 << 19, 9);  // fills the ring: the console falls behind
  ASSERT_TRUE(write_all(out.get(), sent.data(), sent.size()));
  ASSERT_TRUE(step_until([&] { return relay.bytes(0) == sent.size(); }));
  // Then 1000-byte lines, one read each, every third in two reads (the
  // unfinished half waits as the rank's partial line).
  constexpr int kLines = 40;
  for (int i = 0; i < kLines; ++i) {
    std::string line = "small " + std::to_string(i) + " ";
    line.append(999 - line.size(), static_cast<char>('A' + i % 26));
    line += '\n';
    const size_t half = i % 3 == 0 ? line.size() / 2 : line.size();
    for (std::string_view piece : {std::string_view(line).substr(0, half), std::string_view(line).substr(half)}) {
      if (piece.empty()) {
        continue;
      }
      ASSERT_TRUE(write_all(out.get(), piece.data(), piece.size()));
      sent += piece;
      ASSERT_TRUE(step_until([&] { return relay.bytes(0) == sent.size(); }));
    }
  }
  console.resume();
  EXPECT_TRUE(relay.flush_console(5s));
  const uint64_t dropped = relay.console_dropped();
  relay_.reset();
  // The latest whole lines that fit in kHeldTail: eight of these.
  const std::vector<std::string> lines = split_lines(console.take());
  const std::vector<std::string> want = split_lines(sent);
  constexpr size_t kHeld = LogRelay::kHeldTail / 1000;
  ASSERT_GE(lines.size(), kHeld);
  for (size_t k = 1; k <= kHeld; ++k) {
    EXPECT_EQ(lines[lines.size() - k], "[s] " + want[want.size() - k]) << k << " from the end";
  }
  uint64_t shown_bytes = 0;
  for (const auto& line : lines) {
    if (announced(line) < 0) {
      ASSERT_EQ(line.rfind("[s] ", 0), 0u) << line.substr(0, 80);
      shown_bytes += line.size() - 4 + 1;
    }
  }
  EXPECT_EQ(shown_bytes + dropped, sent.size());
}

TEST_F(LogRelayTest, HeldLinesReachTheConsoleWhileTheRankIsQuietAndAlive) {
  StalledConsole console;
  auto& relay = make_relay(console.fd(), ConsoleWriter::kMinCapacity);
  Fd out = add("[q] ", "");
  const std::string data = text_lines((1 << 20) - 64, 5) + "the last words\n";
  ASSERT_TRUE(write_all(out.get(), data.data(), data.size()));  // the pipe holds it all
  ASSERT_TRUE(step_until([&] { return relay.bytes(0) == data.size(); }));
  ASSERT_GT(relay.console_dropped(), 0u) << "the console was meant to fall behind";
  // The console is read again; the rank stays alive and writes nothing more.
  console.resume();
  // Only the loop runs: no read, no finish(), no flush_console().
  const bool reached = step_until([&] { return console.shows("[q] the last words\n"); }, 5s);
  EXPECT_TRUE(reached) << "the held lines were not offered again";
  EXPECT_FALSE(relay.all_closed());
  const uint64_t dropped = relay.console_dropped();
  relay_.reset();
  out.reset();
  // What follows the last notice is the rank's latest lines, at most
  // kHeldTail of them, ending with its last.
  const std::vector<std::string> lines = split_lines(console.take());
  size_t last_notice = lines.size();
  uint64_t announced_bytes = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (announced(lines[i]) > 0) {
      announced_bytes += static_cast<uint64_t>(announced(lines[i]));
      last_notice = i;
    }
  }
  ASSERT_LT(last_notice, lines.size()) << "no notice";
  EXPECT_EQ(announced_bytes, dropped);
  const std::vector<std::string> sent = split_lines(data);
  uint64_t tail_bytes = 0;
  for (size_t i = last_notice + 1, j = sent.size() - (lines.size() - last_notice - 1); i < lines.size(); ++i, ++j) {
    ASSERT_EQ(lines[i], "[q] " + sent[j]) << "not the rank's latest lines, in order";
    tail_bytes += sent[j].size() + 1;
  }
  EXPECT_GT(tail_bytes, 0u);
  EXPECT_LE(tail_bytes, LogRelay::kHeldTail);
}

TEST_F(LogRelayTest, TheRingWrapsAroundIntact) {
  ConsoleCapture console;
  auto& relay = make_relay(console.fd(), ConsoleWriter::kMinCapacity);
  Fd out = add("[w] ", "");
  const std::string data = text_lines(16 << 20, 11);  // 64 times round the ring
  bool gone = false;
  watch(fork_rank(out, [&] { write_all(1, data.data(), data.size()); }), &gone);
  ASSERT_TRUE(step_until([&] { return gone && relay.all_closed(); }));
  ASSERT_TRUE(relay.flush_console(5s));
  const uint64_t dropped = relay.console_dropped();
  relay_.reset();
  const std::vector<std::string> sent = split_lines(data);
  size_t next = 0;
  uint64_t shown_bytes = 0;
  for (const auto& line : split_lines(console.take())) {
    if (line.rfind("[trainit] ", 0) == 0) {
      continue;
    }
    ASSERT_EQ(line.rfind("[w] ", 0), 0u) << line;
    std::string text = line.substr(4);
    while (next < sent.size() && sent[next] != text) {
      ++next;
    }
    ASSERT_LT(next, sent.size()) << "corrupt or out of order: " << text.substr(0, 80);
    shown_bytes += text.size() + 1;
  }
  EXPECT_EQ(shown_bytes + dropped, data.size());
}

}  // namespace
}  // namespace trainit

// The integration harness: the real trainit binary, started the way a
// container runtime starts it, against the real kernel.
//
// Trainit starts one trainit process and owns it: its pipes (stdin, stdout,
// stderr), a thread that drains stdout and stderr as they come (a chatty
// trainit never blocks on a full pipe), and its end: the destructor SIGKILLs
// and reaps whatever is still running, so a failing test leaves nothing
// behind. Every wait has a timeout; a test never hangs.
//
// Layouts (Spec::layout):
//   kPid1      trainit is PID 1 of a new PID namespace, with its own mount
//              namespace and a fresh /proc (as `unshare --pid --fork
//              --mount-proc`); the parent knows its host pid and signals it.
//   kNoNamespace  trainit runs in the test's own namespaces: not PID 1, so a
//              child subreaper.
//   kUnderInit trainit is PID 2 of a new PID namespace whose PID 1 is a small
//              stub init; beside trainit the stub runs a bystander
//              (Spec::bystander). Subreaper mode, safely contained: anything
//              trainit did to "every process" could only reach the bystander.
//              When trainit ends, the stub prints "stub: bystander alive" (or
//              "gone") and exits with trainit's status, 128+N for signal N.
//
// Before exec, the process that becomes trainit resets every disposition to
// SIG_DFL, then applies Spec::blocked and Spec::ignored: the signal state
// trainit's parent leaves it. The environment is Spec::env only.
//
// Needs root (new namespaces, chroot, credentials); Trainit::start() reports
// EPERM so that a test can skip.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "emulation.h"

namespace trainit::test {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A generous bound for anything that should take milliseconds.
inline constexpr Clock::duration kTimeout = 10s;

// Absolute paths of the binaries under test.
std::string trainit_path();
// What runs tests/helpers/<name>: the helper itself, or under emulation a
// host launcher that runs it with qemu-user (tests/helpers/emulated_launcher.c).
std::string helper_path(std::string_view name);
std::string helper_binary_path(std::string_view name);  // the helper itself

enum class Layout { kPid1, kNoNamespace, kUnderInit };

struct Spec {
  std::vector<std::string> args{};  // trainit's arguments (without argv[0])
  Layout layout = Layout::kPid1;
  std::string program = trainit_path();  // inside `root` when that is set
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  std::vector<int> blocked{};  // the signal mask trainit's parent leaves it
  std::vector<int> ignored{};  // the signals trainit's parent ignores
  std::optional<uid_t> uid{};  // run as this user (with gid, no supplementary groups)
  gid_t gid = 100;
  std::string root{};  // chroot here before exec (no /proc in it)
  // trainit's /tmp (kPid1, kUnderInit: its mount namespace's) is this
  // directory, bound there; empty: a tmpfs of its own, gone with the namespace.
  std::string tmp{};
  std::vector<std::string> bystander{};  // kUnderInit: the stub's other child
  // trainit's parent is an intermediate process that lives until
  // release_parent() (for -p). The test process must be a child subreaper to
  // get trainit back and wait for it.
  bool intermediate_parent = false;
  // Extra descriptors trainit inherits: {parent's fd, number in trainit}.
  std::vector<std::pair<int, int>> fds{};
  // trainit's stdin, stdout and stderr are a pseudo-terminal, its controlling
  // terminal (trainit leads a session of its own), as under `docker run -it`.
  // write_stdin() types on it; out() has everything written to it.
  bool terminal = false;
};

// How a process ended.
struct Exit {
  enum class Kind { kExited, kSignaled, kTimedOut, kNotStarted };
  Kind kind = Kind::kNotStarted;
  int value = 0;  // exit code or signal number

  static Exit code(int code) { return {Kind::kExited, code}; }
  static Exit signal(int signo) { return {Kind::kSignaled, signo}; }
  bool operator==(const Exit&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Exit& e);
void PrintTo(const Exit& e, std::ostream* os);

class Trainit {
 public:
  // Starts trainit; check started() (or error()) before anything else.
  explicit Trainit(Spec spec);
  ~Trainit();
  Trainit(const Trainit&) = delete;
  Trainit& operator=(const Trainit&) = delete;

  [[nodiscard]] bool started() const { return pid_ > 0; }
  [[nodiscard]] int start_errno() const { return start_errno_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  // trainit's pid in the test's PID namespace.
  [[nodiscard]] pid_t pid() const { return pid_; }

  // Sends `signo` to trainit. Returns 0 or -errno.
  int signal(int signo) const;
  // Writes all of `data` to trainit's stdin (blocking); false on error.
  bool write_stdin(std::string_view data);
  void close_stdin();
  // Ends the intermediate parent (intermediate_parent): trainit is orphaned.
  void release_parent();

  // Waits until stdout has the line `line` (whole line, without "\n").
  // False on timeout or when stdout reached its end without it.
  bool wait_line(std::string_view line, Clock::duration timeout = kTimeout);
  // Waits until stdout has a line that starts with `prefix`; returns it.
  std::optional<std::string> wait_line_starting(std::string_view prefix, Clock::duration timeout = kTimeout);
  // Waits until stderr (trainit's log) has `text`; false on timeout or when
  // stderr reached its end without it.
  bool wait_err(std::string_view text, Clock::duration timeout = kTimeout);
  // Waits for trainit to end (then for its output to end, at most 2 s more).
  // On timeout, SIGKILLs it and returns kTimedOut.
  Exit wait(Clock::duration timeout = kTimeout);
  // How long wait() took from its call to trainit's end.
  [[nodiscard]] Clock::duration waited() const { return waited_; }

  [[nodiscard]] std::string out() const;
  [[nodiscard]] std::string err() const;
  [[nodiscard]] std::vector<std::string> out_lines() const;
  [[nodiscard]] std::vector<std::string> err_lines() const;
  // Everything trainit said, for failure messages.
  [[nodiscard]] std::string transcript() const;

 private:
  void start(const Spec& spec);
  void drain();
  void kill_and_reap();
  void discard();                              // after a stall before exec: back to before start()
  bool has_line(std::string_view line) const;  // holds mu_

  pid_t pid_ = -1;           // trainit's host pid
  pid_t waitee_ = -1;        // our child whose end is trainit's (stub for kUnderInit)
  pid_t intermediate_ = -1;  // intermediate_parent
  int release_fd_ = -1;      // closing it ends the intermediate
  bool reaped_ = false;
  int start_errno_ = 0;
  std::string error_;
  Clock::duration waited_{};

  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int stop_fd_[2] = {-1, -1};  // wakes the drain thread
  int tty_slave_ = -1;         // Spec::terminal: our hold on the slave side
  std::thread drainer_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string out_;
  std::string err_;
  std::string hang_report_;  // wait() timed out: process_tree_report() then
  // Emulated: the child did not exec within kExecStall of the clone.
  bool stalled_before_exec_ = false;
  static constexpr std::chrono::seconds kExecStall{20};
  bool out_eof_ = false;
  bool err_eof_ = false;
};

// Starts, closes stdin, waits; for one-shot runs.
struct Outcome {
  Exit exit;
  std::string out;
  std::string err;
  std::string transcript;
  Clock::duration elapsed{};
};
Outcome run(Spec spec, Clock::duration timeout = kTimeout);

// Splits text into lines (without their "\n").
std::vector<std::string> lines_of(std::string_view text);

// How many lines of text hold needle.
int count_lines_containing(std::string_view text, std::string_view needle);
// The children of `pid` (host pids), from /proc.
std::vector<pid_t> children_of(pid_t pid);
// `root` and its descendants, a line each, and a line for each of their
// threads: its state, wchan, system call and signals (for a hang's report).
std::string process_tree_report(pid_t root);
// The value of `key` in sigreport-style output ("key VALUE" lines), or "".
std::string field(std::string_view text, std::string_view key);

// A fresh directory under /var/tmp (not /tmp: trainit's /tmp is a tmpfs of
// its own, Spec::tmp), removed with its contents at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string operator/(std::string_view name) const;

 private:
  std::string path_;
};

// Copies trainit and the helpers `helpers` (names as for helper_path) into
// `dir` as dir/trainit and dir/NAME, and opens `dir` to every user (0755), for
// tests that run them as another uid: the build tree may sit where that uid
// cannot go (a checkout under /root, 0700 on Debian), a TempDir under
// /var/tmp can. The copies go with `dir`. False, with the reason in `error`, when one
// cannot be made.
bool copy_for_other_users(const TempDir& dir, const std::vector<std::string>& helpers, std::string* error);

// Skips the test (GTEST_SKIP) where namespaces cannot be made: not root.
#define TRAINIT_REQUIRE_ROOT()                                     \
  do {                                                             \
    if (::geteuid() != 0) {                                        \
      GTEST_SKIP() << "needs root (new PID and mount namespaces)"; \
    }                                                              \
  } while (0)

// Fails the test unless `t` (a Trainit) started.
#define TRAINIT_ASSERT_STARTED(t) ASSERT_TRUE((t).started()) << "cannot start trainit: " << (t).error()

}  // namespace trainit::test

#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "emulation.h"

namespace trainit::test {
namespace {

// --- The child side: between clone and exec --------------------------------
//
// The test process may have threads (other Trainit instances' drainers), and
// a raw clone() copies only the calling thread: from here to execve only
// async-signal-safe calls, no allocation, and raw syscalls for the credential
// calls that glibc would broadcast to threads that are not there.

// Everything the child needs, prepared before clone.
struct Exec {
  const char* path = nullptr;
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

struct ChildPlan {
  Exec trainit;
  Exec bystander;
  int stdin_fd = -1;  // the ends the child installs as 0, 1, 2
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::vector<std::pair<int, int>> fds;
  sigset_t blocked{};
  std::vector<int> ignored;
  bool set_creds = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const char* root = nullptr;
  const char* tmp = nullptr;  // Spec::tmp, or nullptr: a tmpfs of its own
  int pid_socket = -1;        // kUnderInit: trainit's process sends its credentials here
  const char* tty = nullptr;  // Spec::terminal: the pty's slave side
};

// Whether `path` is an aarch64 executable (ELF, machine EM_AARCH64).
bool is_aarch64(const std::string& path) {
  unsigned char header[20] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(header), sizeof(header));
  return in && std::memcmp(header, "\x7f\x45\x4c\x46", 4) == 0 && header[18] == 183 &&
         header[19] == 0;  // little-endian
}

// Under emulation an aarch64 program (trainit) starts as `EMULATOR PROGRAM
// ARGS...`, which needs no binfmt_misc; anything else as it is. `root` is
// where the program's path is looked up (Spec::root), the emulator's too.
void prepare(Exec& e, const std::string& path, std::vector<std::string> args, std::vector<std::string> env,
             const std::string& root = "") {
  e.argv_storage = std::move(args);
  e.argv_storage.insert(e.argv_storage.begin(), path);
  if (kEmulated && is_aarch64(root + path)) {
    e.argv_storage.insert(e.argv_storage.begin(), kEmulator);
    // qemu-user gives its program the environment in reverse order: given
    // reversed, the program sees Spec::env's order.
    std::reverse(env.begin(), env.end());
  }
  e.env_storage = std::move(env);
  for (auto& a : e.argv_storage) {
    e.argv.push_back(a.data());
  }
  e.argv.push_back(nullptr);
  for (auto& v : e.env_storage) {
    e.envp.push_back(v.data());
  }
  e.envp.push_back(nullptr);
  e.path = e.argv_storage[0].c_str();
}

pid_t raw_clone(unsigned long flags) {
  return static_cast<pid_t>(::syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0));
}

void say(int fd, const char* text) {
  ssize_t unused = ::write(fd, text, std::strlen(text));
  (void)unused;
}

[[noreturn]] void child_fail(const char* step) {
  int e = errno;
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + e % 10);
    e /= 10;
  } while (e > 0 && n < 15);
  char text[16];
  for (int i = 0; i < n; ++i) {
    text[i] = digits[n - 1 - i];
  }
  text[n] = '\0';
  say(STDERR_FILENO, "harness: ");
  say(STDERR_FILENO, step);
  say(STDERR_FILENO, " failed: errno ");
  say(STDERR_FILENO, text);
  say(STDERR_FILENO, "\n");
  ::_exit(199);
}

// A child in new namespaces (`flags`: CLONE_NEWPID, CLONE_NEWNS), as
// clone(2) makes one. qemu-user emulates a clone without CLONE_VM as fork and
// turns down every namespace flag (EINVAL); there the same child comes in
// steps that qemu hands to the kernel as they are: unshare(CLONE_NEWPID)
// puts this thread's next child in a new PID namespace, a plain fork makes
// it (PID 1 there), the child unshares its mount namespace, and setns() gives
// this thread's later children our own PID namespace back. Natively the first
// clone succeeds. Returns as fork does, errno set on failure.
pid_t clone_namespaced(unsigned long flags) {
  pid_t pid = raw_clone(flags);
  if (pid >= 0 || errno != EINVAL) {
    return pid;
  }
  int own = ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  if (own < 0) {
    return -1;
  }
  if ((flags & CLONE_NEWPID) != 0 && ::unshare(CLONE_NEWPID) < 0) {
    int e = errno;
    ::close(own);
    errno = e;
    return -1;
  }
  pid = raw_clone(0);
  if (pid == 0) {
    if ((flags & CLONE_NEWNS) != 0 && ::unshare(CLONE_NEWNS) < 0) {
      child_fail("unshare(CLONE_NEWNS)");
    }
    return 0;
  }
  int e = errno;
  if (::setns(own, CLONE_NEWPID) < 0) {
    // Every later child of this thread would land in that namespace.
    std::perror("harness: setns back to our PID namespace");
    std::abort();
  }
  ::close(own);
  errno = e;
  return pid;
}

void install_stdio(const ChildPlan& p) {
  if (p.tty != nullptr) {
    // A session of our own whose controlling terminal is the pty, as
    // `docker run -it` gives its init.
    int fd = -1;
    if (::setsid() < 0 || (fd = ::open(p.tty, O_RDWR)) < 0 || ::ioctl(fd, TIOCSCTTY, 0) < 0 ||
        ::dup2(fd, STDIN_FILENO) < 0 || ::dup2(fd, STDOUT_FILENO) < 0 || ::dup2(fd, STDERR_FILENO) < 0) {
      ::_exit(196);
    }
  } else if (::dup2(p.stdin_fd, STDIN_FILENO) < 0 || ::dup2(p.stdout_fd, STDOUT_FILENO) < 0 ||
             ::dup2(p.stderr_fd, STDERR_FILENO) < 0) {
    ::_exit(198);
  }
  for (auto [from, to] : p.fds) {
    if (::dup2(from, to) < 0) {
      child_fail("dup2");
    }
  }
}

// Leaves open only 0, 1, 2 and the Spec::fds targets, as a container runtime
// would: whatever the test process has open must not reach trainit.
void close_other_fds(const ChildPlan& p) {
  int keep[64];
  int n = 0;
  keep[n++] = 2;
  for (auto [from, to] : p.fds) {
    if (n < 63) {
      keep[n++] = to;
    }
  }
  for (int i = 1; i < n; ++i) {  // insertion sort: no library calls here
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  keep[n++] = 1 << 30;  // past the last descriptor
  for (int i = 0; i + 1 < n; ++i) {
    unsigned first = static_cast<unsigned>(keep[i]) + 1;
    unsigned last = static_cast<unsigned>(keep[i + 1]) - 1;
    if (first <= last && ::syscall(SYS_close_range, first, last, 0) < 0) {
      for (unsigned fd = first; fd <= last && fd < 65536; ++fd) {  // kernel < 5.9
        ::close(static_cast<int>(fd));
      }
    }
  }
}

void reset_signals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s <= 64; ++s) {
    if (s != SIGKILL && s != SIGSTOP) {
      ::sigaction(s, &dfl, nullptr);  // glibc's own real-time signals: EINVAL, fine
    }
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

[[noreturn]] void exec_trainit(const ChildPlan& p) {
  if (p.root != nullptr && (::chroot(p.root) < 0 || ::chdir("/") < 0)) {
    child_fail("chroot");
  }
  if (p.set_creds) {
    if (::syscall(SYS_setgroups, 0, nullptr) < 0) {
      child_fail("setgroups");
    }
    if (::syscall(SYS_setresgid, p.gid, p.gid, p.gid) < 0) {
      child_fail("setresgid");
    }
    if (::syscall(SYS_setresuid, p.uid, p.uid, p.uid) < 0) {
      child_fail("setresuid");
    }
  }
  close_other_fds(p);
  reset_signals();
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int s : p.ignored) {
    if (::sigaction(s, &ign, nullptr) < 0) {
      child_fail("sigaction");
    }
  }
  if (::sigprocmask(SIG_SETMASK, &p.blocked, nullptr) < 0) {
    child_fail("sigprocmask");
  }
  ::execve(p.trainit.path, p.trainit.argv.data(), p.trainit.envp.data());
  child_fail("execve");
}

// In a new PID and mount namespace: a private mount tree, our own /proc,
// and a /tmp of trainit's own as a container has (Spec::tmp, or an empty
// tmpfs gone with the namespace): what trainit writes under /tmp by default
// (the status file, logs, private directories) never reaches the machine's.
void mount_namespace(const ChildPlan& p) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) {
    child_fail("mount --make-rprivate /");
  }
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0) {
    child_fail("mount /proc");
  }
  if (p.tmp != nullptr) {
    if (::mount(p.tmp, "/tmp", nullptr, MS_BIND, nullptr) < 0) {
      child_fail("mount --bind Spec::tmp /tmp");
    }
  } else if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0) {
    child_fail("mount -t tmpfs tmpfs /tmp");
  }
}

// PID 1 of a namespace where trainit is PID 2: starts trainit and the
// bystander, reaps everything, exits with trainit's status (128+N for a
// signal).
[[noreturn]] void stub_init(const ChildPlan& p) {
  mount_namespace(p);
  install_stdio(p);
  pid_t trainit = raw_clone(0);
  if (trainit < 0) {
    child_fail("clone trainit");
  }
  if (trainit == 0) {
    // The kernel translates the pid in SCM_CREDENTIALS into the receiver's
    // namespace: the test learns trainit's pid there.
    struct ucred cred = {::getpid(), ::getuid(), ::getgid()};
    char control[CMSG_SPACE(sizeof(cred))] = {};
    char byte = 0;
    struct iovec iov = {&byte, 1};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_CREDENTIALS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(cred));
    std::memcpy(CMSG_DATA(cmsg), &cred, sizeof(cred));
    if (::sendmsg(p.pid_socket, &msg, 0) < 0) {
      child_fail("sendmsg SCM_CREDENTIALS");
    }
    exec_trainit(p);
  }
  pid_t bystander = -1;
  if (!p.bystander.argv_storage.empty()) {
    bystander = raw_clone(0);
    if (bystander == 0) {
      ChildPlan none;
      close_other_fds(none);
      reset_signals();
      ::execve(p.bystander.path, p.bystander.argv.data(), p.bystander.envp.data());
      child_fail("execve bystander");
    }
  }
  bool bystander_alive = bystander > 0;
  for (;;) {
    int status;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0 && errno != EINTR) {
      ::_exit(197);
    }
    if (pid == bystander) {
      bystander_alive = false;
    }
    if (pid == trainit) {
      // A SIGKILL from trainit may still be on its way: give it 100 ms.
      for (int i = 0; bystander_alive && i < 100; ++i) {
        if (::waitpid(bystander, nullptr, WNOHANG) == bystander) {
          bystander_alive = false;
        } else {
          struct timespec ms = {0, 1'000'000};
          ::nanosleep(&ms, nullptr);
        }
      }
      if (bystander > 0) {
        say(STDOUT_FILENO, bystander_alive ? "stub: bystander alive\n" : "stub: bystander gone\n");
      }
      ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
  }
}

// trainit's parent when it must be able to die first (-p): reports trainit's
// pid, then lives until `release` reaches end of file.
[[noreturn]] void intermediate(const ChildPlan& p, int report, int release) {
  pid_t trainit = clone_namespaced(CLONE_NEWPID | CLONE_NEWNS);
  if (trainit == 0) {
    mount_namespace(p);
    install_stdio(p);
    exec_trainit(p);
  }
  int value = trainit < 0 ? -errno : trainit;
  ssize_t unused = ::write(report, &value, sizeof(value));
  (void)unused;
  ::close(p.stdin_fd);
  ::close(p.stdout_fd);
  ::close(p.stderr_fd);
  char byte;
  while (::read(release, &byte, 1) != 0 && errno == EINTR) {
  }
  ::_exit(0);
}

// The first complete line of `text` that is `want` (whole) or starts with it.
std::optional<std::string> find_line(std::string_view text, std::string_view want, bool whole) {
  size_t pos = 0;
  for (;;) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      return std::nullopt;
    }
    std::string_view line = text.substr(pos, nl - pos);
    if (whole ? line == want : line.starts_with(want)) {
      return std::string(line);
    }
    pos = nl + 1;
  }
}

// The pid in the first SCM_CREDENTIALS message on `socket`; -1 after kTimeout.
pid_t receive_pid(int socket) {
  struct pollfd pfd = {socket, POLLIN, 0};
  if (::poll(&pfd, 1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(kTimeout).count())) != 1) {
    return -1;
  }
  struct ucred cred {};
  char control[CMSG_SPACE(sizeof(cred))] = {};
  char byte;
  struct iovec iov = {&byte, 1};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (::recvmsg(socket, &msg, 0) < 0) {
    return -1;
  }
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      return cred.pid;
    }
  }
  return -1;
}

// --- /proc ------------------------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string trainit_path() {
  return TRAINIT_BIN;
}

std::string helper_path(std::string_view name) {
  return std::string(TRAINIT_HELPERS_DIR) + "/" + std::string(name);
}

std::string helper_binary_path(std::string_view name) {
  return std::string(TRAINIT_HELPERS_BUILD_DIR) + "/" + std::string(name);
}

std::ostream& operator<<(std::ostream& os, const Exit& e) {
  switch (e.kind) {
    case Exit::Kind::kExited:
      return os << "exit code " << e.value;
    case Exit::Kind::kSignaled:
      return os << "killed by signal " << e.value << " (" << strsignal(e.value) << ")";
    case Exit::Kind::kTimedOut:
      return os << "timed out (killed with SIGKILL)";
    case Exit::Kind::kNotStarted:
      return os << "not started";
  }
  return os;
}

void PrintTo(const Exit& e, std::ostream* os) {
  *os << e;
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      lines.emplace_back(text);
      break;
    }
    lines.emplace_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  return lines;
}

int count_lines_containing(std::string_view text, std::string_view needle) {
  int n = 0;
  for (const auto& l : lines_of(text)) {
    n += l.find(needle) != std::string::npos ? 1 : 0;
  }
  return n;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) {
    return children;
  }
  while (struct dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') {
      continue;
    }
    std::string stat = read_file(std::string("/proc/") + entry->d_name + "/stat");
    size_t end = stat.rfind(')');
    if (end == std::string::npos) {
      continue;
    }
    char state;
    int ppid;
    if (std::sscanf(stat.c_str() + end + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      children.push_back(std::atoi(entry->d_name));
    }
  }
  ::closedir(proc);
  return children;
}

namespace {

// One line per thread of `pid` and of each of its descendants: state, the
// kernel function it sleeps in, the system call it is in, and its pending
// and blocked signals; what a hang's report needs, read before the SIGKILL.
void describe_tree(pid_t pid, int depth, std::string& out) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::string cmdline = read_file(dir + "/cmdline");
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  out += std::string(2 * depth, ' ') + std::to_string(pid) + " " + cmdline.substr(0, 160) + "\n";
  std::string signals;
  std::istringstream status(read_file(dir + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("ShdPnd:") || line.starts_with("SigBlk:")) {
      signals += " " + line.substr(0, 6) + "=" + line.substr(line.find_first_not_of(" \t", 7));
    }
  }
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(dir + "/task", ec)) {
    const std::string t = task.path().string();
    std::string stat = read_file(t + "/stat");
    const size_t end = stat.rfind(')');
    std::string sig_pending;
    std::istringstream tstatus(read_file(t + "/status"));
    for (std::string line; std::getline(tstatus, line);) {
      if (line.starts_with("SigPnd:")) {
        sig_pending = " SigPnd=" + line.substr(line.find_first_not_of(" \t", 7));
      }
    }
    std::string syscall = read_file(t + "/syscall");
    syscall = syscall.substr(0, syscall.find(' '));
    out += std::string(2 * depth + 2, ' ') + "task " + task.path().filename().string() +
           " state=" + (end == std::string::npos ? "?" : stat.substr(end + 2, 1)) +
           " wchan=" + read_file(t + "/wchan") + " syscall=" + syscall + sig_pending + signals + "\n";
  }
  for (pid_t child : children_of(pid)) {
    describe_tree(child, depth + 1, out);
  }
}

}  // namespace

std::string process_tree_report(pid_t root) {
  std::string out;
  if (root > 0) {
    describe_tree(root, 0, out);
  }
  return out;
}

std::string field(std::string_view text, std::string_view key) {
  for (const auto& line : lines_of(text)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == ' ') {
      return line.substr(key.size() + 1);
    }
  }
  return "";
}

// --- Trainit ------------------------------------------------------------------

Trainit::Trainit(Spec spec) {
  start(spec);
  // Emulated, qemu-user (7.2) left the child of our fork deadlocked before
  // it exec'd trainit, both its threads (ours and qemu's RCU thread) in
  // futex waits for good, when this process started its drain thread at
  // once and other processes forked hard beside it: ExecMode's 256 runs
  // beside the storm of orphans hung in 7 of 10 runs. Since start() waits
  // for the child's exec before anything else, none has (12 runs). Should
  // one stall yet, the child is the harness's, not trainit: it is started
  // again, twice at most, and says so.
  for (int again = 0; again < 2 && stalled_before_exec_; ++again) {
    std::fprintf(stderr, "harness: the child of qemu's fork ran nothing for %lld s; starting it again\n%s",
                 static_cast<long long>(kExecStall.count()), hang_report_.c_str());
    discard();
    start(spec);
  }
}

namespace {

// Whether the write ends of `fd`'s pipe all closed within `timeout`.
bool closed_within(int fd, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    char byte;
    if (r > 0 && ::read(fd, &byte, 1) == 0) {
      return true;
    }
    if (r < 0 && errno != EINTR) {
      return true;  // nothing to wait on: as if it had closed
    }
  }
}

}  // namespace

void Trainit::discard() {
  for (int* fd : {&stdin_fd_, &stdout_fd_, &stderr_fd_, &stop_fd_[0], &stop_fd_[1], &tty_slave_}) {
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  }
  pid_ = waitee_ = -1;
  reaped_ = stalled_before_exec_ = false;
  start_errno_ = 0;
  error_.clear();
  hang_report_.clear();
}

void Trainit::start(const Spec& spec) {
  ChildPlan plan;
  prepare(plan.trainit, spec.program, spec.args, spec.env, spec.root);
  if (!spec.bystander.empty()) {
    prepare(plan.bystander, spec.bystander[0], {spec.bystander.begin() + 1, spec.bystander.end()}, spec.env);
  }
  sigemptyset(&plan.blocked);
  for (int s : spec.blocked) {
    sigaddset(&plan.blocked, s);
  }
  plan.ignored = spec.ignored;
  plan.fds = spec.fds;
  if (spec.uid) {
    plan.set_creds = true;
    plan.uid = *spec.uid;
    plan.gid = spec.gid;
  }
  if (!spec.tmp.empty()) {
    plan.tmp = spec.tmp.c_str();
  }
  if (!spec.root.empty()) {
    plan.root = spec.root.c_str();
  }

  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) < 0 || ::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0 ||
      ::pipe2(stop_fd_, O_CLOEXEC) < 0) {
    start_errno_ = errno;
    error_ = std::string("pipe: ") + std::strerror(errno);
    return;
  }
  plan.stdin_fd = in[0];
  plan.stdout_fd = out[1];
  plan.stderr_fd = err[1];
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  stderr_fd_ = err[0];
  std::string tty_name;
  if (spec.terminal) {
    // trainit's 0, 1 and 2 are the slave side; we read and write the master
    // (the pipes stay unused: stderr reads as empty, all output is stdout).
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    ::close(stdin_fd_);
    ::close(stdout_fd_);
    stdout_fd_ = master;
    stdin_fd_ = master < 0 ? -1 : ::fcntl(master, F_DUPFD_CLOEXEC, 0);
    struct termios mode {};
    if (master < 0 || stdin_fd_ < 0 || ::grantpt(master) < 0 || ::unlockpt(master) < 0 ||
        ::ptsname(master) == nullptr) {
      start_errno_ = errno;
      error_ = std::string("pty: ") + std::strerror(errno);
    } else {
      tty_name = ::ptsname(master);
      // Held until trainit has ended: a master whose slave nobody has open
      // reads as end of file, and trainit may not have opened it yet.
      tty_slave_ = ::open(tty_name.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (tty_slave_ < 0 || ::tcgetattr(tty_slave_, &mode) < 0) {
        start_errno_ = errno;
        error_ = std::string("pty slave: ") + std::strerror(errno);
      }
    }
    if (error_.empty()) {
      // Output as written (no "\r\n"), no echo of what the test types.
      mode.c_oflag &= ~static_cast<tcflag_t>(OPOST);
      mode.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOCTL);
      ::tcsetattr(tty_slave_, TCSANOW, &mode);
      plan.tty = tty_name.c_str();
    }
  }

  int report[2] = {-1, -1}, release[2] = {-1, -1}, creds[2] = {-1, -1};
  if (error_.empty() && spec.layout == Layout::kUnderInit) {
    int on = 1;
    if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, creds) < 0 ||
        ::setsockopt(creds[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0) {
      start_errno_ = errno;
      error_ = std::string("socketpair: ") + std::strerror(errno);
    }
    plan.pid_socket = creds[1];
  }
  if (error_.empty() && spec.intermediate_parent &&
      (::pipe2(report, O_CLOEXEC) < 0 || ::pipe2(release, O_CLOEXEC) < 0)) {
    start_errno_ = errno;
    error_ = std::string("pipe: ") + std::strerror(errno);
  }

  if (error_.empty()) {
    if (spec.intermediate_parent) {
      pid_t pid = raw_clone(0);
      if (pid == 0) {
        ::close(release[1]);
        intermediate(plan, report[1], release[0]);
      }
      if (pid > 0) {
        intermediate_ = pid;
        release_fd_ = release[1];
        release[1] = -1;
        int value = 0;
        if (::read(report[0], &value, sizeof(value)) != sizeof(value)) {
          value = -EIO;
        }
        if (value < 0) {
          start_errno_ = -value;
          error_ = std::string("clone: ") + std::strerror(-value);
        } else {
          pid_ = waitee_ = value;
        }
      } else {
        start_errno_ = errno;
        error_ = std::string("clone: ") + std::strerror(errno);
      }
    } else {
      unsigned long flags = spec.layout == Layout::kNoNamespace ? 0 : CLONE_NEWPID | CLONE_NEWNS;
      // Emulated, the child's exec is seen (its end of `execd` closes on
      // exec, or at its exit): see stalled_before_exec_. Not under the stub
      // init, which stays and never execs.
      int execd[2] = {-1, -1};
      if (kEmulated && spec.layout != Layout::kUnderInit && ::pipe2(execd, O_CLOEXEC) < 0) {
        execd[0] = execd[1] = -1;
      }
      pid_t pid = clone_namespaced(flags);
      if (pid == 0) {
        if (spec.layout == Layout::kUnderInit) {
          stub_init(plan);
        }
        if (spec.layout == Layout::kPid1) {
          mount_namespace(plan);
        }
        install_stdio(plan);
        exec_trainit(plan);
      }
      if (pid < 0) {
        start_errno_ = errno;
        error_ = std::string("clone: ") + std::strerror(errno);
      } else {
        waitee_ = pid;
        pid_ = pid;
        if (execd[1] >= 0) {
          ::close(execd[1]);
          execd[1] = -1;
          stalled_before_exec_ = !closed_within(execd[0], kExecStall);
          if (stalled_before_exec_) {
            hang_report_ = process_tree_report(waitee_);
            kill_and_reap();
          }
        }
      }
      for (int fd : execd) {
        if (fd >= 0) {
          ::close(fd);
        }
      }
    }
  }
  for (int fd : {in[0], out[1], err[1], report[0], report[1], release[0], release[1], creds[1]}) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  if (waitee_ > 0 && !stalled_before_exec_) {
    drainer_ = std::thread([this] { drain(); });
    if (spec.layout == Layout::kUnderInit) {
      pid_ = receive_pid(creds[0]);
      if (pid_ < 0) {
        error_ = "trainit's pid did not come from under the stub init";
        kill_and_reap();
      }
    }
  } else {
    pid_ = -1;
  }
  if (creds[0] >= 0) {
    ::close(creds[0]);
  }
}

Trainit::~Trainit() {
  if (waitee_ > 0 && !reaped_) {
    kill_and_reap();
  }
  if (drainer_.joinable()) {
    char byte = 0;
    ssize_t unused = ::write(stop_fd_[1], &byte, 1);
    (void)unused;
    drainer_.join();
  }
  for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_, stop_fd_[0], stop_fd_[1], release_fd_, tty_slave_}) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  if (intermediate_ > 0) {
    ::kill(intermediate_, SIGKILL);
    ::waitpid(intermediate_, nullptr, 0);
  }
}

void Trainit::kill_and_reap() {
  // Outside a namespace of its own, trainit's children would outlive it.
  std::vector<pid_t> children;
  if (pid_ > 0) {
    children = children_of(pid_);
    ::kill(pid_, SIGKILL);
  }
  for (pid_t child : children) {
    ::kill(-child, SIGKILL);
    ::kill(child, SIGKILL);
  }
  if (waitee_ > 0) {
    ::kill(waitee_, SIGKILL);
    while (::waitpid(waitee_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (intermediate_ > 0) {
    ::kill(intermediate_, SIGKILL);
    while (::waitpid(intermediate_, nullptr, 0) < 0 && errno == EINTR) {
    }
    intermediate_ = -1;
  }
  reaped_ = true;
}

void Trainit::drain() {
  struct pollfd fds[3] = {{stdout_fd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}, {stop_fd_[0], POLLIN, 0}};
  char buf[65536];
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (out_eof_ && err_eof_) {
        return;
      }
    }
    int n = ::poll(fds, 3, -1);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 || fds[2].revents != 0) {
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) {
        continue;
      }
      std::lock_guard lock(mu_);
      if (got <= 0) {
        (i == 0 ? out_eof_ : err_eof_) = true;
        fds[i].fd = -1;
      } else {
        (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(got));
      }
      cv_.notify_all();
    }
  }
}

int Trainit::signal(int signo) const {
  if (pid_ <= 0) {
    return -ESRCH;
  }
  return ::kill(pid_, signo) < 0 ? -errno : 0;
}

bool Trainit::write_stdin(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(stdin_fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void Trainit::close_stdin() {
  if (stdin_fd_ >= 0) {
    ::close(stdin_fd_);
    stdin_fd_ = -1;
  }
}

void Trainit::release_parent() {
  if (release_fd_ >= 0) {
    ::close(release_fd_);
    release_fd_ = -1;
  }
  if (intermediate_ > 0) {
    while (::waitpid(intermediate_, nullptr, 0) < 0 && errno == EINTR) {
    }
    intermediate_ = -1;
  }
}

bool Trainit::has_line(std::string_view line) const {
  return find_line(out_, line, true).has_value();
}

bool Trainit::wait_line(std::string_view line, Clock::duration timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return has_line(line) || out_eof_; });
  return has_line(line);
}

std::optional<std::string> Trainit::wait_line_starting(std::string_view prefix, Clock::duration timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return find_line(out_, prefix, false).has_value() || out_eof_; });
  return find_line(out_, prefix, false);
}

bool Trainit::wait_err(std::string_view text, Clock::duration timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return err_.find(text) != std::string::npos || err_eof_; });
  return err_.find(text) != std::string::npos;
}

Exit Trainit::wait(Clock::duration timeout) {
  if (waitee_ <= 0) {
    return {};
  }
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  Exit exit{Exit::Kind::kTimedOut, 0};
  if (!reaped_) {
    for (;;) {
      int status;
      pid_t r = ::waitpid(waitee_, &status, WNOHANG);
      if (r == waitee_) {
        waited_ = Clock::now() - start;
        reaped_ = true;
        exit = WIFEXITED(status) ? Exit::code(WEXITSTATUS(status)) : Exit::signal(WTERMSIG(status));
        break;
      }
      if (r < 0 && errno != EINTR && errno != ECHILD) {
        break;
      }
      if (Clock::now() >= deadline) {
        waited_ = Clock::now() - start;
        hang_report_ = process_tree_report(waitee_);
        kill_and_reap();
        break;
      }
      // ECHILD: not ours yet (an intermediate parent still lives).
      std::this_thread::sleep_for(200us);
    }
  }
  if (tty_slave_ >= 0) {
    ::close(tty_slave_);
    tty_slave_ = -1;
  }
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, 2s, [&] { return out_eof_ && err_eof_; });
  return exit;
}

std::string Trainit::out() const {
  std::lock_guard lock(mu_);
  return out_;
}

std::string Trainit::err() const {
  std::lock_guard lock(mu_);
  return err_;
}

std::vector<std::string> Trainit::out_lines() const {
  return lines_of(out());
}

std::vector<std::string> Trainit::err_lines() const {
  return lines_of(err());
}

std::string Trainit::transcript() const {
  std::lock_guard lock(mu_);
  std::string text = "\n--- stdout ---\n" + out_.substr(0, 8192);
  if (out_.size() > 8192) {
    text += "\n[... " + std::to_string(out_.size() - 8192) + " more bytes]";
  }
  text += "\n--- stderr ---\n" + err_.substr(0, 8192);
  if (err_.size() > 8192) {
    text += "\n[... " + std::to_string(err_.size() - 8192) + " more bytes]";
  }
  if (!hang_report_.empty()) {
    text += "\n--- the processes when the wait timed out ---\n" + hang_report_.substr(0, 8192);
  }
  return text + "\n--------------";
}

Outcome run(Spec spec, Clock::duration timeout) {
  Outcome r;
  Trainit t(std::move(spec));
  if (!t.started()) {
    r.err = t.error();
    r.transcript = "not started: " + t.error();
    return r;
  }
  t.close_stdin();
  r.exit = t.wait(timeout);
  r.elapsed = t.waited();
  r.out = t.out();
  r.err = t.err();
  r.transcript = t.transcript();
  return r;
}

// --- TempDir ------------------------------------------------------------------

TempDir::TempDir() {
  char pattern[] = "/var/tmp/trainit-test.XXXXXX";
  if (::mkdtemp(pattern) != nullptr) {
    path_ = pattern;
  }
}

TempDir::~TempDir() {
  if (!path_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

std::string TempDir::operator/(std::string_view name) const {
  return path_ + "/" + std::string(name);
}

bool copy_for_other_users(const TempDir& dir, const std::vector<std::string>& helpers, std::string* error) {
  namespace fs = std::filesystem;
  if (dir.path().empty()) {
    *error = "no temporary directory";
    return false;
  }
  std::vector<std::pair<std::string, std::string>> copies = {{trainit_path(), dir / "trainit"}};
  for (const auto& name : helpers) {
    copies.emplace_back(helper_path(name), dir / name);
    if (kEmulated) {  // helper_path() is the launcher of NAME.aarch64 beside it
      copies.emplace_back(helper_binary_path(name), dir / (name + ".aarch64"));
    }
  }
  constexpr auto kRunnable = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec;  // 0755
  std::error_code e;
  fs::permissions(dir.path(), kRunnable, e);
  if (e) {
    *error = "chmod " + dir.path() + ": " + e.message();
    return false;
  }
  for (const auto& [from, to] : copies) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, e);
    if (!e) {
      fs::permissions(to, kRunnable, e);
    }
    if (e) {
      *error = "copying " + from + " to " + to + ": " + e.message();
      return false;
    }
  }
  return true;
}

}  // namespace trainit::test

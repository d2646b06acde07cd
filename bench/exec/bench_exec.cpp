// bench_exec: trainit's exec mode next to tini-static, tini, dumb-init and
// catatonit, each run as PID 1 of a fresh PID namespace, interleaved
// round-robin in one run, printed as one markdown table:
//
//   - start-up: `INIT -- /bin/true` as PID 1, wall time from clone() to
//     waitpid(), median minus the median of `/bin/true` itself as PID 1, and
//     the CPU it took (wait4's rusage);
//   - VmHWM of the init supervising a sleeping child;
//   - SIGTERM forwarding: kill(init) to the child taking the signal, with
//     everything pinned to CPU 0 and not pinned;
//   - 20,000 orphans streamed by the child (double fork): the init's CPU
//     (`se.sum_exec_runtime`) and the most zombies outstanding at once.
//
// Needs root (CLONE_NEWPID). Run by hand; see --help.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"

#ifndef BENCH_EXEC_TRAINIT
#define BENCH_EXEC_TRAINIT "trainit"
#endif
#ifndef BENCH_EXEC_HELPER
#define BENCH_EXEC_HELPER "bench_exec_helper"
#endif

namespace {

using bench::die;
using bench::now_ns;
using bench::Ns;

constexpr int kReadyTimeoutMs = 10'000;
constexpr int kStormTimeoutMs = 300'000;
constexpr int kDrainTimeoutMs = 30'000;

std::string strprintf(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  (void)std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

struct Config {
  int runs = 1000;         // start-up runs per init
  int sigterm_reps = 200;  // per init and per mode (pinned, not pinned)
  int hwm_reps = 5;
  int orphans = 20'000;
  int storm_rounds = 2;
  bool keep_stderr = false;
  std::string only;                                             // comma-separated init names; empty: all
  std::vector<std::pair<std::string, std::string>> candidates;  // NAME, PATH: other trainit builds
  std::string trainit = BENCH_EXEC_TRAINIT;
  std::string helper = BENCH_EXEC_HELPER;
};

// One column: an init and the arguments it needs before the command. The
// "direct" column runs the command itself as PID 1, with no init.
struct Init {
  std::string name;
  std::string path;
  std::vector<std::string> before;
};

// Everything measured for one column.
struct Results {
  std::vector<Ns> startup;
  std::vector<Ns> startup_cpu;  // the init's CPU and its children's (/bin/true)
  std::vector<long> hwm_kb;
  std::vector<Ns> term_pinned;
  std::vector<Ns> term_free;
  std::vector<double> cpu_end_ms;
  std::vector<double> cpu_storm_ms;
  std::vector<double> storm_wakeups;  // voluntary context switches: times the init slept and woke
  std::vector<Ns> storm_wall;
  int max_zombies = -1;
  std::vector<int> zombie_samples;  // every 1 ms sample of every storm
  int failures = 0;
  std::string first_failure;
};

// argv for one run, built before clone() so that the child only execs.
class Argv {
 public:
  Argv(const Init& init, const std::vector<std::string>& command) {
    if (!init.path.empty()) {
      strings_.push_back(init.path);
      strings_.insert(strings_.end(), init.before.begin(), init.before.end());
    }
    strings_.insert(strings_.end(), command.begin(), command.end());
    for (auto& s : strings_) {
      pointers_.push_back(s.data());
    }
    pointers_.push_back(nullptr);
  }
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

int g_devnull = -1;

// Clones a child into a new PID namespace, where it is PID 1, and execs argv
// there with stdin and stdout on /dev/null, stderr on /dev/null unless kept,
// and fds[i] as fd 3 + i. Returns the child's pid (in our namespace).
pid_t spawn_pid1(const Argv& argv, const std::vector<int>& fds, bool keep_stderr) {
  // A raw clone behaves as fork() here: no new stack, the child returns too.
  long r = ::syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, 0);
  if (r < 0) {
    die("clone(CLONE_NEWPID): %s (run as root)", std::strerror(errno));
  }
  if (r > 0) {
    return static_cast<pid_t>(r);
  }
  // The child: async-signal-safe calls only, then exec.
  int high[8];
  size_t n = std::min<size_t>(fds.size(), 8);
  for (size_t i = 0; i < n; ++i) {
    high[i] = ::fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
  }
  ::dup2(g_devnull, 0);
  ::dup2(g_devnull, 1);
  if (!keep_stderr) {
    ::dup2(g_devnull, 2);
  }
  for (size_t i = 0; i < n; ++i) {
    ::dup2(high[i], 3 + static_cast<int>(i));  // dup2 clears close-on-exec
  }
  (void)::signal(SIGPIPE, SIG_DFL);
  ::execve(argv.get()[0], argv.get(), environ);
  ::_exit(127);
}

// Waits for pid; true when it exited 0. Describes anything else in *why.
// With usage, also its CPU and that of the children it reaped (wait4).
bool wait_ok(pid_t pid, std::string* why, rusage* usage = nullptr) {
  int status;
  while (::wait4(pid, &status, 0, usage) < 0) {
    if (errno != EINTR) {
      *why = strprintf("waitpid: %s", std::strerror(errno));
      return false;
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return true;
  }
  *why = WIFEXITED(status) ? strprintf("exit status %d", WEXITSTATUS(status))
                           : strprintf("killed by signal %d", WTERMSIG(status));
  return false;
}

// Reads exactly size bytes within timeout_ms; false on EOF, error or timeout.
bool read_full(int fd, void* data, size_t size, int timeout_ms) {
  char* p = static_cast<char*>(data);
  const Ns deadline = now_ns() + static_cast<Ns>(timeout_ms) * 1'000'000;
  while (size > 0) {
    int left = static_cast<int>((deadline - now_ns()) / 1'000'000);
    if (left < 0) {
      return false;
    }
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, left);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return false;
    }
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void sleep_ns(Ns ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return std::nullopt;
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// "VmHWM:  712 kB" from /proc/PID/status; -1 when missing.
long read_hwm_kb(pid_t pid) {
  auto text = read_file(strprintf("/proc/%d/status", pid));
  if (!text) {
    return -1;
  }
  size_t at = text->find("VmHWM:");
  return at == std::string::npos ? -1 : std::strtol(text->c_str() + at + 6, nullptr, 10);
}

// A field of /proc/PID/sched ("se.sum_exec_runtime" is in ms); -1 when missing.
double read_sched(pid_t pid, const char* field) {
  auto text = read_file(strprintf("/proc/%d/sched", pid));
  if (!text) {
    return -1;
  }
  size_t at = text->find(std::string("\n") + field);
  if (at == std::string::npos) {
    return -1;
  }
  at = text->find(':', at);
  return at == std::string::npos ? -1 : std::strtod(text->c_str() + at + 1, nullptr);
}

// Zombies among pid's children (orphans land there: it is PID 1). -1 when the
// children list cannot be read (no CONFIG_PROC_CHILDREN).
int count_zombies(pid_t pid) {
  auto list = read_file(strprintf("/proc/%d/task/%d/children", pid, pid));
  if (!list) {
    return -1;
  }
  int zombies = 0;
  const char* p = list->c_str();
  for (;;) {
    char* end;
    long child = std::strtol(p, &end, 10);
    if (end == p) {
      break;
    }
    p = end;
    char path[64];
    (void)std::snprintf(path, sizeof(path), "/proc/%ld/stat", child);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;  // reaped meanwhile
    }
    char buf[512];
    ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) {
      continue;
    }
    buf[n] = '\0';
    const char* paren = std::strrchr(buf, ')');
    if (paren != nullptr && paren[1] == ' ' && paren[2] == 'Z') {
      ++zombies;
    }
  }
  return zombies;
}

void set_affinity(bool pinned) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pinned) {
    CPU_SET(0, &set);
  } else {
    long n = ::sysconf(_SC_NPROCESSORS_CONF);
    for (long i = 0; i < n && i < CPU_SETSIZE; ++i) {
      CPU_SET(static_cast<int>(i), &set);
    }
  }
  if (::sched_setaffinity(0, sizeof(set), &set) < 0) {
    die("sched_setaffinity: %s", std::strerror(errno));
  }
}

void fail(Results* r, const std::string& what) {
  if (r->failures++ == 0) {
    r->first_failure = what;
  }
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) < 0) {
    die("pipe2: %s", std::strerror(errno));
  }
}

// Kills a namespace whose run went wrong: SIGKILL to its PID 1 takes all.
void kill_run(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// --- the four measurements, one run each -------------------------------------

void run_startup(const Init& init, const Config& cfg, Results* r) {
  static const std::vector<std::string> kTrue = {"/bin/true"};
  Argv argv(init, kTrue);
  std::string why;
  rusage usage{};
  Ns t0 = now_ns();
  pid_t pid = spawn_pid1(argv, {}, cfg.keep_stderr);
  bool ok = wait_ok(pid, &why, &usage);
  Ns t = now_ns() - t0;
  if (ok) {
    r->startup.push_back(t);
    // Scheduler time, exact where wall time takes the machine's load.
    r->startup_cpu.push_back((usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1'000'000'000LL +
                             (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1'000LL);
  } else {
    fail(r, "start-up: " + why);
  }
}

// Drops a file's pages from the page cache, so that the next exec reads it
// through readahead, as a container's first start does. How the pages came
// into the cache decides how many the kernel maps around each fault (a file
// just written by the linker sits in large folios): without this, the same
// binary measures 60 kB apart depending on what last wrote or read it.
void evict_from_page_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return;  // not a file we can open: measured as it is
  }
  (void)::fdatasync(fd);  // dirty pages cannot be dropped
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void run_hwm(const Init& init, const Config& cfg, Results* r) {
  // Every binary of the run, the init's and the options naming one (an
  // `env VAR=... trainit` candidate), from the same cold cache.
  evict_from_page_cache(init.path.empty() ? cfg.helper : init.path);
  for (const auto& arg : init.before) {
    if (!arg.empty() && arg[0] == '/') {
      evict_from_page_cache(arg);
    }
  }
  int p[2];
  make_pipe(p);
  Argv argv(init, {cfg.helper, "sleep", "3"});
  pid_t pid = spawn_pid1(argv, {p[1]}, cfg.keep_stderr);
  ::close(p[1]);
  char byte;
  if (!read_full(p[0], &byte, 1, kReadyTimeoutMs)) {
    fail(r, "VmHWM: the sleeping child never started");
  } else {
    sleep_ns(50'000'000);  // let the init settle into its wait
    long kb = read_hwm_kb(pid);
    if (kb < 0) {
      fail(r, "VmHWM: cannot read /proc/PID/status");
    } else {
      r->hwm_kb.push_back(kb);
    }
  }
  ::close(p[0]);
  kill_run(pid);
}

// The child blocks SIGTERM and takes it with sigwaitinfo(), then reports the
// CLOCK_MONOTONIC time it did; the latency runs from just before kill().
void run_sigterm(const Init& init, const Config& cfg, bool pinned, Results* r) {
  int p[2];
  make_pipe(p);
  Argv argv(init, {cfg.helper, "sigterm", "3"});
  set_affinity(pinned);
  pid_t pid = spawn_pid1(argv, {p[1]}, cfg.keep_stderr);
  ::close(p[1]);
  char byte;
  Ns taken = 0;
  std::string why;
  if (!read_full(p[0], &byte, 1, kReadyTimeoutMs)) {
    fail(r, "SIGTERM: the child never started");
    kill_run(pid);
  } else {
    sleep_ns(1'000'000);  // let the init settle into its wait
    Ns t0 = now_ns();
    ::kill(pid, SIGTERM);
    if (!read_full(p[0], &taken, sizeof(taken), kReadyTimeoutMs)) {
      fail(r, "SIGTERM: never reached the child");
      kill_run(pid);
    } else if (!wait_ok(pid, &why)) {
      fail(r, "SIGTERM: " + why);
    } else {
      (pinned ? r->term_pinned : r->term_free).push_back(taken - t0);
    }
  }
  ::close(p[0]);
  set_affinity(false);
}

void run_storm(const Init& init, const Config& cfg, Results* r) {
  int out[2];
  int in[2];
  make_pipe(out);
  make_pipe(in);
  Argv argv(init, {cfg.helper, "storm", std::to_string(cfg.orphans), "3", "4"});
  pid_t pid = spawn_pid1(argv, {out[1], in[0]}, cfg.keep_stderr);
  ::close(out[1]);
  ::close(in[0]);
  char byte;
  if (!read_full(out[0], &byte, 1, kReadyTimeoutMs)) {
    fail(r, "orphans: the child never started");
    ::close(out[0]);
    ::close(in[1]);
    kill_run(pid);
    return;
  }
  sleep_ns(1'000'000);
  const double cpu_start = read_sched(pid, "se.sum_exec_runtime");
  const double wakeups_start = read_sched(pid, "nr_voluntary_switches");
  int max_zombies = 0;
  std::vector<int> samples;
  const Ns t0 = now_ns();
  if (::write(in[1], "g", 1) != 1) {
    die("write to the storm child: %s", std::strerror(errno));
  }
  // Sample the zombies outstanding every millisecond until the child is done.
  bool done = false;
  while (!done) {
    pollfd pfd{out[0], POLLIN, 0};
    int n = ::poll(&pfd, 1, 1);
    if (n > 0) {
      done = true;
      if (::read(out[0], &byte, 1) != 1) {
        fail(r, "orphans: the child died in the storm");
        ::close(out[0]);
        ::close(in[1]);
        kill_run(pid);
        return;
      }
    }
    samples.push_back(count_zombies(pid));
    max_zombies = std::max(max_zombies, samples.back());
    if (!done && now_ns() - t0 > static_cast<Ns>(kStormTimeoutMs) * 1'000'000) {
      fail(r, "orphans: the storm timed out");
      ::close(out[0]);
      ::close(in[1]);
      kill_run(pid);
      return;
    }
  }
  const Ns wall = now_ns() - t0;
  // The child stays alive (tini and catatonit stop reaping once it exits)
  // until the init has reaped every orphan.
  const Ns drain_deadline = now_ns() + static_cast<Ns>(kDrainTimeoutMs) * 1'000'000;
  int zombies;
  while ((zombies = count_zombies(pid)) > 0 && now_ns() < drain_deadline) {
    sleep_ns(1'000'000);
  }
  const double cpu_end = read_sched(pid, "se.sum_exec_runtime");
  const double wakeups = read_sched(pid, "nr_voluntary_switches") - wakeups_start;
  ::close(in[1]);  // the child exits, and so does the init
  ::close(out[0]);
  std::string why;
  if (zombies > 0) {
    fail(r, strprintf("orphans: %d zombies still unreaped after %d s", zombies, kDrainTimeoutMs / 1000));
    kill_run(pid);
  } else if (!wait_ok(pid, &why)) {
    fail(r, "orphans: " + why);
  } else {
    r->cpu_end_ms.push_back(cpu_end);
    r->cpu_storm_ms.push_back(cpu_end - cpu_start);
    r->storm_wakeups.push_back(wakeups);
    r->storm_wall.push_back(wall);
    r->max_zombies = std::max(r->max_zombies, max_zombies);
    r->zombie_samples.insert(r->zombie_samples.end(), samples.begin(), samples.end());
  }
}

// --- statistics and the table ------------------------------------------------

template <typename T>
T quantile(std::vector<T> v, double q) {  // nearest rank; v not empty
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()) + 0.999999);
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

double median_ms(const std::vector<Ns>& v) {
  return static_cast<double>(quantile(v, 0.5)) / 1e6;
}
double p90_ms(const std::vector<Ns>& v) {
  return static_cast<double>(quantile(v, 0.9)) / 1e6;
}
double median_us(const std::vector<Ns>& v) {
  return static_cast<double>(quantile(v, 0.5)) / 1e3;
}
double p90_us(const std::vector<Ns>& v) {
  return static_cast<double>(quantile(v, 0.9)) / 1e3;
}

std::string first_line(const std::string& path, const std::vector<std::string>& args) {
  int p[2];
  make_pipe(p);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(g_devnull, 0);
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path.c_str()));
    for (const auto& a : args) {
      argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof(buf))) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  ::waitpid(pid, nullptr, 0);
  text = text.substr(0, text.find('\n'));
  return text;
}

std::string describe_binary(const std::string& path) {
  struct stat st;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fstat(fd, &st) < 0) {
    return "missing";
  }
  char head[4096];
  ssize_t n = ::read(fd, head, sizeof(head));
  ::close(fd);
  // A dynamic executable names its loader (PT_INTERP) in its first page.
  bool dynamic = n > 0 && std::string_view(head, static_cast<size_t>(n)).find("/ld-linux") != std::string_view::npos;
  return strprintf("%s, %lld bytes", dynamic ? "dynamic" : "static", static_cast<long long>(st.st_size));
}

std::string cpu_model() {
  auto text = read_file("/proc/cpuinfo");
  if (!text) {
    return "?";
  }
  size_t at = text->find("model name");
  if (at == std::string::npos) {
    return "?";
  }
  at = text->find(':', at);
  size_t end = text->find('\n', at);
  return text->substr(at + 2, end - at - 2);
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(rows[0].size(), 0);
  auto display_width = [](const std::string& s) {  // UTF-8: count code points
    size_t n = 0;
    for (unsigned char c : s) {
      n += (c & 0xC0) != 0x80;
    }
    return n;
  };
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], display_width(row[i]));
    }
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::printf("|");
    for (size_t i = 0; i < row.size(); ++i) {
      std::printf(" %s%*s |", row[i].c_str(), static_cast<int>(width[i] - display_width(row[i])), "");
    }
    std::printf("\n");
  };
  print_row(rows[0]);
  std::printf("|");
  for (size_t i = 0; i < width.size(); ++i) {
    std::printf("%s|", (i == 0 ? std::string(width[i] + 2, '-') : std::string(width[i] + 1, '-') + ":").c_str());
  }
  std::printf("\n");
  for (size_t i = 1; i < rows.size(); ++i) {
    print_row(rows[i]);
  }
}

// "met"/"missed" for trainit's figure against tini-static's, allowing 10 %.
std::string verdict(double trainit, double anchor, const char* unit, int decimals) {
  double limit = anchor * 1.1;
  return strprintf("≤ %.*f %s (tini-static + 10 %%): %s", decimals, limit, unit, trainit <= limit ? "met" : "MISSED");
}

[[noreturn]] void usage(int code) {
  std::printf(
      "usage: bench_exec [--quick] [--runs N] [--sigterm-reps N] [--orphans N] [--storm-rounds N]\n"
      "                  [--hwm-reps N] [--inits LIST] [--candidate 'NAME=PATH [OPTION]...']...\n"
      "                  [--trainit PATH] [--helper PATH] [--keep-stderr]\n"
      "  --runs N          start-up runs per init (default 1000)\n"
      "  --sigterm-reps N  SIGTERM runs per init, pinned and not pinned each (default 200)\n"
      "  --orphans N       orphans per storm (default 20000)\n"
      "  --storm-rounds N  storms per init (default 2)\n"
      "  --hwm-reps N      VmHWM runs per init (default 5)\n"
      "  --quick           smoke run: 100 start-up runs, 20 SIGTERM runs, 1 storm of 2000\n"
      "  --inits LIST      only these inits, e.g. trainit,tini-static (default: all five)\n"
      "  --candidate 'NAME=PATH [OPTION]...'  one more column: another trainit build (or\n"
      "                    options), run as PATH OPTION... -- CMD; repeatable, to try a\n"
      "                    change against the same run's anchors\n"
      "  --keep-stderr     let the inits' stderr through (default: /dev/null)\n"
      "Needs root: every init runs as PID 1 of a new PID namespace.\n");
  std::exit(code);
}

int parse_count(const char* text) {
  char* end;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 10'000'000) {
    (void)std::fprintf(stderr, "bench_exec: bad count '%s'\n", text);
    usage(64);
  }
  return static_cast<int>(v);
}

Config parse_args(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        (void)std::fprintf(stderr, "bench_exec: %s needs a value\n", a.c_str());
        usage(64);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      cfg.runs = 100;
      cfg.sigterm_reps = 20;
      cfg.storm_rounds = 1;
      cfg.orphans = 2000;
      cfg.hwm_reps = 2;
    } else if (a == "--runs") {
      cfg.runs = parse_count(value());
    } else if (a == "--sigterm-reps") {
      cfg.sigterm_reps = parse_count(value());
    } else if (a == "--orphans") {
      cfg.orphans = parse_count(value());
    } else if (a == "--storm-rounds") {
      cfg.storm_rounds = parse_count(value());
    } else if (a == "--hwm-reps") {
      cfg.hwm_reps = parse_count(value());
    } else if (a == "--trainit") {
      cfg.trainit = value();
    } else if (a == "--helper") {
      cfg.helper = value();
    } else if (a == "--candidate") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
        (void)std::fprintf(stderr, "bench_exec: --candidate wants 'NAME=PATH [OPTION]...', not '%s'\n", v.c_str());
        usage(64);
      }
      cfg.candidates.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--inits") {
      cfg.only = value();
    } else if (a == "--keep-stderr") {
      cfg.keep_stderr = true;
    } else if (a == "-h" || a == "--help") {
      usage(0);
    } else {
      (void)std::fprintf(stderr, "bench_exec: unknown option '%s'\n", a.c_str());
      usage(64);
    }
  }
  return cfg;
}

}  // namespace

int main(int argc, char** argv) {
  const Config cfg = parse_args(argc, argv);
  (void)std::signal(SIGPIPE, SIG_IGN);  // a child gone early must not kill the bench
  g_devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (g_devnull < 0) {
    die("/dev/null: %s", std::strerror(errno));
  }
  if (::access(cfg.helper.c_str(), X_OK) < 0) {
    die("helper %s: %s", cfg.helper.c_str(), std::strerror(errno));
  }

  // Column 0 is trainit (the subject), tini-static next (the anchor the
  // targets name), the last one runs the command with no init at all.
  std::vector<Init> inits = {
      {"trainit", cfg.trainit, {"--"}},
      {"tini-static", "/usr/bin/tini-static", {"--"}},
      {"tini", "/usr/bin/tini", {"--"}},
      {"dumb-init", "/usr/bin/dumb-init", {}},
      {"catatonit", "/usr/bin/catatonit", {"--"}},
  };
  if (!cfg.only.empty()) {
    const std::string list = "," + cfg.only + ",";
    std::erase_if(inits, [&](const Init& init) { return list.find("," + init.name + ",") == std::string::npos; });
    if (inits.empty()) {
      die("--inits %s names none of trainit, tini-static, tini, dumb-init, catatonit", cfg.only.c_str());
    }
  }
  for (const auto& [name, spec] : cfg.candidates) {
    Init init{name, "", {}};
    size_t at = 0;
    while (at < spec.size()) {  // PATH, then its options, split at spaces
      size_t end = std::min(spec.find(' ', at), spec.size());
      if (end > at) {
        (init.path.empty() ? init.path : init.before.emplace_back()) = spec.substr(at, end - at);
      }
      at = end + 1;
    }
    init.before.push_back("--");
    inits.push_back(std::move(init));
  }
  for (const auto& init : inits) {
    if (::access(init.path.c_str(), X_OK) < 0) {
      die("%s (%s): %s", init.name.c_str(), init.path.c_str(), std::strerror(errno));
    }
  }
  const size_t n_inits = inits.size();
  const Init direct{"no init", "", {}};
  std::vector<Init> columns = inits;
  columns.push_back(direct);
  std::vector<Results> res(columns.size());

  // Round-robin: each iteration runs every column once, starting one column
  // further each time so that no init always follows the same neighbour.
  auto round_robin = [&](int iterations, size_t n_columns, auto&& body) {
    for (int it = 0; it < iterations; ++it) {
      for (size_t k = 0; k < n_columns; ++k) {
        size_t c = (static_cast<size_t>(it) + k) % n_columns;
        body(c);
      }
    }
  };

  const Ns t_begin = now_ns();
  round_robin(cfg.runs, columns.size(), [&](size_t c) { run_startup(columns[c], cfg, &res[c]); });
  round_robin(cfg.hwm_reps, n_inits, [&](size_t c) { run_hwm(columns[c], cfg, &res[c]); });
  round_robin(cfg.sigterm_reps, columns.size(), [&](size_t c) {
    run_sigterm(columns[c], cfg, true, &res[c]);
    run_sigterm(columns[c], cfg, false, &res[c]);
  });
  round_robin(cfg.storm_rounds, n_inits, [&](size_t c) { run_storm(columns[c], cfg, &res[c]); });
  const double elapsed_s = static_cast<double>(now_ns() - t_begin) / 1e9;

  // --- print --------------------------------------------------------------
  std::string command;
  for (int i = 0; i < argc; ++i) {
    command += (i ? " " : "") + std::string(argv[i]);
  }
  utsname uts{};
  ::uname(&uts);
  std::printf("# bench_exec: exec-mode inits as PID 1, side by side\n\n");
  std::printf("command: `%s`\n", command.c_str());
  std::printf("machine: %ld CPUs online (nproc), %s, kernel %s %s\n", ::sysconf(_SC_NPROCESSORS_ONLN),
              cpu_model().c_str(), uts.release, uts.machine);
  for (const auto& init : inits) {
    std::string version = first_line(init.path, {"--version"});
    std::string run = init.path;
    for (const auto& a : init.before) {
      run += " " + a;
    }
    std::printf("%s: `%s CMD` (%s; `%s`)\n", init.name.c_str(), run.c_str(), describe_binary(init.path).c_str(),
                version.c_str());
  }
  std::printf(
      "runs, round-robin over the inits: start-up %d each (and /bin/true alone), VmHWM %d, SIGTERM %d pinned + "
      "%d not pinned, orphan storms %d × %d; %.0f s in all\n\n",
      cfg.runs, cfg.hwm_reps, cfg.sigterm_reps, cfg.sigterm_reps, cfg.storm_rounds, cfg.orphans, elapsed_s);

  auto cells = [&](auto&& cell) {
    std::vector<std::string> row;
    for (size_t c = 0; c < columns.size(); ++c) {
      row.push_back(cell(c));
    }
    return row;
  };
  const char* const na = "—";
  // trainit's targets name tini-static: the last column says met or MISSED.
  auto index_of = [&](const char* name) {
    for (size_t c = 0; c < n_inits; ++c) {
      if (columns[c].name == name) {
        return static_cast<int>(c);
      }
    }
    return -1;
  };
  const int ti = index_of("trainit");
  const int ts = index_of("tini-static");
  static const Results kNone;
  const Results& rt = ti >= 0 ? res[static_cast<size_t>(ti)] : kNone;
  const Results& rs = ts >= 0 ? res[static_cast<size_t>(ts)] : kNone;
  const double base_ms = res[n_inits].startup.empty() ? 0 : median_ms(res[n_inits].startup);

  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"figure (median unless said)"};
  for (const auto& c : columns) {
    header.push_back(c.name == "no init" ? "no init (floor)" : c.name);
  }
  header.push_back("trainit's target");
  rows.push_back(header);

  auto add_row = [&](const std::string& name, std::vector<std::string> values, std::string target) {
    values.insert(values.begin(), name);
    values.push_back(std::move(target));
    rows.push_back(std::move(values));
  };
  auto have = [](const std::vector<Ns>& v) { return !v.empty(); };

  add_row("start-up over `/bin/true` as PID 1 (ms)", cells([&](size_t c) {
            if (c == n_inits) {
              return std::string("0 (baseline)");
            }
            return have(res[c].startup) ? strprintf("+%.3f", median_ms(res[c].startup) - base_ms) : na;
          }),
          !rt.startup.empty() && !rs.startup.empty()
              ? verdict(median_ms(rt.startup) - base_ms, median_ms(rs.startup) - base_ms, "ms", 3)
              : "");
  add_row("start-up wall, median / p90 (ms)", cells([&](size_t c) {
            return have(res[c].startup) ? strprintf("%.3f / %.3f", median_ms(res[c].startup), p90_ms(res[c].startup))
                                        : na;
          }),
          "");
  add_row("start-up CPU, init + `/bin/true`, median / p90 (ms)", cells([&](size_t c) {
            return have(res[c].startup_cpu)
                       ? strprintf("%.3f / %.3f", median_ms(res[c].startup_cpu), p90_ms(res[c].startup_cpu))
                       : std::string(na);
          }),
          "");
  add_row("VmHWM supervising a sleeping child (kB)",
          cells([&](size_t c) { return res[c].hwm_kb.empty() ? na : strprintf("%ld", quantile(res[c].hwm_kb, 0.5)); }),
          !rt.hwm_kb.empty() ? strprintf("≤ 1024 kB: %s", quantile(rt.hwm_kb, 0.5) <= 1024 ? "met" : "MISSED") : "");
  add_row("SIGTERM → child, pinned to CPU 0, median / p90 (µs)", cells([&](size_t c) {
            return have(res[c].term_pinned)
                       ? strprintf("%.1f / %.1f", median_us(res[c].term_pinned), p90_us(res[c].term_pinned))
                       : na;
          }),
          !rt.term_pinned.empty() && !rs.term_pinned.empty()
              ? verdict(median_us(rt.term_pinned), median_us(rs.term_pinned), "µs", 1)
              : "");
  add_row("SIGTERM → child, not pinned, median / p90 (µs)", cells([&](size_t c) {
            return have(res[c].term_free)
                       ? strprintf("%.1f / %.1f", median_us(res[c].term_free), p90_us(res[c].term_free))
                       : na;
          }),
          "");
  const std::string storm = strprintf("%d orphans", cfg.orphans);
  add_row(storm + ": init CPU at the end (ms)", cells([&](size_t c) {
            return res[c].cpu_end_ms.empty() ? na : strprintf("%.1f", quantile(res[c].cpu_end_ms, 0.5));
          }),
          !rt.cpu_end_ms.empty() && !rs.cpu_end_ms.empty()
              ? verdict(quantile(rt.cpu_end_ms, 0.5), quantile(rs.cpu_end_ms, 0.5), "ms", 1)
              : "");
  add_row(storm + ": of which during the storm (ms)", cells([&](size_t c) {
            return res[c].cpu_storm_ms.empty() ? na : strprintf("%.1f", quantile(res[c].cpu_storm_ms, 0.5));
          }),
          "");
  add_row(storm + ": init wake-ups; CPU per wake-up (µs)", cells([&](size_t c) {
            if (res[c].storm_wakeups.empty()) {
              return std::string(na);
            }
            double w = quantile(res[c].storm_wakeups, 0.5);
            return strprintf("%.0f; %.1f", w, w > 0 ? quantile(res[c].cpu_storm_ms, 0.5) * 1000 / w : 0.0);
          }),
          "");
  add_row(storm + ": zombies outstanding, max / p99 of samples", cells([&](size_t c) {
            return res[c].max_zombies < 0 || res[c].zombie_samples.empty()
                       ? na
                       : strprintf("%d / %d", res[c].max_zombies, quantile(res[c].zombie_samples, 0.99));
          }),
          rt.max_zombies >= 0 ? strprintf("≤ 8: %s", rt.max_zombies <= 8 ? "met" : "MISSED") : "");
  add_row(storm + ": storm wall time (ms)", cells([&](size_t c) {
            return res[c].storm_wall.empty() ? na : strprintf("%.0f", median_ms(res[c].storm_wall));
          }),
          "");
  print_table(rows);

  std::printf(
      "\n- start-up: clone(CLONE_NEWPID) to waitpid() of `INIT -- /bin/true`; the floor is `/bin/true` as PID 1. "
      "Start-up CPU is wait4()'s user + system time of the init and what it reaped: what the load of the "
      "machine does not change.\n"
      "- VmHWM: /proc/PID/status of the init 50 ms after its child started; before each run the init's binary is "
      "dropped from the page cache, so that each is mapped as on a container's first start.\n"
      "- SIGTERM: from kill() of the init to the child's sigwaitinfo() return (CLOCK_MONOTONIC); the floor is the "
      "child as PID 1, signalled directly. trainit signals its child first and the rest of its namespace 1 ms "
      "later (every process, or kill(-1) without its own /proc), dumb-init signals the child's session, tini and "
      "catatonit the child.\n"
      "- orphans: the child double-forks them in a stream and stays alive until the init has reaped them all; "
      "zombies among the init's children are counted every 1 ms; init CPU is `se.sum_exec_runtime` of "
      "/proc/PID/sched, read before the init exits; wake-ups are its voluntary context switches.\n");
  int failed = 0;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (res[c].failures > 0) {
      std::printf("FAILED: %s: %d runs (first: %s)\n", columns[c].name.c_str(), res[c].failures,
                  res[c].first_failure.c_str());
      ++failed;
    }
  }
  return failed > 0 ? 1 : 0;
}

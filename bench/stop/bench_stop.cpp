// bench_stop: how long `docker stop` waits for trainit. The time from SIGTERM
// to trainit's exit, as PID 1 of a fresh PID namespace, with 1, 10 and 100
// processes that exit on SIGTERM (setsid'ed daemons adopted by PID 1, or
// plain children in PROGRAM's group), printed as one markdown table next to
// two baselines, interleaved round-robin in one run:
//
//   - direct: the same processes, run by this program (a child subreaper, so
//     the daemons come to it) with no init and no namespace, each sent
//     SIGTERM by kill() here and reaped here: the processes' own exit time;
//   - minimal PID 1: a PID 1 of a few lines (sigwaitinfo, kill(-1), wait
//     until ECHILD, exit): adds only what a PID namespace costs;
//   - trainit: `trainit --grace 10 -- helper`, SIGTERM sent to trainit.
//
// Every time runs from just before kill() to waitpid()'s return. The target
// (issue 3) is trainit ≤ 10 ms over the processes' own exit time.
//
// Needs root (CLONE_NEWPID). Run by hand; see --help.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
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
#include <string>
#include <vector>

#include "bench_util.h"

#ifndef BENCH_STOP_TRAINIT
#define BENCH_STOP_TRAINIT "trainit"
#endif
#ifndef BENCH_STOP_HELPER
#define BENCH_STOP_HELPER "bench_stop_helper"
#endif

namespace {

using bench::die;
using bench::now_ns;
using bench::Ns;

constexpr int kReadyTimeoutMs = 10'000;
constexpr int kReadyFd = 3;  // the helper's READY_FD

struct Config {
  int runs = 50;
  int warmup = 3;
  std::vector<int> sizes = {1, 10, 100};
  std::vector<std::string> layouts = {"setsid", "group"};
  bool keep_stderr = false;
  std::string trainit = BENCH_STOP_TRAINIT;
  std::string helper = BENCH_STOP_HELPER;
};

[[noreturn]] void usage(int code) {
  std::printf(
      "Usage: bench_stop [--runs N] [--sizes 1,10,100] [--layouts setsid,group]\n"
      "                  [--trainit PATH] [--helper PATH] [--keep-stderr]\n"
      "Time from SIGTERM to trainit's exit (trainit as PID 1 of a new PID\n"
      "namespace) with N processes that exit on SIGTERM, next to the same\n"
      "processes signalled directly and under a minimal PID 1. Needs root.\n");
  std::exit(code);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = std::min(text.find(',', at), text.size());
    if (end > at) {
      parts.push_back(text.substr(at, end - at));
    }
    at = end + 1;
  }
  return parts;
}

Config parse_args(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        die("%s needs a value", a.c_str());
      }
      return argv[++i];
    };
    if (a == "--runs") {
      c.runs = std::atoi(value().c_str());
    } else if (a == "--sizes") {
      c.sizes.clear();
      for (const auto& s : split(value())) {
        c.sizes.push_back(std::atoi(s.c_str()));
      }
    } else if (a == "--layouts") {
      c.layouts = split(value());
    } else if (a == "--trainit") {
      c.trainit = value();
    } else if (a == "--helper") {
      c.helper = value();
    } else if (a == "--keep-stderr") {
      c.keep_stderr = true;
    } else if (a == "-h" || a == "--help") {
      usage(0);
    } else {
      die("unknown argument '%s' (see --help)", a.c_str());
    }
  }
  if (c.runs < 1 || c.sizes.empty() || std::any_of(c.sizes.begin(), c.sizes.end(), [](int n) { return n < 1; })) {
    die("--runs and every size must be at least 1");
  }
  for (const auto& l : c.layouts) {
    if (l != "setsid" && l != "group") {
      die("unknown layout '%s': setsid or group", l.c_str());
    }
  }
  return c;
}

// argv built before clone(), so that the child only execs.
class Argv {
 public:
  explicit Argv(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (auto& s : strings_) {
      pointers_.push_back(s.data());
    }
    pointers_.push_back(nullptr);
  }
  [[nodiscard]] char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

int g_devnull = -1;

// In a child after clone/fork: stdio on /dev/null (stderr kept on request),
// `ready` as kReadyFd, SIGTERM at its default and nothing blocked.
void child_setup(int ready, bool keep_stderr) {
  int high = ::fcntl(ready, F_DUPFD_CLOEXEC, 64);
  ::dup2(g_devnull, 0);
  ::dup2(g_devnull, 1);
  if (!keep_stderr) {
    ::dup2(g_devnull, 2);
  }
  ::dup2(high, kReadyFd);  // dup2 clears close-on-exec
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Reads one byte within kReadyTimeoutMs.
bool wait_ready(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  char byte;
  return ::poll(&pfd, 1, kReadyTimeoutMs) == 1 && ::read(fd, &byte, 1) == 1;
}

// Clones into a new PID namespace; the child (its PID 1) runs `body`, which
// must not return.
template <typename Body>
pid_t clone_pid1(Body body) {
  long r = ::syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, 0);
  if (r < 0) {
    die("clone(CLONE_NEWPID): %s (run as root)", std::strerror(errno));
  }
  if (r == 0) {
    body();
    ::_exit(127);
  }
  return static_cast<pid_t>(r);
}

// Every descendant of ours, from /proc/<pid>/task/<tid>/children.
std::vector<pid_t> descendants() {
  std::vector<pid_t> out;
  std::vector<pid_t> queue = {::getpid()};
  for (size_t i = 0; i < queue.size(); ++i) {
    char path[96];
    std::snprintf(path, sizeof(path), "/proc/%d/task/%d/children", queue[i], queue[i]);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    char buf[8192];
    ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) {
      continue;
    }
    buf[n] = '\0';
    char* p = buf;
    for (;;) {
      char* end;
      long pid = std::strtol(p, &end, 10);
      if (end == p) {
        break;
      }
      p = end;
      queue.push_back(static_cast<pid_t>(pid));
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  return out;
}

struct Sample {
  bool ok = false;
  Ns ns = 0;
  std::string why;
};

std::string describe(int status) {
  char text[64];
  if (WIFEXITED(status)) {
    std::snprintf(text, sizeof(text), "exit status %d", WEXITSTATUS(status));
  } else {
    std::snprintf(text, sizeof(text), "killed by signal %d", WTERMSIG(status));
  }
  return text;
}

// The same processes, signalled and reaped here.
Sample run_direct(const Config& cfg, int n, const std::string& layout) {
  Argv argv({cfg.helper, std::to_string(n), layout, std::to_string(kReadyFd)});
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) {
    die("pipe2: %s", std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    child_setup(p[1], cfg.keep_stderr);
    ::execv(argv.get()[0], argv.get());
    ::_exit(127);
  }
  ::close(p[1]);
  Sample s;
  bool ready = wait_ready(p[0]);
  ::close(p[0]);
  std::vector<pid_t> all = descendants();
  if (!ready || static_cast<int>(all.size()) != n) {
    s.why = "direct: " + std::to_string(all.size()) + " processes, not " + std::to_string(n);
    for (pid_t victim : all) {
      ::kill(victim, SIGKILL);
    }
  }
  Ns t0 = now_ns();
  for (pid_t victim : all) {
    ::kill(victim, SIGTERM);
  }
  int reaped = 0;
  while (::waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
    ++reaped;
  }
  s.ns = now_ns() - t0;
  s.ok = s.why.empty() && reaped == n;
  if (s.why.empty() && !s.ok) {
    s.why = "direct: reaped " + std::to_string(reaped);
  }
  return s;
}

// SIGTERM to a PID 1 running the job; its end.
Sample stop_pid1(pid_t pid, int ready_fd, int want_status_code, const char* name) {
  Sample s;
  if (!wait_ready(ready_fd)) {
    s.why = std::string(name) + ": the job never got ready";
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return s;
  }
  int status = 0;
  Ns t0 = now_ns();
  ::kill(pid, SIGTERM);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  s.ns = now_ns() - t0;
  s.ok = WIFEXITED(status) && WEXITSTATUS(status) == want_status_code;
  if (!s.ok) {
    s.why = std::string(name) + ": " + describe(status);
  }
  return s;
}

// A PID 1 of a few lines: what the namespace itself costs.
Sample run_minimal(const Config& cfg, int n, const std::string& layout) {
  Argv argv({cfg.helper, std::to_string(n), layout, std::to_string(kReadyFd)});
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) {
    die("pipe2: %s", std::strerror(errno));
  }
  pid_t pid = clone_pid1([&] {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &term, nullptr);
    pid_t job = ::fork();
    if (job == 0) {
      child_setup(p[1], cfg.keep_stderr);
      ::execv(argv.get()[0], argv.get());
      ::_exit(127);
    }
    ::close(p[1]);
    while (::sigwaitinfo(&term, nullptr) < 0) {
    }
    ::kill(-1, SIGTERM);
    while (::wait(nullptr) > 0 || errno == EINTR) {
    }
    ::_exit(0);
  });
  ::close(p[1]);
  Sample s = stop_pid1(pid, p[0], 0, "minimal PID 1");
  ::close(p[0]);
  return s;
}

Sample run_trainit(const Config& cfg, int n, const std::string& layout) {
  Argv argv({cfg.trainit, "--grace", "10", "--", cfg.helper, std::to_string(n), layout, std::to_string(kReadyFd)});
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) {
    die("pipe2: %s", std::strerror(errno));
  }
  pid_t pid = clone_pid1([&] {
    child_setup(p[1], cfg.keep_stderr);
    ::execv(argv.get()[0], argv.get());
  });
  ::close(p[1]);
  Sample s = stop_pid1(pid, p[0], 128 + SIGTERM, "trainit");
  ::close(p[0]);
  return s;
}

struct Column {
  std::vector<Ns> ns;
  int failures = 0;
  std::string first_failure;

  void add(const Sample& s) {
    if (s.ok) {
      ns.push_back(s.ns);
    } else if (failures++ == 0) {
      first_failure = s.why;
    }
  }
  [[nodiscard]] double quantile_ms(double q) const {
    if (ns.empty()) {
      return -1;
    }
    std::vector<Ns> sorted = ns;
    std::sort(sorted.begin(), sorted.end());
    size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5));
    return static_cast<double>(sorted[i]) / 1e6;
  }
};

std::string cell(const Column& c) {
  char text[64];
  if (c.ns.empty()) {
    return "failed";
  }
  std::snprintf(text, sizeof(text), "%.3f (p90 %.3f)", c.quantile_ms(0.5), c.quantile_ms(0.9));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const Config cfg = parse_args(argc, argv);
  std::signal(SIGPIPE, SIG_IGN);
  g_devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (g_devnull < 0) {
    die("/dev/null: %s", std::strerror(errno));
  }
  for (const auto& path : {cfg.trainit, cfg.helper}) {
    if (::access(path.c_str(), X_OK) < 0) {
      die("%s: %s", path.c_str(), std::strerror(errno));
    }
  }
  // The direct column's daemons (orphans) must come back to us to be reaped.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
    die("PR_SET_CHILD_SUBREAPER: %s", std::strerror(errno));
  }

  struct Row {
    int n;
    std::string layout;
    Column direct, minimal, trainit;
  };
  std::vector<Row> rows;
  for (const auto& layout : cfg.layouts) {
    for (int n : cfg.sizes) {
      rows.push_back({n, layout, {}, {}, {}});
    }
  }
  // Round-robin: each iteration runs every row's three columns once, in an
  // order that rotates so that no column always follows the same neighbour.
  for (int it = -cfg.warmup; it < cfg.runs; ++it) {
    for (auto& row : rows) {
      for (int k = 0; k < 3; ++k) {
        int c = (it + 3 + k) % 3;
        Sample s = c == 0   ? run_direct(cfg, row.n, row.layout)
                   : c == 1 ? run_minimal(cfg, row.n, row.layout)
                            : run_trainit(cfg, row.n, row.layout);
        if (it < 0) {
          continue;  // warm-up
        }
        (c == 0 ? row.direct : c == 1 ? row.minimal : row.trainit).add(s);
      }
    }
  }

  utsname u{};
  ::uname(&u);
  std::printf("bench_stop: %d runs (after %d warm-up) per cell, interleaved; kernel %s, %ld CPUs\n", cfg.runs,
              cfg.warmup, u.release, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("trainit: %s\n\n", cfg.trainit.c_str());
  std::printf("Time from SIGTERM to the end, median in ms (p90):\n\n");
  std::printf(
      "| processes | layout | direct: their own exit | minimal PID 1 | trainit (PID 1) | trainit − direct | "
      "trainit − minimal |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|\n");
  bool failed = false;
  for (const auto& row : rows) {
    double over_direct = row.trainit.quantile_ms(0.5) - row.direct.quantile_ms(0.5);
    double over_minimal = row.trainit.quantile_ms(0.5) - row.minimal.quantile_ms(0.5);
    std::printf("| %d | %s | %s | %s | %s | %+.3f | %+.3f |\n", row.n, row.layout.c_str(), cell(row.direct).c_str(),
                cell(row.minimal).c_str(), cell(row.trainit).c_str(), over_direct, over_minimal);
    for (const Column* c : {&row.direct, &row.minimal, &row.trainit}) {
      if (c->failures > 0) {
        failed = true;
        std::fprintf(stderr, "bench_stop: %d processes, %s: %d failed runs; first: %s\n", row.n, row.layout.c_str(),
                     c->failures, c->first_failure.c_str());
      }
    }
  }
  std::printf(
      "\ndirect: the processes signalled one by one and reaped by this program, no init, no namespace.\n"
      "minimal PID 1: sigwaitinfo, kill(-1, SIGTERM), wait until ECHILD, exit.\n"
      "setsid: PROGRAM plus N-1 daemons in sessions of their own, adopted by PID 1; group: N-1 children in "
      "PROGRAM's group.\n");
  return failed ? 1 : 0;
}

// bench_job: the job state machine against the launchers it replaces, side by
// side in one run, printed as one markdown table:
//
//   (a) rank failure: 8 ranks; rank 3 exits 7, the others exit on SIGTERM.
//       From rank 3's own clock just before it exits to the launcher's exit
//       with every rank gone (the later of the launcher's exit and the moment
//       the last rank closed the bench's FIFO).
//   (b) start: from just before the launcher is started (its table already
//       complete) to the 8th rank running (the latest of the ranks' own
//       "running" stamps).
//   (c) the launcher process's VmHWM during the job, sampled every few ms
//       until it exits: with quiet ranks, and with each rank first logging
//       --log-mib MiB to stdout (the console: a pipe this program drains).
//
// Launchers, each as PID 1 of a new PID and mount namespace (as a container
// runs its boot command), each starting bench/job/rank.c:
//   - trainit: `trainit --status-file F -- rank`, RANK_TABLE_FILE set;
//   - the reference launcher's behaviour (bench/job/ref_launcher.py: 1 s table
//     poll, 1 s child polling, SIGTERM then 1+2+4+8 s before SIGKILL);
//   - `/usr/bin/python3 -m torch.distributed.run --nproc_per_node 8
//     --no_python rank` through bench/job/torchrun_patched.py (torch 1.13 on
//     Python 3.11 crashes at start without it), when Debian's python3-torch
//     is installed; otherwise skipped with a note.
// Runs are interleaved round-robin; each cell is the median [min–max].
//
// Needs root (CLONE_NEWPID). Run by hand; see --help.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

#ifndef BENCH_JOB_TRAINIT
#define BENCH_JOB_TRAINIT "trainit"
#endif
#ifndef BENCH_JOB_RANK
#define BENCH_JOB_RANK "bench_job_rank"
#endif
#ifndef BENCH_JOB_DIR
#define BENCH_JOB_DIR "bench/job"
#endif

namespace {

using bench::die;
using bench::now_ns;
using bench::Ns;

constexpr int kRanks = 8;
constexpr int kFailRank = 3;
constexpr int kFailCode = 7;
constexpr Ns kRunTimeout = 120'000'000'000;  // torchrun's stop can take its time
constexpr const char* kPython = "/usr/bin/python3";

struct Config {
  int runs = 5;
  int log_mib = 4;
  bool torchrun = true;
  std::string trainit = BENCH_JOB_TRAINIT;
  std::string rank = BENCH_JOB_RANK;
  std::string dir = BENCH_JOB_DIR;
};

[[noreturn]] void usage(int code) {
  std::printf(
      "Usage: bench_job [--runs N] [--log-mib N] [--no-torchrun]\n"
      "                 [--trainit PATH] [--rank PATH] [--dir BENCH_JOB_SOURCE_DIR]\n"
      "An 8-rank job under trainit, a model of the reference launcher and torchrun,\n"
      "each as PID 1 of a new PID namespace: rank failure to launcher exit, start\n"
      "to 8 ranks running, launcher VmHWM. Needs root.\n");
  std::exit(code);
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
      c.runs = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--log-mib") {
      c.log_mib = std::max(0, std::atoi(value().c_str()));
    } else if (a == "--no-torchrun") {
      c.torchrun = false;
    } else if (a == "--trainit") {
      c.trainit = value();
    } else if (a == "--rank") {
      c.rank = value();
    } else if (a == "--dir") {
      c.dir = value();
    } else if (a == "-h" || a == "--help") {
      usage(0);
    } else {
      die("unknown argument %s (see --help)", a.c_str());
    }
  }
  return c;
}

// --- one job ---------------------------------------------------------------------

enum class Kind { kTrainit, kReference, kTorchrun };

struct Launcher {
  Kind kind;
  std::string name;
};

struct Result {
  std::optional<Ns> start;  // (b)
  std::optional<Ns> fail;   // (a)
  long hwm_kb = 0;          // (c)
  int status = -1;          // the launcher's wait status
  std::string error;
};

std::string template1(int devices) {
  std::string text = R"({"status": "completed", "version": "1.0", "server_count": "1", "server_list": [)"
                     R"({"server_id": "10.0.0.1", "device": [)";
  for (int d = 0; d < devices; ++d) {
    text += (d > 0 ? ", " : "") + std::string(R"({"device_id": ")") + std::to_string(d) +
            R"(", "device_ip": "192.168.100.)" + std::to_string(101 + d) + R"(", "rank_id": ")" + std::to_string(d) +
            "\"}";
  }
  return text + "]}]}\n";
}

void write_text(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0) {
    die("cannot write %s: %s", path.c_str(), std::strerror(errno));
  }
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) {
    die("cannot find a free port: %s", std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

long vm_hwm_kb(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/status", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) {
    return 0;
  }
  char line[256];
  long kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      kb = std::atol(line + 6);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

// Strings made into argv/envp before clone: the child only calls syscalls.
struct Exec {
  std::vector<std::string> storage_argv, storage_env;
  std::vector<char*> argv, envp;
  void finish() {
    for (auto& s : storage_argv) {
      argv.push_back(s.data());
    }
    argv.push_back(nullptr);
    for (auto& s : storage_env) {
      envp.push_back(s.data());
    }
    envp.push_back(nullptr);
  }
};

// The child between clone and exec: PID 1 of its namespace, its own /proc,
// the console on stdout and stderr, /dev/null on stdin, nothing else open.
[[noreturn]] void child(const Exec& e, int console, int devnull, const char* cwd) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0 ||
      ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0) {
    ::_exit(120);
  }
  if (::dup2(devnull, 0) < 0 || ::dup2(console, 1) < 0 || ::dup2(console, 2) < 0 || ::chdir(cwd) < 0) {
    ::_exit(121);
  }
  ::syscall(SYS_close_range, 3U, ~0U, 0U);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(e.argv[0], e.argv.data(), e.envp.data());
  ::_exit(127);
}

Result run_job(const Config& c, Kind kind, unsigned long long log_bytes) {
  Result r;
  char pattern[] = "/tmp/bench-job.XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    die("mkdtemp: %s", std::strerror(errno));
  }
  const std::string dir = pattern;
  for (const char* sub : {"/config", "/ma", "/ma/log"}) {
    ::mkdir((dir + sub).c_str(), 0755);
  }
  write_text(dir + "/config/jobstart_hccl.json", template1(kRanks));
  const std::string fifo = dir + "/fifo", go = dir + "/go";
  if (::mkfifo(fifo.c_str(), 0600) < 0 || ::mkfifo(go.c_str(), 0600) < 0) {
    die("mkfifo: %s", std::strerror(errno));
  }
  int fifo_fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int console[2];
  if (fifo_fd < 0 || devnull < 0 || ::pipe2(console, O_CLOEXEC) < 0) {
    die("cannot open the FIFO, /dev/null or a pipe: %s", std::strerror(errno));
  }

  Exec e;
  e.storage_env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                   "HOME=/root",
                   "PYTHONUNBUFFERED=1",
                   "MA_VJ_NAME=ma-job-bench",
                   "MA_CURRENT_INSTANCE_NAME=bench-job-" + std::to_string(::getpid()),
                   "MA_CURRENT_HOST_IP=10.0.0.1",
                   "MA_MOUNT_PATH=" + dir + "/ma",
                   "BENCH_JOB_FIFO=" + fifo,
                   "BENCH_JOB_GO=" + go,
                   "BENCH_JOB_FAIL_RANK=" + std::to_string(kFailRank),
                   "BENCH_JOB_LOG_BYTES=" + std::to_string(log_bytes)};
  switch (kind) {
    case Kind::kTrainit:
      e.storage_env.push_back("RANK_TABLE_FILE=" + dir + "/config");
      e.storage_argv = {c.trainit, "--status-file", dir + "/status.json", "--", c.rank};
      break;
    case Kind::kReference:
      e.storage_env.push_back("RANK_TABLE_FILE=" + dir + "/config");
      e.storage_argv = {kPython, c.dir + "/ref_launcher.py", c.rank};
      break;
    case Kind::kTorchrun:
      e.storage_argv = {kPython,
                        c.dir + "/torchrun_patched.py",
                        "--nproc_per_node",
                        std::to_string(kRanks),
                        "--no_python",
                        "--master_port",
                        std::to_string(free_port()),
                        c.rank};
      break;
  }
  e.finish();

  std::atomic<uint64_t> console_bytes{0};
  std::thread drainer([fd = console[0], &console_bytes] {
    static thread_local char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        console_bytes += static_cast<uint64_t>(n);
      } else if (n == 0 || errno != EINTR) {
        return;
      }
    }
  });

  const Ns t0 = now_ns();
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0));
  if (pid == 0) {
    child(e, console[1], devnull, dir.c_str());
  }
  if (pid < 0) {
    die("clone: %s (needs root)", std::strerror(errno));
  }
  ::close(console[1]);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    die("pidfd_open: %s", std::strerror(errno));
  }

  int ready = 0;
  Ns last_ready = 0, failed = 0;
  std::optional<Ns> hup, exited;
  bool go_sent = false;
  std::string pending;
  while (!(hup && exited)) {
    if (now_ns() - t0 > kRunTimeout) {
      r.error = "timed out";
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{hup ? -1 : fifo_fd, POLLIN, 0}, {exited ? -1 : pidfd, POLLIN, 0}};
    ::poll(fds, 2, 2);
    if (!exited) {
      if (long kb = vm_hwm_kb(pid); kb > 0) {
        r.hwm_kb = kb;  // the last sample before the exit: the job's whole peak
      }
    }
    if (fds[0].revents != 0) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fifo_fd, buf, sizeof(buf))) > 0) {
        pending.append(buf, static_cast<size_t>(n));
      }
      const Ns at = now_ns();
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
        char what = 0;
        long rank = 0;
        long long ns = 0;
        if (std::sscanf(pending.c_str(), "%c %ld %lld", &what, &rank, &ns) == 3) {
          if (what == 'R') {
            ++ready;
            last_ready = std::max<Ns>(last_ready, ns);
          } else if (what == 'F') {
            failed = ns;
          }
        }
      }
      if (n == 0 && ready == kRanks && (fds[0].revents & POLLHUP) != 0) {
        hup = at;  // every rank has closed its end: all gone
      }
    }
    if (!exited && fds[1].revents != 0) {
      exited = now_ns();
      ::waitpid(pid, &r.status, 0);
    }
    if (ready == kRanks && !go_sent) {
      r.start = last_ready - t0;
      // rank 3 opens the go FIFO for reading right after its record.
      const Ns deadline = now_ns() + 10'000'000'000;
      int fd;
      while ((fd = ::open(go.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0 && errno == ENXIO &&
             now_ns() < deadline) {
        ::usleep(200);
      }
      if (fd >= 0) {
        char byte = 'g';
        ssize_t unused = ::write(fd, &byte, 1);
        (void)unused;
        ::close(fd);
      }
      go_sent = true;
    }
    if (exited && ready < kRanks && !hup) {
      r.error = "the launcher exited before 8 ranks ran (status " + std::to_string(r.status) + ")";
      break;
    }
  }
  if (!exited) {
    ::waitpid(pid, &r.status, 0);
  }
  if (failed > 0 && hup && exited && r.error.empty()) {
    r.fail = std::max(*hup, *exited) - failed;
  }
  ::close(pidfd);
  drainer.join();
  for (int fd : {fifo_fd, devnull, console[0]}) {
    ::close(fd);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return r;
}

// --- report ----------------------------------------------------------------------

std::string duration(Ns ns) {
  char text[32];
  if (ns < 1'000'000) {
    std::snprintf(text, sizeof(text), "%.2f ms", static_cast<double>(ns) / 1e6);
  } else if (ns < 1'000'000'000) {
    std::snprintf(text, sizeof(text), "%.1f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(text, sizeof(text), "%.2f s", static_cast<double>(ns) / 1e9);
  }
  return text;
}

std::string summary(std::vector<Ns> values, int runs) {
  if (values.empty()) {
    return "failed";
  }
  std::sort(values.begin(), values.end());
  std::string text = duration(values[values.size() / 2]);
  if (values.size() > 1) {
    text += " [" + duration(values.front()) + "–" + duration(values.back()) + "]";
  }
  if (static_cast<int>(values.size()) < runs) {
    text += " (" + std::to_string(runs - static_cast<int>(values.size())) + " failed)";
  }
  return text;
}

std::string memory(long kb) {
  if (kb <= 0) {
    return "n/a";
  }
  char text[48];
  std::snprintf(text, sizeof(text), "%.2f MB (%ld KiB)", static_cast<double>(kb) * 1024 / 1e6, kb);
  return text;
}

std::string exit_text(int status) {
  if (status < 0) {
    return "n/a";
  }
  return WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "signal " + std::to_string(WTERMSIG(status));
}

std::optional<std::string> torch_version() {
  FILE* p = ::popen("/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null", "r");
  if (p == nullptr) {
    return std::nullopt;
  }
  char line[128] = {};
  bool got = std::fgets(line, sizeof(line), p) != nullptr;
  if (::pclose(p) != 0 || !got) {
    return std::nullopt;
  }
  std::string v = line;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) {
    v.pop_back();
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Config c = parse_args(argc, argv);
  if (::geteuid() != 0) {
    die("needs root (new PID namespaces)");
  }
  std::string command;
  for (int i = 0; i < argc; ++i) {
    command += (i > 0 ? " " : "") + std::string(argv[i]);
  }
  utsname u{};
  ::uname(&u);
  std::printf("command: %s\n", command.c_str());
  std::printf("host: %s %s, %u CPUs; %d runs each, interleaved; 8 ranks (bench/job/rank.c), rank %d exits %d\n",
              u.sysname, u.release, std::thread::hardware_concurrency(), c.runs, kFailRank, kFailCode);

  std::vector<Launcher> launchers = {{Kind::kTrainit, "trainit"}, {Kind::kReference, "reference launcher (model)"}};
  std::optional<std::string> torch;
  if (c.torchrun) {
    torch = torch_version();
    if (torch) {
      launchers.push_back({Kind::kTorchrun, "torchrun " + *torch});
    } else {
      std::printf("note: /usr/bin/python3 has no torch (apt-get install python3-torch): torchrun column skipped\n");
    }
  } else {
    std::printf("note: --no-torchrun: torchrun column skipped\n");
  }
  std::fflush(stdout);

  const size_t n = launchers.size();
  std::vector<std::vector<Ns>> starts(n), fails(n);
  std::vector<long> hwm_quiet(n, 0), hwm_logging(n, 0);
  std::vector<int> status(n, -1);
  for (int run = 0; run < c.runs; ++run) {
    for (size_t l = 0; l < n; ++l) {
      Result r = run_job(c, launchers[l].kind, 0);
      if (!r.error.empty()) {
        std::fprintf(stderr, "bench_job: %s, run %d: %s\n", launchers[l].name.c_str(), run + 1, r.error.c_str());
      }
      if (r.start) {
        starts[l].push_back(*r.start);
      }
      if (r.fail) {
        fails[l].push_back(*r.fail);
      }
      hwm_quiet[l] = std::max(hwm_quiet[l], r.hwm_kb);
      if (status[l] < 0) {
        status[l] = r.status;
      }
    }
  }
  const unsigned long long log_bytes = static_cast<unsigned long long>(c.log_mib) << 20;
  if (log_bytes > 0) {
    for (size_t l = 0; l < n; ++l) {
      Result r = run_job(c, launchers[l].kind, log_bytes);
      if (!r.error.empty()) {
        std::fprintf(stderr, "bench_job: %s, logging run: %s\n", launchers[l].name.c_str(), r.error.c_str());
      }
      hwm_logging[l] = r.hwm_kb;
    }
  }

  std::printf("\n| figure |");
  for (const auto& l : launchers) {
    std::printf(" %s |", l.name.c_str());
  }
  std::printf(" target |\n|---|");
  for (size_t l = 0; l < n; ++l) {
    std::printf("---|");
  }
  std::printf("---|\n");
  auto row = [&](const char* figure, auto cell, const char* target) {
    std::printf("| %s |", figure);
    for (size_t l = 0; l < n; ++l) {
      std::printf(" %s |", cell(l).c_str());
    }
    std::printf(" %s |\n", target);
  };
  row(
      "(a) rank 3 exits 7 → launcher exited, all 8 ranks gone", [&](size_t l) { return summary(fails[l], c.runs); },
      "≤ 20 ms");
  row(
      "(b) start → 8 ranks running", [&](size_t l) { return summary(starts[l], c.runs); }, "≤ 20 ms");
  row(
      "(c) launcher VmHWM during the job, quiet ranks", [&](size_t l) { return memory(hwm_quiet[l]); }, "≤ 2 MB");
  if (log_bytes > 0) {
    std::string figure = "(c) launcher VmHWM, each rank first logs " + std::to_string(c.log_mib) + " MiB";
    row(
        figure.c_str(), [&](size_t l) { return memory(hwm_logging[l]); }, "≤ 2 MB");
  }
  row(
      "launcher's exit status (first run)", [&](size_t l) { return exit_text(status[l]); }, "7");
  std::printf(
      "\nMedian [min–max] of %d runs. (a) from rank 3's clock just before it exits to the later of the launcher's "
      "exit and the last rank closing the bench's FIFO. (b) from just before the launcher starts (table complete) "
      "to the last rank's own \"running\" stamp. (c) the launcher process only (the reference model's 8 tee "
      "processes and torchrun's workers not counted); the console is a pipe this program drains.\n",
      c.runs);
  return 0;
}

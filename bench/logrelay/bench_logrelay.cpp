// bench_logrelay: the log relay's throughput. 1 and 4 ranks (forked child
// processes) write TOTAL bytes between them, in 64 KiB blocks of text lines
// (40 to 160 bytes each, like a training log), as fast as they can (--write B:
// in write(2)s of B bytes, as a line-buffered print does with ~100). Three
// ways, interleaved round-robin in one run, printed as one markdown table:
//
//   - direct: each rank writes its own log file itself (O_APPEND): the floor;
//   - relay: each rank's stdout+stderr is a LogRelay pipe; the relay writes
//     the files and sends every line, prefixed, to a console on /dev/null
//     through its writer thread (what trainit does in a job, in-process here:
//     the loop, the relay and forked ranks, without the rest of trainit);
//   - relay, files only: the same with no console, to show what the console
//     costs; the relay then splices each pipe into its file (log/relay.h).
//
// Each time runs from the first fork until every rank is reaped, every pipe
// is at EOF and the console writer has written everything; MB/s is
// TOTAL / time (1 MB = 10^6 bytes), the median of the runs, after one untimed
// round. The files go to DIR (default: a new directory under $TMPDIR or /tmp)
// and are removed after every run, so dirty pages never pile up. Target
// (issue 5): relay ≥ 1 GB/s aggregate with 4 ranks, and the ratio to direct.
//
// CPU s/GB is what relaying costs trainit: the user and system CPU seconds
// of this process (the loop thread and the console writer; the ranks are
// other processes) over the same span, per GB (10^9 bytes) relayed; the
// median of the runs and, in brackets, their spread. Target (issue 22):
// files only ≤ 0.5 CPU s per GB.
//
// The relay writes every file from one thread (the loop's), where direct
// ranks write theirs in parallel; and on a machine with fewer cores than
// ranks + 2 the console writer competes with the ranks for a core, so some
// lines may be dropped even on /dev/null (the last column says how many).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "log/relay.h"
#include "loop/loop.h"

namespace {

using trainit::ConsoleWriter;
using trainit::Fd;
using trainit::LogRelay;
using trainit::Loop;
using trainit::RankLog;
using trainit::SourceHandle;

constexpr size_t kBlock = 64 << 10;

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_logrelay: %s\n", message.c_str());
  std::exit(1);
}

struct Config {
  uint64_t total = 1ULL << 30;
  int runs = 5;
  std::string dir;
  std::vector<int> ranks = {1, 4};
  size_t ring = size_t{8} << 20;  // the console's ring (trainit's own is 512 KiB)
  size_t write = kBlock;          // bytes per write(2) of a rank
  std::string only;               // "direct", "relay" or "files": run that case alone (for profiling)
};

[[noreturn]] void usage(int code) {
  std::printf(
      "usage: bench_logrelay [--total MiB] [--runs N] [--dir DIR] [--quick] [--ranks N] [--ring KiB] [--write B] "
      "[--only CASE]\n"
      "  --total MiB  bytes all ranks write together, in MiB (default 1024)\n"
      "  --runs N     runs of each case, median reported (default 5)\n"
      "  --dir DIR    where the log files go (default: a new dir under $TMPDIR or /tmp)\n"
      "  --quick      --total 256 --runs 3\n"
      "  --ranks N    only N ranks (default: 1, then 4)\n"
      "  --ring KiB   the console's ring (default 8192; trainit's is 512)\n"
      "  --write B    bytes per write(2) of a rank (default 65536; 4096: a pipe's\n"
      "               copy loop, 8192: a block-buffered print, ~100: a line-buffered one)\n"
      "  --only CASE  run one case alone, for a profiler: direct, relay or files\n");
  std::exit(code);
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(64);
      }
      return argv[++i];
    };
    if (a == "--total") {
      c.total = std::stoull(value()) << 20;
    } else if (a == "--runs") {
      c.runs = std::max(1, std::stoi(value()));
    } else if (a == "--dir") {
      c.dir = value();
    } else if (a == "--only") {
      c.only = value();
    } else if (a == "--ranks") {
      c.ranks = {std::stoi(value())};
    } else if (a == "--write") {
      c.write = std::clamp<size_t>(std::stoull(value()), 1, kBlock);
    } else if (a == "--ring") {
      c.ring = std::stoull(value()) << 10;
    } else if (a == "--quick") {
      c.total = 256ULL << 20;
      c.runs = 3;
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      usage(64);
    }
  }
  return c;
}

// One 64 KiB block of numbered-looking text lines, ending with '\n'.
std::string make_block() {
  std::string block;
  uint64_t x = 88172645463325252ULL;
  for (int i = 0; block.size() < kBlock; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    char head[64];
    int n = std::snprintf(head, sizeof(head), "step %d loss %.4f lr %.2e ", i, 1.0 / (i + 1), 1e-4);
    block.append(head, static_cast<size_t>(n));
    block.append(40 + x % 120 - std::min<size_t>(static_cast<size_t>(n), 40), 'x');
    block += '\n';
  }
  block.resize(kBlock);
  block.back() = '\n';
  return block;
}

// `bytes` bytes of `block` over and over, in write(2)s of at most `size`.
void write_blocks(int fd, const std::string& block, uint64_t bytes, size_t size) {
  for (uint64_t done = 0; done < bytes; done += block.size()) {
    const char* p = block.data();
    size_t n = block.size();
    while (n > 0) {
      ssize_t w = ::write(fd, p, std::min(n, size));
      if (w < 0 && errno == EINTR) {
        continue;
      }
      if (w <= 0) {
        ::_exit(1);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
}

std::string log_path(const Config& c, int rank) {
  return c.dir + "/rank" + std::to_string(rank) + ".log";
}

void remove_files(const Config& c, int ranks) {
  for (int i = 0; i < ranks; ++i) {
    ::unlink(log_path(c, i).c_str());
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Ranks write their own files.
double run_direct(const Config& c, const std::string& block, int ranks) {
  const uint64_t each = c.total / static_cast<uint64_t>(ranks);
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int i = 0; i < ranks; ++i) {
    const std::string path = log_path(c, i);
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) {
        ::_exit(1);
      }
      write_blocks(fd, block, each, c.write);
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      die("a direct rank failed");
    }
  }
  return seconds_since(start);
}

// CPU seconds (user + system) this process's threads used so far: the loop
// thread's and the console writer's. The ranks are other processes.
double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct RelayRun {
  double seconds = 0;  // wall time, first fork to every byte written
  double cpu = 0;      // CPU seconds of the relay's process: the loop and the console writer
};

// Ranks write to their stdout, a LogRelay pipe.
RelayRun run_relay(const Config& c, const std::string& block, int ranks, int console_fd, uint64_t* dropped) {
  const uint64_t each = c.total / static_cast<uint64_t>(ranks);
  Loop loop;
  if (loop.init() < 0) {
    die("loop init failed");
  }
  const double cpu_start = cpu_seconds();
  auto start = std::chrono::steady_clock::now();
  std::optional<ConsoleWriter> console;
  if (console_fd >= 0) {
    console.emplace(console_fd, -1, c.ring);
  }
  std::optional<LogRelay> relay;
  relay.emplace(loop, console ? &*console : nullptr);
  int gone = 0;
  std::vector<SourceHandle> children;
  for (int i = 0; i < ranks; ++i) {
    auto out = relay->add_rank(RankLog{"[rank " + std::to_string(i) + "] ", log_path(c, i)});
    if (!out.ok()) {
      die(out.error().message);
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(out->get(), 1);
      ::dup2(out->get(), 2);
      ::close_range(3, ~0U, 0);
      write_blocks(1, block, each, c.write);
      ::_exit(0);
    }
    out->reset();
    children.push_back(loop.add_child(
        pid,
        [&gone](const siginfo_t& info) {
          if (info.si_code != CLD_EXITED || info.si_status != 0) {
            die("a relayed rank failed");
          }
          ++gone;
          return 0;
        },
        "rank"));
  }
  while (gone < ranks || !relay->all_closed()) {
    if (loop.run_once(1000) < 0) {
      die("loop failed");
    }
  }
  relay->finish();
  if (!relay->flush_console(std::chrono::seconds(10))) {
    die("console did not drain");
  }
  const RelayRun run{seconds_since(start), cpu_seconds() - cpu_start};
  for (int i = 0; i < ranks; ++i) {
    if (relay->bytes(static_cast<size_t>(i)) != each) {
      die("rank " + std::to_string(i) + " relayed " + std::to_string(relay->bytes(static_cast<size_t>(i))) +
          " bytes, not " + std::to_string(each));
    }
  }
  if (!relay->errors().empty()) {
    die(relay->errors().front().message);
  }
  *dropped += relay->console_dropped();
  relay.reset();
  return run;
}

std::string dropped_cell(uint64_t dropped, uint64_t relayed) {
  char text[64];
  std::snprintf(text, sizeof(text), "%llu (%.2f%%)", static_cast<unsigned long long>(dropped),
                100.0 * static_cast<double>(dropped) / static_cast<double>(std::max<uint64_t>(relayed, 1)));
  return text;
}

bool wanted(const Config& c, const char* name) {
  return c.only.empty() || c.only == name;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string filesystem_of(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) < 0) {
    return "?";
  }
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x01021994:
      return "tmpfs";
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794c7630:
      return "overlayfs";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof(hex), "0x%lx", static_cast<unsigned long>(fs.f_type));
      return hex;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config c = parse(argc, argv);
  bool own_dir = c.dir.empty();
  if (own_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/bench_logrelay-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      die("mkdtemp: " + std::string(std::strerror(errno)));
    }
    c.dir = tmpl;
  }
  Fd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (!null) {
    die("/dev/null: " + std::string(std::strerror(errno)));
  }
  const std::string block = make_block();
  size_t lines = static_cast<size_t>(std::count(block.begin(), block.end(), '\n'));

  struct utsname u {};
  ::uname(&u);
  std::printf(
      "bench_logrelay: %s %s, %u CPUs; %.0f MiB in total per case, %zu-byte writes of %zu-byte lines on average\n",
      u.sysname, u.release, std::thread::hardware_concurrency(), static_cast<double>(c.total) / (1 << 20), c.write,
      block.size() / lines);
  std::printf("files in %s (%s); console ring %zu KiB; median of %d runs, interleaved\n\n", c.dir.c_str(),
              filesystem_of(c.dir).c_str(), c.ring >> 10, c.runs);

  std::printf(
      "| ranks | direct to files, MB/s | relay: files + console (/dev/null), MB/s | relay / direct | "
      "relay: files + console, CPU s/GB | relay: files only, MB/s | relay: files only, CPU s/GB | "
      "console bytes dropped, all relay runs |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int ranks : c.ranks) {
    std::vector<double> direct;
    std::vector<RelayRun> relay;
    std::vector<RelayRun> files_only;
    uint64_t dropped = 0;
    uint64_t unused = 0;
    // One untimed round first: on a VM the first pass after a pause pays for
    // the host giving the guest its freed pages back (3-5x slower here).
    for (int run = -1; run < c.runs; ++run) {
      if (run < 0) {
        run_direct(c, block, ranks);
        remove_files(c, ranks);
        continue;
      }
      if (wanted(c, "direct")) {
        direct.push_back(run_direct(c, block, ranks));
        remove_files(c, ranks);
      }
      if (wanted(c, "relay")) {
        relay.push_back(run_relay(c, block, ranks, null.get(), &dropped));
        remove_files(c, ranks);
      }
      if (wanted(c, "files")) {
        files_only.push_back(run_relay(c, block, ranks, -1, &unused));
        remove_files(c, ranks);
      }
    }
    const double mb = static_cast<double>(c.total) / 1e6;
    const double gb = static_cast<double>(c.total) / 1e9;
    auto rate = [&](const std::vector<double>& times) { return times.empty() ? 0 : mb / median(times); };
    auto relay_rate = [&](const std::vector<RelayRun>& runs) {
      std::vector<double> times;
      times.reserve(runs.size());
      for (const RelayRun& r : runs) {
        times.push_back(r.seconds);
      }
      return rate(times);
    };
    // CPU seconds per GB relayed: the median, and the spread of the runs.
    auto cpu_cell = [&](const std::vector<RelayRun>& runs) -> std::string {
      if (runs.empty()) {
        return "-";
      }
      std::vector<double> per_gb;
      per_gb.reserve(runs.size());
      for (const RelayRun& r : runs) {
        per_gb.push_back(r.cpu / gb);
      }
      const auto [lo, hi] = std::minmax_element(per_gb.begin(), per_gb.end());
      char text[64];
      (void)std::snprintf(text, sizeof(text), "%.2f (%.2f–%.2f)", median(per_gb), *lo, *hi);
      return text;
    };
    auto cell = [](double v, const char* format) {
      char text[32];
      std::snprintf(text, sizeof(text), format, v);
      return v > 0 ? std::string(text) : std::string("-");
    };
    const double d = rate(direct);
    const double r = relay_rate(relay);
    const double f = relay_rate(files_only);
    std::printf("| %d | %s | %s | %s | %s | %s | %s | %s |\n", ranks, cell(d, "%.0f").c_str(), cell(r, "%.0f").c_str(),
                cell(d > 0 ? r / d : 0, "%.2f").c_str(), cpu_cell(relay).c_str(), cell(f, "%.0f").c_str(),
                cpu_cell(files_only).c_str(),
                r > 0 ? dropped_cell(dropped, c.total * static_cast<uint64_t>(relay.size())).c_str() : "-");
    std::fflush(stdout);
  }
  if (own_dir) {
    ::rmdir(c.dir.c_str());
  }
  return 0;
}

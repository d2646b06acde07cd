// bench_coll: a collective (allreduce, f32 sum, unless --coll names another)
// among N ranks of this node, each a fork()ed process of one standalone
// communicator, for 4 B … 64 MiB and N = 2 and 4: the median latency of one
// call as rank 0 sees it, and busbw = algbw · factor (nccl-tests'
// definitions; algbw = bytes / time; factor 2(N−1)/N for allreduce, (N−1)/N
// for reduce_scatter and allgather, 1 for broadcast and reduce). The size is
// nccl-tests' too: the larger buffer's bytes (reduce_scatter's send,
// allgather's recv; each rank's part at least one element). Two columns per
// N: ordinary (malloc'd) buffers, and buffers from trainit_alloc (peers read
// them in place). Beside them, in the same run: this machine's single-thread
// memcpy rate on a 64 MiB buffer (median of 9).
//
// Open MPI and gloo are compare.sh's (allreduce only).
//
// Run by hand: bench_coll [--quick] [--coll allreduce|reduce|reduce_scatter|allgather|broadcast]
// --quick stops at 4 MiB and takes fewer samples.
//
// One size, one fresh set of ranks (what bench/coll/fresh_runs.sh repeats):
//   bench_coll --one BYTES [--ranks N] [--in-place] [--pin] [--alloc] [--calls K]
// prints "BYTES N MEDIAN_US P10_US P90_US CALLS SPUN YIELDED SLEPT": the
// median and spread of one call on rank 0, and how rank 0's waits for its
// peers ended per call (polling, between sched_yield()s, after a futex
// sleep). --pin puts rank r on CPU r mod the CPUs it may use; --alloc takes
// the buffer from trainit_alloc (zero copy) instead of malloc; --turns DIR
// times the calls only in the turns fresh_runs.sh hands out (turns.h).
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "coll/comm.h"
#include "trainit/coll.h"
#include "turns.h"

namespace {

constexpr size_t kMaxSizes = 32;

enum class Coll { kAllreduce, kReduce, kReduceScatter, kAllgather, kBroadcast };

struct CollName {
  const char* name;
  Coll coll;
};
constexpr CollName kColls[] = {{"allreduce", Coll::kAllreduce},
                               {"reduce", Coll::kReduce},
                               {"reduce_scatter", Coll::kReduceScatter},
                               {"allgather", Coll::kAllgather},
                               {"broadcast", Coll::kBroadcast}};

struct Options {
  bool quick = false;
  Coll coll = Coll::kAllreduce;
  const char* name = "allreduce";
  size_t one = 0;  // --one BYTES: that size only, one set of ranks
  int ranks = 2;
  bool in_place = false;
  bool pin = false;
  bool alloc = false;
  size_t calls = 0;             // 0: clamp(512 MiB / size, 7, 20000)
  int handover = -1;            // --handover plain|stream|both: -1 the library's choice, 0, 1, 2 (alternating blocks)
  const char* turns = nullptr;  // --turns DIR: run only in the turns handed out there
};

// One call of the collective on size bytes (f32; sum where it reduces; root 0).
int call(trainit_comm* comm, Coll coll, void* send, void* recv, size_t size, int n) {
  const size_t count = size / 4;
  const size_t part = std::max<size_t>(count / static_cast<size_t>(n), 1);  // reduce_scatter's, allgather's
  switch (coll) {
    case Coll::kAllreduce:
      return trainit_allreduce(comm, send, recv, count, TRAINIT_F32, TRAINIT_SUM);
    case Coll::kReduce:
      return trainit_reduce(comm, send, recv, count, TRAINIT_F32, TRAINIT_SUM, 0);
    case Coll::kReduceScatter:
      return trainit_reduce_scatter(comm, send, recv, part, TRAINIT_F32, TRAINIT_SUM);
    case Coll::kAllgather:
      return trainit_allgather(comm, send, recv, part, TRAINIT_F32);
    case Coll::kBroadcast:
      return trainit_broadcast(comm, send, count, TRAINIT_F32, 0);
  }
  return -EINVAL;
}

double busbw_factor(Coll coll, int n) {
  switch (coll) {
    case Coll::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Coll::kReduceScatter:
    case Coll::kAllgather:
      return static_cast<double>(n - 1) / n;
    case Coll::kReduce:
    case Coll::kBroadcast:
      break;
  }
  return 1.0;
}

struct Result {
  double median_us[kMaxSizes];
};

std::vector<size_t> sizes(bool quick) {
  std::vector<size_t> out;
  for (size_t b = 4; b <= (quick ? (4UL << 20) : (64UL << 20)); b *= 4) {
    out.push_back(b);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One rank: every size, warm-up call then timed calls; rank 0 records medians.
int run_rank(int rank, int n, const char* name, bool arena, const Options& opt, Result* out) {
  trainit_comm* comm = nullptr;
  int rc = trainit_comm_init(&comm, name, rank, n);
  if (rc != 0) {
    std::fprintf(stderr, "rank %d: %s\n", rank, trainit_strerror(rc));
    return 1;
  }
  const std::vector<size_t> list = sizes(opt.quick);
  // A 4 B reduce_scatter or allgather still moves one element per rank.
  const size_t max_bytes = std::max(list.back(), 4 * static_cast<size_t>(n));
  void* send = arena ? trainit_alloc(comm, max_bytes) : std::malloc(max_bytes);
  void* recv = arena ? trainit_alloc(comm, max_bytes) : std::malloc(max_bytes);
  if (send == nullptr || recv == nullptr) {
    std::fprintf(stderr, "rank %d: no buffers of %zu bytes\n", rank, max_bytes);
    return 1;
  }
  std::memset(send, 0, max_bytes);
  std::memset(recv, 0, max_bytes);
  for (size_t s = 0; s < list.size(); ++s) {
    size_t iters = std::clamp<size_t>((opt.quick ? 64UL << 20 : 512UL << 20) / list[s], 7, opt.quick ? 2000 : 20000);
    std::vector<double> us;
    us.reserve(iters);
    rc = call(comm, opt.coll, send, recv, list[s], n);
    for (size_t i = 0; i < iters && rc == 0; ++i) {
      const bench::Ns t0 = bench::now_ns();
      rc = call(comm, opt.coll, send, recv, list[s], n);
      us.push_back(static_cast<double>(bench::now_ns() - t0) / 1000.0);
    }
    if (rc != 0) {
      std::fprintf(stderr, "rank %d: %s of %zu bytes: %s\n", rank, opt.name, list[s], trainit_strerror(rc));
      return 1;
    }
    if (rank == 0) {
      out->median_us[s] = median(us);
    }
  }
  trainit_comm_destroy(comm);
  return 0;
}

// --one: what rank 0 saw.
struct OneResult {
  double median_us;
  double p10_us;
  double p90_us;
  size_t calls;
  uint64_t spun;
  uint64_t yielded;
  uint64_t slept;
  double stream_median_us;  // --handover both: the median of the streaming blocks (median_us: the plain ones)
};

// Rank r of --one: pinned if asked, one buffer (in place) or two.
int run_one_rank(int rank, const char* name, const Options& opt, OneResult* out) {
  if (opt.pin) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 0) {
      int nth = rank % CPU_COUNT(&allowed);
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &allowed) && nth-- == 0) {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(cpu, &one);
          (void)sched_setaffinity(0, sizeof(one), &one);
          break;
        }
      }
    }
  }
  trainit_comm* comm = nullptr;
  int rc = trainit_comm_init(&comm, name, rank, opt.ranks);
  if (rc != 0) {
    std::fprintf(stderr, "rank %d: %s\n", rank, trainit_strerror(rc));
    return 1;
  }
  const size_t bytes = std::max<size_t>(opt.one, 4 * static_cast<size_t>(opt.ranks));
  const auto buffer = [&] { return opt.alloc ? trainit_alloc(comm, bytes) : std::malloc(bytes); };
  void* send = buffer();
  void* recv = opt.in_place ? send : buffer();
  if (send == nullptr || recv == nullptr) {
    std::fprintf(stderr, "rank %d: no buffers of %zu bytes\n", rank, bytes);
    return 1;
  }
  std::memset(send, 0, bytes);
  std::memset(recv, 0, bytes);
  turns mine;
  if (turns_open(&mine, opt.turns, rank) != 0 || turns_pass(&mine) != 0) {
    std::fprintf(stderr, "rank %d: --turns %s: %s\n", rank, opt.turns, std::strerror(errno));
    return 1;
  }
  const size_t calls = opt.calls != 0 ? opt.calls : std::clamp<size_t>((512UL << 20) / opt.one, 7, 20000);
  for (int i = 0; i < 10 && rc == 0; ++i) {
    rc = call(comm, opt.coll, send, recv, opt.one, opt.ranks);
  }
  // How rank 0's waits ended in the timed calls alone: a turn's warm-up
  // calls are taken out.
  comm->waits_spun = comm->waits_yielded = comm->waits_slept = 0;
  const auto warm_up = [&] {
    const uint64_t spun = comm->waits_spun;
    const uint64_t yielded = comm->waits_yielded;
    const uint64_t slept = comm->waits_slept;
    if (turns_pass(&mine) != 0) {
      std::fprintf(stderr, "rank %d: the turns' conductor went away\n", rank);
      return -EPIPE;
    }
    int warm = 0;
    for (int i = 0; i < kTurnWarmUp && warm == 0; ++i) {
      warm = call(comm, opt.coll, send, recv, opt.one, opt.ranks);
    }
    comm->waits_spun = spun;
    comm->waits_yielded = yielded;
    comm->waits_slept = slept;
    return warm;
  };
  std::vector<double> us;
  std::vector<double> us_stream;  // --handover both: the streaming blocks' calls
  std::vector<double> turn;       // --turns: this turn's calls
  us.reserve(calls);
  turn.reserve(kTurnCalls);
  for (size_t i = 0; i < calls && rc == 0; ++i) {
    if (mine.go >= 0 && i > 0 && i % kTurnCalls == 0) {
      turns_note(&mine, turn.data(), turn.size());
      turn.clear();
      if ((rc = warm_up()) != 0) {
        break;
      }
    }
    if (opt.handover >= 0) {
      comm->handover_forced = opt.handover == 2 ? static_cast<int>((i / 16) % 2) : opt.handover;
    }
    const bench::Ns t0 = bench::now_ns();
    rc = call(comm, opt.coll, send, recv, opt.one, opt.ranks);
    const double took = static_cast<double>(bench::now_ns() - t0) / 1000.0;
    (comm->stream_handover && opt.handover == 2 ? us_stream : us).push_back(took);
    turn.push_back(took);
  }
  if (rc != 0) {
    std::fprintf(stderr, "rank %d: %s of %zu bytes: %s\n", rank, opt.name, opt.one, trainit_strerror(rc));
    return 1;
  }
  turns_note(&mine, turn.data(), turn.size());
  if (turns_pass(&mine) != 0) {  // the last turn ends; the conductor lets every rank go
    std::fprintf(stderr, "rank %d: the turns' conductor went away\n", rank);
    return 1;
  }
  turns_close(&mine);
  if (rank == 0) {
    std::sort(us.begin(), us.end());
    *out = {us[us.size() / 2], us[us.size() / 10],  us[us.size() * 9 / 10], calls,
            comm->waits_spun,  comm->waits_yielded, comm->waits_slept,      0};
    if (!us_stream.empty()) {
      std::sort(us_stream.begin(), us_stream.end());
      out->stream_median_us = us_stream[us_stream.size() / 2];
    }
  }
  trainit_comm_destroy(comm);
  return 0;
}

int run_one(const Options& opt) {
  auto* shared = static_cast<OneResult*>(
      mmap(nullptr, sizeof(OneResult), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) {
    bench::die("mmap: %s", std::strerror(errno));
  }
  const std::string name = "bench-coll-one-" + std::to_string(getpid());
  const size_t heap = static_cast<size_t>(opt.ranks) * (2 * opt.one + (1UL << 20));
  setenv("TRAINIT_COLL_HEAP", std::to_string(opt.alloc ? heap : (1UL << 20)).c_str(), 1);
  std::vector<pid_t> pids;
  for (int r = 0; r < opt.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      bench::die("fork: %s", std::strerror(errno));
    }
    if (pid == 0) {
      _exit(run_one_rank(r, name.c_str(), opt, shared));
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      bench::die("a rank failed (status %d)", status);
    }
  }
  const OneResult& r = *shared;
  const double per_call = static_cast<double>(r.calls);
  std::printf("%zu %d %.2f %.2f %.2f %zu %.2f %.2f %.2f", opt.one, opt.ranks, r.median_us, r.p10_us, r.p90_us, r.calls,
              static_cast<double>(r.spun) / per_call, static_cast<double>(r.yielded) / per_call,
              static_cast<double>(r.slept) / per_call);
  if (opt.handover == 2) {
    std::printf(" %.2f", r.stream_median_us);
  }
  std::printf("\n");
  munmap(shared, sizeof(OneResult));
  return 0;
}

// Runs n ranks; the medians rank 0 measured.
Result run(int n, bool arena, const Options& opt) {
  auto* shared =
      static_cast<Result*>(mmap(nullptr, sizeof(Result), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) {
    bench::die("mmap: %s", std::strerror(errno));
  }
  const std::string name = "bench-coll-" + std::to_string(getpid()) + "-" + std::to_string(n) + (arena ? "a" : "m");
  const size_t heap = arena ? static_cast<size_t>(n) * (2 * sizes(opt.quick).back() + (1UL << 20)) : (1UL << 20);
  setenv("TRAINIT_COLL_HEAP", std::to_string(heap).c_str(), 1);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      bench::die("fork: %s", std::strerror(errno));
    }
    if (pid == 0) {
      _exit(run_rank(r, n, name.c_str(), arena, opt, shared));
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      bench::die("a rank failed (status %d)", status);
    }
  }
  const Result result = *shared;
  munmap(shared, sizeof(Result));
  return result;
}

double memcpy_gbps() {
  constexpr size_t kBytes = 64UL << 20;
  std::vector<unsigned char> a(kBytes, 1);
  std::vector<unsigned char> b(kBytes, 0);
  std::vector<double> gbps;
  for (int i = 0; i < 9; ++i) {
    const bench::Ns t0 = bench::now_ns();
    std::memcpy(b.data(), a.data(), kBytes);
    gbps.push_back(static_cast<double>(kBytes) / static_cast<double>(bench::now_ns() - t0));
    a[static_cast<size_t>(i)] = b[static_cast<size_t>(i) + 1];  // keep both live
  }
  return median(gbps);
}

std::string human(size_t bytes) {
  if (bytes >= (1UL << 20)) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= 1024) {
    return std::to_string(bytes >> 10) + " KiB";
  }
  return std::to_string(bytes) + " B";
}

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      opt.quick = true;
      continue;
    }
    const auto number = [&](long min) {
      char* end = nullptr;
      const long v = i + 1 < argc ? std::strtol(argv[++i], &end, 10) : -1;
      if (end == nullptr || *end != '\0' || v < min) {
        bench::die("%s wants a number of at least %ld", argv[i - 1], min);
      }
      return v;
    };
    if (std::strcmp(argv[i], "--one") == 0) {
      opt.one = static_cast<size_t>(number(4));
      continue;
    }
    if (std::strcmp(argv[i], "--ranks") == 0) {
      opt.ranks = static_cast<int>(number(1));
      continue;
    }
    if (std::strcmp(argv[i], "--handover") == 0 && i + 1 < argc) {
      ++i;
      opt.handover = std::strcmp(argv[i], "plain") == 0    ? 0
                     : std::strcmp(argv[i], "stream") == 0 ? 1
                     : std::strcmp(argv[i], "both") == 0   ? 2
                                                           : -2;
      if (opt.handover == -2) {
        bench::die("--handover takes plain, stream or both");
      }
      continue;
    }
    if (std::strcmp(argv[i], "--turns") == 0 && i + 1 < argc) {
      opt.turns = argv[++i];
      continue;
    }
    if (std::strcmp(argv[i], "--calls") == 0) {
      opt.calls = static_cast<size_t>(number(1));
      continue;
    }
    bool* flag = std::strcmp(argv[i], "--in-place") == 0 ? &opt.in_place
                 : std::strcmp(argv[i], "--pin") == 0    ? &opt.pin
                 : std::strcmp(argv[i], "--alloc") == 0  ? &opt.alloc
                                                         : nullptr;
    if (flag != nullptr) {
      *flag = true;
      continue;
    }
    const CollName* found = nullptr;
    if (std::strcmp(argv[i], "--coll") == 0 && i + 1 < argc) {
      ++i;
      for (const CollName& c : kColls) {
        found = std::strcmp(argv[i], c.name) == 0 ? &c : found;
      }
    }
    if (found == nullptr) {
      bench::die(
          "usage: bench_coll [--quick] [--coll allreduce|reduce|reduce_scatter|allgather|broadcast]\n"
          "       bench_coll --one BYTES [--ranks N] [--in-place] [--pin] [--alloc] [--calls K] [--coll NAME]\n"
          "         [--handover plain|stream|both] [--turns DIR]");
    }
    opt.coll = found->coll;
    opt.name = found->name;
  }
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  if (opt.one != 0) {
    return run_one(opt);
  }
  const std::vector<size_t> list = sizes(opt.quick);
  const int ns[2] = {2, 4};
  Result results[2][2];
  for (int i = 0; i < 2; ++i) {
    for (int arena = 0; arena < 2; ++arena) {
      results[i][arena] = run(ns[i], arena != 0, opt);
    }
  }
  const double copy = memcpy_gbps();
  std::printf("trainit_%s, f32%s, median of one call on rank 0 (µs) and busbw (GB/s); %ld online CPUs\n", opt.name,
              opt.coll == Coll::kAllgather || opt.coll == Coll::kBroadcast ? "" : " sum",
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("single-thread memcpy, 64 MiB, same run: %.2f GB/s\n\n", copy);
  std::printf("%8s | %10s %7s | %10s %7s | %10s %7s | %10s %7s\n", "size", "N=2 µs", "busbw", "N=2 alloc", "busbw",
              "N=4 µs", "busbw", "N=4 alloc", "busbw");
  for (size_t s = 0; s < list.size(); ++s) {
    std::printf("%8s", human(list[s]).c_str());
    for (int i = 0; i < 2; ++i) {
      for (int arena = 0; arena < 2; ++arena) {
        const double us = results[i][arena].median_us[s];
        const double algbw = static_cast<double>(list[s]) / (us * 1000.0);
        const double busbw = algbw * busbw_factor(opt.coll, ns[i]);
        std::printf(" | %10.2f %7.2f", us, busbw);
      }
    }
    std::printf("\n");
  }
  return 0;
}

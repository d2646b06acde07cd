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
#include "trainit/coll.h"

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
    const CollName* found = nullptr;
    if (std::strcmp(argv[i], "--coll") == 0 && i + 1 < argc) {
      ++i;
      for (const CollName& c : kColls) {
        found = std::strcmp(argv[i], c.name) == 0 ? &c : found;
      }
    }
    if (found == nullptr) {
      bench::die("usage: bench_coll [--quick] [--coll allreduce|reduce|reduce_scatter|allgather|broadcast]");
    }
    opt.coll = found->coll;
    opt.name = found->name;
  }
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
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

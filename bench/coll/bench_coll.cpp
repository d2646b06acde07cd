// bench_coll: trainit_allreduce (f32 sum) among N ranks of this node, each a
// fork()ed process of one standalone communicator, for 4 B … 64 MiB and
// N = 2 and 4: the median latency of one call as rank 0 sees it, and busbw =
// algbw · 2(N−1)/N (nccl-tests' definition; algbw = bytes / time). Two
// columns per N: ordinary (malloc'd) buffers, and buffers from trainit_alloc
// (peers read them in place). Beside them, in the same run: this machine's
// single-thread memcpy rate on a 64 MiB buffer (median of 9).
//
// Open MPI and gloo columns are not here yet (issue 12 asks for them).
//
// Run by hand; --quick stops at 4 MiB and takes fewer samples.
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
int run_rank(int rank, int n, const char* name, bool arena, bool quick, Result* out) {
  trainit_comm* comm = nullptr;
  int rc = trainit_comm_init(&comm, name, rank, n);
  if (rc != 0) {
    std::fprintf(stderr, "rank %d: %s\n", rank, trainit_strerror(rc));
    return 1;
  }
  const std::vector<size_t> list = sizes(quick);
  const size_t max_bytes = list.back();
  void* send = arena ? trainit_alloc(comm, max_bytes) : std::malloc(max_bytes);
  void* recv = arena ? trainit_alloc(comm, max_bytes) : std::malloc(max_bytes);
  if (send == nullptr || recv == nullptr) {
    std::fprintf(stderr, "rank %d: no buffers of %zu bytes\n", rank, max_bytes);
    return 1;
  }
  std::memset(send, 0, max_bytes);
  std::memset(recv, 0, max_bytes);
  for (size_t s = 0; s < list.size(); ++s) {
    const size_t count = list[s] / 4;
    size_t iters = std::clamp<size_t>((quick ? 64UL << 20 : 512UL << 20) / list[s], 7, quick ? 2000 : 20000);
    std::vector<double> us;
    us.reserve(iters);
    rc = trainit_allreduce(comm, send, recv, count, TRAINIT_F32, TRAINIT_SUM);
    for (size_t i = 0; i < iters && rc == 0; ++i) {
      const bench::Ns t0 = bench::now_ns();
      rc = trainit_allreduce(comm, send, recv, count, TRAINIT_F32, TRAINIT_SUM);
      us.push_back(static_cast<double>(bench::now_ns() - t0) / 1000.0);
    }
    if (rc != 0) {
      std::fprintf(stderr, "rank %d: allreduce of %zu bytes: %s\n", rank, list[s], trainit_strerror(rc));
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
Result run(int n, bool arena, bool quick) {
  auto* shared =
      static_cast<Result*>(mmap(nullptr, sizeof(Result), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) {
    bench::die("mmap: %s", std::strerror(errno));
  }
  const std::string name = "bench-coll-" + std::to_string(getpid()) + "-" + std::to_string(n) + (arena ? "a" : "m");
  const size_t heap = arena ? static_cast<size_t>(n) * (2 * sizes(quick).back() + (1UL << 20)) : (1UL << 20);
  setenv("TRAINIT_COLL_HEAP", std::to_string(heap).c_str(), 1);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      bench::die("fork: %s", std::strerror(errno));
    }
    if (pid == 0) {
      _exit(run_rank(r, n, name.c_str(), arena, quick, shared));
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

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::vector<size_t> list = sizes(quick);
  const int ns[2] = {2, 4};
  Result results[2][2];
  for (int i = 0; i < 2; ++i) {
    for (int arena = 0; arena < 2; ++arena) {
      results[i][arena] = run(ns[i], arena != 0, quick);
    }
  }
  const double copy = memcpy_gbps();
  std::printf("trainit_allreduce, f32 sum, median of one call on rank 0 (µs) and busbw (GB/s); %ld online CPUs\n",
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
        const double busbw = algbw * 2.0 * (ns[i] - 1) / ns[i];
        std::printf(" | %10.2f %7.2f", us, busbw);
      }
    }
    std::printf("\n");
  }
  return 0;
}

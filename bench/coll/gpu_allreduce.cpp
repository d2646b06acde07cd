// gpu_allreduce: the CUDA backend behind the public API (coll.h), among N
// fork()ed ranks of standalone communicators that share this node's GPUs:
// rank r sees one GPU, number r mod G (CUDA_VISIBLE_DEVICES, set in the rank
// before anything of CUDA starts there; an inherited list is indexed the
// same way). The backend is TRAINIT_COLL_BACKEND, "cuda" when unset.
//
//   gpu_allreduce check N
//     every collective (allreduce, reduce, reduce_scatter, allgather,
//     broadcast), every dtype and op, in and out of place, counts that fit
//     the staging buffer and counts that go in pieces: each device result
//     must equal, bit for bit, the same call's on a host communicator of the
//     same ranks, after one allreduce whose count differs between the
//     ranks (-EINVAL on every rank). Then rank N−1 is SIGKILLed while the
//     others are in an allreduce: they must get -ECONNABORTED within a
//     second. Exit 0: all passed; 1: a rank failed (its lines say which
//     call).
//     `check N --without-gpu` with another backend
//     (TRAINIT_COLL_BACKEND=/path/libtrainit_coll_fakedev.so) runs it where
//     there is no GPU: how the check itself is tried.
//
//   gpu_allreduce sweep N
//     what a GPU is tuned by: the same allreduce at 4 B … 256 MiB for each
//     of a few block counts (TRAINIT_COLL_DEVICE_BLOCKS and
//     TRAINIT_COLL_DEVICE_BLOCK_BYTES), one-shot bounds
//     (TRAINIT_COLL_DEVICE_ONE_SHOT) and staging sizes
//     (TRAINIT_COLL_DEVICE_STAGING), a communicator each: one table.
//
//   gpu_allreduce bench N...
//     f32 sum in place on device buffers (trainit_device_alloc), 4 B …
//     256 MiB: the mean latency of one call on rank 0, synchronous and back
//     to back on a stream (trainit_comm_set_stream), and busbw = bytes /
//     time · 2(N−1)/N (nccl-tests' definition), beside cudaMemcpy
//     device-to-device on GPU 0 for the same sizes (bytes / time, copies
//     timed with CUDA events): one markdown table. Before it, two lines:
//     the floors (one empty kernel launch and a stream synchronize; one
//     launch in which two processes swap a step through IPC-mapped memory,
//     and a synchronize; a cudaDeviceSynchronize with nothing queued, a
//     synchronous call's first step), and an allreduce of no elements per N
//     (the kernel's one step without data), synchronous and on a stream. After it, the same
//     allreduces in a registered window (4 MiB … 256 MiB, zero copy), and
//     an allgather and a reduce_scatter of 64 MiB staged and in a window.
//
// The parent process never touches CUDA (the ranks are forked from it); the
// GPU count, the GPU names and the cudaMemcpy rates come from children too.
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "gpu_floors.h"
#include "trainit/coll.h"

namespace {

constexpr int kMaxRanks = 16;                    // a device communicator's limit
constexpr size_t kMaxBytes = size_t{256} << 20;  // the bench's largest size
constexpr size_t kSizes = 14;                    // 4 B, 16 B, … 256 MiB (×4)
static_assert(size_t{4} << (2 * (kSizes - 1)) == kMaxBytes, "the largest size is the buffer's");
constexpr bench::Ns kKillBound = 1'000'000'000;  // -ECONNABORTED after a peer's death, at most
constexpr bench::Ns kCheckDeadline = 600'000'000'000;
constexpr int kDtypes = 7;
constexpr int kOps = 4;
constexpr const char* kDtypeNames[kDtypes] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
constexpr const char* kOpNames[kOps] = {"sum", "prod", "min", "max"};
constexpr size_t kElemSize[kDtypes] = {4, 8, 2, 2, 4, 8, 1};

// --- processes ---------------------------------------------------------------

// Memory the ranks write and the parent reads after they exit.
template <typename T>
T* shared_array(size_t n) {
  void* p = mmap(nullptr, sizeof(T) * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    bench::die("mmap: %s", std::strerror(errno));
  }
  return static_cast<T*>(p);
}

// Makes this process see one GPU: number `index` mod the count, of the
// inherited CUDA_VISIBLE_DEVICES list when there is one.
void see_one_gpu(int index, int gpus) {
  std::vector<std::string> visible;
  const char* inherited = std::getenv("CUDA_VISIBLE_DEVICES");
  if (inherited != nullptr && *inherited != '\0') {
    std::string list = inherited;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      visible.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  }
  const int g = index % std::max(gpus, 1);
  const std::string mine = visible.empty() ? std::to_string(g) : visible[static_cast<size_t>(g) % visible.size()];
  setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
}

// Runs body(rank) in n forked ranks; returns their wait statuses, killing
// them all past the deadline.
template <typename Body>
std::vector<int> run_ranks(int n, bench::Ns deadline_ns, Body body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      bench::die("fork: %s", std::strerror(errno));
    }
    if (pid == 0) {
      _exit(body(r));
    }
    pids.push_back(pid);
  }
  std::vector<int> status(pids.size(), 0);
  std::vector<bool> reaped(pids.size(), false);
  const bench::Ns deadline = bench::now_ns() + deadline_ns;
  for (size_t left = pids.size(); left > 0;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (!reaped[i] && waitpid(pids[i], &status[i], WNOHANG) == pids[i]) {
        reaped[i] = true;
        --left;
      }
    }
    if (left > 0 && bench::now_ns() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (!reaped[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], &status[i], 0);
        }
      }
      bench::die("%d ranks: still running after %lld s (a hang); killed", n,
                 static_cast<long long>(deadline_ns / 1'000'000'000));
    }
    usleep(1000);
  }
  return status;
}

bool exited_zero(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// How a rank ended, for the line that says a run failed.
std::string ending(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by ") + strsignal(WTERMSIG(status));
  }
  return "exited " + std::to_string(WEXITSTATUS(status));
}

// The GPUs this node has, from a child (the parent stays without CUDA).
int count_gpus() {
  const std::vector<int> st = run_ranks(1, 60'000'000'000, [](int) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? std::min(n, 100) : 101;
  });
  const int code = WIFEXITED(st[0]) ? WEXITSTATUS(st[0]) : 101;
  if (code == 0 || code > 100) {
    bench::die("no CUDA device: cudaGetDeviceCount failed or found none");
  }
  return code;
}

const char* backend_name() {
  const char* b = std::getenv("TRAINIT_COLL_BACKEND");
  return b != nullptr && *b != '\0' ? b : "cuda";
}

// A communicator of this group's ranks on `backend`, or the rank exits.
trainit_comm* join(const std::string& name, int rank, int n, const char* backend) {
  trainit_comm* c = nullptr;
  const int r = trainit_comm_init_backend(&c, name.c_str(), rank, n, backend);
  if (r != 0) {
    (void)std::fprintf(stderr, "rank %d: init on %s: %s (%s)\n", rank, backend, trainit_strerror(r),
                       trainit_backend_error());
    _exit(1);
  }
  return c;
}

// --- check -------------------------------------------------------------------

uint64_t next_random(uint64_t& state) {  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// count finite, non-zero values of dtype (magnitudes about 2^-5 … 2^5, so
// that products of a few ranks stay meaningful), from seed.
std::vector<unsigned char> values(int dtype, size_t count, uint64_t seed) {
  std::vector<unsigned char> out(count * kElemSize[dtype] + 1);
  uint64_t s = seed;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t x = next_random(s);
    unsigned char* at = out.data() + i * kElemSize[dtype];
    const auto small = static_cast<int64_t>(x % 81) - 40;
    switch (dtype) {
      case TRAINIT_F32: {
        const float v = static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 64.0 - 32.0);
        std::memcpy(at, &v, 4);
        break;
      }
      case TRAINIT_F64: {
        const double v = static_cast<double>(x >> 11) / 9007199254740992.0 * 64.0 - 32.0;
        std::memcpy(at, &v, 8);
        break;
      }
      case TRAINIT_F16: {  // sign, exponent 10…20 (2^-5 … 2^5), any mantissa
        const auto v = static_cast<uint16_t>((x & 0x8000) | ((10 + (x >> 16) % 11) << 10) | ((x >> 32) & 0x3ff));
        std::memcpy(at, &v, 2);
        break;
      }
      case TRAINIT_BF16: {  // sign, exponent 122…132, any mantissa
        const auto v = static_cast<uint16_t>((x & 0x8000) | ((122 + (x >> 16) % 11) << 7) | ((x >> 32) & 0x7f));
        std::memcpy(at, &v, 2);
        break;
      }
      case TRAINIT_I32: {
        const auto v = static_cast<int32_t>(small);
        std::memcpy(at, &v, 4);
        break;
      }
      case TRAINIT_I64:
        std::memcpy(at, &small, 8);
        break;
      default:
        *at = static_cast<unsigned char>(x);
        break;
    }
  }
  return out;
}

enum class Coll { kAllreduce, kReduce, kReduceScatter, kAllgather, kBroadcast };
constexpr const char* kCollNames[] = {"allreduce", "reduce", "reduce_scatter", "allgather", "broadcast"};

struct Call {
  Coll coll;
  int dtype;
  int op;
  size_t count;  // the count coll.h's call takes (per rank for reduce_scatter and allgather)
  bool in_place;
  bool windowed = false;  // its buffer registered (trainit_comm_register): zero copy past the one-shot bound
};

// Device and host buffers of one call on one rank.
class Rank {
 public:
  Rank(trainit_comm* dev, trainit_comm* host) : dev_(dev), host_(host), rank_(trainit_comm_rank(host)) {
    n_ = static_cast<size_t>(trainit_comm_size(host));
  }

  // Runs c on both communicators; false (and a line) when they differ.
  bool same_on_device(const Call& c, uint64_t seed) {
    const size_t es = kElemSize[c.dtype];
    const size_t send_count = c.coll == Coll::kReduceScatter ? c.count * n_ : c.count;
    const size_t recv_count = c.coll == Coll::kAllgather ? c.count * n_ : c.count;
    const size_t buf_count = std::max(send_count, recv_count);
    std::vector<unsigned char> input = values(c.dtype, send_count, seed + 7919 * static_cast<uint64_t>(rank_));
    // In place the input lies where coll.h says: at the start, or (allgather)
    // at this rank's part.
    const size_t input_at = c.coll == Coll::kAllgather && c.in_place ? c.count * es * static_cast<size_t>(rank_) : 0;
    std::vector<unsigned char> host_buf(buf_count * es + 1, 0);
    if (c.in_place || c.coll == Coll::kBroadcast) {
      std::memcpy(host_buf.data() + input_at, input.data(), send_count * es);
    }
    void* dev_buf = to_device(host_buf);
    void* dev_in = c.in_place ? static_cast<unsigned char*>(dev_buf) + input_at : to_device(input);
    // The buffer a zero-copy call names: a reduction's send, else recv.
    const bool send_window = c.coll != Coll::kAllgather && c.coll != Coll::kBroadcast && !c.in_place;
    void* window = send_window ? dev_in : dev_buf;
    const int rw = c.windowed ? trainit_comm_register(dev_, window, send_window ? input.size() : host_buf.size()) : 0;
    unsigned char* host_in = c.in_place ? host_buf.data() + input_at : input.data();
    const int rh = run(host_, c, host_in, host_buf.data());
    const int rd = run(dev_, c, dev_in, dev_buf);
    std::vector<unsigned char> got(host_buf.size());
    int rc = trainit_device_copy(dev_, got.data(), dev_buf, recv_count * es);
    rc = rc != 0 ? rc : rw != 0 ? rw : c.windowed ? trainit_comm_deregister(dev_, window) : 0;
    const bool root_only = c.coll == Coll::kReduce && rank_ != 0;
    const size_t compare = root_only ? 0 : recv_count * es;
    const bool same = rh == 0 && rd == 0 && rc == 0 && std::memcmp(got.data(), host_buf.data(), compare) == 0;
    if (!same) {
      size_t at = 0;
      while (at < compare && got[at] == host_buf[at]) {
        ++at;
      }
      (void)std::fprintf(stderr,
                         "rank %d: %s %s %s count %zu %s%s: host %d, device %d, copy or window %d; first differing "
                         "byte %zu\n",
                         rank_, kCollNames[static_cast<int>(c.coll)], kDtypeNames[c.dtype], kOpNames[c.op], c.count,
                         c.in_place ? "in place" : "out of place", c.windowed ? " in a window" : "", rh, rd, rc, at);
    }
    free_device();
    return same;
  }

 private:
  void* to_device(const std::vector<unsigned char>& host) {
    void* p = nullptr;
    if (trainit_device_alloc(dev_, host.size(), &p) != 0 ||
        trainit_device_copy(dev_, p, host.data(), host.size()) != 0) {
      (void)std::fprintf(stderr, "rank %d: device_alloc/copy of %zu bytes failed: %s\n", rank_, host.size(),
                         trainit_backend_error());
      _exit(1);
    }
    held_.push_back(p);
    return p;
  }

  void free_device() {
    for (void* p : held_) {
      (void)trainit_device_free(dev_, p);
    }
    held_.clear();
  }

  static int run(trainit_comm* comm, const Call& c, const void* send, void* recv) {
    const auto t = static_cast<trainit_dtype>(c.dtype);
    const auto o = static_cast<trainit_op>(c.op);
    switch (c.coll) {
      case Coll::kAllreduce:
        return trainit_allreduce(comm, send, recv, c.count, t, o);
      case Coll::kReduce:
        return trainit_reduce(comm, send, recv, c.count, t, o, 0);
      case Coll::kReduceScatter:
        return trainit_reduce_scatter(comm, send, recv, c.count, t, o);
      case Coll::kAllgather:
        return trainit_allgather(comm, send, recv, c.count, t);
      case Coll::kBroadcast:
        return trainit_broadcast(comm, recv, c.count, t, trainit_comm_size(comm) - 1);
    }
    return -EINVAL;
  }

  trainit_comm* dev_;
  trainit_comm* host_;
  int rank_;
  size_t n_ = 0;
  std::vector<void*> held_;
};

// Ranks whose counts differ, so that their calls run on different blocks
// (rank 0's on one, the others' on more: TRAINIT_COLL_DEVICE_BLOCK_BYTES):
// -EINVAL on every rank. 0 when it was (and a line when not).
int disagreed(trainit_comm* dev, int rank) {
  const size_t count = rank == 0 ? 1 : size_t{8192} * static_cast<size_t>(rank);
  void* buf = nullptr;
  int r = trainit_device_alloc(dev, count * sizeof(float), &buf);
  r = r != 0 ? r : trainit_allreduce(dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM);
  const int freed = buf != nullptr ? trainit_device_free(dev, buf) : 0;
  if (r == -EINVAL && freed == 0) {
    return 0;
  }
  (void)std::fprintf(stderr, "rank %d: an allreduce of %zu against its peers' other counts: %s, not -EINVAL\n", rank,
                     count, trainit_strerror(r));
  return 1;
}

// Every call of the check, on one rank: the number that differed.
int check_calls(trainit_comm* dev, trainit_comm* host) {
  Rank me(dev, host);
  // With peers, first one call the ranks disagree on; every call after it still right.
  int failed = trainit_comm_size(host) > 1 ? disagreed(dev, trainit_comm_rank(host)) : 0;
  uint64_t seed = 1;
  // 1 MiB staging (TRAINIT_COLL_DEVICE_STAGING): 100003 elements go in
  // pieces; 256 KiB one-shot (TRAINIT_COLL_DEVICE_ONE_SHOT): of 100003,
  // bytes go one-shot, wider elements two-shot.
  for (const size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}, size_t{100003}}) {
    for (int dtype = 0; dtype < kDtypes; ++dtype) {
      for (const bool in_place : {false, true}) {
        for (int op = 0; op < kOps; ++op) {
          failed += me.same_on_device({Coll::kAllreduce, dtype, op, count, in_place}, ++seed) ? 0 : 1;
        }
        failed += me.same_on_device({Coll::kReduce, dtype, TRAINIT_MAX, count, in_place}, ++seed) ? 0 : 1;
        failed += me.same_on_device({Coll::kReduceScatter, dtype, TRAINIT_SUM, count, in_place}, ++seed) ? 0 : 1;
        failed += me.same_on_device({Coll::kAllgather, dtype, TRAINIT_SUM, count, in_place}, ++seed) ? 0 : 1;
      }
      failed += me.same_on_device({Coll::kBroadcast, dtype, TRAINIT_SUM, count, true}, ++seed) ? 0 : 1;
    }
  }
  // In a registered window, zero copy past the one-shot bound (256 KiB): an
  // allreduce (in place; out of place, its send), a reduce (its send), an
  // allgather, a reduce_scatter out of place, a broadcast (of bytes, 100003
  // elements are one-shot and staged).
  for (const size_t count : {size_t{100003}, size_t{300007}}) {
    for (int dtype = 0; dtype < kDtypes; ++dtype) {
      for (int op = 0; op < kOps; ++op) {
        failed += me.same_on_device({Coll::kAllreduce, dtype, op, count, true, true}, ++seed) ? 0 : 1;
        failed += me.same_on_device({Coll::kAllreduce, dtype, op, count, false, true}, ++seed) ? 0 : 1;
        failed += me.same_on_device({Coll::kReduceScatter, dtype, op, count, false, true}, ++seed) ? 0 : 1;
      }
      for (const bool in_place : {false, true}) {
        failed += me.same_on_device({Coll::kAllgather, dtype, TRAINIT_SUM, count, in_place, true}, ++seed) ? 0 : 1;
        failed += me.same_on_device({Coll::kReduce, dtype, TRAINIT_MAX, count, in_place, true}, ++seed) ? 0 : 1;
      }
      failed += me.same_on_device({Coll::kBroadcast, dtype, TRAINIT_SUM, count, true, true}, ++seed) ? 0 : 1;
    }
  }
  return failed;
}

// The last rank dies while the others are in an allreduce: they must get
// -ECONNABORTED within kKillBound. 0 on the survivors when they did.
int check_killed_peer(trainit_comm* dev, int rank, int n) {
  void* buf = nullptr;
  const size_t bytes = size_t{64} << 20;
  if (trainit_device_alloc(dev, bytes, &buf) != 0 || trainit_barrier(dev) != 0) {
    (void)std::fprintf(stderr, "rank %d: before the kill: %s\n", rank, trainit_backend_error());
    return 1;
  }
  if (rank == n - 1) {
    usleep(50'000);  // the others are in their allreduce, waiting for this rank
    kill(getpid(), SIGKILL);
  }
  const bench::Ns t0 = bench::now_ns();
  const int r = trainit_allreduce(dev, buf, buf, bytes / 4, TRAINIT_F32, TRAINIT_SUM);
  const double ms = static_cast<double>(bench::now_ns() - t0 - 50'000'000) / 1e6;
  std::printf("rank %d: allreduce with a killed peer: %s, %.1f ms past the kill\n", rank, trainit_strerror(r), ms);
  return r == -ECONNABORTED && ms * 1e6 < static_cast<double>(kKillBound) ? 0 : 1;
}

int check(int n, int gpus) {
  setenv("TRAINIT_COLL_DEVICE_STAGING", "1048576", 1);
  setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "262144", 1);
  const std::string name = "gpu-check-" + std::to_string(getpid());
  const std::vector<int> st = run_ranks(n, kCheckDeadline, [&](int rank) {
    see_one_gpu(rank, gpus);
    trainit_comm* dev = join(name + "-dev", rank, n, backend_name());
    trainit_comm* host = join(name + "-host", rank, n, "host");
    const int failed = check_calls(dev, host);
    std::printf("rank %d of %d (%s): %d call(s) differ from the host communicator's\n", rank, n,
                trainit_comm_backend(dev), failed);
    (void)std::fflush(stdout);
    if (failed != 0) {
      return 1;
    }
    return check_killed_peer(dev, rank, n);
  });
  bool ok = WIFSIGNALED(st.back()) && WTERMSIG(st.back()) == SIGKILL;
  for (int r = 0; r + 1 < n; ++r) {
    ok = ok && exited_zero(st[static_cast<size_t>(r)]);
  }
  std::printf("check, %d ranks on %s, %d GPU(s): %s\n", n, backend_name(), gpus, ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

// --- bench -------------------------------------------------------------------

size_t size_at(size_t i) {
  return size_t{4} << (2 * i);
}

size_t calls_for(size_t bytes) {
  return std::clamp<size_t>((size_t{1} << 30) / bytes, 5, 2000);
}

// Back to back on a stream of the rank's own (trainit_comm_set_stream):
// calls enqueued, then the stream drained; rank 0's mean µs per call.
int stream_calls(trainit_comm* dev, void* buf, size_t count, size_t calls, double* us) {
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return -EIO;
  }
  int r = trainit_comm_set_stream(dev, stream);
  r = r != 0 ? r : trainit_allreduce(dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM);  // warm
  r = r != 0 || cudaStreamSynchronize(stream) == cudaSuccess ? r : -EIO;
  r = r != 0 ? r : trainit_comm_set_stream(dev, nullptr);
  r = r != 0 ? r : trainit_barrier(dev);
  r = r != 0 ? r : trainit_comm_set_stream(dev, stream);
  const bench::Ns t0 = bench::now_ns();
  for (size_t k = 0; k < calls && r == 0; ++k) {
    r = trainit_allreduce(dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM);
  }
  r = r != 0 || cudaStreamSynchronize(stream) == cudaSuccess ? r : -EIO;
  *us = static_cast<double>(bench::now_ns() - t0) / 1e3 / static_cast<double>(calls);
  const int q = trainit_comm_set_stream(dev, nullptr);  // an enqueued call's error, if any
  (void)cudaStreamDestroy(stream);
  return r != 0 ? r : q;
}

// An allreduce of 0 elements, 2,000 calls synchronous then 2,000 on a stream:
// rank 0's mean µs of each into us[0] and us[1]. 0, or 1 said why.
int steps_alone(trainit_comm* dev, void* buf, int rank, double* us) {
  constexpr size_t kCalls = 2000;
  int r = trainit_allreduce(dev, buf, buf, 0, TRAINIT_F32, TRAINIT_SUM);  // warm
  r = r != 0 ? r : trainit_barrier(dev);
  const bench::Ns t0 = bench::now_ns();
  for (size_t c = 0; c < kCalls && r == 0; ++c) {
    r = trainit_allreduce(dev, buf, buf, 0, TRAINIT_F32, TRAINIT_SUM);
  }
  const double took = static_cast<double>(bench::now_ns() - t0) / 1e3 / kCalls;
  double on_stream = std::nan("");
  if (r == 0 && (r = stream_calls(dev, buf, 0, kCalls, &on_stream)) == -EOPNOTSUPP) {
    r = 0;  // calls driven from the host take no stream
  }
  if (r != 0) {
    (void)std::fprintf(stderr, "rank %d: allreduce of no elements: %s\n", rank, trainit_strerror(r));
    return 1;
  }
  if (rank == 0) {
    us[0] = took;
    us[1] = on_stream;
  }
  return 0;
}

// Rank 0's mean µs per call for each size of `sizes` (indices of size_at),
// synchronous into us[k] and back to back on a stream into stream_us[k];
// each rank runs `setup` first (a sweep's settings).
//
// steps_us, unless null: an allreduce of no elements (the call's one step:
// the kernel's synchronisation without data), synchronous and on a stream.
//
// windowed: the buffer registered (trainit_comm_register), so that calls
// past the one-shot bound are zero copy.
void bench_ranks(int n, int gpus, const std::vector<size_t>& sizes, const std::function<void()>& setup, double* us,
                 double* stream_us, double* steps_us = nullptr, bool windowed = false) {
  static int runs = 0;
  const std::string name =
      "gpu-bench-" + std::to_string(getpid()) + "-" + std::to_string(n) + "-" + std::to_string(++runs);
  const std::vector<int> st = run_ranks(n, kCheckDeadline, [&](int rank) {
    see_one_gpu(rank, gpus);
    setup();
    trainit_comm* dev = join(name, rank, n, backend_name());
    void* buf = nullptr;
    std::vector<unsigned char> zeros(kMaxBytes, 0);
    if (trainit_device_alloc(dev, kMaxBytes, &buf) != 0 ||
        trainit_device_copy(dev, buf, zeros.data(), kMaxBytes) != 0) {
      (void)std::fprintf(stderr, "rank %d: device_alloc of 256 MiB: %s\n", rank, trainit_backend_error());
      return 1;
    }
    if (windowed && trainit_comm_register(dev, buf, kMaxBytes) != 0) {
      (void)std::fprintf(stderr, "rank %d: registering 256 MiB failed\n", rank);
      return 1;
    }
    if (steps_us != nullptr && steps_alone(dev, buf, rank, steps_us) != 0) {
      return 1;
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t bytes = size_at(sizes[k]);
      const size_t count = bytes / 4;
      const size_t calls = calls_for(bytes);
      int r = 0;
      for (int warm = 0; warm < 2 && r == 0; ++warm) {
        r = trainit_allreduce(dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM);
      }
      r = r != 0 ? r : trainit_barrier(dev);
      const bench::Ns t0 = bench::now_ns();
      for (size_t c = 0; c < calls && r == 0; ++c) {
        r = trainit_allreduce(dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM);
      }
      if (r != 0) {
        (void)std::fprintf(stderr, "rank %d: allreduce of %zu bytes: %s\n", rank, bytes, trainit_strerror(r));
        return 1;
      }
      const double took = static_cast<double>(bench::now_ns() - t0) / 1e3 / static_cast<double>(calls);
      double on_stream = 0;
      if ((r = stream_calls(dev, buf, count, calls, &on_stream)) == -EOPNOTSUPP) {
        on_stream = std::nan("");  // calls driven from the host take no stream
        r = 0;
      }
      if (r != 0) {
        (void)std::fprintf(stderr, "rank %d: %zu bytes on a stream: %s\n", rank, bytes, trainit_strerror(r));
        return 1;
      }
      if (rank == 0) {
        us[k] = took;
        stream_us[k] = on_stream;
        (void)std::fprintf(stderr, "  N=%d, %zu B: %.1f µs, on a stream %.1f\n", n, bytes, took,
                           on_stream);  // progress
      }
    }
    int r = windowed ? trainit_comm_deregister(dev, buf) : 0;
    r = r != 0 ? r : trainit_device_free(dev, buf);
    r = r != 0 ? r : trainit_comm_destroy(dev);
    if (r != 0) {
      (void)std::fprintf(stderr, "rank %d: freeing the buffer or destroying the communicator: %s\n", rank,
                         trainit_strerror(r));
      return 1;
    }
    return 0;
  });
  for (size_t r = 0; r < st.size(); ++r) {
    if (!exited_zero(st[r])) {
      bench::die("bench with %d ranks: rank %zu %s", n, r, ending(st[r]).c_str());
    }
  }
}

// An allgather and a reduce_scatter of 64 MiB (every rank's parts
// together, f32; the reduce_scatter sums), rank 0's mean µs per synchronous
// call into us[0 … 3]: the allgather staged and in a registered window (its
// recv: zero copy), the reduce_scatter staged and in a window (its send).
void bench_kinds(int n, int gpus, double* us) {
  static int runs = 0;
  const std::string name =
      "gpu-kinds-" + std::to_string(getpid()) + "-" + std::to_string(n) + "-" + std::to_string(++runs);
  constexpr size_t kBytes = size_t{64} << 20;
  const std::vector<int> st = run_ranks(n, kCheckDeadline, [&](int rank) {
    see_one_gpu(rank, gpus);
    trainit_comm* dev = join(name, rank, n, backend_name());
    void* win = nullptr;
    void* apart = nullptr;
    if (trainit_device_alloc(dev, kBytes, &win) != 0 || trainit_device_alloc(dev, kBytes, &apart) != 0 ||
        trainit_comm_register(dev, win, kBytes) != 0) {
      (void)std::fprintf(stderr, "rank %d: two buffers of 64 MiB, one registered: %s\n", rank, trainit_backend_error());
      return 1;
    }
    const size_t part = kBytes / 4 / static_cast<size_t>(n);
    const auto at = [&](void* p) { return static_cast<float*>(p) + part * static_cast<size_t>(rank); };
    const std::function<int()> calls[] = {
        [&] { return trainit_allgather(dev, at(apart), apart, part, TRAINIT_F32); },
        [&] { return trainit_allgather(dev, at(win), win, part, TRAINIT_F32); },
        [&] { return trainit_reduce_scatter(dev, apart, win, part, TRAINIT_F32, TRAINIT_SUM); },
        [&] { return trainit_reduce_scatter(dev, win, apart, part, TRAINIT_F32, TRAINIT_SUM); },
    };
    const size_t times = calls_for(kBytes);
    for (size_t k = 0; k < 4; ++k) {
      int r = calls[k]();
      r = r != 0 ? r : trainit_barrier(dev);
      const bench::Ns t0 = bench::now_ns();
      for (size_t c = 0; c < times && r == 0; ++c) {
        r = calls[k]();
      }
      if (r != 0) {
        (void)std::fprintf(stderr, "rank %d: call %zu of 64 MiB: %s\n", rank, k, trainit_strerror(r));
        return 1;
      }
      if (rank == 0) {
        us[k] = static_cast<double>(bench::now_ns() - t0) / 1e3 / static_cast<double>(times);
      }
    }
    int r = trainit_comm_deregister(dev, win);
    r = r != 0 ? r : trainit_device_free(dev, win);
    r = r != 0 ? r : trainit_device_free(dev, apart);
    r = r != 0 ? r : trainit_comm_destroy(dev);
    return r == 0 ? 0 : 1;
  });
  for (size_t r = 0; r < st.size(); ++r) {
    if (!exited_zero(st[r])) {
      bench::die("allgather and reduce_scatter with %d ranks: rank %zu %s", n, r, ending(st[r]).c_str());
    }
  }
}

void print_kinds(const std::vector<int>& ns, const double* us) {
  std::printf(
      "\nAllgather and reduce_scatter of 64 MiB (all parts, f32), same run: rank 0's mean µs per synchronous call, "
      "staged and in a registered window (zero copy); busbw = 64 MiB / time * (N-1)/N.\n\n"
      "| N | allgather µs | in a window µs | busbw GB/s | in a window | reduce_scatter µs | in a window µs | "
      "busbw GB/s | in a window |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (size_t j = 0; j < ns.size(); ++j) {
    const double* t = us + 4 * j;
    const double per = static_cast<double>(size_t{64} << 20) / 1e3 * (ns[j] - 1) / ns[j];
    std::printf("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", ns[j], t[0], t[1], per / t[0],
                per / t[1], t[2], t[3], per / t[2], per / t[3]);
  }
}

// The floor under a synchronous call: one empty kernel launch and a
// cudaStreamSynchronize, mean µs of 1,000 (gpu_floors.h); into
// *idle_sync_us, a cudaDeviceSynchronize with nothing queued (what a
// synchronous call does first), mean µs of 1,000.
double launch_floor_us(double* idle_sync_us) {
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return -1;
  }
  constexpr int kLaunches = 1000;
  const double us = bench::empty_launch_floor_us(stream, kLaunches);
  bool ok = us >= 0;
  const bench::Ns t1 = bench::now_ns();
  for (int k = 0; k < kLaunches && ok; ++k) {
    ok = cudaDeviceSynchronize() == cudaSuccess;
  }
  *idle_sync_us = static_cast<double>(bench::now_ns() - t1) / 1e3 / kLaunches;
  (void)cudaStreamDestroy(stream);
  return ok ? us : -1;
}

// The floor under a synchronous call among ranks: two processes (ranks 0
// and 1, on the GPUs the ranks of a bench get) each launching a kernel
// that swaps a step with the other's through IPC-mapped device memory,
// then synchronizing; rank 0's mean µs of 1,000 (gpu_floors.h), negative
// where a step failed.
double swap_floor_us(int gpus) {
  struct Shared {
    cudaIpcMemHandle_t handle[2];
    int ready[2];
  };
  auto* shared = shared_array<Shared>(1);
  double* us = shared_array<double>(1);
  *us = -1;
  const auto meet = [&](int rank, int phase) {
    __atomic_store_n(&shared->ready[rank], phase, __ATOMIC_RELEASE);
    const bench::Ns deadline = bench::now_ns() + 60'000'000'000;
    while (__atomic_load_n(&shared->ready[1 - rank], __ATOMIC_ACQUIRE) < phase) {
      if (bench::now_ns() > deadline) {
        return false;
      }
    }
    return true;
  };
  const std::vector<int> st = run_ranks(2, kCheckDeadline, [&](int rank) {
    see_one_gpu(rank, gpus);
    uint64_t* mine = nullptr;
    void* peer = nullptr;
    cudaStream_t stream = nullptr;
    bool ok = cudaMalloc(reinterpret_cast<void**>(&mine), 64) == cudaSuccess &&
              cudaMemset(mine, 0, 64) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess &&
              cudaIpcGetMemHandle(&shared->handle[rank], mine) == cudaSuccess &&
              cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
    ok = meet(rank, ok ? 1 : 2) && ok && __atomic_load_n(&shared->ready[1 - rank], __ATOMIC_ACQUIRE) == 1 &&
         cudaIpcOpenMemHandle(&peer, shared->handle[1 - rank], cudaIpcMemLazyEnablePeerAccess) == cudaSuccess;
    // Neither starts (its kernel would wait for good) before both can.
    ok = meet(rank, ok ? 3 : 4) && ok && __atomic_load_n(&shared->ready[1 - rank], __ATOMIC_ACQUIRE) == 3;
    const double t = ok ? bench::swap_floor_us(stream, mine, static_cast<const uint64_t*>(peer), 1000) : -1;
    if (rank == 0) {
      *us = t;
    }
    return t >= 0 ? 0 : 1;
  });
  return exited_zero(st[0]) && exited_zero(st[1]) ? *us : -1;
}

// cudaMemcpy device to device on GPU 0: GB/s per size into gbps[i], the
// launch floor and an idle cudaDeviceSynchronize into floor_us[0] and [1],
// and the GPU's name.
void bench_memcpy(double* gbps, double* floor_us, char* gpu_name, size_t name_len) {
  const std::vector<int> st = run_ranks(1, kCheckDeadline, [&](int) {
    see_one_gpu(0, 1);
    void* a = nullptr;
    void* b = nullptr;
    cudaDeviceProp prop{};
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaMalloc(&a, kMaxBytes) != cudaSuccess ||
        cudaMalloc(&b, kMaxBytes) != cudaSuccess || cudaEventCreate(&start) != cudaSuccess ||
        cudaEventCreate(&stop) != cudaSuccess) {
      (void)std::fprintf(stderr, "cudaMemcpy bench: %s\n", cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    (void)std::snprintf(gpu_name, name_len, "%s", prop.name);
    floor_us[0] = launch_floor_us(&floor_us[1]);
    for (size_t i = 0; i < kSizes; ++i) {
      const size_t bytes = size_at(i);
      const size_t calls = calls_for(bytes);
      bool ok = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
      ok = ok && cudaEventRecord(start) == cudaSuccess;
      for (size_t k = 0; k < calls && ok; ++k) {
        ok = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
      }
      float ms = 0;
      ok = ok && cudaEventRecord(stop) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
           cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
      if (!ok) {
        (void)std::fprintf(stderr, "cudaMemcpy of %zu bytes: %s\n", bytes, cudaGetErrorString(cudaGetLastError()));
        return 1;
      }
      gbps[i] = static_cast<double>(bytes) * static_cast<double>(calls) / (static_cast<double>(ms) * 1e6);
    }
    return 0;
  });
  if (!exited_zero(st[0])) {
    bench::die("the cudaMemcpy bench failed");
  }
}

void print_size(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) {
    std::printf("| %zu MiB ", bytes >> 20);
  } else if (bytes >= 1024) {
    std::printf("| %zu KiB ", bytes >> 10);
  } else {
    std::printf("| %zu B ", bytes);
  }
}

// One markdown table: for each size of `sizes` (indices of size_at) and
// each N of ns, rank 0's mean µs per call synchronous (us[j * sizes + i])
// and on a stream, and the busbw; then cudaMemcpy's rate where given.
void print_table(const std::vector<int>& ns, const std::vector<size_t>& sizes, const double* us,
                 const double* stream_us, const double* memcpy_gbps) {
  std::printf("| size ");
  for (const int n : ns) {
    std::printf("| N=%d µs | N=%d on a stream µs | N=%d busbw GB/s ", n, n, n);
  }
  std::printf(memcpy_gbps != nullptr ? "| cudaMemcpy D2D GB/s |\n|---" : "|\n|---");
  for (size_t j = 0; j < ns.size(); ++j) {
    std::printf("|--:|--:|--:");
  }
  std::printf(memcpy_gbps != nullptr ? "|--:|\n" : "|\n");
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t bytes = size_at(sizes[i]);
    print_size(bytes);
    for (size_t j = 0; j < ns.size(); ++j) {
      const double t = us[j * sizes.size() + i];
      const double factor = 2.0 * (ns[j] - 1) / ns[j];
      std::printf("| %.1f | %.1f | %.2f ", t, stream_us[j * sizes.size() + i],
                  static_cast<double>(bytes) / (t * 1e3) * factor);
    }
    if (memcpy_gbps != nullptr) {
      std::printf("| %.1f ", memcpy_gbps[sizes[i]]);
    }
    std::printf("|\n");
  }
}

int bench_all(const std::vector<int>& ns, int gpus) {
  double* us = shared_array<double>(kSizes * ns.size());
  double* stream_us = shared_array<double>(kSizes * ns.size());
  double* gbps = shared_array<double>(kSizes + 2);  // and the launch floor, an idle synchronize
  double* steps_us = shared_array<double>(2 * ns.size());
  char* gpu_name = shared_array<char>(256);
  const std::vector<size_t> large = {10, 11, 12, 13};  // 4 MiB … 256 MiB: two-shot, so zero copy in a window
  double* window_us = shared_array<double>(large.size() * ns.size());
  double* window_stream_us = shared_array<double>(large.size() * ns.size());
  double* kinds_us = shared_array<double>(4 * ns.size());
  std::vector<size_t> all(kSizes);
  for (size_t i = 0; i < kSizes; ++i) {
    all[i] = i;
  }
  for (size_t j = 0; j < ns.size(); ++j) {
    bench_ranks(
        ns[j], gpus, all, [] {}, us + j * kSizes, stream_us + j * kSizes, steps_us + 2 * j);
    bench_ranks(
        ns[j], gpus, large, [] {}, window_us + j * large.size(), window_stream_us + j * large.size(), nullptr, true);
    bench_kinds(ns[j], gpus, kinds_us + 4 * j);
  }
  bench_memcpy(gbps, gbps + kSizes, gpu_name, 256);
  const double swap_us = swap_floor_us(gpus);
  std::printf(
      "\nallreduce f32 sum in place on %s device buffers, %d GPU(s) (%s), rank 0's mean per call:\n"
      "synchronous, and back to back on a stream (trainit_comm_set_stream; the stream drained at the end);\n"
      "busbw = bytes / time * 2(N-1)/N (synchronous); cudaMemcpy: device to device on GPU 0, bytes / time.\n"
      "The floors of a synchronous call, same run: one empty kernel launch and a cudaStreamSynchronize, %.1f µs; "
      "one launch in which two processes swap a step through IPC-mapped memory, then a cudaStreamSynchronize, "
      "%.1f µs; a cudaDeviceSynchronize with nothing queued (a synchronous call's first step), %.1f µs.\n"
      "The steps alone (an allreduce of 0 elements: one step, no data), same run:",
      backend_name(), gpus, gpu_name, gbps[kSizes], swap_us, gbps[kSizes + 1]);
  for (size_t j = 0; j < ns.size(); ++j) {
    std::printf(" N=%d %.1f µs, %.1f on a stream;", ns[j], steps_us[2 * j], steps_us[2 * j + 1]);
  }
  std::printf("\n\n");
  print_table(ns, all, us, stream_us, gbps);
  // Two-shot through staging moves 5N - 2 bytes of memory per byte reduced
  // when the N ranks share one GPU (all ranks together: their peers' shares
  // into staging and every share read to fold, 2(N - 1) + N; each folded
  // share written twice, 2; the peers' shares copied back out, 2(N - 1)),
  // at most twice the cudaMemcpy rate (a copy reads and writes).
  std::printf("\nThe staging design's bound with the ranks on one GPU, from cudaMemcpy's 256 MiB rate:");
  for (const int n : ns) {
    std::printf(" N=%d busbw <= %.0f GB/s;", n, 2.0 * gbps[kSizes - 1] * 2.0 * (n - 1) / (n * (5.0 * n - 2)));
  }
  // Zero copy in a registered window moves 3N - 2 (every buffer's share
  // read by its folder, written into two buffers as it folds, copied into
  // the N - 2 others).
  std::printf("\n\nIn a registered window (trainit_comm_register: zero copy), same run:\n\n");
  print_table(ns, large, window_us, window_stream_us, nullptr);
  std::printf("\nThe zero-copy bound with the ranks on one GPU, from cudaMemcpy's 256 MiB rate:");
  for (const int n : ns) {
    std::printf(" N=%d busbw <= %.0f GB/s;", n, 2.0 * gbps[kSizes - 1] * 2.0 * (n - 1) / (n * (3.0 * n - 2)));
  }
  std::printf("\n");
  print_kinds(ns, kinds_us);
  return 0;
}

// The settings a GPU is tuned by, each a communicator of N ranks: the block
// count (TRAINIT_COLL_DEVICE_BLOCKS), the one-shot bound
// (TRAINIT_COLL_DEVICE_ONE_SHOT), the staging (TRAINIT_COLL_DEVICE_STAGING:
// a large call's steps are a piece of a block's region each, and so fewer
// with more staging) and the bytes a call takes one more block per
// (TRAINIT_COLL_DEVICE_BLOCK_BYTES; 0: every call on every block), at the
// sizes they move.
constexpr size_t kStagingDefault = size_t{32} << 20;
constexpr size_t kOneShotDefault = size_t{1} << 20;
constexpr size_t kBlockBytesDefault = size_t{16} << 10;
struct Setting {
  int blocks;
  size_t one_shot;
  size_t staging;
  bool launch = true;  // TRAINIT_COLL_DEVICE_LAUNCH: false drives the calls from the host (one block)
  size_t block_bytes = kBlockBytesDefault;
};
constexpr Setting kSweep[] = {{1, kOneShotDefault, kStagingDefault},
                              {8, kOneShotDefault, kStagingDefault},
                              {16, kOneShotDefault, kStagingDefault},
                              {32, kOneShotDefault, kStagingDefault},
                              {32, kOneShotDefault, kStagingDefault, true, 0},
                              {32, kOneShotDefault, kStagingDefault, true, size_t{4} << 10},
                              {32, kOneShotDefault, kStagingDefault, true, size_t{64} << 10},
                              {32, 256 << 10, kStagingDefault},
                              {32, 4 << 20, kStagingDefault},
                              {32, kOneShotDefault, size_t{8} << 20},
                              {32, kOneShotDefault, size_t{128} << 20},
                              {1, kOneShotDefault, kStagingDefault, false}};

int sweep(int n, int gpus) {
  const std::vector<size_t> sizes = {0, 6, 8, 9, 10, 13};  // 4 B, 16 KiB, 256 KiB, 1 MiB, 4 MiB, 256 MiB
  std::printf(
      "\nallreduce f32 sum in place, %d ranks, rank 0's mean µs per call (synchronous; 4 B also back to back on a "
      "stream), by TRAINIT_COLL_DEVICE_BLOCKS, TRAINIT_COLL_DEVICE_BLOCK_BYTES, TRAINIT_COLL_DEVICE_ONE_SHOT and "
      "TRAINIT_COLL_DEVICE_STAGING (the last row driven from the host, TRAINIT_COLL_DEVICE_LAUNCH=0: no stream):\n\n"
      "| blocks | a block per KiB | one-shot up to | staging MiB | 4 B | 4 B on a stream | 16 KiB | 256 KiB | 1 MiB "
      "| 4 MiB | 256 MiB | 256 MiB busbw GB/s |\n"
      "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
      n);
  double* us = shared_array<double>(sizes.size());
  double* stream_us = shared_array<double>(sizes.size());
  for (const Setting& set : kSweep) {
    bench_ranks(
        n, gpus, sizes,
        [&] {
          setenv("TRAINIT_COLL_DEVICE_BLOCKS", std::to_string(set.blocks).c_str(), 1);
          setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", std::to_string(set.one_shot).c_str(), 1);
          setenv("TRAINIT_COLL_DEVICE_STAGING", std::to_string(set.staging).c_str(), 1);
          setenv("TRAINIT_COLL_DEVICE_LAUNCH", set.launch ? "1" : "0", 1);
          setenv("TRAINIT_COLL_DEVICE_BLOCK_BYTES", std::to_string(set.block_bytes).c_str(), 1);
        },
        us, stream_us);
    std::printf("| %d | %zu | %zu KiB | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", set.blocks,
                set.block_bytes >> 10, set.one_shot >> 10, set.staging >> 20, us[0], stream_us[0], us[1], us[2], us[3],
                us[4], us[5], static_cast<double>(kMaxBytes) / (us[5] * 1e3) * 2.0 * (n - 1) / n);
  }
  return 0;
}

int ranks_arg(const char* s) {
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  if (*end != '\0' || n < 1 || n > kMaxRanks) {
    bench::die("a rank count must be 1 … %d, not %s", kMaxRanks, s);
  }
  return static_cast<int>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const bool is_sweep = argc == 3 && std::strcmp(argv[1], "sweep") == 0;
  if (argc < 3 || (std::strcmp(argv[1], "check") != 0 && std::strcmp(argv[1], "bench") != 0 && !is_sweep)) {
    bench::die("usage: gpu_allreduce check N [--without-gpu] | gpu_allreduce bench N... | gpu_allreduce sweep N");
  }
  (void)std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (std::strcmp(argv[1], "check") == 0) {
    // --without-gpu: another backend (the fake device), how this program is
    // tried where there is no GPU.
    const bool without_gpu = argc == 4 && std::strcmp(argv[3], "--without-gpu") == 0;
    if (argc > 4 || (argc == 4 && !without_gpu)) {
      bench::die("usage: gpu_allreduce check N [--without-gpu]");
    }
    return check(ranks_arg(argv[2]), without_gpu ? 1 : count_gpus());
  }
  const int gpus = count_gpus();
  if (is_sweep) {
    return sweep(ranks_arg(argv[2]), gpus);
  }
  std::vector<int> ns;
  for (int i = 2; i < argc; ++i) {
    ns.push_back(ranks_arg(argv[i]));
  }
  return bench_all(ns, gpus);
}

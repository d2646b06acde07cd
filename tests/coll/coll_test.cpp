// The collective core across real processes: every rank is a fork()ed child
// joining a standalone communicator (a fresh name per test); the parent
// waits for them with a deadline, so a bug fails a test and never hangs it.
// Children check their own results against a reference computed in double
// (exact for integers) and leave a hash of each output in shared memory; the
// parent checks that every rank's hashes are the same (bitwise identical
// results).
#include "trainit/coll.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "coll/arena.h"
#include "coll/comm.h"
#include "coll/kernels.h"
#include "coll/protocol.h"
#include "emulation.h"
#include "trainit/coll.hpp"

namespace {

using trainit::coll::dtype_size;

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Shared memory every child and the parent see (anonymous, MAP_SHARED).
struct Shared {
  void* p = MAP_FAILED;
  size_t bytes = 0;
  explicit Shared(size_t n) : bytes(n) {
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  }
  ~Shared() {
    if (p != MAP_FAILED) {
      munmap(p, bytes);
    }
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

std::string unique_name() {
  static int counter = 0;
  return "test-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
}

// A failed check in a child: say where, exit 1 (the parent reports it).
#define CHILD_CHECK(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "rank check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                   \
      std::fputc('\n', stderr);                                                            \
      _exit(1);                                                                            \
    }                                                                                      \
  } while (0)

// Runs body(comm, rank) in n forked ranks of one communicator and waits at
// most deadline_s for all: the ranks' exit statuses (a rank still running at
// the deadline is killed and reported as -1). before_wait runs in the parent
// once the children are forked (it may signal them).
std::vector<int> run_ranks(int n, const std::function<int(trainit_comm*, int)>& body, int deadline_s = 60,
                           const std::function<void(const std::vector<pid_t>&)>& before_wait = nullptr) {
  const std::string name = unique_name();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(static_cast<unsigned>(deadline_s) + 5);  // the last resort, should the parent be gone
      trainit_comm* comm = nullptr;
      const int rc = trainit_comm_init(&comm, name.c_str(), r, n);
      if (rc != 0) {
        std::fprintf(stderr, "rank %d: trainit_comm_init: %s\n", r, trainit_strerror(rc));
        _exit(3);
      }
      const int status = body(comm, r);
      trainit_comm_destroy(comm);
      _exit(status);
    }
    pids.push_back(pid);
  }
  if (before_wait) {
    before_wait(pids);
  }
  std::vector<int> status(static_cast<size_t>(n), -1);
  const int64_t deadline = now_ns() + static_cast<int64_t>(deadline_s) * 1'000'000'000;
  int left = n;
  while (left > 0 && now_ns() < deadline) {
    for (int r = 0; r < n; ++r) {
      int ws = 0;
      if (status[r] == -1 && pids[r] > 0 && waitpid(pids[r], &ws, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        --left;
      }
    }
    usleep(1000);
  }
  for (int r = 0; r < n; ++r) {
    if (status[r] == -1) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
    }
  }
  return status;
}

void expect_all_exit(const std::vector<int>& status, int code) {
  for (size_t r = 0; r < status.size(); ++r) {
    EXPECT_EQ(status[r], code) << "rank " << r << (status[r] == -1 ? " hung past the deadline" : "");
  }
}

// --- values and references ------------------------------------------------

const trainit_dtype kAllTypes[] = {TRAINIT_F32, TRAINIT_F64, TRAINIT_F16, TRAINIT_BF16,
                                   TRAINIT_I32, TRAINIT_I64, TRAINIT_U8};
const trainit_op kAllOps[] = {TRAINIT_SUM, TRAINIT_PROD, TRAINIT_MIN, TRAINIT_MAX};

bool is_float(trainit_dtype t) {
  return t == TRAINIT_F32 || t == TRAINIT_F64 || t == TRAINIT_F16 || t == TRAINIT_BF16;
}

// Rank r's element i: small values that every type holds exactly.
double value(trainit_dtype t, trainit_op op, int r, size_t i) {
  if (op == TRAINIT_PROD) {
    static const double kFloat[] = {0.5, 1, 2, -1, 1.5};
    static const double kInt[] = {1, 2, -1, 3, 1};
    static const double kU8[] = {1, 2, 3, 1, 5};
    const size_t k = (static_cast<size_t>(r) + i) % 5;
    return is_float(t) ? kFloat[k] : (t == TRAINIT_U8 ? kU8[k] : kInt[k]);
  }
  const auto v = static_cast<double>((static_cast<size_t>(r) * 7 + i * 13) % 17);
  if (t == TRAINIT_U8) {
    return v;
  }
  return is_float(t) ? (v - 8) * 0.25 : v - 8;
}

// f32 → f16 for the test's values, all exact in f16 (no rounding needed).
uint16_t to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000U;
  const uint32_t a = u & 0x7fffffffU;
  if (a == 0) {
    return static_cast<uint16_t>(sign);
  }
  const int e = static_cast<int>(a >> 23) - 127 + 15;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e) << 10) | ((a & 0x7fffffU) >> 13));
}

float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000U) << 16;
  const uint32_t e = (h >> 10) & 0x1fU;
  const uint32_t m = h & 0x3ffU;
  if (e == 0 && m == 0) {
    float f;
    std::memcpy(&f, &sign, 4);
    return f;
  }
  if (e == 0) {
    return (sign ? -1.0F : 1.0F) * std::ldexp(static_cast<float>(m), -24);
  }
  if (e == 31) {
    return (sign ? -1.0F : 1.0F) * (m ? NAN : INFINITY);
  }
  const uint32_t bits = sign | ((e + 112) << 23) | (m << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void store(trainit_dtype t, void* base, size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base) + i * dtype_size(t);
  switch (t) {
    case TRAINIT_F32: {
      const auto x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case TRAINIT_F64:
      std::memcpy(p, &v, 8);
      break;
    case TRAINIT_F16: {
      const uint16_t x = to_f16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case TRAINIT_BF16: {
      const auto f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const auto x = static_cast<uint16_t>(u >> 16);  // the values here are exact in bf16
      std::memcpy(p, &x, 2);
      break;
    }
    case TRAINIT_I32: {
      const auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case TRAINIT_I64: {
      const auto x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case TRAINIT_U8: {
      const auto x = static_cast<uint8_t>(static_cast<int>(v));
      std::memcpy(p, &x, 1);
      break;
    }
  }
}

double load(trainit_dtype t, const void* base, size_t i) {
  const auto* p = static_cast<const unsigned char*>(base) + i * dtype_size(t);
  switch (t) {
    case TRAINIT_F32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case TRAINIT_F64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    case TRAINIT_F16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return from_f16(x);
    }
    case TRAINIT_BF16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      const uint32_t u = static_cast<uint32_t>(x) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case TRAINIT_I32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case TRAINIT_I64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case TRAINIT_U8:
      return p[0];
  }
  return 0;
}

// The reference: ranks 0…n-1 folded in double (integers wrapped to the type).
double reference(trainit_dtype t, trainit_op op, int n, size_t i) {
  double acc = value(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    const double v = value(t, op, r, i);
    switch (op) {
      case TRAINIT_SUM:
        acc += v;
        break;
      case TRAINIT_PROD:
        acc *= v;
        break;
      case TRAINIT_MIN:
        acc = std::min(acc, v);
        break;
      case TRAINIT_MAX:
        acc = std::max(acc, v);
        break;
    }
  }
  if (t == TRAINIT_U8) {
    acc = static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(acc)));
  }
  return acc;
}

// Tolerance per type: f16 and bf16 round once at the end (accumulating in
// f32, exact for these values); the others are exact here.
bool close_enough(trainit_dtype t, double got, double want) {
  const double rel = t == TRAINIT_F16 ? 1.0 / 1024 : t == TRAINIT_BF16 ? 1.0 / 128 : 0;
  return std::fabs(got - want) <= rel * std::fabs(want);
}

uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ b[i]) * 1099511628211ULL;
  }
  return h;
}

// A buffer with a chosen misalignment (so no pointer the library sees is
// aligned to its element) and guard bytes after it.
struct Buffer {
  std::vector<unsigned char> bytes;
  size_t shift;
  Buffer(size_t n, size_t misalign) : bytes(n + misalign + 16, 0xa5), shift(misalign) {}
  unsigned char* data() { return bytes.data() + shift; }
};

enum Coll { kAllreduce, kReduce, kReduceScatter, kAllgather, kBroadcast, kColls };
const char* const kCollNames[] = {"allreduce", "reduce", "reduce_scatter", "allgather", "broadcast"};

// Runs one collective on rank r and checks it against the reference; returns
// the output's hash (what every rank must agree on), or exits the child.
uint64_t run_and_check(trainit_comm* comm, Coll coll, trainit_dtype t, trainit_op op, size_t count, bool in_place,
                       int root, size_t misalign, bool arena = false) {
  const int r = trainit_comm_rank(comm);
  const int n = trainit_comm_size(comm);
  const size_t es = dtype_size(t);
  const auto un = static_cast<size_t>(n);
  size_t in_elems = count;
  size_t out_elems = count;
  if (coll == kReduceScatter) {
    in_elems = count * un;
  } else if (coll == kAllgather) {
    out_elems = count * un;
  }
  const size_t buf_elems = std::max(in_elems, out_elems);
  Buffer send_b(buf_elems * es, misalign);
  Buffer recv_b(buf_elems * es, misalign + 1);
  unsigned char* send = send_b.data();
  unsigned char* recv = recv_b.data();
  void* arena_send = nullptr;
  void* arena_recv = nullptr;
  if (arena) {  // buffers from the arena (trainit_alloc): peers read them in place
    arena_send = trainit_alloc(comm, buf_elems * es + 8);
    arena_recv = trainit_alloc(comm, buf_elems * es + 8);
    CHILD_CHECK(arena_send != nullptr && arena_recv != nullptr, "trainit_alloc(%zu) failed", buf_elems * es + 8);
    send = static_cast<unsigned char*>(arena_send) + 1;
    recv = static_cast<unsigned char*>(arena_recv) + 3;
  }
  if (in_place) {
    recv = send;
  }
  // Fill the input: rank r's values (reduce_scatter: n segments).
  for (size_t i = 0; i < in_elems; ++i) {
    const size_t at = (coll == kAllgather && in_place) ? static_cast<size_t>(r) * count + i : i;
    store(t, send, at, value(t, op, r, i));
  }
  int rc = 0;
  switch (coll) {
    case kAllreduce:
      rc = trainit_allreduce(comm, send, recv, count, t, op);
      break;
    case kReduce:
      rc = trainit_reduce(comm, send, r == root || in_place ? recv : nullptr, count, t, op, root);
      break;
    case kReduceScatter:
      rc = trainit_reduce_scatter(comm, send, recv, count, t, op);
      break;
    case kAllgather:
      rc = trainit_allgather(comm, send, recv, count, t);
      break;
    case kBroadcast:
      rc = trainit_broadcast(comm, send, count, t, root);
      recv = send;
      break;
    default:
      break;
  }
  CHILD_CHECK(rc == 0, "%s dtype %d op %d count %zu in_place %d: %s", kCollNames[coll], t, op, count, in_place,
              trainit_strerror(rc));
  const bool has_output = coll != kReduce || r == root;
  uint64_t hash = 0;
  for (size_t i = 0; has_output && i < out_elems; ++i) {
    double want = 0;
    switch (coll) {
      case kAllreduce:
      case kReduce:
        want = reference(t, op, n, i);
        break;
      case kReduceScatter:
        want = reference(t, op, n, static_cast<size_t>(r) * count + i);
        break;
      case kAllgather:
        want = value(t, op, static_cast<int>(i / count), i % count);
        break;
      case kBroadcast:
        want = value(t, op, root, i);
        break;
      default:
        break;
    }
    const double got = load(t, recv, i);
    CHILD_CHECK(close_enough(t, got, want), "%s dtype %d op %d count %zu in_place %d: [%zu] = %g, want %g",
                kCollNames[coll], t, op, count, in_place, i, got, want);
  }
  // reduce_scatter's outputs differ by rank (each has its own segment).
  if (has_output && coll != kReduceScatter) {
    hash = fnv(recv, out_elems * es);
  }
  trainit_free(comm, arena_send);
  trainit_free(comm, arena_recv);
  return hash;
}

// --- the matrix ----------------------------------------------------------------

class CollRanks : public ::testing::TestWithParam<int> {};

// Every collective × type × op × in/out of place × counts {0, 1, 7, 4097}
// (the LL, one-shot and odd-tail paths) on 1, 2, 3, 4 and 8 ranks.
TEST_P(CollRanks, EveryCollectiveTypeOpAndSmallCountMatchesTheReferenceAndIsBitwiseEqualOnEveryRank) {
  const int n = GetParam();
  constexpr size_t kCounts[] = {0, 1, 7, 4097};
  constexpr size_t kMaxCalls = 2048;
  Shared hashes(kMaxCalls * 8 * sizeof(uint64_t) + 8);
  auto* h = hashes.as<uint64_t>();
  const auto status = run_ranks(n, [&](trainit_comm* comm, int r) {
    size_t call = 0;
    for (int coll = 0; coll < kColls; ++coll) {
      for (trainit_dtype t : kAllTypes) {
        for (trainit_op op : kAllOps) {
          if ((coll == kAllgather || coll == kBroadcast) && op != TRAINIT_SUM) {
            continue;  // no op: once per type
          }
          for (size_t count : kCounts) {
            for (bool in_place : {false, true}) {
              const int root = static_cast<int>(call % static_cast<size_t>(n));
              const uint64_t hash =
                  run_and_check(comm, static_cast<Coll>(coll), t, op, count, in_place, root, call % 3);
              h[call * 8 + static_cast<size_t>(r)] = hash;
              ++call;
            }
          }
        }
      }
    }
    if (r == 0) {
      h[kMaxCalls * 8] = call;
    }
    return 0;
  });
  expect_all_exit(status, 0);
  const size_t calls = h[kMaxCalls * 8];
  ASSERT_GT(calls, 0U);
  for (size_t c = 0; c < calls; ++c) {
    for (int r = 1; r < n; ++r) {
      if (h[c * 8 + static_cast<size_t>(r)] != 0 && h[c * 8] != 0) {
        EXPECT_EQ(h[c * 8 + static_cast<size_t>(r)], h[c * 8]) << "call " << c << " rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollRanks, ::testing::Values(1, 2, 3, 4, 8));

// A large count, 3 × 128 Ki + 3: over one 512 KiB chunk for every type
// (bf16: 2 chunks, f32: 4, i64: 7), so the pipelined reduce-scatter +
// allgather path, its last short chunk, and the zero-copy path from
// trainit_alloc buffers all run (1 Mi + 3 ran the same paths with 2.7 times
// the bytes: minutes under TSan and qemu):
// every collective, in and out of place, for f32, bf16 and i64 with sum and
// max, on 2, 3 and 4 ranks (the full type matrix runs at the small counts;
// 8 ranks here would take minutes on 2 cores).
class CollLarge : public ::testing::TestWithParam<int> {};

TEST_P(CollLarge, LargeCountsPipelinedAndZeroCopyMatchTheReferenceOnEveryRank) {
  const int n = GetParam();
  constexpr size_t kCount = 3 * (size_t{1} << 17) + 3;
  static_assert(kCount * 2 > trainit::coll::kChunkBytes && kCount * 2 % trainit::coll::kChunkBytes != 0,
                "bf16, the smallest type here, takes the chunked path and ends with a short chunk");
  Shared hashes(256 * 8 * sizeof(uint64_t));
  auto* h = hashes.as<uint64_t>();
  // Room for f32 send and recv buffers of n × kCount in every rank's share.
  const size_t heap = static_cast<size_t>(n) * (2 * static_cast<size_t>(n) * 4 * kCount + (1U << 20));
  ::setenv("TRAINIT_COLL_HEAP", std::to_string(heap).c_str(), 1);
  const auto status = run_ranks(
      n,
      [&](trainit_comm* comm, int r) {
        size_t call = 0;
        for (int coll = 0; coll < kColls; ++coll) {
          for (trainit_dtype t : {TRAINIT_F32, TRAINIT_BF16, TRAINIT_I64}) {
            for (trainit_op op : {TRAINIT_SUM, TRAINIT_MAX}) {
              if ((coll == kAllgather || coll == kBroadcast) && op != TRAINIT_SUM) {
                continue;
              }
              for (bool in_place : {false, true}) {
                for (bool arena : {false, true}) {
                  if (arena && t != TRAINIT_F32) {
                    continue;  // zero copy: f32 only, to keep the arena small
                  }
                  const int root = static_cast<int>(call % static_cast<size_t>(n));
                  const uint64_t zero_copy_before = comm->zero_copy_calls;
                  h[call * 8 + static_cast<size_t>(r)] =
                      run_and_check(comm, static_cast<Coll>(coll), t, op, kCount, in_place, root, call % 3, arena);
                  // Arena buffers are read in place (except reduce_scatter in place, whose
                  // output overlaps its input); ordinary ones never are.
                  const bool expect_zero_copy = arena && !(coll == kReduceScatter && in_place);
                  CHILD_CHECK(comm->zero_copy_calls - zero_copy_before == (expect_zero_copy ? 1U : 0U),
                              "%s in_place %d arena %d: zero copy %s", kCollNames[coll], in_place, arena,
                              expect_zero_copy ? "not taken" : "taken");
                  ++call;
                }
              }
            }
          }
        }
        return 0;
      },
      180);  // 10 s here; sanitizers and qemu take several times that
  ::unsetenv("TRAINIT_COLL_HEAP");
  expect_all_exit(status, 0);
  for (size_t c = 0; c < 256; ++c) {
    for (int r = 1; r < n; ++r) {
      if (h[c * 8] != 0 && h[c * 8 + static_cast<size_t>(r)] != 0) {
        EXPECT_EQ(h[c * 8 + static_cast<size_t>(r)], h[c * 8]) << "call " << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollLarge, ::testing::Values(2, 3, 4));

// --- kernels -------------------------------------------------------------------

// Every kernel this CPU runs (AVX-512, AVX2, SSE2 or NEON) gives the scalar
// kernel's bytes for every type and op, 1-5 inputs, every tail length and
// misaligned pointers, on random inputs (f16/bf16 over their whole finite
// range, subnormals included).
TEST(CollKernels, EveryVectorKernelIsBitwiseTheScalarOneForEveryTypeOpAndTail) {
  const trainit::coll::Kernels* scalar = trainit::coll::kernels_by_name("scalar");
  ASSERT_NE(scalar, nullptr);
  std::vector<const trainit::coll::Kernels*> tables;
  for (const char* name : {"sse2", "neon", "avx2", "avx512"}) {
    if (const auto* k = trainit::coll::kernels_by_name(name)) {
      tables.push_back(k);
    }
  }
  ASSERT_FALSE(tables.empty());
  std::mt19937_64 rng(12);
  constexpr size_t kMax = 300;
  for (int t = 0; t < trainit::coll::kDtypes; ++t) {
    const size_t es = dtype_size(t);
    for (int op = 0; op < trainit::coll::kOps; ++op) {
      for (int n = 1; n <= 5; ++n) {
        std::vector<std::vector<unsigned char>> in(static_cast<size_t>(n), std::vector<unsigned char>(kMax * es + 3));
        for (auto& v : in) {
          for (size_t i = 0; i < kMax; ++i) {
            uint64_t bits = rng();
            if (t == TRAINIT_F32) {
              const float f = std::ldexp(static_cast<float>(static_cast<int>(bits % 2001) - 1000),
                                         static_cast<int>(bits >> 40) % 20 - 10);
              std::memcpy(&v[1 + i * es], &f, 4);
            } else if (t == TRAINIT_F64) {
              const double d = std::ldexp(static_cast<double>(static_cast<int>(bits % 2001) - 1000),
                                          static_cast<int>(bits >> 40) % 40 - 20);
              std::memcpy(&v[1 + i * es], &d, 8);
            } else if (t == TRAINIT_F16 || t == TRAINIT_BF16) {
              auto h = static_cast<uint16_t>(bits);
              const uint16_t exp_mask = t == TRAINIT_F16 ? 0x7c00 : 0x7f80;
              if ((h & exp_mask) == exp_mask) {
                h = static_cast<uint16_t>(h & ~0x4000);  // finite
              }
              std::memcpy(&v[1 + i * es], &h, 2);
            } else {
              std::memcpy(&v[1 + i * es], &bits, es);
            }
          }
        }
        std::vector<const void*> ins;
        for (auto& v : in) {
          ins.push_back(v.data() + 1);
        }
        for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{15}, size_t{16}, size_t{17}, size_t{31},
                             size_t{33}, size_t{64}, size_t{65}, size_t{129}, kMax}) {
          std::vector<unsigned char> want(count * es + 1);
          scalar->fold[t][op](want.data() + 1, ins.data(), n, count);
          for (const auto* k : tables) {
            std::vector<unsigned char> got(count * es + 2);
            k->fold[t][op](got.data() + 2, ins.data(), n, count);
            ASSERT_EQ(0, std::memcmp(got.data() + 2, want.data() + 1, count * es))
                << k->name << " dtype " << t << " op " << op << " n " << n << " count " << count;
          }
          // In place: the output is the first input.
          std::vector<unsigned char> first(in[0]);
          std::vector<const void*> ins_in_place(ins);
          ins_in_place[0] = first.data() + 1;
          tables.back()->fold[t][op](first.data() + 1, ins_in_place.data(), n, count);
          ASSERT_EQ(0, std::memcmp(first.data() + 1, want.data() + 1, count * es)) << "in place, dtype " << t;
        }
      }
    }
  }
}

// f16: every finite half survives f16 → f32 → f16 unchanged, and f32 → f16
// rounds to nearest even (checked against the exact halfway cases).
TEST(CollKernels, HalfConversionsRoundTripAndRoundToNearestEven) {
  const auto* scalar = trainit::coll::kernels_by_name("scalar");
  std::vector<uint16_t> all;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) != 0x7c00) {
      all.push_back(static_cast<uint16_t>(h));
    }
  }
  std::vector<uint16_t> out(all.size());
  const void* one[1] = {all.data()};
  scalar->fold[TRAINIT_F16][TRAINIT_SUM](out.data(), one, 1, all.size());
  EXPECT_EQ(all, out);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1); 1 + 3·2^-11 goes up.
  uint16_t a = 0x3c00;  // 1
  uint16_t b = 0x1000;  // 2^-11
  uint16_t r = 0;
  const void* two[2] = {&a, &b};
  scalar->fold[TRAINIT_F16][TRAINIT_SUM](&r, two, 2, 1);
  EXPECT_EQ(r, 0x3c00);
  b = 0x1200;  // 1.5 · 2^-11: above halfway
  scalar->fold[TRAINIT_F16][TRAINIT_SUM](&r, two, 2, 1);
  EXPECT_EQ(r, 0x3c01);
  a = 0x3c01;  // 1 + 2^-10, odd: the tie goes up to even
  b = 0x1000;
  scalar->fold[TRAINIT_F16][TRAINIT_SUM](&r, two, 2, 1);
  EXPECT_EQ(r, 0x3c02);
}

// --- sequences, misuse, failures --------------------------------------------------

// 400 collectives of random kinds, types, ops, roots and sizes (0 … 300 Ki
// elements, every algorithm), the same sequence on every rank, each checked.
TEST(CollSequences, RandomMixedCollectivesAllMatchTheReference) {
  for (int n : {2, 3, 4}) {
    const auto status = run_ranks(
        n,
        [&](trainit_comm* comm, int) {
          std::mt19937_64 rng(static_cast<uint64_t>(n) * 77);
          for (int i = 0; i < 400; ++i) {
            const auto coll = static_cast<Coll>(rng() % kColls);
            const trainit_dtype t = kAllTypes[rng() % 7];
            const trainit_op op = kAllOps[rng() % 4];
            const uint64_t pick = rng() % 4;
            const size_t count = pick == 0   ? rng() % 8
                                 : pick == 1 ? rng() % 200
                                 : pick == 2 ? rng() % 20000
                                             : rng() % 300000;
            const bool in_place = (rng() & 1) != 0;
            const int root = static_cast<int>(rng() % static_cast<uint64_t>(n));
            const bool arena = (rng() % 4) == 0 && t == TRAINIT_F32;
            if (i % 50 == 0) {
              CHILD_CHECK(trainit_barrier(comm) == 0, "barrier");
            }
            (void)run_and_check(comm, coll, t, op, count, in_place, root, rng() % 4, arena);
          }
          return 0;
        },
        120);
    expect_all_exit(status, 0);
  }
}

// Ranks that disagree (count, kind, a null buffer or a bad root on one rank)
// all get -EINVAL after the same single step, and the next call works.
TEST(CollMisuse, DisagreeingRanksAllGetEinvalAndStayInStep) {
  for (int n : {2, 3}) {
    const auto status = run_ranks(
        n,
        [](trainit_comm* comm, int r) {
          std::vector<float> a(300000, 1.0F);
          std::vector<float> b(300000);
          // Count mismatch within one algorithm, and across algorithms (LL vs pipelined).
          CHILD_CHECK(trainit_allreduce(comm, a.data(), b.data(), r == 0 ? 5 : 6, TRAINIT_F32, TRAINIT_SUM) == -EINVAL,
                      "5/6");
          CHILD_CHECK(
              trainit_allreduce(comm, a.data(), b.data(), r == 0 ? 3 : 300000, TRAINIT_F32, TRAINIT_SUM) == -EINVAL,
              "3/300000");
          CHILD_CHECK(trainit_allgather(comm, a.data(), b.data(), r == 0 ? 1000 : 3, TRAINIT_F32) == -EINVAL,
                      "allgather");
          // A barrier against an allreduce.
          const int rc =
              r == 0 ? trainit_barrier(comm) : trainit_allreduce(comm, a.data(), b.data(), 4, TRAINIT_F32, TRAINIT_SUM);
          CHILD_CHECK(rc == -EINVAL, "barrier vs allreduce: %d", rc);
          // A null pointer with a count on one rank only.
          CHILD_CHECK(
              trainit_allreduce(comm, r == 1 ? nullptr : a.data(), b.data(), 100, TRAINIT_F32, TRAINIT_SUM) == -EINVAL,
              "null send");
          CHILD_CHECK(trainit_broadcast(comm, r == 1 ? nullptr : a.data(), 100, TRAINIT_F32, 0) == -EINVAL, "null buf");
          // Bad root, dtype, op on every rank, or on one.
          CHILD_CHECK(trainit_reduce(comm, a.data(), b.data(), 10, TRAINIT_F32, TRAINIT_SUM, 99) == -EINVAL, "root 99");
          CHILD_CHECK(trainit_broadcast(comm, a.data(), 10, TRAINIT_F32, -1) == -EINVAL, "root -1");
          CHILD_CHECK(trainit_allreduce(comm, a.data(), b.data(), 10, static_cast<trainit_dtype>(r == 0 ? 9 : 0),
                                        TRAINIT_SUM) == -EINVAL,
                      "dtype");
          CHILD_CHECK(
              trainit_allreduce(comm, a.data(), b.data(), 10, TRAINIT_F32, static_cast<trainit_op>(7)) == -EINVAL,
              "op");
          // Still in step: a real allreduce of every size class.
          for (size_t count : {size_t{3}, size_t{1000}, size_t{300000}}) {
            CHILD_CHECK(trainit_allreduce(comm, a.data(), b.data(), count, TRAINIT_F32, TRAINIT_SUM) == 0, "after");
            CHILD_CHECK(b[count - 1] == static_cast<float>(trainit_comm_size(comm)), "value %g", b[count - 1]);
          }
          return 0;
        },
        30);
    expect_all_exit(status, 0);
  }
}

TEST(CollMisuse, BadArgumentsOutsideACommunicatorAreEinval) {
  trainit_comm* comm = reinterpret_cast<trainit_comm*>(1);
  EXPECT_EQ(trainit_comm_init(&comm, "x", 2, 2), -EINVAL);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(trainit_comm_init(&comm, "x", 0, 0), -EINVAL);
  EXPECT_EQ(trainit_comm_init(&comm, nullptr, 0, 1), -EINVAL);
  EXPECT_EQ(trainit_comm_init(&comm, "", 0, 1), -EINVAL);
  EXPECT_EQ(trainit_comm_init(nullptr, "x", 0, 1), -EINVAL);
  EXPECT_EQ(trainit_comm_init(&comm, std::string(200, 'n').c_str(), 0, 2), -ENAMETOOLONG);
  float x = 0;
  EXPECT_EQ(trainit_allreduce(nullptr, &x, &x, 1, TRAINIT_F32, TRAINIT_SUM), -EINVAL);
  EXPECT_EQ(trainit_barrier(nullptr), -EINVAL);
  EXPECT_EQ(trainit_comm_rank(nullptr), -EINVAL);
  EXPECT_EQ(trainit_comm_destroy(nullptr), 0);
  EXPECT_EQ(trainit_alloc(nullptr, 10), nullptr);
  EXPECT_STRNE(trainit_strerror(-ECONNABORTED), trainit_strerror(-EINVAL));
}

// A rank joining with another size than rank 0's, or a rank number already
// taken, is refused (-EINVAL) instead of joining; nobody hangs.
TEST(CollJoin, AMismatchedSizeIsRefused) {
  const std::string name = unique_name();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    ::setenv("TRAINIT_COLL_TIMEOUT", "1", 1);
    trainit_comm* c = nullptr;
    _exit(trainit_comm_init(&c, name.c_str(), 1, 3) == -EINVAL ? 0 : 1);
  }
  ::setenv("TRAINIT_COLL_TIMEOUT", "1", 1);
  trainit_comm* c = nullptr;
  const int64_t start = now_ns();
  EXPECT_EQ(trainit_comm_init(&c, name.c_str(), 0, 2), -ETIMEDOUT);
  EXPECT_LT(now_ns() - start, 3'000'000'000);
  ::unsetenv("TRAINIT_COLL_TIMEOUT");
  int ws = 0;
  ASSERT_EQ(waitpid(pid, &ws, 0), pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

// Without rank 0, a joining rank gives up at TRAINIT_COLL_TIMEOUT.
TEST(CollJoin, ARankWithoutRankZeroTimesOut) {
  ::setenv("TRAINIT_COLL_TIMEOUT", "0.3", 1);
  trainit_comm* c = nullptr;
  const int64_t start = now_ns();
  EXPECT_EQ(trainit_comm_init(&c, unique_name().c_str(), 1, 2), -ETIMEDOUT);
  const int64_t took = now_ns() - start;
  ::unsetenv("TRAINIT_COLL_TIMEOUT");
  EXPECT_GE(took, 250'000'000);
  EXPECT_LT(took, 2'000'000'000);
}

// The arena's descriptor reaches the rank trainit started (kept across its
// exec); once that rank joins, nothing it execs afterwards inherits it.
TEST(CollEnv, JoiningMakesTheArenaDescriptorCloseOnExec) {
  constexpr int kN = 2;
  const size_t size = trainit::coll::coll_arena_size(kN, 0);
  const int fd = memfd_create("test-arena", 0);  // as trainit hands it over: no FD_CLOEXEC
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  ASSERT_EQ(trainit::coll::coll_arena_format(base, size, kN, 7), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    ::setenv("TRAINIT_COLL_FD", std::to_string(fd).c_str(), 1);
    ::setenv("TRAINIT_LOCAL_SIZE", "2", 1);
    ::setenv("TRAINIT_LOCAL_RANK", "0", 1);
    ::unsetenv("TRAINIT_COLL_ID");
    const bool inherited_before = (fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0;
    trainit_comm* c = nullptr;
    if (trainit_comm_init_from_env(&c) != 0) {
      _exit(2);
    }
    const bool cloexec_after = (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
    _exit(inherited_before && cloexec_after ? 0 : 3);
  }
  int ws = 0;
  ASSERT_EQ(waitpid(pid, &ws, 0), pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << "exit " << WEXITSTATUS(ws) << ": 3 is an inheritable fd";
  munmap(base, size);
  close(fd);
}

// Ranks started by trainit map the arena from TRAINIT_COLL_FD; a missing or
// bad variable, or an fd that is no arena, is an error, not a crash.
TEST(CollEnv, RanksJoinAnArenaFromTheEnvironmentAndBadVariablesAreEinval) {
  ::unsetenv("TRAINIT_COLL_FD");
  trainit_comm* c = nullptr;
  EXPECT_EQ(trainit_comm_init_from_env(&c), -EINVAL);
  constexpr int kN = 3;
  const size_t size = trainit::coll::coll_arena_size(kN, 1 << 20);
  ASSERT_GT(size, 0U);
  const int fd = memfd_create("test-arena", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  ::setenv("TRAINIT_COLL_FD", std::to_string(fd).c_str(), 1);
  ::setenv("TRAINIT_LOCAL_SIZE", "3", 1);
  ::setenv("TRAINIT_LOCAL_RANK", "0", 1);
  EXPECT_EQ(trainit_comm_init_from_env(&c), -EPROTO);  // not formatted yet
  ASSERT_EQ(trainit::coll::coll_arena_format(base, size, kN, 42), 0);
  ::setenv("TRAINIT_LOCAL_RANK", "3", 1);
  EXPECT_EQ(trainit_comm_init_from_env(&c), -EINVAL);
  ::setenv("TRAINIT_LOCAL_RANK", "x", 1);
  EXPECT_EQ(trainit_comm_init_from_env(&c), -EINVAL);
  ::setenv("TRAINIT_LOCAL_SIZE", "4", 1);
  ::setenv("TRAINIT_LOCAL_RANK", "0", 1);
  EXPECT_EQ(trainit_comm_init_from_env(&c), -EINVAL);  // the arena holds 3
  ::setenv("TRAINIT_LOCAL_SIZE", "3", 1);
  ::setenv("TRAINIT_COLL_ID", "000000000000002b", 1);  // another job's arena
  EXPECT_EQ(trainit_comm_init_from_env(&c), -EPROTO);
  ::setenv("TRAINIT_COLL_ID", "000000000000002a", 1);  // this one's: 42
  std::vector<pid_t> pids;
  for (int r = 0; r < kN; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(20);
      ::setenv("TRAINIT_LOCAL_RANK", std::to_string(r).c_str(), 1);
      trainit::coll::Comm comm;
      if (comm.init_from_env() != 0 || comm.rank() != r || comm.size() != kN) {
        _exit(2);
      }
      int64_t v = r + 1;
      int64_t sum = 0;
      for (int i = 0; i < 100; ++i) {
        if (comm.allreduce(&v, &sum, 1, TRAINIT_I64, TRAINIT_SUM) != 0 || sum != 6) {
          _exit(3);
        }
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int ws = 0;
    ASSERT_EQ(waitpid(pid, &ws, 0), pid);
    EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << ws;
  }
  trainit::coll::CollProgress progress{};
  ASSERT_EQ(trainit::coll::coll_arena_progress(base, 3, 2, &progress), 0);
  EXPECT_EQ(progress.completed, 100U);
  EXPECT_EQ(progress.op, trainit::coll::kOpNone);
  EXPECT_EQ(trainit::coll::coll_arena_progress(base, 3, 3, &progress), -EINVAL);
  ::unsetenv("TRAINIT_COLL_FD");
  ::unsetenv("TRAINIT_LOCAL_SIZE");
  ::unsetenv("TRAINIT_LOCAL_RANK");
  ::unsetenv("TRAINIT_COLL_ID");
  munmap(base, size);
  close(fd);
}

// The init's abort: every rank waiting in a collective returns -ECONNABORTED
// at once, and every later call too.
TEST(CollAbort, MarkingTheArenaAbortedWakesEveryWaiterWithEconnaborted) {
  constexpr int kN = 3;
  const size_t size = trainit::coll::coll_arena_size(kN, 0);
  const int fd = memfd_create("test-arena", 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_EQ(trainit::coll::coll_arena_format(base, size, kN, 1), 0);
  Shared times(sizeof(int64_t) * 8);
  auto* t = times.as<int64_t>();
  ::setenv("TRAINIT_COLL_FD", std::to_string(fd).c_str(), 1);
  ::setenv("TRAINIT_LOCAL_SIZE", "3", 1);
  std::vector<pid_t> pids;
  for (int r = 0; r < kN - 1; ++r) {  // rank 2 never comes
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(20);
      ::setenv("TRAINIT_LOCAL_RANK", std::to_string(r).c_str(), 1);
      trainit_comm* c = nullptr;
      if (trainit_comm_init_from_env(&c) != 0) {
        _exit(2);
      }
      const int rc = trainit_barrier(c);
      t[r] = now_ns();
      _exit(rc == -ECONNABORTED && trainit_barrier(c) == -ECONNABORTED ? 0 : 1);
    }
    pids.push_back(pid);
  }
  usleep(200'000);  // both asleep on the futex by now
  // What the init's hang detection reads: which call, since when, how many done.
  for (int r = 0; r < kN - 1; ++r) {
    trainit::coll::CollProgress progress{};
    ASSERT_EQ(trainit::coll::coll_arena_progress(base, kN, r, &progress), 0);
    EXPECT_EQ(progress.op, trainit::coll::kOpBarrier) << "rank " << r;
    EXPECT_EQ(progress.completed, 0U);
    EXPECT_GT(progress.pid, 0);
    EXPECT_GE(now_ns() - static_cast<int64_t>(progress.start_ns), 150'000'000) << "rank " << r;
  }
  const int64_t aborted_at = now_ns();
  trainit::coll::coll_arena_abort(base, kN);
  for (size_t r = 0; r < pids.size(); ++r) {
    int ws = 0;
    ASSERT_EQ(waitpid(pids[r], &ws, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << ws;
    EXPECT_LT(t[r] - aborted_at, 100'000'000) << "rank " << r;
  }
  ::unsetenv("TRAINIT_COLL_FD");
  ::unsetenv("TRAINIT_LOCAL_SIZE");
  munmap(base, size);
  close(fd);
}

// Standalone, nobody watches: a rank SIGKILLed while its peers are inside a
// collective (asleep, spinning or moving data) → every other rank gets
// -ECONNABORTED within 100 ms of the kill, measured.
class CollPeerDeath : public ::testing::TestWithParam<int> {};

TEST_P(CollPeerDeath, ARankKilledMidCollectiveGivesEveryOtherRankEconnabortedWithin100ms) {
  const int n = GetParam();
  Shared shared(sizeof(int64_t) * 32);
  auto* t = shared.as<std::atomic<int64_t>>();
  // t[0]: the kill's time; t[1 + r]: when rank r's call returned; t[16 + r]: its result;
  // t[30]: ranks inside their loop.
  const int victim = n - 1;
  const auto status = run_ranks(
      n,
      [&](trainit_comm* comm, int r) {
        std::vector<float> a(1 << 20, 1.0F);
        std::vector<float> b(1 << 20);
        t[30].fetch_add(1);
        int rc = 0;
        // Collectives of every size, back to back, until one fails.
        for (size_t i = 0; rc == 0; ++i) {
          const size_t count = (i % 3 == 0) ? 1 : (i % 3 == 1) ? 10000 : (1 << 20);
          rc = trainit_allreduce(comm, a.data(), b.data(), count, TRAINIT_F32, TRAINIT_SUM);
        }
        t[1 + r] = now_ns();
        t[16 + r] = rc;
        return r == victim ? 9 : 0;
      },
      30,
      [&](const std::vector<pid_t>& pids) {
        while (t[30].load() < n) {
          usleep(1000);
        }
        usleep(300'000);  // well inside the loop
        t[0] = now_ns();
        kill(pids[static_cast<size_t>(victim)], SIGKILL);
      });
  for (int r = 0; r < n; ++r) {
    if (r == victim) {
      EXPECT_EQ(status[r], 128 + SIGKILL);
      continue;
    }
    EXPECT_EQ(status[r], 0) << "rank " << r;
    EXPECT_EQ(t[16 + r].load(), -ECONNABORTED) << "rank " << r;
    const int64_t latency = t[1 + r] - t[0];
    EXPECT_LE(latency, 100'000'000) << "rank " << r << " took " << latency / 1000 << " µs";
    std::printf("rank %d saw -ECONNABORTED %.2f ms after the kill\n", r, static_cast<double>(latency) / 1e6);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollPeerDeath, ::testing::Values(2, 4));

// With TRAINIT_COLL_TIMEOUT, a collective a peer never joins returns
// -ETIMEDOUT on time; the arena is then aborted, so the late peer gets
// -ECONNABORTED instead of waiting out its own deadline.
TEST(CollTimeout, ACollectiveAPeerNeverJoinsTimesOut) {
  Shared shared(sizeof(int64_t) * 4);
  auto* t = shared.as<int64_t>();
  ::setenv("TRAINIT_COLL_TIMEOUT", "0.3", 1);
  const auto status = run_ranks(
      2,
      [&](trainit_comm* comm, int r) {
        if (r == 1) {
          usleep(800'000);
          return trainit_barrier(comm) == -ECONNABORTED ? 0 : 1;
        }
        const int64_t start = now_ns();
        const int rc = trainit_barrier(comm);
        t[0] = now_ns() - start;
        return rc == -ETIMEDOUT ? 0 : 2;
      },
      20);
  ::unsetenv("TRAINIT_COLL_TIMEOUT");
  expect_all_exit(status, 0);
  EXPECT_GE(t[0], 290'000'000);
  EXPECT_LT(t[0], 700'000'000);
}

// trainit_alloc: buffers come from the rank's own share of the arena heap,
// do not overlap, are reused after trainit_free, and run out cleanly.
TEST(CollAlloc, ArenaBuffersAreDistinctReusableAndRunOutCleanly) {
  ::setenv("TRAINIT_COLL_HEAP", "1048576", 1);
  trainit::coll::Comm comm;
  ASSERT_EQ(comm.init(unique_name().c_str(), 0, 1), 0);
  ::unsetenv("TRAINIT_COLL_HEAP");
  auto* a = static_cast<unsigned char*>(comm.alloc(1000));
  auto* b = static_cast<unsigned char*>(comm.alloc(3));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b >= a + 1000 || a >= b + 3);
  std::memset(a, 1, 1000);
  std::memset(b, 2, 3);
  EXPECT_EQ(comm.alloc(2 << 20), nullptr);
  comm.free(a);
  void* c = comm.alloc(900);
  EXPECT_EQ(c, a);
  comm.free(b);
  comm.free(c);
  void* big = comm.alloc((1 << 20) - 4096);
  EXPECT_NE(big, nullptr) << "freed blocks merge back into one";
  comm.free(big);
  EXPECT_EQ(comm.alloc(0), nullptr);
}

// 4 ranks on this machine's cores (2 here): 20,000 small allreduces finish in
// seconds; a stall per call on scheduler ticks (4 ms) would take 80 s.
TEST(CollOversubscribed, FourRanksOnFewCoresRunSmallCollectivesWithoutTickStalls) {
  TRAINIT_SKIP_UNDER_EMULATION("qemu-user runs the ranks tens of times slower; the bound is about real cores");
  Shared shared(sizeof(int64_t) * 4);
  auto* t = shared.as<int64_t>();
  const auto status = run_ranks(
      4,
      [&](trainit_comm* comm, int r) {
        float x = 1;
        float y = 0;
        const int64_t start = now_ns();
        for (int i = 0; i < 20000; ++i) {
          if (trainit_allreduce(comm, &x, &y, 1, TRAINIT_F32, TRAINIT_SUM) != 0 || y != 4) {
            return 1;
          }
        }
        if (r == 0) {
          t[0] = now_ns() - start;
        }
        return 0;
      },
      60);
  expect_all_exit(status, 0);
  std::printf("20000 4-byte allreduces on 4 ranks: %.2f µs each\n", static_cast<double>(t[0]) / 20000 / 1000);
  EXPECT_LT(t[0], 10'000'000'000);
}

// Oversubscription is judged from every rank's CPUs together, not from a
// rank's own affinity: ranks pinned one to a CPU each poll for their peers
// (they each have a core), ranks pinned to one CPU together yield it.
TEST(CollOversubscribed, RanksPinnedToACpuEachAreNotOversubscribedAndRanksSharingOneAre) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      cpus.push_back(cpu);
    }
  }
  if (cpus.size() < 2) {
    GTEST_SKIP() << "one CPU: nothing to pin apart";
  }
  for (const bool apart : {true, false}) {
    Shared shared(sizeof(int) * 2);
    auto* oversubscribed = shared.as<int>();
    // Pinned before joining: a rank publishes its CPUs when it joins.
    const std::string name = unique_name();
    std::vector<pid_t> pids;
    for (int r = 0; r < 2; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        alarm(30);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[apart ? static_cast<size_t>(r) : 0], &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) {
          _exit(2);
        }
        trainit_comm* comm = nullptr;
        if (trainit_comm_init(&comm, name.c_str(), r, 2) != 0 || trainit_barrier(comm) != 0) {
          _exit(3);
        }
        oversubscribed[r] = comm->oversubscribed ? 1 : 0;
        trainit_comm_destroy(comm);
        _exit(0);
      }
      pids.push_back(pid);
    }
    for (const pid_t pid : pids) {
      int ws = 0;
      ASSERT_EQ(waitpid(pid, &ws, 0), pid);
      ASSERT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << "status " << ws;
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(oversubscribed[r], apart ? 0 : 1) << "rank " << r << (apart ? ", pinned apart" : ", pinned together");
    }
  }
}

// A chunked call hands its data over as rank 0 picks (plain or streaming
// stores), on every rank, and gives the same bytes either way.
TEST(CollLarge, ChunkedCallsFollowRankZerosHandoverAndGiveTheSameResultEitherWay) {
  constexpr size_t kCount = (3U << 18) + 5;  // 3 MiB of f32 and a tail: 7 chunks
  Shared shared(sizeof(int) * 2 * 3);
  auto* followed = shared.as<int>();
  const auto status = run_ranks(3, [&](trainit_comm* comm, int r) {
    std::vector<float> x(kCount);
    for (int way = 0; way < 2; ++way) {
      // Rank 0 asks for one way, the others for the other: rank 0's wins.
      comm->handover_forced = r == 0 ? way : 1 - way;
      for (size_t i = 0; i < kCount; ++i) {
        x[i] = static_cast<float>((i * 7 + static_cast<size_t>(r)) % 1000);
      }
      CHILD_CHECK(trainit_allreduce(comm, x.data(), x.data(), kCount, TRAINIT_F32, TRAINIT_SUM) == 0, "way %d", way);
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (size_t p = 0; p < 3; ++p) {
          want += static_cast<float>((i * 7 + p) % 1000);
        }
        CHILD_CHECK(x[i] == want, "way %d: [%zu] = %g, want %g", way, i, x[i], want);
      }
      followed[static_cast<size_t>(r) * 2 + static_cast<size_t>(way)] = comm->stream_handover ? 1 : 0;
    }
    return 0;
  });
  expect_all_exit(status, 0);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(followed[r * 2], 0) << "rank " << r << " when rank 0 picked plain stores";
    EXPECT_EQ(followed[r * 2 + 1], 1) << "rank " << r << " when rank 0 picked streaming stores";
  }
}

// Rank 0's choice of hand-over, driven by a model of a VM whose host moves
// its vCPUs: each call costs what its way costs where the cores sit now
// (µs a 1 MiB call; the figures bench_coll --handover both measured on a
// 2-vCPU EPYC VM). Returns whether the call streamed.
class HandoverModel {
 public:
  HandoverModel() { c_.handover_forced = -1; }

  // The call's cost is the model's alone, whatever the clock did between
  // (a preemption, a sanitizer, an emulator).
  bool call(double plain_us, double stream_us) {
    const trainit::coll::Handover h = trainit::coll::choose_handover(&c_);
    const auto cost = static_cast<int64_t>((h.stream ? stream_us : plain_us) * 1000);
    trainit::coll::learn_handover(&c_, h, size_t{1} << 20, h.start_ns + cost);
    return h.stream;
  }

  // How many of `calls` calls streamed.
  int streamed(int calls, double plain_us, double stream_us) {
    int n = 0;
    for (int i = 0; i < calls; ++i) {
      n += call(plain_us, stream_us) ? 1 : 0;
    }
    return n;
  }

 private:
  trainit_comm c_{};
};

constexpr double kFarPlain = 490;  // cores that reach each other slowly: streaming stores win
constexpr double kFarStream = 84;
constexpr double kMiddlePlain = 60;  // cores nearer: plain stores win
constexpr double kMiddleStream = 120;

// After a move that makes the way rank 0 had left the cheaper one, the
// first try of it is believed: plain stores stay chosen from then on (but
// for tries of streaming), where a figure averaged with the one from before
// the move kept them out for hundreds of calls.
TEST(CollHandover, AfterTheCoresMoveTheFirstTryOfTheNowCheaperWayIsBelieved) {
  HandoverModel m;
  (void)m.streamed(1000, kFarPlain, kFarStream);
  int first_plain = -1;
  for (int i = 0; i < 512 && first_plain < 0; ++i) {
    first_plain = m.call(kMiddlePlain, kMiddleStream) ? -1 : i;
  }
  ASSERT_GE(first_plain, 0) << "plain stores never tried in 512 calls after the move";
  EXPECT_EQ(m.streamed(32, kMiddlePlain, kMiddleStream), 0) << "the 32 calls after plain stores were tried";
  EXPECT_LE(m.streamed(512, kMiddlePlain, kMiddleStream), 512 / 32) << "512 calls later";
}

// After a move that makes the chosen way ten times dearer, the other is
// taken within a few calls, without waiting for its next try.
TEST(CollHandover, AfterTheCoresMoveTheChosenWayTurningDearerIsLeftWithinTenCalls) {
  HandoverModel m;
  (void)m.streamed(300, 49, 100);  // near: plain stores win
  int first_stream = -1;
  for (int i = 0; i < 64 && first_stream < 0; ++i) {
    first_stream = m.call(kFarPlain, kFarStream) ? i : -1;
  }
  EXPECT_GE(first_stream, 0);
  EXPECT_LE(first_stream, 10);
  EXPECT_GE(m.streamed(256, kFarPlain, kFarStream), 256 - 2) << "of the 256 calls after";
}

// A call or two much slower than the rest (the first after the caches were
// left to other work, a preemption) does not hand the calls after it to the
// dearer way: with plain stores at 60 µs and streaming at 120, the first 2
// calls of every 32 at four times the cost (as after a training step's
// compute) left whole runs of calls to streaming stores, until the next try.
TEST(CollHandover, TwoSlowCallsInARowDoNotHandTheCallsAfterThemToTheDearerWay) {
  HandoverModel m;
  (void)m.streamed(64, kMiddlePlain, kMiddleStream);
  int streamed = 0;
  for (int block = 0; block < 32; ++block) {
    streamed += m.streamed(2, 4 * kMiddlePlain, kMiddleStream);
    streamed += m.streamed(30, kMiddlePlain, kMiddleStream);
  }
  EXPECT_LE(streamed, 1024 / 64 + 1) << "of 1024 calls, where only tries of streaming stores should stream";
}

// A try costs what the dearer way costs: where it costs six times the
// cheaper one, it is tried once every 192 calls or so, not every 32nd.
TEST(CollHandover, TheDearerWayIsTriedMoreRarelyTheDearerItIs) {
  HandoverModel m;
  (void)m.streamed(64, kFarPlain, kFarStream);
  const int plain = 2048 - m.streamed(2048, kFarPlain, kFarStream);
  EXPECT_GE(plain, 2048 / 256) << "plain stores must still be tried, to notice a move";
  EXPECT_LE(plain, 2048 / 128) << "plain stores tried in 2048 calls where they cost 5.8 times streaming";
  HandoverModel near;
  (void)near.streamed(64, kMiddlePlain, kMiddlePlain * 1.05);
  const int tried = near.streamed(2048, kMiddlePlain, kMiddlePlain * 1.05);
  EXPECT_GE(tried, 2048 / 34 - 1) << "streaming 5 % dearer is tried every 32nd to 34th call";
  EXPECT_LE(tried, 2048 / 32 + 1);
}

// Standalone joins leave nothing behind: no file in /dev/shm, and the
// abstract socket is gone once everyone joined. The test's /dev/shm is its
// own (a mount namespace of this test process): what other tests make there
// meanwhile (an MPI job's segments, a mock device's state) is not counted.
TEST(CollJoin, AStandaloneCommunicatorLeavesNothingBehind) {
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
  ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, nullptr), 0) << std::strerror(errno);
  const auto list_shm = [] {
    std::vector<std::string> names;
    if (FILE* f = popen("ls -a /dev/shm 2>/dev/null", "r")) {
      char line[512];
      while (std::fgets(line, sizeof(line), f) != nullptr) {
        names.emplace_back(line);
      }
      pclose(f);
    }
    return names;
  };
  const auto before = list_shm();
  const std::string name = unique_name();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    trainit::coll::Comm comm;
    _exit(comm.init(name.c_str(), 1, 2) == 0 && comm.barrier() == 0 ? 0 : 1);
  }
  trainit::coll::Comm comm;
  ASSERT_EQ(comm.init(name.c_str(), 0, 2), 0);
  EXPECT_EQ(comm.barrier(), 0);
  EXPECT_EQ(list_shm(), before);
  // The socket rank 0 served the arena on is closed: a late joiner cannot connect.
  ::setenv("TRAINIT_COLL_TIMEOUT", "0.2", 1);
  trainit_comm* late = nullptr;
  EXPECT_EQ(trainit_comm_init(&late, name.c_str(), 1, 2), -ETIMEDOUT);
  ::unsetenv("TRAINIT_COLL_TIMEOUT");
  int ws = 0;
  ASSERT_EQ(waitpid(pid, &ws, 0), pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

// The arena's pages are committed when it is created: a limit that cannot
// hold them fails trainit_comm_init() with an error, never a SIGBUS later.
TEST(CollJoin, AnArenaThatCannotBeCommittedFailsAtInit) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 20, 1 << 20};  // 1 MiB files: the arena needs more
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      _exit(2);
    }
    trainit_comm* c = nullptr;
    const int rc = trainit_comm_init(&c, unique_name().c_str(), 0, 1);
    _exit(rc == -EFBIG && c == nullptr ? 0 : 1);
  }
  int ws = 0;
  ASSERT_EQ(waitpid(pid, &ws, 0), pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << ws;
}

// Under trainit the init aborts the arena when a rank dies (and records that
// rank's status first); should nobody do it, the ranks abort by themselves
// about a second after the death.
TEST(CollEnv, RanksOfAnArenaNobodyAbortsGiveUpAboutASecondAfterAPeerDied) {
  constexpr int kN = 3;
  const size_t size = trainit::coll::coll_arena_size(kN, 0);
  const int fd = memfd_create("test-arena", 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_EQ(trainit::coll::coll_arena_format(base, size, kN, 7), 0);
  Shared times(sizeof(int64_t) * 8);
  auto* t = times.as<int64_t>();
  ::setenv("TRAINIT_COLL_FD", std::to_string(fd).c_str(), 1);
  ::setenv("TRAINIT_LOCAL_SIZE", "3", 1);
  std::vector<pid_t> pids;
  for (int r = 0; r < kN; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(20);
      ::setenv("TRAINIT_LOCAL_RANK", std::to_string(r).c_str(), 1);
      trainit_comm* c = nullptr;
      if (trainit_comm_init_from_env(&c) != 0 || trainit_barrier(c) != 0) {
        _exit(2);
      }
      if (r == 2) {
        pause();  // the parent kills it
      }
      const int rc = trainit_barrier(c);
      t[r] = now_ns();
      _exit(rc == -ECONNABORTED ? 0 : 1);
    }
    pids.push_back(pid);
  }
  usleep(200'000);
  const int64_t killed_at = now_ns();
  kill(pids[2], SIGKILL);
  for (int r = 0; r < kN; ++r) {
    int ws = 0;
    ASSERT_EQ(waitpid(pids[static_cast<size_t>(r)], &ws, 0), pids[static_cast<size_t>(r)]);
    if (r < 2) {
      EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << ws;
      EXPECT_GE(t[r] - killed_at, 900'000'000) << "rank " << r << ": the init's turn first";
      EXPECT_LT(t[r] - killed_at, 2'000'000'000) << "rank " << r;
    }
  }
  EXPECT_TRUE(trainit::coll::coll_arena_aborted(base));
  ::unsetenv("TRAINIT_COLL_FD");
  ::unsetenv("TRAINIT_LOCAL_SIZE");
  munmap(base, size);
  close(fd);
}

}  // namespace

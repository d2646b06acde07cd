// The collective core across real processes: every rank is a fork()ed child
// joining a standalone communicator (a fresh name per test); the parent
// waits for them with a deadline, so a bug fails a test and never hangs it.
// Children check their own results against a reference computed in double
// (exact for integers) and leave a hash of each output in shared memory; the
// parent checks that every rank's hashes are the same (bitwise identical
// results).
#include "trainit/coll.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
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
#include "coll/kernels.h"
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

uint16_t to_f16(float f) {
  const void* ins[1] = {&f};
  (void)ins;
  // f32 → f16 by the scalar kernel's rules: fold of one f32 is not offered,
  // so convert by hand (values here are exact in f16).
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
double reference(trainit_dtype t, trainit_op op, int n, size_t i, int first_rank_offset = 0) {
  (void)first_rank_offset;
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

// The large count 1 Mi + 3 (the pipelined reduce-scatter + allgather path,
// its last short chunk, and the zero-copy path from trainit_alloc buffers):
// every collective, in and out of place, for f32, bf16 and i64 with sum and
// max, on 2, 3 and 4 ranks (the full type matrix runs at the small counts;
// 8 ranks here would take minutes on 2 cores).
class CollLarge : public ::testing::TestWithParam<int> {};

TEST_P(CollLarge, LargeCountsPipelinedAndZeroCopyMatchTheReferenceOnEveryRank) {
  const int n = GetParam();
  constexpr size_t kCount = (1U << 20) + 3;
  Shared hashes(256 * 8 * sizeof(uint64_t));
  auto* h = hashes.as<uint64_t>();
  // Room for f32 send and recv buffers of n × kCount in every rank's share.
  const size_t heap = static_cast<size_t>(n) * (2 * static_cast<size_t>(n) * 4 * kCount + (1U << 20));
  ::setenv("TRAINIT_COLL_HEAP", std::to_string(heap).c_str(), 1);
  const auto status = run_ranks(n, [&](trainit_comm* comm, int r) {
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
              h[call * 8 + static_cast<size_t>(r)] =
                  run_and_check(comm, static_cast<Coll>(coll), t, op, kCount, in_place, root, call % 3, arena);
              ++call;
            }
          }
        }
      }
    }
    return 0;
  });
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

}  // namespace

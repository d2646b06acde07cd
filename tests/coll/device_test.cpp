// Device communicators (coll.h, "Device collectives"; src/coll/device.cpp)
// over the fake-device plugin and the Ascend plugin on the mock AscendCL, between real fork()ed ranks: every
// collective, dtype and op, in and out of place, in one piece and in many,
// bitwise equal to the host path; ranks that disagree; a peer killed
// mid-collective; the backend's choice and its errors; the peer sockets a
// rank gets from trainit (TRAINIT_COLL_PEER_FDS), checked before use. A
// check inside a child exits with 1 and says where; the parent waits with a
// deadline.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "child_support.h"
#include "coll/arena.h"
#include "coll/comm.h"
#include "coll/kernels.h"
#include "trainit/coll.h"

namespace {

using trainit::coll::dtype_size;
using trainit::coll::kDtypes;
using trainit::coll::kOps;

using trainit::coll::test::Bytes;
using trainit::coll::test::now_ns;
using trainit::coll::test::random_values;

// Runs body(rank) in n fork()ed ranks; their exit statuses (128 + n for a
// signal, -1 for one still running after deadline_s, then killed).
std::vector<int> run_ranks(int n, const std::function<int(int)>& body, int deadline_s = 60,
                           const std::function<void()>& after_fork = {}) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(static_cast<unsigned>(deadline_s + 10));  // should the parent be gone
      _exit(body(r));
    }
    pids.push_back(pid);
  }
  if (after_fork) {
    after_fork();
  }
  std::vector<int> status(pids.size(), -1);
  const int64_t deadline = now_ns() + static_cast<int64_t>(deadline_s) * 1'000'000'000;
  size_t left = pids.size();
  while (left > 0 && now_ns() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int ws = 0;
      if (status[i] == -1 && waitpid(pids[i], &ws, WNOHANG) == pids[i]) {
        status[i] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        --left;
      }
    }
    usleep(1000);
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (status[i] == -1) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], nullptr, 0);
    }
  }
  return status;
}

// A communicator name no other test run shares.
std::string unique_name(const char* what) {
  static int calls = 0;
  return std::string("device-test-") + what + "-" + std::to_string(getpid()) + "-" + std::to_string(++calls);
}

// A device buffer holding `host`'s bytes (room for `bytes` at least).
void* to_device(trainit_comm* c, const Bytes& host, size_t bytes) {
  void* dev = nullptr;
  CHILD_CHECK(trainit_device_alloc(c, bytes == 0 ? 1 : bytes, &dev) == 0, "device alloc of %zu bytes", bytes);
  if (!host.empty()) {
    CHILD_CHECK(trainit_device_copy(c, dev, host.data(), host.size()) == 0, "copy to the device");
  }
  return dev;
}

Bytes from_device(trainit_comm* c, const void* dev, size_t bytes) {
  Bytes out(bytes);
  if (bytes != 0) {
    CHILD_CHECK(trainit_device_copy(c, out.data(), dev, bytes) == 0, "copy from the device");
  }
  return out;
}

// The first float32 of a device buffer.
float first_float(trainit_comm* c, const void* dev) {
  const Bytes got = from_device(c, dev, 4);
  float first = 0;
  std::memcpy(&first, got.data(), 4);
  return first;
}

// `count` float32 ones.
Bytes float_ones(size_t count) {
  Bytes out(count * 4, 0);
  for (size_t i = 0; i < count; ++i) {
    const float one = 1.0F;
    std::memcpy(&out[i * 4], &one, 4);
  }
  return out;
}

// One device communicator and one host communicator among the same ranks.
struct Pair {
  trainit_comm* dev = nullptr;
  trainit_comm* host = nullptr;
};

// The device backends under test: the fake device, and the Ascend plugin
// over the mock AscendCL (each rank on a device of its own).
enum class Backend { kFakedev, kAscend };

const char* backend_name(Backend b) {
  return b == Backend::kFakedev ? "fakedev" : "ascend";
}

// In a rank's process, before its communicator: what its backend needs. The
// mocks are loaded first, so that the plugin's dlopen("libascendcl.so") and
// dlopen("libopapi.so") find them by their sonames (the folds then run on the
// mock device through aclnn's operators); mock_dir is the mock's shared
// "driver" directory.
const char* prepare_backend(Backend b, int rank, const std::string& mock_dir) {
  if (b == Backend::kFakedev) {
    return TRAINIT_FAKEDEV_PLUGIN;
  }
  CHILD_CHECK(dlopen(TRAINIT_MOCK_ACL, RTLD_NOW | RTLD_GLOBAL) != nullptr, "dlopen the mock: %s", dlerror());
  CHILD_CHECK(dlopen(TRAINIT_MOCK_ACLNN, RTLD_NOW | RTLD_GLOBAL) != nullptr, "dlopen the mock operators: %s",
              dlerror());
  setenv("MOCK_ACL_DIR", mock_dir.c_str(), 1);
  setenv("DEVICE_ID", std::to_string(rank).c_str(), 1);
  return TRAINIT_ASCEND_PLUGIN;
}

// A private directory for the mock AscendCL, removed by the parent.
struct MockDir {
  MockDir() {
    char tmpl[] = "/tmp/trainit-mock-acl-XXXXXX";
    path = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~MockDir() {
    if (!path.empty()) {
      static_cast<void>(std::system(("rm -rf " + path).c_str()));
    }
  }
  MockDir(const MockDir&) = delete;
  MockDir& operator=(const MockDir&) = delete;
  std::string path;
};

Pair join(const std::string& name, int rank, int n, Backend backend = Backend::kFakedev,
          const std::string& mock_dir = "") {
  Pair p;
  const char* plugin = prepare_backend(backend, rank, mock_dir);
  int r = trainit_comm_init_backend(&p.dev, name.c_str(), rank, n, plugin);
  CHILD_CHECK(r == 0, "device init: %s (%s)", trainit_strerror(r), trainit_backend_error());
  CHILD_CHECK(std::strcmp(trainit_comm_backend(p.dev), backend_name(backend)) == 0, "backend %s",
              trainit_comm_backend(p.dev));
  r = trainit_comm_init_backend(&p.host, (name + "-host").c_str(), rank, n, "host");
  CHILD_CHECK(r == 0, "host init: %s", trainit_strerror(r));
  return p;
}

void leave(Pair& p) {
  CHILD_CHECK(trainit_comm_destroy(p.dev) == 0, "device destroy");
  CHILD_CHECK(trainit_comm_destroy(p.host) == 0, "host destroy");
}

enum class Kind { kAllreduce, kReduce, kReduceScatter, kAllgather, kBroadcast };

struct Case {
  Kind kind;
  size_t count;  // per rank: all (allreduce, reduce, broadcast), recvcount, sendcount
  bool in_place;
  size_t staging;            // TRAINIT_COLL_DEVICE_STAGING: small ones make many pieces
  size_t one_shot;           // TRAINIT_COLL_DEVICE_ONE_SHOT (0: the default): small ones make allreduce two-shot
  int blocks = 0;            // TRAINIT_COLL_DEVICE_BLOCKS (0: the backend's)
  bool host_driven = false;  // TRAINIT_COLL_DEVICE_LAUNCH=0
  size_t block_bytes = 0;    // TRAINIT_COLL_DEVICE_BLOCK_BYTES (0: the backend's)
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAllreduce:
      return "allreduce";
    case Kind::kReduce:
      return "reduce";
    case Kind::kReduceScatter:
      return "reduce_scatter";
    case Kind::kAllgather:
      return "allgather";
    case Kind::kBroadcast:
      return "broadcast";
  }
  return "?";
}

// One collective, dtype and op on both communicators: the device result
// copied back must equal the host one byte for byte.
void check_one(Pair& p, const Case& k, int dtype, int op, int rank, int n, uint32_t seed) {
  const size_t es = dtype_size(dtype);
  const size_t un = static_cast<size_t>(n);
  size_t send_count = k.count;
  size_t recv_count = k.count;
  if (k.kind == Kind::kReduceScatter) {
    send_count = k.count * un;
  } else if (k.kind == Kind::kAllgather) {
    recv_count = k.count * un;
  }
  const int root = n - 1;
  // In place, the input lies where the collective expects it in recv.
  const size_t buf_count = k.in_place ? (send_count > recv_count ? send_count : recv_count) : recv_count;
  Bytes input = random_values(dtype, send_count, seed + static_cast<uint32_t>(rank) * 7919);
  Bytes host_buf(buf_count * es);
  size_t input_at = 0;
  if (k.kind == Kind::kAllgather && k.in_place) {
    input_at = k.count * es * static_cast<size_t>(rank);
  }
  if (k.in_place) {
    std::memcpy(host_buf.data() + input_at, input.data(), input.size());
  }
  void* dev_buf = to_device(p.dev, host_buf, host_buf.size());
  // In place is send == recv (coll.h; MPI_IN_PLACE's convention): an
  // allgather's own part is then already at recv + rank * count.
  void* dev_send = k.in_place ? dev_buf : to_device(p.dev, input, input.size());
  unsigned char* host_send = k.in_place ? host_buf.data() : input.data();
  const auto t = static_cast<trainit_dtype>(dtype);
  const auto o = static_cast<trainit_op>(op);
  int rh = 0;
  int rd = 0;
  switch (k.kind) {
    case Kind::kAllreduce:
      rh = trainit_allreduce(p.host, host_send, host_buf.data(), k.count, t, o);
      rd = trainit_allreduce(p.dev, dev_send, dev_buf, k.count, t, o);
      break;
    case Kind::kReduce:
      rh = trainit_reduce(p.host, host_send, host_buf.data(), k.count, t, o, root);
      rd = trainit_reduce(p.dev, dev_send, dev_buf, k.count, t, o, root);
      break;
    case Kind::kReduceScatter:
      rh = trainit_reduce_scatter(p.host, host_send, host_buf.data(), k.count, t, o);
      rd = trainit_reduce_scatter(p.dev, dev_send, dev_buf, k.count, t, o);
      break;
    case Kind::kAllgather:
      rh = trainit_allgather(p.host, host_send, host_buf.data(), k.count, t);
      rd = trainit_allgather(p.dev, dev_send, dev_buf, k.count, t);
      break;
    case Kind::kBroadcast:
      // The root's input is the buffer; in place does not apply.
      if (rank == root) {
        std::memcpy(host_buf.data(), input.data(), input.size());
        CHILD_CHECK(trainit_device_copy(p.dev, dev_buf, input.data(), input.size()) == 0, "copy");
      }
      rh = trainit_broadcast(p.host, host_buf.data(), k.count, t, root);
      rd = trainit_broadcast(p.dev, dev_buf, k.count, t, root);
      break;
  }
  CHILD_CHECK(rh == 0 && rd == 0, "%s dtype %d op %d: host %s, device %s", kind_name(k.kind), dtype, op,
              trainit_strerror(rh), trainit_strerror(rd));
  const size_t check_bytes = recv_count * es;
  if (k.kind != Kind::kReduce || rank == root) {
    const Bytes got = from_device(p.dev, dev_buf, check_bytes);
    CHILD_CHECK(std::memcmp(got.data(), host_buf.data(), check_bytes) == 0,
                "%s of %zu, dtype %d op %d, %s place, rank %d: the device result is not the host's bit for bit",
                kind_name(k.kind), k.count, dtype, op, k.in_place ? "in" : "out of", rank);
  }
  if (!k.in_place) {
    CHILD_CHECK(trainit_device_free(p.dev, dev_send) == 0, "free");
  }
  CHILD_CHECK(trainit_device_free(p.dev, dev_buf) == 0, "free");
}

bool reduces(Kind k) {
  return k == Kind::kAllreduce || k == Kind::kReduce || k == Kind::kReduceScatter;
}

// Every dtype (and op, for reductions) of one case, on n ranks.
void expect_device_equals_host(Backend backend, int n, const Case& k) {
  const std::string name = unique_name(kind_name(k.kind));
  const MockDir mock;
  const auto status = run_ranks(n, [&](int rank) {
    if (k.staging != 0) {
      setenv("TRAINIT_COLL_DEVICE_STAGING", std::to_string(k.staging).c_str(), 1);
    }
    if (k.one_shot != 0) {
      setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", std::to_string(k.one_shot).c_str(), 1);
    }
    if (k.blocks != 0) {
      setenv("TRAINIT_COLL_DEVICE_BLOCKS", std::to_string(k.blocks).c_str(), 1);
    }
    if (k.host_driven) {
      setenv("TRAINIT_COLL_DEVICE_LAUNCH", "0", 1);
    }
    if (k.block_bytes != 0) {
      setenv("TRAINIT_COLL_DEVICE_BLOCK_BYTES", std::to_string(k.block_bytes).c_str(), 1);
    }
    Pair p = join(name, rank, n, backend, mock.path);
    // Calls driven from the host take no stream.
    CHILD_CHECK(!k.host_driven || trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == -EOPNOTSUPP,
                "set_stream on a communicator told not to launch");
    for (int dtype = 0; dtype < kDtypes; ++dtype) {
      for (int op = 0; op < (reduces(k.kind) ? kOps : 1); ++op) {
        check_one(p, k, dtype, op, rank, n, static_cast<uint32_t>(dtype * 31 + op));
      }
    }
    if (backend == Backend::kAscend) {  // the folds ran on the device, no rule broken
      const auto calls = reinterpret_cast<uint64_t (*)()>(dlsym(RTLD_DEFAULT, "mockAclnnCalls"));
      const auto broken = reinterpret_cast<uint64_t (*)()>(dlsym(RTLD_DEFAULT, "mockAclnnViolations"));
      CHILD_CHECK(calls != nullptr && broken != nullptr && broken() == 0, "the mock operators' rules");
      CHILD_CHECK(!reduces(k.kind) || k.count == 0 || (rank != n - 1 && k.kind == Kind::kReduce) || calls() > 0,
                  "rank %d: no fold ran through aclnn", rank);
    }
    leave(p);
    return 0;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(status[static_cast<size_t>(r)], 0)
        << backend_name(backend) << ": " << kind_name(k.kind) << " on " << n << " ranks: rank " << r;
  }
}

class DeviceCollectives : public ::testing::TestWithParam<std::tuple<Backend, int>> {
 protected:
  void expect_equal(const Case& k) const {
    expect_device_equals_host(std::get<0>(GetParam()), std::get<1>(GetParam()), k);
  }
};

TEST_P(DeviceCollectives, AllreduceOnDeviceBuffersEqualsTheHostAllreduceBitForBit) {
  for (const bool in_place : {false, true}) {
    expect_equal({Kind::kAllreduce, 1001, in_place, 0, 0});
  }
}

TEST_P(DeviceCollectives, AllreduceLargerThanTheStagingGoesInPiecesAndStillEqualsTheHost) {
  for (const bool in_place : {false, true}) {
    expect_equal({Kind::kAllreduce, 5000, in_place, 16384, 0});
  }
}

TEST_P(DeviceCollectives, TwoShotAllreduceAndReduceEqualTheHostInOnePieceAndInMany) {
  for (const bool in_place : {false, true}) {
    expect_equal({Kind::kAllreduce, 1001, in_place, 0, 64});
    expect_equal({Kind::kAllreduce, 3000, in_place, 16384, 64});
    expect_equal({Kind::kReduce, 777, in_place, 16384, 64});
  }
}

TEST_P(DeviceCollectives, ReduceOnDeviceBuffersEqualsTheHostReduceOnTheRoot) {
  for (const bool in_place : {false, true}) {
    expect_equal({Kind::kReduce, 777, in_place, 16384, 0});
  }
}

TEST_P(DeviceCollectives, ReduceScatterOnDeviceBuffersEqualsTheHostReduceScatter) {
  for (const bool in_place : {false, true}) {
    expect_equal({Kind::kReduceScatter, 300, in_place, 0, 0});
    expect_equal({Kind::kReduceScatter, 1500, in_place, 16384, 0});
  }
}

TEST_P(DeviceCollectives, AllgatherOnDeviceBuffersEqualsTheHostAllgather) {
  for (const bool in_place : {false, true}) {
    expect_equal({Kind::kAllgather, 333, in_place, 0, 0});
    expect_equal({Kind::kAllgather, 1500, in_place, 16384, 0});
  }
}

TEST_P(DeviceCollectives, BroadcastOnDeviceBuffersEqualsTheHostBroadcast) {
  expect_equal({Kind::kBroadcast, 2500, false, 4096, 0});  // the smallest staging
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceCollectives,
                         ::testing::Combine(::testing::Values(Backend::kFakedev, Backend::kAscend),
                                            ::testing::Values(2, 3, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
                           return std::string(std::get<0>(info.param) == Backend::kFakedev ? "Fakedev" : "Ascend") +
                                  std::to_string(std::get<1>(info.param)) + "Ranks";
                         });

TEST(DeviceComm, RanksThatDisagreeOnACallAllGetEinvalAndStayUsable) {
  const std::string name = unique_name("disagree");
  const auto status = run_ranks(3, [&](int rank) {
    Pair p = join(name, rank, 3);
    const Bytes ones = float_ones(64);
    void* buf = to_device(p.dev, ones, ones.size());
    // Rank 1 asks for another count.
    const size_t count = rank == 1 ? 32 : 64;
    int r = trainit_allreduce(p.dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == -EINVAL, "a count mismatch gave %s", trainit_strerror(r));
    r = trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == 0, "the next call gave %s", trainit_strerror(r));
    const float first = first_float(p.dev, buf);
    CHILD_CHECK(first == 3.0F, "sum %g", static_cast<double>(first));
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

// Both ranks' allreduce of 64 float ones, synchronous, on the fake device
// with `fault` (TRAINIT_FAKEDEV_FAULT): its sum and how long it took.
int timed_allreduce_of_ones(const char* fault, int max_ms) {
  const std::string name = unique_name("done-words");
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_FAKEDEV_FAULT", fault, 1);
    Pair p = join(name, rank, 2);
    const Bytes ones = float_ones(64);
    void* buf = to_device(p.dev, ones, ones.size());
    CHILD_CHECK(trainit_barrier(p.host) == 0, "host barrier");
    const int64_t start = now_ns();
    const int r = trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM);
    const int64_t ms = (now_ns() - start) / 1'000'000;
    CHILD_CHECK(r == 0, "the allreduce gave %s", trainit_strerror(r));
    CHILD_CHECK(ms < max_ms, "the allreduce took %lld ms", static_cast<long long>(ms));
    const float first = first_float(p.dev, buf);
    CHILD_CHECK(first == 2.0F, "sum %g", static_cast<double>(first));
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  return status == std::vector<int>({0, 0}) ? 0 : 1;
}

// A synchronous call ends once every block of its launch has stored its
// done word, not when the device's stream gets round to retiring the
// launch: with a stream that retires each call 2 s late, the allreduce
// still returns its sum in well under that.
TEST(DeviceComm, ASynchronousCallReturnsOnceItsBlocksAreDoneNotWhenTheStreamRetiresIt) {
  EXPECT_EQ(timed_allreduce_of_ones("0:late,1:late", 1500), 0);
}

// A backend whose launches store no done words: the call ends when its
// stream says so (asked every 100 µs), its result right.
TEST(DeviceComm, ASynchronousCallOnABackendThatStoresNoDoneWordsEndsWhenItsStreamDoes) {
  EXPECT_EQ(timed_allreduce_of_ones("0:mute,1:mute", 30'000), 0);
}

// A barrier is a collective of the device communicator like the others:
// one rank's barrier against its peers' allreduce is a disagreement (-EINVAL
// on every rank, the communicator usable after), where the barrier waited on
// the arena and the allreduce on the staging, each for the other, for good.
void expect_barrier_against_allreduce_is_einval(Backend backend, bool stream) {
  const std::string name = unique_name(stream ? "barrier-kind-stream" : "barrier-kind");
  const auto status = run_ranks(
      3,
      [&](int rank) {
        Pair p = join(name, rank, 3, backend);
        std::vector<float> ones(64, 1.0F);
        void* buf = to_device(p.dev,
                              Bytes(reinterpret_cast<const unsigned char*>(ones.data()),
                                    reinterpret_cast<const unsigned char*>(ones.data() + ones.size())),
                              ones.size() * 4);
        if (stream) {
          CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
        }
        int r = rank == 0 ? trainit_barrier(p.dev) : trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM);
        if (stream) {  // the error comes with the query; the communicator is then ended
          CHILD_CHECK(r == 0, "enqueue gave %s", trainit_strerror(r));
          r = trainit_comm_query(p.dev);
          for (int i = 0; r == -EINPROGRESS && i < 100000; ++i) {
            usleep(100);
            r = trainit_comm_query(p.dev);
          }
          CHILD_CHECK(r == -EINVAL, "a barrier against an allreduce gave %s", trainit_strerror(r));
          leave(p);
          return 0;
        }
        CHILD_CHECK(r == -EINVAL, "a barrier against an allreduce gave %s", trainit_strerror(r));
        CHILD_CHECK((r = trainit_barrier(p.dev)) == 0, "the next barrier gave %s", trainit_strerror(r));
        CHILD_CHECK((r = trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM)) == 0,
                    "the next call gave %s", trainit_strerror(r));
        const float first = first_float(p.dev, buf);
        CHILD_CHECK(first == 3.0F, "sum %g", static_cast<double>(first));
        CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
        leave(p);
        return 0;
      },
      20);
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

TEST(DeviceComm, OneRanksBarrierAgainstItsPeersAllreduceIsEinvalOnEveryRank) {
  expect_barrier_against_allreduce_is_einval(Backend::kFakedev, false);
  expect_barrier_against_allreduce_is_einval(Backend::kAscend, false);
}

TEST(DeviceComm, OneRanksStreamOrderedBarrierAgainstItsPeersAllreduceIsEinvalAtTheQuery) {
  expect_barrier_against_allreduce_is_einval(Backend::kFakedev, true);
}

// Seven blocks of 2,240-byte regions: every call crosses blocks and pieces
// (reduce and broadcast move as allreduce and allgather do; two blocks of
// the suite above cross them too).
TEST(DeviceComm, SevenBlocksSplitEveryCollectiveAndEachStillEqualsTheHostBitForBit) {
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kAllreduce, 5000, true, 65536, 0, 7});
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kAllreduce, 5000, false, 65536, 64, 7});
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kReduceScatter, 1500, false, 65536, 0, 7});
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kAllgather, 1500, true, 65536, 0, 7});
}

// A block per 1,000 bytes of seven: each dtype's size of a count on its
// own number of blocks, one to seven, and each call still the host's.
TEST(DeviceComm, CallsOnABlockPerBlockBytesOfWhatTheyMoveEachStillEqualTheHostBitForBit) {
  Case k{Kind::kAllreduce, 300, true, 65536, 0, 7};
  k.block_bytes = 1000;
  expect_device_equals_host(Backend::kFakedev, 3, k);
  k.count = 5000;
  k.in_place = false;
  k.one_shot = 4096;
  expect_device_equals_host(Backend::kFakedev, 3, k);
  for (const Kind kind : {Kind::kReduce, Kind::kReduceScatter, Kind::kAllgather, Kind::kBroadcast}) {
    k = {kind, 700, kind == Kind::kAllgather, 65536, 0, 7};
    k.block_bytes = 1000;
    expect_device_equals_host(Backend::kFakedev, 3, k);
  }
}

// Counts that put the ranks' calls on 1, 4 and 2 of 4 blocks: -EINVAL on
// every rank, and the calls after it (on every block, on one) right.
TEST(DeviceComm, RanksWhoseCallsRunOnDifferentBlocksAllGetEinvalAndStayUsable) {
  const std::string name = unique_name("disagree-blocks");
  const auto status = run_ranks(3, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_BLOCKS", "4", 1);
    setenv("TRAINIT_COLL_DEVICE_BLOCK_BYTES", "64", 1);
    setenv("TRAINIT_COLL_TIMEOUT", "10", 1);  // a line never stepped: -ETIMEDOUT, not a hang
    Pair p = join(name, rank, 3);
    const Bytes ones = float_ones(64);
    void* buf = to_device(p.dev, ones, ones.size());
    int r = trainit_allreduce(p.dev, buf, buf, rank == 0 ? 4 : rank == 1 ? 64 : 32, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == -EINVAL, "counts on different blocks gave %s", trainit_strerror(r));
    r = trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == 0, "the call on every block gave %s", trainit_strerror(r));
    r = trainit_allreduce(p.dev, buf, buf, 4, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == 0, "the call on one block gave %s", trainit_strerror(r));
    const Bytes got = from_device(p.dev, buf, ones.size());
    float first = 0;
    float last = 0;
    std::memcpy(&first, got.data(), sizeof first);
    std::memcpy(&last, got.data() + got.size() - sizeof last, sizeof last);
    CHILD_CHECK(first == 9.0F && last == 3.0F, "sums %g and %g", static_cast<double>(first), static_cast<double>(last));
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, std::vector<int>({0, 0, 0}));
}

// A backend that launches, told not to, runs the same algorithm driven from
// the host over its copy and fold, one block: the host's results still.
TEST(DeviceComm, AFakeDeviceToldNotToLaunchDrivesEveryCollectiveFromTheHostAndStillEqualsTheHost) {
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kAllreduce, 5000, true, 65536, 0, 0, true});
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kAllreduce, 3000, false, 16384, 64, 0, true});
  expect_device_equals_host(Backend::kFakedev, 2, {Kind::kReduce, 777, false, 16384, 0, 0, true});
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kReduceScatter, 1500, true, 16384, 0, 0, true});
  expect_device_equals_host(Backend::kFakedev, 3, {Kind::kAllgather, 1500, false, 16384, 0, 0, true});
  expect_device_equals_host(Backend::kFakedev, 2, {Kind::kBroadcast, 2500, false, 4096, 0, 0, true});
}

// Each rank's init with its own settings: 0 for a communicator, else -EINVAL
// naming TRAINIT_COLL_DEVICE_BLOCKS (3), _STAGING (5), _ONE_SHOT (6) or
// _LAUNCH (7), else 4.
std::vector<int> init_with(int n, const std::function<void(int)>& set, Backend backend = Backend::kFakedev) {
  const std::string name = unique_name("settings");
  const MockDir mock;
  return run_ranks(n, [&](int rank) {
    set(rank);
    const char* plugin = prepare_backend(backend, rank, mock.path);
    trainit_comm* c = nullptr;
    const int r = trainit_comm_init_backend(&c, name.c_str(), rank, n, plugin);
    if (r == 0) {
      CHILD_CHECK(trainit_comm_destroy(c) == 0, "destroy");
      return 0;
    }
    CHILD_CHECK(c == nullptr, "a failed init left a communicator");
    (void)std::fprintf(stderr, "rank %d: %s\n", rank, trainit_backend_error());
    if (r != -EINVAL) {
      return 4;
    }
    const std::string why = trainit_backend_error();
    return why.find("TRAINIT_COLL_DEVICE_BLOCKS") != std::string::npos        ? 3
           : why.find("TRAINIT_COLL_DEVICE_STAGING") != std::string::npos     ? 5
           : why.find("TRAINIT_COLL_DEVICE_ONE_SHOT") != std::string::npos    ? 6
           : why.find("TRAINIT_COLL_DEVICE_LAUNCH") != std::string::npos      ? 7
           : why.find("TRAINIT_COLL_DEVICE_BLOCK_BYTES") != std::string::npos ? 8
                                                                              : 4;
  });
}

TEST(DeviceComm, RanksThatSplitCallsDifferentlyFailInitWithEinvalNamingTheVariables) {
  // 3 and 6: -EINVAL naming the variable (init_with).
  EXPECT_EQ(init_with(2, [](int rank) { setenv("TRAINIT_COLL_DEVICE_BLOCKS", rank == 0 ? "3" : "5", 1); }),
            (std::vector<int>{3, 3}));
  EXPECT_EQ(init_with(3, [](int rank) { setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", rank == 2 ? "4096" : "8192", 1); }),
            (std::vector<int>{6, 6, 6}));
  EXPECT_EQ(init_with(2, [](int) { setenv("TRAINIT_COLL_DEVICE_BLOCKS", "5", 1); }), (std::vector<int>{0, 0}));
  // 8: -EINVAL naming TRAINIT_COLL_DEVICE_BLOCK_BYTES.
  EXPECT_EQ(init_with(2, [](int rank) { setenv("TRAINIT_COLL_DEVICE_BLOCK_BYTES", rank == 0 ? "0" : "16384", 1); }),
            (std::vector<int>{8, 8}));
  for (const char* bad : {"-1", "x", "16k"}) {
    EXPECT_EQ(init_with(1, [&](int) { setenv("TRAINIT_COLL_DEVICE_BLOCK_BYTES", bad, 1); }), (std::vector<int>{8}))
        << "TRAINIT_COLL_DEVICE_BLOCK_BYTES=\"" << bad << "\"";
  }
  EXPECT_EQ(init_with(2, [](int) { setenv("TRAINIT_COLL_DEVICE_BLOCK_BYTES", "0", 1); }), (std::vector<int>{0, 0}));
}

TEST(DeviceComm, RanksWithStagingOfDifferentSizesFailInitWithEinvalOnEveryRankNamingTheVariable) {
  // 5: -EINVAL naming TRAINIT_COLL_DEVICE_STAGING (init_with).
  EXPECT_EQ(init_with(2, [](int rank) { setenv("TRAINIT_COLL_DEVICE_STAGING", rank == 1 ? "65536" : "131072", 1); }),
            (std::vector<int>{5, 5}));
  EXPECT_EQ(init_with(
                3, [](int rank) { setenv("TRAINIT_COLL_DEVICE_STAGING", rank == 0 ? "65536" : "131072", 1); },
                Backend::kAscend),
            (std::vector<int>{5, 5, 5}));
  EXPECT_EQ(init_with(2, [](int) { setenv("TRAINIT_COLL_DEVICE_STAGING", "65536", 1); }), (std::vector<int>{0, 0}));
}

TEST(DeviceComm, RanksThatDisagreeOnLaunchingOrSayNeither0Nor1FailInitWithEinvalNamingTheVariable) {
  // 7: -EINVAL naming TRAINIT_COLL_DEVICE_LAUNCH (init_with).
  EXPECT_EQ(init_with(3, [](int rank) { setenv("TRAINIT_COLL_DEVICE_LAUNCH", rank == 1 ? "0" : "1", 1); }),
            (std::vector<int>{7, 7, 7}));
  for (const char* bad : {"yes", "2", " 0", "off"}) {
    EXPECT_EQ(init_with(1, [&](int) { setenv("TRAINIT_COLL_DEVICE_LAUNCH", bad, 1); }), (std::vector<int>{7}))
        << "TRAINIT_COLL_DEVICE_LAUNCH=\"" << bad << "\"";
  }
  EXPECT_EQ(init_with(2, [](int) { setenv("TRAINIT_COLL_DEVICE_LAUNCH", "0", 1); }), (std::vector<int>{0, 0}));
  // Ascend drives its calls from the host whatever it says, and checks it.
  EXPECT_EQ(init_with(
                2, [](int) { setenv("TRAINIT_COLL_DEVICE_LAUNCH", "1", 1); }, Backend::kAscend),
            (std::vector<int>{0, 0}));
}

TEST(DeviceComm, AStagingOrOneShotThatIsNoByteCountFailsInitWithEinvalNamingIt) {
  for (const char* bad : {"-1", "abc", "64k", "0x10000", "2199023257600", "99999999999999999999999"}) {
    EXPECT_EQ(init_with(1, [&](int) { setenv("TRAINIT_COLL_DEVICE_STAGING", bad, 1); }), (std::vector<int>{5}))
        << "TRAINIT_COLL_DEVICE_STAGING=\"" << bad << "\"";
  }
  for (const char* bad : {"-1", "x", "0", "1e6"}) {
    EXPECT_EQ(init_with(1, [&](int) { setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", bad, 1); }), (std::vector<int>{6}))
        << "TRAINIT_COLL_DEVICE_ONE_SHOT=\"" << bad << "\"";
  }
  // Under 4096 bytes of staging is ignored (the default), as documented.
  EXPECT_EQ(init_with(1, [](int) { setenv("TRAINIT_COLL_DEVICE_STAGING", "100", 1); }), (std::vector<int>{0}));
}

TEST(DeviceComm, ADeviceBlockCountOutsideOneTo32FailsInitWithEinvalNamingIt) {
  for (const char* bad : {"0", "33", "-1", "4x", " 4"}) {
    EXPECT_EQ(init_with(1, [&](int) { setenv("TRAINIT_COLL_DEVICE_BLOCKS", bad, 1); }), (std::vector<int>{3}))
        << "TRAINIT_COLL_DEVICE_BLOCKS=\"" << bad << "\"";
  }
  EXPECT_EQ(init_with(1, [](int) { setenv("TRAINIT_COLL_DEVICE_BLOCKS", "32", 1); }), (std::vector<int>{0}));
  // A backend the host drives runs one block, and still says a value is wrong.
  EXPECT_EQ(init_with(
                1, [](int) { setenv("TRAINIT_COLL_DEVICE_BLOCKS", "x", 1); }, Backend::kAscend),
            (std::vector<int>{3}));
  EXPECT_EQ(init_with(
                2, [](int) { setenv("TRAINIT_COLL_DEVICE_BLOCKS", "9", 1); }, Backend::kAscend),
            (std::vector<int>{0, 0}));
}

// The arena and the sockets between the ranks, as trainit makes them
// (defined below).
int make_arena(int n, uint64_t id);
std::vector<std::vector<int>> make_mesh(int n);
void set_rank_env(int arena, int rank, int n, const std::vector<int>& socks);
void keep_only_row(const std::vector<std::vector<int>>& mesh, int rank);
void close_mesh(const std::vector<std::vector<int>>& mesh);

// How the call that cannot go on is ended: rank 2 SIGKILLed, or the init's
// abort of the arena (its stop, another rank's death it saw first).
enum class Ending { kPeerKilled, kArenaAborted };

// Three fake-device ranks; rank 2 never enters the collective, and while
// ranks 0 and 1 are in it (call(c, buf) makes it and returns how it ended)
// the parent ends it: each must end with -ECONNABORTED within 100 ms. A
// killed peer is seen by the ranks of a standalone communicator themselves;
// an arena's abort is the init's, so those ranks join one arena from their
// environment, as trainit starts them.
void expect_the_call_ends_within_100ms(const char* what, bool stream, Ending ending,
                                       const std::function<int(trainit_comm*, void*)>& call, bool windowed = false) {
  // Shared with the ranks: when the parent ended the call, and when each
  // surviving rank's call ended.
  auto* shared = static_cast<std::atomic<int64_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  for (int i = 0; i < 8; ++i) {
    new (&shared[i]) std::atomic<int64_t>(0);
  }
  const std::string name = unique_name(what);
  const int arena = make_arena(3, static_cast<uint64_t>(getpid()));
  ASSERT_GE(arena, 0);
  const auto mesh = make_mesh(3);
  ASSERT_EQ(mesh.size(), 3U);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 3; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(30);
      keep_only_row(mesh, rank);
      trainit_comm* c = nullptr;
      int r = 0;
      if (windowed) {  // a window, and the 1 MiB allreduce two-shot: zero copy
        setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
      }
      if (ending == Ending::kPeerKilled) {
        r = trainit_comm_init_backend(&c, name.c_str(), rank, 3, TRAINIT_FAKEDEV_PLUGIN);
      } else {
        set_rank_env(arena, rank, 3, mesh[static_cast<size_t>(rank)]);
        r = trainit_comm_init_from_env_backend(&c, TRAINIT_FAKEDEV_PLUGIN);
      }
      CHILD_CHECK(r == 0, "init: %s (%s)", trainit_strerror(r), trainit_backend_error());
      void* buf = nullptr;
      CHILD_CHECK(trainit_device_alloc(c, 1 << 20, &buf) == 0, "alloc");
      CHILD_CHECK(!windowed || trainit_comm_register(c, buf, 1 << 20) == 0, "register");
      CHILD_CHECK(!stream || trainit_comm_set_stream(c, reinterpret_cast<void*>(1)) == 0, "set_stream");
      shared[1 + rank].store(1);  // joined
      if (rank == 2) {
        pause();  // never enters the collective: the parent kills it
      }
      const int got = call(c, buf);
      shared[4 + rank].store(now_ns());
      _exit(got == -ECONNABORTED ? 0 : 2);
    }
    pids.push_back(pid);
  }
  close_mesh(mesh);
  const int64_t deadline = now_ns() + 20'000'000'000;
  while ((shared[1].load() == 0 || shared[2].load() == 0 || shared[3].load() == 0) && now_ns() < deadline) {
    usleep(1000);
  }
  usleep(50'000);  // ranks 0 and 1 wait in the collective now
  shared[0].store(now_ns());
  if (ending == Ending::kPeerKilled) {
    kill(pids[2], SIGKILL);
  } else {
    const size_t bytes = trainit::coll::coll_arena_size(3, size_t{1} << 20);
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, arena, 0);
    ASSERT_NE(base, MAP_FAILED);
    trainit::coll::coll_arena_abort(base, 3);
    munmap(base, bytes);
  }
  std::vector<int> status;
  for (const pid_t pid : {pids[0], pids[1]}) {
    int ws = 0;
    const int64_t until = now_ns() + 10'000'000'000;
    while (waitpid(pid, &ws, WNOHANG) == 0 && now_ns() < until) {
      usleep(1000);
    }
    if (now_ns() >= until) {
      kill(pid, SIGKILL);
      waitpid(pid, &ws, 0);
    }
    status.push_back(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
  }
  kill(pids[2], SIGKILL);
  waitpid(pids[2], nullptr, 0);
  close(arena);
  EXPECT_EQ(status[0], 0) << what << ": rank 0's call did not end with -ECONNABORTED";
  EXPECT_EQ(status[1], 0) << what << ": rank 1's call did not end with -ECONNABORTED";
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t after_ms = (shared[4 + rank].load() - shared[0].load()) / 1'000'000;
    EXPECT_LT(after_ms, 100) << what << ": rank " << rank << "'s call ended " << after_ms << " ms after it was ended";
  }
  munmap(shared, 4096);
}

int allreduce_of_1mib(trainit_comm* c, void* buf) {
  return trainit_allreduce(c, buf, buf, (1 << 20) / 4, TRAINIT_F32, TRAINIT_SUM);
}

// An allgather in place of the parts three ranks fit in 1 MiB; in a
// window, it must have gone zero copy (else -EPROTO).
int allgather_in_place_of_1mib(trainit_comm* c, void* buf) {
  constexpr size_t kPart = (1 << 20) / 4 / 3;
  auto* part = static_cast<float*>(buf) + kPart * static_cast<size_t>(trainit_comm_rank(c));
  const int r = trainit_allgather(c, part, buf, kPart, TRAINIT_F32);
  return c->zero_copy_calls == 1 ? r : -EPROTO;
}

// A stream-ordered allreduce enqueued, then queried until it is done.
int enqueued_allreduce_of_1mib(trainit_comm* c, void* buf) {
  CHILD_CHECK(allreduce_of_1mib(c, buf) == 0, "enqueue");
  int q = 0;
  while ((q = trainit_comm_query(c)) == -EINPROGRESS) {
    usleep(200);
  }
  return q;
}

TEST(DeviceComm, APeerKilledMidCollectiveMakesTheOthersReturnEconnabortedWithin100ms) {
  expect_the_call_ends_within_100ms("killed", false, Ending::kPeerKilled, allreduce_of_1mib);
}

TEST(DeviceComm, APeerKilledMidZeroCopyAllreduceOnAWindowMakesTheOthersReturnEconnabortedWithin100ms) {
  expect_the_call_ends_within_100ms("killed-window", false, Ending::kPeerKilled, allreduce_of_1mib, true);
}

TEST(DeviceComm, APeerKilledMidZeroCopyAllgatherOnAWindowMakesTheOthersReturnEconnabortedWithin100ms) {
  expect_the_call_ends_within_100ms("killed-window-allgather", false, Ending::kPeerKilled, allgather_in_place_of_1mib,
                                    true);
}

TEST(DeviceComm, TheInitsAbortOfTheArenaEndsADeviceCallInFlightWithEconnabortedWithin100ms) {
  expect_the_call_ends_within_100ms("aborted", false, Ending::kArenaAborted, allreduce_of_1mib);
  expect_the_call_ends_within_100ms("stream-aborted", true, Ending::kArenaAborted, enqueued_allreduce_of_1mib);
}

// Stream-ordered calls queued against a peer that never comes: the first
// ends with -ETIMEDOUT after TRAINIT_COLL_TIMEOUT, and its failure ends the
// calls queued behind it at once (-ECONNABORTED: the communicator is done
// for), so the query reports -ETIMEDOUT after one timeout, not one a call.
TEST(DeviceComm, AStreamCallThatTimesOutEndsTheCallsQueuedBehindItAtOnce) {
  const std::string name = unique_name("stream-timeout");
  auto* done =
      static_cast<std::atomic<int>*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(done, MAP_FAILED);
  new (done) std::atomic<int>(0);
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_COLL_TIMEOUT", "1", 1);
    Pair p = join(name, rank, 2);
    void* buf = to_device(p.dev, random_values(TRAINIT_F32, 4096, 1), 4 * 4096);
    CHILD_CHECK(trainit_barrier(p.dev) == 0, "barrier");
    if (rank == 1) {  // alive, but it never calls again until rank 0 is done
      const int64_t until = now_ns() + 30'000'000'000;
      while (done->load() == 0 && now_ns() < until) {
        usleep(1000);
      }
      return 0;
    }
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    const int64_t start = now_ns();
    for (int i = 0; i < 5; ++i) {
      CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, 4096, TRAINIT_F32, TRAINIT_SUM) == 0, "enqueue %d", i);
    }
    int q = 0;
    while ((q = trainit_comm_query(p.dev)) == -EINPROGRESS && now_ns() - start < 20'000'000'000) {
      usleep(1000);
    }
    const int64_t ms = (now_ns() - start) / 1'000'000;
    done->store(1);
    CHILD_CHECK(q == -ETIMEDOUT, "query: %s", trainit_strerror(q));
    CHILD_CHECK(ms < 2500, "the query reported the timeout %lld ms after the calls were queued",
                static_cast<long long>(ms));
    const int next = trainit_allreduce(p.dev, buf, buf, 4096, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(next == -ECONNABORTED, "the next call: %s", trainit_strerror(next));
    return 0;
  });
  munmap(done, 4096);
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
}

TEST(DeviceComm, StreamOrderedCallsReturnOnceEnqueuedAndQueryReportsThemDoneWithTheResults) {
  const std::string name = unique_name("stream");
  const auto status = run_ranks(3, [&](int rank) {
    Pair p = join(name, rank, 3);
    constexpr size_t kCount = 4096;
    std::vector<int32_t> mine(kCount, rank + 1);
    Bytes bytes(kCount * 4);
    std::memcpy(bytes.data(), mine.data(), bytes.size());
    void* buf = to_device(p.dev, bytes, bytes.size());
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    // Eight in-place sums enqueued back to back: 6 * 3^7 each element.
    for (int i = 0; i < 8; ++i) {
      const int r = trainit_allreduce(p.dev, buf, buf, kCount, TRAINIT_I32, TRAINIT_SUM);
      CHILD_CHECK(r == 0, "enqueue %d: %s", i, trainit_strerror(r));
    }
    int q = 0;
    const int64_t until = now_ns() + 20'000'000'000;
    while ((q = trainit_comm_query(p.dev)) == -EINPROGRESS && now_ns() < until) {
      usleep(100);
    }
    CHILD_CHECK(q == 0, "query: %s", trainit_strerror(q));
    const Bytes got = from_device(p.dev, buf, bytes.size());
    int32_t first = 0;
    std::memcpy(&first, got.data() + (kCount - 1) * 4, 4);
    CHILD_CHECK(first == 6 * 2187, "element %zu is %d", kCount - 1, first);
    // Back to calls that return done.
    CHILD_CHECK(trainit_comm_set_stream(p.dev, nullptr) == 0, "set_stream(NULL)");
    CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, kCount, TRAINIT_I32, TRAINIT_SUM) == 0, "a synchronous call");
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

// An error is reported however many calls follow it on the stream before
// anyone asks: the third of 1,200 calls disagrees (-EINVAL), the rest
// agree, and the error comes back from a later call or the query: -EINVAL
// on the rank that sees it first, which ends the communicator, so a peer
// that had not seen it yet gets -ECONNABORTED.
TEST(DeviceComm, AStreamOrderedCallsErrorIsReportedAfterManyMoreCallsThanItsStatusRingHolds) {
  const std::string name = unique_name("stream-many");
  const auto status = run_ranks(
      3,
      [&](int rank) {
        Pair p = join(name, rank, 3);
        std::vector<float> ones(16, 1.0F);
        void* buf = to_device(p.dev,
                              Bytes(reinterpret_cast<const unsigned char*>(ones.data()),
                                    reinterpret_cast<const unsigned char*>(ones.data() + ones.size())),
                              ones.size() * 4);
        CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
        int first = 0;
        for (int i = 0; i < 1200 && first == 0; ++i) {
          const size_t count = i == 2 && rank == 1 ? 8 : 16;
          first = trainit_allreduce(p.dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM);
        }
        const int64_t until = now_ns() + 20'000'000'000;
        while (first == 0 && (first = trainit_comm_query(p.dev)) == -EINPROGRESS && now_ns() < until) {
          first = 0;
          usleep(100);
        }
        CHILD_CHECK(first == -EINVAL || first == -ECONNABORTED, "the first error reported: %s",
                    trainit_strerror(first));
        leave(p);
        return first == -EINVAL ? 0 : 10;
      },
      60);
  for (int s : status) {
    EXPECT_TRUE(s == 0 || s == 10) << s;
  }
  EXPECT_NE(std::find(status.begin(), status.end(), 0), status.end()) << "no rank reported the -EINVAL";
}

TEST(DeviceComm, AStreamOrderedCallInFlightWhenAPeerIsKilledEndsWithEconnabortedWithin100ms) {
  expect_the_call_ends_within_100ms("stream-killed", true, Ending::kPeerKilled, enqueued_allreduce_of_1mib);
}

TEST(DeviceComm, AStreamOrderedCallsErrorIsReportedOnceAndEndsTheCommunicatorOnEveryRank) {
  const std::string name = unique_name("stream-error");
  const auto status = run_ranks(2, [&](int rank) {
    Pair p = join(name, rank, 2);
    void* buf = to_device(p.dev, Bytes(256, 0), 256);
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    // The ranks disagree on the count: enqueued alike, failed alike.
    const size_t count = rank == 0 ? 64 : 32;
    CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, count, TRAINIT_F32, TRAINIT_SUM) == 0, "enqueue");
    int q = 0;
    const int64_t until = now_ns() + 20'000'000'000;
    while ((q = trainit_comm_query(p.dev)) == -EINPROGRESS && now_ns() < until) {
      usleep(100);
    }
    CHILD_CHECK(q == -EINVAL, "query: %s", trainit_strerror(q));
    CHILD_CHECK(trainit_comm_query(p.dev) == 0, "the error is reported once");
    const int next = trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(next == -ECONNABORTED, "the next call: %s", trainit_strerror(next));
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    (void)trainit_comm_destroy(p.dev);
    (void)trainit_comm_destroy(p.host);
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

// Several calls wait on the stream when a peer dies: each ends with
// -ECONNABORTED, and the error still comes once; the queries after it say 0
// (the communicator is ended, nothing of it left to report), not one error
// for each call that was in flight.
TEST(DeviceComm, AStreamOrderedErrorIsReportedOnceHoweverManyCallsItEnded) {
  const std::string name = unique_name("stream-error-once");
  const auto status = run_ranks(2, [&](int rank) {
    Pair p = join(name, rank, 2);
    void* buf = to_device(p.dev, Bytes(256, 0), 256);
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    if (rank == 0) {  // one call, done, then gone
      CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM) == 0, "enqueue");
      while (trainit_comm_query(p.dev) == -EINPROGRESS) {
        usleep(100);
      }
      raise(SIGKILL);
    }
    for (int i = 0; i < 6; ++i) {  // the first with rank 0's, five that wait for it
      CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, 64, TRAINIT_F32, TRAINIT_SUM) == 0, "enqueue %d", i);
    }
    int q = -EINPROGRESS;
    const int64_t until = now_ns() + 20'000'000'000;
    while ((q = trainit_comm_query(p.dev)) == -EINPROGRESS && now_ns() < until) {
      usleep(100);
    }
    CHILD_CHECK(q == -ECONNABORTED, "the error: %s", trainit_strerror(q));
    for (int i = 0; i < 5; ++i) {  // -EINPROGRESS while the calls it ended still end, then 0
      while ((q = trainit_comm_query(p.dev)) == -EINPROGRESS && now_ns() < until) {
        usleep(100);
      }
      CHILD_CHECK(q == 0, "query %d after the error: %s", i, trainit_strerror(q));
    }
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    (void)trainit_comm_destroy(p.dev);
    (void)trainit_comm_destroy(p.host);
    return 0;
  });
  EXPECT_EQ(status[0], 128 + SIGKILL);
  EXPECT_EQ(status[1], 0);
}

// A peer that died, and was reaped, before the stream was set is a dead
// peer all the same: the stream's calls end with -ECONNABORTED, at once.
TEST(DeviceComm, APeerReapedBeforeTheStreamWasSetEndsItsCallsWithEconnaborted) {
  const std::string name = unique_name("stream-dead-first");
  auto* shared = static_cast<std::atomic<int32_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  new (shared) std::atomic<int32_t>(0);
  const auto status = run_ranks(3, [&](int rank) {
    Pair p = join(name, rank, 3);
    void* buf = to_device(p.dev, Bytes(64, 0), 64);
    if (rank == 2) {
      shared->store(static_cast<int32_t>(getpid()));
      return 0;  // gone without a word; the test's parent reaps it
    }
    const int64_t until = now_ns() + 10'000'000'000;
    while ((shared->load() == 0 || kill(shared->load(), 0) == 0) && now_ns() < until) {
      usleep(1000);
    }
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    const int64_t start = now_ns();
    int r = trainit_allreduce(p.dev, buf, buf, 16, TRAINIT_F32, TRAINIT_SUM);
    if (r == 0) {
      while ((r = trainit_comm_query(p.dev)) == -EINPROGRESS && now_ns() < start + 5'000'000'000) {
        usleep(200);
      }
    }
    const int64_t ms = (now_ns() - start) / 1'000'000;
    CHILD_CHECK(r == -ECONNABORTED, "rank %d: %s after %lld ms", rank, trainit_strerror(r), static_cast<long long>(ms));
    CHILD_CHECK(ms < 1000, "rank %d: -ECONNABORTED after %lld ms", rank, static_cast<long long>(ms));
    return 0;
  });
  munmap(shared, 4096);
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

// A query says whether this communicator's calls are done: one never given
// a stream has none in flight, whatever another's stream holds.
TEST(DeviceComm, AQueryOfACommunicatorWithoutAStreamIsZeroWhileAnothersCallsRun) {
  const std::string name = unique_name("query-other");
  const auto status = run_ranks(2, [&](int rank) {
    Pair p = join(name, rank, 2);
    trainit_comm* other = nullptr;
    int r = trainit_comm_init_backend(&other, (name + "-other").c_str(), rank, 2, TRAINIT_FAKEDEV_PLUGIN);
    CHILD_CHECK(r == 0, "second device init: %s", trainit_strerror(r));
    constexpr size_t kCount = 1 << 18;
    void* buf = to_device(p.dev, Bytes(kCount * 4, 0), kCount * 4);
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    for (int i = 0; i < 8; ++i) {
      CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, kCount, TRAINIT_F32, TRAINIT_SUM) == 0, "enqueue");
    }
    r = trainit_comm_query(other);
    CHILD_CHECK(r == 0, "the other communicator's query: %s", trainit_strerror(r));
    CHILD_CHECK(trainit_comm_set_stream(p.dev, nullptr) == 0, "drain");
    CHILD_CHECK(trainit_comm_destroy(other) == 0, "destroy");
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

// A count whose whole (n parts of a reduce_scatter or an allgather) passes
// the core's bound is refused as the host communicator refuses it: -EINVAL
// on every rank, the communicator usable after.
TEST(DeviceComm, ACountWhoseWholeIsPastTheBoundIsEinvalAndTheCommunicatorStaysUsable) {
  const std::string name = unique_name("big-count");
  const auto status = run_ranks(3, [&](int rank) {
    Pair p = join(name, rank, 3);
    void* buf = to_device(p.dev, Bytes(64, 0), 64);
    const size_t huge = (size_t{1} << 40) / 3 + 1;
    int r = trainit_reduce_scatter(p.dev, buf, buf, huge, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == -EINVAL, "reduce_scatter: %s", trainit_strerror(r));
    r = trainit_allgather(p.dev, buf, buf, huge, TRAINIT_F32);
    CHILD_CHECK(r == -EINVAL, "allgather: %s", trainit_strerror(r));
    r = trainit_allreduce(p.dev, buf, buf, 16, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == 0, "the next call: %s", trainit_strerror(r));
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

TEST(DeviceComm, AStreamIsRefusedWithEopnotsuppByHostCommunicatorsAndBackendsThatCannotLaunch) {
  const std::string name = unique_name("stream-refused");
  const MockDir mock;
  const auto status = run_ranks(2, [&](int rank) {
    Pair p = join(name, rank, 2, Backend::kAscend, mock.path);
    CHILD_CHECK(trainit_comm_set_stream(p.host, reinterpret_cast<void*>(1)) == -EOPNOTSUPP, "host");
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == -EOPNOTSUPP, "ascend");
    CHILD_CHECK(trainit_comm_query(p.host) == 0 && trainit_comm_query(p.dev) == 0, "query");
    leave(p);
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

// A call the host drives over Ascend's copies and folds (on the plugin's
// own stream) first waits for the whole device, the caller's streams
// included, once; between its steps only for its own stream, so the
// caller's other work runs on meanwhile. In pieces, one-shot and two-shot.
TEST(DeviceComm, AnAscendCallWaitsForTheWholeDeviceOnceAndBetweenStepsOnlyForItsOwnStream) {
  const std::string name = unique_name("device-waits");
  const MockDir mock;
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_STAGING", "16384", 1);
    Pair p = join(name, rank, 2, Backend::kAscend, mock.path);
    const auto waits = reinterpret_cast<uint64_t (*)()>(dlsym(RTLD_DEFAULT, "mockAclDeviceWaits"));
    CHILD_CHECK(waits != nullptr, "mockAclDeviceWaits");
    constexpr size_t kCount = 5000;  // 20,000 bytes: several pieces through 16 KiB of staging
    std::vector<float> host(kCount, static_cast<float>(rank + 1));
    void* buf = nullptr;
    CHILD_CHECK(trainit_device_alloc(p.dev, kCount * sizeof(float), &buf) == 0, "alloc");
    for (const char* one_shot : {"262144", "64"}) {
      // The bound is read at init: a communicator of its own for each.
      setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", one_shot, 1);
      trainit_comm* c = nullptr;
      const std::string each = name + "-" + one_shot;
      CHILD_CHECK(trainit_comm_init_backend(&c, each.c_str(), rank, 2, TRAINIT_ASCEND_PLUGIN) == 0, "init");
      CHILD_CHECK(trainit_device_copy(c, buf, host.data(), kCount * sizeof(float)) == 0, "copy in");
      const uint64_t before = waits();
      const int r = trainit_allreduce(c, buf, buf, kCount, TRAINIT_F32, TRAINIT_SUM);
      const uint64_t during = waits() - before;
      CHILD_CHECK(r == 0, "one-shot bound %s: %s", one_shot, trainit_strerror(r));
      CHILD_CHECK(during == 1, "one-shot bound %s: %llu waits for the whole device in one call", one_shot,
                  static_cast<unsigned long long>(during));
      std::vector<float> out(kCount, 0.0F);
      CHILD_CHECK(trainit_device_copy(c, out.data(), buf, kCount * sizeof(float)) == 0, "copy out");
      CHILD_CHECK(out[0] == 3.0F && out[kCount - 1] == 3.0F, "one-shot bound %s: %g", one_shot,
                  static_cast<double>(out[kCount - 1]));
      (void)trainit_comm_destroy(c);
    }
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

TEST(DeviceComm, TrainitCollBackendChoosesTheBackendAndHostIsTheDefault) {
  const std::string name = unique_name("choice");
  const auto status = run_ranks(2, [&](int rank) {
    unsetenv("TRAINIT_COLL_BACKEND");
    trainit_comm* c = nullptr;
    CHILD_CHECK(trainit_comm_init(&c, (name + "-a").c_str(), rank, 2) == 0, "init");
    CHILD_CHECK(std::strcmp(trainit_comm_backend(c), "host") == 0, "default %s", trainit_comm_backend(c));
    CHILD_CHECK(trainit_comm_destroy(c) == 0, "destroy");
    setenv("TRAINIT_COLL_BACKEND", TRAINIT_FAKEDEV_PLUGIN, 1);
    CHILD_CHECK(trainit_comm_init(&c, (name + "-b").c_str(), rank, 2) == 0, "init: %s", trainit_backend_error());
    CHILD_CHECK(std::strcmp(trainit_comm_backend(c), "fakedev") == 0, "from the variable %s", trainit_comm_backend(c));
    CHILD_CHECK(trainit_comm_destroy(c) == 0, "destroy");
    // The init argument wins over the variable.
    CHILD_CHECK(trainit_comm_init_backend(&c, (name + "-c").c_str(), rank, 2, "host") == 0, "init");
    CHILD_CHECK(std::strcmp(trainit_comm_backend(c), "host") == 0, "argument %s", trainit_comm_backend(c));
    CHILD_CHECK(trainit_comm_destroy(c) == 0, "destroy");
    return 0;
  });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

TEST(DeviceComm, ABackendNamedWithoutAPathIsFoundBesideLibtrainitColl) {
  // The shared library, as a rank links it: its directory holds the plugins.
  void* lib = dlopen(TRAINIT_COLL_SHARED, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Init = int (*)(trainit_comm**, const char*, int, int, const char*);
  using Name = const char* (*)(const trainit_comm*);
  using Destroy = int (*)(trainit_comm*);
  auto init = reinterpret_cast<Init>(dlsym(lib, "trainit_comm_init_backend"));
  auto name = reinterpret_cast<Name>(dlsym(lib, "trainit_comm_backend"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "trainit_comm_destroy"));
  ASSERT_TRUE(init != nullptr && name != nullptr && destroy != nullptr);
  trainit_comm* c = nullptr;
  ASSERT_EQ(init(&c, unique_name("beside").c_str(), 0, 1, "fakedev"), 0);
  EXPECT_STREQ(name(c), "fakedev");
  EXPECT_EQ(destroy(c), 0);
}

TEST(DeviceComm, AMissingPluginFailsTheInitWithEnoentAndSaysWhich) {
  trainit_comm* c = nullptr;
  const int r = trainit_comm_init_backend(&c, unique_name("missing").c_str(), 0, 1, "/nonexistent/libplugin.so");
  EXPECT_EQ(r, -ENOENT);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(std::string(trainit_backend_error()).find("/nonexistent/libplugin.so"), std::string::npos)
      << trainit_backend_error();
  EXPECT_EQ(trainit_comm_init_backend(&c, unique_name("noname").c_str(), 0, 1, "nosuchbackend"), -ENOENT);
}

// --- ranks started as trainit starts them: an arena and sockets in the env ---

// A formatted arena for n ranks, as trainit makes it (its fd, inherited).
int make_arena(int n, uint64_t id) {
  const size_t bytes = trainit::coll::coll_arena_size(n, size_t{1} << 20);
  const int fd = memfd_create("device-test-arena", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return -1;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED || trainit::coll::coll_arena_format(p, bytes, n, id) != 0) {
    return -1;
  }
  munmap(p, bytes);
  return fd;
}

// Rank `rank`'s environment: the arena and its sockets ("-" at its own).
void set_rank_env(int arena, int rank, int n, const std::vector<int>& socks) {
  setenv("TRAINIT_COLL_FD", std::to_string(arena).c_str(), 1);
  setenv("TRAINIT_LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("TRAINIT_LOCAL_SIZE", std::to_string(n).c_str(), 1);
  unsetenv("TRAINIT_COLL_ID");
  std::string fds;
  for (int p = 0; p < n; ++p) {
    fds += (p == 0 ? "" : ",") + (p == rank ? std::string("-") : std::to_string(socks[static_cast<size_t>(p)]));
  }
  setenv("TRAINIT_COLL_PEER_FDS", fds.c_str(), 1);
}

// In rank `rank`'s process: closes every other rank's ends, so that a rank
// that exits closes its sockets for good.
void keep_only_row(const std::vector<std::vector<int>>& mesh, int rank) {
  for (size_t i = 0; i < mesh.size(); ++i) {
    for (const int fd : mesh[i]) {
      if (fd >= 0 && i != static_cast<size_t>(rank)) {
        close(fd);
      }
    }
  }
}

void close_mesh(const std::vector<std::vector<int>>& mesh) {
  for (const auto& row : mesh) {
    for (const int fd : row) {
      if (fd >= 0) {
        close(fd);
      }
    }
  }
}

// mesh[i][j]: rank i's end towards j.
std::vector<std::vector<int>> make_mesh(int n) {
  std::vector<std::vector<int>> mesh(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), -1));
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) != 0) {
        return {};
      }
      mesh[static_cast<size_t>(i)][static_cast<size_t>(j)] = pair[0];
      mesh[static_cast<size_t>(j)][static_cast<size_t>(i)] = pair[1];
    }
  }
  return mesh;
}

TEST(DeviceComm, RanksFromTheEnvironmentSwapHandlesOverTheirPeerSocketsAndReduce) {
  const int arena = make_arena(3, 0x1234);
  ASSERT_GE(arena, 0);
  const auto mesh = make_mesh(3);
  ASSERT_EQ(mesh.size(), 3U);
  const auto status = run_ranks(
      3,
      [&](int rank) {
        keep_only_row(mesh, rank);
        set_rank_env(arena, rank, 3, mesh[static_cast<size_t>(rank)]);
        trainit_comm* c = nullptr;
        const int r = trainit_comm_init_from_env_backend(&c, TRAINIT_FAKEDEV_PLUGIN);
        CHILD_CHECK(r == 0, "init: %s (%s)", trainit_strerror(r), trainit_backend_error());
        const int32_t mine[4] = {rank + 1, rank + 1, rank + 1, rank + 1};
        void* buf = to_device(c,
                              Bytes(reinterpret_cast<const unsigned char*>(mine),
                                    reinterpret_cast<const unsigned char*>(mine) + sizeof mine),
                              sizeof mine);
        CHILD_CHECK(trainit_allreduce(c, buf, buf, 4, TRAINIT_I32, TRAINIT_SUM) == 0, "allreduce");
        const Bytes got = from_device(c, buf, sizeof mine);
        int32_t sum = 0;
        std::memcpy(&sum, got.data(), 4);
        CHILD_CHECK(sum == 6, "sum %d", sum);
        CHILD_CHECK(trainit_device_free(c, buf) == 0, "free");
        CHILD_CHECK(trainit_comm_destroy(c) == 0, "destroy");
        return 0;
      },
      60, [&] { close_mesh(mesh); });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

TEST(DeviceComm, TheSocketsFromTheEnvironmentOutliveACommunicatorSoALaterOneCanUseThem) {
  // Each rank first makes a host communicator from its environment and
  // destroys it, then a device one: the sockets trainit passed are the
  // process's, not the first communicator's.
  const int arena = make_arena(2, 0x4242);
  ASSERT_GE(arena, 0);
  const auto mesh = make_mesh(2);
  ASSERT_EQ(mesh.size(), 2U);
  const auto status = run_ranks(
      2,
      [&](int rank) {
        keep_only_row(mesh, rank);
        set_rank_env(arena, rank, 2, mesh[static_cast<size_t>(rank)]);
        setenv("TRAINIT_COLL_TIMEOUT", "5", 1);
        trainit_comm* c = nullptr;
        CHILD_CHECK(trainit_comm_init_from_env_backend(&c, "host") == 0, "host init");
        CHILD_CHECK(trainit_barrier(c) == 0, "barrier");
        CHILD_CHECK(trainit_comm_destroy(c) == 0, "destroy");
        const int r = trainit_comm_init_from_env_backend(&c, TRAINIT_FAKEDEV_PLUGIN);
        CHILD_CHECK(r == 0, "device init after a host one: %s (%s)", trainit_strerror(r), trainit_backend_error());
        CHILD_CHECK(trainit_comm_destroy(c) == 0, "destroy");
        return 0;
      },
      60, [&] { close_mesh(mesh); });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

TEST(DeviceComm, APeerSocketThatIsNotASocketIsRefusedWithEinval) {
  const int arena = make_arena(2, 0x99);
  ASSERT_GE(arena, 0);
  const auto status = run_ranks(1, [&](int) {
    const int not_a_socket = open("/dev/null", O_RDONLY);
    set_rank_env(arena, 0, 2, {-1, not_a_socket});
    trainit_comm* c = nullptr;
    const int r = trainit_comm_init_from_env_backend(&c, TRAINIT_FAKEDEV_PLUGIN);
    CHILD_CHECK(r == -EINVAL, "gave %s", trainit_strerror(r));
    setenv("TRAINIT_COLL_PEER_FDS", "-,x", 1);
    CHILD_CHECK(trainit_comm_init_from_env_backend(&c, TRAINIT_FAKEDEV_PLUGIN) == -EINVAL, "garbage accepted");
    return 0;
  });
  EXPECT_EQ(status[0], 0);
}

TEST(DeviceComm, ASocketLeadingToAnotherRankThanItsIndexIsRefusedWithEproto) {
  // Three ranks, but rank 0's two sockets are given the wrong way round:
  // the hello from the other end names another rank.
  const int arena = make_arena(3, 0x77);
  ASSERT_GE(arena, 0);
  auto mesh = make_mesh(3);
  ASSERT_EQ(mesh.size(), 3U);
  std::swap(mesh[0][1], mesh[0][2]);
  const auto status = run_ranks(
      3,
      [&](int rank) {
        keep_only_row(mesh, rank);
        set_rank_env(arena, rank, 3, mesh[static_cast<size_t>(rank)]);
        setenv("TRAINIT_COLL_TIMEOUT", "5", 1);
        trainit_comm* c = nullptr;
        const int r = trainit_comm_init_from_env_backend(&c, TRAINIT_FAKEDEV_PLUGIN);
        CHILD_CHECK(r < 0, "rank %d joined through crossed sockets", rank);
        if (rank == 0) {
          CHILD_CHECK(r == -EPROTO, "rank 0 gave %s", trainit_strerror(r));
          CHILD_CHECK(std::strstr(trainit_backend_error(), "does not lead") != nullptr, "%s", trainit_backend_error());
          CHILD_CHECK(std::strstr(trainit_backend_error(), "local rank 1's socket") != nullptr ||
                          std::strstr(trainit_backend_error(), "local rank 2's socket") != nullptr,
                      "the refusal names no rank: %s", trainit_backend_error());
        }
        return 0;
      },
      60, [&] { close_mesh(mesh); });
  for (int s : status) {
    EXPECT_EQ(s, 0);
  }
}

TEST(DeviceComm, WithoutPeerSocketsADeviceCommunicatorOfSeveralRanksSaysWhy) {
  const int arena = make_arena(2, 0x55);
  ASSERT_GE(arena, 0);
  const auto status = run_ranks(1, [&](int) {
    set_rank_env(arena, 0, 2, {-1, -1});
    unsetenv("TRAINIT_COLL_PEER_FDS");
    trainit_comm* c = nullptr;
    const int r = trainit_comm_init_from_env_backend(&c, TRAINIT_FAKEDEV_PLUGIN);
    CHILD_CHECK(r == -EOPNOTSUPP, "gave %s", trainit_strerror(r));
    CHILD_CHECK(std::strstr(trainit_backend_error(), "TRAINIT_COLL_PEER_FDS") != nullptr, "%s",
                trainit_backend_error());
    return 0;
  });
  EXPECT_EQ(status[0], 0);
}

// Registered windows (trainit_comm_register) on the fake device, three
// ranks. A two-shot allreduce in place in a window, at an offset, reads and
// writes the ranks' buffers where they lie (zero copy: larger than the
// staging, yet no pieces), bitwise the host allreduce; one at most the
// one-shot bound, or outside any window, is staged as before. A rank frees
// its buffer once deregistered, and one still registered at the
// communicator's destroy: the fake device refuses a free (-EBUSY) while a
// peer still maps it.
TEST(DeviceComm, AnAllreduceInPlaceInARegisteredWindowIsZeroCopyAndEqualsTheHostBitForBit) {
  const std::string name = unique_name("window");
  const auto status = run_ranks(3, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
    setenv("TRAINIT_COLL_DEVICE_STAGING", "65536", 1);
    Pair p = join(name, rank, 3);
    trainit_comm* other = nullptr;
    CHILD_CHECK(trainit_comm_init_backend(&other, (name + "-other").c_str(), rank, 3, TRAINIT_FAKEDEV_PLUGIN) == 0,
                "a second device communicator");
    constexpr size_t kWindow = 256 << 10;
    void* win = to_device(p.dev, {}, kWindow);
    CHILD_CHECK(trainit_comm_register(p.dev, win, kWindow) == 0, "register");
    const struct {
      int dtype;
      int op;
      size_t count;
      uint64_t zero_copies;  // that the call adds
    } calls[] = {{TRAINIT_F32, TRAINIT_SUM, 30001, 1},
                 {TRAINIT_BF16, TRAINIT_SUM, 50000, 1},
                 {TRAINIT_I64, TRAINIT_MAX, 20000, 1},
                 {TRAINIT_F32, TRAINIT_SUM, 1000, 0}};
    unsigned char* at = static_cast<unsigned char*>(win) + 4096;
    for (const auto& k : calls) {
      const Bytes input = random_values(k.dtype, k.count, static_cast<uint32_t>(rank * 7 + k.dtype));
      CHILD_CHECK(trainit_device_copy(p.dev, at, input.data(), input.size()) == 0, "copy in");
      const uint64_t before = p.dev->zero_copy_calls;
      const auto dtype = static_cast<trainit_dtype>(k.dtype);
      const auto op = static_cast<trainit_op>(k.op);
      CHILD_CHECK(trainit_allreduce(p.dev, at, at, k.count, dtype, op) == 0, "allreduce of dtype %d", k.dtype);
      CHILD_CHECK(p.dev->zero_copy_calls - before == k.zero_copies, "dtype %d, %zu elements: %llu zero-copy calls",
                  k.dtype, k.count, static_cast<unsigned long long>(p.dev->zero_copy_calls - before));
      Bytes want = input;
      CHILD_CHECK(trainit_allreduce(p.host, want.data(), want.data(), k.count, dtype, op) == 0, "host");
      CHILD_CHECK(from_device(p.dev, at, want.size()) == want, "dtype %d: not the host's result", k.dtype);
    }
    // Outside any window: staged, still the host's.
    const Bytes ones = random_values(TRAINIT_F32, 30001, static_cast<uint32_t>(rank));
    void* apart = to_device(p.dev, ones, ones.size());
    CHILD_CHECK(trainit_allreduce(p.dev, apart, apart, 30001, TRAINIT_F32, TRAINIT_SUM) == 0, "allreduce apart");
    Bytes want = ones;
    CHILD_CHECK(trainit_allreduce(p.host, want.data(), want.data(), 30001, TRAINIT_F32, TRAINIT_SUM) == 0, "host");
    CHILD_CHECK(from_device(p.dev, apart, want.size()) == want, "a buffer outside the window");
    CHILD_CHECK(p.dev->zero_copy_calls == 3, "%llu zero-copy calls",
                static_cast<unsigned long long>(p.dev->zero_copy_calls));
    CHILD_CHECK(trainit_comm_deregister(p.dev, win) == 0, "deregister");
    CHILD_CHECK(trainit_device_free(p.dev, win) == 0, "free after deregister");
    CHILD_CHECK(trainit_comm_register(p.dev, apart, ones.size()) == 0, "register again");
    leave(p);
    CHILD_CHECK(trainit_device_free(other, apart) == 0, "free of a window the destroy deregistered");
    CHILD_CHECK(trainit_comm_destroy(other) == 0, "destroy");
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0, 0}));
}

// Past the one-shot bound, an allgather (in place and not), a reduce_scatter
// out of place whose send lies in a window and a broadcast are zero copy
// too, on the fake device, three ranks: bitwise the host communicator's
// results; a reduce_scatter in place, and calls at most the bound, stage
// (one rank's reduce_scatter in place against its peers' out of place is
// -EINVAL on every rank, and they go on).
TEST(DeviceComm, AllgatherReduceScatterAndBroadcastInRegisteredWindowsAreZeroCopyAndEqualTheHost) {
  const std::string name = unique_name("window-kinds");
  const auto status = run_ranks(3, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
    setenv("TRAINIT_COLL_DEVICE_STAGING", "65536", 1);
    Pair p = join(name, rank, 3);
    constexpr size_t kWindow = 512 << 10;
    constexpr size_t kCount = 20011;  // f32 a part: past the bound, larger than the staging, an odd size
    constexpr size_t kPart = kCount * 4;
    auto* win = static_cast<unsigned char*>(to_device(p.dev, {}, kWindow));
    CHILD_CHECK(trainit_comm_register(p.dev, win, kWindow) == 0, "register");
    unsigned char* at = win + 4096;
    const Bytes mine = random_values(TRAINIT_F32, kCount * 3, static_cast<uint32_t>(rank * 11 + 1));
    const auto expect = [&](uint64_t before, uint64_t zero_copies, const Bytes& want, const char* what) {
      CHILD_CHECK(p.dev->zero_copy_calls - before == zero_copies, "%s: %llu zero-copy calls", what,
                  static_cast<unsigned long long>(p.dev->zero_copy_calls - before));
      CHILD_CHECK(from_device(p.dev, at, want.size()) == want, "%s: not the host's result", what);
    };
    // allgather in place: this rank's part already at its place.
    Bytes want(kPart * 3, 0);
    std::memcpy(want.data() + kPart * static_cast<size_t>(rank), mine.data(), kPart);
    CHILD_CHECK(trainit_device_copy(p.dev, at, want.data(), want.size()) == 0, "copy in");
    uint64_t before = p.dev->zero_copy_calls;
    CHILD_CHECK(trainit_allgather(p.dev, at + kPart * static_cast<size_t>(rank), at, kCount, TRAINIT_F32) == 0,
                "allgather in place");
    CHILD_CHECK(trainit_allgather(p.host, want.data() + kPart * static_cast<size_t>(rank), want.data(), kCount,
                                  TRAINIT_F32) == 0,
                "host allgather");
    expect(before, 1, want, "allgather in place");
    // allgather out of place, its send outside the window.
    void* send = to_device(p.dev, Bytes(mine.begin(), mine.begin() + kPart), kPart);
    before = p.dev->zero_copy_calls;
    CHILD_CHECK(trainit_allgather(p.dev, send, at, kCount, TRAINIT_F32) == 0, "allgather");
    expect(before, 1, want, "allgather out of place");
    // reduce_scatter: send in the window, recv outside it.
    CHILD_CHECK(trainit_device_copy(p.dev, at, mine.data(), mine.size()) == 0, "copy in");
    void* recv = to_device(p.dev, {}, kPart);
    before = p.dev->zero_copy_calls;
    CHILD_CHECK(trainit_reduce_scatter(p.dev, at, recv, kCount, TRAINIT_F32, TRAINIT_SUM) == 0, "reduce_scatter");
    Bytes folded(kPart);
    CHILD_CHECK(trainit_reduce_scatter(p.host, mine.data(), folded.data(), kCount, TRAINIT_F32, TRAINIT_SUM) == 0,
                "host reduce_scatter");
    CHILD_CHECK(p.dev->zero_copy_calls - before == 1 && from_device(p.dev, recv, kPart) == folded, "reduce_scatter");
    // In place, it stages (a rank's result would land on a segment a peer reads).
    before = p.dev->zero_copy_calls;
    CHILD_CHECK(trainit_reduce_scatter(p.dev, at, at, kCount, TRAINIT_F32, TRAINIT_SUM) == 0, "in place");
    expect(before, 0, folded, "reduce_scatter in place");
    // Rank 0 in place, the others not: one would stage, the others not.
    const int mixed = trainit_reduce_scatter(p.dev, at, rank == 0 ? at : recv, kCount, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(mixed == -EINVAL, "in place on one rank alone: %s", trainit_strerror(mixed));
    // broadcast from rank 1; and one at the bound, staged.
    const Bytes root = random_values(TRAINIT_F32, kCount, 99);
    CHILD_CHECK(trainit_device_copy(p.dev, at, rank == 1 ? root.data() : mine.data(), kPart) == 0, "copy in");
    before = p.dev->zero_copy_calls;
    CHILD_CHECK(trainit_broadcast(p.dev, at, kCount, TRAINIT_F32, 1) == 0, "broadcast");
    expect(before, 1, root, "broadcast");
    CHILD_CHECK(rank == 1 || trainit_device_copy(p.dev, at, mine.data(), 4096) == 0, "copy in");
    CHILD_CHECK(trainit_broadcast(p.dev, at, 1024, TRAINIT_F32, 1) == 0, "a small broadcast");
    expect(before, 1, Bytes(root.begin(), root.begin() + 4096), "a small broadcast");
    CHILD_CHECK(trainit_comm_deregister(p.dev, win) == 0, "deregister");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0, 0}));
}

// An allreduce out of place and a reduce whose sends lie in windows, past
// the one-shot bound, read every rank's send where it lies and stage only
// the folded shares: the host's results, bit for bit, on the fake device,
// three ranks; the reduce's root out of place and in place.
TEST(DeviceComm, AnAllreduceOutOfPlaceAndAReduceWithTheirSendsInWindowsEqualTheHost) {
  const std::string name = unique_name("window-sends");
  const auto status = run_ranks(3, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
    setenv("TRAINIT_COLL_DEVICE_STAGING", "65536", 1);
    Pair p = join(name, rank, 3);
    constexpr size_t kCount = 30011;  // f32: past the bound, in pieces
    constexpr size_t kBytes = kCount * 4;
    auto* win = static_cast<unsigned char*>(to_device(p.dev, {}, kBytes + 4096));
    CHILD_CHECK(trainit_comm_register(p.dev, win, kBytes + 4096) == 0, "register");
    unsigned char* send = win + 4096;
    void* recv = to_device(p.dev, {}, kBytes);
    for (const int dtype : {TRAINIT_F32, TRAINIT_BF16}) {
      const size_t count = kBytes / dtype_size(dtype);
      const Bytes mine = random_values(dtype, count, static_cast<uint32_t>(rank * 5 + dtype));
      const auto t = static_cast<trainit_dtype>(dtype);
      Bytes want = mine;
      CHILD_CHECK(trainit_allreduce(p.host, want.data(), want.data(), count, t, TRAINIT_SUM) == 0, "host");
      CHILD_CHECK(trainit_device_copy(p.dev, send, mine.data(), kBytes) == 0, "copy in");
      uint64_t before = p.dev->zero_copy_calls;
      CHILD_CHECK(trainit_allreduce(p.dev, send, recv, count, t, TRAINIT_SUM) == 0, "allreduce");
      CHILD_CHECK(p.dev->zero_copy_calls - before == 1, "allreduce: not zero copy");
      CHILD_CHECK(from_device(p.dev, recv, kBytes) == want, "allreduce, dtype %d: not the host's", dtype);
      CHILD_CHECK(from_device(p.dev, send, kBytes) == mine, "allreduce, dtype %d: its send changed", dtype);
      before = p.dev->zero_copy_calls;
      CHILD_CHECK(trainit_reduce(p.dev, send, rank == 2 ? recv : nullptr, count, t, TRAINIT_SUM, 2) == 0, "reduce");
      CHILD_CHECK(p.dev->zero_copy_calls - before == 1, "reduce: not zero copy");
      CHILD_CHECK(rank != 2 || from_device(p.dev, recv, kBytes) == want, "reduce: not the host's");
      CHILD_CHECK(trainit_reduce(p.dev, send, rank == 2 ? send : nullptr, count, t, TRAINIT_SUM, 2) == 0, "in place");
      CHILD_CHECK(p.dev->zero_copy_calls - before == 2, "reduce in place: not zero copy");
      CHILD_CHECK(from_device(p.dev, send, kBytes) == (rank == 2 ? want : mine), "reduce in place, rank %d", rank);
    }
    CHILD_CHECK(trainit_comm_deregister(p.dev, win) == 0, "deregister");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0, 0}));
}

// Registration and its calls are the ranks' agreement: where one rank's
// buffer differs (its size, not an allocation's start, registered already)
// every rank fails with -EINVAL and none keeps a window; ranks whose calls
// name different offsets all fail with -EINVAL and stay usable.
TEST(DeviceComm, RanksThatRegisterOrCallDifferentlyAllGetEinvalAndKeepNothing) {
  const std::string name = unique_name("window-differ");
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
    Pair p = join(name, rank, 2);
    constexpr size_t kBytes = 64 << 10;
    const Bytes ones = random_values(TRAINIT_F32, kBytes / 4, 1);
    auto* buf = static_cast<unsigned char*>(to_device(p.dev, ones, kBytes));
    CHILD_CHECK(trainit_comm_register(p.dev, buf, rank == 1 ? kBytes / 2 : kBytes) == -EINVAL, "sizes differ");
    CHILD_CHECK(trainit_comm_register(p.dev, rank == 1 ? buf + 256 : buf, kBytes / 2) == -EINVAL, "no start");
    CHILD_CHECK(trainit_comm_register(p.dev, nullptr, 0) == -EINVAL && trainit_comm_deregister(p.dev, buf) == -EINVAL,
                "nothing registered");
    CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, kBytes / 4, TRAINIT_F32, TRAINIT_SUM) == 0, "staged");
    CHILD_CHECK(p.dev->zero_copy_calls == 0, "a failed registration kept a window");
    CHILD_CHECK(trainit_comm_register(p.dev, buf, kBytes) == 0, "register");
    CHILD_CHECK(trainit_comm_register(p.dev, rank == 0 ? buf : nullptr, kBytes) == -EINVAL, "twice");
    unsigned char* at = buf + (rank == 1 ? 1024 : 0);
    CHILD_CHECK(trainit_allreduce(p.dev, at, at, 8192, TRAINIT_F32, TRAINIT_SUM) == -EINVAL, "offsets differ");
    CHILD_CHECK(from_device(p.dev, buf, kBytes) != ones, "the staged call left the buffer as it was");
    CHILD_CHECK(trainit_device_copy(p.dev, buf, ones.data(), kBytes) == 0, "copy in");
    CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, kBytes / 4, TRAINIT_F32, TRAINIT_SUM) == 0, "agreed");
    Bytes want = ones;
    CHILD_CHECK(trainit_allreduce(p.host, want.data(), want.data(), kBytes / 4, TRAINIT_F32, TRAINIT_SUM) == 0, "host");
    CHILD_CHECK(from_device(p.dev, buf, kBytes) == want && p.dev->zero_copy_calls == 2, "after the disagreement");
    CHILD_CHECK(trainit_comm_deregister(p.dev, buf) == 0 && trainit_device_free(p.dev, buf) == 0, "deregister, free");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
}

// Stream-ordered zero-copy calls in flight read the peers' buffers:
// deregistering waits for them, so every rank may free its buffer at once.
TEST(DeviceComm, DeregisteringWaitsForStreamOrderedCallsSoEveryRankMayFreeItsBuffer) {
  const std::string name = unique_name("window-stream");
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
    Pair p = join(name, rank, 2);
    const std::vector<float> one(16384, 1.0F);
    Bytes bytes(one.size() * 4);
    std::memcpy(bytes.data(), one.data(), bytes.size());
    void* buf = to_device(p.dev, bytes, bytes.size());
    CHILD_CHECK(trainit_comm_register(p.dev, buf, bytes.size()) == 0, "register");
    CHILD_CHECK(trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    for (int i = 0; i < 20; ++i) {
      CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, one.size(), TRAINIT_F32, TRAINIT_SUM) == 0, "enqueue %d", i);
    }
    CHILD_CHECK(trainit_comm_deregister(p.dev, buf) == 0, "deregister");
    CHILD_CHECK(trainit_comm_query(p.dev) == 0, "calls still in flight after deregistering");
    CHILD_CHECK(first_float(p.dev, buf) == 1048576.0F && p.dev->zero_copy_calls == 20, "20 doublings: %g",
                static_cast<double>(first_float(p.dev, buf)));
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    CHILD_CHECK(trainit_comm_set_stream(p.dev, nullptr) == 0, "unset");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
}

TEST(DeviceComm, RegisteringIsRefusedWithEopnotsuppByHostCommunicatorsAndBackendsTheHostDrives) {
  const std::string name = unique_name("window-refused");
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_LAUNCH", "0", 1);
    Pair p = join(name, rank, 2);
    void* buf = to_device(p.dev, {}, 4096);
    CHILD_CHECK(trainit_comm_register(p.dev, buf, 4096) == -EOPNOTSUPP, "a backend the host drives");
    CHILD_CHECK(trainit_comm_deregister(p.dev, buf) == -EOPNOTSUPP, "deregister there");
    void* host = trainit_alloc(p.host, 4096);
    CHILD_CHECK(trainit_comm_register(p.host, host, 4096) == -EOPNOTSUPP, "a host communicator");
    CHILD_CHECK(trainit_comm_register(nullptr, host, 4096) == -EINVAL, "no communicator");
    trainit_free(p.host, host);
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
}

// A registration that an import refuses on one rank (its fake device's
// table of regions full: -ENOMEM) fails on every rank, and every rank still
// reads every peer's handle: the sockets stay in step, so the next
// registrations map the right buffers and a zero-copy call on one of them
// is the host's, leaving the other window as it was.
TEST(DeviceComm, ARegistrationOneRanksImportRefusesFailsEverywhereAndLeavesTheSocketsInStep) {
  const std::string name = unique_name("window-import");
  const auto status = run_ranks(3, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
    Pair p = join(name, rank, 3);
    constexpr size_t kBytes = 64 << 10;
    void* first = to_device(p.dev, {}, kBytes);
    void* second = to_device(p.dev, {}, kBytes);
    std::vector<void*> filler;
    for (void* x = nullptr; rank == 2 && trainit_device_alloc(p.dev, 1, &x) == 0;) {
      filler.push_back(x);  // until the table is full
    }
    CHILD_CHECK(trainit_comm_register(p.dev, first, kBytes) != 0, "a registration rank 2 could not import");
    for (void* x : filler) {
      CHILD_CHECK(trainit_device_free(p.dev, x) == 0, "free");
    }
    CHILD_CHECK(trainit_barrier(p.dev) == 0, "the communicator is usable");
    CHILD_CHECK(trainit_comm_register(p.dev, first, kBytes) == 0 && trainit_comm_register(p.dev, second, kBytes) == 0,
                "register both");
    const Bytes kept = random_values(TRAINIT_F32, kBytes / 4, static_cast<uint32_t>(50 + rank));
    const Bytes input = random_values(TRAINIT_F32, kBytes / 4, static_cast<uint32_t>(rank));
    CHILD_CHECK(trainit_device_copy(p.dev, first, kept.data(), kBytes) == 0 &&
                    trainit_device_copy(p.dev, second, input.data(), kBytes) == 0,
                "copy in");
    CHILD_CHECK(trainit_allreduce(p.dev, second, second, kBytes / 4, TRAINIT_F32, TRAINIT_SUM) == 0, "allreduce");
    Bytes want = input;
    CHILD_CHECK(trainit_allreduce(p.host, want.data(), want.data(), kBytes / 4, TRAINIT_F32, TRAINIT_SUM) == 0, "host");
    CHILD_CHECK(trainit_barrier(p.dev) == 0, "barrier");
    CHILD_CHECK(from_device(p.dev, second, kBytes) == want && p.dev->zero_copy_calls == 1, "the zero-copy result");
    CHILD_CHECK(from_device(p.dev, first, kBytes) == kept, "a window the call does not name was written");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0, 0}));
}

// A peer whose sockets are gone mid-registration (as a peer that died):
// the handles can no longer be known to be in step, so the registration
// ends the communicator, and the others say so as for any call whose peer
// is gone: -ECONNABORTED, then -ECONNABORTED for every later call.
TEST(DeviceComm, APeerWhoseSocketsGoMidRegistrationEndsItWithEconnabortedOnTheOthers) {
  const std::string name = unique_name("window-gone");
  const auto status = run_ranks(3, [&](int rank) {
    setenv("TRAINIT_COLL_TIMEOUT", "20", 1);
    Pair p = join(name, rank, 3);
    void* buf = to_device(p.dev, {}, 4096);
    if (rank == 2) {
      for (int q = 0; q < 2; ++q) {
        close(p.dev->peer_socks[q]);
      }
    }
    const int r = trainit_comm_register(p.dev, buf, 4096);
    CHILD_CHECK(rank == 2 ? r != 0 : r == -ECONNABORTED, "register gave %s", trainit_strerror(r));
    CHILD_CHECK(trainit_barrier(p.dev) == -ECONNABORTED, "the communicator goes on");
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0, 0}));
}

// Registering and deregistering meet where the device calls meet: one
// rank's registration against its peer's barrier, or its deregistration
// against its peer's allreduce on the window, is -EINVAL on both, at once,
// and both stay usable (as a barrier against an allreduce is).
TEST(DeviceComm, ARegistrationAgainstAPeersDeviceCallIsEinvalOnBothAndBothStayUsable) {
  const std::string name = unique_name("window-against");
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_COLL_DEVICE_ONE_SHOT", "4096", 1);
    setenv("TRAINIT_COLL_TIMEOUT", "30", 1);
    Pair p = join(name, rank, 2);
    constexpr size_t kBytes = 64 << 10;
    void* buf = to_device(p.dev, random_values(TRAINIT_F32, kBytes / 4, 3), kBytes);
    int64_t start = now_ns();
    int r = rank == 0 ? trainit_comm_register(p.dev, buf, kBytes) : trainit_barrier(p.dev);
    CHILD_CHECK(r == -EINVAL && now_ns() - start < 10'000'000'000, "register against a barrier: %s",
                trainit_strerror(r));
    CHILD_CHECK(trainit_comm_register(p.dev, buf, kBytes) == 0, "register");
    start = now_ns();
    r = rank == 0 ? trainit_comm_deregister(p.dev, buf)
                  : trainit_allreduce(p.dev, buf, buf, kBytes / 4, TRAINIT_F32, TRAINIT_SUM);
    CHILD_CHECK(r == -EINVAL && now_ns() - start < 10'000'000'000, "deregister against an allreduce: %s",
                trainit_strerror(r));
    CHILD_CHECK(trainit_allreduce(p.dev, buf, buf, kBytes / 4, TRAINIT_F32, TRAINIT_SUM) == 0, "usable");
    CHILD_CHECK(trainit_comm_deregister(p.dev, buf) == 0 && trainit_device_free(p.dev, buf) == 0, "deregister");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
}

// The same with a stream set on the registering rank: the meeting that
// starts a registration is waited for there, so its -EINVAL is that call's
// own, as a synchronous call's, and leaves both ranks usable (an earlier
// stream-ordered call's error would end the communicator).
TEST(DeviceComm, ARegistrationWithAStreamSetAgainstAPeersBarrierIsEinvalOnBothAndBothStayUsable) {
  const std::string name = unique_name("window-against-stream");
  const auto status = run_ranks(2, [&](int rank) {
    setenv("TRAINIT_COLL_TIMEOUT", "30", 1);
    Pair p = join(name, rank, 2);
    constexpr size_t kBytes = 64 << 10;
    void* buf = to_device(p.dev, random_values(TRAINIT_F32, kBytes / 4, 3), kBytes);
    CHILD_CHECK(rank == 1 || trainit_comm_set_stream(p.dev, reinterpret_cast<void*>(1)) == 0, "set_stream");
    const int r = rank == 0 ? trainit_comm_register(p.dev, buf, kBytes) : trainit_barrier(p.dev);
    CHILD_CHECK(r == -EINVAL, "register against a barrier: %s", trainit_strerror(r));
    const int next = trainit_barrier(p.dev);
    CHILD_CHECK(next == 0, "the next barrier: %s", trainit_strerror(next));
    const int q = trainit_comm_query(p.dev);
    CHILD_CHECK(q == 0 || q == -EINPROGRESS, "query: %s", trainit_strerror(q));
    CHILD_CHECK(trainit_comm_set_stream(p.dev, nullptr) == 0, "set_stream(NULL)");
    CHILD_CHECK(trainit_device_free(p.dev, buf) == 0, "free");
    leave(p);
    return 0;
  });
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
}

// One rank destroys its communicator while its peer waits in a device
// call (a rank whose program ended early), with no TRAINIT_COLL_TIMEOUT to
// bound anything: the destroy meets the peer where device calls meet, so
// the peer's call ends (-EINVAL: a destroy is not its barrier) and its
// next finds the communicator ended, where both waited for good.
TEST(DeviceComm, ADestroyAgainstAPeersDeviceCallEndsBothWithoutATimeout) {
  const std::string name = unique_name("destroy-against");
  const auto status = run_ranks(
      2,
      [&](int rank) {
        unsetenv("TRAINIT_COLL_TIMEOUT");
        Pair p = join(name, rank, 2);
        if (rank == 1) {
          leave(p);
          return 0;
        }
        const int r = trainit_barrier(p.dev);
        CHILD_CHECK(r == -EINVAL || r == -ECONNABORTED, "the barrier against a destroy gave %s", trainit_strerror(r));
        CHILD_CHECK(trainit_barrier(p.dev) == -ECONNABORTED, "the communicator goes on without its peer");
        leave(p);
        return 0;
      },
      20);
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
}

}  // namespace

// The Ascend backend plugin (src/coll/plugins/ascend) against the mock AscendCL
// (tests/coll/mock_ascendcl): loading it with and without a runtime, the
// device rule, coll_backend_allreduce() across 2, 3 and 4 fork()ed ranks on
// distinct devices, every IPC rule broken on purpose (through the plugin and
// straight on the mock), a peer killed mid-exchange, and the mock's fault
// knobs that the device preflight relies on.
//
// Everything that loads the runtime runs in a fork()ed child, as a rank does:
// AscendCL's state does not survive fork(), so the test process itself never
// loads it. A child dlopens the mock by path first; the plugin's
// dlopen("libascendcl.so") then finds it by its soname. A check inside a
// child exits with 1 and says where; the parent waits with a deadline.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "child_support.h"
#include "coll/backend.h"
#include "coll/kernels.h"
#include "coll/plugins/ascend/acl.h"
#include "trainit/coll.h"

namespace {

using trainit::coll::coll_backend_allreduce;
using trainit::coll::coll_backend_last_error;
using trainit::coll::coll_backend_load;
using trainit::coll::coll_recv_handle;
using trainit::coll::coll_send_handle;
using trainit::coll::dtype_size;
using trainit::coll::kDtypes;
using trainit::coll::kernels_scalar;
using trainit::coll::kOps;

using trainit::coll::test::Bytes;
using trainit::coll::test::now_ns;
using trainit::coll::test::random_values;

// Waits at most deadline_ms for every child: their exit statuses (128 + n
// for a signal; -1 for one still running at the deadline, then killed).
std::vector<int> wait_children(const std::vector<pid_t>& pids, int deadline_ms = 60'000) {
  std::vector<int> status(pids.size(), -1);
  const int64_t deadline = now_ns() + static_cast<int64_t>(deadline_ms) * 1'000'000;
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

pid_t fork_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(70);  // the last resort, should the parent be gone
    _exit(body());
  }
  return pid;
}

// Runs body in one child: its exit status (0: every check passed).
int in_child(const std::function<int()>& body, int deadline_ms = 60'000) {
  return wait_children({fork_child(body)}, deadline_ms)[0];
}

// f16/bf16 values whose sums and products over up to four ranks are exact
// (coll_backend_allreduce rounds after each step, trainit_allreduce once).
Bytes exact_half_values(int dtype, size_t count, uint32_t seed) {
  static const uint16_t kF16[] = {0x3800, 0x3c00, 0x4000, 0xbc00, 0x3e00, 0x0000, 0x4200, 0xc000};
  static const uint16_t kBf16[] = {0x3f00, 0x3f80, 0x4000, 0xbf80, 0x3fc0, 0x0000, 0x4040, 0xc000};
  std::mt19937 rng(seed);
  Bytes out(count * 2);
  for (size_t i = 0; i < count; ++i) {
    const uint16_t v = (dtype == TRAINIT_F16 ? kF16 : kBf16)[rng() % 8];
    std::memcpy(&out[i * 2], &v, 2);
  }
  return out;
}

Bytes host_fold(int dtype, int op, const Bytes& dst, const Bytes& src) {
  Bytes out(dst.size());
  const void* ins[2] = {dst.data(), src.data()};
  kernels_scalar()->fold[dtype][op](out.data(), ins, 2, dst.size() / dtype_size(dtype));
  return out;
}

Bytes read_device(const trainit_coll_backend* b, const void* p, size_t bytes) {
  Bytes out(bytes);
  return b->copy(out.data(), p, bytes) == 0 ? out : Bytes{};
}

// --- the mock, straight -------------------------------------------------------

using aclError = int;
constexpr aclError kInvalidParam = 100000;
constexpr aclError kUninitialize = 100001;
constexpr aclError kInvalidDeviceId = 107001;
constexpr aclError kContextNull = 107002;
constexpr aclError kInvalidHandle = 107017;
constexpr aclError kFeatureNotSupport = 207000;
constexpr aclError kMemoryFree = 207002;
constexpr aclError kNoPermission = 207006;
constexpr aclError kIpcError = 507022;
constexpr aclrtMemcpyKind kH2D = ACL_MEMCPY_HOST_TO_DEVICE;
constexpr aclrtMemcpyKind kD2H = ACL_MEMCPY_DEVICE_TO_HOST;
constexpr aclrtMemcpyKind kD2D = ACL_MEMCPY_DEVICE_TO_DEVICE;
constexpr aclrtMemMallocPolicy kHugeFirst = ACL_MEM_MALLOC_HUGE_FIRST;

// The mock's entry points, for the rules the plugin itself never breaks
// (of the types the plugin declares them with: the library's).
struct MockAcl {
  aclError (*init)(const char*);
  aclError (*set_device)(int32_t);
  aclError (*malloc)(void**, size_t, aclrtMemMallocPolicy);
  aclError (*free)(void*);
  aclError (*memcpy)(void*, size_t, const void*, size_t, aclrtMemcpyKind);
  aclError (*memcpy_async)(void*, size_t, const void*, size_t, aclrtMemcpyKind, void*);
  aclError (*synchronize_device)();
  aclError (*create_stream)(void**);
  aclError (*synchronize_stream)(void*);
  aclError (*destroy_stream)(void*);
  aclError (*bare_tgid)(int32_t*);
  aclError (*export_key)(void*, size_t, char*, size_t, uint64_t);
  aclError (*set_import_pid)(const char*, int32_t*, size_t);
  aclError (*import_by_key)(void**, const char*, uint64_t);
  aclError (*ipc_close)(const char*);
  uint64_t (*violations)();
};

template <class F>
void bind(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  CHILD_CHECK(out != nullptr, "the mock lacks %s", name);
}

// In a child: the mock, loaded by path (so the plugin finds it by soname).
MockAcl load_mock() {
  void* lib = dlopen(TRAINIT_MOCK_ACL, RTLD_NOW | RTLD_GLOBAL);
  CHILD_CHECK(lib != nullptr, "dlopen %s: %s", TRAINIT_MOCK_ACL, dlerror());
  MockAcl m{};
  bind(lib, "aclInit", m.init);
  bind(lib, "aclrtSetDevice", m.set_device);
  bind(lib, "aclrtMalloc", m.malloc);
  bind(lib, "aclrtFree", m.free);
  bind(lib, "aclrtMemcpy", m.memcpy);
  bind(lib, "aclrtMemcpyAsync", m.memcpy_async);
  bind(lib, "aclrtSynchronizeDevice", m.synchronize_device);
  bind(lib, "aclrtCreateStream", m.create_stream);
  bind(lib, "aclrtSynchronizeStream", m.synchronize_stream);
  bind(lib, "aclrtDestroyStream", m.destroy_stream);
  bind(lib, "aclrtDeviceGetBareTgid", m.bare_tgid);
  bind(lib, "aclrtIpcMemGetExportKey", m.export_key);
  bind(lib, "aclrtIpcMemSetImportPid", m.set_import_pid);
  bind(lib, "aclrtIpcMemImportByKey", m.import_by_key);
  bind(lib, "aclrtIpcMemClose", m.ipc_close);
  bind(lib, "mockAclViolations", m.violations);
  return m;
}

// In a child: the mock on device, ready for memory calls.
MockAcl mock_on(int device) {
  const MockAcl m = load_mock();
  CHILD_CHECK(m.init(nullptr) == 0, "aclInit");
  const aclError rc = m.set_device(device);
  CHILD_CHECK(rc == 0, "aclrtSetDevice(%d): %d", device, rc);
  return m;
}

// In a child: the plugin over the mock, on logical device `device` (-1: the
// environment's rule).
const trainit_coll_backend* load_plugin(int device) {
  if (device >= 0) {
    setenv("TRAINIT_COLL_DEVICE", std::to_string(device).c_str(), 1);
  }
  load_mock();
  const trainit_coll_backend* b = nullptr;
  const int rc = coll_backend_load(TRAINIT_ASCEND_PLUGIN, &b);
  CHILD_CHECK(rc == 0 && b != nullptr, "load: %d %s", rc, coll_backend_last_error());
  return b;
}

// In a child: stderr into a file, read back by text().
class CapturedStderr {
 public:
  CapturedStderr() : fd_(open("/tmp", O_TMPFILE | O_RDWR, 0600)) {
    CHILD_CHECK(fd_ >= 0 && dup2(fd_, STDERR_FILENO) == STDERR_FILENO, "no stderr file: %s", std::strerror(errno));
  }
  std::string text() const {
    std::string out;
    char buf[4096];
    ssize_t n = 0;
    off_t at = 0;
    while ((n = pread(fd_, buf, sizeof buf, at)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      at += n;
    }
    return out;
  }

 private:
  int fd_;
};

bool contains(const std::string& text, const char* what) {
  return text.find(what) != std::string::npos;
}

// A shared page the children write their timings and results into.
template <class T>
T* shared_array(size_t n) {
  void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  return static_cast<T*>(p);
}

// SOCK_SEQPACKET socketpairs between every two of n ranks: [r][peer].
std::vector<std::vector<int>> full_mesh(int n) {
  std::vector<std::vector<int>> socks(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), -1));
  for (int r = 0; r < n; ++r) {
    for (int peer = r + 1; peer < n; ++peer) {
      int sv[2];
      EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
      socks[r][peer] = sv[0];
      socks[peer][r] = sv[1];
    }
  }
  return socks;
}

void close_all_but(std::vector<std::vector<int>>& socks, int keep) {
  for (size_t r = 0; r < socks.size(); ++r) {
    for (int& fd : socks[r]) {
      if (static_cast<int>(r) != keep && fd >= 0) {
        close(fd);
        fd = -1;
      }
    }
  }
}

// Every test gets its own mock device directory and a clean environment.
class Ascend : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir =
        access("/dev/shm", W_OK) == 0 ? "/dev/shm/trainit-mock-acl-XXXXXX" : "/tmp/trainit-mock-acl-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    setenv("MOCK_ACL_DIR", dir_.c_str(), 1);
    for (const char* name : kVariables) {
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) {
      unsetenv(name);
    }
    unsetenv("MOCK_ACL_DIR");
    // What killed children left: keyed files nobody closed.
    const std::string rm = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(rm.c_str()), 0);
  }
  static constexpr const char* kVariables[] = {"MOCK_ACL_FAULT",           "MOCK_ACL_DEVICES", "TRAINIT_COLL_DEVICE",
                                               "ASCEND_DEVICE_ID",         "DEVICE_ID",        "ASCEND_VISIBLE_DEVICES",
                                               "ASCEND_RT_VISIBLE_DEVICES"};
  std::string dir_;
};

// --- loading ---------------------------------------------------------------------

TEST_F(Ascend, ThePluginLoadsAgainstTheMockAndReducesEveryTypeAndOpLikeTheHostKernels) {
  EXPECT_EQ(in_child([] {
              const trainit_coll_backend* b = load_plugin(0);
              CHILD_CHECK(std::strcmp(b->name, "ascend") == 0 && b->abi_version == TRAINIT_COLL_BACKEND_ABI, "%s",
                          b->name);
              CHILD_CHECK(b->process_id != nullptr && b->allow_import != nullptr, "ABI 2 entries");
              const size_t count = 1031;
              for (int dtype = 0; dtype < kDtypes; ++dtype) {
                const size_t bytes = count * dtype_size(dtype);
                const Bytes x = random_values(dtype, count, 1U + static_cast<uint32_t>(dtype));
                const Bytes y = random_values(dtype, count, 100U + static_cast<uint32_t>(dtype));
                void* dst = nullptr;
                void* src = nullptr;
                CHILD_CHECK(b->alloc(bytes, &dst) == 0 && b->alloc(bytes, &src) == 0, "alloc");
                for (int op = 0; op < kOps; ++op) {
                  CHILD_CHECK(b->copy(dst, x.data(), bytes) == 0 && b->copy(src, y.data(), bytes) == 0, "copy in");
                  const int rc = b->reduce(dst, src, count, dtype, op);
                  CHILD_CHECK(rc == 0, "reduce: %d", rc);
                  CHILD_CHECK(b->signal() == 0 && b->wait() == 0, "signal/wait");
                  CHILD_CHECK(read_device(b, dst, bytes) == host_fold(dtype, op, x, y), "dtype %d op %d", dtype, op);
                }
                CHILD_CHECK(b->free(dst) == 0 && b->free(src) == 0, "free");
              }
              // Host memory is not device memory.
              void* dst = nullptr;
              Bytes host(64);
              CHILD_CHECK(b->alloc(64, &dst) == 0, "alloc");
              CHILD_CHECK(b->reduce(dst, host.data(), 16, TRAINIT_F32, 0) == -EFAULT, "reduce from host memory");
              CHILD_CHECK(b->free(dst) == 0, "free");
              CHILD_CHECK(b->violations() == 1, "%llu violations", static_cast<unsigned long long>(b->violations()));
              return 0;
            }),
            0);
}

// With aclnn's operators (the mock libopapi.so, loaded first as the runtime
// is), a fold runs on the device: every type and op, three inputs, one of
// them the destination, bitwise the host kernels' n-input fold; the
// operators ran, and neither mock saw a rule broken.
TEST_F(Ascend, WithLibopapiAFoldRunsOnTheDeviceThroughAclnnAndEqualsTheHostKernels) {
  EXPECT_EQ(in_child([] {
              void* nn = dlopen(TRAINIT_MOCK_ACLNN, RTLD_NOW | RTLD_GLOBAL);
              CHILD_CHECK(nn != nullptr, "dlopen %s: %s", TRAINIT_MOCK_ACLNN, dlerror());
              uint64_t (*calls)() = nullptr;
              uint64_t (*nn_violations)() = nullptr;
              bind(nn, "mockAclnnCalls", calls);
              bind(nn, "mockAclnnViolations", nn_violations);
              const trainit_coll_backend* b = load_plugin(0);
              const size_t count = 1031;
              for (int dtype = 0; dtype < kDtypes; ++dtype) {
                const size_t bytes = count * dtype_size(dtype);
                Bytes in[3];
                void* dev[3] = {};
                for (int i = 0; i < 3; ++i) {
                  in[i] = random_values(dtype, count, 7U * static_cast<uint32_t>(i + 1) + static_cast<uint32_t>(dtype));
                  CHILD_CHECK(b->alloc(bytes, &dev[i]) == 0, "alloc");
                }
                for (int op = 0; op < kOps; ++op) {
                  for (int i = 0; i < 3; ++i) {
                    CHILD_CHECK(b->copy(dev[i], in[i].data(), bytes) == 0, "copy in");
                  }
                  const uint64_t before = calls();
                  const int rc = b->fold(dev[0], dev, 3, count, dtype, op);
                  CHILD_CHECK(rc == 0, "fold: %d", rc);
                  CHILD_CHECK(calls() > before, "dtype %d op %d: no aclnn operator ran", dtype, op);
                  Bytes want(bytes);
                  const void* ins[3] = {in[0].data(), in[1].data(), in[2].data()};
                  kernels_scalar()->fold[dtype][op](want.data(), ins, 3, count);
                  CHILD_CHECK(read_device(b, dev[0], bytes) == want, "dtype %d op %d: not the host fold", dtype, op);
                }
                for (void* d : dev) {
                  CHILD_CHECK(b->free(d) == 0, "free");
                }
              }
              CHILD_CHECK(b->violations() == 0 && nn_violations() == 0, "violations: plugin %llu, operators %llu",
                          static_cast<unsigned long long>(b->violations()),
                          static_cast<unsigned long long>(nn_violations()));
              return 0;
            }),
            0);
}

TEST_F(Ascend, WithoutLibascendclTheInitIsEnodevAndSaysWhyOnStderr) {
  // Where a real CANN is installed, dlopen finds it: then the plugin must
  // either load or say that no device answered.
  const bool real_runtime = in_child([] { return dlopen("libascendcl.so", RTLD_LAZY) != nullptr ? 0 : 1; }) == 0;
  EXPECT_EQ(in_child([real_runtime] {
              const CapturedStderr err;
              const trainit_coll_backend* b = nullptr;
              const int rc = coll_backend_load(TRAINIT_ASCEND_PLUGIN, &b);
              const std::string why = coll_backend_last_error();
              if (real_runtime) {
                CHILD_CHECK(rc == 0 || rc == -ENODEV, "with a real AscendCL: %d %s", rc, why.c_str());
                return 0;
              }
              CHILD_CHECK(rc == -ENODEV && b == nullptr, "%d", rc);
              CHILD_CHECK(contains(why, "backend init failed: ascend: no device or no driver (-ENODEV)"), "%s",
                          why.c_str());
              const std::string said = err.text();
              CHILD_CHECK(contains(said, "trainit ascend backend") && contains(said, "no AscendCL runtime") &&
                              contains(said, "libascendcl.so"),
                          "stderr: %s", said.c_str());
              CHILD_CHECK(std::count(said.begin(), said.end(), '\n') == 1, "one line: %s", said.c_str());
              return 0;
            }),
            0);
}

// The init's result and its stderr in a child with the given variables.
struct InitResult {
  int rc = 0;
  std::string said;
};

InitResult init_with(const std::vector<std::pair<const char*, const char*>>& env) {
  auto* shared = shared_array<char>(4096);
  const int status = in_child([&] {
    for (const auto& [name, value] : env) {
      setenv(name, value, 1);
    }
    const CapturedStderr err;
    load_mock();
    const trainit_coll_backend* b = nullptr;
    const int rc = coll_backend_load(TRAINIT_ASCEND_PLUGIN, &b);
    const std::string said = err.text();
    std::memcpy(shared, &rc, sizeof rc);
    static_cast<void>(std::snprintf(shared + sizeof rc, 4096 - sizeof rc, "%s", said.c_str()));
    return 0;
  });
  InitResult r;
  EXPECT_EQ(status, 0);
  std::memcpy(&r.rc, shared, sizeof r.rc);
  r.said = shared + sizeof r.rc;
  munmap(shared, 4096);
  return r;
}

TEST_F(Ascend, ADeviceThatFailsToSetUpOrDoesNotExistIsEnodevWithItsAclErrorOnStderr) {
  const InitResult failing = init_with({{"MOCK_ACL_FAULT", "2:fail"}, {"TRAINIT_COLL_DEVICE", "2"}});
  EXPECT_EQ(failing.rc, -ENODEV);
  EXPECT_TRUE(contains(failing.said, "no usable device 2: aclrtSetDevice failed: aclError 507033")) << failing.said;
  const InitResult absent = init_with({{"MOCK_ACL_DEVICES", "2"}, {"TRAINIT_COLL_DEVICE", "5"}});
  EXPECT_EQ(absent.rc, -ENODEV);
  EXPECT_TRUE(contains(absent.said, "no usable device 5: aclrtSetDevice failed: aclError 107001")) << absent.said;
  const InitResult garbage = init_with({{"DEVICE_ID", "two"}});
  EXPECT_EQ(garbage.rc, -EINVAL);
  EXPECT_TRUE(contains(garbage.said, "DEVICE_ID=\"two\" is not a device number")) << garbage.said;
}

// Physical device 3 fails to set up: whether an init fails tells which
// device the rule chose.
TEST_F(Ascend, TheDeviceIsTrainitCollDeviceElseTheOneVisibleDeviceElseAscendDeviceIdElseDeviceId) {
  const char* kFault = "3:fail";
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"DEVICE_ID", "3"}}).rc, -ENODEV);
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"DEVICE_ID", "2"}}).rc, 0);
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"ASCEND_DEVICE_ID", "3"}, {"DEVICE_ID", "2"}}).rc, -ENODEV);
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"TRAINIT_COLL_DEVICE", "1"}, {"DEVICE_ID", "3"}}).rc, 0);
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"TRAINIT_COLL_DEVICE", "3"}}).rc, -ENODEV);
  // One visible device is logical 0, whatever DEVICE_ID says.
  const InitResult one = init_with({{"MOCK_ACL_FAULT", kFault}, {"ASCEND_VISIBLE_DEVICES", "3"}, {"DEVICE_ID", "3"}});
  EXPECT_EQ(one.rc, -ENODEV);
  EXPECT_TRUE(contains(one.said, "no usable device 0: aclrtSetDevice failed: aclError 507033")) << one.said;
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"ASCEND_VISIBLE_DEVICES", "5"}, {"DEVICE_ID", "3"}}).rc, 0);
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"ASCEND_RT_VISIBLE_DEVICES", "3"}}).rc, -ENODEV);
  // Several visible devices: DEVICE_ID picks among them.
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}, {"ASCEND_VISIBLE_DEVICES", "4,3"}, {"DEVICE_ID", "1"}}).rc, -ENODEV);
  EXPECT_EQ(init_with({{"MOCK_ACL_FAULT", kFault}}).rc, 0);  // nothing set: 0
}

// --- coll_backend_allreduce over the plugin ---------------------------------

// n fork()ed ranks, rank r on device r (so every import is another device's
// memory), every dtype and op, each result bitwise trainit_allreduce's of the
// same values on host memory; no rule broken on either side.
void allreduce_across(int n) {
  auto socks = full_mesh(n);
  const std::string name = "ascend-" + std::to_string(getpid()) + "-" + std::to_string(n);
  std::vector<pid_t> pids;
  pids.reserve(static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    pids.push_back(fork_child([&, rank] {
      close_all_but(socks, rank);
      const trainit_coll_backend* b = load_plugin(rank);
      const MockAcl mock = load_mock();
      trainit_comm* comm = nullptr;
      int rc = trainit_comm_init(&comm, name.c_str(), rank, n);
      CHILD_CHECK(rc == 0, "trainit_comm_init: %s", trainit_strerror(rc));
      const size_t count = 4099;
      for (int dtype = 0; dtype < kDtypes; ++dtype) {
        const size_t bytes = count * dtype_size(dtype);
        for (int op = 0; op < kOps; ++op) {
          const auto seed = static_cast<uint32_t>(1000 * rank + 10 * dtype + op);
          const bool half = dtype == TRAINIT_F16 || dtype == TRAINIT_BF16;
          const Bytes mine = half ? exact_half_values(dtype, count, seed) : random_values(dtype, count, seed);
          Bytes want(bytes);
          rc = trainit_allreduce(comm, mine.data(), want.data(), count, static_cast<trainit_dtype>(dtype),
                                 static_cast<trainit_op>(op));
          CHILD_CHECK(rc == 0, "trainit_allreduce: %s", trainit_strerror(rc));
          void* buf = nullptr;
          CHILD_CHECK(b->alloc(bytes, &buf) == 0 && b->copy(buf, mine.data(), bytes) == 0, "alloc");
          rc = coll_backend_allreduce(comm, b, socks[rank].data(), buf, count, dtype, op);
          CHILD_CHECK(rc == 0, "coll_backend_allreduce: %s", trainit_strerror(rc));
          CHILD_CHECK(read_device(b, buf, bytes) == want, "rank %d dtype %d op %d: not the host allreduce's bytes",
                      rank, dtype, op);
          rc = b->free(buf);
          CHILD_CHECK(rc == 0, "free after the allreduce: %d", rc);
        }
      }
      CHILD_CHECK(b->violations() == 0 && mock.violations() == 0, "rules broken: plugin %llu, AscendCL %llu",
                  static_cast<unsigned long long>(b->violations()), static_cast<unsigned long long>(mock.violations()));
      trainit_comm_destroy(comm);
      return 0;
    }));
  }
  close_all_but(socks, -1);
  EXPECT_EQ(wait_children(pids), std::vector<int>(static_cast<size_t>(n), 0));
}

TEST_F(Ascend, AllreduceOfTwoRanksOnTwoDevicesEqualsTheHostAllreduceForEveryTypeAndOp) {
  allreduce_across(2);
}

TEST_F(Ascend, AllreduceOfThreeRanksOnThreeDevicesEqualsTheHostAllreduceForEveryTypeAndOp) {
  allreduce_across(3);
}

TEST_F(Ascend, AllreduceOfFourRanksOnFourDevicesEqualsTheHostAllreduceForEveryTypeAndOp) {
  allreduce_across(4);
}

// --- the IPC rules, broken on purpose through the plugin ---------------------

// An exporter (device 0) and an importer (device 1) joined by a socketpair;
// each body returns its exit status. The exporter sends its handle when told.
struct Handle {
  unsigned char bytes[TRAINIT_COLL_HANDLE_MAX] = {};
  size_t len = sizeof bytes;
};

bool send_byte(int sock, char c) {
  return send(sock, &c, 1, MSG_NOSIGNAL) == 1;
}
char recv_byte(int sock) {
  char c = 0;
  return recv(sock, &c, 1, 0) == 1 ? c : '\0';
}

int32_t send_id(const trainit_coll_backend* b, int sock) {
  int32_t id = 0;
  CHILD_CHECK(b->process_id(&id) == 0 && coll_send_handle(sock, &id, sizeof id, -1) == 0, "send id");
  return id;
}
int32_t recv_id(int sock) {
  int32_t id = 0;
  size_t len = sizeof id;
  int fd = -1;
  CHILD_CHECK(coll_recv_handle(sock, &id, &len, &fd) == 0 && len == sizeof id, "recv id");
  return id;
}
Handle recv_handle(int sock) {
  Handle h;
  int fd = -1;
  CHILD_CHECK(coll_recv_handle(sock, h.bytes, &h.len, &fd) == 0 && fd == -1, "recv handle (and no fd)");
  return h;
}

// Where the handle holds its AscendCL key: 64 hex digits and a NUL.
size_t key_offset(const Handle& h) {
  for (size_t at = 0; at + 65 <= h.len; ++at) {
    const unsigned char* k = h.bytes + at;
    if (k[64] == '\0' && std::all_of(k, k + 64, [](unsigned char c) { return std::isxdigit(c) != 0; })) {
      return at;
    }
  }
  CHILD_CHECK(false, "no key in the handle");
  return 0;
}

void two_processes(const std::function<int(int)>& exporter, const std::function<int(int)>& importer) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  const pid_t a = fork_child([&] {
    close(sv[1]);
    return exporter(sv[0]);
  });
  const pid_t b = fork_child([&] {
    close(sv[0]);
    return importer(sv[1]);
  });
  close(sv[0]);
  close(sv[1]);
  EXPECT_EQ(wait_children({a, b}), (std::vector<int>{0, 0}));
}

TEST_F(Ascend, AnImportByAPeerTheExporterDidNotAllowIsEaccesUntilItIsAllowed) {
  const Bytes fill = random_values(TRAINIT_U8, 3000, 5);
  two_processes(
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(0);
        const int32_t peer = recv_id(sock);
        void* p = nullptr;
        CHILD_CHECK(b->alloc(fill.size(), &p) == 0 && b->copy(p, fill.data(), fill.size()) == 0, "alloc");
        Handle h;
        int fd = 0;
        CHILD_CHECK(b->export_handle(p, fill.size(), h.bytes, &h.len, &fd) == 0 && fd == -1, "export: no fd");
        CHILD_CHECK(coll_send_handle(sock, h.bytes, h.len, -1) == 0, "send");  // not allowed yet
        CHILD_CHECK(recv_byte(sock) == 'r', "the importer's refusal");
        CHILD_CHECK(b->allow_import(h.bytes, h.len, &peer, 1) == 0, "allow");
        CHILD_CHECK(send_byte(sock, 'a'), "allowed");
        CHILD_CHECK(recv_byte(sock) == 'c', "the importer's close");
        CHILD_CHECK(b->free(p) == 0, "free");
        return 0;
      },
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(1);
        const MockAcl mock = load_mock();
        send_id(b, sock);
        const Handle h = recv_handle(sock);
        void* p = nullptr;
        const CapturedStderr err;
        int rc = b->import_handle(h.bytes, h.len, -1, &p);
        CHILD_CHECK(rc == -EACCES && p == nullptr, "import without being allowed: %d", rc);
        const std::string said = err.text();
        CHILD_CHECK(contains(said, "aclrtIpcMemImportByKey failed: aclError 207006") &&
                        contains(said, "is not among the importers the exporter"),
                    "%s", said.c_str());
        CHILD_CHECK(b->violations() == 1 && mock.violations() == 1, "counted");
        CHILD_CHECK(send_byte(sock, 'r') && recv_byte(sock) == 'a', "steps");
        rc = b->import_handle(h.bytes, h.len, -1, &p);
        CHILD_CHECK(rc == 0, "import once allowed: %d", rc);
        CHILD_CHECK(read_device(b, p, fill.size()) == fill, "the exporter's bytes through the import");
        CHILD_CHECK(b->close_import(p) == 0, "close");
        return send_byte(sock, 'c') ? 0 : 2;
      });
}

TEST_F(Ascend, AFreeBeforeTheImporterClosedIsEbusyAndLeavesTheBufferUntilItCloses) {
  const Bytes fill = random_values(TRAINIT_U8, 5000, 6);
  two_processes(
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(0);
        const MockAcl mock = load_mock();
        const int32_t peer = recv_id(sock);
        void* p = nullptr;
        CHILD_CHECK(b->alloc(fill.size(), &p) == 0 && b->copy(p, fill.data(), fill.size()) == 0, "alloc");
        Handle h;
        int fd = -1;
        CHILD_CHECK(b->export_handle(p, fill.size(), h.bytes, &h.len, &fd) == 0, "export");
        CHILD_CHECK(b->allow_import(h.bytes, h.len, &peer, 1) == 0, "allow");
        CHILD_CHECK(coll_send_handle(sock, h.bytes, h.len, -1) == 0, "send");
        CHILD_CHECK(recv_byte(sock) == 'i', "imported");
        const CapturedStderr err;
        const int rc = b->free(p);
        CHILD_CHECK(rc == -EBUSY, "free before the importer closed: %d", rc);
        const std::string said = err.text();
        CHILD_CHECK(contains(said, "aclError 507022") && contains(said, "importers close first"), "%s", said.c_str());
        CHILD_CHECK(b->violations() == 1 && mock.violations() == 1, "counted");
        CHILD_CHECK(read_device(b, p, fill.size()) == fill, "the refused free changed the buffer");
        CHILD_CHECK(send_byte(sock, 'f') && recv_byte(sock) == 'c', "steps");
        CHILD_CHECK(b->free(p) == 0, "free once the importer closed");
        return 0;
      },
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(1);
        send_id(b, sock);
        const Handle h = recv_handle(sock);
        void* p = nullptr;
        CHILD_CHECK(b->import_handle(h.bytes, h.len, -1, &p) == 0, "import");
        CHILD_CHECK(send_byte(sock, 'i') && recv_byte(sock) == 'f', "steps");
        CHILD_CHECK(read_device(b, p, fill.size()) == fill, "the import after the refused free");
        CHILD_CHECK(b->close_import(p) == 0, "close");
        return send_byte(sock, 'c') ? 0 : 2;
      });
}

TEST_F(Ascend, AnUnknownOrClosedKeyIsEnoentAndAForeignHandleIsEinval) {
  two_processes(
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(0);
        const int32_t peer = recv_id(sock);
        void* p = nullptr;
        CHILD_CHECK(b->alloc(100, &p) == 0, "alloc");
        Handle h;
        int fd = -1;
        CHILD_CHECK(b->export_handle(p, 100, h.bytes, &h.len, &fd) == 0, "export");
        CHILD_CHECK(b->allow_import(h.bytes, h.len, &peer, 1) == 0, "allow");
        CHILD_CHECK(b->free(p) == 0, "free: closes the key");
        CHILD_CHECK(coll_send_handle(sock, h.bytes, h.len, -1) == 0, "send the dead handle");
        return recv_byte(sock) == 'd' ? 0 : 2;
      },
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(1);
        const MockAcl mock = load_mock();
        send_id(b, sock);
        Handle h = recv_handle(sock);
        void* p = nullptr;
        int rc = b->import_handle(h.bytes, h.len, -1, &p);
        CHILD_CHECK(rc == -ENOENT && p == nullptr, "a closed key: %d", rc);
        // Another key of the right form that no memory has.
        std::memset(h.bytes + key_offset(h), 'a', 64);
        rc = b->import_handle(h.bytes, h.len, -1, &p);
        CHILD_CHECK(rc == -ENOENT, "an unknown key: %d", rc);
        CHILD_CHECK(mock.violations() == 2, "AscendCL counted %llu",
                    static_cast<unsigned long long>(mock.violations()));
        // Not the plugin's handles at all: refused before AscendCL sees them.
        rc = b->import_handle(h.bytes, h.len - 1, -1, &p);
        CHILD_CHECK(rc == -EINVAL, "a short handle: %d", rc);
        const Bytes garbage = random_values(TRAINIT_U8, h.len, 9);
        rc = b->import_handle(garbage.data(), h.len, -1, &p);
        CHILD_CHECK(rc == -EINVAL, "garbage: %d", rc);
        CHILD_CHECK(b->violations() == 4 && mock.violations() == 2, "counted: plugin %llu",
                    static_cast<unsigned long long>(b->violations()));
        return send_byte(sock, 'd') ? 0 : 2;
      });
}

TEST_F(Ascend, ADoubleFreeAndADoubleCloseAreEinvalAndCounted) {
  two_processes(
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(0);
        const int32_t peer = recv_id(sock);
        void* p = nullptr;
        CHILD_CHECK(b->alloc(64, &p) == 0, "alloc");
        Handle h;
        int fd = -1;
        CHILD_CHECK(b->export_handle(p, 64, h.bytes, &h.len, &fd) == 0, "export");
        CHILD_CHECK(b->allow_import(h.bytes, h.len, &peer, 1) == 0, "allow");
        CHILD_CHECK(coll_send_handle(sock, h.bytes, h.len, -1) == 0, "send");
        CHILD_CHECK(recv_byte(sock) == 'c', "closed");
        CHILD_CHECK(b->free(p) == 0, "free");
        const int rc = b->free(p);
        CHILD_CHECK(rc == -EINVAL && b->violations() == 1, "a second free: %d", rc);
        return 0;
      },
      [&](int sock) {
        const trainit_coll_backend* b = load_plugin(1);
        send_id(b, sock);
        const Handle h = recv_handle(sock);
        void* p = nullptr;
        CHILD_CHECK(b->import_handle(h.bytes, h.len, -1, &p) == 0, "import");
        CHILD_CHECK(b->free(p) == -EINVAL, "free of an import");
        CHILD_CHECK(b->close_import(p) == 0, "close");
        const int rc = b->close_import(p);
        CHILD_CHECK(rc == -EINVAL && b->violations() == 2, "a second close: %d", rc);
        return send_byte(sock, 'c') ? 0 : 2;
      });
}

// --- the rules, broken straight on the mock -------------------------------------

TEST_F(Ascend, TheMockRefusesAKeyBufferShorterThan65Bytes) {
  EXPECT_EQ(in_child([] {
              const MockAcl m = mock_on(0);
              void* p = nullptr;
              CHILD_CHECK(m.malloc(&p, 256, kHugeFirst) == 0, "malloc");
              char key[65];
              aclError rc = m.export_key(p, 256, key, 64, 0);
              CHILD_CHECK(rc == kInvalidParam && m.violations() == 1, "a 64-byte key buffer: %d", rc);
              rc = m.export_key(p, 256, key, sizeof key, 0);
              CHILD_CHECK(rc == 0 && std::strlen(key) == 64, "a 65-byte one: %d", rc);
              CHILD_CHECK(m.ipc_close(key) == 0 && m.free(p) == 0, "close, free");
              return 0;
            }),
            0);
}

TEST_F(Ascend, TheMockRefusesCallsBeforeAclInitOrAclrtSetDevice) {
  EXPECT_EQ(in_child([] {
              const MockAcl m = load_mock();
              void* p = nullptr;
              aclError rc = m.malloc(&p, 64, kHugeFirst);
              CHILD_CHECK(rc == kUninitialize, "malloc before aclInit: %d", rc);
              rc = m.set_device(0);
              CHILD_CHECK(rc == kUninitialize, "aclrtSetDevice before aclInit: %d", rc);
              CHILD_CHECK(m.init(nullptr) == 0, "aclInit");
              rc = m.malloc(&p, 64, kHugeFirst);
              CHILD_CHECK(rc == kContextNull, "malloc before aclrtSetDevice: %d", rc);
              rc = m.synchronize_device();
              CHILD_CHECK(rc == kContextNull, "synchronize before aclrtSetDevice: %d", rc);
              rc = m.set_device(8);
              CHILD_CHECK(rc == kInvalidDeviceId, "a ninth device of eight: %d", rc);
              CHILD_CHECK(m.violations() == 5, "%llu", static_cast<unsigned long long>(m.violations()));
              // A fork()ed child inherits nothing: it must initialise again.
              const int child = in_child([&] { return m.malloc(&p, 64, kHugeFirst) == kUninitialize ? 0 : 1; });
              CHILD_CHECK(child == 0, "the forked child's malloc");
              return 0;
            }),
            0);
}

TEST_F(Ascend, TheMockRefusesADoubleFreeAndADoubleClose) {
  EXPECT_EQ(in_child([] {
              const MockAcl m = mock_on(0);
              void* p = nullptr;
              CHILD_CHECK(m.malloc(&p, 64, kHugeFirst) == 0, "malloc");
              char key[65];
              CHILD_CHECK(m.export_key(p, 64, key, sizeof key, 0) == 0, "export");
              aclError rc = m.free(p);
              CHILD_CHECK(rc == kMemoryFree, "free with its key open: %d", rc);
              CHILD_CHECK(m.ipc_close(key) == 0, "close");
              rc = m.ipc_close(key);
              CHILD_CHECK(rc == kInvalidHandle, "a second close: %d", rc);
              CHILD_CHECK(m.free(p) == 0, "free");
              rc = m.free(p);
              CHILD_CHECK(rc == kInvalidParam, "a second free: %d", rc);
              CHILD_CHECK(m.violations() == 3, "%llu", static_cast<unsigned long long>(m.violations()));
              return 0;
            }),
            0);
}

// An asynchronous copy is done when its stream is synchronised, not before,
// in the order queued; freeing what a queued copy uses is refused, and a
// stream the process did not make (or destroyed) is refused.
TEST_F(Ascend, TheMockDoesAnAsynchronousCopyOnlyOnceItsStreamIsSynchronised) {
  EXPECT_EQ(in_child([] {
              const MockAcl m = mock_on(0);
              void* a = nullptr;
              void* b = nullptr;
              CHILD_CHECK(m.malloc(&a, 64, kHugeFirst) == 0 && m.malloc(&b, 64, kHugeFirst) == 0, "malloc");
              const Bytes ones(64, 1);
              const Bytes twos(64, 2);
              CHILD_CHECK(m.memcpy(a, 64, ones.data(), 64, kH2D) == 0 && m.memcpy(b, 64, twos.data(), 64, kH2D) == 0,
                          "fill");
              void* s = nullptr;
              CHILD_CHECK(m.create_stream(&s) == 0 && s != nullptr, "aclrtCreateStream");
              CHILD_CHECK(m.memcpy_async(b, 64, a, 64, kD2D, s) == 0, "queue a copy");
              Bytes back(64);
              CHILD_CHECK(m.memcpy(back.data(), 64, b, 64, kD2H) == 0 && back == twos, "not done before the sync");
              aclError rc = m.free(a);
              CHILD_CHECK(rc == kMemoryFree, "a free of what a queued copy reads: %d", rc);
              CHILD_CHECK(m.synchronize_stream(s) == 0, "aclrtSynchronizeStream");
              CHILD_CHECK(m.memcpy(back.data(), 64, b, 64, kD2H) == 0 && back == ones, "done after it");
              CHILD_CHECK(m.memcpy(a, 64, twos.data(), 64, kH2D) == 0, "refill");
              CHILD_CHECK(m.memcpy_async(b, 64, a, 64, kD2D, nullptr) == 0, "on the default stream");
              CHILD_CHECK(m.synchronize_device() == 0, "aclrtSynchronizeDevice does every stream");
              CHILD_CHECK(m.memcpy(back.data(), 64, b, 64, kD2H) == 0 && back == twos, "the default stream's copy");
              CHILD_CHECK(m.destroy_stream(s) == 0, "aclrtDestroyStream");
              rc = m.synchronize_stream(s);
              CHILD_CHECK(rc == kInvalidParam, "a destroyed stream: %d", rc);
              int not_a_stream = 0;
              rc = m.memcpy_async(b, 64, a, 64, kD2D, &not_a_stream);
              CHILD_CHECK(rc == kInvalidParam, "a stream the process did not make: %d", rc);
              CHILD_CHECK(m.free(a) == 0 && m.free(b) == 0, "free");
              CHILD_CHECK(m.violations() == 3, "%llu", static_cast<unsigned long long>(m.violations()));
              return 0;
            }),
            0);
}

// The exporter (device 0) frees and closes while the importer (device 1)
// holds the memory; the importer's synchronous and host copies of another
// device's memory are refused, its asynchronous device-to-device copy works.
TEST_F(Ascend, TheMockKeepsSharedMemoryUntilTheImporterClosesAndLimitsCrossDeviceCopies) {
  two_processes(
      [&](int sock) {
        const MockAcl m = mock_on(0);
        void* p = nullptr;
        CHILD_CHECK(m.malloc(&p, 64, kHugeFirst) == 0, "malloc");
        const Bytes fill(64, 0x5a);
        CHILD_CHECK(m.memcpy(p, 64, fill.data(), 64, kH2D) == 0, "fill");
        char key[65];
        CHILD_CHECK(m.export_key(p, 64, key, sizeof key, 0) == 0, "export");
        int32_t peer = recv_id(sock);
        CHILD_CHECK(m.set_import_pid(key, &peer, 1) == 0, "allow");
        CHILD_CHECK(coll_send_handle(sock, key, sizeof key, -1) == 0, "send");
        CHILD_CHECK(recv_byte(sock) == 'i', "imported");
        aclError rc = m.ipc_close(key);
        CHILD_CHECK(rc == kIpcError, "the exporter closes first: %d", rc);
        rc = m.free(p);
        CHILD_CHECK(rc == kMemoryFree, "free with a live import: %d", rc);
        Bytes back(64);
        CHILD_CHECK(m.memcpy(back.data(), 64, p, 64, kD2H) == 0 && back == fill, "the memory is left as it was");
        CHILD_CHECK(send_byte(sock, 'f') && recv_byte(sock) == 'c', "steps");
        CHILD_CHECK(m.ipc_close(key) == 0 && m.free(p) == 0, "close and free in order");
        CHILD_CHECK(m.violations() == 2, "%llu", static_cast<unsigned long long>(m.violations()));
        return 0;
      },
      [&](int sock) {
        const MockAcl m = mock_on(1);
        int32_t me = 0;
        CHILD_CHECK(m.bare_tgid(&me) == 0 && me == getpid(), "bare tgid");
        CHILD_CHECK(coll_send_handle(sock, &me, sizeof me, -1) == 0, "send id");
        Handle h = recv_handle(sock);
        void* p = nullptr;
        CHILD_CHECK(m.import_by_key(&p, reinterpret_cast<const char*>(h.bytes), 1) == 0, "import with peer access");
        CHILD_CHECK(send_byte(sock, 'i') && recv_byte(sock) == 'f', "steps");
        Bytes back(64);
        aclError rc = m.memcpy(back.data(), 64, p, 64, kD2H);
        CHILD_CHECK(rc == kFeatureNotSupport, "device-to-host of another device's memory: %d", rc);
        void* local = nullptr;
        CHILD_CHECK(m.malloc(&local, 64, kHugeFirst) == 0, "malloc");
        rc = m.memcpy(local, 64, p, 64, kD2D);
        CHILD_CHECK(rc == kFeatureNotSupport, "a synchronous device-to-device copy of it: %d", rc);
        CHILD_CHECK(m.memcpy_async(local, 64, p, 64, kD2D, nullptr) == 0 && m.synchronize_device() == 0, "async");
        CHILD_CHECK(m.memcpy(back.data(), 64, local, 64, kD2H) == 0 && back == Bytes(64, 0x5a), "the bytes");
        CHILD_CHECK(m.violations() == 2, "%llu", static_cast<unsigned long long>(m.violations()));
        CHILD_CHECK(m.ipc_close(reinterpret_cast<const char*>(h.bytes)) == 0 && m.free(local) == 0, "close");
        // Once closed, the key is not this process's to close again.
        rc = m.ipc_close(reinterpret_cast<const char*>(h.bytes));
        CHILD_CHECK(rc == kInvalidHandle, "a second close: %d", rc);
        return send_byte(sock, 'c') ? 0 : 2;
      });
}

TEST_F(Ascend, TheMockRefusesAnImportByAProcessTheExporterDidNotAllow) {
  two_processes(
      [&](int sock) {
        const MockAcl m = mock_on(0);
        void* p = nullptr;
        CHILD_CHECK(m.malloc(&p, 64, kHugeFirst) == 0, "malloc");
        char key[65];
        CHILD_CHECK(m.export_key(p, 64, key, sizeof key, 0) == 0, "export");
        int32_t stranger = getpid() + 100000;  // someone else
        CHILD_CHECK(m.set_import_pid(key, &stranger, 1) == 0, "allow another");
        CHILD_CHECK(coll_send_handle(sock, key, sizeof key, -1) == 0, "send");
        CHILD_CHECK(recv_byte(sock) == 'r', "refused");
        CHILD_CHECK(m.ipc_close(key) == 0 && m.free(p) == 0, "close and free");
        return 0;
      },
      [&](int sock) {
        const MockAcl m = mock_on(0);
        Handle h = recv_handle(sock);
        void* p = nullptr;
        aclError rc = m.import_by_key(&p, reinterpret_cast<const char*>(h.bytes), 0);
        CHILD_CHECK(rc == kNoPermission && p == nullptr, "import without being allowed: %d", rc);
        int32_t me = getpid();
        rc = m.set_import_pid(reinterpret_cast<const char*>(h.bytes), &me, 1);
        CHILD_CHECK(rc == kNoPermission, "the importer allows itself: %d", rc);
        CHILD_CHECK(m.violations() == 2, "%llu", static_cast<unsigned long long>(m.violations()));
        return send_byte(sock, 'r') ? 0 : 2;
      });
}

// --- a peer killed mid-exchange -----------------------------------------------

// The victim's backend: the plugin, but the process dies by SIGKILL right
// after its first import (holding it, its own buffer exported).
const trainit_coll_backend* real_backend = nullptr;
int64_t* killed_at = nullptr;

int import_then_die(const void* handle, size_t handle_len, int fd, size_t bytes, void** ptr) {
  const int rc = real_backend->import_sized(handle, handle_len, fd, bytes, ptr);
  *killed_at = now_ns();
  static_cast<void>(raise(SIGKILL));
  return rc;
}

TEST_F(Ascend, APeerKilledMidExchangeGivesEveryOtherRankAnErrorWithinTheDeadlineNotAHang) {
  const int n = 3;
  const int victim = n - 1;
  // t[0]: the kill; t[1 + r]: rank r's return; t[8 + r]: its result; t[15]:
  // survivors returned.
  auto* t = shared_array<int64_t>(16);
  killed_at = t;
  auto socks = full_mesh(n);
  const std::string name = "ascend-death-" + std::to_string(getpid());
  std::vector<pid_t> pids;
  pids.reserve(static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    pids.push_back(fork_child([&, rank] {
      close_all_but(socks, rank);
      const trainit_coll_backend* b = load_plugin(rank);
      trainit_coll_backend dying = *b;
      real_backend = b;
      dying.import_sized = import_then_die;
      trainit_comm* comm = nullptr;
      int rc = trainit_comm_init(&comm, name.c_str(), rank, n);
      CHILD_CHECK(rc == 0, "trainit_comm_init: %s", trainit_strerror(rc));
      const size_t count = 1 << 16;
      void* buf = nullptr;
      CHILD_CHECK(b->alloc(count * 4, &buf) == 0, "alloc");
      rc = coll_backend_allreduce(comm, rank == victim ? &dying : b, socks[rank].data(), buf, count, TRAINIT_F32,
                                  TRAINIT_SUM);
      t[1 + rank] = now_ns();
      t[8 + rank] = rc;
      // Once every survivor returned (and closed its imports), what the dead
      // peer imported is no longer held either: the buffer frees.
      __atomic_add_fetch(&t[15], 1, __ATOMIC_SEQ_CST);
      const int64_t deadline = now_ns() + 10'000'000'000;
      while (__atomic_load_n(&t[15], __ATOMIC_SEQ_CST) < n - 1 && now_ns() < deadline) {
        usleep(1000);
      }
      rc = b->free(buf);
      CHILD_CHECK(rc == 0, "free after the peer died: %d", rc);
      trainit_comm_destroy(comm);
      return 0;
    }));
  }
  close_all_but(socks, -1);
  const std::vector<int> status = wait_children(pids, 20'000);
  for (int r = 0; r < n; ++r) {
    if (r == victim) {
      EXPECT_EQ(status[r], 128 + SIGKILL);
      continue;
    }
    EXPECT_EQ(status[r], 0) << "rank " << r;
    EXPECT_NE(t[8 + r], 0) << "rank " << r << " returned success beside a dead peer";
    const double ms = static_cast<double>(t[1 + r] - t[0]) / 1e6;
    EXPECT_LT(ms, 1000.0) << "rank " << r << " returned " << t[8 + r] << " after " << ms << " ms";
    std::printf("rank %d: %s %.1f ms after the kill\n", r, trainit_strerror(static_cast<int>(t[8 + r])), ms);
  }
  munmap(t, 16 * sizeof(int64_t));
}

// --- the mock's fault knobs (the device preflight's cases) --------------------

TEST_F(Ascend, AHungDeviceBlocksTheWaitAndAWrongOneFlipsTheFirstBitOfWhatItReturns) {
  setenv("MOCK_ACL_FAULT", "1:hang,2:wrong", 1);
  auto* reached = shared_array<std::atomic<int>>(1);
  const int64_t start = now_ns();
  const int hung = in_child(
      [reached] {
        const trainit_coll_backend* b = load_plugin(1);
        reached->store(1);
        b->wait();  // never returns
        return 0;
      },
      500);
  EXPECT_EQ(hung, -1) << "the wait on a hung device returned";
  EXPECT_EQ(reached->load(), 1) << "the hung device failed earlier than its wait";
  EXPECT_GE(now_ns() - start, 500'000'000);
  munmap(reached, sizeof *reached);
  EXPECT_EQ(in_child([] {
              const trainit_coll_backend* b = load_plugin(2);
              const Bytes x = random_values(TRAINIT_U8, 256, 3);
              void* p = nullptr;
              CHILD_CHECK(b->alloc(x.size(), &p) == 0 && b->copy(p, x.data(), x.size()) == 0, "alloc");
              Bytes want = x;
              want[0] ^= 1U;
              CHILD_CHECK(read_device(b, p, x.size()) == want, "not the first bit flipped");
              CHILD_CHECK(b->free(p) == 0, "free");
              return 0;
            }),
            0);
  EXPECT_EQ(in_child([] {  // the other devices are fine
              const trainit_coll_backend* b = load_plugin(0);
              const Bytes x = random_values(TRAINIT_U8, 256, 3);
              void* p = nullptr;
              CHILD_CHECK(b->alloc(x.size(), &p) == 0 && b->copy(p, x.data(), x.size()) == 0, "alloc");
              CHILD_CHECK(read_device(b, p, x.size()) == x && b->wait() == 0, "device 0");
              CHILD_CHECK(b->free(p) == 0, "free");
              return 0;
            }),
            0);
}

}  // namespace

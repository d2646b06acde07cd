// Accelerator backends (src/coll/backend.h): the loader and its errors, the
// built-in host backend, the fake-device plugin's IPC rules between real
// fork()ed processes (handles and fds over SCM_RIGHTS on socketpairs), and
// coll_backend_allreduce() across 2, 3 and 4 ranks against trainit_allreduce.
// Plugins are loaded by path, as ranks load them. A check inside a child
// exits with 1 and says where; the parent waits with a deadline.
#include "coll/backend.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
#include "coll/kernels.h"
#include "trainit/coll.h"

namespace {

using trainit::coll::coll_backend_allreduce;
using trainit::coll::coll_backend_host;
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

// Waits at most deadline_s for every child: their exit statuses (128 + n for
// a signal; -1 for one still running at the deadline, then killed).
std::vector<int> wait_children(const std::vector<pid_t>& pids, int deadline_s = 60) {
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

pid_t fork_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(70);  // the last resort, should the parent be gone
    _exit(body());
  }
  return pid;
}

// f16 and bf16 values whose sums and products over up to four ranks are
// exact, so that rounding once (trainit_allreduce) and after each step
// (coll_backend_allreduce) agree: 0.5, 1, 2, -1, 1.5, 0, 3, -2.
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

// dst op src by the scalar host kernel: the reference every backend matches.
Bytes host_fold(int dtype, int op, const Bytes& dst, const Bytes& src) {
  Bytes out(dst.size());
  const void* ins[2] = {dst.data(), src.data()};
  kernels_scalar()->fold[dtype][op](out.data(), ins, 2, dst.size() / dtype_size(dtype));
  return out;
}

const trainit_coll_backend* load_fakedev() {
  const trainit_coll_backend* b = nullptr;
  const int rc = coll_backend_load(TRAINIT_FAKEDEV_PLUGIN, &b);
  EXPECT_EQ(rc, 0) << coll_backend_last_error();
  return b;
}

// The buffer's bytes, read back through the backend.
Bytes read_device(const trainit_coll_backend* b, const void* p, size_t bytes) {
  Bytes out(bytes);
  return b->copy(out.data(), p, bytes) == 0 ? out : Bytes{};
}

// b's reduce on its own memory, every dtype and op over 1031 elements (a
// vector tail on every ISA), is bitwise the host kernels' fold of the same
// random values.
void expect_reduce_is_the_host_kernels(const trainit_coll_backend* b, uint32_t seed) {
  const size_t count = 1031;
  for (int dtype = 0; dtype < kDtypes; ++dtype) {
    const size_t bytes = count * dtype_size(dtype);
    const Bytes x = random_values(dtype, count, seed + static_cast<uint32_t>(dtype));
    const Bytes y = random_values(dtype, count, seed + 100U + static_cast<uint32_t>(dtype));
    void* dst = nullptr;
    void* src = nullptr;
    ASSERT_EQ(b->alloc(bytes, &dst), 0);
    ASSERT_EQ(b->alloc(bytes, &src), 0);
    for (int op = 0; op < kOps; ++op) {
      ASSERT_EQ(b->copy(dst, x.data(), bytes), 0);
      ASSERT_EQ(b->copy(src, y.data(), bytes), 0);
      ASSERT_EQ(b->reduce(dst, src, count, dtype, op), 0);
      ASSERT_EQ(b->signal(), 0);
      ASSERT_EQ(b->wait(), 0);
      EXPECT_EQ(read_device(b, dst, bytes), host_fold(dtype, op, x, y)) << "dtype " << dtype << " op " << op;
    }
    EXPECT_EQ(b->free(dst), 0);
    EXPECT_EQ(b->free(src), 0);
  }
}

// --- the loader ------------------------------------------------------------

TEST(BackendLoader, HostByNameIsTheBuiltInBackend) {
  const trainit_coll_backend* b = nullptr;
  ASSERT_EQ(coll_backend_load("host", &b), 0);
  EXPECT_EQ(b, coll_backend_host());
  EXPECT_STREQ(b->name, "host");
  EXPECT_EQ(b->abi_version, TRAINIT_COLL_BACKEND_ABI);
}

TEST(BackendLoader, AMissingPluginFileIsEnoentAndNamesThePath) {
  const trainit_coll_backend* b = coll_backend_host();
  EXPECT_EQ(coll_backend_load("/nonexistent/libtrainit_coll_nothing.so", &b), -ENOENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(std::strstr(coll_backend_last_error(), "no backend plugin at: /nonexistent/libtrainit_coll_nothing.so"),
            nullptr)
      << coll_backend_last_error();
  // By name, through the loader's search path.
  EXPECT_EQ(coll_backend_load("nosuchbackend", &b), -ENOENT);
  EXPECT_NE(std::strstr(coll_backend_last_error(), "libtrainit_coll_nosuchbackend.so"), nullptr)
      << coll_backend_last_error();
}

TEST(BackendLoader, AFileThatIsNotAnElfObjectIsElibbad) {
  char path[] = "/tmp/trainit-backend-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char text[] = "this is not a shared object\n";
  ASSERT_EQ(write(fd, text, sizeof text), static_cast<ssize_t>(sizeof text));
  close(fd);
  const trainit_coll_backend* b = nullptr;
  EXPECT_EQ(coll_backend_load(path, &b), -ELIBBAD);
  const std::string why = coll_backend_last_error();
  unlink(path);
  EXPECT_NE(why.find("cannot load backend plugin"), std::string::npos) << why;
  EXPECT_NE(why.find(path), std::string::npos) << why;  // dlerror() names the file
}

TEST(BackendLoader, AnObjectWithoutTheEntrySymbolIsEnoexec) {
  const trainit_coll_backend* b = nullptr;
  EXPECT_EQ(coll_backend_load(TRAINIT_NOSYM_PLUGIN, &b), -ENOEXEC);
  EXPECT_EQ(b, nullptr);
  const std::string why = coll_backend_last_error();
  EXPECT_NE(why.find("not a trainit backend plugin (no trainit_coll_backend_v1)"), std::string::npos) << why;
  EXPECT_NE(why.find(TRAINIT_NOSYM_PLUGIN), std::string::npos) << why;
}

TEST(BackendLoader, APluginOfAnotherAbiVersionIsEproto) {
  const trainit_coll_backend* b = nullptr;
  EXPECT_EQ(coll_backend_load(TRAINIT_BADABI_PLUGIN, &b), -EPROTO);
  EXPECT_EQ(b, nullptr);
  const std::string why = coll_backend_last_error();
  EXPECT_NE(why.find("backend ABI mismatch"), std::string::npos) << why;
  const std::string versions = "has ABI " + std::to_string(TRAINIT_COLL_BACKEND_ABI + 1) + ", this library " +
                               std::to_string(TRAINIT_COLL_BACKEND_ABI);
  EXPECT_NE(why.find(versions), std::string::npos) << why;
}

TEST(BackendLoader, TheFakedevPluginLoadsAndClearsTheLastError) {
  const trainit_coll_backend* b = nullptr;
  EXPECT_EQ(coll_backend_load("/nonexistent/x.so", &b), -ENOENT);
  ASSERT_EQ(coll_backend_load(TRAINIT_FAKEDEV_PLUGIN, &b), 0) << coll_backend_last_error();
  EXPECT_STREQ(b->name, "fakedev");
  EXPECT_STREQ(coll_backend_last_error(), "");
}

// --- the host backend --------------------------------------------------------

TEST(BackendHost, CopyAndReduceMatchTheHostKernelsForEveryTypeAndOp) {
  const trainit_coll_backend* b = coll_backend_host();
  expect_reduce_is_the_host_kernels(b, 1U);
  void* dst = nullptr;
  void* src = nullptr;
  ASSERT_EQ(b->alloc(64, &dst), 0);
  ASSERT_EQ(b->alloc(64, &src), 0);
  EXPECT_EQ(b->reduce(dst, src, 16, kDtypes, 0), -EINVAL);
  EXPECT_EQ(b->reduce(dst, src, 16, 0, kOps), -EINVAL);
  EXPECT_EQ(b->free(dst), 0);
  EXPECT_EQ(b->free(src), 0);
}

// --- the fake-device plugin's IPC rules ---------------------------------------

// A SOCK_SEQPACKET socketpair: [0] the parent's end, [1] the child's.
struct Pair {
  int fd[2] = {-1, -1};
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fd), 0); }
  ~Pair() {
    for (const int f : fd) {
      if (f >= 0) {
        close(f);
      }
    }
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
};

// One byte either way: the two processes' steps.
bool send_byte(int sock, char c) {
  return send(sock, &c, 1, MSG_NOSIGNAL) == 1;
}
char recv_byte(int sock) {
  char c = 0;
  return recv(sock, &c, 1, 0) == 1 ? c : '\0';
}

// The exporter's side: a live buffer of bytes filled with fill, exported.
struct Exported {
  void* ptr = nullptr;
  unsigned char handle[TRAINIT_COLL_HANDLE_MAX] = {};
  size_t handle_len = sizeof handle;
  int fd = -1;
};

Exported export_buffer(const trainit_coll_backend* b, const Bytes& fill) {
  Exported e;
  EXPECT_EQ(b->alloc(fill.size(), &e.ptr), 0);
  EXPECT_EQ(b->copy(e.ptr, fill.data(), fill.size()), 0);
  EXPECT_EQ(b->export_handle(e.ptr, fill.size(), e.handle, &e.handle_len, &e.fd), 0);
  EXPECT_LE(e.handle_len, static_cast<size_t>(TRAINIT_COLL_HANDLE_MAX));
  EXPECT_GE(e.fd, 0);
  return e;
}

TEST(BackendFakedev, AnImporterInAnotherProcessSeesTheExportersBytesAndItsWritesAreSeenBack) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  const uint64_t violations = b->violations();
  const Bytes mine = random_values(TRAINIT_U8, 10000, 7);
  const Bytes theirs = random_values(TRAINIT_U8, 10000, 8);
  const Pair pair;
  const pid_t child = fork_child([&] {
    unsigned char handle[TRAINIT_COLL_HANDLE_MAX];
    size_t len = sizeof handle;
    int fd = -1;
    CHILD_CHECK(coll_recv_handle(pair.fd[1], handle, &len, &fd) == 0 && fd >= 0, "no handle and fd");
    void* p = nullptr;
    int rc = b->import_handle(handle, len, fd, &p);
    CHILD_CHECK(rc == 0, "import: %d", rc);
    close(fd);
    CHILD_CHECK(read_device(b, p, mine.size()) == mine, "the importer does not see the exporter's bytes");
    CHILD_CHECK(b->copy(p, theirs.data(), theirs.size()) == 0, "write through the import");
    rc = b->close_import(p);
    CHILD_CHECK(rc == 0, "close_import: %d", rc);
    CHILD_CHECK(b->violations() == violations, "%llu violations", static_cast<unsigned long long>(b->violations()));
    return send_byte(pair.fd[1], 'd') ? 0 : 2;
  });
  Exported e = export_buffer(b, mine);
  ASSERT_EQ(coll_send_handle(pair.fd[0], e.handle, e.handle_len, e.fd), 0);
  close(e.fd);
  EXPECT_EQ(recv_byte(pair.fd[0]), 'd');
  EXPECT_EQ(wait_children({child}), std::vector<int>{0});
  EXPECT_EQ(read_device(b, e.ptr, theirs.size()), theirs);
  EXPECT_EQ(b->free(e.ptr), 0);
  EXPECT_EQ(b->violations(), violations);
}

TEST(BackendFakedev, ImportInTheExportingProcessIsRefusedAndCounted) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  const uint64_t violations = b->violations();
  Exported e = export_buffer(b, Bytes(100, 1));
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(b->import_handle(e.handle, e.handle_len, e.fd, &p), -EINVAL);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(b->violations(), violations + 1);
  close(e.fd);
  EXPECT_EQ(b->free(e.ptr), 0);
}

TEST(BackendFakedev, FreeBeforeEveryImporterClosedIsRefusedCountedAndLeavesTheBuffer) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  const uint64_t violations = b->violations();
  const Bytes fill = random_values(TRAINIT_U8, 5000, 9);
  const Pair pair;
  const pid_t child = fork_child([&] {
    unsigned char handle[TRAINIT_COLL_HANDLE_MAX];
    size_t len = sizeof handle;
    int fd = -1;
    CHILD_CHECK(coll_recv_handle(pair.fd[1], handle, &len, &fd) == 0, "no handle");
    void* p = nullptr;
    CHILD_CHECK(b->import_handle(handle, len, fd, &p) == 0, "import");
    close(fd);
    CHILD_CHECK(send_byte(pair.fd[1], 'i'), "imported");
    CHILD_CHECK(recv_byte(pair.fd[1]) == 'c', "the parent's go");
    CHILD_CHECK(read_device(b, p, fill.size()) == fill, "the refused free changed the buffer");
    CHILD_CHECK(b->close_import(p) == 0, "close_import");
    return send_byte(pair.fd[1], 'd') ? 0 : 2;
  });
  Exported e = export_buffer(b, fill);
  ASSERT_EQ(coll_send_handle(pair.fd[0], e.handle, e.handle_len, e.fd), 0);
  close(e.fd);
  ASSERT_EQ(recv_byte(pair.fd[0]), 'i');
  EXPECT_EQ(b->free(e.ptr), -EBUSY);
  EXPECT_EQ(b->violations(), violations + 1);
  EXPECT_EQ(read_device(b, e.ptr, fill.size()), fill);  // still live
  ASSERT_TRUE(send_byte(pair.fd[0], 'c'));
  EXPECT_EQ(recv_byte(pair.fd[0]), 'd');
  EXPECT_EQ(wait_children({child}), std::vector<int>{0});
  EXPECT_EQ(b->free(e.ptr), 0);  // every importer closed
  EXPECT_EQ(b->violations(), violations + 1);
}

TEST(BackendFakedev, AHandleOverTheLimitIsRefusedByTheTransportAndTheImport) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  const Pair pair;
  const pid_t child = fork_child([&] {
    unsigned char handle[TRAINIT_COLL_HANDLE_MAX + 1] = {};
    size_t len = TRAINIT_COLL_HANDLE_MAX;
    int fd = -1;
    CHILD_CHECK(coll_recv_handle(pair.fd[1], handle, &len, &fd) == 0, "no handle");
    const uint64_t before = b->violations();
    void* p = nullptr;
    const int rc = b->import_handle(handle, TRAINIT_COLL_HANDLE_MAX + 1, fd, &p);
    CHILD_CHECK(rc == -EMSGSIZE, "a %d-byte handle: %d", TRAINIT_COLL_HANDLE_MAX + 1, rc);
    CHILD_CHECK(b->violations() == before + 1, "not counted");
    close(fd);
    return 0;
  });
  Exported e = export_buffer(b, Bytes(64, 3));
  unsigned char big[TRAINIT_COLL_HANDLE_MAX + 1] = {};
  EXPECT_EQ(coll_send_handle(pair.fd[0], big, sizeof big, e.fd), -EINVAL);
  ASSERT_EQ(coll_send_handle(pair.fd[0], e.handle, e.handle_len, e.fd), 0);
  close(e.fd);
  EXPECT_EQ(wait_children({child}), std::vector<int>{0});
  EXPECT_EQ(b->free(e.ptr), 0);
}

TEST(BackendFakedev, GarbageAndForgedHandlesAreRefusedAndTheRealOneStillImports) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  const Pair pair;
  const Bytes fill = random_values(TRAINIT_U8, 300, 11);
  const pid_t child = fork_child([&] {
    unsigned char handle[TRAINIT_COLL_HANDLE_MAX];
    size_t len = sizeof handle;
    int fd = -1;
    CHILD_CHECK(coll_recv_handle(pair.fd[1], handle, &len, &fd) == 0 && fd >= 0, "no handle");
    unsigned char other[TRAINIT_COLL_HANDLE_MAX];
    size_t other_len = sizeof other;
    int other_fd = -1;
    CHILD_CHECK(coll_recv_handle(pair.fd[1], other, &other_len, &other_fd) == 0 && other_fd >= 0, "no 2nd");
    const uint64_t before = b->violations();
    void* p = nullptr;
    // Random bytes of the right length.
    const Bytes garbage = random_values(TRAINIT_U8, len, 12);
    int rc = b->import_handle(garbage.data(), len, fd, &p);
    CHILD_CHECK(rc == -EINVAL && p == nullptr, "garbage: %d", rc);
    // The real handle, one byte short.
    rc = b->import_handle(handle, len - 1, fd, &p);
    CHILD_CHECK(rc == -EINVAL, "short: %d", rc);
    // The real handle with its generation changed (bytes 8..15).
    unsigned char forged[TRAINIT_COLL_HANDLE_MAX];
    std::memcpy(forged, handle, len);
    forged[8] ^= 0x5a;
    rc = b->import_handle(forged, len, fd, &p);
    CHILD_CHECK(rc == -EINVAL, "forged generation: %d", rc);
    // The real handle without its fd, then with another buffer's fd.
    rc = b->import_handle(handle, len, -1, &p);
    CHILD_CHECK(rc == -EBADF, "no fd: %d", rc);
    rc = b->import_handle(handle, len, other_fd, &p);
    CHILD_CHECK(rc == -EINVAL, "another buffer's fd: %d", rc);
    CHILD_CHECK(b->violations() == before + 5, "%llu violations, not %llu",
                static_cast<unsigned long long>(b->violations()), static_cast<unsigned long long>(before + 5));
    rc = b->import_handle(handle, len, fd, &p);
    CHILD_CHECK(rc == 0, "the real handle: %d", rc);
    CHILD_CHECK(read_device(b, p, fill.size()) == fill, "bytes");
    CHILD_CHECK(b->close_import(p) == 0, "close_import");
    close(fd);
    close(other_fd);
    return 0;
  });
  Exported e = export_buffer(b, fill);
  Exported other = export_buffer(b, fill);  // same size, another memfd
  ASSERT_EQ(coll_send_handle(pair.fd[0], e.handle, e.handle_len, e.fd), 0);
  ASSERT_EQ(coll_send_handle(pair.fd[0], other.handle, other.handle_len, other.fd), 0);
  close(e.fd);
  close(other.fd);
  EXPECT_EQ(wait_children({child}), std::vector<int>{0});
  EXPECT_EQ(b->free(e.ptr), 0);
  EXPECT_EQ(b->free(other.ptr), 0);
}

// A rank that shrank the memory it exported would make its peers' next
// access a SIGBUS, blamed on them: the exported size is sealed, and an
// import of memory whose size is not (a forged fd with the real bookkeeping
// copied into it) is refused and counted.
TEST(BackendFakedev, AnExportedBufferCannotBeResizedAndAnUnsealedOneIsNotImported) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  const Pair pair;
  const Bytes fill = random_values(TRAINIT_U8, 5000, 21);
  const pid_t child = fork_child([&] {
    unsigned char handle[TRAINIT_COLL_HANDLE_MAX];
    size_t len = sizeof handle;
    int fd = -1;
    CHILD_CHECK(coll_recv_handle(pair.fd[1], handle, &len, &fd) == 0 && fd >= 0, "no handle");
    CHILD_CHECK(ftruncate(fd, 0) != 0 && errno == EPERM, "the exported memfd could be shrunk");
    struct stat st {};
    CHILD_CHECK(fstat(fd, &st) == 0, "fstat");
    const int forged = memfd_create("forged", MFD_CLOEXEC);
    CHILD_CHECK(forged >= 0 && ftruncate(forged, st.st_size) == 0, "memfd");
    std::vector<unsigned char> head(4096);
    CHILD_CHECK(pread(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()), "pread");
    CHILD_CHECK(pwrite(forged, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()), "pwrite");
    const uint64_t before = b->violations();
    void* p = nullptr;
    int rc = b->import_handle(handle, len, forged, &p);
    CHILD_CHECK(rc == -EINVAL && p == nullptr, "an unsealed buffer was imported: %d", rc);
    CHILD_CHECK(b->violations() == before + 1, "not counted");
    rc = b->import_handle(handle, len, fd, &p);
    CHILD_CHECK(rc == 0, "the real, sealed one: %d", rc);
    CHILD_CHECK(read_device(b, p, fill.size()) == fill, "bytes");
    CHILD_CHECK(b->close_import(p) == 0, "close_import");
    close(forged);
    close(fd);
    return 0;
  });
  Exported e = export_buffer(b, fill);
  EXPECT_NE(ftruncate(e.fd, 1 << 20), 0) << "the exporter could grow it";
  ASSERT_EQ(coll_send_handle(pair.fd[0], e.handle, e.handle_len, e.fd), 0);
  close(e.fd);
  EXPECT_EQ(wait_children({child}), std::vector<int>{0});
  EXPECT_EQ(b->free(e.ptr), 0);
}

// A full mesh of SOCK_SEQPACKET socketpairs among n ranks, made before they
// are forked: fd[r][peer] is rank r's end towards peer. A rank keeps only its
// own ends (keep_only); the parent closes every end once the ranks run.
struct Mesh {
  explicit Mesh(int n) : fd(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), -1)) {
    for (int r = 0; r < n; ++r) {
      for (int peer = r + 1; peer < n; ++peer) {
        int sv[2] = {-1, -1};
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        fd[static_cast<size_t>(r)][static_cast<size_t>(peer)] = sv[0];
        fd[static_cast<size_t>(peer)][static_cast<size_t>(r)] = sv[1];
      }
    }
  }
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;
  ~Mesh() { keep_only(-1); }
  void keep_only(int rank) {
    for (size_t r = 0; r < fd.size(); ++r) {
      for (int& end : fd[r]) {
        if (static_cast<int>(r) != rank && end >= 0) {
          close(end);
          end = -1;
        }
      }
    }
  }
  int* of(int rank) { return fd[static_cast<size_t>(rank)].data(); }
  std::vector<std::vector<int>> fd;
};

// Ranks whose buffers differ in size (one lies about its staging, or the
// ranks were set up differently) import nothing of each other: every rank
// gets -EINVAL, the honest ones with the rank that differs named; no rank
// touches memory past a peer's end.
TEST(BackendExchange, BuffersOfDifferentSizesAreEinvalOnEveryRankNamingTheRank) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  constexpr int kRanks = 3;
  Mesh mesh(kRanks);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank) {
    pids.push_back(fork_child([&, rank] {
      mesh.keep_only(rank);
      const size_t bytes = rank == 2 ? 4096 : 8192;  // rank 2 exports half of what its peers will touch
      void* buf = nullptr;
      CHILD_CHECK(b->alloc(bytes, &buf) == 0, "alloc");
      void* peers[kRanks] = {};
      const int rc = trainit::coll::coll_backend_exchange(b, mesh.of(rank), buf, bytes, kRanks, rank, peers);
      CHILD_CHECK(rc == -EINVAL, "rank %d: %d", rank, rc);
      const std::string why = coll_backend_last_error();
      CHILD_CHECK(rank == 2 || why.find("local rank 2 exports 4096 bytes") != std::string::npos, "rank %d: '%s'", rank,
                  why.c_str());
      CHILD_CHECK(rank == 2 || peers[2] == nullptr, "rank %d imported the short buffer", rank);
      for (int p = 0; p < kRanks; ++p) {
        if (p != rank && peers[p] != nullptr) {
          CHILD_CHECK(b->close_import(peers[p]) == 0, "close_import");
        }
      }
      return 0;  // the exporters' buffers go with the processes
    }));
  }
  mesh.keep_only(-1);
  EXPECT_EQ(wait_children(pids), std::vector<int>(kRanks, 0));
}

// A rank that says it exports what its peers will touch but hands over a
// smaller buffer (its size prefix right, its handle's buffer half of it): the
// backend refuses the handle before anything is mapped (import_sized), and
// every honest rank gets -EINVAL naming that rank, never a fault later.
TEST(BackendExchange, AHandleThatMapsLessThanItsRankSaysIsRefusedOnEveryRankNamingTheRank) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  constexpr int kRanks = 3;
  constexpr int kLiar = 2;
  constexpr uint64_t kBytes = 8192;
  Mesh mesh(kRanks);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank) {
    pids.push_back(fork_child([&, rank] {
      mesh.keep_only(rank);
      void* buf = nullptr;
      if (rank == kLiar) {  // sends "8192 bytes" with the handle of a 4096-byte buffer
        CHILD_CHECK(b->alloc(4096, &buf) == 0, "alloc");
        unsigned char message[TRAINIT_COLL_HANDLE_MAX];
        std::memcpy(message, &kBytes, sizeof kBytes);
        size_t len = sizeof message - sizeof kBytes;
        int fd = -1;
        CHILD_CHECK(b->export_handle(buf, 4096, message + sizeof kBytes, &len, &fd) == 0, "export");
        for (int peer = 0; peer < kLiar; ++peer) {
          CHILD_CHECK(trainit::coll::coll_send_handle(mesh.of(rank)[peer], message, sizeof kBytes + len, fd) == 0,
                      "send");
        }
        for (int peer = 0; peer < kLiar; ++peer) {  // what the honest ones send it
          unsigned char theirs[TRAINIT_COLL_HANDLE_MAX];
          size_t got = sizeof theirs;
          int their_fd = -1;
          CHILD_CHECK(trainit::coll::coll_recv_handle(mesh.of(rank)[peer], theirs, &got, &their_fd) == 0, "recv");
          close(their_fd);
        }
        close(fd);
        return 0;
      }
      CHILD_CHECK(b->alloc(kBytes, &buf) == 0, "alloc");
      void* peers[kRanks] = {};
      const int rc = trainit::coll::coll_backend_exchange(b, mesh.of(rank), buf, kBytes, kRanks, rank, peers);
      CHILD_CHECK(rc == -EINVAL, "rank %d: %d", rank, rc);
      const std::string why = coll_backend_last_error();
      CHILD_CHECK(why.find("local rank 2's handle does not map the 8192 bytes it exports") != std::string::npos,
                  "rank %d: '%s'", rank, why.c_str());
      CHILD_CHECK(peers[kLiar] == nullptr, "rank %d imported the short buffer", rank);
      const int other = 1 - rank;
      CHILD_CHECK(peers[other] != nullptr, "rank %d did not import its honest peer", rank);
      CHILD_CHECK(b->close_import(peers[other]) == 0, "close_import");
      return 0;
    }));
  }
  mesh.keep_only(-1);
  EXPECT_EQ(wait_children(pids), std::vector<int>(kRanks, 0));
}

TEST(BackendFakedev, ReduceOnDeviceMemoryIsBitwiseTheHostKernelsForEveryTypeAndOp) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  const uint64_t violations = b->violations();
  expect_reduce_is_the_host_kernels(b, 21U);
  EXPECT_EQ(b->violations(), violations);
  // Host memory is not device memory: refused and counted, for every dtype.
  void* dst = nullptr;
  ASSERT_EQ(b->alloc(64, &dst), 0);
  const Bytes host(64);
  for (int dtype = 0; dtype < kDtypes; ++dtype) {
    EXPECT_EQ(b->reduce(dst, host.data(), 64 / dtype_size(dtype), dtype, 0), -EFAULT) << "dtype " << dtype;
  }
  EXPECT_EQ(b->free(dst), 0);
  EXPECT_EQ(b->violations(), violations + kDtypes);
}

// --- coll_backend_allreduce: the plugin path end to end --------------------

// Runs an allreduce of every dtype and op in n forked ranks of a standalone
// communicator, each rank's buffer fakedev memory, the handles over a full
// mesh of SOCK_SEQPACKET socketpairs made before the fork; each rank checks
// its result against trainit_allreduce of the same values on host memory.
void allreduce_across(int n) {
  const trainit_coll_backend* b = load_fakedev();
  ASSERT_NE(b, nullptr);
  Mesh mesh(n);
  const std::string name = "backend-" + std::to_string(getpid()) + "-" + std::to_string(n);
  const uint64_t violations = b->violations();  // earlier tests' in this process
  std::vector<pid_t> pids;
  pids.reserve(static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    pids.push_back(fork_child([&, rank] {
      mesh.keep_only(rank);
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
          rc = coll_backend_allreduce(comm, b, mesh.of(rank), buf, count, dtype, op);
          CHILD_CHECK(rc == 0, "coll_backend_allreduce: %s", trainit_strerror(rc));
          CHILD_CHECK(read_device(b, buf, bytes) == want, "rank %d dtype %d op %d: not the host allreduce's bytes",
                      rank, dtype, op);
          rc = b->free(buf);
          CHILD_CHECK(rc == 0, "free after the allreduce: %d", rc);
        }
      }
      CHILD_CHECK(b->violations() == violations, "%llu IPC rules broken",
                  static_cast<unsigned long long>(b->violations() - violations));
      trainit_comm_destroy(comm);
      return 0;
    }));
  }
  mesh.keep_only(-1);
  EXPECT_EQ(wait_children(pids), std::vector<int>(static_cast<size_t>(n), 0));
}

TEST(BackendAllreduce, FakedevBuffersOfTwoRanksEqualTheHostAllreduceForEveryTypeAndOp) {
  allreduce_across(2);
}

TEST(BackendAllreduce, FakedevBuffersOfThreeRanksEqualTheHostAllreduceForEveryTypeAndOp) {
  allreduce_across(3);
}

TEST(BackendAllreduce, FakedevBuffersOfFourRanksEqualTheHostAllreduceForEveryTypeAndOp) {
  allreduce_across(4);
}

// --- the CUDA plugin (built only where nvcc was found) ----------------------

#ifdef TRAINIT_CUDA_PLUGIN
// Where the machine has no NVIDIA device node, loading the plugin must fail
// cleanly: libcuda.so.1 absent, or cuInit finding no device, is -ENODEV.
// That it gets that far (not -ELIBBAD) shows that the plugin has no
// link-time dependency on libcuda.so.1, absent here: it dlopens the driver.
// On a machine with a GPU the plugin must load and reduce every dtype and op
// bitwise as the host kernels do (never run: no GPU here).
TEST(BackendCuda, ThePluginLoadsWithoutLinkingLibcudaAndIsEnodevWithoutAGpu) {
  const trainit_coll_backend* b = nullptr;
  const int rc = coll_backend_load(TRAINIT_CUDA_PLUGIN, &b);
  if (access("/dev/nvidiactl", F_OK) != 0) {
    EXPECT_EQ(rc, -ENODEV) << coll_backend_last_error();
    EXPECT_EQ(b, nullptr);
    const std::string why = coll_backend_last_error();
    EXPECT_NE(why.find("backend init failed: cuda: no device or no driver (-ENODEV)"), std::string::npos) << why;
    return;
  }
  ASSERT_EQ(rc, 0) << coll_backend_last_error();
  expect_reduce_is_the_host_kernels(b, 1U);
}
#endif

}  // namespace

// libtrainit_coll_fakedev.so: a backend whose "device memory" is a memfd
// mapping, so that the plugin path and the IPC rules a real device imposes
// are tested on machines without one. It refuses, counts and reports on
// stderr every broken rule:
//   - a handle is imported in another process than the one that exported it;
//   - a handle is at most TRAINIT_COLL_HANDLE_MAX bytes and comes with its fd
//     (sent over a unix socket with SCM_RIGHTS);
//   - every import is closed before the exporter frees the memory (a free
//     with live imports is -EBUSY and leaves the memory as it was);
//   - nothing is used after its close or free (-EFAULT; the address range
//     stays reserved, PROT_NONE, so that it is not reused meanwhile);
//   - an import maps memory whose size is sealed (F_SEAL_SHRINK,
//     F_SEAL_GROW): an exporter that could shrink it would make the
//     importer's next access a SIGBUS, as device memory freed under an
//     importer never does.
// The memfd's first page is shared bookkeeping (magic, generation, size,
// exporter, live imports, state) that every process mapping it sees.
// Copies, reduces and folds are synchronous (signal and wait are no-ops);
// collectives launched run on the plugin's stream (stream.cpp).
//
// Its device number: what the environment a launcher gives a process names
// (device_number() in device_check.h): TRAINIT_COLL_DEVICE, else DEVICE_ID,
// else the visible-devices list (CUDA_VISIBLE_DEVICES, else
// ASCEND_VISIBLE_DEVICES: its only entry, or entry LOCAL_RANK of several),
// else LOCAL_RANK, else 0. Read once, by init().
//
// Faults for the tests of what uses it (the init's device preflight):
// TRAINIT_FAKEDEV_FAULT=DEVICE:KIND[,...] (fakedev_fault.h) gives the device
// of that number a fault, announced on stderr when it strikes:
//   fail   init() returns -ENODEV;
//   hang   the first copy, reduce, fold or launched call blocks forever;
//   wrong  every reduce and fold (a launched call's too) flips the lowest
//          bit of its first result.
// A malformed knob fails init() with -EINVAL.
#include "coll/plugins/fakedev/fakedev.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "coll/backend.h"
#include "coll/device_check.h"
#include "coll/kernels.h"
#include "coll/plugins/fakedev/fakedev_fault.h"

namespace trainit::coll {
namespace {

constexpr uint64_t kMagic = 0x7472616e66616b65;  // "tranfake"
constexpr size_t kHeader = 4096;
constexpr uint32_t kLive = 1;
constexpr uint32_t kFreeing = 2;
constexpr uint32_t kFreed = 3;

// The memfd's first page, in every process that maps it.
struct SharedHeader {
  uint64_t magic;
  uint64_t generation;
  uint64_t bytes;
  int32_t exporter_pid;
  std::atomic<int32_t> imports;
  std::atomic<uint32_t> state;
};
static_assert(std::atomic<int32_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// What export_handle writes: 32 bytes.
struct Handle {
  uint64_t magic;
  uint64_t generation;
  uint64_t bytes;
  int32_t exporter_pid;
  uint32_t reserved;
};
static_assert(sizeof(Handle) <= TRAINIT_COLL_HANDLE_MAX);

enum class Kind : uint8_t { kFreeSlot, kAlloc, kImport };

struct Region {
  Kind kind = Kind::kFreeSlot;
  bool live = false;
  pid_t pid = 0;  // the process the entry belongs to (a forked child inherits the table)
  char* base = nullptr;
  size_t map_len = 0;
  uint64_t bytes = 0;
  int memfd = -1;  // allocations only
  SharedHeader* header() const { return reinterpret_cast<SharedHeader*>(base); }
  char* data() const { return base + kHeader; }
};

constexpr int kRegions = 256;
Region regions[kRegions];
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<uint64_t> violation_count{0};
std::atomic<uint64_t> next_generation{0};

struct Locked {
  Locked() { pthread_mutex_lock(&lock); }
  ~Locked() { pthread_mutex_unlock(&lock); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
};

__attribute__((format(printf, 2, 3))) int violation(int err, const char* fmt, ...) {
  violation_count.fetch_add(1, std::memory_order_relaxed);
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  // ::vsnprintf: clang-analyzer 14 takes the va_list std::vsnprintf is
  // handed for uninitialized (valist.Uninitialized), the global one not.
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) {  // cut short when too long
    msg[0] = '\0';
  }
  va_end(ap);
  // A report only: nothing to do when stderr is gone.
  static_cast<void>(std::fprintf(stderr, "trainit fakedev [%d]: IPC rule broken: %s (%s)\n", static_cast<int>(getpid()),
                                 msg, std::strerror(-err)));
  return err;
}

// The entry of this process whose data range holds [p, p + len), or the one
// it partly overlaps; nullptr when none (host memory).
Region* find(const void* p, size_t len) {
  const pid_t me = getpid();
  const auto* c = static_cast<const char*>(p);
  for (Region& r : regions) {
    if (r.kind == Kind::kFreeSlot || r.pid != me) {
      continue;
    }
    if (c < r.data() + r.bytes && c + (len == 0 ? 1 : len) > r.data()) {
      return &r;
    }
  }
  return nullptr;
}

Region* new_slot() {
  Region* dead = nullptr;
  for (Region& r : regions) {
    if (r.kind == Kind::kFreeSlot) {
      return &r;
    }
    if (!r.live && dead == nullptr) {
      dead = &r;
    }
  }
  if (dead != nullptr) {  // the oldest tombstone gives its reservation back
    if (dead->pid == getpid()) {
      munmap(dead->base, dead->map_len);
    }
    *dead = Region{};
  }
  return dead;
}

// Unmaps the region but keeps its addresses reserved, so that a later use is
// seen as one (the table) and never reaches memory mapped there since.
void retire(Region& r) {
  void* keep = mmap(r.base, r.map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (keep == MAP_FAILED) {
    munmap(r.base, r.map_len);
  }
  if (r.memfd >= 0) {
    close(r.memfd);
    r.memfd = -1;
  }
  r.live = false;
}

// A device range of this process that may be used: -EFAULT for a closed or
// freed one, or one running past its buffer; 1 for host memory, 0 device.
int check_use(const void* p, size_t len, const char* what) {
  const Region* r = find(p, len);
  if (r == nullptr) {
    return 1;
  }
  if (!r->live) {
    return violation(-EFAULT, "%s %p after its %s", what, p, r->kind == Kind::kAlloc ? "free" : "close_import");
  }
  const auto* c = static_cast<const char*>(p);
  if (c < r->data() || c + len > r->data() + r->bytes) {
    return violation(-EFAULT, "%s %p + %zu runs outside its %llu-byte buffer", what, p, len,
                     static_cast<unsigned long long>(r->bytes));
  }
  return 0;
}

// This process's device and its fault (init() reads them).
long device = 0;
FakedevFault fault = FakedevFault::kNone;
std::atomic<bool> hang_struck{false};
std::atomic<bool> wrong_said{false};

__attribute__((format(printf, 1, 2))) void say(const char* fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) {
    msg[0] = '\0';
  }
  va_end(ap);
  // A report only: nothing to do when stderr is gone.
  static_cast<void>(
      std::fprintf(stderr, "trainit fakedev [%d] device %ld: %s\n", static_cast<int>(getpid()), device, msg));
}

}  // namespace

namespace fakedev {

// The hang fault: the first copy, reduce or fold of the process never returns
// (until a signal ends the process), as a wedged device's would not.
void maybe_hang(const char* what) {
  if (fault == FakedevFault::kHang && !hang_struck.exchange(true)) {
    say("fault injected (TRAINIT_FAKEDEV_FAULT): %s hangs", what);
    for (;;) {
      pause();
    }
  }
}

bool retires_late() {
  return fault == FakedevFault::kLate;
}

bool writes_no_done_words() {
  return fault == FakedevFault::kMute;
}

// The wrong fault: a reduce's or fold's result with the lowest bit of its
// first element flipped (little-endian: its first byte's).
void corrupt_if_asked(void* dst) {
  if (fault == FakedevFault::kWrong) {
    if (!wrong_said.exchange(true)) {
      say("fault injected (TRAINIT_FAKEDEV_FAULT): reduce results are wrong");
    }
    *static_cast<unsigned char*>(dst) ^= 1U;
  }
}

// A launch's ranges: device memory of this process, live (-EFAULT else).
int check_launch(const dev::Call& a) {
  const Locked guard;
  const size_t staging = dev::kHeaderBytes + 4 * a.quarter;
  for (int p = 0; p < a.n; ++p) {
    if (check_use(a.staging[p], staging, "a collective's staging") != 0) {
      return violation(-EFAULT, "a collective's staging %p is no live device buffer", a.staging[p]);
    }
  }
  const struct {
    const void* p;
    uint64_t bytes;
    const char* what;
  } ranges[] = {{a.send, a.valid != 0 ? dev::send_bytes(a) : 0, "a collective's send"},
                {a.recv, a.valid != 0 ? dev::recv_bytes(a) : 0, "a collective's recv"}};
  for (const auto& r : ranges) {
    if (r.bytes != 0 && check_use(r.p, r.bytes, r.what) != 0) {
      return violation(-EFAULT, "%s %p + %llu is no live device buffer", r.what, r.p,
                       static_cast<unsigned long long>(r.bytes));
    }
  }
  for (int p = 0; a.where != 0 && p < a.n; ++p) {
    if (check_use(a.window[p], dev::window_bytes(a), "a collective's window") != 0) {
      return violation(-EFAULT, "a collective's window %p is no live device buffer", a.window[p]);
    }
  }
  return 0;
}

}  // namespace fakedev

namespace {

using fakedev::corrupt_if_asked;
using fakedev::drain;
using fakedev::maybe_hang;

int fd_init() {
  device =
      device_number(std::getenv("TRAINIT_COLL_DEVICE"), std::getenv("DEVICE_ID"), std::getenv("CUDA_VISIBLE_DEVICES"),
                    std::getenv("ASCEND_VISIBLE_DEVICES"), std::getenv("LOCAL_RANK"));
  const char* knob = std::getenv("TRAINIT_FAKEDEV_FAULT");
  const FakedevFaultSpec spec = fakedev_fault(knob, device);
  if (!spec.valid) {
    say("TRAINIT_FAKEDEV_FAULT=%s is not DEVICE:fail|hang|wrong|late|mute[,...]", knob);
    return -EINVAL;
  }
  fault = spec.fault;
  if (fault == FakedevFault::kFail) {
    say("fault injected (TRAINIT_FAKEDEV_FAULT): no such device");
    return -ENODEV;
  }
  return 0;
}

int fd_alloc(size_t bytes, void** ptr) {
  if (ptr == nullptr) {
    return -EINVAL;
  }
  *ptr = nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t map_len = kHeader + ((bytes == 0 ? 1 : bytes) + page - 1) / page * page;
  const Locked guard;
  Region* slot = new_slot();
  if (slot == nullptr) {
    return -ENOMEM;
  }
  const int fd = memfd_create("trainit-fakedev", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return -errno;
  }
  // Its size sealed: no process that holds the fd (the exporter included)
  // can shrink it under an importer, whose next access would be a SIGBUS.
  if (ftruncate(fd, static_cast<off_t>(map_len)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = -errno;
    close(fd);
    return err;
  }
  void* base = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = -errno;
    close(fd);
    return err;
  }
  auto* h = new (base) SharedHeader{};
  h->magic = kMagic;
  h->generation = next_generation.fetch_add(1, std::memory_order_relaxed) + 1;
  h->bytes = bytes;
  h->exporter_pid = getpid();
  h->state.store(kLive, std::memory_order_release);
  *slot = Region{Kind::kAlloc, true, getpid(), static_cast<char*>(base), map_len, bytes, fd};
  *ptr = slot->data();
  return 0;
}

int fd_free(void* ptr) {
  if (ptr == nullptr) {
    return 0;
  }
  drain();  // no launched call still uses it
  const Locked guard;
  Region* r = find(ptr, 1);
  if (r == nullptr || r->data() != ptr) {
    return violation(-EINVAL, "free of %p, not an allocation of this process", ptr);
  }
  if (r->kind == Kind::kImport) {
    return violation(-EINVAL, "free of the import %p (close_import it)", ptr);
  }
  if (!r->live) {
    return violation(-EFAULT, "free of %p twice", ptr);
  }
  SharedHeader* h = r->header();
  // free and import are a store-then-load pair on each side (state then
  // imports here, imports then state there): seq_cst, so that either this
  // free sees the import or the import sees the free, never neither.
  h->state.store(kFreeing, std::memory_order_seq_cst);
  const int32_t imports = h->imports.load(std::memory_order_seq_cst);
  if (imports > 0) {
    h->state.store(kLive, std::memory_order_seq_cst);
    return violation(-EBUSY, "free of %p with %d import(s) still open in other processes", ptr, imports);
  }
  h->state.store(kFreed, std::memory_order_seq_cst);
  retire(*r);
  return 0;
}

int fd_export(void* ptr, size_t bytes, void* handle, size_t* handle_len, int* fd) {
  if (handle == nullptr || handle_len == nullptr || fd == nullptr) {
    return -EINVAL;
  }
  *fd = -1;
  const Locked guard;
  Region* r = find(ptr, 1);
  if (r == nullptr || r->data() != ptr || r->kind != Kind::kAlloc) {
    return violation(-EINVAL, "export of %p, not an allocation of this process", ptr);
  }
  if (!r->live) {
    return violation(-EFAULT, "export of %p after its free", ptr);
  }
  if (bytes > r->bytes) {
    return violation(-EINVAL, "export of %zu bytes of a %llu-byte buffer", bytes,
                     static_cast<unsigned long long>(r->bytes));
  }
  if (*handle_len < sizeof(Handle)) {
    return -ENOSPC;
  }
  const SharedHeader* h = r->header();
  const Handle out{kMagic, h->generation, h->bytes, h->exporter_pid, 0};
  const int dup = fcntl(r->memfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    return -errno;
  }
  std::memcpy(handle, &out, sizeof out);
  *handle_len = sizeof out;
  *fd = dup;
  return 0;
}

int fd_import(const void* handle, size_t handle_len, int fd, void** ptr) {
  if (ptr == nullptr) {
    return -EINVAL;
  }
  *ptr = nullptr;
  if (handle == nullptr) {
    return violation(-EINVAL, "import without a handle");
  }
  if (handle_len > TRAINIT_COLL_HANDLE_MAX) {
    return violation(-EMSGSIZE, "import of a %zu-byte handle (at most %d)", handle_len, TRAINIT_COLL_HANDLE_MAX);
  }
  Handle in{};
  if (handle_len != sizeof in) {
    return violation(-EINVAL, "import of a %zu-byte handle (fakedev's are %zu)", handle_len, sizeof in);
  }
  std::memcpy(&in, handle, sizeof in);
  if (in.magic != kMagic) {
    return violation(-EINVAL, "import of a handle that is not fakedev's");
  }
  if (in.exporter_pid == getpid()) {
    return violation(-EINVAL, "import in the exporting process %d (pass the handle to another one)",
                     static_cast<int>(in.exporter_pid));
  }
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    return violation(-EBADF, "import without the exporter's fd (send it with SCM_RIGHTS)");
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t map_len = kHeader + ((in.bytes == 0 ? 1 : in.bytes) + page - 1) / page * page;
  if (static_cast<uint64_t>(st.st_size) != map_len) {
    return violation(-EINVAL, "import with an fd that is not this handle's buffer");
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return violation(-EINVAL,
                     "import of a buffer whose size is not sealed (its exporter could shrink it under this "
                     "process)");
  }
  const Locked guard;
  Region* slot = new_slot();
  if (slot == nullptr) {
    return -ENOMEM;
  }
  void* base = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    return -errno;
  }
  auto* h = static_cast<SharedHeader*>(base);
  if (h->magic != kMagic || h->generation != in.generation || h->exporter_pid != in.exporter_pid ||
      h->bytes != in.bytes) {
    munmap(base, map_len);
    return violation(-EINVAL, "import with an fd that is not this handle's buffer");
  }
  h->imports.fetch_add(1, std::memory_order_seq_cst);  // see fd_free
  if (h->state.load(std::memory_order_seq_cst) != kLive) {
    h->imports.fetch_sub(1, std::memory_order_seq_cst);
    munmap(base, map_len);
    return violation(-ESTALE, "import of a buffer its exporter freed");
  }
  *slot = Region{Kind::kImport, true, getpid(), static_cast<char*>(base), map_len, in.bytes, -1};
  *ptr = slot->data();
  return 0;
}

// A handle of fewer bytes than this process will touch is no peer's buffer
// for it: refused before anything is mapped (not this process's misuse:
// not counted). fd_import() checks the memfd against the handle.
int fd_import_sized(const void* handle, size_t handle_len, int fd, size_t bytes, void** ptr) {
  Handle in{};
  if (ptr != nullptr && handle != nullptr && handle_len == sizeof in) {
    std::memcpy(&in, handle, sizeof in);
    if (in.magic == kMagic && in.bytes < bytes) {
      *ptr = nullptr;
      return -EINVAL;
    }
  }
  return fd_import(handle, handle_len, fd, ptr);
}

int fd_close_import(void* ptr) {
  const Locked guard;
  Region* r = find(ptr, 1);
  if (r == nullptr || r->data() != ptr || r->kind != Kind::kImport) {
    return violation(-EINVAL, "close_import of %p, not an import of this process", ptr);
  }
  if (!r->live) {
    return violation(-EFAULT, "close_import of %p twice", ptr);
  }
  r->header()->imports.fetch_sub(1, std::memory_order_seq_cst);  // after this process's last use
  retire(*r);
  return 0;
}

int fd_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) {
    return 0;
  }
  if (dst == nullptr || src == nullptr) {
    return -EINVAL;
  }
  maybe_hang("a copy");
  drain();
  const Locked guard;
  int rc = check_use(dst, bytes, "copy to");
  if (rc < 0) {
    return rc;
  }
  rc = check_use(src, bytes, "copy from");
  if (rc < 0) {
    return rc;
  }
  std::memmove(dst, src, bytes);
  return 0;
}

int fd_reduce(void* dst, const void* src, size_t count, int dtype, int op) {
  const void* ins[2] = {dst, src};
  if (const int rc = check_fold_args(dtype, op, count, dst, ins, 2); rc != 0) {
    return rc < 0 ? rc : 0;
  }
  const size_t size = dtype_size(dtype);
  maybe_hang("a reduce");
  drain();
  const Locked guard;
  int rc = check_use(dst, count * size, "reduce into");
  if (rc == 1) {
    return violation(-EFAULT, "reduce into host memory %p (device buffers only)", dst);
  }
  if (rc < 0) {
    return rc;
  }
  rc = check_use(src, count * size, "reduce from");
  if (rc == 1) {
    return violation(-EFAULT, "reduce from host memory %p (device buffers only)", src);
  }
  if (rc < 0) {
    return rc;
  }
  kernels_best()->fold[dtype][op](dst, ins, 2, count);
  corrupt_if_asked(dst);
  return 0;
}

int fd_fold(void* dst, const void* const* srcs, int n, size_t count, int dtype, int op) {
  if (const int rc = check_fold_args(dtype, op, count, dst, srcs, n); rc != 0) {
    return rc < 0 ? rc : 0;
  }
  const size_t size = dtype_size(dtype);
  maybe_hang("a fold");
  drain();
  const Locked guard;
  int rc = check_use(dst, count * size, "fold into");
  if (rc == 1) {
    return violation(-EFAULT, "fold into host memory %p (device buffers only)", dst);
  }
  for (int i = 0; rc == 0 && i < n; ++i) {
    rc = check_use(srcs[i], count * size, "fold from");
    if (rc == 1) {
      return violation(-EFAULT, "fold from host memory %p (device buffers only)", srcs[i]);
    }
  }
  if (rc < 0) {
    return rc;
  }
  kernels_best()->fold[dtype][op](dst, srcs, n, count);
  corrupt_if_asked(dst);
  return 0;
}

int fd_nothing() {
  return 0;
}

uint64_t fd_violations() {
  return violation_count.load(std::memory_order_relaxed);
}

constexpr trainit_coll_backend kFakedev = {
    TRAINIT_COLL_BACKEND_ABI,
    "fakedev",
    fd_init,
    fd_alloc,
    fd_free,
    fd_export,
    fd_import,
    fd_close_import,
    fd_copy,
    fd_reduce,
    fd_nothing,
    fd_nothing,
    fd_violations,
    nullptr,
    nullptr,
    fd_fold,
    fd_import_sized,
    fakedev::launch,
    fakedev::query,
    fakedev::host_mapped,
    fakedev::free_host_mapped,
    nullptr,
};

}  // namespace
}  // namespace trainit::coll

extern "C" __attribute__((visibility("default"))) const trainit_coll_backend* trainit_coll_backend_v1() {
  return &trainit::coll::kFakedev;
}

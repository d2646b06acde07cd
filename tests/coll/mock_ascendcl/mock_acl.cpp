// A mock AscendCL runtime for the tests: a shared library named
// libascendcl.so that implements the few runtime calls the Ascend collective
// backend (src/coll/plugins/ascend) uses, with the prototypes and aclError values of
// the public AscendCL reference, and that refuses, counts and reports every
// broken rule instead of misbehaving the way a real device might.
//
// Device memory is a file per allocation in a directory that every process of
// a test shares (MOCK_ACL_DIR, default /dev/shm/mock-ascendcl-UID, created
// 0700), made with O_TMPFILE: nameless until aclrtIpcMemGetExportKey links it
// in under its key (64 hex digits and a NUL: 65 bytes), so that another
// process reaches it by key only, as with the real runtime (no descriptor is
// passed). The file's first page is bookkeeping every process mapping it sees
// (exporter, device, size, the allowed importers, the live importers, state);
// the device pointer is the mapping past that page.
//
// The rules, each refused with the aclError shown (counted, one line on
// stderr naming the call and the code):
//   - any call but aclInit before aclInit in this process (a fork()ed child
//     inherits nothing): ACL_ERROR_UNINITIALIZE 100001; memory and IPC calls
//     before aclrtSetDevice: ACL_ERROR_RT_CONTEXT_NULL 107002;
//   - aclrtSetDevice of a device the process cannot see:
//     ACL_ERROR_RT_INVALID_DEVICEID 107001;
//   - a key buffer shorter than 65 bytes, a malformed key, a pointer that is
//     not a live allocation (double free included), a copy past a buffer or
//     of the wrong kind: ACL_ERROR_INVALID_PARAM 100000;
//   - aclrtIpcMemImportByKey by a process whose bare tgid the exporter did not
//     allow with aclrtIpcMemSetImportPid (unless exported with
//     ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION), or
//     aclrtIpcMemSetImportPid by another process than the exporter:
//     ACL_ERROR_RT_NO_PERMISSION 207006;
//   - aclrtIpcMemImportByKey of an unknown or closed key, of a key whose
//     exporter died, or of a key this process imported already;
//     aclrtIpcMemClose of a key this process neither exported nor imported
//     (double close included): ACL_ERROR_RT_INVALID_HANDLE 107017;
//   - the exporter's aclrtIpcMemClose while an importer has not closed (the
//     documented order: every importer closes, then the exporter):
//     ACL_ERROR_RT_IPC_ERROR 507022, the key stays open;
//   - aclrtFree of memory whose key is still open (the exporter closes it
//     first) or that live importers still map: ACL_ERROR_RT_MEMORY_FREE
//     207002, the memory stays as it was;
//   - on an import of another device's memory (the documented cross-device
//     limits): a synchronous aclrtMemcpy, a host<->device copy, the
//     direction-guessing ACL_MEMCPY_DEFAULT, or any copy when the import did
//     not ask for ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS:
//     ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000.
//   - aclrtFree, or an importer's aclrtIpcMemClose, of memory that a queued
//     asynchronous copy still uses: ACL_ERROR_RT_MEMORY_FREE 207002 (free)
//     or ACL_ERROR_RT_IPC_ERROR 507022 (close);
//   - a stream that aclrtCreateStream did not make in this process, or that
//     was destroyed: ACL_ERROR_INVALID_PARAM 100000.
// An importer that died is no longer a live importer (the driver reclaims a
// dead process's mappings), so a rank that outlives a killed peer can free.
//
// Streams: an asynchronous copy is checked when it is queued and done when
// its stream is synchronised (aclrtSynchronizeStream; aclrtSynchronizeDevice
// for every stream of the process; aclrtDestroyStream), in the order
// queued, as a device may do it any time before then. So a caller that
// reads the destination, or changes the source, before it synchronises sees
// what a real device could show it. The default stream (nullptr) is one
// more stream. mockAclSynchronizeStream lets the mock operators
// (mock_aclnn.cpp) run after the copies queued before them.
//
// Knobs (environment, read at aclInit):
//   MOCK_ACL_DIR      where the keyed files live (see above).
//   MOCK_ACL_DEVICES  how many devices the node has (default 8).
//   ASCEND_RT_VISIBLE_DEVICES, else ASCEND_VISIBLE_DEVICES: a comma list of
//                     physical ids; logical device i (what aclrtSetDevice
//                     takes) is the i-th, as in a container that sees only
//                     those. Unset: logical i is physical i.
//   MOCK_ACL_FAULT    DEVICE:KIND[,DEVICE:KIND...], DEVICE a physical id:
//                     fail  - aclrtSetDevice of it returns
//                             ACL_ERROR_RT_DEV_SETUP_ERROR 507033;
//                     hang  - aclrtSynchronizeDevice and every copy on it
//                             block forever (a hung device);
//                     wrong - every device-to-host copy on it returns the data
//                             with the lowest bit of its first byte flipped
//                             (the first element of a little-endian result:
//                             a wrong sum).
// mockAclViolations() (not AscendCL) returns how many rules this process
// broke, mockAclDeviceWaits() how many aclrtSynchronizeDevice calls it made.
//
// Simplifications: the current device is per process (AscendCL's is per
// thread); the bare tgid is the pid (no container pid namespace to leave).
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
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

extern "C" {
typedef int aclError;
typedef void* aclrtStream;
typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST,
  ACL_MEMCPY_HOST_TO_DEVICE,
  ACL_MEMCPY_DEVICE_TO_HOST,
  ACL_MEMCPY_DEVICE_TO_DEVICE,
  ACL_MEMCPY_DEFAULT,
} aclrtMemcpyKind;
typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST,
  ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,  // the last placement policy
} aclrtMemMallocPolicy;
}

namespace {

// aclError values of the reference (acl_base_rt.h, rt_error_codes.h).
constexpr aclError kSuccess = 0;
constexpr aclError kInvalidParam = 100000;       // ACL_ERROR_INVALID_PARAM
constexpr aclError kUninitialize = 100001;       // ACL_ERROR_UNINITIALIZE
constexpr aclError kRepeatInitialize = 100002;   // ACL_ERROR_REPEAT_INITIALIZE
constexpr aclError kInvalidDeviceId = 107001;    // ACL_ERROR_RT_INVALID_DEVICEID
constexpr aclError kContextNull = 107002;        // ACL_ERROR_RT_CONTEXT_NULL
constexpr aclError kInvalidHandle = 107017;      // ACL_ERROR_RT_INVALID_HANDLE
constexpr aclError kFeatureNotSupport = 207000;  // ACL_ERROR_RT_FEATURE_NOT_SUPPORT
constexpr aclError kMemoryAllocation = 207001;   // ACL_ERROR_RT_MEMORY_ALLOCATION
constexpr aclError kMemoryFree = 207002;         // ACL_ERROR_RT_MEMORY_FREE
constexpr aclError kNoPermission = 207006;       // ACL_ERROR_RT_NO_PERMISSION
constexpr aclError kIpcError = 507022;           // ACL_ERROR_RT_IPC_ERROR
constexpr aclError kDevSetupError = 507033;      // ACL_ERROR_RT_DEV_SETUP_ERROR

constexpr uint64_t kExportDisablePidValidation = 0x1;  // ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
constexpr uint64_t kImportEnablePeerAccess = 0x1;      // ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS
constexpr size_t kKeyLen = 65;                         // 64 hex digits and a NUL

constexpr uint64_t kMagic = 0x6d6f636b61636c31;  // "mockacl1"
constexpr size_t kHeader = 4096;
constexpr int kMaxPids = 64;
constexpr uint32_t kOpen = 1;     // the key may be imported
constexpr uint32_t kClosing = 2;  // the exporter is closing it
constexpr uint32_t kClosed = 3;

// The file's first page, in every process that maps it.
struct SharedHeader {
  uint64_t magic;
  uint64_t bytes;
  int32_t exporter;
  int32_t device;  // physical
  uint64_t flags;  // the export's
  std::atomic<uint32_t> state;
  std::atomic<int32_t> allowed_count;
  std::atomic<int32_t> allowed[kMaxPids];
  std::atomic<int32_t> importers[kMaxPids];  // a live importer's pid, or 0
};
static_assert(sizeof(SharedHeader) <= kHeader);

enum class Kind : uint8_t { kFree, kAlloc, kImport };

struct Region {
  Kind kind = Kind::kFree;
  pid_t pid = 0;  // the process the entry belongs to (a fork()ed child inherits the table)
  char* base = nullptr;
  size_t map_len = 0;
  uint64_t bytes = 0;
  int fd = -1;            // allocations: the O_TMPFILE file
  bool exported = false;  // allocations: linked under key, not yet closed
  bool peer_access = false;
  char key[kKeyLen] = {};
  SharedHeader* header() const { return reinterpret_cast<SharedHeader*>(base); }
  char* data() const { return base + kHeader; }
};

constexpr int kRegions = 1024;
constexpr int kMaxDevices = 64;
constexpr int kMaxFaults = 16;
enum class Fault : uint8_t { kNone, kFail, kHang, kWrong };

struct State {
  pid_t init_pid = 0;    // the process that called aclInit
  pid_t device_pid = 0;  // the process that called aclrtSetDevice
  int physical = -1;     // the current device
  int visible[kMaxDevices] = {};
  int visible_count = 0;
  int fault_device[kMaxFaults] = {};
  Fault fault_kind[kMaxFaults] = {};
  int faults = 0;
  char dir[512] = {};
  Region regions[kRegions];
};

State state;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

// A queued asynchronous copy, done when its stream is synchronised.
struct Queued {
  void* dst;
  const void* src;
  size_t count;
  bool wrong;  // a device-to-host copy from a "wrong" device
};

constexpr int kStreams = 64;
constexpr int kQueueLen = 1024;

struct Stream {
  pid_t pid = 0;  // the process that made it; 0: free
  int queued = 0;
  Queued copies[kQueueLen];
};

// [0] is the default stream (nullptr), every process's own.
Stream streams[kStreams + 1];
std::atomic<uint64_t> violation_count{0};

struct Locked {
  Locked() { pthread_mutex_lock(&lock); }
  ~Locked() { pthread_mutex_unlock(&lock); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
};

__attribute__((format(printf, 3, 4))) aclError refuse(aclError code, const char* call, const char* fmt, ...) {
  violation_count.fetch_add(1, std::memory_order_relaxed);
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) {  // cut short when too long
    msg[0] = '\0';
  }
  va_end(ap);
  static_cast<void>(std::fprintf(stderr, "mock AscendCL [%d]: %s refused: %s (aclError %d)\n",
                                 static_cast<int>(getpid()), call, msg, code));
  return code;
}

bool alive(pid_t pid) {
  return kill(pid, 0) == 0 || errno == EPERM;
}

// --- configuration (aclInit) -------------------------------------------------

// A comma list of device ids into out: its length, or -1 when malformed.
int parse_ids(const char* s, int* out, int max) {
  int n = 0;
  while (*s != '\0') {
    char* end = nullptr;
    errno = 0;
    const long id = std::strtol(s, &end, 10);
    if (end == s || errno != 0 || id < 0 || id >= kMaxDevices || n == max || (*end != ',' && *end != '\0')) {
      return -1;
    }
    out[n++] = static_cast<int>(id);
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

void configure() {
  const char* devices = std::getenv("MOCK_ACL_DEVICES");
  int count = devices != nullptr ? std::atoi(devices) : 8;
  count = count < 0 ? 0 : count > kMaxDevices ? kMaxDevices : count;
  const char* visible = std::getenv("ASCEND_RT_VISIBLE_DEVICES");
  if (visible == nullptr) {
    visible = std::getenv("ASCEND_VISIBLE_DEVICES");
  }
  state.visible_count = 0;
  if (visible != nullptr) {
    state.visible_count = parse_ids(visible, state.visible, kMaxDevices);
    if (state.visible_count < 0) {
      static_cast<void>(std::fprintf(stderr, "mock AscendCL: malformed visible device list \"%s\"\n", visible));
      state.visible_count = 0;
    }
  } else {
    for (int i = 0; i < count; ++i) {
      state.visible[state.visible_count++] = i;
    }
  }
  // Only devices the node has.
  int kept = 0;
  for (int i = 0; i < state.visible_count; ++i) {
    if (state.visible[i] < count) {
      state.visible[kept++] = state.visible[i];
    }
  }
  state.visible_count = kept;

  state.faults = 0;
  const char* faults = std::getenv("MOCK_ACL_FAULT");
  for (const char* s = faults; s != nullptr && *s != '\0' && state.faults < kMaxFaults;) {
    char* end = nullptr;
    const long device = std::strtol(s, &end, 10);
    const char* kind = *end == ':' ? end + 1 : nullptr;
    const size_t len = kind != nullptr ? std::strcspn(kind, ",") : 0;
    Fault f = Fault::kNone;
    if (kind != nullptr && len == 4 && std::strncmp(kind, "fail", 4) == 0) {
      f = Fault::kFail;
    } else if (kind != nullptr && len == 4 && std::strncmp(kind, "hang", 4) == 0) {
      f = Fault::kHang;
    } else if (kind != nullptr && len == 5 && std::strncmp(kind, "wrong", 5) == 0) {
      f = Fault::kWrong;
    }
    if (end == s || f == Fault::kNone) {
      static_cast<void>(std::fprintf(stderr, "mock AscendCL: malformed MOCK_ACL_FAULT \"%s\"\n", faults));
      break;
    }
    state.fault_device[state.faults] = static_cast<int>(device);
    state.fault_kind[state.faults++] = f;
    s = kind[len] == ',' ? kind + len + 1 : kind + len;
  }

  const char* dir = std::getenv("MOCK_ACL_DIR");
  const int n = dir != nullptr && dir[0] != '\0'
                    ? std::snprintf(state.dir, sizeof state.dir, "%s", dir)
                    : std::snprintf(state.dir, sizeof state.dir, "/dev/shm/mock-ascendcl-%u", getuid());
  if (n < 0 || static_cast<size_t>(n) >= sizeof state.dir) {
    state.dir[0] = '\0';
  }
  if (mkdir(state.dir, 0700) != 0 && errno != EEXIST) {
    static_cast<void>(std::fprintf(stderr, "mock AscendCL: cannot create %s: %s\n", state.dir, std::strerror(errno)));
  }
}

bool has_fault(Fault f) {
  for (int i = 0; i < state.faults; ++i) {
    if (state.fault_kind[i] == f && state.fault_device[i] == state.physical) {
      return true;
    }
  }
  return false;
}

// A hung device: the caller never gets an answer.
void hang_if_faulty() {
  if (has_fault(Fault::kHang)) {
    for (;;) {
      pause();
    }
  }
}

// 0 when this process may use memory and IPC calls, else the refusal.
aclError check_ready(const char* call) {
  const pid_t me = getpid();
  if (state.init_pid != me) {
    return refuse(kUninitialize, call, "aclInit has not been called in this process");
  }
  if (state.device_pid != me) {
    return refuse(kContextNull, call, "aclrtSetDevice has not been called in this process");
  }
  return kSuccess;
}

// --- streams -------------------------------------------------------------------

// The stream a handle stands for in this process, or nullptr.
Stream* stream_of(void* handle) {
  const pid_t me = getpid();
  if (handle == nullptr) {
    if (streams[0].pid != me) {  // a fork()ed child's default stream starts empty
      streams[0].pid = me;
      streams[0].queued = 0;
    }
    return &streams[0];
  }
  for (int i = 1; i <= kStreams; ++i) {
    if (handle == &streams[i]) {
      return streams[i].pid == me ? &streams[i] : nullptr;
    }
  }
  return nullptr;
}

// Does the stream's queued copies, in order.
void run_queued(Stream* st) {
  for (int i = 0; i < st->queued; ++i) {
    const Queued& q = st->copies[i];
    std::memmove(q.dst, q.src, q.count);
    if (q.wrong) {
      static_cast<unsigned char*>(q.dst)[0] ^= 1U;
    }
  }
  st->queued = 0;
}

void run_all_queued() {
  const pid_t me = getpid();
  for (Stream& st : streams) {
    if (st.pid == me) {
      run_queued(&st);
    }
  }
}

bool overlaps(const void* a, size_t a_len, const char* b, size_t b_len) {
  const auto* c = static_cast<const char*>(a);
  return c < b + b_len && b < c + a_len;
}

// Whether a queued copy of this process still reads or writes [p, p + len).
bool queued_on(const char* p, size_t len) {
  const pid_t me = getpid();
  for (const Stream& st : streams) {
    for (int i = 0; st.pid == me && i < st.queued; ++i) {
      const Queued& q = st.copies[i];
      if (overlaps(q.dst, q.count, p, len) || overlaps(q.src, q.count, p, len)) {
        return true;
      }
    }
  }
  return false;
}

// --- this process's table ------------------------------------------------------

// The region of this process whose data range holds [p, p + len), or the one
// it partly overlaps; nullptr when none (host memory).
Region* find(const void* p, size_t len) {
  const pid_t me = getpid();
  const auto* c = static_cast<const char*>(p);
  for (Region& r : state.regions) {
    if (r.kind != Kind::kFree && r.pid == me && c < r.data() + r.bytes && c + (len == 0 ? 1 : len) > r.data()) {
      return &r;
    }
  }
  return nullptr;
}

Region* find_key(const char* key, Kind kind) {
  const pid_t me = getpid();
  for (Region& r : state.regions) {
    if (r.kind == kind && r.pid == me && std::strncmp(r.key, key, kKeyLen) == 0 &&
        (kind == Kind::kImport || r.exported)) {
      return &r;
    }
  }
  return nullptr;
}

// A free slot; entries a fork()ed child inherited are dropped (without
// touching the parent's files: the child's copies of its mappings go).
Region* new_slot() {
  const pid_t me = getpid();
  for (Region& r : state.regions) {
    if (r.kind != Kind::kFree && r.pid != me) {
      munmap(r.base, r.map_len);
      if (r.fd >= 0) {
        close(r.fd);
      }
      r = Region{};
    }
    if (r.kind == Kind::kFree) {
      return &r;
    }
  }
  return nullptr;
}

size_t map_length(uint64_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return kHeader + ((bytes == 0 ? 1 : bytes) + page - 1) / page * page;
}

bool valid_key(const char* key) {
  for (size_t i = 0; i + 1 < kKeyLen; ++i) {
    const char c = key[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return key[kKeyLen - 1] == '\0';
}

bool make_key(char* key) {
  unsigned char bytes[(kKeyLen - 1) / 2];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    return false;
  }
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof bytes; ++i) {
    key[2 * i] = kHex[bytes[i] >> 4];
    key[2 * i + 1] = kHex[bytes[i] & 15];
  }
  key[kKeyLen - 1] = '\0';
  return true;
}

bool path_of(const char* key, char* path, size_t size) {
  const int n = std::snprintf(path, size, "%s/%s", state.dir, key);
  return n > 0 && static_cast<size_t>(n) < size;
}

// Importers of h still alive, leaving out those that died.
int live_importers(SharedHeader* h) {
  int live = 0;
  for (auto& slot : h->importers) {
    const int32_t pid = slot.load(std::memory_order_seq_cst);
    if (pid == 0) {
      continue;
    }
    if (alive(pid)) {
      ++live;
    } else {
      int32_t expected = pid;
      slot.compare_exchange_strong(expected, 0);
    }
  }
  return live;
}

bool allowed(const SharedHeader* h, int32_t pid) {
  if ((h->flags & kExportDisablePidValidation) != 0) {
    return true;
  }
  const int n = h->allowed_count.load(std::memory_order_acquire);
  for (int i = 0; i < n && i < kMaxPids; ++i) {
    if (h->allowed[i].load(std::memory_order_relaxed) == pid) {
      return true;
    }
  }
  return false;
}

// Is this pointer, as the side of a copy, device memory this process may
// use? 0 with *r set (device) or *r null (host), else the refusal.
aclError classify(const char* call, const void* p, size_t len, Region** r) {
  *r = find(p, len);
  if (*r == nullptr) {
    return kSuccess;
  }
  const auto* c = static_cast<const char*>(p);
  if (c < (*r)->data() || c + len > (*r)->data() + (*r)->bytes) {
    return refuse(kInvalidParam, call, "%p + %zu runs outside its %llu-byte buffer", p, len,
                  static_cast<unsigned long long>((*r)->bytes));
  }
  return kSuccess;
}

bool remote(const Region* r) {
  return r != nullptr && r->kind == Kind::kImport && r->header()->device != state.physical;
}

// The rules of a copy's kind and of the documented cross-device limits.
aclError check_copy(const char* call, bool async, void* dst, size_t dest_max, const void* src, size_t count,
                    aclrtMemcpyKind kind, Region** dr, Region** sr) {
  if (dst == nullptr || src == nullptr || count > dest_max) {
    return refuse(kInvalidParam, call, "dst %p, src %p, %zu bytes into %zu", dst, src, count, dest_max);
  }
  aclError rc = classify(call, dst, count, dr);
  if (rc == kSuccess) {
    rc = classify(call, src, count, sr);
  }
  if (rc != kSuccess) {
    return rc;
  }
  const bool dst_dev = *dr != nullptr;
  const bool src_dev = *sr != nullptr;
  bool kind_ok = false;
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      kind_ok = !dst_dev && !src_dev;
      break;
    case ACL_MEMCPY_HOST_TO_DEVICE:
      kind_ok = dst_dev && !src_dev;
      break;
    case ACL_MEMCPY_DEVICE_TO_HOST:
      kind_ok = !dst_dev && src_dev;
      break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
      kind_ok = dst_dev && src_dev;
      break;
    case ACL_MEMCPY_DEFAULT:
      kind_ok = true;
      break;
  }
  if (!kind_ok) {
    return refuse(kInvalidParam, call, "kind %d with dst %s and src %s", static_cast<int>(kind),
                  dst_dev ? "device" : "host", src_dev ? "device" : "host");
  }
  for (const Region* r : {*dr, *sr}) {
    if (!remote(r)) {
      continue;
    }
    if (!r->peer_access) {
      return refuse(kFeatureNotSupport, call,
                    "%p is another device's memory imported without ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS",
                    r->data());
    }
    if (!async || kind != ACL_MEMCPY_DEVICE_TO_DEVICE) {
      return refuse(kFeatureNotSupport, call,
                    "%p is another device's memory: only asynchronous device-to-device copies may use it", r->data());
    }
  }
  return kSuccess;
}

// A copy, done at once, or (async) queued on the stream.
aclError do_copy(const char* call, bool async, void* dst, size_t dest_max, const void* src, size_t count,
                 aclrtMemcpyKind kind, void* stream = nullptr) {
  Region* dr = nullptr;
  Region* sr = nullptr;
  Stream* st = nullptr;
  {
    const Locked guard;
    aclError rc = check_ready(call);
    if (rc == kSuccess && async && (st = stream_of(stream)) == nullptr) {
      rc = refuse(kInvalidParam, call, "stream %p is not a stream of this process", stream);
    }
    if (rc != kSuccess || count == 0) {
      return rc;
    }
    rc = check_copy(call, async, dst, dest_max, src, count, kind, &dr, &sr);
    if (rc != kSuccess) {
      return rc;
    }
  }
  if (dr != nullptr || sr != nullptr) {
    hang_if_faulty();
  }
  const bool wrong = dr == nullptr && sr != nullptr && has_fault(Fault::kWrong);
  const Locked guard;
  if (st == nullptr) {
    std::memmove(dst, src, count);
    if (wrong) {
      static_cast<unsigned char*>(dst)[0] ^= 1U;
    }
    return kSuccess;
  }
  if (st->queued == kQueueLen) {  // a device that caught up
    run_queued(st);
  }
  st->copies[st->queued++] = Queued{dst, src, count, wrong};
  return kSuccess;
}

// The aclrtSynchronizeDevice calls this process has made.
std::atomic<uint64_t> device_waits{0};

// Runs the queued copies of one stream (one) or of every stream of this
// process, once the device answers (a hung one never does).
aclError synchronize(const char* call, bool one, void* stream) {
  {
    const Locked guard;
    const aclError rc = check_ready(call);
    if (rc != kSuccess) {
      return rc;
    }
    if (one && stream_of(stream) == nullptr) {
      return refuse(kInvalidParam, call, "stream %p is not a stream of this process", stream);
    }
  }
  hang_if_faulty();
  const Locked guard;
  if (one) {
    run_queued(stream_of(stream));
  } else {
    device_waits.fetch_add(1, std::memory_order_relaxed);
    run_all_queued();
  }
  return kSuccess;
}

}  // namespace

// --- the AscendCL entry points -------------------------------------------------

#define MOCK_ACL_API extern "C" __attribute__((visibility("default")))

MOCK_ACL_API aclError aclInit(const char* /*configPath*/) {
  const Locked guard;
  if (state.init_pid == getpid()) {
    return kRepeatInitialize;
  }
  configure();
  state.init_pid = getpid();
  return kSuccess;
}

MOCK_ACL_API aclError aclrtSetDevice(int32_t deviceId) {
  const Locked guard;
  if (state.init_pid != getpid()) {
    return refuse(kUninitialize, "aclrtSetDevice", "aclInit has not been called in this process");
  }
  if (deviceId < 0 || deviceId >= state.visible_count) {
    return refuse(kInvalidDeviceId, "aclrtSetDevice", "device %d: this process sees %d device(s)",
                  static_cast<int>(deviceId), state.visible_count);
  }
  const int physical = state.visible[deviceId];
  for (int i = 0; i < state.faults; ++i) {
    if (state.fault_device[i] == physical && state.fault_kind[i] == Fault::kFail) {
      // An injected fault, not a broken rule: not counted.
      static_cast<void>(std::fprintf(stderr, "mock AscendCL [%d]: device %d (physical %d) fails to set up\n",
                                     static_cast<int>(getpid()), static_cast<int>(deviceId), physical));
      return kDevSetupError;
    }
  }
  state.physical = physical;
  state.device_pid = getpid();
  return kSuccess;
}

MOCK_ACL_API aclError aclrtDeviceGetBareTgid(int32_t* pid) {
  const Locked guard;
  if (state.init_pid != getpid()) {
    return refuse(kUninitialize, "aclrtDeviceGetBareTgid", "aclInit has not been called in this process");
  }
  if (pid == nullptr) {
    return refuse(kInvalidParam, "aclrtDeviceGetBareTgid", "no pid to write");
  }
  *pid = static_cast<int32_t>(getpid());
  return kSuccess;
}

MOCK_ACL_API aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  const Locked guard;
  const aclError rc = check_ready("aclrtMalloc");
  if (rc != kSuccess) {
    return rc;
  }
  if (devPtr == nullptr || size == 0 || policy < ACL_MEM_MALLOC_HUGE_FIRST || policy > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P) {
    return refuse(kInvalidParam, "aclrtMalloc", "devPtr %p, %zu bytes, policy %d", static_cast<void*>(devPtr), size,
                  static_cast<int>(policy));
  }
  *devPtr = nullptr;
  Region* slot = new_slot();
  if (slot == nullptr) {
    return kMemoryAllocation;
  }
  const size_t map_len = map_length(size);
  const int fd = open(state.dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(map_len)) != 0) {
    static_cast<void>(
        std::fprintf(stderr, "mock AscendCL: no device memory file in %s: %s\n", state.dir, std::strerror(errno)));
    if (fd >= 0) {
      close(fd);
    }
    return kMemoryAllocation;
  }
  void* base = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return kMemoryAllocation;
  }
  auto* h = new (base) SharedHeader{};
  h->magic = kMagic;
  h->bytes = size;
  h->exporter = static_cast<int32_t>(getpid());
  h->device = state.physical;
  *slot = Region{};
  slot->kind = Kind::kAlloc;
  slot->pid = getpid();
  slot->base = static_cast<char*>(base);
  slot->map_len = map_len;
  slot->bytes = size;
  slot->fd = fd;
  *devPtr = slot->data();
  return kSuccess;
}

MOCK_ACL_API aclError aclrtFree(void* devPtr) {
  const Locked guard;
  const aclError rc = check_ready("aclrtFree");
  if (rc != kSuccess) {
    return rc;
  }
  Region* r = find(devPtr, 1);
  if (r == nullptr || r->data() != devPtr || r->kind != Kind::kAlloc) {
    return refuse(kInvalidParam, "aclrtFree", "%p is not a live allocation of this process (freed twice?)", devPtr);
  }
  if (queued_on(r->data(), r->bytes)) {
    return refuse(kMemoryFree, "aclrtFree", "%p: a queued asynchronous copy still uses it (synchronise first)", devPtr);
  }
  SharedHeader* h = r->header();
  if (r->exported) {
    const int live = live_importers(h);
    if (live > 0) {
      return refuse(kMemoryFree, "aclrtFree", "%p: %d importer(s) have not closed its key", devPtr, live);
    }
    return refuse(kMemoryFree, "aclrtFree", "%p: its key is still open (aclrtIpcMemClose it first)", devPtr);
  }
  munmap(r->base, r->map_len);
  close(r->fd);
  *r = Region{};
  return kSuccess;
}

MOCK_ACL_API aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  return do_copy("aclrtMemcpy", false, dst, destMax, src, count, kind);
}

MOCK_ACL_API aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                                       aclrtStream stream) {
  return do_copy("aclrtMemcpyAsync", true, dst, destMax, src, count, kind, stream);
}

MOCK_ACL_API aclError aclrtSynchronizeDevice() {
  return synchronize("aclrtSynchronizeDevice", false, nullptr);
}

MOCK_ACL_API aclError aclrtCreateStream(aclrtStream* stream) {
  const Locked guard;
  const aclError rc = check_ready("aclrtCreateStream");
  if (rc != kSuccess) {
    return rc;
  }
  if (stream == nullptr) {
    return refuse(kInvalidParam, "aclrtCreateStream", "no stream to write");
  }
  const pid_t me = getpid();
  for (int i = 1; i <= kStreams; ++i) {
    if (streams[i].pid != me) {  // free, or a parent's that a fork()ed child inherited
      streams[i].pid = me;
      streams[i].queued = 0;
      *stream = &streams[i];
      return kSuccess;
    }
  }
  return kMemoryAllocation;
}

MOCK_ACL_API aclError aclrtSynchronizeStream(aclrtStream stream) {
  return synchronize("aclrtSynchronizeStream", true, stream);
}

MOCK_ACL_API aclError aclrtDestroyStream(aclrtStream stream) {
  const Locked guard;
  const aclError rc = check_ready("aclrtDestroyStream");
  if (rc != kSuccess) {
    return rc;
  }
  Stream* st = stream_of(stream);
  if (st == nullptr || st == &streams[0]) {
    return refuse(kInvalidParam, "aclrtDestroyStream", "stream %p is not a stream this process made", stream);
  }
  run_queued(st);  // its work is done first
  st->pid = 0;
  return kSuccess;
}

MOCK_ACL_API aclError aclrtIpcMemGetExportKey(void* devPtr, size_t size, char* key, size_t len, uint64_t flags) {
  const Locked guard;
  const aclError rc = check_ready("aclrtIpcMemGetExportKey");
  if (rc != kSuccess) {
    return rc;
  }
  if (key == nullptr || len < kKeyLen) {
    return refuse(kInvalidParam, "aclrtIpcMemGetExportKey", "a %zu-byte key buffer (the key takes %zu)", len, kKeyLen);
  }
  if (flags > kExportDisablePidValidation) {
    return refuse(kInvalidParam, "aclrtIpcMemGetExportKey", "flags %#llx", static_cast<unsigned long long>(flags));
  }
  Region* r = find(devPtr, 1);
  if (r == nullptr || r->data() != devPtr || r->kind != Kind::kAlloc || size == 0 || size > r->bytes) {
    return refuse(kInvalidParam, "aclrtIpcMemGetExportKey", "%p + %zu is not an allocation of this process", devPtr,
                  size);
  }
  if (!r->exported) {
    char path[700];
    char proc[64];
    if (!make_key(r->key) || !path_of(r->key, path, sizeof path) ||
        std::snprintf(proc, sizeof proc, "/proc/self/fd/%d", r->fd) <= 0 ||
        linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) != 0) {
      static_cast<void>(std::fprintf(stderr, "mock AscendCL: cannot name %p under its key in %s: %s\n", devPtr,
                                     state.dir, std::strerror(errno)));
      return kIpcError;
    }
    r->header()->flags = flags;
    r->header()->state.store(kOpen, std::memory_order_seq_cst);
    r->exported = true;
  }
  std::memcpy(key, r->key, kKeyLen);
  return kSuccess;
}

MOCK_ACL_API aclError aclrtIpcMemSetImportPid(const char* key, int32_t* pid, size_t num) {
  const Locked guard;
  const aclError rc = check_ready("aclrtIpcMemSetImportPid");
  if (rc != kSuccess) {
    return rc;
  }
  if (key == nullptr || pid == nullptr || num == 0) {
    return refuse(kInvalidParam, "aclrtIpcMemSetImportPid", "key %p, pid %p, num %zu", static_cast<const void*>(key),
                  static_cast<void*>(pid), num);
  }
  Region* r = find_key(key, Kind::kAlloc);
  if (r == nullptr) {
    return refuse(kNoPermission, "aclrtIpcMemSetImportPid", "key %.16s... was not exported by this process", key);
  }
  SharedHeader* h = r->header();
  for (size_t i = 0; i < num; ++i) {
    if (allowed(h, pid[i])) {
      continue;
    }
    const int n = h->allowed_count.load(std::memory_order_relaxed);
    if (n == kMaxPids) {
      return refuse(kInvalidParam, "aclrtIpcMemSetImportPid", "more than %d importers", kMaxPids);
    }
    h->allowed[n].store(pid[i], std::memory_order_relaxed);
    h->allowed_count.store(n + 1, std::memory_order_release);
  }
  return kSuccess;
}

MOCK_ACL_API aclError aclrtIpcMemImportByKey(void** devPtr, const char* key, uint64_t flags) {
  const Locked guard;
  const aclError rc = check_ready("aclrtIpcMemImportByKey");
  if (rc != kSuccess) {
    return rc;
  }
  if (devPtr == nullptr || key == nullptr || flags > kImportEnablePeerAccess) {
    return refuse(kInvalidParam, "aclrtIpcMemImportByKey", "devPtr %p, key %p, flags %#llx", static_cast<void*>(devPtr),
                  static_cast<const void*>(key), static_cast<unsigned long long>(flags));
  }
  *devPtr = nullptr;
  char path[700];
  if (!valid_key(key) || !path_of(key, path, sizeof path)) {
    return refuse(kInvalidHandle, "aclrtIpcMemImportByKey", "not a key (64 hex digits and a NUL)");
  }
  if (find_key(key, Kind::kImport) != nullptr) {
    return refuse(kInvalidHandle, "aclrtIpcMemImportByKey", "key %.16s... is imported in this process already", key);
  }
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return refuse(kInvalidHandle, "aclrtIpcMemImportByKey", "no memory has key %.16s... (unknown, or closed)", key);
  }
  struct stat st {};
  void* base = MAP_FAILED;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kHeader) {
    base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED) {
    return refuse(kInvalidHandle, "aclrtIpcMemImportByKey", "key %.16s... names no device memory", key);
  }
  const auto map_len = static_cast<size_t>(st.st_size);
  auto* h = static_cast<SharedHeader*>(base);
  const int32_t me = static_cast<int32_t>(getpid());
  aclError refused = kSuccess;
  if (h->magic != kMagic || map_length(h->bytes) != map_len) {
    refused = refuse(kInvalidHandle, "aclrtIpcMemImportByKey", "key %.16s... names no device memory", key);
  } else if (!alive(h->exporter)) {
    refused = refuse(kInvalidHandle, "aclrtIpcMemImportByKey", "the exporter of key %.16s... (%d) is dead", key,
                     static_cast<int>(h->exporter));
  } else if (!allowed(h, me)) {
    refused = refuse(kNoPermission, "aclrtIpcMemImportByKey",
                     "bare tgid %d is not among the importers the exporter (%d) allowed with aclrtIpcMemSetImportPid",
                     static_cast<int>(me), static_cast<int>(h->exporter));
  }
  // Join the importers, then look at the state: the exporter's close does
  // the opposite (state, then importers), so one of the two sees the other.
  std::atomic<int32_t>* slot = nullptr;
  for (auto& s : h->importers) {
    int32_t expected = 0;
    if (refused == kSuccess && s.compare_exchange_strong(expected, me, std::memory_order_seq_cst)) {
      slot = &s;
      break;
    }
  }
  if (refused == kSuccess && slot == nullptr) {
    refused = refuse(kInvalidParam, "aclrtIpcMemImportByKey", "more than %d importers", kMaxPids);
  }
  if (refused == kSuccess && h->state.load(std::memory_order_seq_cst) != kOpen) {
    slot->store(0, std::memory_order_seq_cst);
    refused = refuse(kInvalidHandle, "aclrtIpcMemImportByKey", "key %.16s... is being closed by its exporter", key);
  }
  Region* r = refused == kSuccess ? new_slot() : nullptr;
  if (refused == kSuccess && r == nullptr) {
    slot->store(0, std::memory_order_seq_cst);
    refused = kMemoryAllocation;
  }
  if (refused != kSuccess) {
    munmap(base, map_len);
    return refused;
  }
  *r = Region{};
  r->kind = Kind::kImport;
  r->pid = getpid();
  r->base = static_cast<char*>(base);
  r->map_len = map_len;
  r->bytes = h->bytes;
  r->peer_access = (flags & kImportEnablePeerAccess) != 0;
  std::memcpy(r->key, key, kKeyLen);
  *devPtr = r->data();
  return kSuccess;
}

MOCK_ACL_API aclError aclrtIpcMemClose(const char* key) {
  const Locked guard;
  const aclError rc = check_ready("aclrtIpcMemClose");
  if (rc != kSuccess) {
    return rc;
  }
  if (key == nullptr || !valid_key(key)) {
    return refuse(kInvalidParam, "aclrtIpcMemClose", "not a key (64 hex digits and a NUL)");
  }
  const int32_t me = static_cast<int32_t>(getpid());
  if (Region* r = find_key(key, Kind::kImport)) {
    if (queued_on(r->data(), r->bytes)) {
      return refuse(kIpcError, "aclrtIpcMemClose", "key %.16s...: a queued asynchronous copy still uses it", key);
    }
    for (auto& s : r->header()->importers) {
      int32_t expected = me;
      if (s.compare_exchange_strong(expected, 0, std::memory_order_seq_cst)) {
        break;
      }
    }
    munmap(r->base, r->map_len);
    *r = Region{};
    return kSuccess;
  }
  Region* r = find_key(key, Kind::kAlloc);
  if (r == nullptr) {
    return refuse(kInvalidHandle, "aclrtIpcMemClose",
                  "key %.16s... is neither exported nor imported here (closed twice?)", key);
  }
  SharedHeader* h = r->header();
  h->state.store(kClosing, std::memory_order_seq_cst);
  const int live = live_importers(h);
  if (live > 0) {
    h->state.store(kOpen, std::memory_order_seq_cst);
    return refuse(kIpcError, "aclrtIpcMemClose",
                  "the exporter closes key %.16s... while %d importer(s) have not (importers close first)", key, live);
  }
  h->state.store(kClosed, std::memory_order_seq_cst);
  char path[700];
  if (path_of(key, path, sizeof path)) {
    unlink(path);
  }
  r->exported = false;
  return kSuccess;
}

// Not AscendCL: for the mock operators (mock_aclnn.cpp, libopapi.so), which
// run when called: the copies queued on their stream before them are done
// first. 0, or the refusal of a stream that is not this process's.
MOCK_ACL_API aclError mockAclSynchronizeStream(aclrtStream stream) {
  const Locked guard;
  Stream* st = stream_of(stream);
  if (st == nullptr) {
    return refuse(kInvalidParam, "an aclnn operator", "stream %p is not a stream of this process", stream);
  }
  run_queued(st);
  return kSuccess;
}

// Not AscendCL: for the mock operators (mock_aclnn.cpp, libopapi.so). What
// [p, p + len) is to this process: 1 an allocation of it on its current
// device, 2 an import, 0 host memory, -1 a range past a buffer's end, -2
// before aclInit and aclrtSetDevice.
MOCK_ACL_API int mockAclMemoryKind(const void* p, size_t len) {
  const Locked guard;
  if (state.init_pid != getpid() || state.device_pid != getpid()) {
    return -2;
  }
  const Region* r = find(p, len);
  if (r == nullptr) {
    return 0;
  }
  const auto* c = static_cast<const char*>(p);
  if (c < r->data() || c + len > r->data() + r->bytes) {
    return -1;
  }
  return r->kind == Kind::kAlloc ? 1 : 2;
}

// Not AscendCL: how many times this process has waited for its whole
// device (aclrtSynchronizeDevice), every stream's work.
MOCK_ACL_API uint64_t mockAclDeviceWaits() {
  return device_waits.load(std::memory_order_relaxed);
}

// Not AscendCL: how many rules this process has broken so far.
MOCK_ACL_API uint64_t mockAclViolations() {
  return violation_count.load(std::memory_order_relaxed);
}

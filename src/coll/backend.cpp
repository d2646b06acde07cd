// The backend loader (dlopen: ranks only, never PID 1, which does not link
// this library), the built-in host backend, the SCM_RIGHTS transport of a
// handle and its fd, and an allreduce of device buffers through a backend.
#include "coll/backend.h"

#include <dlfcn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coll/arena.h"
#include "coll/kernels.h"
#include "trainit/coll.h"

namespace trainit::coll {
namespace {

thread_local char last_error[512];

int fail(int err, const char* what, const char* detail) {
  // Cut short when too long (the return value is checked for GCC's sake).
  if (std::snprintf(last_error, sizeof last_error, "%s%s%s", what, detail != nullptr ? ": " : "",
                    detail != nullptr ? detail : "") < 0) {
    last_error[0] = '\0';
  }
  return err;
}

int host_init() {
  return 0;
}

int host_alloc(size_t bytes, void** ptr) {
  if (ptr == nullptr) {
    return -EINVAL;
  }
  *ptr = std::malloc(bytes == 0 ? 1 : bytes);
  return *ptr == nullptr ? -ENOMEM : 0;
}

int host_free(void* ptr) {
  std::free(ptr);
  return 0;
}

int host_export(void* /*ptr*/, size_t /*bytes*/, void* /*handle*/, size_t* /*handle_len*/, int* /*fd*/) {
  return -EOPNOTSUPP;
}

int host_import(const void* /*handle*/, size_t /*handle_len*/, int /*fd*/, void** /*ptr*/) {
  return -EOPNOTSUPP;
}

int host_import_sized(const void* /*handle*/, size_t /*handle_len*/, int /*fd*/, size_t /*bytes*/, void** /*ptr*/) {
  return -EOPNOTSUPP;
}

int host_close_import(void* /*ptr*/) {
  return -EOPNOTSUPP;
}

int host_copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && (dst == nullptr || src == nullptr)) {
    return -EINVAL;
  }
  if (bytes != 0) {
    std::memmove(dst, src, bytes);
  }
  return 0;
}

int host_fold(void* dst, const void* const* srcs, int n, size_t count, int dtype, int op) {
  const int rc = check_fold_args(dtype, op, count, dst, srcs, n);
  if (rc == 0) {
    kernels_best()->fold[dtype][op](dst, srcs, n, count);
  }
  return rc < 0 ? rc : 0;
}

int host_reduce(void* dst, const void* src, size_t count, int dtype, int op) {
  const void* ins[2] = {dst, src};
  return host_fold(dst, ins, 2, count, dtype, op);
}

int host_nothing() {
  return 0;
}

uint64_t host_violations() {
  return 0;
}

constexpr trainit_coll_backend kHost = {
    TRAINIT_COLL_BACKEND_ABI,
    "host",
    host_init,
    host_alloc,
    host_free,
    host_export,
    host_import,
    host_close_import,
    host_copy,
    host_reduce,
    host_nothing,
    host_nothing,
    host_violations,
    nullptr,
    nullptr,
    host_fold,
    host_import_sized,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

const trainit_coll_backend* coll_backend_host() {
  return &kHost;
}

const char* coll_backend_last_error() {
  return last_error;
}

namespace {

// A plugin installed beside this library (libtrainit_coll.so's directory,
// or the program's when it is linked in statically): found there first, so
// that an installed trainit needs no loader path for its own plugins.
bool plugin_beside_library(const char* file, char* out, size_t room) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&coll_backend_load), &info) == 0 || info.dli_fname == nullptr) {
    return false;
  }
  const char* slash = std::strrchr(info.dli_fname, '/');
  if (slash == nullptr) {
    return false;
  }
  const int n = std::snprintf(out, room, "%.*s/%s", static_cast<int>(slash - info.dli_fname), info.dli_fname, file);
  return n > 0 && static_cast<size_t>(n) < room && access(out, F_OK) == 0;
}

// Loads the plugin at file (a path, or a name for dlopen's search) and
// calls its init().
int load_plugin(const char* file, bool is_path, const trainit_coll_backend** backend) {
  if (is_path && access(file, F_OK) != 0) {
    return fail(-ENOENT, "no backend plugin at", file);
  }
  void* lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    // By name, dlopen's search is the only way to tell that it is missing.
    const bool missing = !is_path && why != nullptr && std::strstr(why, "No such file") != nullptr;
    return fail(missing ? -ENOENT : -ELIBBAD, missing ? "no backend plugin" : "cannot load backend plugin", why);
  }
  auto* entry = reinterpret_cast<trainit_coll_backend_entry_fn>(dlsym(lib, TRAINIT_COLL_BACKEND_ENTRY));
  if (entry == nullptr) {
    dlclose(lib);
    return fail(-ENOEXEC, "not a trainit backend plugin (no " TRAINIT_COLL_BACKEND_ENTRY ")", file);
  }
  const trainit_coll_backend* b = entry();
  if (b == nullptr || b->abi_version != TRAINIT_COLL_BACKEND_ABI) {
    char detail[600];
    if (std::snprintf(detail, sizeof detail, "%s has ABI %u, this library %u", file, b == nullptr ? 0U : b->abi_version,
                      TRAINIT_COLL_BACKEND_ABI) < 0) {
      detail[0] = '\0';
    }
    dlclose(lib);
    return fail(-EPROTO, "backend ABI mismatch", detail);
  }
  const int rc = b->init != nullptr ? b->init() : 0;
  if (rc != 0) {
    char detail[600];
    // -ENODEV: the plugin said why on stderr (no driver library, no device).
    if (std::snprintf(detail, sizeof detail, "%s: %s", b->name != nullptr ? b->name : file,
                      rc == -ENODEV ? "no device or no driver (-ENODEV)" : trainit_strerror(rc)) < 0) {
      detail[0] = '\0';
    }
    // Left loaded: a plugin's runtime may not survive being unloaded.
    return fail(rc, "backend init failed", detail);
  }
  *backend = b;
  last_error[0] = '\0';
  return 0;
}

}  // namespace

int coll_backend_load(const char* path_or_name, const trainit_coll_backend** backend) {
  if (path_or_name == nullptr || backend == nullptr || path_or_name[0] == '\0') {
    return fail(-EINVAL, "no backend named", nullptr);
  }
  *backend = nullptr;
  if (std::strcmp(path_or_name, "host") == 0) {
    *backend = &kHost;
    return 0;
  }
  char file[512];
  const bool is_path = std::strchr(path_or_name, '/') != nullptr;
  const int n = is_path ? std::snprintf(file, sizeof file, "%s", path_or_name)
                        : std::snprintf(file, sizeof file, "libtrainit_coll_%s.so", path_or_name);
  if (n < 0 || static_cast<size_t>(n) >= sizeof file) {
    return fail(-ENAMETOOLONG, "backend name too long", path_or_name);
  }
  char beside[1024];
  if (!is_path && plugin_beside_library(file, beside, sizeof beside)) {
    return load_plugin(beside, true, backend);
  }
  return load_plugin(file, is_path, backend);
}

int coll_send_handle(int sock, const void* handle, size_t handle_len, int fd) {
  if (handle == nullptr || handle_len == 0 || handle_len > TRAINIT_COLL_HANDLE_MAX) {
    return -EINVAL;
  }
  iovec iov{const_cast<void*>(handle), handle_len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t sent = 0;
  do {
    sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    return -errno;
  }
  return static_cast<size_t>(sent) == handle_len ? 0 : -EMSGSIZE;
}

int coll_recv_handle(int sock, void* handle, size_t* handle_len, int* fd) {
  if (handle == nullptr || handle_len == nullptr || fd == nullptr || *handle_len == 0) {
    return -EINVAL;
  }
  *fd = -1;
  iovec iov{handle, *handle_len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got = 0;
  do {
    got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    return -errno;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(fd, CMSG_DATA(c), sizeof *fd);
    }
  }
  if (got == 0) {
    return -ECONNRESET;
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
    return -EMSGSIZE;
  }
  *handle_len = static_cast<size_t>(got);
  return 0;
}

namespace {

// Waits for the work this rank issued so far (a no-op on synchronous backends).
int finish(const trainit_coll_backend* b) {
  const int rc = b->signal();
  return rc != 0 ? rc : b->wait();
}

// Closes every import in peers (all but peers[rank]): the first error.
int close_imports(const trainit_coll_backend* b, void* const* peers, int n, int rank) {
  int first = 0;
  for (int peer = 0; peer < n; ++peer) {
    if (peer != rank && peers[peer] != nullptr) {
      const int rc = b->close_import(peers[peer]);
      first = first != 0 ? first : rc;
    }
  }
  return first;
}

// Where the backend wants it (allow_import), every rank sends its
// process_id() to every peer and the exporter allows the peers' ids.
int allow_peers(const trainit_coll_backend* b, const int* socks, int n, int rank, const void* handle,
                size_t handle_len) {
  if (b->allow_import == nullptr || b->process_id == nullptr) {
    return 0;
  }
  int32_t mine = 0;
  int rc = b->process_id(&mine);
  for (int peer = 0; rc == 0 && peer < n; ++peer) {
    if (peer != rank) {
      rc = coll_send_handle(socks[peer], &mine, sizeof mine, -1);
    }
  }
  int32_t ids[kMaxRanks];
  size_t count = 0;
  for (int peer = 0; rc == 0 && peer < n; ++peer) {
    if (peer == rank) {
      continue;
    }
    size_t len = sizeof ids[count];
    int fd = -1;
    rc = coll_recv_handle(socks[peer], &ids[count], &len, &fd);
    if (fd >= 0) {
      close(fd);
      rc = rc != 0 ? rc : -EPROTO;
    }
    rc = rc != 0 ? rc : len == sizeof ids[count] ? 0 : -EPROTO;
    ++count;
  }
  return rc != 0 ? rc : b->allow_import(handle, handle_len, ids, count);
}

}  // namespace

int coll_backend_exchange(const trainit_coll_backend* b, const int* socks, void* buf, size_t bytes, int n, int rank,
                          void** peers, bool* in_step) {
  // Each message: the size exported (u64), then the backend's handle. A
  // peer whose size is not this rank's is not imported: what this rank will
  // touch of it would run past its end (a rank that lies, or ranks set up
  // differently). Every message is still received, and every rank that sees
  // a difference fails the same way, the lying one too; a handle the
  // backend refuses to import is not the end of the messages either. Only a
  // failed send or receive leaves the sockets out of step.
  last_error[0] = '\0';
  unsigned char message[TRAINIT_COLL_HANDLE_MAX];  // what coll_send_handle() takes: the size and a handle
  const uint64_t mine = bytes;
  std::memcpy(message, &mine, sizeof mine);
  size_t handle_len = sizeof message - sizeof mine;
  int fd = -1;
  int rc = b->export_handle(buf, bytes, message + sizeof mine, &handle_len, &fd);
  if (rc == 0) {
    rc = allow_peers(b, socks, n, rank, message + sizeof mine, handle_len);
  }
  for (int peer = 0; rc == 0 && peer < n; ++peer) {
    if (peer != rank) {
      rc = coll_send_handle(socks[peer], message, sizeof mine + handle_len, fd);
    }
  }
  if (fd >= 0) {
    close(fd);  // the peers hold their own copies now
  }
  int refused = 0;  // the first message of a peer's not imported
  for (int peer = 0; rc == 0 && peer < n; ++peer) {
    if (peer == rank) {
      continue;
    }
    unsigned char theirs[sizeof message];
    size_t len = sizeof theirs;
    int their_fd = -1;
    rc = coll_recv_handle(socks[peer], theirs, &len, &their_fd);
    uint64_t their_bytes = 0;
    if (rc == 0 && len > sizeof their_bytes) {
      std::memcpy(&their_bytes, theirs, sizeof their_bytes);
    }
    int got = rc != 0 ? 0 : len <= sizeof their_bytes ? -EPROTO : 0;
    if (rc == 0 && got == 0 && their_bytes != mine) {
      char why[160];
      (void)std::snprintf(why, sizeof why, "local rank %d exports %llu bytes where local rank %d exports %llu", peer,
                          static_cast<unsigned long long>(their_bytes), rank, static_cast<unsigned long long>(mine));
      got = fail(-EINVAL, "the local ranks' device buffers differ in size", why);
    } else if (rc == 0 && got == 0 &&
               (got = b->import_sized(theirs + sizeof their_bytes, len - sizeof their_bytes, their_fd, bytes,
                                      &peers[peer])) == -EINVAL) {
      // Its handle does not map what it says it exports: refused by the
      // backend before anything of it is touched.
      char why[160];
      (void)std::snprintf(why, sizeof why, "local rank %d's handle does not map the %llu bytes it exports", peer,
                          static_cast<unsigned long long>(their_bytes));
      (void)fail(-EINVAL, "a local rank's device handle is refused", why);
    }
    if (got != 0) {
      peers[peer] = nullptr;
      refused = refused != 0 ? refused : got;
    }
    if (their_fd >= 0) {
      close(their_fd);
    }
  }
  if (in_step != nullptr) {
    *in_step = rc == 0;
  }
  return rc != 0 ? rc : refused;
}

int coll_backend_allreduce(trainit_comm* comm, const trainit_coll_backend* b, const int* socks, void* buf, size_t count,
                           int dtype, int op) {
  if (comm == nullptr || b == nullptr || socks == nullptr || buf == nullptr || dtype_size(dtype) == 0 || op < 0 ||
      op >= kOps) {
    return -EINVAL;
  }
  const int n = trainit_comm_size(comm);
  const int rank = trainit_comm_rank(comm);
  if (n < 1 || n > kMaxRanks) {
    return -EINVAL;
  }
  const size_t bytes = count * dtype_size(dtype);
  void* peers[kMaxRanks] = {};
  peers[rank] = buf;
  void* acc = nullptr;
  // The caller's writes to buf are done before any peer reads it.
  int rc = finish(b);
  if (rc == 0 && n > 1) {
    rc = coll_backend_exchange(b, socks, buf, bytes, n, rank, peers);
  }
  if (rc == 0) {
    rc = b->alloc(bytes, &acc);
  }
  if (rc == 0) {
    rc = b->copy(acc, peers[0], bytes);
  }
  for (int r = 1; rc == 0 && r < n; ++r) {
    rc = b->reduce(acc, peers[r], count, dtype, op);
  }
  if (rc == 0) {
    rc = finish(b);
  }
  // Every rank has read every buffer before any rank overwrites its own.
  if (rc == 0) {
    rc = trainit_barrier(comm);
  }
  if (rc == 0) {
    rc = b->copy(buf, acc, bytes);
  }
  if (rc == 0) {
    rc = finish(b);
  }
  const int closed = close_imports(b, peers, n, rank);
  const int freed = acc != nullptr ? b->free(acc) : 0;
  rc = rc != 0 ? rc : closed != 0 ? closed : freed;
  // No rank returns (and may free its buf) before every import of it is closed.
  return rc != 0 ? rc : trainit_barrier(comm);
}

}  // namespace trainit::coll

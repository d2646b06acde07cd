/* Accelerator backends for the collective core (docs/architecture.md, "The
 * collective core"; docs/coll.md): one small C vtable that the host backend
 * (built in) and each plugin (a shared object loaded by a rank, never by
 * PID 1) fill in.
 *
 * A plugin exports one symbol, TRAINIT_COLL_BACKEND_ENTRY, a function
 * returning its vtable; coll_backend_load() checks abi_version and calls
 * init() once before handing the vtable out.
 *
 * Every function returns 0 or a negative errno. Device memory is shared
 * between processes by export_handle() in the process that allocated it: a
 * handle of at most TRAINIT_COLL_HANDLE_MAX bytes plus, where the backend
 * needs one, a file descriptor, both sent to the other process (the fd over
 * a unix socket with SCM_RIGHTS: coll_send_handle/coll_recv_handle), where
 * import_handle() maps it. An import is closed (close_import) before the
 * exporter frees the memory. The fd stays the caller's on both sides: close
 * it once it is sent, and once it is imported.
 *
 * copy and reduce take device pointers of this process (allocated or
 * imported here); copy may also take host memory on either side. reduce is
 * the host kernels' fixed-order rule, dst[i] = dst[i] op src[i]; f16 and bf16
 * accumulate in f32 and round once; integers wrap.
 *
 * signal/wait order work between the ranks' streams: a synchronous backend
 * (host, fakedev: every call has finished when it returns) makes both no-ops
 * that return 0; an asynchronous one (cuda) makes signal() mean "the work
 * issued so far is done when wait() returns" (the CUDA plugin synchronises
 * its context in wait()).
 */
#ifndef TRAINIT_COLL_BACKEND_H
#define TRAINIT_COLL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRAINIT_COLL_BACKEND_ABI 7u
#define TRAINIT_COLL_HANDLE_MAX 128
#define TRAINIT_COLL_BACKEND_ENTRY "trainit_coll_backend_v1"

typedef struct trainit_coll_backend {
  uint32_t abi_version; /* TRAINIT_COLL_BACKEND_ABI */
  const char* name;     /* "host", "fakedev", "cuda" */
  /* Once, from the loader: -ENODEV when the device or its driver is absent. */
  int (*init)(void);
  int (*alloc)(size_t bytes, void** ptr);
  int (*free)(void* ptr);
  /* *handle_len: in, the room at handle; out, the handle's length. *fd: a
   * new descriptor to send with the handle, or -1 when the backend has none. */
  int (*export_handle)(void* ptr, size_t bytes, void* handle, size_t* handle_len, int* fd);
  int (*import_handle)(const void* handle, size_t handle_len, int fd, void** ptr);
  int (*close_import)(void* ptr);
  int (*copy)(void* dst, const void* src, size_t bytes);
  int (*reduce)(void* dst, const void* src, size_t count, int dtype, int op); /* trainit_dtype, trainit_op */
  int (*signal)(void);
  int (*wait)(void);
  /* Broken IPC rules this process has been refused so far (0 when the
   * backend does not count them). */
  uint64_t (*violations)(void);
  /* ABI 2. Backends whose exporter must name the processes allowed to import
   * (AscendCL) fill both; others leave them NULL. process_id: the id of this
   * process that an exporter must allow (AscendCL: its bare tgid).
   * allow_import: called by the exporter after export_handle and before the
   * handle is sent, with the importers' process_id()s. */
  int (*process_id)(int32_t* id);
  int (*allow_import)(const void* handle, size_t handle_len, const int32_t* ids, size_t n);
  /* ABI 2, may be NULL. dst = srcs[0] op srcs[1] op ... op srcs[n-1], for
   * each element in that order (dst may be one of srcs only when it is
   * srcs[0]): f16 and bf16 accumulate in f32 and round once, as the host
   * kernels do, so results are bitwise the host allreduce's. Without it,
   * copy and pairwise reduce are used (f16/bf16 then round at each step). */
  int (*fold)(void* dst, const void* const* srcs, int n, size_t count, int dtype, int op);
  /* ABI 3, required. import_handle for memory this process will touch
   * `bytes` of: -EINVAL, nothing mapped, when the handle's memory is
   * smaller (what the handle says of it, and where the backend can see it,
   * the memory's own size), so that a peer that lies about its buffer is
   * refused here instead of faulting this process later. */
  int (*import_sized)(const void* handle, size_t handle_len, int fd, size_t bytes, void** ptr);
  /* ABI 4, all four or none (then the host drives the same algorithm over
   * copy and fold). launch: a whole collective, `call` a
   * trainit::coll::dev::Call (device_algo.h), enqueued on `stream` (NULL:
   * the backend's own; CUDA: a cudaStream_t) as one launch of the device
   * algorithm; it returns once enqueued. The call's error lands in
   * *call->status, tagged with call->tag, memory from host_mapped(); since
   * ABI 6, where call->done is not NULL, block b stores call->tag in
   * call->done[b] once its writes are visible to the host and to every
   * stream (a synchronous call returns then); since ABI 7, a launch runs
   * call->blocks blocks of the communicator's call->lines. query: 0 when the work
   * enqueued on stream is done, -EINPROGRESS while it runs, or the stream's
   * error. host_mapped: host memory the device reads and writes too (its
   * address there in *device_view), for the calls' abort word and status
   * ring: the host writes its first 4 KiB only and just reads the rest,
   * which the device writes (a backend may map that part read-only to the
   * host, as the fake device does). */
  int (*launch)(const void* call, void* stream);
  int (*query)(void* stream);
  int (*host_mapped)(size_t bytes, void** host, void** device_view);
  int (*free_host_mapped)(void* host);
  /* ABI 5, may be NULL. The work this backend queued itself (its copies,
   * reduces and folds) is done when it returns, the caller's other work on
   * the device (its own streams) not waited for: what a call the host
   * drives waits for between its steps. NULL: signal() then wait(). */
  int (*drain)(void);
} trainit_coll_backend;

typedef const trainit_coll_backend* (*trainit_coll_backend_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
struct trainit_comm;

namespace trainit::coll {

// The built-in host backend: plain memory (malloc), the host kernels;
// export/import are -EOPNOTSUPP (host memory is shared through the arena).
const trainit_coll_backend* coll_backend_host();

// "host" gives the built-in backend; a name with a '/' is a plugin's path;
// any other name loads libtrainit_coll_NAME.so from the loader's search
// path. Errors: -ENOENT (no such file), -ELIBBAD (not a loadable object),
// -ENOEXEC (no TRAINIT_COLL_BACKEND_ENTRY), -EPROTO (another ABI version),
// or what the plugin's init() returned (-ENODEV: no device or driver). The
// plugin stays loaded for the life of the process.
int coll_backend_load(const char* path_or_name, const trainit_coll_backend** backend);
// Why the last coll_backend_load() (or a coll_backend_exchange() that found
// the ranks' sizes differ) of this thread failed, in words.
const char* coll_backend_last_error();

// A handle and its fd (or -1) over a connected unix socket (SCM_RIGHTS).
// recv: *handle_len in, the room; out, the length; *fd, the received
// descriptor or -1.
int coll_send_handle(int sock, const void* handle, size_t handle_len, int fd);
// Exports buf (bytes of it), lets the peers import it (allow_import, with
// their process_id()s swapped first), sends its size and handle to every
// peer over socks and imports each peer's into peers[peer] (peers[rank]
// untouched). A peer whose size is not `bytes`, or whose handle maps less
// (import_sized), is not imported: -EINVAL, with coll_backend_last_error()
// naming it (every rank fails alike, the one that differs too). The handle takes at most TRAINIT_COLL_HANDLE_MAX
// - 8 bytes here. 0 or a negative errno; imports made before an error stay
// in peers for the caller to close. Every peer's message is read, whatever
// is refused of it, unless a send or a receive fails: then *in_step (if
// given) is false, and the sockets may still hold a message of this
// exchange that a later one would take for its own.
int coll_backend_exchange(const trainit_coll_backend* b, const int* socks, void* buf, size_t bytes, int n, int rank,
                          void** peers, bool* in_step = nullptr);
int coll_recv_handle(int sock, void* handle, size_t* handle_len, int* fd);

// Allreduces count elements of buf, memory that backend b allocated in this
// rank, among the ranks of comm (every rank calls it, with the same count,
// dtype and op, each with its own buffer; one thread per rank). socks[peer]
// is a connected SOCK_SEQPACKET unix socket to each peer (socks[rank] is not
// used), made before the ranks were forked, or passed to them.
//
// Each rank exports buf and sends the handle and fd to every peer, imports
// the peers' buffers, folds buf_0 op buf_1 op ... op buf_{n-1} in rank order
// into a buffer of its own (b->alloc: so every rank's result is bitwise the
// same), waits for its backend's work (signal/wait), and copies the result
// into buf once every rank has read every buffer (trainit_barrier); it closes
// its imports, and a last barrier keeps every exporter from returning (and
// freeing buf) before every importer has closed. f16 and bf16 round after
// each rank's step (reduce is pairwise), where trainit_allreduce rounds once:
// the two agree when the partial results are exact.
//
// 0 or a negative errno (the backend's, the transport's, the barrier's). A
// failure on one rank is not agreed on: its peers see a closed socket, a
// barrier that times out or an aborted communicator, as with any collective.
int coll_backend_allreduce(trainit_comm* comm, const trainit_coll_backend* b, const int* socks, void* buf, size_t count,
                           int dtype, int op);

}  // namespace trainit::coll
#endif

#endif /* TRAINIT_COLL_BACKEND_H */

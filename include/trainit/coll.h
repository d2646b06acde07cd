/* trainit's collective core: reductions among the ranks of one node over
 * shared memory (an arena) that the init creates, watches and cleans up.
 *
 * A rank started by trainit joins with trainit_comm_init_from_env() (the
 * arena arrives as TRAINIT_COLL_FD with TRAINIT_LOCAL_RANK and
 * TRAINIT_LOCAL_SIZE; TRAINIT_COLL_ID, when set, must name that arena, else
 * -EPROTO); processes outside trainit join with
 * trainit_comm_init(), passing the same name, size and distinct ranks.
 *
 * Every call returns 0 or a negative errno: -EINVAL for bad arguments,
 * -ECONNABORTED once a peer died or the job is stopping (within
 * milliseconds, never a hang), -ETIMEDOUT when TRAINIT_COLL_TIMEOUT (seconds)
 * passes. send == recv is in place. Counts may be 0 or odd, pointers
 * unaligned. f16 and bf16 accumulate in f32. Results are bitwise identical on
 * every rank: the reduction order is fixed. Collectives are called by every
 * rank of a communicator in the same order, from one thread per rank.
 *
 * In place: allreduce and reduce with send == recv; reduce_scatter with
 * send == recv leaves the rank's recvcount results at the start of the
 * buffer; allgather with send == recv takes the rank's part from
 * recv + rank * sendcount (MPI_IN_PLACE's convention). reduce's recv matters
 * on the root only (may be NULL elsewhere). Ranks that disagree on a call
 * (count, kind, root, dtype, op) or pass bad arguments all get -EINVAL and
 * stay usable. After -ETIMEDOUT or -ECONNABORTED the communicator is aborted
 * for every rank: each later call returns -ECONNABORTED.
 *
 * trainit_comm_init() leaves nothing behind: rank 0 creates the arena
 * (memfd, committed up front) and hands it to the others over an abstract
 * unix socket named after the user and the name (same user only); it
 * returns once all size ranks joined, or -ETIMEDOUT after
 * TRAINIT_COLL_TIMEOUT (default 60 s). TRAINIT_COLL_HEAP sets the bytes
 * trainit_alloc() can hand out, split between the ranks (default 32 MiB).
 * Buffers from trainit_alloc() are read by peers in place (no copy) in large
 * collectives when every rank's buffers come from it.
 *
 * Device collectives. A communicator reduces the memory of one backend,
 * chosen when it is made: "host" (plain memory, the default), "cuda",
 * "ascend", another NAME (libtrainit_coll_NAME.so on the loader's path) or a
 * plugin's path. trainit_comm_init() and trainit_comm_init_from_env() take
 * TRAINIT_COLL_BACKEND (unset or empty: "host"); the _backend variants take
 * it as an argument (NULL: the variable). On a device communicator
 * trainit_allreduce, trainit_reduce, trainit_reduce_scatter,
 * trainit_allgather and trainit_broadcast take device pointers of that
 * backend (from trainit_device_alloc() or the framework's allocator), with
 * the same arguments, in-place rules, fixed rank-order fold (bitwise equal on
 * every rank, and equal to the host path's) and -ECONNABORTED instead of a
 * hang; trainit_barrier is one of its device calls too (enqueued like the
 * others when a stream is set), so a barrier against a peer's collective is
 * -EINVAL on every rank. A pointer the backend does not hold (host memory)
 * fails in the backend, on that rank (the fake device: -EFAULT), and ends the
 * communicator: its peers get -ECONNABORTED. trainit_alloc() still hands out
 * host memory. A backend that cannot be
 * loaded fails the init with its errno (-ENOENT: no such plugin, -ENODEV: no
 * device or driver; trainit_backend_error() says why in words).
 *
 * Ordering (device communicators): a call first waits for the work this
 * process has issued on its device (CUDA: every stream of the context;
 * Ascend: the device), so inputs written by earlier kernels on any stream
 * are read complete; when it returns the results are in recv and none of its
 * own work is outstanding. Peers' device memory is mapped once, at init,
 * from staging buffers the communicator allocates
 * (TRAINIT_COLL_DEVICE_STAGING bytes a rank, default 32 MiB; larger calls go
 * in pieces); a rank started by trainit swaps their handles with its local
 * peers over sockets trainit made for that start (TRAINIT_COLL_PEER_FDS), a
 * standalone communicator over sockets rank 0 made.
 */
#ifndef TRAINIT_COLL_H
#define TRAINIT_COLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trainit_comm trainit_comm;

/* In C++ the enums' underlying type is int, fixed: every int a caller
 * passes is then a value of the type, which the library checks (-EINVAL),
 * where an unfixed enum's value outside its enumerators' bits would be
 * undefined behaviour on the library's side. C has no such rule. */
#ifdef __cplusplus
#define TRAINIT_ENUM_BASE : int
#else
#define TRAINIT_ENUM_BASE
#endif

typedef enum TRAINIT_ENUM_BASE {
  TRAINIT_F32,
  TRAINIT_F64,
  TRAINIT_F16,
  TRAINIT_BF16,
  TRAINIT_I32,
  TRAINIT_I64,
  TRAINIT_U8
} trainit_dtype;

typedef enum TRAINIT_ENUM_BASE { TRAINIT_SUM, TRAINIT_PROD, TRAINIT_MIN, TRAINIT_MAX } trainit_op;

int trainit_comm_init_from_env(trainit_comm** comm);
int trainit_comm_init(trainit_comm** comm, const char* name, int rank, int size);
int trainit_comm_init_from_env_backend(trainit_comm** comm, const char* backend);
int trainit_comm_init_backend(trainit_comm** comm, const char* name, int rank, int size, const char* backend);
/* The backend's name ("host", "cuda", "ascend", a plugin's own name). */
const char* trainit_comm_backend(const trainit_comm* comm);
/* Why the last backend load of this thread failed, in words ("" if none). */
const char* trainit_backend_error(void);
int trainit_comm_rank(const trainit_comm* comm);
int trainit_comm_size(const trainit_comm* comm);

int trainit_allreduce(trainit_comm* comm, const void* send, void* recv, size_t count, trainit_dtype dtype,
                      trainit_op op);
int trainit_reduce(trainit_comm* comm, const void* send, void* recv, size_t count, trainit_dtype dtype, trainit_op op,
                   int root);
int trainit_reduce_scatter(trainit_comm* comm, const void* send, void* recv, size_t recvcount, trainit_dtype dtype,
                           trainit_op op);
int trainit_allgather(trainit_comm* comm, const void* send, void* recv, size_t sendcount, trainit_dtype dtype);
int trainit_broadcast(trainit_comm* comm, void* buf, size_t count, trainit_dtype dtype, int root);
int trainit_barrier(trainit_comm* comm);

void* trainit_alloc(trainit_comm* comm, size_t bytes);
void trainit_free(trainit_comm* comm, void* ptr);

/* Device memory of the communicator's backend (host memory on "host"). */
int trainit_device_alloc(trainit_comm* comm, size_t bytes, void** ptr);
int trainit_device_free(trainit_comm* comm, void* ptr);
/* Copies bytes between device and host memory either way, or within the
 * device; done when it returns. */
int trainit_device_copy(trainit_comm* comm, void* dst, const void* src, size_t bytes);

/* Stream-ordered device collectives. After trainit_comm_set_stream() with a
 * stream (CUDA: a cudaStream_t; the fake device: any non-NULL value), each
 * collective of that device communicator enqueues the whole call on the
 * stream, as one launch, and returns once it is enqueued: the caller orders
 * its inputs and its use of the results with the stream. Such a call returns
 * the error of an earlier one, once (then nothing of it is enqueued), and
 * trainit_comm_query() says whether they are done: 0, -EINPROGRESS, or that
 * error (once); at most 512 calls go unread, the next one waiting for the
 * stream first. Such an error ends the communicator (its ranks may learn of
 * it at different calls): every later collective returns -ECONNABORTED (a
 * query: no more errors, -EINPROGRESS until the calls it ended have ended, then 0; without a stream
 * always 0). A thread of the communicator's watches its peers
 * meanwhile: a dead peer or the init's stop ends a call in flight with -ECONNABORTED within 100 ms. NULL waits for the
 * calls in flight and goes back to calls that return done. -EOPNOTSUPP for a host communicator and a backend that
 * cannot launch (Ascend: its calls are driven from the host; any, with TRAINIT_COLL_DEVICE_LAUNCH=0). */
int trainit_comm_set_stream(trainit_comm* comm, void* stream);
int trainit_comm_query(trainit_comm* comm);

/* Registered windows (a device communicator whose backend launches: CUDA,
 * the fake device). trainit_comm_register() maps buf, bytes of memory that
 * trainit_device_alloc() returned (its start), into every local peer, and
 * theirs into this rank: every rank calls it, in the same order as its
 * other calls, with its own buffer of the same bytes. A call of more than
 * TRAINIT_COLL_DEVICE_ONE_SHOT bytes a rank whose buffer lies in a window
 * then reads and writes the ranks' buffers where they are (zero copy), in
 * two steps: an allreduce in place, an allgather (its recv), a
 * reduce_scatter out of place (its send), a broadcast (its buf); an
 * allreduce out of place and a reduce read their sends there and stage
 * only the results. Every rank must pass the same offset into the
 * same window, as it passes the same count (ranks that differ all return
 * -EINVAL). Up to 16
 * windows. -EINVAL on every rank where any rank's buffer is not an
 * allocation's start, sizes differ, is registered already or no slot is
 * free (nothing kept), and where a peer makes another call meanwhile (it
 * gets -EINVAL too); -ECONNABORTED or -ETIMEDOUT, the communicator ended,
 * where a peer is gone or silent mid-exchange; -EOPNOTSUPP for a host
 * communicator and a backend the host drives. trainit_comm_deregister() (every rank, its own buffer of the
 * same window) waits for the calls in flight, and returns once no peer maps
 * buf any more: then it may be freed. trainit_comm_destroy() deregisters
 * what is left. */
int trainit_comm_register(trainit_comm* comm, void* buf, size_t bytes);
int trainit_comm_deregister(trainit_comm* comm, void* buf);

int trainit_comm_destroy(trainit_comm* comm);
const char* trainit_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* TRAINIT_COLL_H */

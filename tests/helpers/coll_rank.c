/* A rank that uses the collective core over the arena trainit gives it
 * (TRAINIT_COLL_FD, TRAINIT_LOCAL_RANK, TRAINIT_LOCAL_SIZE).
 *
 *   coll_rank DIR ok        an allreduce of (rank + 1): exits 0 when every
 *                           element is n(n+1)/2, writes DIR/r<rank>.ok
 *   coll_rank DIR die       local rank 1 SIGKILLs itself 300 ms in (writing
 *                           its CLOCK_MONOTONIC ns to DIR/died first); the
 *                           others ignore SIGTERM, wait in a barrier and
 *                           write "<code> <ns>" to DIR/r<rank>.ret when it
 *                           returns
 *   coll_rank DIR hang      local rank 1 never calls; the others ignore
 *                           SIGTERM and wait in a barrier, writing
 *                           DIR/r<rank>.ret when the arena's abort ends it
 *
 *   coll_rank DIR children  joins, then runs a shell that reports whether
 *                           it holds the arena's descriptor: DIR/r<rank>.child
 *                           gets "held" or "closed"
 *
 *   coll_rank DIR device    as ok, on the device of the communicator's
 *                           backend (TRAINIT_COLL_BACKEND): 5000 i32 of
 *                           (rank + 1) copied to the device, allreduced there
 *                           and copied back; DIR/r<rank>.ok gets
 *                           "<code> <size> <backend>"
 *   coll_rank DIR device-direct
 *                           as device, but the buffer is filled and read
 *                           in place (the fake device's memory is mapped in
 *                           the rank), so that the backend's first operation
 *                           is the allreduce's own; writes DIR/r<rank>.ret
 *                           "<code>" when it returns
 *
 * A rank turned against the init (local rank 1 attacks, the others ignore
 * SIGTERM and wait in a barrier as in "die"):
 *   coll_rank DIR shrink    300 ms in, ftruncate(TRAINIT_COLL_FD, 0), then exit 3
 *   coll_rank DIR grow      ftruncate(TRAINIT_COLL_FD, 1 GiB), then exit 3
 *   (each writes "<ftruncate's return> <errno>" to DIR/attack first)
 *   coll_rank DIR scribble  after a barrier of all (everyone joined),
 *                           writes 0xA5 over the arena's first 64 KiB
 *                           (header, abort word, every rank's progress and
 *                           sequence lines), writes DIR/attack, then waits;
 *                           the others just wait (their library would read
 *                           the scribbled header)
 *   coll_rank DIR progress  writes an op no collective has and a start in
 *                           the future into every rank's progress slot,
 *                           then waits, as scribble
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <trainit/coll.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void write_file(const char* dir, const char* name, const char* text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "w");
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

static int arena_fd(void) {
  const char* fd = getenv("TRAINIT_COLL_FD");
  return fd != NULL ? atoi(fd) : -1;
}

/* Local rank 1's attack on the arena the init owns. Returns whether it
 * stays (scribble, progress) rather than exiting. */
static int attack(const char* dir, const char* mode) {
  char text[128];
  const int fd = arena_fd();
  if (strcmp(mode, "shrink") == 0 || strcmp(mode, "grow") == 0) {
    usleep(300000); /* as "die": the peers are in their barrier, SIGTERM ignored */
    const int r = ftruncate(fd, strcmp(mode, "shrink") == 0 ? 0 : (off_t)1 << 30);
    snprintf(text, sizeof text, "%d %d\n", r, r == 0 ? 0 : errno);
    write_file(dir, "attack", text);
    exit(3);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 65536) {
    exit(5);
  }
  unsigned char* base = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    exit(6);
  }
  if (strcmp(mode, "scribble") == 0) {
    memset(base, 0xA5, 65536);
  } else {
    /* The slots follow the 64-byte header, abort and sleepers lines: pid,
     * op, progress, start_ns per 64-byte slot. */
    for (int r = 0; r < 8; ++r) {
      unsigned char* slot = base + 3 * 64 + r * 64;
      const uint32_t op = 0xdeadbeef;
      const uint64_t start = UINT64_MAX / 2;
      memcpy(slot + 4, &op, sizeof op);
      memcpy(slot + 16, &start, sizeof start);
    }
  }
  write_file(dir, "attack", "done\n");
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: coll_rank DIR ok|device|device-direct|die|hang|children|shrink|grow|scribble|progress\n");
    return 64;
  }
  const char* dir = argv[1];
  const char* mode = argv[2];
  trainit_comm* comm = NULL;
  int r = trainit_comm_init_from_env(&comm);
  if (r != 0) {
    fprintf(stderr, "coll_rank: init: %s %s\n", trainit_strerror(r), trainit_backend_error());
    return 2;
  }
  const int me = trainit_comm_rank(comm);
  const int n = trainit_comm_size(comm);
  char name[64];
  char text[128];
  if (strcmp(mode, "ok") == 0) {
    int v[5];
    for (int i = 0; i < 5; ++i)
      v[i] = me + 1;
    r = trainit_allreduce(comm, v, v, 5, TRAINIT_I32, TRAINIT_SUM);
    for (int i = 0; r == 0 && i < 5; ++i) {
      if (v[i] != n * (n + 1) / 2)
        r = -1;
    }
    snprintf(name, sizeof name, "r%d.ok", me);
    snprintf(text, sizeof text, "%d %d\n", r, n);
    write_file(dir, name, text);
    return r == 0 ? 0 : 3;
  }
  if (strcmp(mode, "device-direct") == 0) {
    enum { kCount = 1024 };
    int* dev = NULL;
    r = trainit_device_alloc(comm, kCount * sizeof(int), (void**)&dev);
    for (int i = 0; r == 0 && i < kCount; ++i)
      dev[i] = me + 1;
    if (r == 0)
      r = trainit_allreduce(comm, dev, dev, kCount, TRAINIT_I32, TRAINIT_SUM);
    snprintf(name, sizeof name, "r%d.ret", me);
    snprintf(text, sizeof text, "%d\n", r);
    write_file(dir, name, text);
    return r == 0 ? 0 : 3;
  }
  if (strcmp(mode, "device") == 0) {
    enum { kCount = 5000 };
    static int v[kCount];
    void* dev = NULL;
    for (int i = 0; i < kCount; ++i)
      v[i] = me + 1;
    r = trainit_device_alloc(comm, sizeof v, &dev);
    if (r == 0)
      r = trainit_device_copy(comm, dev, v, sizeof v);
    if (r == 0)
      r = trainit_allreduce(comm, dev, dev, kCount, TRAINIT_I32, TRAINIT_SUM);
    if (r == 0)
      r = trainit_device_copy(comm, v, dev, sizeof v);
    for (int i = 0; r == 0 && i < kCount; ++i) {
      if (v[i] != n * (n + 1) / 2)
        r = -1;
    }
    if (dev != NULL)
      trainit_device_free(comm, dev);
    snprintf(name, sizeof name, "r%d.ok", me);
    snprintf(text, sizeof text, "%d %d %s\n", r, n, trainit_comm_backend(comm));
    write_file(dir, name, text);
    return trainit_comm_destroy(comm) == 0 && r == 0 ? 0 : 3;
  }
  if (strcmp(mode, "children") == 0) {
    char command[256];
    snprintf(command, sizeof command, "[ -e /proc/self/fd/%d ]", arena_fd());
    snprintf(name, sizeof name, "r%d.child", me);
    write_file(dir, name, system(command) == 0 ? "held\n" : "closed\n");
    return 0;
  }
  if (strcmp(mode, "die") == 0 && me == 1) {
    usleep(300000);
    snprintf(text, sizeof text, "%lld\n", now_ns());
    write_file(dir, "died", text);
    raise(SIGKILL);
  }
  if (strcmp(mode, "hang") == 0 && me == 1) {
    for (;;)
      pause();
  }
  const int stays = strcmp(mode, "scribble") == 0 || strcmp(mode, "progress") == 0;
  const int attacking = stays || strcmp(mode, "shrink") == 0 || strcmp(mode, "grow") == 0;
  if (stays && trainit_barrier(comm) != 0) {
    return 7; /* everyone joined before the arena is scribbled */
  }
  if (stays && me != 1) {
    snprintf(name, sizeof name, "r%d.idle", me);
    write_file(dir, name, "\n"); /* out of the library: nothing of it reads the arena again */
  }
  if (stays && me == 1) {
    /* The attack waits for every peer to be out of the barrier: one still
     * inside would read the scribbled header (its own library's problem, and
     * a crash that would race the init's check). */
    for (int waited = 0, idle = 0; idle < n - 1; waited += 10) {
      if (waited > 20000) {
        return 8;
      }
      usleep(10000);
      idle = 0;
      for (int r = 0; r < n; ++r) {
        char path[4096];
        snprintf(path, sizeof path, "%s/r%d.idle", dir, r);
        idle += r != 1 && access(path, F_OK) == 0;
      }
    }
  }
  if (attacking && me == 1 && attack(dir, mode)) {
    for (;;)
      pause();
  }
  if (strcmp(mode, "scribble") == 0 || strcmp(mode, "progress") == 0) {
    for (;;)
      pause(); /* the init must notice; the library is the ranks' own */
  }
  if (strcmp(mode, "hang") == 0 || strcmp(mode, "die") == 0 || attacking) {
    signal(SIGTERM, SIG_IGN); /* what ends its wait must be the arena's abort, not the stop */
  }
  r = trainit_barrier(comm);
  snprintf(name, sizeof name, "r%d.ret", me);
  snprintf(text, sizeof text, "%d %lld\n", r, now_ns());
  write_file(dir, name, text);
  return r == 0 ? 0 : 4;
}

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
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: coll_rank DIR ok|die|hang\n");
    return 64;
  }
  const char* dir = argv[1];
  const char* mode = argv[2];
  trainit_comm* comm = NULL;
  int r = trainit_comm_init_from_env(&comm);
  if (r != 0) {
    fprintf(stderr, "coll_rank: init: %s\n", trainit_strerror(r));
    return 2;
  }
  const int me = trainit_comm_rank(comm);
  const int n = trainit_comm_size(comm);
  char name[64];
  char text[128];
  if (strcmp(mode, "ok") == 0) {
    int v[5];
    for (int i = 0; i < 5; ++i) v[i] = me + 1;
    r = trainit_allreduce(comm, v, v, 5, TRAINIT_I32, TRAINIT_SUM);
    for (int i = 0; r == 0 && i < 5; ++i) {
      if (v[i] != n * (n + 1) / 2) r = -1;
    }
    snprintf(name, sizeof name, "r%d.ok", me);
    snprintf(text, sizeof text, "%d %d\n", r, n);
    write_file(dir, name, text);
    return r == 0 ? 0 : 3;
  }
  if (strcmp(mode, "die") == 0 && me == 1) {
    usleep(300000);
    snprintf(text, sizeof text, "%lld\n", now_ns());
    write_file(dir, "died", text);
    raise(SIGKILL);
  }
  if (strcmp(mode, "hang") == 0 && me == 1) {
    for (;;) pause();
  }
  if (strcmp(mode, "hang") == 0 || strcmp(mode, "die") == 0) {
    signal(SIGTERM, SIG_IGN); /* what ends its wait must be the arena's abort, not the stop */
  }
  r = trainit_barrier(comm);
  snprintf(name, sizeof name, "r%d.ret", me);
  snprintf(text, sizeof text, "%d %lld\n", r, now_ns());
  write_file(dir, name, text);
  return r == 0 ? 0 : 4;
}

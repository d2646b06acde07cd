/* turns.h: two benchmarks taking turns on the same CPUs, so that each sees
 * the machine the other saw. On a VM whose host moves the vCPUs between
 * cores that share a cache and cores that do not, every few hundred
 * milliseconds, two programs timed one after the other measure two
 * machines; in turns of a few milliseconds they measure the same one.
 *
 * A program given a turns directory DIR (fresh_runs.sh makes it: FIFOs
 * DIR/go.R for each rank R, DIR/done for all) says it is ready, then runs
 * only in its turns: each rank waits for a byte on its go.R, makes its
 * calls, and writes a byte to done; the conductor gives the other program
 * its turn once every rank has. Between turns every rank sleeps in read(),
 * not in a collective's wait, so the program whose turn it is has the CPUs
 * to itself. A last turn lets the programs exit, after which neither is
 * timed. Rank 0 writes the median of each turn's timed calls to
 * DIR/medians, a line a turn, for the conductor to set side by side.
 *
 * Plain C: mpi_allreduce.c and bench_coll.cpp both take it. */
#ifndef TRAINIT_BENCH_COLL_TURNS_H
#define TRAINIT_BENCH_COLL_TURNS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Timed calls in one turn, and the untimed calls that open each turn
 * after the first (the other program's turn has just left the caches and
 * the wait of the rank that woke first behind). */
enum { kTurnCalls = 32, kTurnWarmUp = 2 };

struct turns {
  int go;      /* this rank's go FIFO; -1: no turns, every call runs at once */
  int done;    /* the done FIFO every rank writes */
  int medians; /* rank 0: DIR/medians; -1: none */
};

/* Opens rank's FIFOs under dir; dir NULL: no turns. 0, or -1 with errno. */
static inline int turns_open(struct turns* t, const char* dir, int rank) {
  t->go = t->done = t->medians = -1;
  if (dir == NULL) {
    return 0;
  }
  char path[PATH_MAX];
  if (rank == 0) {
    if (snprintf(path, sizeof path, "%s/medians", dir) >= (int)sizeof path) {
      return -1;
    }
    t->medians = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->medians < 0) {
      return -1;
    }
  }
  if (snprintf(path, sizeof path, "%s/go.%d", dir, rank) >= (int)sizeof path) {
    return -1;
  }
  t->go = open(path, O_RDONLY | O_CLOEXEC);
  if (snprintf(path, sizeof path, "%s/done", dir) >= (int)sizeof path) {
    return -1;
  }
  t->done = open(path, O_WRONLY | O_CLOEXEC);
  return t->go < 0 || t->done < 0 ? -1 : 0;
}

/* Ends this rank's turn (or says it is ready), then waits for its next
 * one. 0, or -1 (errno; 0 where the conductor went away). */
static inline int turns_pass(const struct turns* t) {
  if (t->go < 0) {
    return 0;
  }
  char byte = 'd';
  if (write(t->done, &byte, 1) != 1) {
    return -1;
  }
  ssize_t got;
  do {
    got = read(t->go, &byte, 1);
  } while (got < 0 && errno == EINTR);
  return got == 1 ? 0 : -1;
}

static inline int turns_order(const void* a, const void* b) {
  const double x = *(const double*)a;
  const double y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Rank 0: notes the median of a turn's timed calls, us[0..n) (µs). */
static inline void turns_note(const struct turns* t, const double* us, size_t n) {
  if (t->medians < 0 || n == 0) {
    return;
  }
  double sorted[kTurnCalls];
  n = n < (size_t)kTurnCalls ? n : (size_t)kTurnCalls;
  memcpy(sorted, us, n * sizeof *us);
  qsort(sorted, n, sizeof *sorted, turns_order);
  dprintf(t->medians, "%.2f\n", sorted[n / 2]);
}

static inline void turns_close(struct turns* t) {
  if (t->go >= 0) {
    close(t->go);
    close(t->done);
  }
  if (t->medians >= 0) {
    close(t->medians);
  }
  t->go = t->done = t->medians = -1;
}

#endif

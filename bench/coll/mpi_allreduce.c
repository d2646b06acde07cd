/* mpi_allreduce: MPI_Allreduce (MPI_FLOAT, MPI_SUM, out of place, or in
 * place with MPI_IN_PLACE under --in-place) among the
 * ranks of mpirun, for each size in bytes given on the command line: warm-up
 * calls, then ITERS = clamp(BUDGET / size, MIN, MAX) calls timed one by one
 * on rank 0, as bench_coll times trainit_allreduce. Rank 0 prints one line
 * per size: "BYTES MEDIAN_US ITERS". The result is checked once per size.
 * --turns DIR: one size, timed only in the turns fresh_runs.sh hands out
 * (turns.h).
 *
 *   mpirun -np N mpi_allreduce [--budget BYTES] [--in-place] [--turns DIR] SIZE...
 * Run by bench/coll/compare.sh and bench/coll/fresh_runs.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turns.h"

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a;
  const double y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  double budget = 256.0 * (1 << 20);
  int in_place = 0;
  const char* turns_dir = NULL;
  int first = 1;
  for (;;) {
    if (argc > first + 1 && strcmp(argv[first], "--budget") == 0) {
      budget = atof(argv[first + 1]);
      first += 2;
    } else if (argc > first + 1 && strcmp(argv[first], "--turns") == 0) {
      turns_dir = argv[first + 1];
      first += 2;
    } else if (argc > first && strcmp(argv[first], "--in-place") == 0) {
      in_place = 1;
      first += 1;
    } else {
      break;
    }
  }
  struct turns turns;
  if ((turns_dir != NULL && argc != first + 1) || turns_open(&turns, turns_dir, rank) != 0) {
    fprintf(stderr, "mpi_allreduce: --turns %s: one size, and the FIFOs fresh_runs.sh makes\n", turns_dir);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  size_t max_bytes = 4;
  for (int i = first; i < argc; ++i) {
    const size_t b = strtoull(argv[i], NULL, 10);
    max_bytes = b > max_bytes ? b : max_bytes;
  }
  float* send = malloc(max_bytes);
  float* recv = malloc(max_bytes);
  double* us = malloc(sizeof(double) * 20000);
  if (send == NULL || recv == NULL || us == NULL) {
    fprintf(stderr, "mpi_allreduce: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < max_bytes / sizeof(float); ++i) {
    send[i] = (float)(rank + 1);
  }
  memset(recv, 0, max_bytes);
  int rc = 0;
  for (int a = first; a < argc; ++a) {
    const size_t bytes = strtoull(argv[a], NULL, 10);
    const int count = (int)(bytes / sizeof(float));
    double want = budget / (double)bytes;
    int iters = want < 5 ? 5 : want > 20000 ? 20000 : (int)want;
    /* In place: recv holds this rank's contribution before each warm-up
     * call (the last one is checked); the timed calls reduce whatever it
     * holds, which takes the same time. */
    const void* from = in_place ? MPI_IN_PLACE : send;
    if (turns_pass(&turns) != 0) {
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int w = 0; w < (iters < 10 ? 1 : 10); ++w) {
      if (in_place) {
        memcpy(recv, send, bytes);
      }
      MPI_Allreduce(from, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    const float expect = (float)n * (float)(n + 1) / 2.0f;
    if (count > 0 && (recv[0] != expect || recv[count - 1] != expect)) {
      fprintf(stderr, "mpi_allreduce: rank %d: %zu bytes: %g, want %g\n", rank, bytes, recv[0], expect);
      rc = 1;
    }
    for (int i = 0; i < iters; ++i) {
      if (turns.go >= 0 && i > 0 && i % kTurnCalls == 0) {
        turns_note(&turns, us + i - kTurnCalls, kTurnCalls);
        if (turns_pass(&turns) != 0) {
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int w = 0; w < kTurnWarmUp; ++w) {
          MPI_Allreduce(from, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
      }
      const double t0 = MPI_Wtime();
      MPI_Allreduce(from, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      us[i] = (MPI_Wtime() - t0) * 1e6;
    }
    turns_note(&turns, us + (iters - 1) / kTurnCalls * kTurnCalls,
               (size_t)(iters - (iters - 1) / kTurnCalls * kTurnCalls));
    if (rank == 0) {
      qsort(us, (size_t)iters, sizeof(double), cmp_double);
      printf("%zu %.3f %d\n", bytes, us[iters / 2], iters);
      fflush(stdout);
    }
  }
  if (turns_pass(&turns) != 0) { /* the last turn ends; the conductor lets every rank go */
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  turns_close(&turns);
  free(send);
  free(recv);
  free(us);
  MPI_Finalize();
  return rc;
}

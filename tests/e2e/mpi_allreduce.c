/* An MPI job for the e2e tests: every rank adds rank + 1; each checks the
 * sum against n(n+1)/2 and prints it with its host name. Exit 0 when right. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mine = rank + 1;
  long sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  long want = (long)size * (size + 1) / 2;
  printf("mpi rank %d of %d on %s: allreduce %ld (want %ld)\n", rank, size, host, sum, want);
  MPI_Finalize();
  return sum == want ? 0 : 1;
}

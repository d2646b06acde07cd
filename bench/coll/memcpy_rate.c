/* memcpy_rate: this machine's single-thread memcpy, for each size in bytes
 * given on the command line: copies between two buffers of that size
 * (touched first), timed in batches (enough copies for ~20 µs), the median
 * of the batches' per-copy time. Prints "BYTES MEDIAN_US GB_PER_S" per size.
 * Run by bench/coll/compare.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a;
  const double y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Through a volatile pointer: the compiler cannot drop or merge the copies. */
static void* (*volatile copy)(void*, const void*, size_t) = memcpy;

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    const size_t bytes = strtoull(argv[a], NULL, 10);
    unsigned char* src = malloc(bytes);
    unsigned char* dst = malloc(bytes);
    if (src == NULL || dst == NULL) {
      fprintf(stderr, "memcpy_rate: out of memory\n");
      return 1;
    }
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    const size_t batch = bytes >= (1 << 20) ? 1 : (1 << 20) / bytes < 2000 ? (1 << 20) / bytes : 2000;
    const int samples = bytes >= (16 << 20) ? 21 : 201;
    double per[201];
    for (int s = 0; s < samples; ++s) {
      const double t0 = now_us();
      for (size_t i = 0; i < batch; ++i) {
        copy(dst, src, bytes);
      }
      per[s] = (now_us() - t0) / (double)batch;
    }
    qsort(per, (size_t)samples, sizeof(double), cmp_double);
    const double us = per[samples / 2];
    printf("%zu %.4f %.2f\n", bytes, us, (double)bytes / (us * 1e3));
    free(src);
    free(dst);
  }
  return 0;
}

/* bench_job's rank: a trivial training process, static, the same under every
 * launcher.
 *
 * Its rank is $RANK_ID (trainit, the reference model), else $RANK (torchrun).
 * It opens the FIFO $BENCH_JOB_FIFO for writing and, once set up (SIGTERM
 * exits 0), first writes $BENCH_JOB_LOG_BYTES bytes (default 0) of 100-byte
 * lines to stdout, then one record "R RANK NS PID\n" to the FIFO: it runs.
 * The rank $BENCH_JOB_FAIL_RANK then opens $BENCH_JOB_GO for reading, waits
 * for a byte, writes "F RANK NS PID\n" to the FIFO and exits 7; the others
 * wait for SIGTERM. NS: CLOCK_MONOTONIC nanoseconds.
 *
 * The FIFO stays open, without close-on-exec copies anywhere else, until the
 * rank dies: the bench sees POLLHUP on its end when the last rank is gone. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_sigterm(int signo) {
  (void)signo;
  _exit(0);
}

static void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(3);
    data += w;
    n -= (size_t)w;
  }
}

static void record(int fifo, char kind, long rank) {
  char line[96];
  int n = snprintf(line, sizeof(line), "%c %ld %lld %d\n", kind, rank, (long long)now_ns(), (int)getpid());
  write_all(fifo, line, (size_t)n); /* < PIPE_BUF: one atomic write */
}

static void log_lines(long rank, unsigned long long bytes) {
  static char chunk[64 << 10];
  unsigned long long line = 0, lines = bytes / 100;
  while (line < lines) {
    size_t n = 0;
    for (; n + 100 <= sizeof(chunk) && line < lines; ++line, n += 100) {
      int len = snprintf(chunk + n, 100, "rank %ld step %010llu loss 0.%06llu ", rank, line, line % 1000000);
      memset(chunk + n + len, '.', (size_t)(99 - len));
      chunk[n + 99] = '\n';
    }
    write_all(STDOUT_FILENO, chunk, n);
  }
}

int main(void) {
  const char* rank_text = getenv("RANK_ID");
  if (rank_text == NULL)
    rank_text = getenv("RANK");
  const char* fifo_path = getenv("BENCH_JOB_FIFO");
  if (rank_text == NULL || fifo_path == NULL) {
    fprintf(stderr, "bench_job_rank: needs RANK_ID (or RANK) and BENCH_JOB_FIFO\n");
    return 2;
  }
  long rank = strtol(rank_text, NULL, 10);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigterm;
  sigaction(SIGTERM, &sa, NULL);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &term, NULL);

  int fifo = open(fifo_path, O_WRONLY | O_CLOEXEC);
  if (fifo < 0) {
    fprintf(stderr, "bench_job_rank: %s: %s\n", fifo_path, strerror(errno));
    return 2;
  }
  const char* log_bytes = getenv("BENCH_JOB_LOG_BYTES");
  if (log_bytes != NULL)
    log_lines(rank, strtoull(log_bytes, NULL, 10));
  record(fifo, 'R', rank);

  const char* fail = getenv("BENCH_JOB_FAIL_RANK");
  const char* go_path = getenv("BENCH_JOB_GO");
  if (fail != NULL && go_path != NULL && strtol(fail, NULL, 10) == rank) {
    int go = open(go_path, O_RDONLY | O_CLOEXEC);
    char byte;
    while (go >= 0 && read(go, &byte, 1) < 0 && errno == EINTR) {
    }
    record(fifo, 'F', rank);
    _exit(7);
  }
  for (;;)
    pause();
}

// bench_exec_helper: the child that bench_exec runs under each init.
//
//   sleep FD          write 'r' to FD, then sleep until killed
//   sigterm FD        block SIGTERM, write 'r' to FD, wait for SIGTERM, write
//                     the CLOCK_MONOTONIC time it was taken (int64 ns) to FD,
//                     exit 0
//   storm N OUT IN    write 'r' to OUT, wait for a byte on IN, create N orphans
//                     by double-forking (each grandchild exits at once and is
//                     left to the init to reap), write 'd' to OUT, then stay
//                     alive until EOF on IN and exit 0
//
// Exits 2 on a usage error and 3 when a system call fails; bench_exec treats
// any status but 0 as a failed run.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int write_all(int fd, const void* data, size_t size) {
  const char* p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return -1;
    }
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

static int parse_int(const char* text, long* out) {
  char* end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0) {
    return -1;
  }
  *out = v;
  return 0;
}

static int do_sleep(int fd) {
  if (write_all(fd, "r", 1) < 0) {
    return 3;
  }
  for (;;) {
    pause();
  }
}

static int do_sigterm(int fd) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 || write_all(fd, "r", 1) < 0) {
    return 3;
  }
  siginfo_t info;
  while (sigwaitinfo(&set, &info) < 0) {
    if (errno != EINTR) {
      return 3;
    }
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  return write_all(fd, &ns, sizeof(ns)) < 0 ? 3 : 0;
}

static int do_storm(long count, int out, int in) {
  char byte;
  if (write_all(out, "r", 1) < 0) {
    return 3;
  }
  ssize_t n;
  while ((n = read(in, &byte, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) {
    return 3;
  }
  for (long i = 0; i < count; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      if (errno == EAGAIN) {  // the init is behind on reaping: let it catch up
        usleep(100);
        --i;
        continue;
      }
      return 3;
    }
    if (pid == 0) {
      // The intermediate child: its child (if the fork works) is orphaned at
      // once and exits; both go to the init.
      (void)fork();
      _exit(0);
    }
    while (waitpid(pid, NULL, 0) < 0) {
      if (errno != EINTR) {
        return 3;
      }
    }
  }
  if (write_all(out, "d", 1) < 0) {
    return 3;
  }
  while ((n = read(in, &byte, 1)) != 0) {  // bench_exec closes IN when it has measured
    if (n < 0 && errno != EINTR) {
      return 3;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  long a = 0;
  long b = 0;
  long c = 0;
  if (argc == 3 && strcmp(argv[1], "sleep") == 0 && parse_int(argv[2], &a) == 0) {
    return do_sleep((int)a);
  }
  if (argc == 3 && strcmp(argv[1], "sigterm") == 0 && parse_int(argv[2], &a) == 0) {
    return do_sigterm((int)a);
  }
  if (argc == 5 && strcmp(argv[1], "storm") == 0 && parse_int(argv[2], &a) == 0 && parse_int(argv[3], &b) == 0 &&
      parse_int(argv[4], &c) == 0) {
    return do_storm(a, (int)b, (int)c);
  }
  fprintf(stderr, "usage: %s sleep FD | sigterm FD | storm N OUT_FD IN_FD\n", argv[0]);
  return 2;
}

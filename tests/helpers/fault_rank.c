/* Test helper for the fault matrix, static: one rank (or exec mode's
 * PROGRAM) that misbehaves as its arguments say, in order, leaving records
 * the test reads (tests/integration/fault_ranks_test.cpp).
 *
 *   fault_rank DIR ACTION...
 *
 * R below is the rank: $RANK_ID (Ascend), else $RANK (torchrun), else
 * $OMPI_COMM_WORLD_RANK (mpirun), else 0 (exec mode's one PROGRAM). Records
 * are files DIR/rR.NAME, each written whole (temporary file + rename).
 *
 *   only RANK ACTION...  the next action (with its arguments) runs on rank
 *                     RANK only; the others skip it
 *   ready             prints "ready R pid P" on stdout (pid in its namespace)
 *   wait-file NAME    waits until DIR/NAME exists
 *   exit CODE         exits CODE
 *   pause             waits for signals, forever
 *   ignore-term       ignores SIGTERM from here on (children inherit it)
 *   segv              stores through a null pointer: killed by SIGSEGV (no
 *                     core file: RLIMIT_CORE is 0 first)
 *   mark NAME         records rR.NAME (empty)
 *   child             forks a child that records rR.child ("P\n", its pid)
 *                     and pauses forever (in the rank's process group and
 *                     session); the rank goes on once the record is there
 *   daemon            a daemon the classic way: fork, setsid, fork again;
 *                     the daemon (a session leader's child, its parent gone)
 *                     records rR.daemon ("P\n", its pid), prints "daemon R
 *                     pid P" on the stdout it inherited and pauses forever;
 *                     the rank goes on once the record is there
 *   detached-daemon   the same, but the daemon's stdin, stdout and stderr
 *                     are /dev/null (as daemon(3) makes them) and it prints
 *                     nothing
 *   forkbomb CGROUP   forks until the kernel refuses: every process of the
 *                     bomb forks in a loop (one whose fork fails waits 1 ms
 *                     and tries again), the rank itself stops at its first
 *                     failed fork, records rR.bomb ("FORKS ERRNO\n"), says so
 *                     on stderr and exits 1, as a program whose fork raised.
 *                     Refuses (exit 2) unless it runs inside the cgroup
 *                     directory CGROUP and that cgroup's pids.max is a
 *                     number of at most 4096: a bomb never runs unbounded
 *   close-stdout      closes descriptor 1
 *   close-stderr      closes descriptor 2
 *   print TEXT        TEXT and '\n' to stdout
 *   eprint TEXT       TEXT and '\n' to stderr
 *   flood BYTES       BYTES of binary to stdout as fast as it is taken, no
 *                     newline among them: the splitmix64 stream seeded with R
 *                     (each 64-bit output little-endian) with every '\n' byte
 *                     made '\0' (tests/integration/fault_ranks_test.cpp
 *                     regenerates it)
 *
 * A failed write exits 3. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* g_dir;
static unsigned g_rank;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
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

static void record(const char* what, const char* text) {
  char path[512], tmp[512];
  snprintf(path, sizeof(path), "%s/r%u.%s", g_dir, g_rank, what);
  snprintf(tmp, sizeof(tmp), "%s/.r%u.%s.%d", g_dir, g_rank, what, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    _exit(4);
  write_all(fd, text, strlen(text));
  close(fd);
  if (rename(tmp, path) < 0)
    _exit(4);
}

static void say(int fd, const char* text) {
  char line[512];
  int n = snprintf(line, sizeof(line), "%s\n", text);
  write_all(fd, line, (size_t)n);
}

static void wait_path(const char* path) {
  struct stat st;
  while (stat(path, &st) < 0)
    sleep_ms(1);
}

static void pause_forever(void) {
  for (;;)
    pause();
}

/* The pid of the process that records `what` goes there; the caller waits
 * for the record. */
static void record_own_pid(const char* what) {
  char text[32];
  snprintf(text, sizeof(text), "%d\n", (int)getpid());
  record(what, text);
}

static void wait_record(const char* what) {
  char path[512];
  snprintf(path, sizeof(path), "%s/r%u.%s", g_dir, g_rank, what);
  wait_path(path);
}

static void start_child(void) {
  pid_t child = fork();
  if (child < 0)
    exit(5);
  if (child == 0) {
    record_own_pid("child");
    pause_forever();
  }
  wait_record("child");
}

static void start_daemon(int detached) {
  pid_t first = fork();
  if (first < 0)
    exit(5);
  if (first == 0) {
    if (setsid() < 0)
      _exit(5);
    pid_t daemon = fork();
    if (daemon != 0)
      _exit(daemon < 0 ? 5 : 0); /* the daemon's parent is gone: an orphan */
    if (detached) {
      int null = open("/dev/null", O_RDWR);
      if (null < 0)
        _exit(5);
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    record_own_pid("daemon");
    if (!detached) {
      char text[64];
      snprintf(text, sizeof(text), "daemon %u pid %d", g_rank, (int)getpid());
      say(STDOUT_FILENO, text);
    }
    pause_forever();
  }
  waitpid(first, NULL, 0);
  wait_record("daemon");
}

/* Whether this process is in CGROUP and its pids.max bounds the bomb. */
static int bomb_is_contained(const char* cgroup) {
  char path[512], text[64] = {0};
  snprintf(path, sizeof(path), "%s/pids.max", cgroup);
  FILE* f = fopen(path, "r");
  if (f == NULL || fgets(text, sizeof(text), f) == NULL) {
    if (f != NULL)
      fclose(f);
    return 0;
  }
  fclose(f);
  char* end = NULL;
  long max = strtol(text, &end, 10);
  if (end == text || max <= 0 || max > 4096)
    return 0;
  snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
  if ((f = fopen(path, "r")) == NULL)
    return 0;
  int member = 0;
  long pid;
  while (!member && fscanf(f, "%ld", &pid) == 1)
    member = pid == (long)getpid();
  fclose(f);
  return member;
}

static void fork_bomb(const char* cgroup) {
  if (!bomb_is_contained(cgroup)) {
    fprintf(stderr, "fault_rank: forkbomb: not inside %s with a pids.max of at most 4096; refused\n", cgroup);
    exit(2);
  }
  for (long forks = 0;; ++forks) {
    pid_t pid = fork();
    if (pid == 0) {
      for (;;) { /* a bomber: it and each child it makes fork on */
        if (fork() < 0)
          sleep_ms(1);
      }
    }
    if (pid < 0) {
      int e = errno;
      char text[64];
      snprintf(text, sizeof(text), "%ld %d\n", forks, e);
      record("bomb", text);
      fprintf(stderr, "fault_rank: fork: %s after %ld forks\n", strerror(e), forks);
      exit(1);
    }
  }
}

static uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

enum { kChunk = 64 << 10 };
static char g_chunk[kChunk];

static void flood(unsigned long long bytes) {
  uint64_t state = g_rank;
  while (bytes > 0) {
    size_t n = bytes < kChunk ? (size_t)bytes : kChunk;
    for (size_t i = 0; i < n; i += 8) {
      uint64_t v = splitmix64(&state);
      for (size_t k = 0; k < 8 && i + k < n; ++k) {
        char c = (char)(v >> (8 * k));
        g_chunk[i + k] = c == '\n' ? '\0' : c;
      }
    }
    write_all(STDOUT_FILENO, g_chunk, n);
    bytes -= n;
  }
}

/* How many arguments each action takes. */
static int arity(const char* action) {
  static const char* const kOne[] = {"only", "wait-file", "exit", "mark", "forkbomb", "print", "eprint", "flood"};
  for (size_t i = 0; i < sizeof(kOne) / sizeof(kOne[0]); ++i) {
    if (strcmp(action, kOne[i]) == 0)
      return 1;
  }
  return 0;
}

static unsigned rank_from_environment(void) {
  const char* names[] = {"RANK_ID", "RANK", "OMPI_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    const char* value = getenv(names[i]);
    if (value != NULL && *value != '\0')
      return (unsigned)strtoul(value, NULL, 10);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fault_rank DIR ACTION...\n");
    return 2;
  }
  g_dir = argv[1];
  g_rank = rank_from_environment();
  int skip_next = 0;
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    const char* arg = NULL;
    if (arity(a) > 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "fault_rank: %s needs a value\n", a);
        return 2;
      }
      arg = argv[++i];
    }
    if (skip_next) {
      skip_next = 0;
      continue;
    }
    if (strcmp(a, "only") == 0) {
      skip_next = (unsigned)strtoul(arg, NULL, 10) != g_rank;
    } else if (strcmp(a, "ready") == 0) {
      char line[64];
      snprintf(line, sizeof(line), "ready %u pid %d", g_rank, (int)getpid());
      say(STDOUT_FILENO, line);
    } else if (strcmp(a, "wait-file") == 0) {
      char path[512];
      snprintf(path, sizeof(path), "%s/%s", g_dir, arg);
      wait_path(path);
    } else if (strcmp(a, "exit") == 0) {
      exit(atoi(arg));
    } else if (strcmp(a, "pause") == 0) {
      pause_forever();
    } else if (strcmp(a, "ignore-term") == 0) {
      signal(SIGTERM, SIG_IGN);
    } else if (strcmp(a, "segv") == 0) {
      struct rlimit none = {0, 0};
      setrlimit(RLIMIT_CORE, &none);
      volatile uintptr_t nowhere = 0; /* not known null to the compiler: a store, not a trap */
      *(volatile int*)nowhere = 1;
    } else if (strcmp(a, "mark") == 0) {
      record(arg, "");
    } else if (strcmp(a, "child") == 0) {
      start_child();
    } else if (strcmp(a, "daemon") == 0 || strcmp(a, "detached-daemon") == 0) {
      start_daemon(strcmp(a, "detached-daemon") == 0);
    } else if (strcmp(a, "forkbomb") == 0) {
      fork_bomb(arg);
    } else if (strcmp(a, "close-stdout") == 0) {
      close(STDOUT_FILENO);
    } else if (strcmp(a, "close-stderr") == 0) {
      close(STDERR_FILENO);
    } else if (strcmp(a, "print") == 0) {
      say(STDOUT_FILENO, arg);
    } else if (strcmp(a, "eprint") == 0) {
      say(STDERR_FILENO, arg);
    } else if (strcmp(a, "flood") == 0) {
      flood(strtoull(arg, NULL, 10));
    } else {
      fprintf(stderr, "fault_rank: unknown action '%s'\n", a);
      return 2;
    }
  }
  return 0;
}

/* Test helper for the job-mode tests, static: one rank of an Ascend job,
 * started by trainit, doing what its arguments say, in order, and leaving
 * records the test reads afterwards.
 *
 *   job_rank DIR ACTION...
 *
 * R below is the rank: $RANK_ID (the helper exits 2 without it). Records are
 * files in DIR, each written whole (temporary file + rename) unless noted.
 * Times are CLOCK_MONOTONIC nanoseconds (the clock of steady_clock).
 *
 *   record            rR.environ: the environment as received, each
 *                     "NAME=value" ended by '\0' (as /proc/PID/environ);
 *                     rR.info: "pid P\nppid Q\npgid G\nsid S\nuid U\ngid G\n
 *                     cwd C\n" (pids in trainit's namespace); and one line
 *                     "start R NS\n" appended (one write, O_APPEND) to DIR/starts
 *   on-term exit|ignore  on SIGTERM: rR.term gets the time, then exit 0, or
 *                     carry on (SIGTERM caught and otherwise ignored)
 *   ready             prints "ready R pid P" on stdout
 *   wait-file NAME    waits until DIR/NAME exists (inotify on DIR)
 *   exit-if RANK CODE exits CODE when R is RANK
 *   exit CODE         exits CODE
 *   sleep MS          sleeps MS milliseconds
 *   pause             waits for signals, forever
 *   random BYTES SEED writes BYTES bytes of the splitmix64 stream seeded
 *                     SEED + R to stdout (each 64-bit output little-endian)
 *   lines BYTES       writes BYTES / 100 lines of 100 bytes to stdout:
 *                     "rank R line NNNNNNNNNN " padded with 'x' to 99 bytes,
 *                     then '\n' (N counts from 0)
 *   print TEXT        prints TEXT and '\n' on stdout
 *   write TEXT        writes TEXT to stdout, no '\n'
 *   kill-self         SIGKILLs itself
 *
 * Output goes out in whole write(2)s of up to 64 KiB (a short write is
 * continued); a failed write exits 3. tests/integration/job_support.h
 * regenerates the random and lines streams to check log files byte for byte. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static const char* g_dir;
static unsigned g_rank;
static char g_term_path[512], g_term_tmp[512];
static int g_exit_on_term;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

/* Async-signal-safe: `n` bytes to tmp, then tmp renamed to path. */
static void record_bytes(const char* path, const char* tmp, const char* data, size_t n) {
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    _exit(4);
  write_all(fd, data, n);
  close(fd);
  if (rename(tmp, path) < 0)
    _exit(4);
}

/* Async-signal-safe decimal. Returns the length. */
static int format_u64(char* out, uint64_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  for (int i = 0; i < n; ++i)
    out[i] = digits[n - 1 - i];
  return n;
}

static void on_sigterm(int signo) {
  (void)signo;
  int saved = errno;
  char text[32];
  int n = format_u64(text, (uint64_t)now_ns());
  text[n++] = '\n';
  record_bytes(g_term_path, g_term_tmp, text, (size_t)n);
  if (g_exit_on_term)
    _exit(0);
  errno = saved;
}

static void record_named(const char* what, const char* data, size_t n) {
  char path[512], tmp[512];
  snprintf(path, sizeof(path), "%s/r%u.%s", g_dir, g_rank, what);
  snprintf(tmp, sizeof(tmp), "%s/.r%u.%s.%d", g_dir, g_rank, what, (int)getpid());
  record_bytes(path, tmp, data, n);
}

static void record(void) {
  size_t size = 0;
  for (char** e = environ; *e != NULL; ++e)
    size += strlen(*e) + 1;
  char* env = malloc(size + 1);
  if (env == NULL)
    exit(2);
  size_t at = 0;
  for (char** e = environ; *e != NULL; ++e) {
    size_t n = strlen(*e) + 1;
    memcpy(env + at, *e, n);
    at += n;
  }
  record_named("environ", env, size);
  free(env);

  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == NULL)
    snprintf(cwd, sizeof(cwd), "(getcwd failed: %s)", strerror(errno));
  char info[4608];
  int n = snprintf(info, sizeof(info), "pid %d\nppid %d\npgid %d\nsid %d\nuid %u\ngid %u\ncwd %s\n", (int)getpid(),
                   (int)getppid(), (int)getpgid(0), (int)getsid(0), (unsigned)getuid(), (unsigned)getgid(), cwd);
  record_named("info", info, (size_t)n);

  char path[512], line[64];
  snprintf(path, sizeof(path), "%s/starts", g_dir);
  int len = snprintf(line, sizeof(line), "start %u %lld\n", g_rank, (long long)now_ns());
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    exit(4);
  write_all(fd, line, (size_t)len);
  close(fd);
}

static void on_term(const char* how) {
  snprintf(g_term_path, sizeof(g_term_path), "%s/r%u.term", g_dir, g_rank);
  snprintf(g_term_tmp, sizeof(g_term_tmp), "%s/.r%u.term.%d", g_dir, g_rank, (int)getpid());
  if (strcmp(how, "exit") == 0) {
    g_exit_on_term = 1;
  } else if (strcmp(how, "ignore") == 0) {
    g_exit_on_term = 0;
  } else {
    fprintf(stderr, "job_rank: on-term: expected exit or ignore, got '%s'\n", how);
    exit(2);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigterm;
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &term, NULL);
}

static uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

enum { kChunk = 64 << 10 };
static char g_chunk[kChunk];

static void random_stream(unsigned long long bytes, unsigned long long seed) {
  uint64_t state = seed + g_rank;
  while (bytes > 0) {
    size_t n = bytes < kChunk ? (size_t)bytes : kChunk;
    for (size_t i = 0; i < n; i += 8) {
      uint64_t v = splitmix64(&state);
      for (size_t k = 0; k < 8 && i + k < n; ++k)
        g_chunk[i + k] = (char)(v >> (8 * k));
    }
    write_all(STDOUT_FILENO, g_chunk, n);
    bytes -= n;
  }
}

static void lines_stream(unsigned long long bytes) {
  unsigned long long lines = bytes / 100, line = 0;
  while (line < lines) {
    size_t n = 0;
    for (; n + 100 <= kChunk && line < lines; ++line, n += 100) {
      char* out = g_chunk + n;
      int len = snprintf(out, 100, "rank %u line %010llu ", g_rank, line);
      memset(out + len, 'x', (size_t)(99 - len));
      out[99] = '\n';
    }
    write_all(STDOUT_FILENO, g_chunk, n);
  }
}

static void say(const char* text) {
  char line[512];
  int n = snprintf(line, sizeof(line), "%s\n", text);
  write_all(STDOUT_FILENO, line, (size_t)n);
}

static void wait_file(const char* name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", g_dir, name);
  struct stat st;
  /* Watched before the first look: a file made in between is not missed. */
  int in = inotify_init1(IN_CLOEXEC);
  if (in >= 0 && inotify_add_watch(in, g_dir, IN_CREATE | IN_MOVED_TO) < 0) {
    close(in);
    in = -1;
  }
  while (stat(path, &st) < 0) {
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    if (in < 0 || (read(in, events, sizeof(events)) < 0 && errno != EINTR)) {
      if (in >= 0)
        close(in);
      in = -1;
      sleep_ms(1); /* no inotify (out of watches): poll */
    }
  }
  if (in >= 0)
    close(in);
}

static const char* need(char** argv, int i, int argc, const char* action) {
  if (i >= argc) {
    fprintf(stderr, "job_rank: %s needs a value\n", action);
    exit(2);
  }
  return argv[i];
}

int main(int argc, char** argv) {
  const char* rank = getenv("RANK_ID");
  if (argc < 2 || rank == NULL) {
    fprintf(stderr, "usage: RANK_ID=R job_rank DIR ACTION...\n");
    return 2;
  }
  g_dir = argv[1];
  g_rank = (unsigned)strtoul(rank, NULL, 10);
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "record") == 0) {
      record();
    } else if (strcmp(a, "on-term") == 0) {
      on_term(need(argv, ++i, argc, a));
    } else if (strcmp(a, "ready") == 0) {
      char line[64];
      snprintf(line, sizeof(line), "ready %u pid %d", g_rank, (int)getpid());
      say(line);
    } else if (strcmp(a, "wait-file") == 0) {
      wait_file(need(argv, ++i, argc, a));
    } else if (strcmp(a, "exit-if") == 0) {
      unsigned who = (unsigned)strtoul(need(argv, ++i, argc, a), NULL, 10);
      int code = atoi(need(argv, ++i, argc, a));
      if (who == g_rank)
        exit(code);
    } else if (strcmp(a, "exit") == 0) {
      exit(atoi(need(argv, ++i, argc, a)));
    } else if (strcmp(a, "sleep") == 0) {
      sleep_ms(atol(need(argv, ++i, argc, a)));
    } else if (strcmp(a, "pause") == 0) {
      for (;;)
        pause();
    } else if (strcmp(a, "random") == 0) {
      unsigned long long bytes = strtoull(need(argv, ++i, argc, a), NULL, 10);
      random_stream(bytes, strtoull(need(argv, ++i, argc, a), NULL, 10));
    } else if (strcmp(a, "lines") == 0) {
      lines_stream(strtoull(need(argv, ++i, argc, a), NULL, 10));
    } else if (strcmp(a, "print") == 0) {
      say(need(argv, ++i, argc, a));
    } else if (strcmp(a, "write") == 0) {
      const char* text = need(argv, ++i, argc, a);
      write_all(STDOUT_FILENO, text, strlen(text));
    } else if (strcmp(a, "kill-self") == 0) {
      kill(getpid(), SIGKILL);
      for (;;)
        pause();
    } else {
      fprintf(stderr, "job_rank: unknown action '%s'\n", a);
      return 2;
    }
  }
  return 0;
}

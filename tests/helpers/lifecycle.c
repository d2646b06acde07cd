/* Test helper for drain, stop, stop delay and restarts, static: a main
 * process and the daemons it leaves behind, each recording when it took
 * SIGTERM and when its cleanup was over.
 *
 *   lifecycle DIR [daemon NAME ON_TERM MS]... MAIN
 *
 * Records are files in DIR holding one CLOCK_MONOTONIC time in nanoseconds
 * (the clock of std::chrono::steady_clock), each written whole (rename):
 *   NAME.term   NAME took SIGTERM (rewritten on each one)
 *   NAME.done   NAME's cleanup is over, just before it exits 0
 * ON_TERM, what NAME does on SIGTERM:
 *   exit        records NAME.term, cleans up for MS ms, records NAME.done,
 *               exits 0
 *   stay        records NAME.term and keeps running
 *   ignore      nothing: SIGTERM is ignored (SIG_IGN); only SIGKILL ends it
 *
 * daemon: a background process in a session of its own (setsid) whose parent
 * exits, so that it is reparented to the init; prints "NAME ready pid P"
 * (P: its pid in its own namespace) once set up. MAIN waits for every daemon,
 * then:
 *   exit CODE             exits with CODE
 *   serve NAME ON_TERM MS  prints "NAME ready pid P", takes SIGTERM as
 *                         ON_TERM says, exits 0 at the end of stdin
 *   forever NAME ON_TERM MS  as serve, but stdin does not end it
 *   env                   prints "env VAR=VALUE" for each variable, then
 *                         "env end"; exits 0 at the end of stdin
 *   runs FILE SPEC...     a run of a restarted program: appends "start NS" to
 *                         FILE; run i (0-based, counted from FILE's earlier
 *                         starts) follows SPEC[i], the last SPEC repeating:
 *                         CODE (exit at once) or CODE@MS (run MS ms first);
 *                         appends "exit NS" just before it exits
 *
 * Each stdout line is written with one write(2). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

enum on_term { kExit, kStay, kIgnore };

static const char* g_dir;
static char g_term_path[512], g_term_tmp[512], g_done_path[512], g_done_tmp[512];
static int g_cleanup_ms;
static enum on_term g_on_term;

static void say(const char* text) {
  size_t n = strlen(text);
  if (write(STDOUT_FILENO, text, n) != (ssize_t)n)
    _exit(3);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Async-signal-safe: writes `value` to tmp, then renames it to path. */
static void record(const char* path, const char* tmp, int64_t value) {
  char text[24];
  int n = 0;
  char digits[24];
  uint64_t v = (uint64_t)value;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  for (int i = 0; i < n; ++i)
    text[i] = digits[n - 1 - i];
  text[n] = '\n';
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    _exit(4);
  if (write(fd, text, (size_t)n + 1) != n + 1)
    _exit(4);
  close(fd);
  if (rename(tmp, path) < 0)
    _exit(4);
}

static void on_sigterm(int signo) {
  (void)signo;
  int saved = errno;
  record(g_term_path, g_term_tmp, now_ns());
  if (g_on_term == kExit) {
    sleep_ms(g_cleanup_ms);
    record(g_done_path, g_done_tmp, now_ns());
    _exit(0);
  }
  errno = saved;
}

static enum on_term parse_on_term(const char* text) {
  if (strcmp(text, "exit") == 0)
    return kExit;
  if (strcmp(text, "stay") == 0)
    return kStay;
  if (strcmp(text, "ignore") == 0)
    return kIgnore;
  fprintf(stderr, "lifecycle: unknown ON_TERM '%s'\n", text);
  exit(2);
}

/* Makes this process NAME: its records, its SIGTERM disposition, its line. */
static void become(const char* name, const char* on_term, const char* ms) {
  snprintf(g_term_path, sizeof(g_term_path), "%s/%s.term", g_dir, name);
  snprintf(g_term_tmp, sizeof(g_term_tmp), "%s/.%s.term.%d", g_dir, name, (int)getpid());
  snprintf(g_done_path, sizeof(g_done_path), "%s/%s.done", g_dir, name);
  snprintf(g_done_tmp, sizeof(g_done_tmp), "%s/.%s.done.%d", g_dir, name, (int)getpid());
  g_on_term = parse_on_term(on_term);
  g_cleanup_ms = atoi(ms);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = g_on_term == kIgnore ? SIG_IGN : on_sigterm;
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &term, NULL);
  char line[256];
  snprintf(line, sizeof(line), "%s ready pid %d\n", name, (int)getpid());
  say(line);
}

static void start_daemon(const char* name, const char* on_term, const char* ms) {
  int ready[2];
  if (pipe(ready) < 0)
    exit(2);
  pid_t leader = fork();
  if (leader < 0)
    exit(2);
  if (leader == 0) {
    close(ready[0]);
    if (setsid() < 0)
      _exit(2);
    pid_t daemon = fork();
    if (daemon != 0)
      _exit(daemon < 0 ? 2 : 0); /* the daemon is orphaned: the init adopts it */
    become(name, on_term, ms);
    close(ready[1]);
    for (;;)
      pause();
  }
  close(ready[1]);
  int status;
  while (waitpid(leader, &status, 0) < 0 && errno == EINTR) {
  }
  char byte;
  while (read(ready[0], &byte, 1) > 0 || errno == EINTR) {
  }
  close(ready[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    exit(2);
}

static void wait_stdin_end(void) {
  char buf[256];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EINTR))
      return;
  }
}

static int count_starts(const char* file) {
  FILE* f = fopen(file, "r");
  if (f == NULL)
    return 0;
  int starts = 0;
  char line[128];
  while (fgets(line, sizeof(line), f) != NULL)
    starts += strncmp(line, "start ", 6) == 0;
  fclose(f);
  return starts;
}

static void append(const char* file, const char* what) {
  char line[64];
  int n = snprintf(line, sizeof(line), "%s %lld\n", what, (long long)now_ns());
  int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, line, (size_t)n) != n)
    exit(5);
  close(fd);
}

static int runs(const char* file, int nspecs, char** specs) {
  if (nspecs < 1)
    return 2;
  int run = count_starts(file);
  append(file, "start");
  const char* spec = specs[run < nspecs ? run : nspecs - 1];
  int code = atoi(spec);
  const char* at = strchr(spec, '@');
  if (at != NULL)
    sleep_ms(atoi(at + 1));
  append(file, "exit");
  return code;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: lifecycle DIR [daemon NAME ON_TERM MS]... MAIN\n");
    return 2;
  }
  g_dir = argv[1];
  int i = 2;
  while (i + 3 < argc && strcmp(argv[i], "daemon") == 0) {
    start_daemon(argv[i + 1], argv[i + 2], argv[i + 3]);
    i += 4;
  }
  if (i >= argc)
    return 2;
  const char* main_action = argv[i];
  if (strcmp(main_action, "exit") == 0 && i + 1 < argc)
    return atoi(argv[i + 1]);
  if ((strcmp(main_action, "serve") == 0 || strcmp(main_action, "forever") == 0) && i + 3 < argc) {
    become(argv[i + 1], argv[i + 2], argv[i + 3]);
    if (strcmp(main_action, "forever") == 0) {
      for (;;)
        pause();
    }
    wait_stdin_end();
    return 0;
  }
  if (strcmp(main_action, "env") == 0) {
    for (char** e = environ; *e != NULL; ++e) {
      char line[4096];
      snprintf(line, sizeof(line), "env %s\n", *e);
      say(line);
    }
    say("env end\n");
    wait_stdin_end();
    return 0;
  }
  if (strcmp(main_action, "runs") == 0 && i + 1 < argc)
    return runs(argv[i + 1], argc - i - 2, argv + i + 2);
  fprintf(stderr, "lifecycle: bad arguments at '%s'\n", main_action);
  return 2;
}

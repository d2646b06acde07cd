/* Test helper, static: makes orphans for the init above it to reap, and
 * checks from inside that it did. "The init" is this helper's parent, as PID
 * 1 or as a child subreaper; /proc must show the processes the init sees.
 *
 *   orphans one        prints "parent P" (its own parent, the init), makes one
 *                      orphan that prints "orphan O ppid Q" once it has been
 *                      reparented (Q: its new parent) and exits; then waits
 *                      until O has been reaped, prints "reaped O", exits 0
 *                      (1 if O is still there after 10 s)
 *   orphans one-when-told
 *                      the same, but makes the orphan only once a line has
 *                      come on stdin (the test stops the init meanwhile)
 *   orphans storm N    makes N orphans in a stream (a parent forks, starts 8
 *                      and exits; then the next), counts the init's
 *                      zombies every 32 orphans, waits until every
 *                      orphan has exited and then until the init has no zombie
 *                      left; prints "orphans N max_zombies M left L
 *                      settle_ms T" and exits 0, or 1 when zombies remain
 *                      after 10 s */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Zombies whose parent is `init`, from /proc. */
static int count_zombies(pid_t init) {
  DIR* proc = opendir("/proc");
  if (proc == NULL)
    return -1;
  int zombies = 0;
  struct dirent* entry;
  while ((entry = readdir(proc)) != NULL) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
      continue;
    char path[300], stat[512];
    snprintf(path, sizeof(path), "/proc/%s/stat", entry->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    ssize_t n = read(fd, stat, sizeof(stat) - 1);
    close(fd);
    if (n <= 0)
      continue;
    stat[n] = '\0';
    char* end = strrchr(stat, ')'); /* the name may hold spaces and parentheses */
    char state;
    int ppid;
    if (end != NULL && sscanf(end + 1, " %c %d", &state, &ppid) == 2 && state == 'Z' && ppid == init)
      ++zombies;
  }
  closedir(proc);
  return zombies;
}

static int exists(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d", (int)pid);
  struct stat st;
  return stat(path, &st) == 0;
}

static pid_t fork_retrying(void) {
  for (int i = 0; i < 1000; ++i) {
    pid_t pid = fork();
    if (pid >= 0 || errno != EAGAIN)
      return pid;
    pause_ms(1);
  }
  return -1;
}

static int one(int when_told) {
  printf("parent %d\n", (int)getppid());
  fflush(stdout);
  char line[16];
  if (when_told && fgets(line, sizeof(line), stdin) == NULL)
    return 2;
  int report[2];
  if (pipe(report) < 0)
    return 2;
  pid_t middle = fork_retrying();
  if (middle < 0)
    return 2;
  if (middle == 0) {
    pid_t lost = getpid();
    /* The orphan learns that it was reparented from the kernel: SIGUSR1 when
     * its parent has died (sent after the reparenting), taken at most 10 s
     * later; unless the parent was gone before the request. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    pid_t orphan = fork();
    if (orphan != 0)
      _exit(orphan < 0 ? 2 : 0);
    close(report[0]);
    if (prctl(PR_SET_PDEATHSIG, SIGUSR1) < 0)
      _exit(2);
    /* A parent of several threads (qemu-user's, under emulation) hands its
     * children to a sibling thread first, with the same signal: wait until
     * the parent is another process. */
    double until = now_ms() + 10000;
    while (getppid() == lost && now_ms() < until) {
      struct timespec limit = {0, 100 * 1000000L};
      sigtimedwait(&usr1, NULL, &limit);
    }
    printf("orphan %d ppid %d\n", (int)getpid(), (int)getppid());
    fflush(stdout);
    pid_t me = getpid();
    if (write(report[1], &me, sizeof(me)) != sizeof(me))
      _exit(2);
    _exit(0);
  }
  close(report[1]);
  waitpid(middle, NULL, 0);
  pid_t orphan;
  if (read(report[0], &orphan, sizeof(orphan)) != sizeof(orphan))
    return 2;
  /* Reaped by the init: no event tells another process, so /proc is polled
   * (1 ms, at most 10 s). */
  for (int i = 0; i < 10000 && exists(orphan); ++i)
    pause_ms(1);
  if (exists(orphan)) {
    printf("not reaped %d\n", (int)orphan);
    return 1;
  }
  printf("reaped %d\n", (int)orphan);
  return 0;
}

/* An orphan's whole life: it shares its parent's memory (no page tables to
 * copy, so a stream of them is quick even where fork is slow) and exits. */
static int orphan_main(void* unused) {
  (void)unused;
  return 0;
}

enum { kBatch = 8 };                                            /* orphans per lost parent */
static char stacks[kBatch][16384] __attribute__((aligned(64))); /* copied with each parent */

static int storm(int count) {
  pid_t init = getppid();
  int alive[2]; /* every orphan holds the write end until it exits */
  if (pipe(alive) < 0)
    return 2;
  int max_zombies = 0;
  for (int made = 0; made < count;) {
    int batch = count - made < kBatch ? count - made : kBatch;
    pid_t middle = fork_retrying();
    if (middle < 0) {
      perror("fork");
      return 2;
    }
    if (middle == 0) {
      for (int k = 0; k < batch; ++k) {
        pid_t pid = -1;
        for (int tries = 0; pid < 0 && tries < 1000; ++tries) {
          pid = clone(orphan_main, stacks[k] + sizeof(stacks[k]), CLONE_VM | CLONE_FILES | SIGCHLD, NULL);
          if (pid < 0 && errno == EINVAL) { /* qemu-user: CLONE_VM only for threads */
            pid = fork();
            if (pid == 0)
              _exit(0);
          }
          if (pid < 0 && errno != EAGAIN)
            _exit(2);
          if (pid < 0)
            pause_ms(1);
        }
        if (pid < 0)
          _exit(2);
      }
      _exit(0); /* the orphans, alive or already zombies, go to the init */
    }
    int status;
    while (waitpid(middle, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "orphans: cannot make orphans\n");
      return 2;
    }
    if ((made + batch) / 32 != made / 32) {
      int z = count_zombies(init);
      if (z > max_zombies)
        max_zombies = z;
    }
    made += batch;
  }
  close(alive[1]);
  char byte;
  while (read(alive[0], &byte, 1) != 0) {
  }
  double start = now_ms();
  int left = count_zombies(init);
  while (left != 0 && now_ms() - start < 10000) {
    pause_ms(1);
    left = count_zombies(init);
  }
  printf("orphans %d max_zombies %d left %d settle_ms %.1f\n", count, max_zombies, left, now_ms() - start);
  return left == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "one") == 0)
    return one(0);
  if (argc == 2 && strcmp(argv[1], "one-when-told") == 0)
    return one(1);
  if (argc == 3 && strcmp(argv[1], "storm") == 0)
    return storm(atoi(argv[2]));
  fprintf(stderr, "usage: orphans one | orphans one-when-told | orphans storm N\n");
  return 2;
}

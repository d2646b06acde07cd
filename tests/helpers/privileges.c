/* Reports what the kernel gave this process, for the least-privilege tests:
 *
 *   privileges [PARENT_CAPEFF]
 *
 * prints, one per line, its own /proc/self/status lines Uid, Gid, Groups,
 * CapBnd, CapPrm, CapEff, CapInh, CapAmb and NoNewPrivs; its USER, LOGNAME
 * and HOME ("env USER=..."); what its parent (trainit) holds ("parent
 * CapEff: ..." and "parent CapBnd: ..."); and whether it may signal or
 * ptrace its parent ("kill parent: EPERM", "ptrace parent: ok"). Exits 0.
 *
 * trainit narrows its own capabilities just after PROGRAM has started: with
 * PARENT_CAPEFF (16 hex digits, as /proc shows a set), the helper first waits
 * up to 5 s for its parent's CapEff to read so, then reports what it read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

static void print_status(const char* path, const char* prefix, const char* const* keys) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    printf("%s%s: %s\n", prefix, path, strerror(errno));
    return;
  }
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    for (const char* const* k = keys; *k != NULL; ++k) {
      size_t n = strlen(*k);
      if (strncmp(line, *k, n) == 0 && line[n] == ':') {
        /* "Uid:\t0\t0\t0\t0" -> "Uid: 0 0 0 0" */
        for (char* p = line; *p; ++p) {
          if (*p == '\t')
            *p = ' ';
        }
        char* value = line + n + 1;
        while (*value == ' ')
          ++value;
        printf("%s%s: %s", prefix, *k, value);
      }
    }
  }
  fclose(f);
}

/* Waits up to 5 s for `path`'s CapEff line to hold `want`. */
static void wait_for_caps(const char* path, const char* want) {
  for (int tries = 0; tries < 500; ++tries) {
    FILE* f = fopen(path, "r");
    char line[512];
    int found = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
      if (strncmp(line, "CapEff:\t", 8) == 0 && strncmp(line + 8, want, 16) == 0) {
        found = 1;
      }
    }
    if (f != NULL)
      fclose(f);
    if (found)
      return;
    usleep(10000);
  }
}

static const char* outcome(int r) {
  return r == 0 ? "ok" : errno == EPERM ? "EPERM" : strerror(errno);
}

int main(int argc, char** argv) {
  static const char* const own[] = {"Uid",    "Gid",    "Groups", "CapInh",     "CapPrm",
                                    "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", NULL};
  static const char* const parent[] = {"CapEff", "CapBnd", NULL};
  print_status("/proc/self/status", "", own);
  char path[64];
  const pid_t ppid = getppid();
  snprintf(path, sizeof path, "/proc/%d/status", (int)ppid);
  if (argc > 1) {
    wait_for_caps(path, argv[1]);
  }
  print_status(path, "parent ", parent);
  for (const char* const* name = (const char* const[]){"USER", "LOGNAME", "HOME", NULL}; *name; ++name) {
    const char* value = getenv(*name);
    printf("env %s=%s\n", *name, value ? value : "(unset)");
  }
  /* Signal 0: the kernel checks the permission every signal needs (but
   * SIGCONT, which passes within a session), and delivers nothing. */
  printf("kill parent: %s\n", outcome(kill(ppid, 0)));
  const int attached = (int)ptrace(PTRACE_ATTACH, ppid, NULL, NULL);
  printf("ptrace parent: %s\n", outcome(attached));
  if (attached == 0) {
    waitpid(ppid, NULL, __WALL);
    ptrace(PTRACE_DETACH, ppid, NULL, NULL);
  }
  fflush(stdout);
  return 0;
}

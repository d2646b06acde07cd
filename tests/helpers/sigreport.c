/* Test helper: prints its signal mask, ignored signals, process group and
 * session, then (with "wait") waits for signals and prints each one's name
 * as it arrives, exiting on SIGTERM with status 0. Output is line-buffered. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void report(int signo) {
  char line[64];
  int n = snprintf(line, sizeof(line), "signal %d\n", signo);
  if (write(STDOUT_FILENO, line, (size_t)n) < 0) _exit(3);
  if (signo == SIGTERM) _exit(0);
}

int main(int argc, char** argv) {
  sigset_t mask;
  sigprocmask(SIG_SETMASK, NULL, &mask);
  unsigned long long blocked = 0, ignored = 0;
  for (int s = 1; s <= 64; ++s) {
    if (sigismember(&mask, s) == 1) blocked |= 1ULL << (s - 1);
    struct sigaction sa;
    if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) ignored |= 1ULL << (s - 1);
  }
  printf("blocked %016llx\nignored %016llx\npid %d\npgid %d\nsid %d\n", blocked, ignored, (int)getpid(),
         (int)getpgrp(), (int)getsid(0));
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "wait") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = report;
    for (int s = 1; s < SIGRTMIN; ++s) {
      if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD) sigaction(s, &sa, NULL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
  }
  return 0;
}

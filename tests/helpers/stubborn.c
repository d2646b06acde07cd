/* Test helper: a process tree that ignores SIGTERM and keeps changing while
 * it is swept, for the stop tests (tests/integration/stop_test.cpp).
 *
 *   stubborn IDLE
 *
 * Ignores SIGTERM (and so do all its descendants: the disposition is
 * inherited across fork), starts IDLE idle children that pause forever, and a
 * daemon that keeps replacing its one child: it forks a new child, then
 * SIGKILLs and reaps the previous one, in a loop without pause. A sweep that
 * reads /proc and then signals pid by pid can miss the newest child, which
 * then survives the daemon. Once all are started it prints "ready" and
 * pauses. It never exits by itself. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void idle_forever(void) {
  for (;;) {
    pause();
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: stubborn IDLE\n");
    return 2;
  }
  const int idle = atoi(argv[1]);
  signal(SIGTERM, SIG_IGN);
  for (int i = 0; i < idle; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      idle_forever();
    }
  }
  pid_t daemon = fork();
  if (daemon < 0) {
    perror("fork");
    return 1;
  }
  if (daemon == 0) {
    pid_t previous = 0;
    for (;;) {
      pid_t next = fork();
      if (next == 0) {
        idle_forever();
      }
      if (previous > 0) {
        kill(previous, SIGKILL);
        waitpid(previous, NULL, 0);
      }
      previous = next;
    }
  }
  printf("ready\n");
  fflush(stdout);
  idle_forever();
}

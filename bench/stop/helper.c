/* bench_stop's job, static: N processes that exit on SIGTERM (its default
 * action: no handler, nothing blocked).
 *
 *   helper N setsid|group READY_FD
 *
 * This process is one of the N; it starts N-1 more:
 *   setsid  each in a session of its own and orphaned (its parent exits), so
 *           that the init adopts it, as a daemon would be
 *   group   each a plain child in this process's group
 * Once all N are set up it writes one byte to READY_FD and pauses. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void default_sigterm(void) {
  signal(SIGTERM, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

int main(int argc, char** argv) {
  if (argc != 4)
    return 2;
  int n = atoi(argv[1]);
  int setsid_layout = strcmp(argv[2], "setsid") == 0;
  int ready_fd = atoi(argv[3]);
  default_sigterm();
  int ready[2];
  if (pipe(ready) < 0)
    return 2;
  for (int i = 1; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0)
      return 2;
    if (pid == 0) {
      close(ready[0]);
      close(ready_fd);
      if (setsid_layout) {
        setsid();
        pid_t daemon = fork();
        if (daemon != 0)
          _exit(daemon < 0 ? 2 : 0);
      }
      char byte = 1;
      if (write(ready[1], &byte, 1) != 1)
        _exit(2);
      close(ready[1]);
      for (;;)
        pause();
    }
    if (setsid_layout) {
      int status;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  close(ready[1]);
  char byte;
  for (int got = 1; got < n;) {
    ssize_t r = read(ready[0], &byte, 1);
    if (r == 1)
      ++got;
    else if (r == 0 || errno != EINTR)
      return 2;
  }
  close(ready[0]);
  byte = 1;
  if (write(ready_fd, &byte, 1) != 1)
    return 2;
  close(ready_fd);
  for (;;)
    pause();
}

/* Test helper, static: ends the way it is told.
 *
 *   exitwith N      exits with status N
 *   exitwith -s N   dies of signal N (default disposition, no core file) */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc == 2)
    _exit(atoi(argv[1]));
  if (argc == 3 && strcmp(argv[1], "-s") == 0) {
    int signo = atoi(argv[2]);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(signo, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), signo);
    _exit(250);
  }
  _exit(251);
}

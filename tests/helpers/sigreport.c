/* Test helper: reports the state trainit gave it, then (optionally) every
 * signal it receives.
 *
 *   sigreport           prints the report and exits 0
 *   sigreport wait      prints the report, "ready", then "signal N" for each
 *                       signal N it receives; exits 0 on SIGTERM
 *   sigreport family    as "wait", but first forks a grandchild in the same
 *                       process group; lines are prefixed "child " or
 *                       "grandchild ", each prints "<who> ready"; both exit 0
 *                       on SIGTERM
 *
 * The report, one item per line: "blocked HEX" and "ignored HEX" (bit N-1 set
 * for signal N, 1..64), "pid", "ppid", "pgid", "sid", "tpgid" (the foreground
 * process group of the terminal on stdin, -1 when it is none), and "fds" (the
 * open descriptors below 1024). Handlers block every signal while they run, so
 * pending signals are reported one by one in the kernel's order (lowest
 * number first). Each line is written with one write(2). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static const char* prefix = "";

static void say(const char* text) {
  size_t n = strlen(text);
  if (write(STDOUT_FILENO, text, n) != (ssize_t)n)
    _exit(3);
}

static void report(int signo) {
  char line[64];
  snprintf(line, sizeof(line), "%ssignal %d\n", prefix, signo);
  say(line);
  if (signo == SIGTERM)
    _exit(0);
}

static void print_state(void) {
  char fds[4096] = "";
  size_t used = 0;
  for (int fd = 0; fd < 1024; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0 && used + 8 < sizeof(fds))
      used += (size_t)sprintf(fds + used, " %d", fd);
  }
  sigset_t mask;
  sigprocmask(SIG_SETMASK, NULL, &mask);
  unsigned long long blocked = 0, ignored = 0;
  for (int s = 1; s <= 64; ++s) {
    if (sigismember(&mask, s) == 1)
      blocked |= 1ULL << (s - 1);
    struct sigaction sa;
    if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
      ignored |= 1ULL << (s - 1);
  }
  char text[4096 + 256];
  snprintf(text, sizeof(text), "blocked %016llx\nignored %016llx\npid %d\nppid %d\npgid %d\nsid %d\ntpgid %d\nfds%s\n",
           blocked, ignored, (int)getpid(), (int)getppid(), (int)getpgrp(), (int)getsid(0),
           (int)tcgetpgrp(STDIN_FILENO), fds);
  say(text);
}

static void catch_everything(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = report;
  sigfillset(&sa.sa_mask);
  for (int s = 1; s <= SIGRTMAX; ++s) {
    if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD)
      sigaction(s, &sa, NULL); /* glibc's own RT signals: EINVAL */
  }
}

static void unblock_all(void) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

int main(int argc, char** argv) {
  print_state();
  if (argc < 2)
    return 0;
  if (strcmp(argv[1], "wait") == 0) {
    catch_everything();
    unblock_all();
    say("ready\n");
  } else if (strcmp(argv[1], "family") == 0) {
    /* Signals stay blocked until both processes can report them. */
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    catch_everything();
    int sync[2];
    if (pipe(sync) < 0)
      return 2;
    pid_t pid = fork();
    if (pid < 0)
      return 2;
    if (pid == 0) {
      prefix = "grandchild ";
      close(sync[0]);
      unblock_all();
      say("grandchild ready\n");
      close(sync[1]);
    } else {
      prefix = "child ";
      close(sync[1]);
      char byte;
      while (read(sync[0], &byte, 1) > 0) {
      }
      unblock_all();
      say("child ready\n");
    }
  } else {
    fprintf(stderr, "sigreport: unknown mode '%s'\n", argv[1]);
    return 2;
  }
  for (;;)
    pause();
}

/* Test helper: a child that speaks the sd_notify protocol through the real
 * libsystemd (dynamically linked: Debian ships no static libsystemd).
 *
 *   sd_notifier     prints "notify_socket VALUE" (its NOTIFY_SOCKET, or
 *                   "(unset)"), sends "STATUS=warming up", prints "warming
 *                   RC"; at the first line on stdin sends "READY=1" and
 *                   "STATUS=serving" in one message and prints "notified RC";
 *                   exits 0 at the end of stdin
 *   sd_notifier from-child
 *                   first a forked child sends "READY=1" and "STATUS=from a
 *                   forked child" in one message, prints "child sent RC" and
 *                   exits; once it has, the above
 *   sd_notifier exit CODE
 *                   sends "STATUS=pid P" (P: its pid), prints "pid P sent
 *                   RC" and exits CODE (a run of a restarted program)
 *   sd_notifier flood N
 *                   sends "STATUS=step 1" … "STATUS=step N" as fast as it
 *                   can, then "STATUS=done", prints "flooded RC" (the last
 *                   send's) and exits 0 at the end of stdin
 *
 * RC is sd_notify()'s return value: > 0 sent, 0 no NOTIFY_SOCKET, < 0 -errno. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

static void say(const char* text) {
  size_t n = strlen(text);
  if (write(STDOUT_FILENO, text, n) != (ssize_t)n)
    _exit(3);
}

int main(int argc, char** argv) {
  char line[512];
  if (argc == 3 && strcmp(argv[1], "exit") == 0) {
    char status[64];
    snprintf(status, sizeof(status), "STATUS=pid %d", (int)getpid());
    snprintf(line, sizeof(line), "pid %d sent %d\n", (int)getpid(), sd_notify(0, status));
    say(line);
    return atoi(argv[2]);
  }
  if (argc == 3 && strcmp(argv[1], "flood") == 0) {
    const int n = atoi(argv[2]);
    for (int i = 1; i <= n; ++i) {
      char status[64];
      snprintf(status, sizeof(status), "STATUS=step %d", i);
      (void)sd_notify(0, status);
    }
    snprintf(line, sizeof(line), "flooded %d\n", sd_notify(0, "STATUS=done"));
    say(line);
    char buf[256];
    while (read(STDIN_FILENO, buf, sizeof(buf)) > 0) {
    }
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "from-child") == 0) {
    pid_t child = fork();
    if (child < 0)
      return 2;
    if (child == 0) {
      snprintf(line, sizeof(line), "child sent %d\n", sd_notify(0, "READY=1\nSTATUS=from a forked child"));
      say(line);
      _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return 2;
  } else if (argc != 1) {
    fprintf(stderr, "usage: sd_notifier [from-child | exit CODE | flood N]\n");
    return 2;
  }
  const char* socket = getenv("NOTIFY_SOCKET");
  snprintf(line, sizeof(line), "notify_socket %s\n", socket != NULL ? socket : "(unset)");
  say(line);
  snprintf(line, sizeof(line), "warming %d\n", sd_notify(0, "STATUS=warming up"));
  say(line);
  char buf[256];
  ssize_t n;
  int notified = 0;
  while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0) {
    if (!notified && memchr(buf, '\n', (size_t)n) != NULL) {
      notified = 1;
      snprintf(line, sizeof(line), "notified %d\n", sd_notify(0, "READY=1\nSTATUS=serving"));
      say(line);
    }
  }
  return 0;
}

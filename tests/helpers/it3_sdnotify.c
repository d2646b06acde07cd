/* Test helper: a child that speaks the sd_notify protocol through the real
 * libsystemd (dynamically linked: Debian ships no static libsystemd).
 *
 *   it3_sdnotify    prints "notify_socket VALUE" (its NOTIFY_SOCKET, or
 *                   "(unset)"), sends "STATUS=warming up", prints "warming
 *                   RC"; at the first line on stdin sends "READY=1" and
 *                   "STATUS=serving" in one message and prints "notified RC";
 *                   exits 0 at the end of stdin
 *
 * RC is sd_notify()'s return value: > 0 sent, 0 no NOTIFY_SOCKET, < 0 -errno. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

static void say(const char* text) {
  size_t n = strlen(text);
  if (write(STDOUT_FILENO, text, n) != (ssize_t)n)
    _exit(3);
}

int main(void) {
  char line[512];
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

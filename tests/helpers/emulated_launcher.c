/* Host program, built only for the aarch64 preset's tests: runs the aarch64
 * helper beside it under qemu-user. A copy of this launcher named NAME runs
 * NAME.aarch64 from its own directory:
 *
 *   NAME ARGS...   →   execve(EMULATOR, {EMULATOR, DIR/NAME.aarch64, ARGS...})
 *
 * trainit, itself emulated, starts a program with a plain execve, which runs
 * an aarch64 binary only where binfmt_misc hands it to qemu; CI containers
 * may not be allowed to register that. The launcher needs nothing of the
 * sort, and keeps what a process keeps across execve: pid, signal mask,
 * ignored signals, descriptors, and the environment as given. qemu-user
 * hands its program the environment in reverse order (it rebuilds it as a
 * list, newest entry first), so the launcher gives it reversed, and the
 * helper sees the order trainit gave. No shell: one would reorder and add
 * variables (PWD). */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef EMULATOR
#error "build with -DEMULATOR=\"/path/to/qemu-aarch64-static\""
#endif

extern char** environ;

int main(int argc, char** argv) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 16);
  if (n <= 0) {
    perror("emulated_launcher: /proc/self/exe");
    return 126;
  }
  self[n] = '\0';
  strcat(self, ".aarch64");

  size_t count = 0;
  while (environ[count] != NULL)
    ++count;
  char** env = calloc(count + 1, sizeof(char*));
  char** args = calloc((size_t)argc + 2, sizeof(char*));
  if (env == NULL || args == NULL)
    return 126;
  for (size_t i = 0; i < count; ++i)
    env[i] = environ[count - 1 - i];
  args[0] = (char*)EMULATOR;
  args[1] = self;
  for (int i = 1; i < argc; ++i)
    args[i + 1] = argv[i];
  execve(EMULATOR, args, env);
  perror("emulated_launcher: execve " EMULATOR);
  return 126;
}

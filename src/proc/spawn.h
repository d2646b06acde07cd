// Starting processes.
//
// spawn() forks and execs one program and reports the outcome synchronously:
// either the program is running (exec succeeded) or the error exec gave. It
// never waits for the child: the loop is the only reaper, so a child whose
// exec failed stays a zombie (exit status 127 or 126) until the loop reaps it.
#pragma once

#include <sys/types.h>

#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "proc/credentials.h"
#include "proc/signals.h"

namespace trainit {

enum class Grouping {
  kProcessGroup,  // setpgid(0, 0): the child leads a new process group
  kSession,       // setsid(): a new session and process group
  kInherit,       // stays in trainit's group
};

struct SpawnOptions {
  std::vector<std::string> argv;                  // argv[0] is looked up in PATH when it has no '/'
  const std::vector<std::string>* env = nullptr;  // nullptr: trainit's own environment
  std::string cwd;                                // empty: trainit's
  Grouping grouping = Grouping::kProcessGroup;
  // Make the child's new group the foreground group of the terminal on stdin
  // (docker run -it: Ctrl-C reaches the job). Ignored when stdin is no tty.
  bool foreground = false;
  const SignalState* signals = nullptr;  // restored before exec when set
  // Descriptors to install as the child's 0, 1, 2; -1 keeps trainit's.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Descriptors the child keeps across exec, at their own numbers (close-
  // on-exec is cleared in the child only): the collective arena and the
  // sockets to a rank's local peers.
  std::span<const int> inherit_fds;
  // Who the child runs as and its capabilities; nullptr: trainit's own.
  const Credentials* credentials = nullptr;
  // Socket activation handed on: a LISTEN_PID naming trainit becomes the
  // child's own pid, so that the child's sd_listen_fds() takes the
  // LISTEN_FDS descriptors it inherits (exec mode's PROGRAM).
  bool pass_socket_activation = false;
};

struct Spawned {
  pid_t pid = 0;
};

// The exit status a shell would give for an exec that failed with `errnum`:
// 127 when the program does not exist, 126 when it cannot be executed.
[[nodiscard]] int exec_failure_status(int errnum) noexcept;

// Error (with errnum set and the message naming the program) when fork or exec
// failed; the failed child, if any, is left for the reaper. Its exit_code is
// exec_failure_status() when exec failed, and exit_code::kOsError when the
// child could not be made or set up (vfork, chdir, stdio, signals).
Result<Spawned> spawn(const SpawnOptions& options);

}  // namespace trainit

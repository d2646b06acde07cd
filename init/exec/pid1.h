// What makes trainit a correct init, whatever its PID.
#pragma once

#include <sys/types.h>

#include "proc/signals.h"

namespace trainit {

class JobPrivileges;

struct Pid1 {
  bool is_pid1 = false;        // PID 1 of its namespace: a stop reaches everything in it
  SignalState parent_signals;  // what every child gets back before exec
  // Who PROGRAM, or every process of a job but sshd, runs as (--user, --caps,
  // --no-new-privs); never null in a run.
  const JobPrivileges* privileges = nullptr;
};

// Blocks every signal but the kernel's synchronous ones (they arrive through
// the loop's signalfd from now on), ignores SIGTTIN/SIGTTOU as tini does, and
// puts SIGCHLD back to its default (an ignored SIGCHLD reaps for us).
// Not PID 1, trainit becomes a child subreaper so orphans of its tree come to
// it. `parent_death_signal` (0: none) is -p. Returns 0 or -errno.
int setup_pid1(const SignalState& parent, int parent_death_signal, Pid1* out) noexcept;

// The fatal path, for when the loop itself broke after the first spawn: kill
// what is ours, reap it, exit 70. As PID 1 "ours" is the whole namespace (the
// kernel would kill it anyway when we exit); otherwise our descendants and
// `group`'s process group, never kill(-1) outside our own namespace.
[[noreturn]] void fatal_exit(const Pid1& pid1, pid_t group) noexcept;

// Takes variable `name` out of trainit's environment: its value's bytes in
// the block the kernel shows as /proc/PID/environ are zeroed in place (not
// just environ[], which unsetenv() edits), then it is unset. For
// TRAINIT_JOB_SECRET, once read: a rank of trainit's uid can read that file.
void erase_from_environment(const char* name) noexcept;

// What is left to do when PID 1 holds a secret in its memory: it stops being
// dumpable, so that a process of its uid without CAP_SYS_PTRACE can read
// neither its memory (/proc/PID/mem, ptrace) nor /proc/PID/environ.
void guard_secret_memory() noexcept;

}  // namespace trainit

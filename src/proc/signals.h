// Signal names, the kernel's synchronous signals, and the signal state that a
// child must get back before exec.
#pragma once

#include <signal.h>

#include <string>
#include <string_view>

namespace trainit {

// The signal mask and the dispositions trainit changes, as trainit's parent
// left them. Captured first thing in main(); restored in every child.
struct SignalState {
  sigset_t mask{};
  struct sigaction ttin {};
  struct sigaction ttou {};
  struct sigaction chld {};  // SIG_IGN here would make the kernel reap for us
};

// Reads the current state. Call before changing any mask or disposition.
[[nodiscard]] SignalState capture_signal_state() noexcept;
// In a child between fork and exec: puts back the parent's dispositions of the
// signals trainit changed and its mask. Async-signal-safe. Returns 0 or -errno.
int restore_signal_state(const SignalState& state) noexcept;

// Signals the kernel raises synchronously on a fault (SIGSEGV, SIGBUS, ...):
// never blocked, never forwarded, so a crash stays a crash.
[[nodiscard]] bool is_kernel_signal(int signo) noexcept;

// Every signal a supervisor can take and pass on: all of 1..SIGRTMAX but
// SIGKILL, SIGSTOP, SIGCHLD, the kernel's synchronous ones and the job-control
// signals SIGTTIN/SIGTTOU (ignored, as tini does, so that giving a child the
// terminal cannot stop trainit).
[[nodiscard]] sigset_t forwardable_signals() noexcept;

// "SIGTERM", "TERM", "term", "15", "SIGRTMIN+2" -> the number; 0 when unknown.
[[nodiscard]] int signal_from_name(std::string_view name) noexcept;
// 15 -> "SIGTERM", 36 -> "SIGRTMIN+2", from a static table: no allocation,
// no formatting (it sits on the stop path).
[[nodiscard]] std::string_view signal_name(int signo) noexcept;

}  // namespace trainit

// Whether the tests run under an emulator, how they skip what it cannot do,
// and how their bounds on trainit's timing widen there.
//
// The aarch64 preset cross-compiles trainit and its tests and runs them under
// qemu-user (cmake/aarch64-linux-gnu.cmake); the build defines
// TRAINIT_EMULATOR, the emulator's path, for the tests only, and only there.
// A test that meets something qemu-user does not do as a kernel does skips
// with TRAINIT_SKIP_UNDER_EMULATION and says what: on real hardware, aarch64
// or x86-64, it always runs.
#pragma once

#include <chrono>
#include <csignal>
#include <string>

namespace trainit::test {

#ifdef TRAINIT_EMULATOR
inline constexpr bool kEmulated = true;
inline const std::string kEmulator = TRAINIT_EMULATOR;
#else
inline constexpr bool kEmulated = false;
inline const std::string kEmulator;
#endif

// What qemu-user 7.2 (Debian 12's qemu-user-static) does not do as a kernel
// does, each the reason of the skips it causes.
namespace emulation {
// Its prctl() turns PR_SET_CHILD_SUBREAPER down (EINVAL): trainit runs there
// only as PID 1, and a test process cannot adopt trainit.
inline constexpr const char* kNoSubreaper =
    "prctl(PR_SET_CHILD_SUBREAPER) fails with EINVAL, so trainit cannot run other than as PID 1 and the test cannot "
    "adopt it";
// It runs vfork as fork: the child neither shares trainit's memory nor holds
// trainit until it execs, so what the child fails to do is seen only as its
// exit status (127, 126, 71), not reported by spawn.
inline constexpr const char* kVforkIsFork =
    "vfork runs as fork: the child's report of a failed exec or set-up never reaches trainit's memory, only its "
    "exit status does";
// It keeps SA_NOCLDWAIT to itself (the host's SIGCHLD is its own handler),
// and makes every child with fork() and SIGCHLD: the kernel never reaps an
// emulated trainit's orphans for it, so trainit reaps them as it must.
inline constexpr const char* kNoAutoreap =
    "SA_NOCLDWAIT does not reach the host kernel: orphans are reaped by the emulated trainit, not by the kernel";
// It has no host signal left to stand for real-time signals 63 and 64 of its
// program: kill() of those is EINVAL, and a mask or ignore of them is lost.
inline constexpr const char* kNoTopSignals = "real-time signals 63 and 64 cannot be sent (EINVAL)";
// It installs its own host handler for every signal its program's parent left
// ignored (the program still sees SIG_IGN): an emulated trainit's children
// start with those at SIG_DFL unless trainit itself set them.
inline constexpr const char* kIgnoredNotInherited =
    "an ignored signal inherited by an emulated process is not passed on to its children (qemu's own host handler "
    "takes its place)";
// It keeps SIGBUS to itself, and has no host signal for 63 and 64: blocks of
// those do not pass through an emulated execve.
inline constexpr const char* kBlockedNotInherited =
    "SIGBUS and real-time signals 63 and 64 blocked by the parent are not blocked in an emulated child (qemu keeps "
    "SIGBUS to itself and cannot represent 63 and 64)";
// It implements no ptrace: every request fails with ENOSYS, so an emulated
// program can trace nothing, its parent included.
inline constexpr const char* kNoPtrace = "ptrace is not emulated: every request fails with ENOSYS";
// /proc/PID/environ of an emulated program is qemu's own environment block
// (the host process's), which the program's writes to its emulated copy do
// not touch.
inline constexpr const char* kHostEnvironBlock =
    "/proc/PID/environ shows qemu's own environment block, not the emulated program's copy";
// It starts host threads of its own in every emulated process (one per
// emulated thread, and its RCU thread): at a pids limit its thread creation
// can fail first, and then it aborts the process (SIGABRT) where the
// emulated fork would have returned EAGAIN.
inline constexpr const char* kThreadsAtPidsLimit =
    "at a pids limit qemu's own thread creation can fail first, and it aborts the emulated process (SIGABRT) instead "
    "of the program's fork returning EAGAIN";
}  // namespace emulation

// How long trainit may take to react (to forward a signal, to end a stop
// once the grace is over, to exit once its child has): the bound a native
// run is held to, three times that under emulation. There qemu-user
// translates each code path on first use and a syscall costs it many times
// the kernel's, and beside the emulated storms on a 2-core CI machine such
// reactions have taken 1.2-1.3 times the native bounds. Only the slack is
// scaled: a grace, delay or backoff trainit must wait out is written as it
// is, and the scaled bound stays below what it tells apart.
template <class Rep, class Period>
constexpr std::chrono::duration<Rep, Period> reaction(std::chrono::duration<Rep, Period> native) {
  return kEmulated ? native * 3 : native;
}

// How late a program trainit starts may begin after the moment trainit
// chose (its backoff's end): 100 ms natively. Emulated, the program's own
// start is in it, qemu-user mapping and translating it before its first
// line runs: 100-300 ms beside the other tests, 420-960 ms with the
// machine's cores busy besides, so there the bound is 1.5 s and only a
// timer that waits far too long shows; trainit's own line ("restart N in
// X s") says which backoff it chose, everywhere.
inline constexpr std::chrono::milliseconds kStartLate{kEmulated ? 1500 : 100};

// The highest signal that can be sent: SIGRTMAX, less the two that
// qemu-user cannot carry (emulation::kNoTopSignals).
inline int highest_signal() {
  return kEmulated ? SIGRTMAX - 2 : SIGRTMAX;
}

}  // namespace trainit::test

// Skips the test (GTEST_SKIP) under emulation only, naming why.
#define TRAINIT_SKIP_UNDER_EMULATION(why)                                                  \
  do {                                                                                     \
    if (::trainit::test::kEmulated) {                                                      \
      GTEST_SKIP() << "under qemu-user (" << ::trainit::test::kEmulator << "): " << (why); \
    }                                                                                      \
  } while (0)

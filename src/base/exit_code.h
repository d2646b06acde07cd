// trainit's exit codes: one table for the whole program.
// docs/reference/exit-codes.md (and README.md's "Exit codes") is this table in
// words; tests/integration/exec_mode_exit_code_test.cpp and
// failure_exit_codes_test.cpp prove each code.
//
// The job's own code comes first: PROGRAM's (exec mode) or the first failing
// rank's (job modes), 128+N for death by signal N. trainit's own failures use
// sysexits.h codes, each for one kind of failure, and one of their own past
// sysexits' range (79).
#pragma once

#include <signal.h>

namespace trainit::exit_code {

inline constexpr int kUsage = 64;           // EX_USAGE: bad command line or variable; nothing was started
inline constexpr int kDataError = 65;       // EX_DATAERR: `trainit status`: the status file is not one trainit wrote
inline constexpr int kNoInput = 66;         // EX_NOINPUT: `trainit status`: no status file to read
inline constexpr int kUnavailable = 69;     // EX_UNAVAILABLE: a peer never resolved, or a host was lost
inline constexpr int kSoftware = 70;        // EX_SOFTWARE: the event loop broke after the first spawn
inline constexpr int kOsError = 71;         // EX_OSERR: could not set up or start a process (epoll, fork, pipe, chdir)
inline constexpr int kCantCreate = 73;      // EX_CANTCREAT: a directory or file of the job's plan
inline constexpr int kIoError = 74;         // EX_IOERR: `trainit plan` could not write the plan
inline constexpr int kTempFail = 75;        // EX_TEMPFAIL: timed out waiting for the rank table or the barrier
inline constexpr int kProtocol = 76;        // EX_PROTOCOL: a rank corrupted the collective arena PID 1 owns
inline constexpr int kNoPermission = 77;    // EX_NOPERM: trainit may not give --user or --caps; nothing was started
inline constexpr int kConfig = 78;          // EX_CONFIG: bad configuration or rank table
inline constexpr int kDeviceFailed = 79;    // trainit's own: a local device failed its preflight; no rank was started
inline constexpr int kCannotExecute = 126;  // PROGRAM exists but cannot be executed (as a shell says)
inline constexpr int kNotFound = 127;       // PROGRAM not found (as a shell says)
inline constexpr int kSignalBase = 128;     // 128+N: died of signal N

// A reaped child's status as an exit code: its own, or 128+N for signal N.
[[nodiscard]] inline int of(const siginfo_t& info) noexcept {
  return info.si_code == CLD_EXITED ? info.si_status : kSignalBase + info.si_status;
}

}  // namespace trainit::exit_code

// `trainit status [--json] [--status-file PATH]`: what the job's status file
// (status_file.h) says, for a person or a probe, from inside the container
// (`kubectl exec POD -- trainit status`).
//
// It prints the state and since when (UTC, and how long ago), why
// the state was entered, the job's cause, and one row per rank: its name,
// rank, pid, state and code; --json prints the file as it is. The exit
// status makes it a probe: 0 while the job runs (any state before exit),
// the job's own exit code once it ended; 66 when there is no status file
// to read (no job here, or not started yet), 65 when the file is not a
// trainit.status/v1 document, 64 for a bad command line.
//
// The file is the one the job writes: --status-file PATH, else
// TRAINIT_STATUS_FILE, else the default for this host (the same name the
// job computes from the same environment). It is read once, never waited
// on: at most kMaxStatusFile bytes of a regular file, opened without
// blocking on a FIFO; the job replaces it by rename, so it is never caught
// half-written. Every text from it is printed on one line of printable
// ASCII (control bytes escaped).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "os/fs.h"
#include "plan/command.h"

namespace trainit {

inline constexpr std::size_t kMaxStatusFile = std::size_t{8} << 20;

// A status file as read back.
struct StatusView {
  struct Rank {
    std::string name;
    std::optional<unsigned> rank;
    long long pid = 0;
    std::string state;
    std::optional<int> exit_code;
  };
  std::string state;
  double since = 0;
  std::string mode;
  std::string host;
  long long pid = 0;
  std::string reason;
  std::string cause;  // empty: none
  std::optional<int> exit_code;
  std::vector<Rank> ranks;
};

// `text` as a trainit.status/v1 document; the error (one line, naming
// `path` and what is wrong) when it is not one. A job in state "exit" must
// have its exit code.
[[nodiscard]] Result<StatusView> parse_status(std::string_view text, std::string_view path);

// What the status says for a person; `now`: the wall clock, seconds since
// the epoch. Times in UTC.
[[nodiscard]] std::string render_status(const StatusView& status, double now);

// "42 s", "3 min 12 s", "2 h 5 min", "3 d 4 h": how long, roughly.
[[nodiscard]] std::string duration_text(double seconds);

// The probe's exit status: 0 until the job ended, then its exit code.
[[nodiscard]] int status_exit_code(const StatusView& status);

// Pure but for the default path (the host name): argv[0] is "status",
// `envp` trainit's environment, `fs` what reads the file, `now` the wall
// clock. Returns what to print and the exit status.
[[nodiscard]] CommandOutput status_command(int argc, const char* const* argv, const char* const* envp,
                                           const FileSystem& fs, double now);

// status_command() on the real file system and clock, printed; returns the
// exit status.
int status_main(int argc, char** argv, char** envp);

}  // namespace trainit

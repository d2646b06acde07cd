// The status file: where a person or a probe reads what trainit is doing.
//
// Schema "trainit.status/v1", one JSON object, rewritten whole (temp file +
// rename, so a reader never sees half of it) on every transition and rank
// event:
//   {"schema": "trainit.status/v1", "state": "running", "since": 1763771234.5,
//    "mode": "ascend", "host": "ma-job-x-worker-0", "pid": 1,
//    "reason": "4 ranks started", "cause": null, "exit_code": null,
//    "ranks": [{"name": "proc-rank-0-device-0", "rank": 0, "pid": 12,
//               "state": "running" | "exited" | "failed" | "stopped",
//               "exit_code": null | 0..255}]}
// "since" is the wall-clock time (seconds since the epoch) the state began;
// "reason" is why the current state was entered; "cause" why the job ends,
// from the moment it is known to the end, as one line (cause_line(): where,
// what, the code and the state; null while nothing stops it). A rank is "exited"
// when it ended with 0 on its own, "failed" when it ended otherwise on its
// own, "stopped" when it ended after trainit began to stop the job; its
// exit_code is 128+N when it died of signal N.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/safe_fs.h"
#include "exec/termination_log.h"
#include "platform/environment.h"

namespace trainit {

enum class RankState { kRunning, kExited, kFailed, kStopped };

struct StatusRank {
  std::string name;
  std::optional<unsigned> rank;
  pid_t pid = 0;
  RankState state = RankState::kRunning;
  int code = -1;  // once it is not running
};

struct StatusFile {
  std::string path;
  std::string mode;
  std::string host;
  std::string state;
  std::string reason;
  // Why the job ends, with where it happened ("host 1 (NAME) rank 3: ...");
  // empty: nothing stops it yet. The code it gives the job and the state
  // this host was in when it learned it complete the line (cause_line()).
  std::string cause;
  int cause_code = 0;
  std::string cause_state;  // empty: the current state
  double since = 0;         // when the state began, seconds since the epoch
  std::optional<int> exit_code;
  std::vector<StatusRank> ranks;

  // Rewrites the file; the error names the path. One that cannot be (a
  // full disk) is removed rather than left stale, and written again in the
  // room it leaves: the error then says which.
  Result<void> write();
  // How the job ended, in one line, once it has: its cause_line(), or for a
  // job that ended well "host NAME: every rank exited 0; exit 0".
  [[nodiscard]] std::string end_line() const;
};

// The job's cause as the status file, the log and the termination message
// give it: "CAUSE; exit CODE in state STATE", where CAUSE names the host
// and the rank (the runner's) and says what happened.
[[nodiscard]] std::string cause_line(std::string_view cause, int code, std::string_view state);

// This host's name as the job names it: MA_CURRENT_INSTANCE_NAME, else the
// host name; "localhost" when neither is known.
[[nodiscard]] std::string this_host_name(const Environment& env);

// `text` cut to at most `max_bytes`, never inside a UTF-8 character; a cut
// text ends with "..." (within the bound).
[[nodiscard]] std::string cut_utf8(std::string_view text, std::size_t max_bytes);

// /tmp/trainit-status-<host>.json: writable by any user, distinct per host
// (MA_CURRENT_INSTANCE_NAME, else the host name; unsafe characters become '_').
[[nodiscard]] std::string default_status_path(const Environment& env);

// Writes `content` to `path` through a temporary file in the same directory
// and rename(2) (base/safe_fs.h): readers see the old file or the new one,
// never a mix; with Give::kJob the file is the job's user's. The error
// names the path.
Result<void> write_file_atomically(const std::string& path, const std::string& content, unsigned mode,
                                   safe_fs::Give give = safe_fs::Give::kTrainit);

}  // namespace trainit

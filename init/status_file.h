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
// from the moment it is known to the end (null while nothing stops it:
// "rank 1 (pid 12) exited with 7", "got SIGTERM", ...). A rank is "exited"
// when it ended with 0 on its own, "failed" when it ended otherwise on its
// own, "stopped" when it ended after trainit began to stop the job; its
// exit_code is 128+N when it died of signal N.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
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
  std::string cause;  // empty: none yet
  double since = 0;   // when the state began, seconds since the epoch
  std::optional<int> exit_code;
  std::vector<StatusRank> ranks;

  // Rewrites the file; the error names the path.
  Result<void> write();
};

// /tmp/trainit-status-<host>.json: writable by any user, distinct per host
// (MA_CURRENT_INSTANCE_NAME, else the host name; unsafe characters become '_').
[[nodiscard]] std::string default_status_path(const Environment& env);

// Writes `content` to `path` through a temporary file in the same directory
// and rename(2): readers see the old file or the new one, never a mix.
Result<void> write_file_atomically(const std::string& path, const std::string& content, unsigned mode);

}  // namespace trainit

// The JSON form of a Plan, schema "trainit.plan/v1" — what `trainit plan`
// prints. Stable: keys in a fixed order, two-space indent, one trailing
// newline, so plans can be diffed and compared byte for byte.
//
//   {
//     "schema": "trainit.plan/v1",
//     "mode": "ascend" | "exec" | "mpi",
//     "signals": "stop" | "forward",
//     "states": ["wait_rank_table", "spawn", ...],
//     "rank_table": {                      // ascend only
//       "source": path, "ready": bool,
//       "pending": reason,                 // when !ready; nothing below then
//       "format": "template1" | "template2", "version": "1.0" (template 1),
//       "rank_size": N, "server_id": ..., "pod_name": ... (template 2),
//       "rank_table_file": path the ranks get
//     },
//     "hosts": {                           // several hosts, or mode mpi
//       "hosts": N, "index": i, "control_port": port,
//       "peers": [host 0's DNS name, ...]
//     },
//     "private_dir": path,                 // trainit's own per-job dir (mpi, torchrun)
//     "sshd": {                            // mpi, several hosts
//       "path", "port", "config_path", "config": the sshd_config text,
//       "host_keys": [{"path", "generate": ssh-keygen argv}],
//       "authorized_keys": path, "user": AllowUsers name | null,
//       "process": a process, as in "processes"
//     },
//     "mpi": {                             // mpi
//       "host0": bool, "slots": N,
//       "hostfile_path", "tune_path", "ssh_config_path" | null,   // host 0 only
//       "peers_by": "name" | "address"     // several hosts: what the hostfile and ssh config hold
//     },
//     "dirs": [path, ...],                 // mkdir -p before the first spawn
//     "files": [{"path", "mode": "0644", "content"}],
//     "processes": [{
//       "name", "rank" (job modes), "argv": [...],
//       "cwd": path | null (trainit's own),
//       "env": {"NAME": "value", ...},     // the whole environment, in order
//       "group": "process_group" | "session",
//       "output": {"mode": "inherit"} |
//                 {"mode": "log_and_console", "log_file", "console_prefix"}
//     }],
//     "privileges": {                      // trainit plan: what the job's processes run as
//       "user": "ma-user (uid 1000, gid 100, groups 100)" | null (trainit's own),
//       "home": path | null, "caps": "keep" | "drop" | names,
//       "sets": {"bounding", "permitted", "effective", "inheritable", "ambient"}:
//               each "all", "none" or names, as the kernel leaves them after exec,
//       "no_new_privs": bool
//     },
//     "settings": {                        // every option, in --help's order
//       "grace": {"value": "8" | null,     // as text; null: none (no limit, the default path)
//                 "source": "default" | "command line" | "variable TRAINIT_GRACE"}
//     }
//   }
//
// Values of environment variables whose names look secret (see
// is_secret_name) are printed as "<redacted>". Bytes that are not valid
// UTF-8 print as U+FFFD. A new key may be added within v1; renaming or
// removing one, or changing a meaning, makes v2.
#pragma once

#include <string>
#include <string_view>

#include "base/redact.h"  // is_secret_name
#include "plan/plan.h"

namespace trainit {

inline constexpr std::string_view kPlanSchema = "trainit.plan/v1";
inline constexpr std::string_view kRedacted = "<redacted>";

[[nodiscard]] std::string plan_to_json(const Plan& plan);

}  // namespace trainit

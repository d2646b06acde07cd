// The command line: tini's flags and variables, plus trainit's own.
//
// parse_cli() is pure: argv and a getenv-like lookup in, Options or a one-line
// error out. main() turns an error into usage on stderr and exit 64.
#pragma once

#include <bitset>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/time.h"
#include "plan/plan.h"

namespace trainit {

enum class Action { kRun, kHelp, kVersion, kLicense };
enum class Restart { kNo, kOnFailure, kAlways };
enum class Ready { kSpawn, kNotify };

struct Options {
  Action action = Action::kRun;
  int verbosity = 1;                         // -v, TINI_VERBOSITY
  int parent_death_signal = 0;               // -p SIGNAL
  bool kill_process_group = false;           // -g, TINI_KILL_PROCESS_GROUP
  bool warn_on_reap = false;                 // -w
  std::bitset<256> exit_zero;                // -e CODE: these child exit codes become 0
  Duration grace = std::chrono::seconds(8);  // --grace SECONDS
  Duration stop_delay{0};                    // --stop-delay SECONDS
  bool drain = true;                         // --no-drain: exit at once when the child does (tini)
  bool forward_only = false;                 // --forward-only: SIGTERM/SIGINT only forwarded (tini)
  Restart restart = Restart::kNo;            // --restart on-failure|always|no
  int max_restarts = -1;                     // --max-restarts N; -1: no limit
  Ready ready = Ready::kSpawn;               // --ready spawn|notify: when to tell our supervisor READY=1
  // Job modes.
  RequestedMode mode = RequestedMode::kAuto;                 // --mode auto|exec|ascend
  unsigned max_local_devices = kDefaultLocalDevices;         // --max-local-devices N
  Duration rank_table_timeout = std::chrono::seconds(1800);  // --rank-table-timeout SECONDS
  std::string status_file;                                   // --status-file PATH; empty: the default
  // Several hosts (issue 10).
  Duration peer_timeout = std::chrono::seconds(600);      // --peer-timeout SECONDS: names resolved, sshd up
  Duration barrier_timeout = std::chrono::seconds(1800);  // --barrier-timeout SECONDS: every host checked in
  Duration peer_loss = std::chrono::seconds(10);          // --peer-loss SECONDS: a silent host is lost
  uint16_t control_port = kDefaultControlPort;            // --control-port PORT
  std::string job_secret_file;                            // --job-secret-file PATH (else TRAINIT_JOB_SECRET)
  std::string ssh_authorized_keys;                        // --ssh-authorized-keys PATH (mpi)
  std::string ssh_identity;                               // --ssh-identity PATH (mpi)
  std::string private_dir;                                // --private-dir PATH (mpi); empty: /tmp/trainit-<job>
  std::vector<std::string> command;                       // PROGRAM ARGS...
};

using GetEnv = std::function<const char*(const char* name)>;

Result<Options> parse_cli(int argc, const char* const* argv, const GetEnv& getenv);

// The usage text (ends with a newline).
[[nodiscard]] std::string_view usage_text();
[[nodiscard]] std::string_view license_text();
[[nodiscard]] std::string_view version_text();

}  // namespace trainit

// A Plan: everything trainit will do, decided before it does any of it.
//
// make_plan() is a pure function of its PlanInput (options, the command,
// trainit's environment, and what it can read through a FileSystem): it
// starts, writes and changes nothing, so `trainit plan` can print exactly
// what a real start would do, and tests can check planners on tables held in
// memory. The run half (init/) owns executing a Plan; nothing here knows of
// processes that exist.
//
// Errors are one line with the variable, file, key and value at fault; the
// command-line front end prints them and exits 78 (EX_CONFIG).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "platform/environment.h"
#include "platform/fs.h"
#include "platform/rank_table.h"

namespace trainit {

// The states of DESIGN.md's machine. A plan lists, in order, the ones its
// mode goes through; init/machine owns what entering each one does.
enum class State {
  kWaitRankTable,
  kResolvePeers,
  kStartSshd,
  kWaitPeers,
  kHostBarrier,
  kSpawn,
  kRunning,
  kStopping,
  kReaping,
  kExit,
};
[[nodiscard]] std::string_view state_name(State state) noexcept;  // "wait_rank_table", ...

enum class Mode { kExec, kAscend };
[[nodiscard]] std::string_view mode_name(Mode mode) noexcept;  // "exec", "ascend"

// --mode: auto picks ascend when a rank-table variable is set, exec otherwise.
enum class RequestedMode { kAuto, kExec, kAscend };

// What SIGTERM/SIGINT (and the other catchable signals) to trainit mean.
enum class SignalPolicy {
  kForward,  // exec: pass them on to the child's process group, as tini does
  kStop,     // job modes: SIGTERM/SIGINT start `stopping`
};

enum class GroupPolicy {
  kProcessGroup,  // its own process group (exec: signals go to the group)
  kSession,       // its own session and process group (ranks)
};

enum class OutputPolicy {
  kInherit,        // trainit's own stdout/stderr
  kLogAndConsole,  // stdout+stderr through a pipe into log_file and, line-prefixed, the console
};

struct ProcessSpec {
  std::string name;               // for logs, e.g. "proc-rank-3-device-1"
  std::optional<unsigned> rank;   // its global rank (job modes)
  std::vector<std::string> argv;  // argv[0] looked up on PATH at spawn
  std::vector<EnvVar> env;        // the whole environment, in order
  std::string cwd;                // empty: trainit's own
  GroupPolicy group = GroupPolicy::kProcessGroup;
  OutputPolicy output = OutputPolicy::kInherit;
  std::string log_file;        // kLogAndConsole: appended to, created 0644
  std::string console_prefix;  // kLogAndConsole: before each console line
};

// A file to write (whole, replacing what is there) before the first spawn.
struct FileSpec {
  std::string path;
  std::string content;
  unsigned mode = 0644;
};

// The rank table an Ascend plan is made from.
struct RankTablePlan {
  std::string source;   // the file read (and, while not ready, waited on)
  bool ready = false;   // the table was complete and valid when planned
  std::string pending;  // !ready: why (missing, empty, "status" not "completed")
  RankTableFormat format = RankTableFormat::kTemplate1;
  std::string version;  // template 1's "version"
  unsigned rank_size = 0;
  std::string server_id;        // this host's server
  std::string pod_name;         // this host's pod (template 2)
  std::string rank_table_file;  // what the ranks' RANK_TABLE_FILE names
};

// One of trainit's settings (an option, from the command line or its
// variable), as `trainit plan` shows it. init/cli.cpp makes them; a plan
// only carries them.
struct Setting {
  std::string name;                  // the option's long name: "grace"
  std::optional<std::string> value;  // as text ("0.3", "on-failure"); nullopt: none (no limit, the default path)
  std::string source;                // "default", "command line" or "variable TRAINIT_GRACE"
};

struct Plan {
  Mode mode = Mode::kExec;
  std::vector<State> states;
  SignalPolicy signals = SignalPolicy::kForward;
  std::optional<RankTablePlan> rank_table;  // ascend
  std::vector<std::string> dirs;            // created (mkdir -p, 0755) before the first spawn, in order
  std::vector<FileSpec> files;              // written after dirs, before the first spawn
  std::vector<ProcessSpec> processes;       // in spawn order
  std::vector<Setting> settings;            // PlanInput's, for `trainit plan` to show
};

// --max-local-devices: how many devices one host may have in a rank table
// (device_id < N). The run and `trainit plan` read it alike (init/cli.cpp).
inline constexpr unsigned kDefaultLocalDevices = 16;
inline constexpr unsigned kMinLocalDevices = 1;
inline constexpr unsigned kMaxLocalDevices = 4096;

struct PlanOptions {
  RequestedMode mode = RequestedMode::kAuto;
  unsigned max_local_devices = kDefaultLocalDevices;  // rank-table device_id limit per host
};

struct PlanInput {
  PlanOptions options;
  std::vector<std::string> argv;   // the command (after `--`), not empty
  Environment env;                 // trainit's own environment
  const FileSystem* fs = nullptr;  // what planners read through; never null
  std::vector<Setting> settings;   // carried into the plan as they are
};

// Picks the mode: an explicit --mode wins; auto refuses when MA_RUN_METHOD
// names a launch trainit does not run yet (never falling back to running the
// command once), then picks ascend when a rank-table variable is set.
[[nodiscard]] Result<Mode> resolve_mode(RequestedMode requested, const Environment& env);

// The plan for `input`. An Ascend plan whose rank table is not there yet or
// not "completed" is returned with rank_table->ready == false and no
// processes: the machine's wait_rank_table state calls make_plan() again
// whenever the file changes, until it is ready or fails. An error whose
// errnum is EBADMSG says that the rank table's text, as read, is not one
// well-formed JSON document (see parse_json), which is also how a table
// caught mid-write reads: the run waits for the next version of the file,
// `trainit plan` refuses it. The table is read once per call.
[[nodiscard]] Result<Plan> make_plan(const PlanInput& input);

// The environment every planned process starts from: trainit's own, minus
// its supervisor's variables and its own (base/env.h, the filter exec mode
// uses too): a child must not talk to trainit's own supervisor in its name,
// nor be configured as if it were trainit.
[[nodiscard]] std::vector<EnvVar> child_base_env(const Environment& env);

// Sets `name` in `env`: replaced in place when present, appended otherwise.
void set_env(std::vector<EnvVar>& env, std::string_view name, std::string value);

}  // namespace trainit

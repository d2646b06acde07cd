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
#include "os/fs.h"
#include "platform/environment.h"
#include "platform/rank_table.h"

namespace trainit {

// The states of docs/architecture.md's machine. A plan lists, in order, the
// ones its mode goes through; init/machine owns what entering each one does.
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

// One planner each (docs/architecture.md, "Modes and options"):
//   exec          the command, once (tini's job)
//   ascend        one process per device of the rank table
//   mpi           sshd on every host, mpirun on host 0
//   torchrun      torchrun's per-worker environment, without its agent
//   torchrun-exec the platform's torchrun command line, supervised
//   msrun         MindSpore's scheduler and workers, without msrun
//   msrun-exec    the platform's msrun command line, supervised
//   pytorch       the command once per host, with --init_method (--rank, --world_size)
//   tensorflow    the command once per host, with --task_index --ps_hosts --worker_hosts --job_name
enum class Mode { kExec, kAscend, kMpi, kTorchrun, kTorchrunExec, kMsrun, kMsrunExec, kPytorch, kTensorflow };
[[nodiscard]] std::string_view mode_name(Mode mode) noexcept;  // "exec", "ascend", "torchrun-exec", ...
[[nodiscard]] std::optional<Mode> mode_from_name(std::string_view name) noexcept;
// Every mode's name, in the order above, joined by ", " (for messages and --help).
[[nodiscard]] std::string mode_names();

// --mode: nullopt is auto, which picks from the environment (resolve_mode).
using RequestedMode = std::optional<Mode>;
inline constexpr RequestedMode kAutoMode = std::nullopt;

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

// The port host 0's trainit listens on for the other hosts' (barrier, stop,
// release, heartbeats). Not 18888 (torchrun's master), 29500 (PyTorch's
// default master port), nor 36666 (the MPI launch's sshd).
inline constexpr std::uint16_t kDefaultControlPort = 36660;

// A job of several hosts (containers): who they are and how they meet.
struct HostsPlan {
  unsigned hosts = 1;
  unsigned index = 0;  // this host's
  // Host i's DNS name (platform/geometry.h), i = 0..hosts-1; or, where the
  // platform names only host 0 (Kubeflow), just host 0's: host 0's control
  // channel then admits any address, and only a job secret tells a peer
  // from a stranger.
  std::vector<std::string> peers;
  std::uint16_t control_port = kDefaultControlPort;
};

// The per-job sshd every host of a multi-host MPI job runs (start_sshd), so
// that host 0's mpirun can start the ranks of the others. Key-only: no
// password, no keyboard-interactive, no PAM; only trainit's own user may log
// in. The runner, in start_sshd: creates Plan::private_dir and Plan::dirs
// (the log dir; as root also sshd's /run/sshd), writes `config` to
// `config_path` (0600), generates each of `host_keys` that is missing
// (host_key_generation_argv in plan/mpi.h), then spawns `process`; sshd is
// up when `port` accepts connections.
struct SshdPlan {
  std::string sshd_path;               // /usr/sbin/sshd (sshd re-executes itself: an absolute path)
  std::string config_path;             // <private_dir>/sshd_config
  std::string config;                  // the sshd_config text
  std::uint16_t port = 0;              // MY_SSHD_PORT, default 36666
  std::string host_key_dir;            // = Plan::private_dir
  std::vector<std::string> host_keys;  // private host keys to generate when missing
  std::string authorized_keys;         // the keys file sshd reads (AuthorizedKeysFile)
  std::string user;                    // AllowUsers (empty: not restricted by name; see plan/mpi.h)
  // sshd itself: argv {sshd_path, "-D", "-e", "-f", config_path} (in the
  // foreground, logging to stderr), its own session, output through the log
  // relay like a rank's.
  ProcessSpec process;
};

// What host 0 hands mpirun, and the part every host plays in an MPI job.
// The hostfile, the tune file and (several hosts) the ssh client config are
// Plan::files; until the plan is made with PlanInput::peer_addresses, the
// hostfile and ssh config name the peers by DNS name.
struct MpiPlan {
  std::string hostfile_path;    // "<host> slots=<slots>" per host (render_hostfile)
  std::string tune_path;        // mpirun -tune: "-x NAME" per forwarded variable (render_tune_file)
  std::string ssh_config_path;  // ssh -F for mpirun's ssh; empty for a single host (no ssh)
  unsigned slots = 1;           // processes per host: MY_MPI_SLOTS, else MA_NUM_GPUS, else 1
  bool host0 = false;           // this host runs mpirun; the others only serve sshd until released
  bool addresses = false;       // the hostfile and ssh config name peers by address, not DNS name
};

// A framework mode's launch (torchrun, msrun, pytorch, tensorflow, and the
// -exec forms): where its geometry came from and what the processes meet by.
struct LaunchPlan {
  std::string source;                      // the platform whose variables won (platform/cluster.h)
  std::vector<std::string> disagreements;  // values of the other platforms that differ
  unsigned hosts = 1;
  unsigned index = 0;
  unsigned nproc = 1;       // processes per host (workers; msrun's scheduler not counted)
  std::string master_addr;  // host 0 as the processes reach it
  std::uint16_t master_port = 0;
  std::optional<unsigned> rendezvous_timeout;  // seconds: the host barrier's deadline, when the mode sets one
  std::vector<std::string> notes;              // what trainit does differently from the tool it replaces
};

// One of trainit's settings (an option, from the command line or its
// variable), as `trainit plan` shows it. init/exec/cli.cpp makes them; a plan
// only carries them.
struct Setting {
  std::string name;                  // the option's long name: "grace"
  std::optional<std::string> value;  // as text ("0.3", "on-failure"); nullopt: none (no limit, the default path)
  std::string source;                // "default", "command line" or "variable TRAINIT_GRACE"
};

// Who the job's processes (PROGRAM in exec mode; in a job, every process but
// sshd) run as, and what the kernel leaves them of capabilities: settled by
// the caller, which reads /etc/passwd and its own sets (init/exec/privileges.h),
// and carried into the plan as it is, for `trainit plan` to show.
struct PrivilegesPlan {
  std::string user;  // "ma-user (uid 1000, gid 100, groups 100)"; empty: trainit's own
  std::string home;  // the HOME they get; empty: trainit's own environment's
  std::string caps;  // --caps: keep, drop or the list
  // Each set after exec: "all", "none" or names ("CAP_IPC_LOCK,CAP_SYS_PTRACE").
  std::string bounding, permitted, effective, inheritable, ambient;
  bool no_new_privs = false;
};

struct Plan {
  Mode mode = Mode::kExec;
  std::vector<State> states;
  SignalPolicy signals = SignalPolicy::kForward;
  std::optional<RankTablePlan> rank_table;  // ascend
  std::optional<HostsPlan> hosts;           // several hosts (ascend, mpi), or mode mpi
  // trainit's own directory for this job (mpi: sshd_config, host keys, ssh
  // config, hostfile, tune file; torchrun: the ranks' error files); empty: none. Created mode 0700 before the
  // first state that writes into it; it must then be a directory of trainit's
  // own user, not a symlink, and not group/world-writable (sshd's rules).
  std::string private_dir;
  std::optional<SshdPlan> sshd;      // mpi, several hosts
  std::optional<MpiPlan> mpi;        // mpi
  std::optional<LaunchPlan> launch;  // the framework modes
  // Once resolve_peers has found the hosts, the run makes the plan again with
  // PlanInput::peer_addresses (mpi: hostfile and ssh config; msrun: MindSpore
  // reaches its scheduler by address).
  bool replan_with_addresses = false;
  // After a failure, the job is stopped and started again, at most this many
  // times (kUnlimitedRestarts: no limit); nullopt: the first failure ends
  // it. Several hosts restart together (the control channel's generations).
  std::optional<unsigned> restarts;
  std::vector<std::string> dirs;             // created (mkdir -p, 0755) before the first spawn, in order
  std::vector<FileSpec> files;               // written after dirs, before the first spawn
  std::vector<ProcessSpec> processes;        // in spawn order
  std::optional<PrivilegesPlan> privileges;  // PlanInput's, for `trainit plan` to show
  std::vector<Setting> settings;             // PlanInput's, for `trainit plan` to show
};

// --max-local-devices: how many devices one host may have in a rank table
// (device_id < N). The run and `trainit plan` read it alike (init/exec/cli.cpp).
inline constexpr unsigned kDefaultLocalDevices = 16;
inline constexpr unsigned kMinLocalDevices = 1;
inline constexpr unsigned kMaxLocalDevices = 4096;

// --restart: what a failure of the command (exec mode) or of the job (job
// modes) leads to. Job modes restart on-failure only: `always` stays exec
// mode's (main() refuses it for the others).
enum class Restart { kNo, kOnFailure, kAlways };

// Plan::restarts for "no limit".
inline constexpr unsigned kUnlimitedRestarts = 2147483647;

// The options a plan is made from. They are the run's own: init/exec/cli.h's
// Options derives from PlanOptions, so its parser fills these fields in
// place, under the names the options have there, and the run and `trainit
// plan` hand the planner the very values they parsed.
struct PlanOptions {
  RequestedMode mode = kAutoMode;                     // --mode
  unsigned max_local_devices = kDefaultLocalDevices;  // rank-table device_id limit per host
  std::uint16_t control_port = kDefaultControlPort;   // host 0's control channel (see HostsPlan)
  // The keys sshd accepts (mpi). Empty: $HOME/.ssh/authorized_keys, HOME
  // from the environment (the home of the user trainit runs as).
  std::string ssh_authorized_keys;
  // The private key mpirun's ssh offers (mpi). Empty: ssh's own defaults
  // (~/.ssh/id_*).
  std::string ssh_identity;
  // trainit's private per-job directory (Plan::private_dir). Empty:
  // /tmp/trainit-<MA_VJ_NAME>.
  std::string private_dir;
  // Who trainit runs as; the caller knows (geteuid, or --as-user for a
  // plan), the planner stays pure. is_root: mpirun gets --allow-run-as-root
  // and sshd permits root's key login. user: the one user sshd lets in
  // (AllowUsers); empty: "root" when is_root, else no AllowUsers line (a
  // non-root sshd cannot switch users: only its own can log in anyway).
  bool is_root = false;
  std::string user;
  // The framework modes: --nproc-per-node (else the platform's count) and
  // --master-port (else the mode's default).
  std::optional<unsigned> nproc_per_node;
  std::optional<std::uint16_t> master_port;
  // --restart and --max-restarts (-1: no limit). job_restarts() says what a
  // job mode makes of them.
  Restart restart = Restart::kNo;
  int max_restarts = -1;

  // Plan::restarts as the options ask: with --restart on-failure, the job is
  // restarted after a failure at most max_restarts times (kUnlimitedRestarts
  // without --max-restarts); nullopt otherwise.
  [[nodiscard]] std::optional<unsigned> job_restarts() const noexcept {
    if (restart != Restart::kOnFailure) {
      return std::nullopt;
    }
    return max_restarts < 0 ? kUnlimitedRestarts : static_cast<unsigned>(max_restarts);
  }

  // Field by field: which options change what the planner reads.
  bool operator==(const PlanOptions&) const = default;
};

struct PlanInput {
  PlanOptions options;
  std::vector<std::string> argv;   // the command (after `--`), not empty
  Environment env;                 // trainit's own environment
  const FileSystem* fs = nullptr;  // what planners read through; never null
  // After resolve_peers: host i's address (IPv4/IPv6 literal), one per host.
  // Empty before. A plan made again with them writes the addresses into the
  // MPI hostfile and ssh config (the reference's hostfile holds addresses).
  std::vector<std::string> peer_addresses;
  std::optional<PrivilegesPlan> privileges;  // carried into the plan as they are
  std::vector<Setting> settings;             // carried into the plan as they are
};

// Picks the mode: an explicit --mode wins; auto picks torchrun or msrun for
// MA_RUN_METHOD=torchrun|msrun (an unknown method is an error naming it),
// then ascend when a rank-table variable is set, else exec.
[[nodiscard]] Result<Mode> resolve_mode(RequestedMode requested, const Environment& env);

// The plan for `input`. An Ascend plan whose rank table is not there yet or
// not "completed" is returned with rank_table->ready == false and no
// processes: the machine's wait_rank_table state calls make_plan() again
// whenever the file changes, until it is ready or fails. An error whose
// errnum is EBADMSG says that the rank table's text, as read, is not one
// well-formed JSON document (see parse_json), which is also how a table
// caught mid-write reads: the run waits for the next version of the file,
// `trainit plan` refuses it. The table is read once per call. An MPI plan of
// several hosts names its peers by DNS name until it is made again with
// PlanInput::peer_addresses, which the run does after resolve_peers (the
// hostfile and ssh config then hold the addresses; nothing else changes).
[[nodiscard]] Result<Plan> make_plan(const PlanInput& input);

// Whether a job of `mode` waits for the rank table before anything else:
// the Ascend launch, and msrun told to network from it (MS_RANKTABLE_ENABLE).
[[nodiscard]] bool waits_for_rank_table(Mode mode, const Environment& env);

// The environment every planned process starts from: trainit's own, minus
// its supervisor's variables and its own (base/env.h, the filter exec mode
// uses too): a child must not talk to trainit's own supervisor in its name,
// nor be configured as if it were trainit.
[[nodiscard]] std::vector<EnvVar> child_base_env(const Environment& env);

// Where a job mode's logs go (docs/contract.md §3): <MA_MOUNT_PATH>/log when
// that is a directory, else /tmp/log.
[[nodiscard]] std::string job_log_dir(const std::optional<std::string>& mount_path, const FileSystem& fs);

// Sets `name` in `env`: replaced in place when present, appended otherwise.
void set_env(std::vector<EnvVar>& env, std::string_view name, std::string value);

}  // namespace trainit

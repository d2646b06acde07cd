// The platform's environment contract (docs/contract.md §1) as a typed view.
//
// An Environment holds trainit's own environment in its given order (what the
// planners pass on to the processes they plan) and answers the platform's
// questions about it. Every typed accessor validates only the variables it
// reads, applies the documented fallbacks and defaults, and returns an error
// naming the variable and its value when a value does not parse: a planner
// asks only what its mode needs, so an unused odd variable never stops a job.
//
// A variable set to the empty string counts as unset everywhere (the platform
// and shell scripts use both forms for "not given").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "os/fs.h"

namespace trainit {

// Hosts trainit plans a job for at most (MA_NUM_HOSTS): a peer list, a
// hostfile and an ssh client config entry per host stay a few MB.
inline constexpr unsigned kMaxHosts = 65536;

// The sshd port of the MPI launch when MY_SSHD_PORT is unset (the platform's).
inline constexpr std::uint16_t kDefaultSshdPort = 36666;
// The interfaces NCCL may use when MY_MPI_BTL_TCP_IF is unset (the platform's).
inline constexpr std::string_view kDefaultMpiInterfaces = "eth0,bond0";

struct EnvVar {
  std::string name;
  std::string value;

  friend bool operator==(const EnvVar&, const EnvVar&) = default;
};

// How the platform asks the Ascend engine to start the boot file
// (MA_RUN_METHOD).
enum class RunMethod { kRankTable, kTorchrun, kMsrun };

// Where the rank table is, and which variable said so ("" for the default).
struct RankTableLocation {
  std::string path;      // absolute, normalized; the file itself
  std::string variable;  // "RANK_TABLE_FILE_V_1_0", "RANK_TABLE_FILE" or ""
};

class Environment {
 public:
  Environment() = default;
  // Entries without '=' or with an empty name are dropped; when a name occurs
  // twice the first wins, as getenv(3) sees it.
  explicit Environment(std::vector<EnvVar> vars);
  // From "NAME=value" strings, e.g. main's envp (null-terminated; may be null).
  static Environment from_envp(const char* const* envp);
  static Environment from_strings(std::span<const std::string> entries);

  // Every variable, in the order given.
  [[nodiscard]] const std::vector<EnvVar>& vars() const noexcept { return vars_; }
  // The value when set and not empty.
  [[nodiscard]] std::optional<std::string_view> get(std::string_view name) const;

  // --- docs/contract.md §1, each validated when asked --------------------
  [[nodiscard]] Result<std::optional<unsigned>> num_hosts() const;  // MA_NUM_HOSTS, 1..kMaxHosts
  [[nodiscard]] Result<std::optional<unsigned>> num_gpus() const;   // MA_NUM_GPUS, 0..1024
  // This host's index: MA_TASK_INDEX, else VC_TASK_INDEX, else VK_TASK_INDEX.
  [[nodiscard]] Result<std::optional<unsigned>> task_index() const;
  // MA_VJ_NAME, required, a safe name (see is_safe_name).
  [[nodiscard]] Result<std::string> vj_name() const;
  // JOB_ID for Ascend ranks: MA_VJ_NAME with its first "ma-job" replaced by
  // "modelarts-job". A safe name, so usable as a path component.
  [[nodiscard]] Result<std::string> job_id() const;
  [[nodiscard]] std::optional<std::string_view> task_name() const;              // MA_TASK_NAME, as set
  [[nodiscard]] std::optional<std::string_view> current_instance_name() const;  // MA_CURRENT_INSTANCE_NAME
  [[nodiscard]] std::optional<std::string_view> current_host_ip() const;        // MA_CURRENT_HOST_IP
  // MA_MOUNT_PATH: absolute; returned in normal form (see normalize_path).
  [[nodiscard]] Result<std::optional<std::string>> mount_path() const;
  // RANK_TABLE_FILE_V_1_0 (a file) wins over RANK_TABLE_FILE (the directory
  // holding jobstart_hccl.json, or the file itself); neither set gives
  // /user/config/jobstart_hccl.json. RANK_TABLE_FILE names the file itself
  // when it is an existing non-directory, or does not exist and ends in
  // ".json"; otherwise it is the directory. Paths must be absolute.
  [[nodiscard]] Result<RankTableLocation> rank_table_location(const FileSystem& fs) const;
  // True when either rank-table variable is set (what --mode auto looks at).
  [[nodiscard]] bool has_rank_table_variable() const;
  // MA_RUN_METHOD: unset → kRankTable; "torchrun", "msrun"; anything else is
  // an error naming the value.
  [[nodiscard]] Result<RunMethod> run_method() const;
  [[nodiscard]] std::optional<std::string_view> extra_torchrun_params() const;  // MA_EXTRA_TORCHRUN_PARAMS
  [[nodiscard]] Result<std::uint16_t> torchrun_master_port() const;             // default 18888
  [[nodiscard]] Result<unsigned> msrun_cluster_timeout() const;                 // seconds, default 600
  [[nodiscard]] bool ms_ranktable_enable() const;                               // MS_RANKTABLE_ENABLE=True
  // TF_PS_HOSTS / TF_WORKER_HOSTS: comma-separated host:port (port 1..65535).
  [[nodiscard]] Result<std::vector<std::string>> tf_ps_hosts() const;
  [[nodiscard]] Result<std::vector<std::string>> tf_worker_hosts() const;
  // Host `index`'s DNS name: ${MA_VJ_NAME}-${MA_TASK_NAME}-${index}.${MA_VJ_NAME},
  // MA_TASK_NAME "worker" when unset (as job_geometry() names them).
  [[nodiscard]] Result<std::string> peer_name(unsigned index) const;

  // --- the MPI launch's own variables (the platform's run script reads them) --
  // HOME: absolute, normal form; nullopt when unset.
  [[nodiscard]] Result<std::optional<std::string>> home() const;
  // MY_SSHD_PORT: 1..65535, default kDefaultSshdPort.
  [[nodiscard]] Result<std::uint16_t> sshd_port() const;
  // MY_MPI_SLOTS: processes per host, 1..1024; nullopt when unset.
  [[nodiscard]] Result<std::optional<unsigned>> mpi_slots() const;
  // MY_MPI_BTL_TCP_IF: NCCL_SOCKET_IFNAME's value, a comma-separated list of
  // interface names or prefixes (NCCL's optional leading ^ or =), 1..256
  // bytes of A-Z a-z 0-9 . _ - : , ^ =; default kDefaultMpiInterfaces.
  [[nodiscard]] Result<std::string> mpi_interfaces() const;

  // A decimal variable in min..max (nullopt when unset); the error names it.
  [[nodiscard]] Result<std::optional<unsigned>> number(std::string_view name, std::uint64_t min,
                                                       std::uint64_t max) const;

 private:
  Result<std::vector<std::string>> host_ports(std::string_view name) const;

  std::vector<EnvVar> vars_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace trainit

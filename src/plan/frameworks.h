// The framework modes (docs/contract.md §3): torchrun and msrun done natively,
// their command lines supervised (-exec), and the PyTorch and TensorFlow
// presets. The hosts come from platform/cluster.h (ModelArts, Kubeflow or
// Volcano); several hosts meet through trainit's control channel before any
// process starts, and the first failure anywhere stops them all.
//
//   torchrun       nproc processes per host with the environment torchrun's
//                  agent gives its workers for a static rendezvous (RANK,
//                  LOCAL_RANK, WORLD_SIZE, ..., MASTER_ADDR, MASTER_PORT,
//                  TORCHELASTIC_*); rank 0 hosts the store itself, so
//                  init_method="env://" works unchanged. MA_EXTRA_TORCHRUN_PARAMS
//                  is read (parse_torchrun_params); a boot file ending in .py
//                  is run by python3 -u, as torchrun runs it. Each rank gets
//                  TORCHELASTIC_ERROR_FILE, <private dir>/error-<rank>.json,
//                  for PyTorch's @record (Plan::private_dir: --private-dir,
//                  else /tmp/trainit-<MA_VJ_NAME>, /tmp/trainit-job without).
//   torchrun-exec  one process per host: the platform's torchrun command,
//                  with TORCHELASTIC_ERROR_FILE <private dir>/error-host-<I>.json
//                  (torchrun's own @record passes its first failure's on)
//   msrun          host 0 runs MindSpore's scheduler (MS_ROLE=MS_SCHED), every
//                  host one worker (MS_ROLE=MS_WORKER) per device; logs as
//                  msrun's --log_dir: scheduler.log, worker_<rank>.log
//   msrun-exec     one process per host: the platform's msrun command
//   pytorch        one process per host: the command (a .py boot file under
//                  python3, as the platform's preset runs it) with --init_method
//                  tcp://<host 0>:<port> (several hosts: --rank, --world_size)
//   tensorflow     one process per host: the command with --task_index,
//                  --ps_hosts, --worker_hosts, --job_name, and TF_CONFIG; no
//                  control channel (a parameter server never finishes)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "plan/plan.h"

namespace trainit {

// Default ports of host 0's rendezvous: torchrun's on the platform, msrun's,
// and PyTorch's own (init_method tcp://).
inline constexpr std::uint16_t kDefaultTorchrunPort = 18888;
inline constexpr std::uint16_t kDefaultMsrunPort = 8118;
inline constexpr std::uint16_t kDefaultPytorchPort = 29500;

// What MA_EXTRA_TORCHRUN_PARAMS asks of --mode torchrun. Each torchrun
// parameter that means something without torchrun's agent maps to what
// trainit does; those that only tune the agent are accepted with a note;
// any other is an error naming it (--mode torchrun-exec passes them all to
// the real torchrun). Both --name=value and --name value, dashes or
// underscores.
struct TorchrunParams {
  std::optional<std::string> nproc_per_node;  // a number or "auto"
  std::optional<unsigned> nnodes;
  std::optional<unsigned> node_rank;
  std::optional<std::string> master_addr;
  std::optional<std::uint16_t> master_port;
  std::optional<unsigned> max_restarts;
  std::optional<unsigned> rendezvous_timeout;  // --rdzv_conf=timeout=SECONDS, join_timeout=: the longer
  std::optional<std::string> run_id;           // --rdzv_id
  std::optional<std::string> role;             // --role
  bool standalone = false;
  bool no_python = false;  // --no_python: the command runs as given
  bool module = false;     // -m/--module: python3 -u -m COMMAND
  std::vector<std::string> notes;
};
[[nodiscard]] Result<TorchrunParams> parse_torchrun_params(std::string_view text);

// Words as a shell splits a simple line: on blanks, with '...' and "..."
// quoting (no expansion). An unclosed quote is an error.
[[nodiscard]] Result<std::vector<std::string>> split_words(std::string_view text);

[[nodiscard]] Result<Plan> plan_framework(Mode mode, const PlanInput& input);

}  // namespace trainit

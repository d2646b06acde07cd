// The job's hosts (Cluster), and their geometry as ModelArts gives it: how
// many hosts (containers), which one this is, what the others are called,
// and how many devices each has (docs/contract.md §1).
//
// job_geometry() reads, and validates, only these variables:
//
//   MA_NUM_HOSTS     hosts in the job, 1..kMaxHosts (65536); unset: 1 (a single-host
//                    job), or the count a rank table gives (see KnownGeometry)
//   MA_TASK_INDEX, else VC_TASK_INDEX, else VK_TASK_INDEX
//                    this host's index, below the host count; unset: 0 for a
//                    single host, an error for several (a guessed index
//                    would make two hosts both host 0)
//   MA_VJ_NAME       required (see Environment::vj_name)
//   MA_TASK_NAME     the role; unset: "worker", the role of every host of an
//                    MPI, PyTorch or Ascend job (TensorFlow's "ps" is always
//                    set by the platform)
//   MA_NUM_GPUS      devices per host, the processes it asks for (nproc);
//                    unset: none asked (a CPU host still runs one
//                    process); "0" asks for 1
//
// Every error is one line naming the variable and its value; the planners
// return it and `trainit` exits 78 before anything starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "platform/environment.h"

namespace trainit {

inline constexpr std::string_view kDefaultTaskName = "worker";

// The job's hosts, the one model of them every mode plans with: how many
// there are, which one this is, what they are called, how many processes
// each runs, and which platform said so. job_geometry() reads it from
// ModelArts' variables (the Ascend and MPI modes); cluster_from_env()
// (platform/cluster.h) from whichever platform started a framework job.
struct Cluster {
  std::string source = "none";  // "ModelArts", "Kubeflow", "Volcano" or "none"
  unsigned hosts = 1;
  unsigned index = 0;
  std::optional<unsigned> nproc;  // processes per host the platform asks for (MA_NUM_GPUS, at least 1)
  // Every host's name, host 0 first, when the source names them all; just
  // host 0's when it names only that one (Kubeflow); empty for "none".
  std::vector<std::string> peers;
  bool all_named = false;                    // peers names every host
  std::optional<std::uint16_t> master_port;  // Kubeflow's
  std::string job_name;                      // a rendezvous id: MA_VJ_NAME; else empty
  std::string task_name = "worker";          // the role (MA_TASK_NAME)
  std::vector<std::string> disagreements;    // "PET_NNODES=3 (ModelArts: 2 hosts)", ...
  std::vector<std::string> consumed;         // variables not passed on to the processes
};

// What another source (a rank table) says of the geometry. Used where the
// variables are unset; MA_NUM_HOSTS, when set, must agree with `hosts`.
struct KnownGeometry {
  unsigned hosts = 1;
  std::string source;  // for messages, e.g. "the rank table /x.json lists 2 servers"
};

[[nodiscard]] Result<Cluster> job_geometry(const Environment& env,
                                           const std::optional<KnownGeometry>& known = std::nullopt);

// A name a resolver can look up: at most 253 bytes, labels of 1..63.
[[nodiscard]] bool is_dns_name(std::string_view name);

// ${vj}-${task}-${index}.${vj}: how the platform's DNS names host `index`.
[[nodiscard]] std::string peer_dns_name(std::string_view vj_name, std::string_view task_name, unsigned index);

}  // namespace trainit

// Who the hosts of a framework job are, from whichever platform started it.
//
// The framework modes (torchrun, msrun, pytorch, tensorflow and their -exec
// forms) need the same few facts: how many hosts, which one this is, how many
// processes per host, and where host 0 is. Three platforms say them in their
// own variables; the first present wins, in this order:
//
//   ModelArts  MA_VJ_NAME, MA_NUM_HOSTS or MA_TASK_INDEX set: job_geometry()
//              (docs/contract.md §1), every host named, nproc from MA_NUM_GPUS
//   Kubeflow   PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE or
//              PET_MASTER_ADDR set (PyTorchJob, Trainer v2): hosts
//              PET_NNODES (else WORLD_SIZE, else 1), index PET_NODE_RANK
//              (else RANK, the pod's index), nproc PET_NPROC_PER_NODE (a
//              number, or "auto": the accelerators in /dev, else 1), host 0
//              PET_MASTER_ADDR:PET_MASTER_PORT (else MASTER_ADDR:MASTER_PORT).
//              Only host 0 is named. PET_* are consumed: not passed on.
//   Volcano    VC_TASK_INDEX or VK_TASK_INDEX set: the hosts of the tasks
//              "master" then "worker", each read from /etc/volcano/<task>.host
//              (one name a line) before VC_<TASK>_HOSTS (comma-separated);
//              this host's task is the one listing $HOSTNAME, else the only
//              one; index the task index, after the master's hosts for a
//              worker
//   none       a single host, host 0 is this one; nproc from MA_NUM_GPUS
//
// A value of a losing source that differs from the winner's is reported (not
// an error): `trainit plan` shows which source won and each disagreement.
// Elastic ranges (PET_NNODES=1:4) are refused: trainit runs static jobs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "os/fs.h"
#include "platform/environment.h"

namespace trainit {

struct Cluster {
  std::string source = "none";  // "ModelArts", "Kubeflow", "Volcano" or "none"
  unsigned hosts = 1;
  unsigned index = 0;
  std::optional<unsigned> nproc;  // processes per host the platform asks for
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

// The devices /dev shows (/dev/nvidiaN, /dev/davinciN): PET_NPROC_PER_NODE=auto.
[[nodiscard]] unsigned visible_accelerators(const FileSystem& fs);

[[nodiscard]] Result<Cluster> cluster_from_env(const Environment& env, const FileSystem& fs);

}  // namespace trainit

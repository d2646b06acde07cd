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
#include "platform/geometry.h"

namespace trainit {

// The devices /dev shows (/dev/nvidiaN, /dev/davinciN): PET_NPROC_PER_NODE=auto.
[[nodiscard]] unsigned visible_accelerators(const FileSystem& fs);

[[nodiscard]] Result<Cluster> cluster_from_env(const Environment& env, const FileSystem& fs);

}  // namespace trainit

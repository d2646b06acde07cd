// The Ascend rank-table launch (docs/contract.md §3, "Ascend rank table"): one
// process per device of this host, each with the per-rank variables of the
// contract, its own session, a working directory and a log file.
//
// Inputs read: MA_VJ_NAME (JOB_ID), the rank table (RANK_TABLE_FILE_V_1_0,
// RANK_TABLE_FILE or the default path), MA_CURRENT_HOST_IP /
// MA_CURRENT_INSTANCE_NAME (to find this host among several), MA_MOUNT_PATH
// (workspace, log dir, the converted table; required for template 2), and
// whether <MA_MOUNT_PATH>/log exists. Every rank gets trainit's environment
// (see child_base_env) plus exactly: RANK_TABLE_FILE, JOB_ID,
// ASCEND_DEVICE_ID and DEVICE_ID (the device's position i in this host's
// list, not the table's device_id), RANK_ID, RANK_SIZE, and, unless already
// set, HCCL_CONNECT_TIMEOUT=1800 and
// ASCEND_PROCESS_LOG_PATH=<logdir>/<job_id>/ascend/process_log/rank_<rank>.
// Paths are built only from the environment, trainit's own counter i and
// validated numbers; never from a string of the table.
//
// A table of several hosts (template 1: servers; template 2: pods with
// devices) adds resolve_peers and host_barrier before spawn and a HostsPlan
// (platform/geometry.h: peers named from MA_VJ_NAME and MA_TASK_NAME, this
// host's index from MA_TASK_INDEX/VC_TASK_INDEX/VK_TASK_INDEX, required).
// MA_NUM_HOSTS, when set, must equal the table's host count: a disagreement
// is an error naming both.
#pragma once

#include "plan/plan.h"

namespace trainit {

[[nodiscard]] Result<Plan> plan_ascend(const PlanInput& input);

// The rank table where the environment puts it, as a plan waits on it: its
// RankTablePlan (ready == false, with why, while it is missing, empty or not
// "completed"; an error for one that is refused, EBADMSG for one that does
// not parse, as one caught mid-write reads) and, once complete, the table.
struct TableState {
  RankTablePlan plan;
  std::optional<RankTable> table;
};
[[nodiscard]] Result<TableState> read_rank_table(const PlanInput& input);

}  // namespace trainit

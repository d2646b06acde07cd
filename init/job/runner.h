// The job runner: runs a job mode's plan as PID 1, through the states of
// init/job/machine.h, on one loop.
//
// The runner drives; the phases own. The machine (JobMachine) performs each
// transition from its row of work; the outcome (JobOutcome, outcome.h)
// holds the first cause, the exit code and what the status file says; each
// state's work is a phase of its own in this folder, given the loop and its
// own settings, reporting back through its events:
//
//   wait_rank_table        RankTableWait     (rank_table_wait.h)
//   resolve_peers          HostsPhase        (hosts.h; PeerNames, host_link.h)
//   start_sshd             SshdPhase         (sshd.h)
//   wait_peers             HostsPhase        (PeerSshds, sshd.h)
//   host_barrier           HostsPhase        (HostLink: host 0's end or another's, host_link.h)
//   spawn, running         SpawnPhase        (spawn.h: RankSet, ArenaWatch, DevicePreflight)
//   stopping, reaping      the escalation (proc/escalation.h) over the ranks
//   (restarts)             Restarts          (restarts.h)
//
// At the first failure, timeout or SIGTERM/SIGINT the job stops: SIGTERM to
// each rank's group newest first and to everything else, --grace, then
// SIGKILL. The exit code: the first failing rank's (128+N for a death by
// signal N), 128+S when trainit was stopped by signal S, 78 for a bad
// configuration or table, 75 when the rank table never completed, 73 when a
// directory or file of the plan could not be created, 76 when a rank broke
// the collective arena, 79 when a local device failed its preflight
// (--preflight devices), 70 internal error (docs/reference/exit-codes.md).
#pragma once

#include "exec/cli.h"
#include "exec/pid1.h"
#include "log/console.h"
#include "platform/environment.h"

namespace trainit {

int run_job(const Options& options, const Pid1& pid1, Environment env, ConsoleWriter& console);

}  // namespace trainit

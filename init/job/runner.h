// The job runner: runs a job mode's plan as PID 1, through the states of
// init/job/machine.h, on one loop.
//
// The driver owns the machine (the only place a transition happens), the
// job's outcome (its exit code and cause, the status file, STATUS= to
// NOTIFY_SOCKET) and the signals; each state's work is a phase of its own
// in this folder, given the loop and its own settings, reporting back
// through a callback:
//
//   wait_rank_table        RankTableWait     (rank_table_wait.h)
//   resolve_peers          PeerNames         (host_link.h)
//   start_sshd, wait_peers SshdPhase, PeerSshds (sshd.h)
//   host_barrier           HostLink: host 0's end or another's (host_link.h)
//   spawn, running         RankSet, Launcher (ranks.h), ArenaWatch (arena_watch.h)
//   stopping, reaping      the escalation (proc/escalation.h) over RankSet
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

// Job modes (today: the Ascend rank-table launch), run as PID 1.
//
// Executes a Plan on the loop through the states of init/machine.h: waits for
// the rank table (inotify on its directory, a slow poll beside it; read again
// only when it may have changed, see FileWatch), creates
// the directories and files the plan names, starts one process per local
// device in its own session with its output relayed (src/log), watches them,
// and at the first failure, timeout or SIGTERM/SIGINT stops them all (SIGTERM
// to each rank's group newest first and to everything else, --grace, then
// SIGKILL). Every transition is logged, written to the status file and sent
// as STATUS= to NOTIFY_SOCKET.
//
// Returns the exit code: the first failing rank's (128+N for a death by
// signal N), 128+S when trainit was stopped by signal S, 78 for a bad
// configuration or table, 75 when the rank table never completed, 73 when a
// directory or file of the plan could not be created, 70 internal error.
#pragma once

#include "cli.h"
#include "log/console.h"
#include "pid1.h"
#include "platform/environment.h"

namespace trainit {

int run_job(const Options& options, const Pid1& pid1, Environment env, ConsoleWriter& console);

}  // namespace trainit

// Exec mode, `trainit [options] -- PROGRAM ARGS...`: tini's job, done right.
//
// Runs PROGRAM in its own process group (the terminal's foreground group when
// stdin is a tty) and reaps every orphan. Signals other than SIGTERM/SIGINT
// go to PROGRAM (its group with -g). SIGTERM/SIGINT stop everything: after
// --stop-delay they reach PROGRAM and every other process trainit answers
// for (the whole namespace as PID 1, its descendants otherwise), and after
// --grace whatever still runs is SIGKILLed. When PROGRAM exits, the rest are
// drained the same way before trainit exits, or PROGRAM is restarted under
// --restart. --forward-only and --no-drain give tini's behaviour back.
//
// Returns the code trainit exits with: PROGRAM's, 128+N for a death by
// signal N, 0 for a code named by -e, 127/126 when it could not be executed,
// 71 when it could not be started.
#pragma once

#include "exec/cli.h"
#include "exec/pid1.h"

namespace trainit {

int run_exec(const Options& options, const Pid1& pid1);

}  // namespace trainit

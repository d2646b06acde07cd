// Exec mode, `trainit [options] -- PROGRAM ARGS...`: tini's job, done right.
//
// Runs PROGRAM in its own process group (the terminal's foreground group when
// stdin is a tty), forwards every catchable signal to it (to its group with
// -g), reaps every orphan, and returns the exit code trainit must exit with:
// the child's, 128+N for a death by signal N, 0 for a code named by -e,
// 127/126 when it could not be executed, 71 when it could not be started.
// SIGTERM/SIGINT start the escalation: forwarded now, SIGKILL to the child's
// group after --grace.
#pragma once

#include "cli.h"
#include "pid1.h"

namespace trainit {

int run_exec(const Options& options, const Pid1& pid1);

}  // namespace trainit

// `trainit plan [OPTIONS] [--] COMMAND [ARG...]`: print the plan for a command
// and exit (see plan/command.h). OPTIONS and their variables are the run's
// (cli.h): the plan shows every setting and where it came from.
#pragma once

#include "os/fs.h"
#include "plan/command.h"

namespace trainit {

// Pure: argv[0] is "plan" (the words after `trainit`), envp trainit's
// environment ("NAME=value" entries, null-terminated), `fs` what the planners
// read. Returns what to print: the JSON plan, or one error line; a warning
// line on stderr for each unknown TRAINIT_* variable. Exit status 0, 64 usage,
// 70 internal, 78 refused.
[[nodiscard]] CommandOutput plan_command(int argc, const char* const* argv, const char* const* envp,
                                         const FileSystem& fs);

// plan_command() on the real file system, printed; returns the exit status
// (74 when the plan cannot be written to stdout).
int plan_main(int argc, char** argv, char** envp);

}  // namespace trainit

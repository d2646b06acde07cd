// `trainit plan`: print the plan for a command and exit (see plan/command.h).
#pragma once

namespace trainit {

// argv[0] is "plan" (the words after `trainit`), envp trainit's environment.
// Writes the JSON plan to stdout or one error line to stderr; returns the
// exit status (0, 64 usage, 70 internal, 74 output failed, 78 refused).
int plan_main(int argc, char** argv, char** envp);

}  // namespace trainit

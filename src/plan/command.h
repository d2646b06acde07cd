// The pure half of `trainit plan`: plans a PlanInput and says what to print
// and the exit status, so the command can be tested without a process.
// init/cmd/plan_cmd.cpp reads the command's words (with the run's option table,
// init/exec/cli.h) and feeds this one.
//
//   0   the plan, as JSON (plan_json.h), on stdout
//   78  the environment or rank table is refused (EX_CONFIG): one line on stderr
//   70  internal error (EX_SOFTWARE), e.g. out of memory
//
// Every error line reads "trainit: error: ...".
#pragma once

#include <string>

#include "plan/plan.h"

namespace trainit {

struct CommandOutput {
  int exit_code = 0;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

[[nodiscard]] CommandOutput run_plan_command(const PlanInput& input);

}  // namespace trainit

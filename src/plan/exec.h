// Exec mode: one process, the command as given, trainit's environment (see
// child_base_env), trainit's cwd and stdio, in its own process group;
// signals to trainit are forwarded to it, as tini does.
#pragma once

#include "plan/plan.h"

namespace trainit {

[[nodiscard]] Result<Plan> plan_exec(const PlanInput& input);

}  // namespace trainit

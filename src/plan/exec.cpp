#include "plan/exec.h"

namespace trainit {

Result<Plan> plan_exec(const PlanInput& input) {
  if (input.argv.empty())
    return Error{"no command to run"};
  Plan plan;
  plan.mode = Mode::kExec;
  plan.states = {State::kSpawn, State::kRunning, State::kStopping, State::kReaping, State::kExit};
  plan.signals = SignalPolicy::kForward;
  ProcessSpec process;
  process.name = "main";
  process.argv = input.argv;
  process.env = child_base_env(input.env);
  process.group = GroupPolicy::kProcessGroup;
  process.output = OutputPolicy::kInherit;
  plan.processes.push_back(std::move(process));
  return plan;
}

}  // namespace trainit

#include "plan/command.h"

#include <fmt/core.h>

#include <exception>

#include "base/exit_code.h"
#include "os/text.h"
#include "plan/plan_json.h"

namespace trainit {

CommandOutput run_plan_command(const PlanInput& input) {
  CommandOutput result;
  try {
    auto plan = make_plan(input);
    if (!plan) {
      result.exit_code = plan.error().exit_code != 0 ? plan.error().exit_code : exit_code::kConfig;
      result.err = fmt::format("trainit: error: {}\n", one_line(plan.error().message));
      return result;
    }
    result.out = plan_to_json(*plan);
  } catch (const std::exception& e) {
    result = CommandOutput{exit_code::kSoftware, "", fmt::format("trainit: error: plan: {}\n", one_line(e.what()))};
  }
  return result;
}

}  // namespace trainit

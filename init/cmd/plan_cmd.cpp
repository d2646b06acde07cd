#include "cmd/plan_cmd.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <string>
#include <string_view>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/redact.h"
#include "exec/cli.h"
#include "exec/privileges.h"
#include "os/text.h"
#include "platform/environment.h"

namespace trainit {
namespace {

constexpr std::string_view kUsageHead =
    "usage: trainit plan [OPTIONS] [--] COMMAND [ARG...]\n"
    "\n"
    "Prints, as JSON (schema trainit.plan/v1), what trainit would start for COMMAND\n"
    "in this environment, with every setting and where it came from (default,\n"
    "variable, command line), and exits: 0 planned, 64 usage error, 78 refused\n"
    "configuration (the one-line error names the variable, file, key and value).\n"
    "\n"
    "OPTIONS are a run's (trainit --help), from the command line or TRAINIT_*\n"
    "variables alike. Those that shape the plan:\n";

// The options the planner reads, as trainit --help lists them: the table's
// rows that shape the plan.
std::string usage() {
  std::string text(kUsageHead);
  for (const OptionSpec& option : option_table()) {
    if (option.shapes_plan) {
      text += option_usage(option);
    }
  }
  text += "  -h, --help              this text\n";
  return text;
}

}  // namespace

CommandOutput plan_command(int argc, const char* const* argv, const char* const* envp, const FileSystem& fs) {
  try {
    auto options = parse_cli(argc, argv, envp);
    if (!options) {
      return {exit_code::kUsage, "",
              fmt::format("trainit: error: plan: {} (see trainit plan --help)\n", options.error().message)};
    }
    switch (options->action) {
      case Action::kHelp:
        return {0, usage(), ""};
      case Action::kVersion:
        return {0, std::string(version_text()), ""};
      case Action::kLicense:
        return {0, std::string(license_text()), ""};
      case Action::kRun:
        break;
    }
    register_secrets(envp, options->redact);
    auto privileges = JobPrivileges::settle(*options);
    if (!privileges) {
      return {privileges.error().errnum == EPERM ? exit_code::kNoPermission : exit_code::kUsage, "",
              fmt::format("trainit: error: plan: {}\n", redact(privileges.error().message))};
    }
    std::string warnings;
    for (const std::string& warning : options->warnings) {
      warnings += fmt::format("trainit: warning: {}\n", warning);
    }
    PlanInput input;
    input.options = plan_options(*options);
    input.argv = std::move(options->command);
    input.env = Environment::from_envp(envp);
    input.fs = &fs;
    input.settings = settings_of(*options);
    input.privileges = privileges->plan();
    CommandOutput result = run_plan_command(input);
    result.err.insert(0, warnings);
    // Nothing secret in a plan: its environments hide secret-looking
    // variables by name; this hides their values wherever else they appear
    // (a command line, a setting).
    result.out = redact(result.out);
    result.err = redact(result.err);
    return result;
  } catch (const std::exception& e) {
    return {exit_code::kSoftware, "", fmt::format("trainit: error: plan: {}\n", one_line(e.what()))};
  }
}

int plan_main(int argc, char** argv, char** envp) {
  RealFileSystem fs;
  CommandOutput result = plan_command(argc, argv, envp, fs);
  if (int r = write_all(STDOUT_FILENO, result.out); r < 0) {
    log_error("plan: cannot write the plan to stdout: {}", errno_string(-r));
    return exit_code::kIoError;
  }
  (void)write_all(STDERR_FILENO, result.err);  // nowhere left to report a failure
  return result.exit_code;
}

}  // namespace trainit

// `trainit plan [options] -- COMMAND [ARG...]`, as a pure function.
//
// Parses the words after `trainit` (args[0] is "plan"), plans through
// make_plan() and returns what to print and the exit status, so the whole
// command can be tested without a process. init/plan_cmd.cpp is the thin
// main that feeds it argv, envp and the real file system.
//
//   0   the plan, as JSON (plan_json.h), on stdout
//   64  usage error (EX_USAGE): one line on stderr
//   78  the environment or rank table is refused (EX_CONFIG): one line
//   70  internal error (EX_SOFTWARE), e.g. out of memory
//
// Every error line reads "trainit: error: ...".
#pragma once

#include <span>
#include <string>

#include "plan/plan.h"
#include "platform/environment.h"
#include "platform/fs.h"

namespace trainit {

struct CommandOutput {
  int exit_code = 0;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

// The parsed words of `trainit plan`, or a usage error.
struct PlanArgs {
  PlanOptions options;
  std::vector<std::string> command;
  bool help = false;
};
// `defaults`: the options before the words are read; what the caller knows of
// itself (PlanOptions::is_root and user: `trainit plan` plans as the user who
// runs it, unless --as-user says otherwise).
[[nodiscard]] Result<PlanArgs> parse_plan_args(std::span<const std::string> args, const PlanOptions& defaults = {});

[[nodiscard]] CommandOutput run_plan_command(std::span<const std::string> args, const Environment& env,
                                             const FileSystem& fs, const PlanOptions& defaults = {});

[[nodiscard]] std::string_view plan_usage() noexcept;

}  // namespace trainit

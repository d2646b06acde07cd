#include "plan_cmd.h"

#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "base/exit_code.h"
#include "base/log.h"
#include "plan/command.h"
#include "platform/environment.h"
#include "platform/fs.h"

namespace trainit {

int plan_main(int argc, char** argv, char** envp) {
  std::vector<std::string> args(argv, argv + argc);
  RealFileSystem fs;
  CommandOutput result = run_plan_command(args, Environment::from_envp(envp), fs);
  if (int r = write_all(STDOUT_FILENO, result.out); r < 0) {
    log_error("plan: cannot write the plan to stdout: {}", errno_string(-r));
    return exit_code::kIoError;
  }
  (void)write_all(STDERR_FILENO, result.err);  // nowhere left to report a failure
  return result.exit_code;
}

}  // namespace trainit

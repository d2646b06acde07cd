#include "plan_cmd.h"

#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "plan/command.h"
#include "platform/environment.h"
#include "platform/fs.h"

namespace trainit {
namespace {

constexpr int kExitIoError = 74;  // EX_IOERR

// Returns 0 or -errno.
int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

}  // namespace

int plan_main(int argc, char** argv, char** envp) {
  std::vector<std::string> args(argv, argv + argc);
  RealFileSystem fs;
  CommandOutput result = run_plan_command(args, Environment::from_envp(envp), fs);
  if (int r = write_all(STDOUT_FILENO, result.out); r < 0) {
    log_error("plan: cannot write the plan to stdout: {}", errno_string(-r));
    return kExitIoError;
  }
  (void)write_all(STDERR_FILENO, result.err);  // nowhere left to report a failure
  return result.exit_code;
}

}  // namespace trainit

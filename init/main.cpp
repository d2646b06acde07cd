// trainit: PID 1 for distributed-training containers.
//
// main() is the whole program's outline: capture what our parent gave us,
// read the command line, become a correct init, run the mode, exit with its
// code. Everything before the mode runs may exit with a usage code; after the
// first spawn the mode owns the exit.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/log.h"
#include "cli.h"
#include "exec_mode.h"
#include "job_mode.h"
#include "pid1.h"
#include "plan_cmd.h"
#include "proc/signals.h"

extern char** environ;

namespace {

constexpr int kExitUsage = 64;  // EX_USAGE
constexpr int kExitOsError = 71;
constexpr int kExitConfig = 78;  // EX_CONFIG

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) {
      return;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// Whether --mode auto has anything to look at; cheap, so that exec mode does
// not pay for the platform model.
bool job_variables_set() {
  for (const char* name : {"RANK_TABLE_FILE", "RANK_TABLE_FILE_V_1_0", "MA_RUN_METHOD"}) {
    const char* value = ::getenv(name);
    if (value != nullptr && value[0] != '\0') {
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace trainit;
  // First of all: the signal state every child must get back.
  const SignalState parent_signals = capture_signal_state();
  if (argc > 1 && std::string_view(argv[1]) == "plan") {
    return plan_main(argc - 1, argv + 1, environ);  // pure: prints a plan, starts nothing
  }

  auto options = parse_cli(argc, argv, [](const char* name) { return ::getenv(name); });
  if (!options) {
    log_error("{}", options.error().message);
    write_all(STDERR_FILENO, usage_text());
    return kExitUsage;
  }
  set_log_verbosity(options->verbosity);
  switch (options->action) {
    case Action::kHelp:
      write_all(STDOUT_FILENO, usage_text());
      return 0;
    case Action::kVersion:
      write_all(STDOUT_FILENO, version_text());
      return 0;
    case Action::kLicense:
      write_all(STDOUT_FILENO, license_text());
      return 0;
    case Action::kRun:
      break;
  }

  Pid1 pid1;
  if (int r = setup_pid1(parent_signals, options->parent_death_signal, &pid1); r < 0) {
    log_error("cannot set up as init: {}", errno_string(-r));
    return kExitOsError;
  }
  if (options->mode == RequestedMode::kExec || (options->mode == RequestedMode::kAuto && !job_variables_set())) {
    return run_exec(*options, pid1);  // tini's job: the platform contract stays unread
  }
  Environment env = Environment::from_envp(environ);
  auto mode = resolve_mode(options->mode, env);
  if (!mode) {
    log_error("{}", mode.error().message);
    return kExitConfig;
  }
  if (*mode == Mode::kExec) {
    return run_exec(*options, pid1);
  }
  if (options->verbosity == 1) {
    set_log_verbosity(2);  // job modes show their transitions by default
  }
  return run_job(*options, pid1, std::move(env));
}

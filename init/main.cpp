// trainit: PID 1 for distributed-training containers.
//
// main() is the whole program's outline: capture what our parent gave us,
// read the command line, become a correct init, run the mode, exit with its
// code. Everything before the mode runs may exit with a usage code; after the
// first spawn the mode owns the exit. Everything trainit writes to its stdout
// and stderr, its log lines too, goes through one console that never blocks
// (log/console.h); it is flushed, for at most a second, on the way out.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/exit_code.h"
#include "base/log.h"
#include "cmd/plan_cmd.h"
#include "cmd/status_cmd.h"
#include "exec/cli.h"
#include "exec/exec_mode.h"
#include "exec/pid1.h"
#include "exec/privileges.h"
#include "job/runner.h"
#include "log/console.h"
#include "proc/signals.h"

extern char** environ;

namespace {

using namespace trainit;

// The console's buffer: what a slow console may hold back before lines are
// dropped (and counted; the rank's log file keeps them all). Allocated at the
// first line, resident as it is used: four pipe buffers, and within a job's
// 2 MB budget (512 KiB took a logging 8-rank job to 2,060 KiB).
constexpr size_t kConsoleBuffer = 256 << 10;

// The hosts' shared secret: PID 1's alone (pid1.h erase_from_environment).
constexpr const char* kSecretVariable = "TRAINIT_JOB_SECRET";

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

int run(int argc, char** argv, const SignalState& parent_signals, ConsoleWriter& console) {
  auto options = parse_cli(argc, argv, environ);
  if (!options) {
    log_error("{}", options.error().message);
    console.append({}, short_usage_text(), {}, Stream::kErr);
    return exit_code::kUsage;
  }
  set_log_verbosity(options->verbosity);
  for (const std::string& warning : options->warnings) {
    log_warning("{}", warning);
  }
  switch (options->action) {
    case Action::kHelp:
      console.append({}, usage_text(), {});
      return 0;
    case Action::kVersion:
      console.append({}, version_text(), {});
      return 0;
    case Action::kLicense:
      console.append({}, license_text(), {});
      return 0;
    case Action::kRun:
      break;
  }
  if (!options->as_user.empty()) {
    log_error("--as-user (TRAINIT_AS_USER) is for trainit plan: a run is whoever starts it");
    return exit_code::kUsage;
  }
  register_secrets(environ, options->redact);  // before anything of the job is logged
  auto privileges = JobPrivileges::settle(*options);
  if (!privileges) {
    log_error("{}", privileges.error().message);
    return privileges.error().errnum == EPERM ? exit_code::kNoPermission : exit_code::kUsage;
  }

  Pid1 pid1;
  pid1.privileges = &*privileges;
  if (int r = setup_pid1(parent_signals, options->parent_death_signal, &pid1); r < 0) {
    log_error("cannot set up as init: {}", errno_string(-r));
    return exit_code::kOsError;
  }
  if (options->mode == Mode::kExec || (options->mode == kAutoMode && !job_variables_set())) {
    erase_from_environment(kSecretVariable);  // no use here, and never a child's
    return run_exec(*options, pid1);          // tini's job: the platform contract stays unread
  }
  Environment env = Environment::from_envp(environ);
  // The copy keeps the secret; the block /proc/1/environ shows does not.
  erase_from_environment(kSecretVariable);
  if (env.get(kSecretVariable) || !options->peers.job_secret_file.empty()) {
    guard_secret_memory();
  }
  auto mode = resolve_mode(options->mode, env);
  if (!mode) {
    log_error("{}", mode.error().message);
    return exit_code::kConfig;
  }
  if (*mode == Mode::kExec) {
    return run_exec(*options, pid1);
  }
  if (options->restart == Restart::kAlways) {
    log_error(
        "--restart always (TRAINIT_RESTART) is exec mode's: a job that ended well is done (the {} mode "
        "restarts on-failure only)",
        mode_name(*mode));
    return exit_code::kUsage;
  }
  // Job modes show their transitions by default: their levels count from 2
  // (-v: 3), unless a level was given (--verbosity N, TRAINIT_VERBOSITY=N).
  if (!options->verbosity_given) {
    set_log_verbosity(options->verbosity + 1);
  }
  return run_job(*options, pid1, std::move(env), console);
}

}  // namespace

int main(int argc, char** argv) {
  // First of all: the signal state every child must get back.
  const SignalState parent_signals = capture_signal_state();
  if (argc > 1 && std::string_view(argv[1]) == "plan") {
    return plan_main(argc - 1, argv + 1, environ);  // pure: prints a plan, starts nothing
  }
  if (argc > 1 && std::string_view(argv[1]) == "status") {
    return status_main(argc - 1, argv + 1, environ);  // reads the status file, starts nothing
  }
  ConsoleWriter console(STDOUT_FILENO, STDERR_FILENO, kConsoleBuffer);
  set_log_sink(&console);
  const int code = run(argc, argv, parent_signals, console);
  console.stop(ConsoleWriter::kStopTimeout);
  set_log_sink(nullptr);
  return code;
}

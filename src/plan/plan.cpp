#include "plan/plan.h"

#include <fmt/core.h>

#include <exception>

#include "base/env.h"
#include "base/exit_code.h"
#include "os/path.h"
#include "os/text.h"
#include "plan/ascend.h"
#include "plan/exec.h"
#include "plan/frameworks.h"
#include "plan/mpi.h"

namespace trainit {

std::string_view state_name(State state) noexcept {
  switch (state) {
    case State::kWaitRankTable:
      return "wait_rank_table";
    case State::kResolvePeers:
      return "resolve_peers";
    case State::kStartSshd:
      return "start_sshd";
    case State::kWaitPeers:
      return "wait_peers";
    case State::kHostBarrier:
      return "host_barrier";
    case State::kSpawn:
      return "spawn";
    case State::kRunning:
      return "running";
    case State::kStopping:
      return "stopping";
    case State::kReaping:
      return "reaping";
    case State::kExit:
      return "exit";
  }
  return "?";
}

namespace {

struct ModeName {
  Mode mode;
  std::string_view name;
};
constexpr ModeName kModeNames[] = {
    {Mode::kExec, "exec"},
    {Mode::kAscend, "ascend"},
    {Mode::kMpi, "mpi"},
    {Mode::kTorchrun, "torchrun"},
    {Mode::kTorchrunExec, "torchrun-exec"},
    {Mode::kMsrun, "msrun"},
    {Mode::kMsrunExec, "msrun-exec"},
    {Mode::kPytorch, "pytorch"},
    {Mode::kTensorflow, "tensorflow"},
};

}  // namespace

std::string_view mode_name(Mode mode) noexcept {
  for (const ModeName& m : kModeNames) {
    if (m.mode == mode)
      return m.name;
  }
  return "?";
}

std::optional<Mode> mode_from_name(std::string_view name) noexcept {
  for (const ModeName& m : kModeNames) {
    if (m.name == name)
      return m.mode;
  }
  return std::nullopt;
}

std::string mode_names() {
  std::string out;
  for (const ModeName& m : kModeNames)
    out += fmt::format("{}{}", out.empty() ? "" : ", ", m.name);
  return out;
}

Result<Mode> resolve_mode(RequestedMode requested, const Environment& env) {
  if (requested)
    return *requested;
  auto method = env.run_method();
  if (!method)
    return method.error();
  if (*method == RunMethod::kTorchrun)
    return Mode::kTorchrun;
  if (*method == RunMethod::kMsrun)
    return Mode::kMsrun;
  return env.has_rank_table_variable() ? Mode::kAscend : Mode::kExec;
}

namespace {

// Restarts a job mode cannot give, refused as a bad option (64), by the run
// and `trainit plan` alike; an empty message when none is asked for.
Error refused_restarts(const PlanOptions& options, const Plan& plan) {
  if (plan.mode != Mode::kExec && options.restart == Restart::kAlways) {
    return Error{fmt::format("--restart always (TRAINIT_RESTART) is exec mode's: a job that ended well is done (the {} "
                             "mode restarts on-failure only)",
                             mode_name(plan.mode)),
                 0, exit_code::kUsage};
  }
  if (plan.mode == Mode::kMpi && plan.hosts && plan.hosts->hosts > 1 && options.job_restarts()) {
    return Error{
        "--restart on-failure (TRAINIT_RESTART) with --mode mpi on several hosts: not supported (the other "
        "hosts' sshd and their mpirun-started processes do not start again); restart the job from outside",
        0, exit_code::kUsage};
  }
  return {};
}

}  // namespace

Result<Plan> make_plan(const PlanInput& input) {
  try {
    if (input.argv.empty())
      return Error{"no command to run"};
    auto mode = resolve_mode(input.options.mode, input.env);
    if (!mode)
      return mode.error();
    Result<Plan> plan = *mode == Mode::kAscend ? plan_ascend(input)
                        : *mode == Mode::kMpi  ? plan_mpi(input)
                        : *mode == Mode::kExec ? plan_exec(input)
                                               : plan_framework(*mode, input);
    if (!plan)
      return plan;
    if (auto refused = refused_restarts(input.options, *plan); !refused.message.empty())
      return refused;
    if (auto restarts = input.options.job_restarts(); restarts && plan->mode != Mode::kExec) {
      plan->restarts = restarts;  // exec mode restarts its own way
    }
    plan->privileges = input.privileges;
    plan->settings = input.settings;
    return plan;
  } catch (const std::exception& e) {  // allocation failure: planners throw nothing else
    return Error{fmt::format("cannot plan: {}", one_line(e.what()))};
  }
}

bool waits_for_rank_table(Mode mode, const Environment& env) {
  return mode == Mode::kAscend || ((mode == Mode::kMsrun || mode == Mode::kMsrunExec) && env.ms_ranktable_enable());
}

std::vector<EnvVar> child_base_env(const Environment& env) {
  std::vector<EnvVar> out;
  out.reserve(env.vars().size() + 8);
  for (const EnvVar& var : env.vars()) {
    if (!is_withheld_from_children(var.name)) {
      out.push_back(var);
    }
  }
  return out;
}

std::string job_log_dir(const std::optional<std::string>& mount_path, const FileSystem& fs) {
  if (mount_path) {
    std::string dir = join_path(*mount_path, "log");
    if (fs.kind(dir) == PathKind::kDirectory)
      return dir;
  }
  return "/tmp/log";
}

void set_env(std::vector<EnvVar>& env, std::string_view name, std::string value) {
  for (EnvVar& var : env) {
    if (var.name == name) {
      var.value = std::move(value);
      return;
    }
  }
  env.push_back(EnvVar{std::string(name), std::move(value)});
}

}  // namespace trainit

#include <gtest/gtest.h>

#include "os/fs.h"
#include "plan/plan.h"

namespace trainit {
namespace {

Result<Plan> plan_with(RequestedMode mode, std::vector<EnvVar> vars, const FileSystem& fs) {
  PlanInput input;
  input.options.mode = mode;
  input.argv = {"sh", "-c", "echo hi"};
  input.env = Environment(std::move(vars));
  input.fs = &fs;
  return make_plan(input);
}

TEST(ExecPlan, OneProcessWithTheCommandAsGivenAndSignalsForwarded) {
  MemoryFileSystem fs;
  auto plan = plan_with(Mode::kExec, {{"PATH", "/bin"}, {"NOTIFY_SOCKET", "/run/n"}, {"LISTEN_FDS", "1"}}, fs);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->mode, Mode::kExec);
  EXPECT_EQ(plan->signals, SignalPolicy::kForward);
  EXPECT_EQ(plan->states,
            (std::vector<State>{State::kSpawn, State::kRunning, State::kStopping, State::kReaping, State::kExit}));
  ASSERT_EQ(plan->processes.size(), 1u);
  const ProcessSpec& p = plan->processes[0];
  EXPECT_EQ(p.argv, (std::vector<std::string>{"sh", "-c", "echo hi"}));
  EXPECT_EQ(p.env, (std::vector<EnvVar>{{"PATH", "/bin"}, {"LISTEN_FDS", "1"}}));
  EXPECT_TRUE(p.cwd.empty());
  EXPECT_EQ(p.group, GroupPolicy::kProcessGroup);
  EXPECT_EQ(p.output, OutputPolicy::kInherit);
  EXPECT_FALSE(p.rank.has_value());
  EXPECT_FALSE(plan->rank_table.has_value());
  EXPECT_TRUE(plan->dirs.empty());
  EXPECT_TRUE(plan->files.empty());
}

TEST(ExecPlan, AnEmptyCommandIsRefused) {
  MemoryFileSystem fs;
  PlanInput input;
  input.fs = &fs;
  auto plan = make_plan(input);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message, "no command to run");
}

TEST(ResolveMode, AutoPicksAscendWhenARankTableVariableIsSet) {
  auto mode = [](std::vector<EnvVar> vars) { return resolve_mode(kAutoMode, Environment(std::move(vars))); };
  EXPECT_EQ(mode({}).value(), Mode::kExec);
  EXPECT_EQ(mode({{"RANK_TABLE_FILE", "/user/config"}}).value(), Mode::kAscend);
  EXPECT_EQ(mode({{"RANK_TABLE_FILE_V_1_0", "/t.json"}}).value(), Mode::kAscend);
  EXPECT_EQ(mode({{"RANK_TABLE_FILE", ""}}).value(), Mode::kExec) << "empty is unset";
}

TEST(ResolveMode, AutoPicksTheFrameworkModeMaRunMethodNamesEvenWithARankTable) {
  for (bool table : {false, true}) {
    for (auto [method, expected] : {std::pair{"torchrun", Mode::kTorchrun}, std::pair{"msrun", Mode::kMsrun}}) {
      std::vector<EnvVar> vars = {{"MA_RUN_METHOD", method}};
      if (table)
        vars.push_back({"RANK_TABLE_FILE", "/user/config"});
      auto mode = resolve_mode(kAutoMode, Environment(vars));
      ASSERT_TRUE(mode.ok()) << mode.error().message;
      EXPECT_EQ(*mode, expected) << method;
    }
  }
}

TEST(ResolveMode, AnUnknownMaRunMethodIsAnErrorNamingIt) {
  auto unknown = resolve_mode(kAutoMode, Environment(std::vector<EnvVar>{{"MA_RUN_METHOD", "mpirun"}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(unknown.error().message.starts_with("MA_RUN_METHOD=\"mpirun\": unknown launch method"));
}

TEST(ResolveMode, AnExplicitModeWins) {
  Environment env(std::vector<EnvVar>{{"MA_RUN_METHOD", "torchrun"}, {"RANK_TABLE_FILE", "/user/config"}});
  EXPECT_EQ(resolve_mode(Mode::kExec, env).value(), Mode::kExec);
  EXPECT_EQ(resolve_mode(Mode::kAscend, env).value(), Mode::kAscend);
}

TEST(StateNames, MatchTheDesign) {
  EXPECT_EQ(state_name(State::kWaitRankTable), "wait_rank_table");
  EXPECT_EQ(state_name(State::kResolvePeers), "resolve_peers");
  EXPECT_EQ(state_name(State::kStartSshd), "start_sshd");
  EXPECT_EQ(state_name(State::kWaitPeers), "wait_peers");
  EXPECT_EQ(state_name(State::kHostBarrier), "host_barrier");
  EXPECT_EQ(state_name(State::kSpawn), "spawn");
  EXPECT_EQ(state_name(State::kRunning), "running");
  EXPECT_EQ(state_name(State::kStopping), "stopping");
  EXPECT_EQ(state_name(State::kReaping), "reaping");
  EXPECT_EQ(state_name(State::kExit), "exit");
}

}  // namespace
}  // namespace trainit

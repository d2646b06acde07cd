#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cmd/plan_cmd.h"
#include "os/fs.h"

namespace trainit {
namespace {

// `trainit plan ARGS...` in the environment `vars`.
CommandOutput run(std::vector<std::string> args, std::vector<EnvVar> vars = {}) {
  static MemoryFileSystem fs;
  args.insert(args.begin(), "plan");
  std::vector<const char*> argv;
  for (const std::string& a : args) {
    argv.push_back(a.c_str());
  }
  std::vector<std::string> entries;
  for (const EnvVar& v : vars) {
    entries.push_back(v.name + "=" + v.value);
  }
  std::vector<const char*> envp;
  for (const std::string& e : entries) {
    envp.push_back(e.c_str());
  }
  envp.push_back(nullptr);
  return plan_command(static_cast<int>(argv.size()), argv.data(), envp.data(), fs);
}

void expect_usage_error(const CommandOutput& out, std::string_view message) {
  EXPECT_EQ(out.exit_code, 64);
  EXPECT_EQ(out.out, "");
  EXPECT_EQ(out.err, "trainit: error: " + std::string(message) + "\n");
}

TEST(PlanCommand, PrintsThePlanAndExitsZero) {
  CommandOutput out = run({"--mode", "exec", "--", "echo", "--mode"});
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.err, "");
  auto doc = nlohmann::json::parse(out.out);
  EXPECT_EQ(doc["mode"], "exec");
  EXPECT_EQ(doc["processes"][0]["argv"], nlohmann::json::array({"echo", "--mode"}));
}

TEST(PlanCommand, TheCommandMayStartWithoutDoubleDash) {
  CommandOutput out = run({"--mode=exec", "python", "-u", "train.py"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(nlohmann::json::parse(out.out)["processes"][0]["argv"],
            nlohmann::json::array({"python", "-u", "train.py"}));
}

TEST(PlanCommand, UsageErrorsExit64WithOneLine) {
  expect_usage_error(run({}), "plan: no program given to run (see trainit plan --help)");
  expect_usage_error(run({"--"}), "plan: no program given to run (see trainit plan --help)");
  expect_usage_error(run({"--", ""}), "plan: the program's name is empty (see trainit plan --help)");
  expect_usage_error(run({"--mode", "horovod", "--", "x"}),
                     "plan: --mode \"horovod\": expected auto, exec, ascend, mpi, torchrun, torchrun-exec, msrun, "
                     "msrun-exec, pytorch, "
                     "tensorflow (see trainit plan --help)");
  expect_usage_error(run({"--mode"}), "plan: --mode needs a value (see trainit plan --help)");
  expect_usage_error(run({"--max-local-devices", "0", "x"}),
                     "plan: --max-local-devices \"0\": expected an integer in 1-4096 (see trainit plan --help)");
  expect_usage_error(run({"--max-local-devices=abc", "x"}),
                     "plan: --max-local-devices \"abc\": expected an integer in 1-4096 (see trainit plan --help)");
  expect_usage_error(run({"--frobnicate", "x"}), "plan: unknown option \"--frobnicate\" (see trainit plan --help)");
  expect_usage_error(run({"x"}, {{"TRAINIT_MODE", "horovod"}}),
                     "plan: TRAINIT_MODE=\"horovod\": expected auto, exec, ascend, mpi, torchrun, torchrun-exec, "
                     "msrun, msrun-exec, pytorch, "
                     "tensorflow (see trainit plan --help)");
}

// What a run refuses as a bad option, the plan refuses alike (64): --restart
// always in a job mode, and restarts of an MPI job of several hosts.
TEST(PlanCommand, RestartsAJobModeCannotGiveAreUsageErrorsAsInTheRun) {
  const std::vector<EnvVar> one = {{"PATH", "/usr/bin"}, {"HOME", "/root"}, {"MA_VJ_NAME", "j"}};
  std::vector<EnvVar> two = one;
  two.push_back({"MA_NUM_HOSTS", "2"});
  two.push_back({"MA_TASK_INDEX", "0"});
  expect_usage_error(run({"--mode", "torchrun", "--restart", "always", "--", "x"}, one),
                     "--restart always (TRAINIT_RESTART) is exec mode's: a job that ended well is done (the torchrun "
                     "mode restarts on-failure only)");
  EXPECT_EQ(run({"--mode", "mpi", "--", "x"},
                {{"PATH", "/usr/bin"}, {"HOME", "/root"}, {"MA_VJ_NAME", "j"}, {"TRAINIT_RESTART", "always"}})
                .exit_code,
            64);
  const CommandOutput mpi = run({"--mode", "mpi", "--restart", "on-failure", "--", "x"}, two);
  EXPECT_EQ(mpi.exit_code, 64) << mpi.err;
  EXPECT_NE(mpi.err.find("with --mode mpi on several hosts: not supported"), std::string::npos) << mpi.err;
  EXPECT_EQ(run({"--mode", "mpi", "--restart", "on-failure", "--", "x"}, one).exit_code, 0) << "one host restarts";
  EXPECT_EQ(run({"--mode", "torchrun", "--restart", "on-failure", "--", "x"}, two).exit_code, 0);
}

TEST(PlanCommand, HelpPrintsUsageAndExitsZero) {
  CommandOutput out = run({"--help"});
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_TRUE(out.out.starts_with("usage: trainit plan "));
  EXPECT_EQ(run({"-h"}).out, out.out);
}

TEST(PlanCommand, RefusedConfigurationExits78WithOneLine) {
  CommandOutput out = run({"--", "python", "train.py"}, {{"MA_RUN_METHOD", "torchrun2"}});
  EXPECT_EQ(out.exit_code, 78);
  EXPECT_EQ(out.out, "");
  EXPECT_TRUE(out.err.starts_with("trainit: error: MA_RUN_METHOD=\"torchrun2\": unknown launch method")) << out.err;
  EXPECT_EQ(out.err.find('\n'), out.err.size() - 1);

  out = run({"--mode", "ascend", "--", "python"}, {{"MA_VJ_NAME", "a/b"}});
  EXPECT_EQ(out.exit_code, 78);
  EXPECT_TRUE(out.err.starts_with("trainit: error: MA_VJ_NAME=\"a/b\": not a safe name")) << out.err;
}

// The run's options, from the command line or their variables, reach the
// planner: a device_id of 40 is refused under the default limit of 16 only.
TEST(PlanCommand, TheRunsOptionsAndVariablesReachThePlanner) {
  EXPECT_EQ(run({"--mode", "exec", "--grace", "2", "--no-drain", "-e", "3", "x"}).exit_code, 0);
  CommandOutput out = run({"x"}, {{"TRAINIT_MODE", "exec"}});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(nlohmann::json::parse(out.out)["mode"], "exec");
  out = run({"x"}, {{"TRAINIT_MODE", "ascend"}, {"MA_VJ_NAME", "a/b"}});
  EXPECT_EQ(out.exit_code, 78) << out.err;
}

TEST(PlanCommand, ShowsEverySettingAndWhereItCameFrom) {
  CommandOutput out =
      run({"--grace", "2", "--", "x"}, {{"TRAINIT_NO_DRAIN", "1"}, {"TRAINIT_GRACE", "30"}, {"TINI_VERBOSITY", "2"}});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.err, "");
  auto settings = nlohmann::json::parse(out.out)["settings"];
  EXPECT_EQ(settings["grace"], (nlohmann::json{{"value", "2"}, {"source", "command line"}}));
  EXPECT_EQ(settings["no-drain"], (nlohmann::json{{"value", "true"}, {"source", "variable TRAINIT_NO_DRAIN"}}));
  EXPECT_EQ(settings["verbosity"], (nlohmann::json{{"value", "2"}, {"source", "variable TINI_VERBOSITY"}}));
  EXPECT_EQ(settings["mode"], (nlohmann::json{{"value", "auto"}, {"source", "default"}}));
  EXPECT_EQ(settings["max-restarts"], (nlohmann::json{{"value", nullptr}, {"source", "default"}}));
  EXPECT_FALSE(settings.contains("help"));
}

TEST(PlanCommand, TrainitsVariablesAreNotInTheChildsEnvironment) {
  CommandOutput out = run({"--mode", "exec", "x"}, {{"PATH", "/bin"},
                                                    {"TRAINIT_GRACE", "2"},
                                                    {"TINI_KILL_PROCESS_GROUP", "1"},
                                                    {"TRAINIT_JOB_SECRET", "s"},
                                                    {"TRAINIT_COLL_TIMEOUT", "30"},
                                                    {"TINI_OTHER", "kept"}});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(nlohmann::json::parse(out.out)["processes"][0]["env"],
            (nlohmann::json{{"PATH", "/bin"}, {"TRAINIT_COLL_TIMEOUT", "30"}, {"TINI_OTHER", "kept"}}));
}

TEST(PlanCommand, UnknownTrainitVariableIsAWarningOnStderr) {
  CommandOutput out = run({"--mode", "exec", "x"}, {{"TRAINIT_GRCAE", "2"}});
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_TRUE(out.err.starts_with("trainit: warning: TRAINIT_GRCAE is not one of trainit's variables")) << out.err;
  EXPECT_EQ(out.err.find('\n'), out.err.size() - 1);
}

}  // namespace
}  // namespace trainit

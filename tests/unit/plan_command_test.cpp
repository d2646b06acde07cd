#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/command.h"
#include "platform/fs.h"

namespace trainit {
namespace {

CommandOutput run(std::vector<std::string> args, std::vector<EnvVar> vars = {}) {
  static MemoryFileSystem fs;
  args.insert(args.begin(), "plan");
  return run_plan_command(args, Environment(std::move(vars)), fs);
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
  expect_usage_error(run({}), "plan: no command given (trainit plan [options] -- COMMAND [ARG...])");
  expect_usage_error(run({"--"}), "plan: no command given (trainit plan [options] -- COMMAND [ARG...])");
  expect_usage_error(run({"--mode", "torchrun", "--", "x"}),
                     "plan: --mode \"torchrun\": not one of ascend, exec, mpi, auto");
  expect_usage_error(run({"--mode"}), "plan: --mode needs a value");
  expect_usage_error(run({"--max-local-devices", "0", "x"}),
                     "plan: --max-local-devices \"0\": not a number in 1..4096");
  expect_usage_error(run({"--max-local-devices=abc", "x"}),
                     "plan: --max-local-devices \"abc\": not a number in 1..4096");
  expect_usage_error(run({"--frobnicate", "x"}), "plan: unknown option \"--frobnicate\" (see trainit plan --help)");
}

TEST(PlanCommand, HelpPrintsUsageAndExitsZero) {
  CommandOutput out = run({"--help"});
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_TRUE(out.out.starts_with("usage: trainit plan "));
  EXPECT_EQ(run({"-h"}).out, out.out);
}

TEST(PlanCommand, RefusedConfigurationExits78WithOneLine) {
  CommandOutput out = run({"--", "python", "train.py"}, {{"MA_RUN_METHOD", "torchrun"}});
  EXPECT_EQ(out.exit_code, 78);
  EXPECT_EQ(out.out, "");
  EXPECT_TRUE(
      out.err.starts_with("trainit: error: MA_RUN_METHOD=torchrun: launching through torchrun is not "
                          "implemented yet"));
  EXPECT_EQ(out.err.find('\n'), out.err.size() - 1);

  out = run({"--mode", "ascend", "--", "python"}, {{"MA_VJ_NAME", "a/b"}});
  EXPECT_EQ(out.exit_code, 78);
  EXPECT_TRUE(out.err.starts_with("trainit: error: MA_VJ_NAME=\"a/b\": not a safe name")) << out.err;
}

TEST(PlanCommand, MaxLocalDevicesReachesThePlanner) {
  auto args = parse_plan_args(std::vector<std::string>{"plan", "--max-local-devices", "64", "--", "x"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(args->options.max_local_devices, 64u);
  EXPECT_EQ(args->options.mode, RequestedMode::kAuto);
  EXPECT_EQ(args->command, (std::vector<std::string>{"x"}));
}

}  // namespace
}  // namespace trainit

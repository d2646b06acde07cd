#include "cli.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "plan/command.h"

namespace trainit {
namespace {

struct Parsed {
  Result<Options> result;
};

Result<Options> parse(std::vector<const char*> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "trainit");
  return parse_cli(static_cast<int>(args.size()), args.data(), [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Cli, CommandAfterDoubleDashKeepsItsOwnFlags) {
  auto o = parse({"-v", "--", "sh", "-c", "exit 3"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->verbosity, 2);
  EXPECT_EQ(o->command, (std::vector<std::string>{"sh", "-c", "exit 3"}));
}

TEST(Cli, FirstNonOptionStartsTheCommandLikeTini) {
  auto o = parse({"-g", "sleep", "-x"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->kill_process_group);
  EXPECT_EQ(o->command, (std::vector<std::string>{"sleep", "-x"}));
}

TEST(Cli, ClusteredAndAttachedShortOptions) {
  auto o = parse({"-vvw", "-e143", "-e", "2", "-pSIGKILL", "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->verbosity, 3);
  EXPECT_TRUE(o->warn_on_reap);
  EXPECT_TRUE(o->exit_zero.test(143));
  EXPECT_TRUE(o->exit_zero.test(2));
  EXPECT_FALSE(o->exit_zero.test(1));
  EXPECT_EQ(o->parent_death_signal, SIGKILL);
}

TEST(Cli, GraceAcceptsFractionsInBothSpellings) {
  auto a = parse({"--grace", "0.25", "true"});
  auto b = parse({"--grace=3", "true"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->grace, std::chrono::milliseconds(250));
  EXPECT_EQ(b->grace, std::chrono::seconds(3));
  EXPECT_EQ(parse({"true"})->grace, std::chrono::seconds(8));
}

TEST(Cli, BeyondTiniOptions) {
  auto o = parse(
      {"--stop-delay", "1.5", "--no-drain", "--forward-only", "--restart=on-failure", "--max-restarts", "4", "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->stop_delay, std::chrono::milliseconds(1500));
  EXPECT_FALSE(o->drain);
  EXPECT_TRUE(o->forward_only);
  EXPECT_EQ(o->restart, Restart::kOnFailure);
  EXPECT_EQ(o->max_restarts, 4);
  auto d = parse({"true"});
  EXPECT_TRUE(d->drain);
  EXPECT_FALSE(d->forward_only);
  EXPECT_EQ(d->restart, Restart::kNo);
  EXPECT_EQ(d->max_restarts, -1);
  EXPECT_EQ(parse({"--restart", "always", "true"})->restart, Restart::kAlways);
}

TEST(Cli, TiniVariablesSetTheirFlags) {
  auto o = parse({"true"}, {{"TINI_SUBREAPER", ""}, {"TINI_KILL_PROCESS_GROUP", "1"}, {"TINI_VERBOSITY", "3"}});
  ASSERT_TRUE(o.ok());  // TINI_SUBREAPER is accepted: trainit is a subreaper whenever it is not PID 1
  EXPECT_TRUE(o->kill_process_group);
  EXPECT_EQ(o->verbosity, 3);
}

TEST(Cli, HelpVersionAndLicenseNeedNoCommand) {
  EXPECT_EQ(parse({"-h"})->action, Action::kHelp);
  EXPECT_EQ(parse({"--help"})->action, Action::kHelp);
  EXPECT_EQ(parse({"--version"})->action, Action::kVersion);
  EXPECT_EQ(parse({"-l"})->action, Action::kLicense);
}

TEST(Cli, BadInputIsAOneLineErrorNamingTheProblem) {
  struct Case {
    std::vector<const char*> args;
    std::map<std::string, std::string> env;
    const char* needle;
  };
  const Case cases[] = {
      {{"-x", "true"}, {}, "unknown option '-x'"},
      {{"--bogus", "true"}, {}, "unknown option '--bogus'"},
      {{}, {}, "no program"},
      {{"-v"}, {}, "no program"},
      {{"-p", "SIGNOPE", "true"}, {}, "unknown signal 'SIGNOPE'"},
      {{"-e", "256", "true"}, {}, "'256'"},
      {{"-e", "-1", "true"}, {}, "'-1'"},
      {{"-e", "x", "true"}, {}, "'x'"},
      {{"-e"}, {}, "-e needs a value"},
      {{"--grace", "-1", "true"}, {}, "'-1'"},
      {{"--grace", "1e3", "true"}, {}, "'1e3'"},
      {{"--grace"}, {}, "--grace needs a value"},
      {{"--stop-delay", "soon", "true"}, {}, "'soon'"},
      {{"--restart", "sometimes", "true"}, {}, "'sometimes'"},
      {{"--max-restarts", "-2", "true"}, {}, "'-2'"},
      {{"--no-drain=1", "true"}, {}, "unknown option '--no-drain=1'"},
      {{"true"}, {{"TINI_VERBOSITY", "loud"}}, "TINI_VERBOSITY"},
  };
  for (const auto& c : cases) {
    auto o = parse(c.args, c.env);
    ASSERT_FALSE(o.ok()) << c.needle;
    EXPECT_NE(o.error().message.find(c.needle), std::string::npos) << o.error().message;
    EXPECT_EQ(o.error().message.find('\n'), std::string::npos);
  }
}

// Every number of the command line and its variables has the one form of
// base/number.h: digits without sign or leading zero.
TEST(Cli, NumbersTakeTheOneDecimalForm) {
  EXPECT_TRUE(parse({"-e", "0", "-e", "255", "true"}).ok());
  EXPECT_TRUE(parse({"--max-restarts", "0", "true"}).ok());
  for (const char* bad : {"016", "+1", "-0", " 1", "1 ", "0x1", "1e2"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse({"-e", bad, "true"}).ok());
    EXPECT_FALSE(parse({"--max-restarts", bad, "true"}).ok());
    EXPECT_FALSE(parse({"true"}, {{"TINI_VERBOSITY", bad}}).ok());
  }
  EXPECT_FALSE(parse({"--grace", "08", "true"}).ok());
}

// The run and `trainit plan` accept the same --max-local-devices values, up
// to the same limit, and read them alike.
TEST(Cli, MaxLocalDevicesTakesTheSameValuesAsTrainitPlan) {
  const std::string max = std::to_string(kMaxLocalDevices);
  const std::string over = std::to_string(kMaxLocalDevices + 1);
  for (const std::string& value : {std::string("1"), std::string("16"), std::string("4096"), max, std::string("0"),
                                   over, std::string("016"), std::string("+8"), std::string("-1"), std::string("8 "),
                                   std::string("0x10"), std::string(""), std::string("99999999999999999999")}) {
    SCOPED_TRACE("--max-local-devices '" + value + "'");
    auto run = parse({"--max-local-devices", value.c_str(), "true"});
    auto plan = parse_plan_args(std::vector<std::string>{"plan", "--max-local-devices", value, "--", "true"});
    ASSERT_EQ(run.ok(), plan.ok()) << (run.ok() ? plan.error().message : run.error().message);
    if (run.ok()) {
      EXPECT_EQ(run->max_local_devices, plan->options.max_local_devices);
      EXPECT_EQ(std::to_string(run->max_local_devices), value);
    } else {
      EXPECT_NE(run.error().message.find("1-" + max), std::string::npos) << run.error().message;
      EXPECT_NE(plan.error().message.find("1.." + max), std::string::npos) << plan.error().message;
    }
  }
  EXPECT_EQ(kMaxLocalDevices, 4096u);
  EXPECT_TRUE(parse({"--max-local-devices=1025", "true"}).ok());
  EXPECT_TRUE(parse_plan_args(std::vector<std::string>{"plan", "--max-local-devices=1025", "x"}).ok());
}

}  // namespace
}  // namespace trainit

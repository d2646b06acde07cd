#include "exec/cli.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/env.h"
#include "cmd/plan_cmd.h"
#include "os/fs.h"
#include "tools/options_doc.h"

namespace trainit {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

Result<Options> parse(std::vector<const char*> args, const Env& env = {}) {
  args.insert(args.begin(), "trainit");
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) {
    entries.push_back(name + "=" + value);
  }
  std::vector<const char*> envp;
  for (const std::string& e : entries) {
    envp.push_back(e.c_str());
  }
  envp.push_back(nullptr);
  return parse_cli(static_cast<int>(args.size()), args.data(), envp.data());
}

// The setting `name` of `o`, as trainit plan shows it.
Setting setting(const Options& o, std::string_view name) {
  for (Setting& s : settings_of(o)) {
    if (s.name == name) {
      return s;
    }
  }
  ADD_FAILURE() << "no setting " << name;
  return {};
}

const OptionSpec* option(std::string_view name) {
  for (const OptionSpec& o : option_table()) {
    if (o.name == name) {
      return &o;
    }
  }
  return nullptr;
}

TEST(Cli, CommandAfterDoubleDashKeepsItsOwnFlags) {
  auto o = parse({"-v", "--", "sh", "-c", "exit 3"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->verbosity, 2);
  EXPECT_EQ(o->command, (std::vector<std::string>{"sh", "-c", "exit 3"}));
}

// -v takes no value, as tini's: in `trainit -v 3 -- prog` the program is 3.
TEST(Cli, DashVTakesNoValueSoTheWordAfterItIsTheProgram) {
  auto o = parse({"-v", "3", "--", "prog"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->verbosity, 2);
  EXPECT_EQ(o->command, (std::vector<std::string>{"3", "--", "prog"}));
}

// A job mode's levels count from 2 unless a level was given: -v alone is
// not a level, --verbosity N and the variables are.
TEST(Cli, OnlyALevelGivenOutrightIsMarkedGiven) {
  EXPECT_FALSE(parse({"true"})->verbosity_given);
  EXPECT_FALSE(parse({"-vv", "true"})->verbosity_given);
  EXPECT_TRUE(parse({"--verbosity", "1", "true"})->verbosity_given);
  EXPECT_TRUE(parse({"true"}, {{"TRAINIT_VERBOSITY", "1"}})->verbosity_given);
  EXPECT_TRUE(parse({"true"}, {{"TINI_VERBOSITY", "1"}})->verbosity_given);
  EXPECT_FALSE(parse({"-v", "true"}, {{"TRAINIT_VERBOSITY", "1"}})->verbosity_given) << "-v leaves it unread";
}

// -v counts up to the highest level --verbosity takes (10), so that what
// `trainit plan` shows can be given back (found by tests/fuzz/cli.cpp).
TEST(Cli, RepeatedDashVStopsAtTheHighestVerbosity) {
  auto o = parse({"-vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv", "--verbosity", "10", "-v", "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->verbosity, 10);
  EXPECT_EQ(setting(*o, "verbosity").value, "10");
  auto back = parse({"true"}, {{"TRAINIT_VERBOSITY", *setting(*o, "verbosity").value}});
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->verbosity, 10);
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
    Env env;
    const char* needle;
  };
  const Case cases[] = {
      {{"-x", "true"}, {}, "unknown option \"-x\""},
      {{"--bogus", "true"}, {}, "unknown option \"--bogus\""},
      {{}, {}, "no program"},
      {{"-v"}, {}, "no program"},
      {{""}, {}, "the program's name is empty"},
      {{"--", "", "x"}, {}, "the program's name is empty"},
      {{"-p", "SIGNOPE", "true"}, {}, "-p \"SIGNOPE\": unknown signal"},
      {{"-e", "256", "true"}, {}, "-e \"256\": expected an exit code in 0-255"},
      {{"-e", "-1", "true"}, {}, "\"-1\""},
      {{"-e", "x", "true"}, {}, "\"x\""},
      {{"-e"}, {}, "-e needs a value"},
      {{"--grace", "-1", "true"}, {}, "--grace \"-1\": expected seconds"},
      {{"--grace", "1e3", "true"}, {}, "\"1e3\""},
      {{"--grace"}, {}, "--grace needs a value"},
      {{"--stop-delay", "soon", "true"}, {}, "\"soon\""},
      {{"--restart", "sometimes", "true"}, {}, "--restart \"sometimes\": expected no, on-failure or always"},
      {{"--max-restarts", "-2", "true"}, {}, "\"-2\""},
      {{"--no-drain=1", "true"}, {}, "--no-drain takes no value"},
      {{"--verbosity"}, {}, "--verbosity needs a value"},
      {{"--grace", "1\n2", "true"}, {}, "\"1\\x0a2\""},
      {{"true"}, {{"TINI_VERBOSITY", "loud"}}, "TINI_VERBOSITY=\"loud\": expected an integer in 0-10"},
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

TEST(Cli, MaxLocalDevicesTakesOneToTheLimit) {
  const std::string max = std::to_string(kMaxLocalDevices);
  EXPECT_EQ(kMaxLocalDevices, 4096u);
  for (const std::string& value : {std::string("1"), std::string("16"), std::string("1025"), max}) {
    auto run = parse({"--max-local-devices", value.c_str(), "true"});
    ASSERT_TRUE(run.ok()) << run.error().message;
    EXPECT_EQ(std::to_string(run->max_local_devices), value);
  }
  for (const std::string& value : {std::string("0"), std::to_string(kMaxLocalDevices + 1), std::string("016"),
                                   std::string("+8"), std::string("-1"), std::string("8 "), std::string("0x10"),
                                   std::string(""), std::string("99999999999999999999")}) {
    auto run = parse({"--max-local-devices", value.c_str(), "true"});
    ASSERT_FALSE(run.ok()) << value;
    EXPECT_NE(run.error().message.find("1-" + max), std::string::npos) << run.error().message;
  }
}

// --- The table ----------------------------------------------------------------

// tini's one-letter flags each have a long name, so that they have a variable.
TEST(Cli, TiniShortFlagsHaveLongNames) {
  auto o = parse({"--verbosity", "3", "--subreaper", "--parent-death-signal", "SIGKILL", "--kill-process-group",
                  "--warn-on-reap", "--exit-zero", "2", "--exit-zero=143", "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->verbosity, 3);
  EXPECT_EQ(o->parent_death_signal, SIGKILL);
  EXPECT_TRUE(o->kill_process_group);
  EXPECT_TRUE(o->warn_on_reap);
  EXPECT_TRUE(o->exit_zero.test(2));
  EXPECT_TRUE(o->exit_zero.test(143));
  EXPECT_EQ(parse({"--license"})->action, Action::kLicense);
  for (const OptionSpec& spec : option_table()) {
    EXPECT_FALSE(spec.name.empty());
    EXPECT_NE(spec.name.size(), 1u) << spec.name;
  }
}

// A valid value for each option, different from its default, and how `trainit
// plan` shows it. A new option must add its line here.
struct Sample {
  const char* value;  // on the command line and in TRAINIT_<NAME>
  const char* shown;  // settings_of()'s value
  const char* other;  // another valid value, for the precedence check
};
const std::map<std::string, Sample, std::less<>> kSamples = {
    {"verbosity", {"3", "3", "0"}},
    {"subreaper", {"1", nullptr, "0"}},
    {"parent-death-signal", {"SIGKILL", "SIGKILL", "TERM"}},
    {"kill-process-group", {"1", "true", "0"}},
    {"warn-on-reap", {"1", "true", "0"}},
    {"exit-zero", {"143", "143", "2"}},
    {"grace", {"0.3", "0.3", "30"}},
    {"stop-delay", {"1.5", "1.5", "2"}},
    {"no-drain", {"1", "true", "0"}},
    {"forward-only", {"1", "true", "0"}},
    {"restart", {"on-failure", "on-failure", "always"}},
    {"max-restarts", {"4", "4", "5"}},
    {"ready", {"notify", "notify", "spawn"}},
    {"mode", {"ascend", "ascend", "exec"}},
    {"coll-arena", {"64M", "67108864", "off"}},
    {"hang-timeout", {"30", "30", "60"}},
    {"hang-action", {"stop", "stop", "report"}},
    {"preflight", {"devices", "devices", "none"}},
    {"preflight-timeout", {"2.5", "2.5", "10"}},
    {"device-check", {"/opt/trainit-device-check", "/opt/trainit-device-check", "/usr/lib/trainit-device-check"}},
    {"nproc-per-node", {"4", "4", "8"}},
    {"master-port", {"29501", "29501", "29502"}},
    {"rank-table-timeout", {"60", "60", "70"}},
    {"max-local-devices", {"32", "32", "8"}},
    {"status-file", {"/run/status.json", "/run/status.json", "/tmp/other.json"}},
    {"termination-log", {"off", "off", "/tmp/termination-log"}},
    {"peer-timeout", {"30", "30", "40"}},
    {"barrier-timeout", {"90", "90", "120"}},
    {"peer-loss", {"3", "3", "5"}},
    {"control-port", {"40000", "40000", "40001"}},
    {"job-secret-file", {"/run/secret", "/run/secret", "/tmp/secret"}},
    {"ssh-authorized-keys", {"/etc/keys", "/etc/keys", "/tmp/keys"}},
    {"ssh-identity", {"/etc/id", "/etc/id", "/tmp/id"}},
    {"private-dir", {"/run/trainit", "/run/trainit", "/tmp/trainit"}},
    {"as-user", {"ma-user", "ma-user", "root"}},
    {"user", {"ma-user", "ma-user", "1000:100"}},
    {"caps", {"drop", "drop", "CAP_IPC_LOCK"}},
    {"no-new-privs", {"1", "true", "0"}},
    {"allow-job-ptrace", {"1", "true", "0"}},
    {"redact", {"WANDB_*", "WANDB_*", "MLFLOW_*"}},
};

// The words of the command line that give `spec` the value `value`.
std::vector<const char*> words(const OptionSpec& spec, const char* value, std::string& storage) {
  storage = "--" + std::string(spec.name);
  if (spec.kind == Kind::kFlag) {
    return {storage.c_str()};
  }
  return {storage.c_str(), value};
}

TEST(Cli, EveryOptionHasAVariableNamedAfterItsLongName) {
  EXPECT_EQ(variable_name(*option("grace")), "TRAINIT_GRACE");
  EXPECT_EQ(variable_name(*option("no-drain")), "TRAINIT_NO_DRAIN");
  EXPECT_EQ(variable_name(*option("max-local-devices")), "TRAINIT_MAX_LOCAL_DEVICES");
  EXPECT_EQ(variable_name(*option("help")), "");  // actions have none
  for (const OptionSpec& spec : option_table()) {
    if (spec.kind == Kind::kAction) {
      continue;
    }
    SCOPED_TRACE(std::string(spec.name));
    auto sample = kSamples.find(spec.name);
    ASSERT_NE(sample, kSamples.end()) << "add the option to kSamples";
    const std::string variable = variable_name(spec);
    auto by_default = parse({"true"});
    auto by_variable = parse({"true"}, {{variable, sample->second.value}});
    ASSERT_TRUE(by_default.ok() && by_variable.ok()) << by_variable.error().message;
    std::string storage;
    auto args = words(spec, sample->second.value, storage);
    args.push_back("true");
    auto by_command_line = parse(args);
    ASSERT_TRUE(by_command_line.ok()) << by_command_line.error().message;

    EXPECT_EQ(setting(*by_default, spec.name).source, "default");
    EXPECT_EQ(setting(*by_variable, spec.name).source, "variable " + variable);
    EXPECT_EQ(setting(*by_command_line, spec.name).source, "command line");
    const std::optional<std::string> shown =
        sample->second.shown ? std::optional<std::string>(sample->second.shown) : std::nullopt;
    EXPECT_EQ(setting(*by_variable, spec.name).value, shown);
    EXPECT_EQ(setting(*by_command_line, spec.name).value, shown);
    if (shown) {
      EXPECT_NE(setting(*by_default, spec.name).value, shown) << "the sample is the default: pick another";
    }
  }
}

TEST(Cli, CommandLineWinsOverTheVariable) {
  for (const OptionSpec& spec : option_table()) {
    if (spec.kind == Kind::kAction) {
      continue;
    }
    SCOPED_TRACE(std::string(spec.name));
    const Sample& sample = kSamples.at(std::string(spec.name));
    std::string storage;
    auto args = words(spec, sample.value, storage);
    args.push_back("true");
    auto both = parse(args, {{variable_name(spec), sample.other}});
    auto alone = parse(args);
    ASSERT_TRUE(both.ok() && alone.ok()) << both.error().message;
    EXPECT_EQ(setting(*both, spec.name).source, "command line");
    EXPECT_EQ(setting(*both, spec.name).value, setting(*alone, spec.name).value);
  }
  // A list on the command line replaces the variable's, not adds to it.
  auto e = parse({"-e", "3", "true"}, {{"TRAINIT_EXIT_ZERO", "1,2"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->exit_zero.count(), 1u);
  EXPECT_TRUE(e->exit_zero.test(3));
  // -v counts from the default, not from the variable's level.
  EXPECT_EQ(parse({"-v", "true"}, {{"TINI_VERBOSITY", "3"}})->verbosity, 2);
  // The variable the command line overrides is not even read.
  auto ignored = parse({"--grace", "2", "true"}, {{"TRAINIT_GRACE", "soon"}});
  ASSERT_TRUE(ignored.ok()) << ignored.error().message;
  EXPECT_EQ(ignored->grace, std::chrono::seconds(2));
}

TEST(Cli, TrainitVariableWinsOverTinis) {
  auto o = parse({"true"}, {{"TINI_VERBOSITY", "3"}, {"TRAINIT_VERBOSITY", "0"}});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->verbosity, 0);
  EXPECT_EQ(setting(*o, "verbosity").source, "variable TRAINIT_VERBOSITY");
  auto g = parse({"true"}, {{"TRAINIT_KILL_PROCESS_GROUP", "0"}, {"TINI_KILL_PROCESS_GROUP", "1"}});
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->kill_process_group);
  auto t = parse({"true"}, {{"TINI_VERBOSITY", "3"}});
  EXPECT_EQ(setting(*t, "verbosity").source, "variable TINI_VERBOSITY");
}

TEST(Cli, FlagVariablesTakeYesAndNoWords) {
  for (const char* on : {"1", "true", "yes", "on", "TRUE", "Yes", "ON"}) {
    auto o = parse({"true"}, {{"TRAINIT_NO_DRAIN", on}, {"TRAINIT_FORWARD_ONLY", on}});
    ASSERT_TRUE(o.ok()) << on;
    EXPECT_FALSE(o->drain) << on;
    EXPECT_TRUE(o->forward_only) << on;
  }
  for (const char* off : {"0", "false", "no", "off", "False", "NO"}) {
    auto o = parse({"true"}, {{"TRAINIT_NO_DRAIN", off}, {"TRAINIT_FORWARD_ONLY", off}});
    ASSERT_TRUE(o.ok()) << off;
    EXPECT_TRUE(o->drain) << off;
    EXPECT_FALSE(o->forward_only) << off;
  }
  for (const char* bad : {"2", "y", "enabled", "1 ", " on", "-1"}) {
    auto o = parse({"true"}, {{"TRAINIT_NO_DRAIN", bad}});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.error().message.find("TRAINIT_NO_DRAIN=\"" + std::string(bad) + "\""), std::string::npos)
        << o.error().message;
  }
}

TEST(Cli, BadVariableValueIsAUsageErrorNamingTheVariableAndTheValue) {
  const std::pair<Env, const char*> cases[] = {
      {{{"TRAINIT_GRACE", "soon"}}, "TRAINIT_GRACE=\"soon\": expected seconds such as 8 or 0.5"},
      {{{"TRAINIT_MODE", "torchrun2"}},
       "TRAINIT_MODE=\"torchrun2\": expected auto, exec, ascend, mpi, torchrun, torchrun-exec, msrun, msrun-exec, "
       "pytorch, tensorflow"},
      {{{"TRAINIT_RESTART", "sometimes"}}, "TRAINIT_RESTART=\"sometimes\": expected no, on-failure or always"},
      {{{"TRAINIT_EXIT_ZERO", "143,x"}}, "TRAINIT_EXIT_ZERO=\"143,x\": \"x\": expected an exit code in 0-255"},
      {{{"TRAINIT_STATUS_FILE", "status.json"}}, "TRAINIT_STATUS_FILE=\"status.json\": expected an absolute path"},
      {{{"TRAINIT_PARENT_DEATH_SIGNAL", "SIGNOPE"}}, "TRAINIT_PARENT_DEATH_SIGNAL=\"SIGNOPE\": unknown signal"},
      {{{"TRAINIT_MAX_LOCAL_DEVICES", "0"}}, "TRAINIT_MAX_LOCAL_DEVICES=\"0\": expected an integer in 1-4096"},
      {{{"TRAINIT_MAX_RESTARTS", "-1"}}, "TRAINIT_MAX_RESTARTS=\"-1\""},
      {{{"TRAINIT_VERBOSITY", "11"}}, "TRAINIT_VERBOSITY=\"11\": expected an integer in 0-10"},
      {{{"TRAINIT_GRACE", "1\n2"}}, "TRAINIT_GRACE=\"1\\x0a2\""},
  };
  for (const auto& [env, needle] : cases) {
    auto o = parse({"true"}, env);
    ASSERT_FALSE(o.ok()) << needle;
    EXPECT_NE(o.error().message.find(needle), std::string::npos) << o.error().message;
    EXPECT_EQ(o.error().message.find('\n'), std::string::npos);
  }
}

TEST(Cli, ExitZeroVariableIsAListOfCodes) {
  auto o = parse({"true"}, {{"TRAINIT_EXIT_ZERO", "143, 2 ,7\t9"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->exit_zero.count(), 4u);
  for (std::size_t code : {143u, 2u, 7u, 9u}) {
    EXPECT_TRUE(o->exit_zero.test(code)) << code;
  }
  EXPECT_EQ(setting(*o, "exit-zero").value, "2,7,9,143");
}

TEST(Cli, EmptyVariableCountsAsUnset) {
  auto o = parse({"true"}, {{"TRAINIT_GRACE", ""}, {"TRAINIT_NO_DRAIN", ""}, {"TINI_VERBOSITY", ""}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->grace, std::chrono::seconds(8));
  EXPECT_TRUE(o->drain);
  EXPECT_EQ(o->verbosity, 1);
  EXPECT_EQ(setting(*o, "grace").source, "default");
}

// TINI_KILL_PROCESS_GROUP and TINI_SUBREAPER set at all turn their flag on,
// whatever their value, as in tini.
TEST(Cli, TiniFlagVariablesAreOnWhenSet) {
  for (const char* value : {"", "0", "1", "anything"}) {
    auto o = parse({"true"}, {{"TINI_KILL_PROCESS_GROUP", value}, {"TINI_SUBREAPER", value}});
    ASSERT_TRUE(o.ok()) << value;
    EXPECT_TRUE(o->kill_process_group) << value;
    EXPECT_EQ(setting(*o, "subreaper").source, "variable TINI_SUBREAPER");
  }
}

TEST(Cli, UnknownTrainitVariableIsAWarningNamingIt) {
  auto o = parse({"true"}, {{"TRAINIT_GRCAE", "2"}, {"PATH", "/bin"}, {"TINI_UNKNOWN", "1"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->warnings.size(), 1u);
  EXPECT_NE(o->warnings[0].find("TRAINIT_GRCAE"), std::string::npos) << o->warnings[0];
  EXPECT_NE(o->warnings[0].find("did you mean TRAINIT_GRACE?"), std::string::npos) << o->warnings[0];
  EXPECT_EQ(o->warnings[0].find('\n'), std::string::npos);
  EXPECT_EQ(o->grace, std::chrono::seconds(8));
  // Actions have no variable; lower case is not the variable's name.
  for (const char* name : {"TRAINIT_HELP", "TRAINIT_grace", "TRAINIT_", "TRAINIT_NO-DRAIN", "TRAINIT_GRACE_"}) {
    auto w = parse({"true"}, {{name, "1"}});
    ASSERT_TRUE(w.ok()) << name;
    EXPECT_EQ(w->warnings.size(), 1u) << name;
  }
  // No suggestion when nothing is close.
  auto far = parse({"true"}, {{"TRAINIT_SOMETHING_ELSE", "1"}});
  ASSERT_EQ(far->warnings.size(), 1u);
  EXPECT_EQ(far->warnings[0].find("did you mean"), std::string::npos) << far->warnings[0];
}

TEST(Cli, DocumentedVariablesThatAreNoOptionsAreNotWarnedAbout) {
  Env env;
  for (const DocumentedVariable& v : kDocumentedVariables) {
    env.emplace_back(std::string(v.name), "x");
    EXPECT_TRUE(v.name.starts_with("TRAINIT_")) << v.name;
    for (const OptionSpec& spec : option_table()) {
      EXPECT_NE(v.name, variable_name(spec)) << "an option's variable need not be listed";
    }
  }
  auto o = parse({"true"}, env);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->warnings.empty()) << o->warnings[0];
  // The example of a documented variable that is no option.
  EXPECT_TRUE(std::any_of(std::begin(kDocumentedVariables), std::end(kDocumentedVariables),
                          [](const DocumentedVariable& v) { return v.name == "TRAINIT_JOB_SECRET"; }));
}

// Every variable of an option, trainit's and tini's, stays away from PROGRAM
// and the ranks (base/env.h, the filter the run and `trainit plan` use).
TEST(Cli, OptionVariablesAreWithheldFromChildren) {
  for (const OptionSpec& spec : option_table()) {
    if (spec.kind == Kind::kAction) {
      continue;
    }
    EXPECT_TRUE(is_withheld_from_children(variable_name(spec) + "=1")) << spec.name;
    if (!spec.tini_variable.empty()) {
      EXPECT_TRUE(is_withheld_from_children(std::string(spec.tini_variable) + "=1")) << spec.tini_variable;
    }
  }
}

TEST(Cli, HelpListsEveryOptionWithItsVariables) {
  const std::string help = usage_text();
  for (const OptionSpec& spec : option_table()) {
    EXPECT_NE(help.find("--" + std::string(spec.name)), std::string::npos) << spec.name;
    if (spec.short_name != 0 && spec.kind != Kind::kLevel) {
      EXPECT_NE(help.find(std::string("-") + spec.short_name + ", --" + std::string(spec.name)), std::string::npos)
          << spec.name;
    }
    if (spec.kind == Kind::kLevel) {  // -v takes no value: a line of its own, apart from --verbosity N
      EXPECT_NE(help.find(std::string("\n  -") + spec.short_name + "   "), std::string::npos) << spec.name;
      EXPECT_EQ(help.find(std::string("-") + spec.short_name + ", --" + std::string(spec.name)), std::string::npos)
          << spec.name;
    }
    if (spec.kind != Kind::kAction) {
      EXPECT_NE(help.find("env: " + variable_name(spec)), std::string::npos) << spec.name;
    }
    if (!spec.tini_variable.empty()) {
      EXPECT_NE(help.find(std::string(spec.tini_variable)), std::string::npos) << spec.name;
    }
  }
  for (const DocumentedVariable& v : kDocumentedVariables) {
    EXPECT_NE(help.find(std::string(v.name)), std::string::npos) << v.name;
  }
  for (const std::string& line : [&] {
         std::vector<std::string> lines;
         std::size_t start = 0;
         for (std::size_t nl = help.find('\n'); nl != std::string::npos; nl = help.find('\n', start)) {
           lines.push_back(help.substr(start, nl - start));
           start = nl + 1;
         }
         return lines;
       }()) {
    EXPECT_LE(line.size(), 80u) << line;
  }
}

// --- What the plan reads of the options ------------------------------------

// The planner is handed the parsed options themselves, not a copy made
// field by field: what the parser read is what the plan is made from.
TEST(Cli, ThePlannerReadsTheParsedOptionsThemselves) {
  auto o = parse({"--mode", "mpi", "--max-local-devices", "32", "--control-port", "40000", "--ssh-identity", "/etc/id",
                  "--nproc-per-node", "4", "--master-port", "29501", "--restart", "on-failure", "--max-restarts", "3",
                  "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  const PlanOptions& plan = plan_options(*o);
  EXPECT_EQ(&plan, static_cast<const PlanOptions*>(&*o));
  EXPECT_EQ(plan.mode, Mode::kMpi);
  EXPECT_EQ(plan.max_local_devices, 32u);
  EXPECT_EQ(plan.control_port, 40000);
  EXPECT_EQ(plan.ssh_identity, "/etc/id");
  EXPECT_EQ(plan.nproc_per_node, 4u);
  EXPECT_EQ(plan.master_port, 29501);
  EXPECT_EQ(plan.job_restarts(), 3u);
}

TEST(Cli, JobRestartsAreOnFailureOnlyAndUnlimitedWithoutMaxRestarts) {
  EXPECT_EQ(parse({"--restart", "on-failure", "true"})->job_restarts(), kUnlimitedRestarts);
  EXPECT_EQ(parse({"--restart", "on-failure", "--max-restarts", "0", "true"})->job_restarts(), 0u);
  EXPECT_FALSE(parse({"--restart", "always", "--max-restarts", "2", "true"})->job_restarts().has_value());
  EXPECT_FALSE(parse({"--max-restarts", "2", "true"})->job_restarts().has_value());
}

TEST(Cli, ThePlanIsForTheEffectiveUserUnlessAsUserNamesAnother) {
  auto own = parse({"true"});
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->is_root, ::geteuid() == 0);
  EXPECT_EQ(own->user, ::geteuid() == 0 ? "root" : "");
  auto other = parse({"--as-user", "ma-user", "true"});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->is_root);
  EXPECT_EQ(other->user, "ma-user");
  auto root = parse({"true"}, {{"TRAINIT_AS_USER", "root"}});
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->is_root);
  EXPECT_EQ(root->user, "root");
}

// A row's shapes_plan is true exactly where its option changes what the
// planner reads: its sample value changes the PlanOptions part of Options.
TEST(Cli, OptionsThatShapeThePlanAreExactlyThoseThatChangePlanOptions) {
  auto by_default = parse({"true"});
  ASSERT_TRUE(by_default.ok());
  for (const OptionSpec& spec : option_table()) {
    if (spec.kind == Kind::kAction) {
      EXPECT_FALSE(spec.shapes_plan) << spec.name;
      continue;
    }
    SCOPED_TRACE(std::string(spec.name));
    std::string storage;
    auto args = words(spec, kSamples.at(std::string(spec.name)).value, storage);
    args.push_back("true");
    auto given = parse(args);
    ASSERT_TRUE(given.ok()) << given.error().message;
    const bool changes_plan = !(plan_options(*given) == plan_options(*by_default));
    EXPECT_EQ(spec.shapes_plan, changes_plan) << "set shapes_plan to " << changes_plan;
  }
}

// --- What the table says for --help and the reference ----------------------

TEST(Cli, EachPhasesOptionsLandInThatPhasesSettingsAsThePhaseTakesThem) {
  auto o = parse({"--preflight",
                  "devices",
                  "--preflight-timeout",
                  "3",
                  "--device-check",
                  "/opt/check",
                  "--coll-arena",
                  "1M",
                  "--hang-timeout",
                  "90",
                  "--hang-action",
                  "stop",
                  "--peer-timeout",
                  "60",
                  "--barrier-timeout",
                  "120",
                  "--peer-loss",
                  "2.5",
                  "--job-secret-file",
                  "/run/secret",
                  "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  const SpawnSettings& spawn = o->spawn;
  EXPECT_TRUE(spawn.preflight.devices);
  EXPECT_EQ(spawn.preflight.timeout, std::chrono::seconds(3));
  EXPECT_EQ(spawn.preflight.device_check, "/opt/check");
  EXPECT_EQ(spawn.arena.heap, std::optional<size_t>(size_t{1} << 20));
  EXPECT_EQ(spawn.arena.hang_timeout, std::chrono::seconds(90));
  EXPECT_TRUE(spawn.arena.hang_stop);
  const PeerSettings& peers = o->peers;
  EXPECT_EQ(peers.peer_timeout, std::chrono::seconds(60));
  EXPECT_EQ(peers.barrier_timeout, std::chrono::seconds(120));
  EXPECT_EQ(peers.peer_loss, std::chrono::milliseconds(2500));
  EXPECT_EQ(peers.job_secret_file, "/run/secret");
  // Nothing given: each struct's own defaults, the ones `trainit plan` shows.
  auto d = parse({"true"});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->spawn.preflight.devices);
  EXPECT_EQ(setting(*d, "preflight-timeout").value, "10");
  EXPECT_EQ(setting(*d, "coll-arena").value, std::to_string(size_t{32} << 20));
  EXPECT_EQ(setting(*d, "peer-loss").value, "10");
  EXPECT_EQ(d->spawn.arena.heap, ArenaSettings{}.heap);
  EXPECT_EQ(d->peers.peer_loss, PeerSettings{}.peer_loss);
  EXPECT_EQ(parse({"--coll-arena", "off", "true"})->spawn.arena.heap, std::nullopt);
}

TEST(Cli, IntegerOptionsReadTheirRangeAndNameItWhenRefused) {
  auto o = parse({"--nproc-per-node", "8", "--master-port", "29400", "--control-port", "1", "--max-local-devices",
                  "4096", "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->nproc_per_node, 8u);
  EXPECT_EQ(o->master_port, uint16_t{29400});
  EXPECT_EQ(o->control_port, 1);
  EXPECT_EQ(o->max_local_devices, 4096u);
  EXPECT_EQ(setting(*o, "master-port").value, "29400");
  auto d = parse({"true"});
  EXPECT_EQ(setting(*d, "nproc-per-node").value, std::nullopt) << "unset: the platform's count";
  EXPECT_EQ(setting(*d, "control-port").value, "36660");
  for (auto [flag, value, error] : {std::tuple{"--nproc-per-node", "0", "expected an integer in 1-1024"},
                                    std::tuple{"--nproc-per-node", "1025", "expected an integer in 1-1024"},
                                    std::tuple{"--master-port", "65536", "expected a port in 1-65535"},
                                    std::tuple{"--control-port", "0", "expected a port in 1-65535"},
                                    std::tuple{"--max-local-devices", "4097", "expected an integer in 1-4096"}}) {
    auto bad = parse({flag, value, "true"});
    ASSERT_FALSE(bad.ok()) << flag;
    EXPECT_EQ(bad.error().message, fmt::format("{} \"{}\": {}", flag, value, error));
  }
}

TEST(Cli, SecondsOptionsReadAndShowSecondsAlike) {
  std::size_t seen = 0;
  for (const OptionSpec& spec : option_table()) {
    if (spec.value_name != "SECONDS") {
      continue;
    }
    ++seen;
    SCOPED_TRACE(std::string(spec.name));
    const std::string flag = "--" + std::string(spec.name);
    auto o = parse({flag.c_str(), "2.5", "true"});
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(setting(*o, spec.name).value, "2.5");
    auto bad = parse({flag.c_str(), "soon", "true"});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message, flag + " \"soon\": expected seconds such as 8 or 0.5 (at most 86400)");
    EXPECT_EQ(spec.values, option("grace")->values);
  }
  // grace, stop-delay, hang-timeout, preflight-timeout, rank-table-timeout, peer-timeout, barrier-timeout, peer-loss
  EXPECT_EQ(seen, 8u);
}

TEST(Cli, EveryOptionSaysItsValuesAndItsDefault) {
  const Options defaults;
  for (const OptionSpec& spec : option_table()) {
    SCOPED_TRACE(std::string(spec.name));
    EXPECT_FALSE(spec.help.empty());
    if (spec.kind == Kind::kAction) {
      EXPECT_EQ(default_of(spec), "");
      continue;
    }
    const bool takes_values = spec.kind != Kind::kFlag;
    EXPECT_EQ(!spec.values.empty(), takes_values);
    EXPECT_EQ(!spec.value_name.empty(), takes_values);
    // Words only where trainit plan shows no value by default: every other
    // default is read off Options, so it cannot drift from the code.
    EXPECT_EQ(!spec.default_text.empty(), !spec.show(defaults).has_value());
    EXPECT_FALSE(default_of(spec).empty());
  }
  EXPECT_EQ(default_of(*option("grace")), "8");
  EXPECT_EQ(default_of(*option("control-port")), std::to_string(kDefaultControlPort));
  EXPECT_EQ(default_of(*option("max-restarts")), "no limit");
}

// The values the reference states are those the readers take.
TEST(Cli, ValuesOfModeAndMaxLocalDevicesFollowTheCode) {
  const std::string modes(option("mode")->values);
  EXPECT_EQ(modes, "auto, " + mode_names());
  EXPECT_EQ(option("max-local-devices")->values,
            "an integer in " + std::to_string(kMinLocalDevices) + "-" + std::to_string(kMaxLocalDevices));
}

TEST(Cli, PlanHelpListsTheOptionsThatShapeThePlan) {
  const char* argv[] = {"plan", "--help"};
  const char* envp[] = {nullptr};
  RealFileSystem fs;
  const CommandOutput help = plan_command(2, argv, envp, fs);
  ASSERT_EQ(help.exit_code, 0);
  for (const OptionSpec& spec : option_table()) {
    EXPECT_EQ(help.out.find(option_usage(spec)) != std::string::npos, spec.shapes_plan) << spec.name;
  }
}

TEST(OptionsReference, ListsEveryOptionWithItsVariablesDefaultAndPlanRole) {
  const std::string reference = options_reference();
  for (const OptionSpec& spec : option_table()) {
    SCOPED_TRACE(std::string(spec.name));
    const std::string value = spec.value_name.empty() ? "" : " " + std::string(spec.value_name);
    const std::size_t row = reference.find("`--" + std::string(spec.name) + value + "` |");
    ASSERT_NE(row, std::string::npos);
    const std::string line = reference.substr(row, reference.find('\n', row) - row);
    if (spec.kind == Kind::kAction) {
      continue;
    }
    EXPECT_NE(line.find("`" + variable_name(spec) + "`"), std::string::npos) << line;
    if (spec.default_text.empty()) {
      EXPECT_NE(line.find("`" + default_of(spec) + "`"), std::string::npos) << line;
    }
    EXPECT_EQ(line.find("shapes the plan") != std::string::npos, spec.shapes_plan) << line;
  }
  for (const DocumentedVariable& v : kDocumentedVariables) {
    EXPECT_NE(reference.find("`" + std::string(v.name) + "`"), std::string::npos) << v.name;
  }
}

}  // namespace
}  // namespace trainit

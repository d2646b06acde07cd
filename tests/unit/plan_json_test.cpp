#include "plan/plan_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

namespace trainit {
namespace {

TEST(SecretNames, AreRedactedByNameWithoutRegardToCase) {
  for (const char* name : {"AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "DB_PASSWORD", "api_key", "CREDENTIALS", "cred_file",
                           "MY_SECRET", "KEY", "GITHUB_TOKEN_2", "Api_Key", "x.kEy"}) {
    EXPECT_TRUE(is_secret_name(name)) << name;
  }
  // Only ASCII letters match, in either case: the bytes of K, E, Y and of
  // k, e, y with bit 7 set do not.
  for (const char* name :
       {"PATH", "MA_VJ_NAME", "MY_CRED", "RANK_ID", "PASSWD", "TOKE", "\xcb\xc5\xd9", "\xeb\xe5\xf9"}) {
    EXPECT_FALSE(is_secret_name(name)) << name;
  }
}

Plan sample_plan() {
  Plan plan;
  plan.mode = Mode::kExec;
  plan.states = {State::kSpawn, State::kExit};
  ProcessSpec p;
  p.name = "main";
  p.argv = {"python", "caf\xc3\xa9\xff.py"};
  p.env = {{"PATH", "/bin"}, {"HF_TOKEN", "hf_abc"}, {"CREDENTIALS", "x"}, {"NOTE", "line1\nline2"}};
  plan.processes.push_back(p);
  return plan;
}

TEST(PlanJson, PrintsTheSchemaAndKeysInAFixedOrder) {
  std::string text = plan_to_json(sample_plan());
  auto doc = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& item : doc.items())
    keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"schema", "mode", "signals", "states", "dirs", "files", "processes",
                                            "settings"}));
  EXPECT_EQ(doc["schema"], "trainit.plan/v1");
  EXPECT_EQ(doc["states"], nlohmann::ordered_json::array({"spawn", "exit"}));
  EXPECT_TRUE(doc["processes"][0]["cwd"].is_null());
  EXPECT_EQ(doc["processes"][0]["output"], nlohmann::ordered_json({{"mode", "inherit"}}));
  EXPECT_EQ(doc["processes"][0]["group"], "process_group");
  EXPECT_TRUE(text.ends_with("}\n"));
}

TEST(PlanJson, SettingsShowEachValueAndItsSourceInOrder) {
  Plan plan = sample_plan();
  plan.settings = {{"verbosity", "1", "default"},
                   {"grace", "0.3", "variable TRAINIT_GRACE"},
                   {"max-restarts", std::nullopt, "command line"}};
  auto doc = nlohmann::ordered_json::parse(plan_to_json(plan));
  std::vector<std::string> names;
  for (const auto& item : doc["settings"].items())
    names.push_back(item.key());
  EXPECT_EQ(names, (std::vector<std::string>{"verbosity", "grace", "max-restarts"}));
  EXPECT_EQ(doc["settings"]["grace"], nlohmann::ordered_json({{"value", "0.3"}, {"source", "variable TRAINIT_GRACE"}}));
  EXPECT_TRUE(doc["settings"]["max-restarts"]["value"].is_null());
  EXPECT_EQ(nlohmann::ordered_json::parse(plan_to_json(sample_plan()))["settings"], nlohmann::ordered_json::object());
}

TEST(PlanJson, RedactsSecretValuesOnlyInThePrintedForm) {
  Plan plan = sample_plan();
  auto doc = nlohmann::ordered_json::parse(plan_to_json(plan));
  EXPECT_EQ(doc["processes"][0]["env"]["HF_TOKEN"], "<redacted>");
  EXPECT_EQ(doc["processes"][0]["env"]["CREDENTIALS"], "<redacted>");
  EXPECT_EQ(doc["processes"][0]["env"]["PATH"], "/bin");
  EXPECT_EQ(doc["processes"][0]["env"]["NOTE"], "line1\nline2");
  EXPECT_EQ(plan.processes[0].env[1].value, "hf_abc") << "the plan itself keeps the value";
}

TEST(PlanJson, InvalidUtf8PrintsAsReplacementCharacter) {
  auto doc = nlohmann::ordered_json::parse(plan_to_json(sample_plan()));
  EXPECT_EQ(doc["processes"][0]["argv"][1], "caf\xc3\xa9\xef\xbf\xbd.py");
}

TEST(PlanJson, AscendPlansShowTheRankTableAndLogOutput) {
  Plan plan;
  plan.mode = Mode::kAscend;
  plan.signals = SignalPolicy::kStop;
  RankTablePlan rt;
  rt.source = "/user/config/jobstart_hccl.json";
  rt.ready = true;
  rt.format = RankTableFormat::kTemplate2;
  rt.rank_size = 8;
  rt.server_id = "10.0.0.1";
  rt.pod_name = "pod-0";
  rt.rank_table_file = "/m/rank_table/jobstart_hccl.json";
  plan.rank_table = rt;
  plan.files.push_back({"/m/rank_table/jobstart_hccl.json", "{}\n", 0644});
  ProcessSpec p;
  p.name = "proc-rank-0-device-0";
  p.rank = 0;
  p.cwd = "/m/workspace/device0";
  p.group = GroupPolicy::kSession;
  p.output = OutputPolicy::kLogAndConsole;
  p.log_file = "/tmp/log/x.txt";
  p.console_prefix = "[rank 0] ";
  plan.processes.push_back(p);
  auto doc = nlohmann::ordered_json::parse(plan_to_json(plan));
  EXPECT_EQ(doc["signals"], "stop");
  EXPECT_EQ(doc["rank_table"].dump(),
            R"({"source":"/user/config/jobstart_hccl.json","ready":true,"format":"template2","rank_size":8,)"
            R"("server_id":"10.0.0.1","pod_name":"pod-0","rank_table_file":"/m/rank_table/jobstart_hccl.json"})");
  EXPECT_EQ(doc["files"][0].dump(), R"({"path":"/m/rank_table/jobstart_hccl.json","mode":"0644","content":"{}\n"})");
  EXPECT_EQ(doc["processes"][0]["rank"], 0);
  EXPECT_EQ(doc["processes"][0]["group"], "session");
  EXPECT_EQ(doc["processes"][0]["output"].dump(),
            R"({"mode":"log_and_console","log_file":"/tmp/log/x.txt","console_prefix":"[rank 0] "})");
}

TEST(PlanJson, AWaitingPlanSaysWhy) {
  Plan plan;
  plan.mode = Mode::kAscend;
  plan.rank_table = RankTablePlan{};
  plan.rank_table->source = "/t.json";
  plan.rank_table->pending = "the file does not exist yet";
  auto doc = nlohmann::ordered_json::parse(plan_to_json(plan));
  EXPECT_EQ(doc["rank_table"].dump(), R"({"source":"/t.json","ready":false,"pending":"the file does not exist yet"})");
}

}  // namespace
}  // namespace trainit

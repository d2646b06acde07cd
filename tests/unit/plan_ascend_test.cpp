#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "os/fs.h"
#include "plan/ascend.h"
#include "plan/plan.h"
#include "plan/plan_json.h"
#include "platform_test_tables.h"

namespace trainit {
namespace {

using test::OJson;
using test::template1;
using test::template2;

const std::string kTable = "/user/config/jobstart_hccl.json";
const std::string kConverted = "/home/ma-user/modelarts/rank_table/jobstart_hccl.json";

class AscendPlan : public ::testing::Test {
 protected:
  Result<Plan> plan(std::vector<EnvVar> extra = {}, std::vector<std::string> argv = {"python", "train.py"}) {
    std::vector<EnvVar> vars = {{"PATH", "/usr/bin"},
                                {"MA_VJ_NAME", "ma-job-3f2a"},
                                {"MA_MOUNT_PATH", "/home/ma-user/modelarts"},
                                {"RANK_TABLE_FILE", "/user/config"}};
    for (EnvVar& var : extra) {
      auto it = std::find_if(vars.begin(), vars.end(), [&](const EnvVar& v) { return v.name == var.name; });
      if (it != vars.end())
        vars.erase(it);
      vars.push_back(std::move(var));
    }
    PlanInput input;
    input.options = options;
    input.options.mode = Mode::kAscend;
    input.argv = std::move(argv);
    input.env = Environment(std::move(vars));
    input.fs = &fs;
    return make_plan(input);
  }

  Plan planned(std::vector<EnvVar> extra = {}) {
    auto r = plan(std::move(extra));
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : Plan{};
  }

  std::string refusal(std::vector<EnvVar> extra = {}) {
    auto r = plan(std::move(extra));
    return r.ok() ? "(planned)" : r.error().message;
  }

  MemoryFileSystem fs;
  PlanOptions options;
};

TEST_F(AscendPlan, EachRankGetsTrainitsEnvironmentPlusExactlyTheContractVariables) {
  fs.add_file(kTable, template1({2, 2}).dump());
  Plan plan = planned({{"MA_CURRENT_HOST_IP", "10.0.0.2"}, {"NOTIFY_SOCKET", "/run/notify"}, {"RANK_ID", "stale"}});
  ASSERT_EQ(plan.processes.size(), 2u);
  const ProcessSpec& p = plan.processes[1];
  std::vector<EnvVar> expected = {
      {"PATH", "/usr/bin"},
      {"MA_VJ_NAME", "ma-job-3f2a"},
      {"MA_MOUNT_PATH", "/home/ma-user/modelarts"},
      {"RANK_TABLE_FILE", kTable},  // replaced in place: template 1 is used as is
      {"MA_CURRENT_HOST_IP", "10.0.0.2"},
      {"RANK_ID", "3"},  // replaced in place
      {"JOB_ID", "modelarts-job-3f2a"},
      {"ASCEND_DEVICE_ID", "1"},
      {"DEVICE_ID", "1"},
      {"RANK_SIZE", "4"},
      {"HCCL_CONNECT_TIMEOUT", "1800"},
      {"ASCEND_PROCESS_LOG_PATH", "/tmp/log/modelarts-job-3f2a/ascend/process_log/rank_3"},
  };
  EXPECT_EQ(p.env, expected) << "NOTIFY_SOCKET is not passed on";
  EXPECT_EQ(p.argv, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(p.rank, 3u);
  EXPECT_EQ(p.name, "proc-rank-3-device-1");
}

TEST_F(AscendPlan, StatesSignalsGroupsAndOutputFollowTheDesign) {
  fs.add_file(kTable, template1({2}).dump());
  Plan plan = planned();
  EXPECT_EQ(plan.mode, Mode::kAscend);
  EXPECT_EQ(plan.states, (std::vector<State>{State::kWaitRankTable, State::kSpawn, State::kRunning, State::kStopping,
                                             State::kReaping, State::kExit}));
  EXPECT_EQ(plan.signals, SignalPolicy::kStop);
  for (const ProcessSpec& p : plan.processes) {
    EXPECT_EQ(p.group, GroupPolicy::kSession);
    EXPECT_EQ(p.output, OutputPolicy::kLogAndConsole);
  }
  EXPECT_EQ(plan.processes[0].console_prefix, "[rank 0] ");
}

TEST_F(AscendPlan, UserSetHcclTimeoutAndProcessLogPathAreKept) {
  fs.add_file(kTable, template1({1}).dump());
  Plan plan = planned({{"HCCL_CONNECT_TIMEOUT", "3600"}, {"ASCEND_PROCESS_LOG_PATH", "/logs/ascend"}});
  const auto& env = plan.processes[0].env;
  auto value = [&](std::string_view name) {
    auto it = std::find_if(env.begin(), env.end(), [&](const EnvVar& v) { return v.name == name; });
    return it == env.end() ? std::string("(unset)") : it->value;
  };
  EXPECT_EQ(value("HCCL_CONNECT_TIMEOUT"), "3600");
  EXPECT_EQ(value("ASCEND_PROCESS_LOG_PATH"), "/logs/ascend");
  EXPECT_NE(std::find(plan.dirs.begin(), plan.dirs.end(), "/logs/ascend"), plan.dirs.end());
}

TEST_F(AscendPlan, AnEmptyHcclTimeoutGetsTheDefaultInPlace) {
  fs.add_file(kTable, template1({1}).dump());
  Plan plan = planned({{"HCCL_CONNECT_TIMEOUT", ""}});
  const auto& env = plan.processes[0].env;
  auto it = std::find_if(env.begin(), env.end(), [](const EnvVar& v) { return v.name == "HCCL_CONNECT_TIMEOUT"; });
  ASSERT_NE(it, env.end());
  EXPECT_EQ(it->value, "1800");
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](const EnvVar& v) { return v.name == "HCCL_CONNECT_TIMEOUT"; }), 1);
}

TEST_F(AscendPlan, DeviceIdIsThePositionInThisHostsListNotTheTablesDeviceId) {
  OJson t = template1({4});
  auto& devices = t["server_list"][0]["device"];
  const char* ids[] = {"3", "1", "0", "2"};
  const char* ranks[] = {"2", "0", "3", "1"};
  for (int i = 0; i < 4; ++i) {
    devices[i]["device_id"] = ids[i];
    devices[i]["rank_id"] = ranks[i];
  }
  fs.add_file(kTable, t.dump());
  Plan plan = planned();
  ASSERT_EQ(plan.processes.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& env = plan.processes[i].env;
    auto get = [&](std::string_view name) {
      return std::find_if(env.begin(), env.end(), [&](const EnvVar& v) { return v.name == name; })->value;
    };
    EXPECT_EQ(get("ASCEND_DEVICE_ID"), std::to_string(i));
    EXPECT_EQ(get("DEVICE_ID"), std::to_string(i));
    EXPECT_EQ(get("RANK_ID"), ranks[i]);
    EXPECT_EQ(plan.processes[i].cwd, "/home/ma-user/modelarts/workspace/device" + std::to_string(i));
    EXPECT_EQ(plan.processes[i].log_file, "/tmp/log/modelarts-job-3f2a-proc-rank-" + std::string(ranks[i]) +
                                              "-device-" + std::to_string(i) + ".txt");
  }
}

TEST_F(AscendPlan, LogsGoUnderTheMountWhenItsLogDirExistsAndWorkspaceToCacheWithoutMount) {
  fs.add_file(kTable, template1({1}).dump());
  fs.add_dir("/home/ma-user/modelarts/log");
  Plan with_log = planned();
  EXPECT_EQ(with_log.processes[0].log_file, "/home/ma-user/modelarts/log/modelarts-job-3f2a-proc-rank-0-device-0.txt");
  EXPECT_EQ(with_log.dirs,
            (std::vector<std::string>{"/home/ma-user/modelarts/log", "/home/ma-user/modelarts/workspace/device0",
                                      "/home/ma-user/modelarts/log/modelarts-job-3f2a/ascend/process_log/rank_0"}));
  Plan no_mount = planned({{"MA_MOUNT_PATH", ""}});
  EXPECT_EQ(no_mount.processes[0].cwd, "/cache/device0");
  EXPECT_EQ(no_mount.processes[0].log_file, "/tmp/log/modelarts-job-3f2a-proc-rank-0-device-0.txt");
}

TEST_F(AscendPlan, TemplateTwoIsConvertedUnderTheMountAndRanksPointThere) {
  fs.add_file(kTable, template2({2, 2}).dump());
  Plan plan = planned({{"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-1"}});
  ASSERT_EQ(plan.files.size(), 1u);
  EXPECT_EQ(plan.files[0].path, kConverted);
  EXPECT_EQ(plan.files[0].mode, 0644u);
  EXPECT_TRUE(plan.files[0].content.starts_with(R"({"status":"completed","version":"1.0","server_count":"2",)"));
  EXPECT_EQ(plan.dirs[1], "/home/ma-user/modelarts/rank_table");
  ASSERT_TRUE(plan.rank_table.has_value());
  EXPECT_EQ(plan.rank_table->rank_table_file, kConverted);
  EXPECT_EQ(plan.rank_table->pod_name, "ma-job-x-worker-1");
  EXPECT_EQ(plan.rank_table->rank_size, 4u);
  for (const ProcessSpec& p : plan.processes) {
    EXPECT_NE(std::find(p.env.begin(), p.env.end(), EnvVar{"RANK_TABLE_FILE", kConverted}), p.env.end());
  }
  EXPECT_EQ(plan.processes[0].rank, 2u);
}

TEST_F(AscendPlan, TemplateTwoNeedsTheMountForItsConversion) {
  fs.add_file(kTable, template2({2}).dump());
  EXPECT_EQ(refusal({{"MA_MOUNT_PATH", ""}}),
            kTable +
                ": a template-2 rank table is converted to template 1 for the ranks, into "
                "$MA_MOUNT_PATH/rank_table/jobstart_hccl.json, but MA_MOUNT_PATH is not set");
}

TEST_F(AscendPlan, NeverOverwritesTheSourceTableWithItsConversion) {
  fs.add_file(kConverted, template2({2}).dump());
  EXPECT_TRUE(refusal({{"RANK_TABLE_FILE", "/home/ma-user/modelarts/rank_table"}})
                  .starts_with(kConverted + ": this template-2 table sits where its template-1 conversion is written"));
}

TEST_F(AscendPlan, TwoPodsOnOneServerEachRunOnlyTheirOwnDevices) {
  OJson t = template2({2, 2});
  auto& list = t["group_list"][0]["instance_list"];
  list[1]["server_id"] = "10.0.0.1";
  list[1]["devices"][0]["device_id"] = "2";
  list[1]["devices"][1]["device_id"] = "3";
  fs.add_file(kTable, t.dump());
  Plan plan = planned({{"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-1"}});
  ASSERT_EQ(plan.processes.size(), 2u);
  EXPECT_EQ(plan.processes[0].name, "proc-rank-2-device-0");
  EXPECT_EQ(plan.processes[1].name, "proc-rank-3-device-1");
}

TEST_F(AscendPlan, TableStringsNeverBecomePathComponents) {
  OJson t = template2({1, 1});
  auto& list = t["group_list"][0]["instance_list"];
  list[0]["pod_name"] = "../../etc/evil-0";
  list[0]["server_id"] = "/etc/passwd";
  list[0]["devices"][0]["device_ip"] = "../../root";
  list[1]["pod_name"] = "$(reboot)-1";
  fs.add_file(kTable, t.dump());
  Plan plan = planned({{"MA_CURRENT_INSTANCE_NAME", "../../etc/evil-0"}});
  std::vector<std::string> paths = plan.dirs;
  for (const FileSpec& f : plan.files)
    paths.push_back(f.path);
  for (const ProcessSpec& p : plan.processes) {
    paths.push_back(p.cwd);
    paths.push_back(p.log_file);
  }
  for (const std::string& path : paths) {
    EXPECT_EQ(path.find(".."), std::string::npos) << path;
    EXPECT_EQ(path.find("etc"), std::string::npos) << path;
    EXPECT_EQ(path.find("reboot"), std::string::npos) << path;
  }
}

TEST_F(AscendPlan, AMissingEmptyOrIncompleteTableGivesAWaitingPlan) {
  Plan missing = planned();
  ASSERT_TRUE(missing.rank_table.has_value());
  EXPECT_FALSE(missing.rank_table->ready);
  EXPECT_EQ(missing.rank_table->source, kTable);
  EXPECT_EQ(missing.rank_table->pending, "the file does not exist yet");
  EXPECT_TRUE(missing.processes.empty());
  EXPECT_TRUE(missing.files.empty());
  EXPECT_EQ(missing.states.front(), State::kWaitRankTable);

  fs.add_file(kTable, "");
  EXPECT_EQ(planned().rank_table->pending, "the file is empty");
  fs.add_file(kTable, R"({"status":"initializing"})");
  EXPECT_EQ(planned().rank_table->pending, "its status is \"initializing\", not \"completed\"");
}

// What the run waits on (EBADMSG: not one whole JSON document, as a table
// caught mid-write reads) and what it refuses, told from the one read.
TEST_F(AscendPlan, ATableThatIsNotWholeJsonYetIsToldApartFromARefusedOne) {
  const std::string whole = template1({2, 2}).dump(1);
  for (std::size_t cut = 1; cut < whole.size(); ++cut) {
    fs.add_file(kTable, whole.substr(0, cut));
    auto r = plan({{"MA_CURRENT_HOST_IP", "10.0.0.1"}});
    ASSERT_FALSE(r.ok()) << "planned from the first " << cut << " bytes";
    EXPECT_EQ(r.error().errnum, EBADMSG) << r.error().message;
  }
  fs.add_file(kTable, whole);
  EXPECT_TRUE(plan({{"MA_CURRENT_HOST_IP", "10.0.0.1"}}).ok());

  OJson repeated = template1({2, 2});
  repeated["server_list"][1]["device"][0]["rank_id"] = "0";
  fs.add_file(kTable, repeated.dump());
  auto refused = plan({{"MA_CURRENT_HOST_IP", "10.0.0.1"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().errnum, EBADMSG) << refused.error().message;
  EXPECT_NE(refusal().find("repeated rank_id"), std::string::npos);
}

TEST_F(AscendPlan, EnvironmentErrorsComeBeforeTheTableIsThere) {
  EXPECT_EQ(refusal({{"MA_VJ_NAME", ""}}), "MA_VJ_NAME is not set: the platform names the job with it");
  EXPECT_TRUE(refusal({{"MA_VJ_NAME", "../x"}}).starts_with("MA_VJ_NAME=\"../x\": not a safe name"));
  EXPECT_EQ(refusal({{"MA_MOUNT_PATH", "data"}}), "MA_MOUNT_PATH=\"data\": not an absolute path");
  EXPECT_EQ(refusal({{"RANK_TABLE_FILE_V_1_0", "t.json"}}), "RANK_TABLE_FILE_V_1_0=\"t.json\": not an absolute path");
}

TEST_F(AscendPlan, AnUnreadableTableIsAnErrorNotAWait) {
  fs.add_file("/user/config/jobstart_hccl.json/inner", "x");  // makes the table path a directory
  EXPECT_EQ(refusal(), "cannot read the rank table: " + kTable + ": is a directory, not a file");
  EXPECT_NE(plan().error().errnum, EBADMSG) << "an unreadable table is no table caught mid-write";
}

TEST_F(AscendPlan, TableErrorsAndHostErrorsAreRefused) {
  OJson t = template1({1, 1});
  fs.add_file(kTable, t.dump());
  EXPECT_EQ(refusal(), kTable +
                           ": server_list lists 2 servers and MA_CURRENT_HOST_IP is not set: nothing says which "
                           "one is this host");
  t["server_list"][1]["device"][0]["rank_id"] = "0";
  fs.add_file(kTable, t.dump());
  EXPECT_EQ(refusal({{"MA_CURRENT_HOST_IP", "10.0.0.1"}}),
            kTable +
                ": server_list[1].device[0].rank_id = \"0\": repeated rank_id (also at "
                "server_list[0].device[0].rank_id)");
}

TEST_F(AscendPlan, MaxLocalDevicesRaisesTheDeviceLimit) {
  OJson t = template1({1});
  t["server_list"][0]["device"][0]["device_id"] = "20";
  fs.add_file(kTable, t.dump());
  EXPECT_TRUE(refusal().ends_with("out of range 0..15 (--max-local-devices raises the limit)"));
  options.max_local_devices = 32;
  EXPECT_EQ(planned().processes.size(), 1u);
}

TEST_F(AscendPlan, FormatIsToldByContentNotByTheVariable) {
  fs.add_file("/v1/t.json", template2({1}).dump());
  Plan plan = planned({{"RANK_TABLE_FILE_V_1_0", "/v1/t.json"}});
  EXPECT_EQ(plan.rank_table->format, RankTableFormat::kTemplate2);
  EXPECT_EQ(plan.rank_table->rank_table_file, kConverted);
}

TEST_F(AscendPlan, PlanningIsPureAndRepeatable) {
  fs.add_file(kTable, template2({8, 8}).dump());
  auto a = plan({{"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-0"}});
  auto b = plan({{"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-0"}});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(plan_to_json(*a), plan_to_json(*b));
}

TEST_F(AscendPlan, SixteenDevicesOnOneHost) {
  fs.add_file(kTable, template1({16}, true).dump());
  Plan plan = planned();
  ASSERT_EQ(plan.processes.size(), 16u);
  EXPECT_EQ(plan.processes[15].name, "proc-rank-15-device-15");
  EXPECT_EQ(plan.rank_table->rank_size, 16u);
}

TEST_F(AscendPlan, ATableOfSeveralHostsMeetsAtABarrierBeforeAnyRankStarts) {
  fs.add_file(kTable, template1({2, 2, 2}).dump());
  Plan plan = planned({{"MA_CURRENT_HOST_IP", "10.0.0.2"}, {"MA_NUM_HOSTS", "3"}, {"MA_TASK_INDEX", "1"}});
  EXPECT_EQ(plan.states,
            (std::vector<State>{State::kWaitRankTable, State::kResolvePeers, State::kHostBarrier, State::kSpawn,
                                State::kRunning, State::kStopping, State::kReaping, State::kExit}));
  ASSERT_TRUE(plan.hosts.has_value());
  EXPECT_EQ(plan.hosts->hosts, 3u);
  EXPECT_EQ(plan.hosts->index, 1u);
  EXPECT_EQ(plan.hosts->control_port, kDefaultControlPort);
  EXPECT_EQ(plan.hosts->peers,
            (std::vector<std::string>{"ma-job-3f2a-worker-0.ma-job-3f2a", "ma-job-3f2a-worker-1.ma-job-3f2a",
                                      "ma-job-3f2a-worker-2.ma-job-3f2a"}));
}

// The platform's MA_NUM_HOSTS says whether the hosts meet; without it a
// container runs its own devices of a table of several pods alone, as the
// reference launcher (and trainit before the barrier) does.
TEST_F(AscendPlan, WithoutAHostCountATableOfSeveralPodsRunsThisPodAlone) {
  fs.add_file(kTable, template2({2, 2}).dump());
  Plan plan = planned({{"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-1"}});
  EXPECT_FALSE(plan.hosts.has_value());
  EXPECT_EQ(plan.processes.size(), 2u) << "this pod's devices";
  EXPECT_EQ(std::count(plan.states.begin(), plan.states.end(), State::kHostBarrier), 0);
}

TEST_F(AscendPlan, AHostCountOfSeveralMeetsTheOtherHostsAtTheBarrier) {
  fs.add_file(kTable, template2({2, 2}).dump());
  Plan plan = planned({{"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-1"},
                       {"MA_NUM_HOSTS", "2"},
                       {"MA_TASK_INDEX", "1"},
                       {"MA_TASK_NAME", "worker"}});
  ASSERT_TRUE(plan.hosts.has_value());
  EXPECT_EQ(plan.hosts->hosts, 2u);
  EXPECT_EQ(plan.hosts->index, 1u);
  EXPECT_EQ(std::count(plan.states.begin(), plan.states.end(), State::kHostBarrier), 1);
}

// The peers reach host I by its platform name (…-worker-I), which a
// table's order does not follow: the index comes from the platform only.
TEST_F(AscendPlan, SeveralHostsWithoutATaskIndexAreRefusedRatherThanIndexedByTheTablesOrder) {
  fs.add_file(kTable, template1({2, 2}).dump());
  EXPECT_EQ(refusal({{"MA_CURRENT_HOST_IP", "10.0.0.1"}, {"MA_NUM_HOSTS", "2"}}),
            "MA_TASK_INDEX, VC_TASK_INDEX and VK_TASK_INDEX are all unset: a job of 2 hosts needs this host's index");
  fs.add_file(kTable, template2({2, 2}).dump());
  EXPECT_EQ(refusal({{"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-1"}, {"MA_NUM_HOSTS", "2"}}),
            "MA_TASK_INDEX, VC_TASK_INDEX and VK_TASK_INDEX are all unset: a job of 2 hosts needs this host's index");
}

TEST_F(AscendPlan, AHostCountThatDisagreesWithTheTableIsRefusedNamingBoth) {
  fs.add_file(kTable, template1({2, 2}).dump());
  EXPECT_EQ(refusal({{"MA_CURRENT_HOST_IP", "10.0.0.1"}, {"MA_NUM_HOSTS", "4"}, {"MA_TASK_INDEX", "0"}}),
            "MA_NUM_HOSTS=4 disagrees with the rank table /user/config/jobstart_hccl.json, which lists 2 servers");
  fs.add_file(kTable, template1({2}).dump());
  EXPECT_EQ(refusal({{"MA_NUM_HOSTS", "2"}, {"MA_TASK_INDEX", "0"}}),
            "MA_NUM_HOSTS=2 disagrees with the rank table /user/config/jobstart_hccl.json, which lists 1 server");
}

TEST_F(AscendPlan, ASingleHostReadsNoGeometryVariable) {
  fs.add_file(kTable, template1({2}).dump());
  Plan plan = planned({{"MA_NUM_HOSTS", "1"}, {"MA_TASK_INDEX", "7"}, {"MA_NUM_GPUS", "many"}});
  EXPECT_FALSE(plan.hosts.has_value());
  EXPECT_EQ(plan.states.size(), 6u);
}

}  // namespace
}  // namespace trainit

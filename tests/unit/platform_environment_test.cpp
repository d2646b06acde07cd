#include <gtest/gtest.h>

#include "os/fs.h"
#include "platform/environment.h"

namespace trainit {
namespace {

Environment env_of(std::vector<EnvVar> vars) {
  return Environment(std::move(vars));
}

TEST(Environment, KeepsOrderDropsMalformedAndFirstOfTwoWins) {
  const char* envp[] = {"B=2", "noequals", "=x", "A=1", "B=3", "EMPTY=", nullptr};
  Environment env = Environment::from_envp(envp);
  ASSERT_EQ(env.vars().size(), 3u);
  EXPECT_EQ(env.vars()[0], (EnvVar{"B", "2"}));
  EXPECT_EQ(env.vars()[1], (EnvVar{"A", "1"}));
  EXPECT_EQ(env.vars()[2], (EnvVar{"EMPTY", ""}));
  EXPECT_EQ(env.get("B"), "2");
  EXPECT_FALSE(env.get("EMPTY").has_value()) << "empty counts as unset";
  EXPECT_FALSE(env.get("MISSING").has_value());
  EXPECT_TRUE(Environment::from_envp(nullptr).vars().empty());
}

TEST(Environment, NumbersAreStrictAndErrorsNameVariableAndValue) {
  auto env = env_of({{"MA_NUM_HOSTS", "4"}, {"MA_NUM_GPUS", "08"}});
  EXPECT_EQ(env.num_hosts().value(), 4u);
  auto gpus = env.num_gpus();
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.error().message, "MA_NUM_GPUS=\"08\": not a decimal number (digits only: no sign, space or fraction)");
  auto zero_hosts = env_of({{"MA_NUM_HOSTS", "0"}}).num_hosts();
  ASSERT_FALSE(zero_hosts.ok());
  EXPECT_NE(zero_hosts.error().message.find("MA_NUM_HOSTS=\"0\": out of range 1.."), std::string::npos);
  EXPECT_FALSE(env_of({}).num_hosts().value().has_value());
}

TEST(Environment, TaskIndexFallsBackFromMaToVcToVk) {
  EXPECT_EQ(env_of({{"VK_TASK_INDEX", "3"}}).task_index().value(), 3u);
  EXPECT_EQ(env_of({{"VK_TASK_INDEX", "3"}, {"VC_TASK_INDEX", "2"}}).task_index().value(), 2u);
  EXPECT_EQ(env_of({{"VC_TASK_INDEX", "2"}, {"MA_TASK_INDEX", "1"}}).task_index().value(), 1u);
  auto bad = env_of({{"VC_TASK_INDEX", "x"}, {"MA_TASK_INDEX", ""}}).task_index();
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().message.starts_with("VC_TASK_INDEX=\"x\""));
}

TEST(Environment, JobIdReplacesTheFirstMaJobAndRefusesUnsafeNames) {
  EXPECT_EQ(env_of({{"MA_VJ_NAME", "ma-job-3f2a-ma-job"}}).job_id().value(), "modelarts-job-3f2a-ma-job");
  EXPECT_EQ(env_of({{"MA_VJ_NAME", "train-7"}}).job_id().value(), "train-7");
  auto missing = env_of({}).job_id();
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.error().message.starts_with("MA_VJ_NAME is not set"));
  for (const char* bad : {"../etc", "a/b", ".", "-x", "a b"}) {
    auto r = env_of({{"MA_VJ_NAME", bad}}).job_id();
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.error().message.starts_with("MA_VJ_NAME=\"")) << r.error().message;
  }
}

TEST(Environment, MountPathMustBeAbsoluteAndIsNormalized) {
  EXPECT_EQ(env_of({{"MA_MOUNT_PATH", "/home/ma-user/modelarts/"}}).mount_path().value(), "/home/ma-user/modelarts");
  EXPECT_FALSE(env_of({}).mount_path().value().has_value());
  auto bad = env_of({{"MA_MOUNT_PATH", "modelarts"}}).mount_path();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "MA_MOUNT_PATH=\"modelarts\": not an absolute path");
}

TEST(Environment, RankTableLocationPrefersV1ThenDirectoryOrFileThenDefault) {
  MemoryFileSystem fs;
  fs.add_dir("/user/config");
  fs.add_file("/data/table.txt", "{}");
  auto loc = [&](std::vector<EnvVar> vars) { return env_of(std::move(vars)).rank_table_location(fs).value(); };

  EXPECT_EQ(loc({}).path, "/user/config/jobstart_hccl.json");
  EXPECT_EQ(loc({}).variable, "");
  EXPECT_EQ(loc({{"RANK_TABLE_FILE", "/user/config"}}).path, "/user/config/jobstart_hccl.json");
  EXPECT_EQ(loc({{"RANK_TABLE_FILE", "/not/yet"}}).path, "/not/yet/jobstart_hccl.json");
  EXPECT_EQ(loc({{"RANK_TABLE_FILE", "/not/yet/t.json"}}).path, "/not/yet/t.json");
  EXPECT_EQ(loc({{"RANK_TABLE_FILE", "/data/table.txt"}}).path, "/data/table.txt");
  auto v1 = loc({{"RANK_TABLE_FILE", "/user/config"}, {"RANK_TABLE_FILE_V_1_0", "/v1//t1.json"}});
  EXPECT_EQ(v1.path, "/v1/t1.json");
  EXPECT_EQ(v1.variable, "RANK_TABLE_FILE_V_1_0");

  auto relative = env_of({{"RANK_TABLE_FILE", "config"}}).rank_table_location(fs);
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.error().message, "RANK_TABLE_FILE=\"config\": not an absolute path");
}

TEST(Environment, RunMethodKnowsTorchrunAndMsrunOnly) {
  EXPECT_EQ(env_of({}).run_method().value(), RunMethod::kRankTable);
  EXPECT_EQ(env_of({{"MA_RUN_METHOD", "torchrun"}}).run_method().value(), RunMethod::kTorchrun);
  EXPECT_EQ(env_of({{"MA_RUN_METHOD", "msrun"}}).run_method().value(), RunMethod::kMsrun);
  auto other = env_of({{"MA_RUN_METHOD", "deepspeed"}}).run_method();
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(other.error().message.starts_with("MA_RUN_METHOD=\"deepspeed\": unknown launch method"));
}

TEST(Environment, DefaultsForTorchrunAndMsrun) {
  EXPECT_EQ(env_of({}).torchrun_master_port().value(), 18888);
  EXPECT_EQ(env_of({{"MA_TORCHRUN_MASTER_PORT", "29500"}}).torchrun_master_port().value(), 29500);
  EXPECT_FALSE(env_of({{"MA_TORCHRUN_MASTER_PORT", "70000"}}).torchrun_master_port().ok());
  EXPECT_EQ(env_of({}).msrun_cluster_timeout().value(), 600u);
  EXPECT_EQ(env_of({{"MSRUN_CLUSTER_TIME_OUT", "7200"}}).msrun_cluster_timeout().value(), 7200u);
  EXPECT_TRUE(env_of({{"MS_RANKTABLE_ENABLE", "True"}}).ms_ranktable_enable());
  EXPECT_FALSE(env_of({{"MS_RANKTABLE_ENABLE", "true"}}).ms_ranktable_enable());
  EXPECT_EQ(env_of({{"MA_EXTRA_TORCHRUN_PARAMS", "--rdzv_conf=timeout=7200"}}).extra_torchrun_params(),
            "--rdzv_conf=timeout=7200");
}

TEST(Environment, TensorFlowHostListsAreHostPortPairs) {
  auto ok = env_of({{"TF_PS_HOSTS", "a:5000,b:5001"}}).tf_ps_hosts();
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<std::string>{"a:5000", "b:5001"}));
  EXPECT_TRUE(env_of({}).tf_worker_hosts().value().empty());
  auto bad = env_of({{"TF_WORKER_HOSTS", "a:5000,b"}}).tf_worker_hosts();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "TF_WORKER_HOSTS=\"a:5000,b\": \"b\" is not host:port");
  EXPECT_FALSE(env_of({{"TF_WORKER_HOSTS", "a:0"}}).tf_worker_hosts().ok());
}

// What reaches TF_CONFIG's JSON and the command line is a host name or
// address and a port, nothing else: a quote, a backslash, a space, a
// second colon or an empty host is refused naming the item.
TEST(Environment, TensorFlowHostListsRefuseWhatIsNotAHostNameOrAddress) {
  for (const char* bad : {"a\"b:5001", "a\\b:5001", "a\bb:5001", "a:5001 b:5002", "a :5001", "a:b:5001", ":5001",
                          "a:5001,", ",a:5001", "a..b:5001", "[::1:5001", "[]:5001", "[x]:5001"}) {
    auto r = env_of({{"TF_PS_HOSTS", bad}}).tf_ps_hosts();
    EXPECT_FALSE(r.ok()) << "TF_PS_HOSTS=" << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().message.rfind("TF_PS_HOSTS=", 0), 0U) << r.error().message;
    }
  }
  auto v6 = env_of({{"TF_WORKER_HOSTS", "[fd00::1]:5001,10.0.0.2:5002,ps_0.job-x:5003"}}).tf_worker_hosts();
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  EXPECT_EQ(*v6, (std::vector<std::string>{"[fd00::1]:5001", "10.0.0.2:5002", "ps_0.job-x:5003"}));
  // The platform's documents write the list in brackets: the same list.
  auto bracketed = env_of({{"TF_PS_HOSTS", "[xx-ps-0.xx:5001,xx-ps-1.xx:5002]"}}).tf_ps_hosts();
  ASSERT_TRUE(bracketed.ok()) << bracketed.error().message;
  EXPECT_EQ(*bracketed, (std::vector<std::string>{"xx-ps-0.xx:5001", "xx-ps-1.xx:5002"}));
}

TEST(Environment, PeerNamesFollowThePlatformsDnsScheme) {
  auto env = env_of({{"MA_VJ_NAME", "ma-job-x"}, {"MA_TASK_NAME", "worker"}});
  EXPECT_EQ(env.peer_name(2).value(), "ma-job-x-worker-2.ma-job-x");
  EXPECT_EQ(env_of({{"MA_VJ_NAME", "ma-job-x"}}).peer_name(0).value(), "ma-job-x-worker-0.ma-job-x")
      << "MA_TASK_NAME unset: worker";
  EXPECT_FALSE(env_of({{"MA_VJ_NAME", "ma-job-x"}, {"MA_TASK_NAME", "-x"}}).peer_name(0).ok());
  EXPECT_EQ(env.current_host_ip(), std::nullopt);
  EXPECT_EQ(env_of({{"MA_CURRENT_HOST_IP", "10.0.0.1"}}).current_host_ip(), "10.0.0.1");
}

}  // namespace
}  // namespace trainit

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "os/fs.h"
#include "plan/frameworks.h"
#include "plan/plan.h"
#include "platform/cluster.h"

namespace trainit {
namespace {

std::map<std::string, std::string> spec_env(const ProcessSpec& p) {
  std::map<std::string, std::string> out;
  for (const EnvVar& v : p.env)
    out[v.name] = v.value;
  return out;
}

std::vector<EnvVar> modelarts(unsigned hosts, unsigned index, unsigned gpus) {
  return {{"PATH", "/usr/bin"},
          {"MA_VJ_NAME", "ma-job-x"},
          {"MA_TASK_NAME", "worker"},
          {"MA_NUM_HOSTS", std::to_string(hosts)},
          {"MA_TASK_INDEX", std::to_string(index)},
          {"MA_NUM_GPUS", std::to_string(gpus)}};
}

Result<Plan> plan(Mode mode, std::vector<EnvVar> vars, const FileSystem& fs,
                  std::vector<std::string> argv = {"train.py"}) {
  PlanInput input;
  input.options.mode = mode;
  input.argv = std::move(argv);
  input.env = Environment(std::move(vars));
  input.fs = &fs;
  return make_plan(input);
}

TEST(TorchrunParams, ReadBothSpellingsAndBothValueForms) {
  auto p = parse_torchrun_params("--nproc_per_node=4 --master-port 29400 --rdzv_conf=timeout=7200 --max-restarts=0");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->nproc_per_node, "4");
  EXPECT_EQ(p->master_port, 29400);
  EXPECT_EQ(p->rendezvous_timeout, 7200U);
  EXPECT_EQ(p->max_restarts, 0U);
}

// torchrun's rendezvous reads join_timeout (c10d) or timeout (etcd): the
// barrier waits as long as the longer, never ending a job sooner than meant.
TEST(TorchrunParams, TimeoutAndJoinTimeoutGiveTheBarrierTheLongerOfThem) {
  EXPECT_EQ(parse_torchrun_params("--rdzv_conf=timeout=7200,join_timeout=5")->rendezvous_timeout, 7200U);
  EXPECT_EQ(parse_torchrun_params("--rdzv_conf=join_timeout=5,timeout=7200")->rendezvous_timeout, 7200U);
  EXPECT_EQ(parse_torchrun_params("--rdzv_conf=join_timeout=900")->rendezvous_timeout, 900U);
  EXPECT_EQ(parse_torchrun_params("--rdzv_conf=timeout=60")->rendezvous_timeout, 60U);
}

// MIN:MAX with MIN = MAX is torchrun's spelling of a fixed size, not a range.
TEST(TorchrunParams, NnodesOfEqualBoundsIsThatManyHosts) {
  auto p = parse_torchrun_params("--nnodes=2:2");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->nnodes, 2U);
  EXPECT_FALSE(parse_torchrun_params("--nnodes=2:3").ok());
  EXPECT_FALSE(parse_torchrun_params("--nnodes=2:").ok());
  EXPECT_FALSE(parse_torchrun_params("--nnodes=:2").ok());
}

TEST(TorchrunParams, AnUnknownParameterIsAnErrorNamingIt) {
  auto p = parse_torchrun_params("--rdzv_conf=timeout=60 --frobnicate=1");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("\"--frobnicate=1\""), std::string::npos) << p.error().message;
}

TEST(TorchrunParams, RefusesElasticRangesOtherBackendsAndMissingValues) {
  EXPECT_FALSE(parse_torchrun_params("--nnodes=1:4").ok());
  EXPECT_FALSE(parse_torchrun_params("--rdzv_backend=c10d").ok());
  EXPECT_FALSE(parse_torchrun_params("--master_port").ok());
  EXPECT_FALSE(parse_torchrun_params("--master_port=0").ok());
  EXPECT_FALSE(parse_torchrun_params("--standalone=1").ok());
  EXPECT_FALSE(parse_torchrun_params("train.py").ok());
}

TEST(TorchrunParams, AgentTuningIsAcceptedWithANote) {
  auto p = parse_torchrun_params("--monitor_interval=5 --rdzv_conf=read_timeout=60");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->notes.size(), 2U);
  EXPECT_FALSE(p->rendezvous_timeout);
}

TEST(TorchrunParams, AnUnclosedQuoteNamesTheVariableInBothTorchrunModes) {
  MemoryFileSystem fs;
  for (Mode mode : {Mode::kTorchrun, Mode::kTorchrunExec}) {
    auto vars = modelarts(1, 0, 1);
    vars.push_back({"MA_EXTRA_TORCHRUN_PARAMS", "--log_dir '/a b"});
    auto p = plan(mode, vars, fs);
    ASSERT_FALSE(p.ok()) << mode_name(mode);
    EXPECT_EQ(p.error().message, "MA_EXTRA_TORCHRUN_PARAMS=\"--log_dir '/a b\": an unclosed ' quote")
        << mode_name(mode);
  }
}

TEST(SplitWords, QuotesGroupAndAnUnclosedQuoteIsAnError) {
  auto w = split_words(R"(  --a="x y"  'b c'd "" )");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, (std::vector<std::string>{"--a=x y", "b cd", ""}));
  EXPECT_FALSE(split_words("--a='x").ok());
}

TEST(TorchrunPlan, EveryRankOfEveryHostGetsAUniqueRankAndTheSameWorld) {
  MemoryFileSystem fs;
  std::set<std::string> ranks;
  for (unsigned host = 0; host < 2; ++host) {
    auto p = plan(Mode::kTorchrun, modelarts(2, host, 2), fs);
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_EQ(p->processes.size(), 2U);
    ASSERT_TRUE(p->hosts);
    for (unsigned local = 0; local < 2; ++local) {
      auto env = spec_env(p->processes[local]);
      ranks.insert(env["RANK"]);
      EXPECT_EQ(env["LOCAL_RANK"], std::to_string(local));
      EXPECT_EQ(env["WORLD_SIZE"], "4");
      EXPECT_EQ(env["GROUP_RANK"], std::to_string(host));
      EXPECT_EQ(env["MASTER_ADDR"], "ma-job-x-worker-0.ma-job-x");
      EXPECT_EQ(env["MASTER_PORT"], "18888");
      EXPECT_EQ(env.count("TORCHELASTIC_USE_AGENT_STORE"), 0U);
      EXPECT_EQ(p->processes[local].argv, (std::vector<std::string>{"python3", "-u", "train.py"}));
    }
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
}

TEST(TorchrunPlan, KubeflowVariablesFeedThePlanAndAreNotPassedOn) {
  MemoryFileSystem fs;
  fs.add_file("/dev/nvidia0", "");
  fs.add_file("/dev/nvidia1", "");
  fs.add_file("/dev/nvidia2", "");
  auto p = plan(Mode::kTorchrun,
                {{"PATH", "/bin"},
                 {"PET_NNODES", "2"},
                 {"PET_NODE_RANK", "1"},
                 {"PET_NPROC_PER_NODE", "auto"},
                 {"PET_MASTER_ADDR", "job-master-0"},
                 {"PET_MASTER_PORT", "23456"}},
                fs);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->processes.size(), 3U) << "auto: the three /dev/nvidiaN";
  auto env = spec_env(p->processes[0]);
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["WORLD_SIZE"], "6");
  EXPECT_EQ(env["MASTER_ADDR"], "job-master-0");
  EXPECT_EQ(env["MASTER_PORT"], "23456");
  for (const auto& [name, value] : env)
    EXPECT_FALSE(name.starts_with("PET_")) << name;
  EXPECT_EQ(p->launch->source, "Kubeflow");
  EXPECT_EQ(p->hosts->peers, (std::vector<std::string>{"job-master-0"})) << "only host 0 is named";
}

TEST(ClusterSources, ModelArtsWinsAndEveryDisagreeingValueIsReported) {
  MemoryFileSystem fs;
  auto vars = modelarts(2, 0, 2);
  vars.push_back({"PET_NNODES", "3"});
  vars.push_back({"PET_NODE_RANK", "0"});
  vars.push_back({"PET_MASTER_ADDR", "ma-job-x-worker-0.ma-job-x"});
  vars.push_back({"PET_NPROC_PER_NODE", "2"});
  auto c = cluster_from_env(Environment(vars), fs);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->source, "ModelArts");
  EXPECT_EQ(c->hosts, 2U);
  ASSERT_EQ(c->disagreements.size(), 1U);
  EXPECT_EQ(c->disagreements[0], "PET_NNODES says 3 hosts (ModelArts: 2)");

  // ModelArts sets VC_TASK_INDEX too (its index's fallback): one that agrees
  // is no disagreement; one that differs is, naming both values.
  vars.push_back({"VC_TASK_INDEX", "0"});
  c = cluster_from_env(Environment(vars), fs);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->disagreements.size(), 1U);
  vars.back() = {"VC_TASK_INDEX", "1"};
  c = cluster_from_env(Environment(vars), fs);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->index, 0U);
  ASSERT_EQ(c->disagreements.size(), 2U);
  EXPECT_EQ(c->disagreements[0], "VC_TASK_INDEX says host 1 (ModelArts: host 0)");
}

// Without MA_TASK_INDEX, ModelArts' index is VC_TASK_INDEX: nothing to say.
TEST(ClusterSources, ModelArtsTakesVcTaskIndexAsItsIndexWithoutADisagreement) {
  MemoryFileSystem fs;
  auto c = cluster_from_env(
      Environment(std::vector<EnvVar>{{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "2"}, {"VC_TASK_INDEX", "1"}}), fs);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->index, 1U);
  EXPECT_TRUE(c->disagreements.empty()) << c->disagreements.at(0);
}

TEST(ClusterSources, VolcanoReadsItsHostFilesBeforeItsVariables) {
  MemoryFileSystem fs;
  fs.add_file("/etc/volcano/worker.host", "vj-worker-0.vj\nvj-worker-1.vj\n");
  auto c = cluster_from_env(
      Environment(std::vector<EnvVar>{
          {"VC_TASK_INDEX", "1"}, {"VC_WORKER_HOSTS", "stale-0,stale-1,stale-2"}, {"HOSTNAME", "vj-worker-1"}}),
      fs);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->source, "Volcano");
  EXPECT_EQ(c->peers, (std::vector<std::string>{"vj-worker-0.vj", "vj-worker-1.vj"}));
  EXPECT_EQ(c->index, 1U);
}

TEST(ClusterSources, BadKubeflowValuesAreErrorsNamingTheVariable) {
  MemoryFileSystem fs;
  for (auto [name, value] :
       {std::pair{"PET_NNODES", "1:4"}, std::pair{"PET_NPROC_PER_NODE", "abc"}, std::pair{"PET_NODE_RANK", "-1"}}) {
    std::vector<EnvVar> vars = {{"PET_MASTER_ADDR", "m"}, {name, value}};
    auto c = cluster_from_env(Environment(vars), fs);
    ASSERT_FALSE(c.ok()) << name;
    EXPECT_TRUE(c.error().message.starts_with(std::string(name) + "=")) << c.error().message;
  }
}

TEST(MsrunPlan, OnlyHostZeroRunsTheSchedulerAndWorkersCountEveryHost) {
  MemoryFileSystem fs;
  auto host0 = plan(Mode::kMsrun, modelarts(2, 0, 2), fs);
  auto host1 = plan(Mode::kMsrun, modelarts(2, 1, 2), fs);
  ASSERT_TRUE(host0.ok() && host1.ok());
  ASSERT_EQ(host0->processes.size(), 3U);
  ASSERT_EQ(host1->processes.size(), 2U);
  EXPECT_EQ(spec_env(host0->processes[0])["MS_ROLE"], "MS_SCHED");
  auto worker = spec_env(host1->processes[1]);
  EXPECT_EQ(worker["MS_ROLE"], "MS_WORKER");
  EXPECT_EQ(worker["MS_WORKER_NUM"], "4");
  EXPECT_EQ(worker["RANK_ID"], "3");
  EXPECT_EQ(worker["DEVICE_ID"], "1");
  EXPECT_EQ(worker["MS_SCHED_PORT"], "8118");
  EXPECT_TRUE(host1->replan_with_addresses) << "MindSpore reaches its scheduler by address";
}

TEST(TensorflowPlan, AppendsTheClusterArgumentsAndATfConfig) {
  MemoryFileSystem fs;
  auto vars = modelarts(2, 1, 1);
  vars.push_back({"TF_PS_HOSTS", "ps-0:5000"});
  vars.push_back({"TF_WORKER_HOSTS", "w-0:5001,w-1:5001"});
  auto p = plan(Mode::kTensorflow, vars, fs, {"python3", "tf.py"});
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->processes.size(), 1U);
  EXPECT_EQ(p->processes[0].argv,
            (std::vector<std::string>{"python3", "tf.py", "--task_index", "1", "--ps_hosts", "ps-0:5000",
                                      "--worker_hosts", "w-0:5001,w-1:5001", "--job_name", "worker"}));
  EXPECT_EQ(spec_env(p->processes[0])["TF_CONFIG"],
            R"({"cluster":{"ps":["ps-0:5000"],"worker":["w-0:5001","w-1:5001"]},"task":{"type":"worker","index":1}})");
  EXPECT_FALSE(p->hosts) << "no control channel: a parameter server never finishes";
}

TEST(TensorflowPlan, BracketedHostListsReachTheCommandLineAsPlainLists) {
  MemoryFileSystem fs;
  auto vars = modelarts(2, 0, 1);
  vars[2] = {"MA_TASK_NAME", "ps"};
  vars.push_back({"TF_PS_HOSTS", "[ps-0:5000,ps-1:5000]"});
  vars.push_back({"TF_WORKER_HOSTS", "[w-0:5001,w-1:5001]"});
  auto p = plan(Mode::kTensorflow, vars, fs, {"python3", "tf.py"});
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->processes.size(), 1U);
  EXPECT_EQ(p->processes[0].argv,
            (std::vector<std::string>{"python3", "tf.py", "--task_index", "0", "--ps_hosts", "ps-0:5000,ps-1:5000",
                                      "--worker_hosts", "w-0:5001,w-1:5001", "--job_name", "ps"}));
  EXPECT_EQ(
      spec_env(p->processes[0])["TF_CONFIG"],
      R"({"cluster":{"ps":["ps-0:5000","ps-1:5000"],"worker":["w-0:5001","w-1:5001"]},"task":{"type":"ps","index":0}})");
}

}  // namespace
}  // namespace trainit

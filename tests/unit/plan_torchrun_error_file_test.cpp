// The torchrun modes give each process TORCHELASTIC_ERROR_FILE, as torchrun's
// agent gives its workers: a file of its own in the job's private directory.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "os/fs.h"
#include "plan/plan.h"

namespace trainit {
namespace {

std::map<std::string, std::string> env_map(const ProcessSpec& p) {
  std::map<std::string, std::string> out;
  for (const EnvVar& v : p.env) {
    out[v.name] = v.value;
  }
  return out;
}

std::vector<EnvVar> modelarts(unsigned hosts, unsigned index) {
  return {{"PATH", "/usr/bin"},
          {"MA_VJ_NAME", "ma-job-x"},
          {"MA_TASK_NAME", "worker"},
          {"MA_NUM_HOSTS", std::to_string(hosts)},
          {"MA_TASK_INDEX", std::to_string(index)},
          {"MA_NUM_GPUS", "2"}};
}

Result<Plan> plan(Mode mode, std::vector<EnvVar> vars, std::string private_dir = {}) {
  static MemoryFileSystem fs;
  PlanInput input;
  input.options.mode = mode;
  input.options.private_dir = std::move(private_dir);
  input.argv = {"train.py"};
  input.env = Environment(std::move(vars));
  input.fs = &fs;
  return make_plan(input);
}

TEST(TorchrunErrorFile, EachRankGetsAFileOfItsOwnInThePrivateDirectory) {
  auto p = plan(Mode::kTorchrun, modelarts(2, 1));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->private_dir, "/tmp/trainit-ma-job-x");
  std::set<std::string> files;
  for (const ProcessSpec& rank : p->processes) {
    files.insert(env_map(rank)["TORCHELASTIC_ERROR_FILE"]);
  }
  EXPECT_EQ(files, (std::set<std::string>{"/tmp/trainit-ma-job-x/error-2.json", "/tmp/trainit-ma-job-x/error-3.json"}));
}

TEST(TorchrunErrorFile, PrivateDirWinsAndAJobWithoutANameHasADirectoryAllTheSame) {
  auto given = plan(Mode::kTorchrun, modelarts(1, 0), "/run/trainit");
  ASSERT_TRUE(given.ok()) << given.error().message;
  EXPECT_EQ(given->private_dir, "/run/trainit");
  EXPECT_EQ(env_map(given->processes[0])["TORCHELASTIC_ERROR_FILE"], "/run/trainit/error-0.json");

  auto unnamed = plan(Mode::kTorchrun, {{"PATH", "/usr/bin"}, {"PET_NPROC_PER_NODE", "1"}});
  ASSERT_TRUE(unnamed.ok()) << unnamed.error().message;
  EXPECT_EQ(unnamed->private_dir, "/tmp/trainit-job");
  EXPECT_EQ(env_map(unnamed->processes[0])["TORCHELASTIC_ERROR_FILE"], "/tmp/trainit-job/error-0.json");
}

TEST(TorchrunErrorFile, TorchrunItselfGetsOneForTheFailureItPassesOn) {
  auto p = plan(Mode::kTorchrunExec, modelarts(2, 1));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->processes.size(), 1u);
  EXPECT_EQ(env_map(p->processes[0])["TORCHELASTIC_ERROR_FILE"], "/tmp/trainit-ma-job-x/error-host-1.json");
}

TEST(TorchrunErrorFile, OtherModesGetNone) {
  for (Mode mode : {Mode::kMsrun, Mode::kPytorch}) {
    auto p = plan(mode, modelarts(1, 0));
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->private_dir, "") << mode_name(mode);
    for (const ProcessSpec& process : p->processes) {
      EXPECT_EQ(env_map(process).count("TORCHELASTIC_ERROR_FILE"), 0u) << process.name;
    }
  }
}

}  // namespace
}  // namespace trainit

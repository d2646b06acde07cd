// The job's outcome: the first cause decides the code and the line, a later
// one changes nothing, the line names where it happened, the status file
// says the state the cause was learned in, and the end writes the
// termination message.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "job/outcome.h"
#include "os/json.h"

namespace trainit {
namespace {

class JobOutcomeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/trainit-outcome-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    env_ = Environment({EnvVar{"MA_CURRENT_INSTANCE_NAME", "w-0"}});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  JobOutcome make(std::string termination_log = "") {
    return JobOutcome(plan_, dir_ + "/status.json", env_, Mode::kTorchrun, std::move(termination_log),
                      [this](const StopNotice& notice) { told_.push_back(notice); });
  }

  [[nodiscard]] Json status() const {
    std::ifstream in(dir_ + "/status.json");
    std::stringstream text;
    text << in.rdbuf();
    auto doc = parse_json(text.str(), "status.json");
    EXPECT_TRUE(doc.ok()) << text.str();
    return doc ? *doc : Json(nullptr);
  }

  std::string dir_;
  Environment env_;
  Plan plan_;
  std::vector<StopNotice> told_;
};

TEST_F(JobOutcomeTest, TheFirstCauseDecidesTheCodeAndIsToldToTheOtherHostsOnce) {
  JobOutcome outcome = make();
  EXPECT_FALSE(outcome.decided());
  EXPECT_EQ(outcome.code(), 0);
  outcome.decide_here(7, "rank-3 exited with 7", JobOutcome::Tell::kOtherHosts, 3);
  outcome.decide_here(1, "rank-2 exited with 1", JobOutcome::Tell::kOtherHosts, 2);
  outcome.decide_signal(143, "trainit got SIGTERM");
  EXPECT_EQ(outcome.code(), 7);
  EXPECT_EQ(outcome.cause(), "host w-0 rank 3: rank-3 exited with 7");
  ASSERT_EQ(told_.size(), 1U);
  EXPECT_EQ(told_[0].exit_code, 7);
  EXPECT_EQ(told_[0].rank, 3);
  EXPECT_EQ(told_[0].cause, "rank-3 exited with 7");
}

TEST_F(JobOutcomeTest, ATimeoutIsNotToldAndAnotherHostsCauseIsTakenAsItNamesIt) {
  plan_.hosts = HostsPlan{.hosts = 2, .index = 1, .peers = {"w-0.job", "w-1.job"}, .control_port = 1};
  JobOutcome outcome = make();
  outcome.decide_remote(StopNotice{9, 0, 2, "rank-2 was killed by SIGKILL"});
  outcome.decide_here(75, "the barrier did not open", JobOutcome::Tell::kNo);
  EXPECT_EQ(outcome.code(), 9);
  EXPECT_EQ(outcome.cause(), "host 0 (w-0.job) rank 2: rank-2 was killed by SIGKILL");
  EXPECT_EQ(outcome.where(5, -1), "host 5: ") << "a host the plan does not name";
  EXPECT_TRUE(told_.empty());
}

TEST_F(JobOutcomeTest, TheStatusFileSaysTheStateTheCauseWasLearnedInToTheEnd) {
  const std::string termination = dir_ + "/termination-log";
  std::ofstream(termination).close();  // the platform's file is there
  JobOutcome outcome = make(termination);
  outcome.entered("running", "2 ranks started", 1.5, {});
  EXPECT_TRUE(status()["cause"].is_null());
  outcome.decide_here(3, "rank-1 exited with 3", JobOutcome::Tell::kNo, 1);
  outcome.note_state("running");
  outcome.entered("stopping", "rank-1 exited with 3", 2.5, {});
  EXPECT_EQ(status()["state"].get<std::string>(), "stopping");
  EXPECT_EQ(status()["cause"].get<std::string>(), "host w-0 rank 1: rank-1 exited with 3; exit 3 in state running");
  outcome.finish("exit", {});
  EXPECT_EQ(status()["exit_code"].get<int>(), 3);
  std::ifstream in(termination);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "host w-0 rank 1: rank-1 exited with 3; exit 3 in state running");
}

TEST_F(JobOutcomeTest, AFrozenOutcomeKeepsItsCodeWhateverComesAfter) {
  JobOutcome outcome = make();
  outcome.freeze();
  EXPECT_FALSE(outcome.decide(3, "late"));
  outcome.decide_signal(143, "trainit got SIGTERM");
  EXPECT_EQ(outcome.code(), 0);
  EXPECT_TRUE(told_.empty());
}

}  // namespace
}  // namespace trainit

// wait_rank_table: the wait ends with the table's plan once the platform
// marks it complete, with a refusal once it is wrong, and never on a table
// still being written. Real files in a temporary directory; the loop stepped
// until a condition with a deadline.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "job/rank_table_wait.h"
#include "net_support.h"
#include "platform_test_tables.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using test::step_for;
using test::step_until;

class JobRankTableWait : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(loop_.init(), 0);
    char dir[] = "/tmp/trainit-table-wait-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    root_ = dir;
    table_dir_ = root_ + "/config";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // As the platform writes it: a new file renamed over the old.
  void write_table(const std::string& text) {
    std::filesystem::create_directories(table_dir_);
    const std::string tmp = table_dir_ + "/.table.tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, table_dir_ + "/jobstart_hccl.json");
  }

  void start(std::vector<EnvVar> vars, Duration poll = RankTableWait::kPoll) {
    input_.options.mode = Mode::kAscend;
    input_.argv = {"python", "train.py"};
    input_.env = Environment(std::move(vars));
    input_.fs = &fs_;
    wait_.emplace(loop_, input_,
                  RankTableWait::Events{[this](Plan plan) { ready_ = std::move(plan); },
                                        [this](const Error& error) { refused_ = error.message; }},
                  poll);
    wait_->start();
  }

  std::vector<EnvVar> platform() const {
    return {{"PATH", "/usr/bin"},
            {"MA_VJ_NAME", "ma-job-3f2a"},
            {"MA_MOUNT_PATH", root_ + "/modelarts"},
            {"RANK_TABLE_FILE", table_dir_}};
  }

  Loop loop_;
  std::string root_, table_dir_;
  RealFileSystem fs_;
  PlanInput input_;
  std::optional<RankTableWait> wait_;
  std::optional<Plan> ready_;
  std::optional<std::string> refused_;
};

TEST_F(JobRankTableWait, AnInitializingTableIsWaitedForAndItsCompletionPlansTheJob) {
  test::OJson table = test::template1({4});
  table["status"] = "initializing";
  write_table(test::text(table));
  start(platform());
  step_for(loop_, 200ms);
  EXPECT_FALSE(ready_ || refused_);
  EXPECT_NE(wait_->pending().find("initializing"), std::string::npos) << wait_->pending();
  write_table(test::text(test::template1({4})));
  ASSERT_TRUE(step_until(loop_, [&] { return ready_.has_value(); })) << "inotify saw the rename";
  EXPECT_EQ(ready_->processes.size(), 4U);
  EXPECT_FALSE(refused_);
}

TEST_F(JobRankTableWait, ATableHalfWrittenIsNotRefused) {
  write_table(R"({"status":"completed","server_cou)");
  start(platform());
  step_for(loop_, 200ms);
  EXPECT_FALSE(refused_) << *refused_;
  EXPECT_NE(wait_->pending().find("does not parse yet"), std::string::npos) << wait_->pending();
}

TEST_F(JobRankTableWait, ACompleteTableThatIsWrongEndsTheWaitWithItsError) {
  test::OJson table = test::template1({2});
  table["server_count"] = "3";
  write_table(test::text(table));
  start(platform());
  ASSERT_TRUE(step_until(loop_, [&] { return refused_.has_value(); }));
  EXPECT_NE(refused_->find("server_count"), std::string::npos) << *refused_;
  EXPECT_FALSE(ready_);
}

// No part of a document caught mid-write nests deeper than the whole: a
// table nested past the limit is refused at once, not waited for.
TEST_F(JobRankTableWait, ATableNestedDeeperThanTheLimitEndsTheWaitAtOnce) {
  write_table(R"({"status":"completed","x":)" + std::string(70, '[') + std::string(70, ']') + "}");
  start(platform());
  ASSERT_TRUE(step_until(loop_, [&] { return refused_.has_value(); })) << wait_->pending();
  EXPECT_NE(refused_->find("nested deeper than 64 levels"), std::string::npos) << *refused_;
  EXPECT_FALSE(ready_);
}

TEST_F(JobRankTableWait, ARelativeRankTablePathIsRefusedBeforeStartReturns) {
  start({{"PATH", "/usr/bin"}, {"MA_VJ_NAME", "ma-job-3f2a"}, {"RANK_TABLE_FILE", "config/table.json"}});
  ASSERT_TRUE(refused_.has_value());
  EXPECT_NE(refused_->find("RANK_TABLE_FILE"), std::string::npos) << *refused_;
}

TEST_F(JobRankTableWait, ADirectoryThatAppearsLaterIsFoundByThePoll) {
  start(platform(), 50ms);  // the directory does not exist yet: nothing to watch
  step_for(loop_, 100ms);
  EXPECT_FALSE(ready_ || refused_);
  write_table(test::text(test::template1({1})));
  ASSERT_TRUE(step_until(loop_, [&] { return ready_.has_value(); }));
}

TEST_F(JobRankTableWait, AfterStopNothingIsPlanned) {
  test::OJson table = test::template1({1});
  table["status"] = "initializing";
  write_table(test::text(table));
  start(platform(), 50ms);
  wait_->stop();
  write_table(test::text(test::template1({1})));
  step_for(loop_, 300ms);
  EXPECT_FALSE(ready_ || refused_);
}

}  // namespace
}  // namespace trainit

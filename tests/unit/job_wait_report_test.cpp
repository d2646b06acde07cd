// A wait says what it waits for, what is missing and for how long, once a
// period (30 s in a job; shortened here through the phases' own period
// parameters), and stops saying it once the wait is over: the rank table,
// the peers' names, the barrier on host 0 and on the others.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "job/host_link.h"
#include "job/rank_table_wait.h"
#include "job/wait_report.h"
#include "net_support.h"
#include "platform_test_tables.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using test::step_for;
using test::step_until;

constexpr Duration kPeriod = 100ms;

// The info lines logged while it exists.
class InfoCapture {
 public:
  InfoCapture() { set_log_verbosity(2); }
  // The reports among them ("waiting for X for N s...").
  [[nodiscard]] std::vector<std::string> waiting() const {
    static const std::regex kReport("info: waiting for .* for [0-9]+ s");
    std::vector<std::string> out;
    for (const std::string& line : log_.lines()) {
      if (std::regex_search(line, kReport)) {
        out.push_back(line);
      }
    }
    return out;
  }
  [[nodiscard]] std::string all() const { return log_.all(); }

 private:
  test::LogCapture log_;
};

class JobWaitReport : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(loop_.init(), 0); }
  Loop loop_;
};

TEST_F(JobWaitReport, SaysNothingBeforeAPeriodThenOnceAPeriodWithWhatIsMissing) {
  InfoCapture log;
  std::string missing = "host 2";
  WaitReport report(
      loop_, "the thing", 600s, [&] { return missing; }, kPeriod);
  step_for(loop_, kPeriod / 2);
  EXPECT_TRUE(log.waiting().empty()) << log.all();
  ASSERT_TRUE(step_until(
      loop_, [&] { return log.waiting().size() >= 3; }, 2s))
      << log.all();
  step_for(loop_, kPeriod / 2);
  EXPECT_LE(log.waiting().size(), 4u) << "at most one line a period";
  EXPECT_NE(log.waiting()[0].find("waiting for the thing for 0 s of 600 s: host 2"), std::string::npos)
      << log.waiting()[0];
  EXPECT_EQ(report.line(90s), "waiting for the thing for 90 s of 600 s: host 2");
  missing.clear();
  EXPECT_EQ(report.line(30s), "waiting for the thing for 30 s of 600 s");
}

TEST_F(JobWaitReport, AWaitWithoutTimeoutSaysHowLongOnly) {
  WaitReport report(loop_, "the thing", Duration::zero(), {}, kPeriod);
  EXPECT_EQ(report.line(61s), "waiting for the thing for 61 s");
}

TEST_F(JobWaitReport, TheRankTableWaitNamesThePathWhatIsPendingAndTheTimeoutUntilTheTableIsComplete) {
  char dir[] = "/tmp/trainit-wait-report-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string root = dir;
  const std::string table_dir = root + "/config";
  std::filesystem::create_directories(table_dir);
  test::OJson table = test::template1({2});
  table["status"] = "initializing";
  std::ofstream(table_dir + "/jobstart_hccl.json") << test::text(table);

  InfoCapture log;
  RealFileSystem fs;
  PlanInput input;
  input.options.mode = Mode::kAscend;
  input.argv = {"python", "train.py"};
  input.env = Environment({{"PATH", "/usr/bin"},
                           {"MA_VJ_NAME", "ma-job-3f2a"},
                           {"MA_MOUNT_PATH", root + "/modelarts"},
                           {"RANK_TABLE_FILE", table_dir}});
  input.fs = &fs;
  std::optional<Plan> ready;
  RankTableWait wait(loop_, input,
                     RankTableWait::Events{[&](Plan plan) { ready = std::move(plan); },
                                           [](const Error& e) { ADD_FAILURE() << e.message; }},
                     RankTableWait::kPoll, 1800s, kPeriod);
  wait.start();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !log.waiting().empty(); }, 2s))
      << log.all();
  const std::string line = log.waiting()[0];
  EXPECT_NE(line.find("waiting for the rank table " + table_dir + "/jobstart_hccl.json for 0 s of 1800 s: "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("initializing"), std::string::npos) << line;

  const std::string tmp = table_dir + "/.tmp";
  std::ofstream(tmp) << test::text(test::template1({2}));
  std::filesystem::rename(tmp, table_dir + "/jobstart_hccl.json");
  ASSERT_TRUE(step_until(loop_, [&] { return ready.has_value(); }));
  const size_t said = log.waiting().size();
  step_for(loop_, 3 * kPeriod);
  EXPECT_EQ(log.waiting().size(), said) << "still reporting after the table completed";
  std::filesystem::remove_all(root);
}

TEST_F(JobWaitReport, PeerNamesThatDoNotResolveAreNamedUntilTheyDo) {
  InfoCapture log;
  auto resolvable = std::make_shared<std::atomic<bool>>(false);
  bool done = false;
  auto lookup = [resolvable](const std::string& name) {
    in_addr addr{htonl(0x0a000001)};
    return name == "w-0.job" || resolvable->load() ? std::vector<in_addr>{addr} : std::vector<in_addr>{};
  };
  Backoff fast;
  fast.first = 10ms;
  fast.max = 10ms;
  PeerNames names(
      loop_, {"w-0.job", "w-1.job"}, [&](std::vector<in_addr>) { done = true; }, lookup, fast, 600s, kPeriod);
  ASSERT_TRUE(step_until(
      loop_, [&] { return !log.waiting().empty(); }, 2s))
      << log.all();
  EXPECT_NE(
      log.waiting()[0].find("waiting for the peers' names to resolve for 0 s of 600 s: not resolved yet: w-1.job"),
      std::string::npos)
      << log.waiting()[0];
  resolvable->store(true);
  ASSERT_TRUE(step_until(loop_, [&] { return done; }));
  const size_t said = log.waiting().size();
  step_for(loop_, 3 * kPeriod);
  EXPECT_EQ(log.waiting().size(), said) << "still reporting after every name resolved";
}

// Three hosts over 127.0.0.1; host 2 checks in late.
class JobBarrierReport : public JobWaitReport {
 protected:
  void open(unsigned index, unsigned count, uint16_t port) {
    HostLinkSettings settings;
    settings.host_index = index;
    settings.host_count = count;
    settings.port = port;
    settings.hosts.assign(count, test::loopback());
    settings.job_id = "job-7";
    settings.secret = "s3cret";
    settings.peer_loss = 10s;
    settings.barrier_timeout = 1800s;
    settings.report_every = kPeriod;
    HostLinkEvents events;
    events.on_go = [this] { ++go_; };
    events.on_stop = [](const StopNotice&) {};
    events.on_lost = [](unsigned host, const std::string&) { ADD_FAILURE() << "host " << host << " lost"; };
    events.on_restart = [](unsigned, const StopNotice&) {};
    events.on_job_done = [](int, const std::string&) {};
    auto link = open_host_link(loop_, settings, std::move(events));
    ASSERT_TRUE(link.ok()) << link.error().message;
    links_.push_back(std::move(*link));
  }

  int go_ = 0;
  std::vector<std::unique_ptr<HostLink>> links_;
};

TEST_F(JobBarrierReport, Host0NamesTheHostsNotCheckedInAndTheOthersWaitForHost0UntilTheBarrierOpens) {
  Fd probe;
  const uint16_t port = test::bind_loopback(probe, false);
  probe.reset();
  InfoCapture log;
  for (unsigned i = 0; i < 3; ++i) {
    open(i, 3, port);
  }
  links_[0]->check_in();
  links_[1]->check_in();
  auto said = [&](std::string_view text) {
    for (const std::string& line : log.waiting()) {
      if (line.find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(step_until(
      loop_,
      [&] {
        return said(
            "waiting for every host at the barrier for 0 s of 1800 s: not "
            "checked in yet: host 2");
      },
      2s))
      << log.all();
  ASSERT_TRUE(step_until(
      loop_, [&] { return said("waiting for host 0 to open the barrier for 0 s of 1800 s"); }, 2s))
      << log.all();
  links_[2]->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return go_ == 3; }));
  const size_t before = log.waiting().size();
  step_for(loop_, 3 * kPeriod);
  EXPECT_EQ(log.waiting().size(), before) << "still reporting after the barrier opened";
}

TEST_F(JobBarrierReport, AStopEndsTheReport) {
  Fd probe;
  const uint16_t port = test::bind_loopback(probe, false);
  probe.reset();
  InfoCapture log;
  open(0, 2, port);
  links_[0]->check_in();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !log.waiting().empty(); }, 2s))
      << log.all();
  EXPECT_NE(log.waiting()[0].find("not checked in yet: host 1"), std::string::npos) << log.waiting()[0];
  links_[0]->stop(StopNotice{143, 0, -1, "trainit got SIGTERM"});
  const size_t before = log.waiting().size();
  step_for(loop_, 3 * kPeriod);
  EXPECT_EQ(log.waiting().size(), before) << "still reporting after the job stopped";
}

}  // namespace
}  // namespace trainit

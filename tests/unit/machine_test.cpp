// The whole transition relation, checked over every (state, event) pair
// against a golden listing that a reviewer can read at a glance; and the
// driver that performs each transition from its state's row of work.
#include "job/machine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loop/loop.h"

namespace trainit {
namespace {

Plan ascend_plan() {
  Plan plan;
  plan.mode = Mode::kAscend;
  plan.states = {State::kWaitRankTable, State::kSpawn,   State::kRunning,
                 State::kStopping,      State::kReaping, State::kExit};
  return plan;
}

std::string listing(const Plan& plan) {
  std::ostringstream out;
  for (State s : plan.states) {
    for (Event e : kAllEvents) {
      out << state_name(s) << " + " << event_name(e) << " -> " << state_name(next(s, e, plan)) << "\n";
    }
  }
  return out.str();
}

// The test only compares: it never writes the listing it checks against. It
// leaves the listing as it is now in the build tree, and the update_goldens
// target (cmake --build --preset release --target update_goldens) copies that
// over the golden one, for review in git diff.
TEST(Machine, TransitionsMatchTheGoldenListing) {
  const std::string path = std::string(TRAINIT_TEST_DATA) + "/unit/data/machine_transitions.txt";
  const std::string now = std::string(TRAINIT_TEST_OUTPUT) + "/machine_transitions.txt";
  std::string actual = listing(ascend_plan());
  std::ofstream(now) << actual;
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "the listing as it is now: " << now;
}

TEST(Machine, EveryFailureOrStopBeforeTheEndLeadsToStopping) {
  Plan plan = ascend_plan();
  for (State s : {State::kWaitRankTable, State::kSpawn, State::kRunning}) {
    for (Event e : {Event::kFailed, Event::kTimedOut, Event::kTerm}) {
      EXPECT_EQ(next(s, e, plan), State::kStopping) << state_name(s) << " " << event_name(e);
    }
  }
}

TEST(Machine, OnlyAllGoneAndRestartLeaveReapingAndNothingLeavesExit) {
  Plan plan = ascend_plan();
  for (Event e : kAllEvents) {
    EXPECT_EQ(next(State::kExit, e, plan), State::kExit);
    const State after = e == Event::kAllGone ? State::kExit : e == Event::kRestart ? State::kSpawn : State::kReaping;
    EXPECT_EQ(next(State::kReaping, e, plan), after) << event_name(e);
  }
}

TEST(Machine, ARestartStopsTheRanksLikeAFailureThenSpawnsAgain) {
  Plan plan = ascend_plan();
  EXPECT_EQ(next(State::kRunning, Event::kRestart, plan), State::kStopping);
  EXPECT_EQ(next(State::kStopping, Event::kRestart, plan), State::kStopping);
  EXPECT_EQ(next(State::kStopping, Event::kAllGone, plan), State::kReaping);
  EXPECT_EQ(next(State::kReaping, Event::kRestart, plan), State::kSpawn);
  EXPECT_EQ(next(State::kWaitRankTable, Event::kRestart, plan), State::kWaitRankTable)
      << "no restart before the ranks spawn";
}

// Another host's restart reaches a host still spawning (or waiting out its
// restart's backoff): what it started stops, and it meets the others again.
TEST(Machine, ARestartWhileSpawningStopsWhatWasStartedToMeetTheOthersAgain) {
  Plan plan = ascend_plan();
  plan.states = {State::kResolvePeers, State::kHostBarrier, State::kSpawn, State::kRunning};
  EXPECT_EQ(next(State::kSpawn, Event::kRestart, plan), State::kStopping);
  EXPECT_EQ(next(State::kReaping, Event::kRestart, plan), State::kHostBarrier);
  EXPECT_EQ(next(State::kHostBarrier, Event::kRestart, plan), State::kHostBarrier);
}

TEST(Machine, DoneFollowsThePlansOwnOrder) {
  Plan plan = ascend_plan();
  EXPECT_EQ(next(State::kWaitRankTable, Event::kDone, plan), State::kSpawn);
  plan.states = {State::kWaitRankTable, State::kResolvePeers, State::kSpawn, State::kRunning};
  EXPECT_EQ(next(State::kWaitRankTable, Event::kDone, plan), State::kResolvePeers);
  EXPECT_EQ(next(State::kResolvePeers, Event::kDone, plan), State::kSpawn);
}

TEST(Machine, EveryStateHasATableRow) {
  for (State s : ascend_plan().states) {
    EXPECT_EQ(state_row(s).state, s);
    EXPECT_NE(std::string(state_row(s).entering), "");
  }
  EXPECT_EQ(state_row(State::kWaitRankTable).deadline, Deadline::kRankTable);
  EXPECT_EQ(state_row(State::kStopping).deadline, Deadline::kGrace);
  EXPECT_EQ(state_row(State::kRunning).deadline, Deadline::kNone);
}

// The driver: each state's row of work, in the order a transition runs it,
// with every state's enter/leave recorded in `trail`.
class JobMachineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(loop_.init(), 0);
    for (State s : plan_.states) {
      const std::string name(state_name(s));
      machine_.set_work(
          s, [this, name] { trail_.push_back("enter " + name); }, [this, name] { trail_.push_back("leave " + name); },
          [this, name] {
            trail_.push_back("expire " + name);
            machine_.fire(Event::kTimedOut, "deadline");
          });
    }
  }

  // Steps the loop until `done` or 5 s.
  template <typename Done>
  bool run_until(Done done) {
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (!done() && Clock::now() < until) {
      loop_.run_once(10);
    }
    return done();
  }

  Loop loop_;
  Plan plan_ = ascend_plan();
  std::vector<std::string> trail_;
  JobMachine machine_{
      loop_, plan_,
      JobMachine::Deadlines{std::chrono::milliseconds(20), std::chrono::seconds(1),
                            [] { return std::chrono::seconds(1); }},
      [this](std::optional<State> from, State to, const std::string& why, double since) {
        EXPECT_GT(since, 0);
        trail_.push_back(fmt::format("moved {} -> {}: {}", from ? std::string(state_name(*from)) : std::string("start"),
                                     state_name(to), why));
      }};
};

TEST_F(JobMachineTest, ATransitionLeavesTheOldStateTellsTheMoveThenEntersTheNew) {
  machine_.start([this] { machine_.go(State::kWaitRankTable, "trainit started"); });
  machine_.fire(Event::kDone, "the table is complete");
  EXPECT_EQ(machine_.state(), State::kSpawn);
  EXPECT_EQ(trail_, (std::vector<std::string>{"moved start -> wait_rank_table: trainit started",
                                              "enter wait_rank_table", "leave wait_rank_table",
                                              "moved wait_rank_table -> spawn: the table is complete", "enter spawn"}));
}

TEST_F(JobMachineTest, EventsFiredWhileEnteringAStateAreTakenOnceItIsEntered) {
  machine_.set_work(State::kSpawn, [this] {
    trail_.push_back("enter spawn");
    machine_.fire(Event::kDone, "ranks started");
    trail_.push_back("spawn entered");  // the Done waits for this
  });
  machine_.start([this] { machine_.go(State::kSpawn, "trainit started"); });
  EXPECT_EQ(machine_.state(), State::kRunning);
  EXPECT_EQ(trail_, (std::vector<std::string>{"moved start -> spawn: trainit started", "enter spawn", "spawn entered",
                                              "moved spawn -> running: ranks started", "enter running"}));
}

TEST_F(JobMachineTest, AFailureBeforeTheFirstStateGoesStraightToStopping) {
  machine_.start([this] { machine_.fire(Event::kFailed, "bad secret"); });
  EXPECT_EQ(machine_.state(), State::kStopping);
  EXPECT_EQ(trail_.front(), "moved start -> stopping: bad secret");
}

TEST_F(JobMachineTest, AStatesDeadlineRunsItsExpiryOnce) {
  machine_.start([this] { machine_.go(State::kWaitRankTable, "trainit started"); });
  ASSERT_TRUE(run_until([this] { return machine_.state() == State::kStopping; }));
  EXPECT_EQ(std::count(trail_.begin(), trail_.end(), "expire wait_rank_table"), 1);
  // stopping's deadline is the escalation's own (kGrace): nothing armed here.
  loop_.run_once(50);
  EXPECT_EQ(std::count(trail_.begin(), trail_.end(), "expire stopping"), 0);
}

TEST_F(JobMachineTest, LeavingAStateDisarmsItsDeadline) {
  machine_.start([this] { machine_.go(State::kWaitRankTable, "trainit started"); });
  machine_.fire(Event::kDone, "the table is complete");
  const auto until = Clock::now() + std::chrono::milliseconds(100);  // 5 times the table's deadline
  while (Clock::now() < until) {
    loop_.run_once(10);
  }
  EXPECT_EQ(std::count(trail_.begin(), trail_.end(), "expire wait_rank_table"), 0);
  EXPECT_EQ(machine_.state(), State::kSpawn);
}

}  // namespace
}  // namespace trainit

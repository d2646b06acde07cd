// The whole transition relation, checked over every (state, event) pair
// against a golden listing that a reviewer can read at a glance.
#include "job/machine.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

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
  EXPECT_EQ(next(State::kSpawn, Event::kRestart, plan), State::kSpawn) << "no restart before the ranks run";
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

}  // namespace
}  // namespace trainit

#include "job/machine.h"

#include <algorithm>

namespace trainit {
namespace {

constexpr StateRow kTable[] = {
    {State::kWaitRankTable, "watch the rank table until it is complete and valid", Deadline::kRankTable},
    {State::kResolvePeers, "resolve every peer's name", Deadline::kPeers},
    {State::kStartSshd, "start sshd", Deadline::kNone},
    {State::kWaitPeers, "wait until every peer's sshd accepts connections", Deadline::kPeers},
    {State::kHostBarrier, "wait until every host checked in, then open the control channel's barrier",
     Deadline::kBarrier},
    {State::kSpawn, "create directories and files, start every rank", Deadline::kNone},
    {State::kRunning, "watch the ranks", Deadline::kNone},
    {State::kStopping, "SIGTERM and SIGCONT to every live rank's group (newest first) and everything else",
     Deadline::kGrace},
    {State::kReaping, "SIGKILL everything left, again while anything is, reap it, finish the logs", Deadline::kNone},
    {State::kExit, "exit with the job's code", Deadline::kNone},
};

// The plan's state after `state`, or running when the plan skips ahead.
State planned_after(State state, const Plan& plan) {
  auto it = std::find(plan.states.begin(), plan.states.end(), state);
  if (it != plan.states.end() && it + 1 != plan.states.end()) {
    return *(it + 1);
  }
  return State::kRunning;
}

bool before_spawn(State s) {
  return s < State::kSpawn;
}

}  // namespace

std::string_view event_name(Event event) noexcept {
  switch (event) {
    case Event::kDone:
      return "Done";
    case Event::kFailed:
      return "Failed";
    case Event::kTimedOut:
      return "TimedOut";
    case Event::kTerm:
      return "Term";
    case Event::kRankExited:
      return "RankExited";
    case Event::kAllGone:
      return "AllGone";
    case Event::kRestart:
      return "Restart";
  }
  return "?";
}

const StateRow& state_row(State state) noexcept {
  for (const auto& row : kTable) {
    if (row.state == state) {
      return row;
    }
  }
  return kTable[std::size(kTable) - 1];
}

State next(State state, Event event, const Plan& plan) noexcept {
  switch (state) {
    case State::kExit:
      return State::kExit;
    case State::kReaping:
      if (event == Event::kRestart) {  // several hosts meet at the barrier again first
        return std::find(plan.states.begin(), plan.states.end(), State::kHostBarrier) != plan.states.end()
                   ? State::kHostBarrier
                   : State::kSpawn;
      }
      return event == Event::kAllGone ? State::kExit : state;
    case State::kStopping:
      return event == Event::kAllGone || event == Event::kTimedOut ? State::kReaping : state;
    case State::kRunning:
      if (event == Event::kRankExited) {
        return state;
      }
      return event == Event::kAllGone ? State::kReaping : State::kStopping;  // Done: drain what is left
    default:                                                                 // wait_rank_table .. spawn
      if (event == Event::kDone) {
        return planned_after(state, plan);
      }
      if (event == Event::kRankExited || event == Event::kRestart) {
        return state;
      }
      if (event == Event::kAllGone) {
        return before_spawn(state) ? state : State::kReaping;
      }
      return State::kStopping;  // Failed, TimedOut, Term
  }
}

}  // namespace trainit

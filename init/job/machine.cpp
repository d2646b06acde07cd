#include "job/machine.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>

#include "base/log.h"

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
      if (event == Event::kRestart) {  // another host's, while this one spawns: it stops to meet them again
        return state == State::kSpawn ? State::kStopping : state;
      }
      if (event == Event::kRankExited) {
        return state;
      }
      if (event == Event::kAllGone) {
        return before_spawn(state) ? state : State::kReaping;
      }
      return State::kStopping;  // Failed, TimedOut, Term
  }
}

void JobMachine::start(const std::function<void()>& begin) {
  entered_ = Clock::now();
  in_transition_ = true;
  begin();
  run_queue();
}

void JobMachine::fire(Event event, std::string why) {
  events_.emplace_back(event, std::move(why));
  if (in_transition_) {
    return;  // the transition under way takes it next
  }
  in_transition_ = true;
  run_queue();
}

// Takes the queued events in order; entering a state may queue more.
void JobMachine::run_queue() {
  while (!events_.empty()) {
    auto [event, why] = std::move(events_.front());
    events_.pop_front();
    State to = next(state_, event, plan_);
    if (to != state_) {
      go(to, why);
    } else {
      log_debug("{} in {}: {}", event_name(event), state_name(state_), why);
    }
  }
  in_transition_ = false;
}

void JobMachine::go(State to, const std::string& why) {
  // The moment of the transition, on both clocks at once: logging it and
  // leaving the state may wait for a CPU, and "since" is when it began.
  const Clock::time_point now = Clock::now();
  const double since = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::optional<State> from;
  if (started_) {
    from = state_;
    log_info("{} -> {} after {:.3f} s: {}", state_name(state_), state_name(to), seconds(now - entered_), why);
    if (const Work& work = work_[static_cast<size_t>(state_)]; work.leave) {
      work.leave();
    }
  } else {
    log_info("{}: {}", state_name(to), why);
    started_ = true;
  }
  state_ = to;
  entered_ = now;
  moved_(from, to, why, since);
  arm_deadline(to, now);
  work_[static_cast<size_t>(to)].enter();
}

void JobMachine::arm_deadline(State state, Clock::time_point now) {
  deadline_.reset();
  const Deadline deadline = state_row(state).deadline;
  const std::optional<Duration> after = duration_of(deadline);
  const Work& work = work_[static_cast<size_t>(state)];
  if (!after || !work.expire) {
    return;
  }
  deadline_ = loop_.add_timer(
      now + *after,
      [&work] {
        work.expire();
        return 0;
      },
      fmt::format("{} deadline", state_name(state)));
}

std::optional<Duration> JobMachine::duration_of(Deadline deadline) const {
  switch (deadline) {
    case Deadline::kRankTable:
      return deadlines_.rank_table;
    case Deadline::kPeers:
      return deadlines_.peers;
    case Deadline::kBarrier:
      return deadlines_.barrier();
    case Deadline::kNone:
    case Deadline::kGrace:
      break;
  }
  return std::nullopt;
}

}  // namespace trainit

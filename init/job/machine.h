// The job state machine: the states table and the transition relation as
// data, with no side effects, and JobMachine, the driver that performs a
// transition (the only place one happens): log line, leaving the old state,
// status file and STATUS= (through the runner), deadline, entering the new
// state. What each state does is its phase's row of work.
//
//   start -> wait_rank_table -> spawn -> running -> stopping -> reaping -> exit
//
// A plan keeps only the states its mode needs; next() skips to the plan's
// next state on Done. Any failure, timeout or SIGTERM/SIGINT before the ranks
// are gone leads to stopping; stopping ends in reaping (everything gone, or
// the grace is over and SIGKILL follows); reaping ends in exit. A restart
// (Plan::restarts) goes running -> stopping -> reaping like a failure, and
// from reaping back to spawn (host_barrier first, when the plan has one).
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/time.h"
#include "loop/loop.h"
#include "plan/plan.h"

namespace trainit {

enum class Event {
  kDone,        // the state's work is complete (table ready, ranks spawned, all ranks exited 0)
  kFailed,      // it cannot go on: bad table, spawn failure, a rank failed
  kTimedOut,    // the state's deadline passed
  kTerm,        // SIGTERM or SIGINT reached trainit
  kRankExited,  // a rank exited 0 while others still run
  kAllGone,     // no process of ours is left
  kRestart,     // a rank failed and the plan restarts the job: stop it, then spawn again
};
inline constexpr Event kAllEvents[] = {Event::kDone,       Event::kFailed,  Event::kTimedOut, Event::kTerm,
                                       Event::kRankExited, Event::kAllGone, Event::kRestart};

[[nodiscard]] std::string_view event_name(Event event) noexcept;

// Which of the options bounds a state's time; the runner arms it on entry and
// its expiry is the event TimedOut.
enum class Deadline {
  kNone,
  kRankTable,  // --rank-table-timeout
  kGrace,      // --grace: the stop escalation's clock (SIGKILL when it runs out)
  kPeers,      // --peer-timeout: peer names resolved, peers' sshd up
  kBarrier,    // --barrier-timeout: every host checked in
};

// One row of the table: what entering a state does and what bounds its time.
// go() in the runner logs, writes the status, arms the row's deadline and
// calls the state's entry action, all from this row.
struct StateRow {
  State state;
  const char* entering;  // what entering does, for the log and the docs
  Deadline deadline;
};
[[nodiscard]] const StateRow& state_row(State state) noexcept;

// The whole transition relation. Returns `state` itself when the event does
// not move the machine.
[[nodiscard]] State next(State state, Event event, const Plan& plan) noexcept;

inline constexpr size_t kStateCount = static_cast<size_t>(State::kExit) + 1;

class JobMachine {
 public:
  // A state's work, one row per state: what entering it does, what leaving
  // it ends (nothing its phase watched acts later), and what its deadline's
  // expiry does (which fires TimedOut). Only `enter` is required.
  struct Work {
    std::function<void()> enter;
    std::function<void()> leave;
    std::function<void()> expire;
  };
  // How long each deadline is (kGrace is the stop escalation's own clock:
  // it fires TimedOut with its SIGKILL).
  struct Deadlines {
    Duration rank_table{};
    Duration peers{};
    std::function<Duration()> barrier;  // known once the plan is
  };
  // The machine moved to `to` (from nullopt: its first state), for `why`,
  // at `since` (the wall clock, seconds since the epoch).
  using MovedFn = std::function<void(std::optional<State> from, State to, const std::string& why, double since)>;

  JobMachine(Loop& loop, const Plan& plan, Deadlines deadlines, MovedFn moved)
      : loop_(loop), plan_(plan), deadlines_(std::move(deadlines)), moved_(std::move(moved)) {}

  void set_work(State state, std::function<void()> enter, std::function<void()> leave = {},
                std::function<void()> expire = {}) {
    work_[static_cast<size_t>(state)] = Work{std::move(enter), std::move(leave), std::move(expire)};
  }

  // The first transition: `begin` goes to the first state, or fires an event
  // (a failure before any state), taken once it returned.
  void start(const std::function<void()>& begin);
  // Moves to `to` now: only from start()'s `begin`; everything else fires.
  void go(State to, const std::string& why);
  // Queues `event`; taken now unless a transition is under way (it takes
  // the event next).
  void fire(Event event, std::string why);

  [[nodiscard]] State state() const { return state_; }
  [[nodiscard]] bool started() const { return started_; }

 private:
  void run_queue();
  void arm_deadline(State state, Clock::time_point now);
  [[nodiscard]] std::optional<Duration> duration_of(Deadline deadline) const;

  Loop& loop_;
  const Plan& plan_;
  Deadlines deadlines_;
  MovedFn moved_;
  std::array<Work, kStateCount> work_;
  State state_ = State::kWaitRankTable;
  Clock::time_point entered_ = Clock::now();
  std::deque<std::pair<Event, std::string>> events_;
  bool in_transition_ = false;
  bool started_ = false;
  SourceHandle deadline_;
};

}  // namespace trainit

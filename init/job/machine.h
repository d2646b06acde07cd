// The job state machine as data: the states table and the transition
// relation, with no side effects. init/job/runner.cpp owns go(), the one place
// that performs a transition (log line, status file, STATUS=, deadline,
// entering the state).
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

#include <string_view>

#include "base/time.h"
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

}  // namespace trainit

#include "proc/escalation.h"

#include <csignal>

namespace trainit {

Escalation::Escalation(Loop& loop, Duration grace, SendFn send, KilledFn on_killed)
    : loop_(loop), grace_(grace), send_(std::move(send)), on_killed_(std::move(on_killed)) {
  timer_ = loop.add_timer(
      Clock::time_point::max(),
      [this] {
        on_deadline();
        return 0;
      },
      "grace period");
}

void Escalation::start(int signo) {
  send_(signo);
  if (started_) {
    return;
  }
  started_ = true;
  killed_ = false;
  timer_.set_enabled(true);
  timer_.set_deadline(Clock::now() + grace_);
}

// The grace is over: SIGKILL, and again every kResweep while anything of ours
// is left (a zombie not reaped yet counts: reaping it ends the sweeps).
void Escalation::on_deadline() {
  const bool first = !killed_;
  if (!first && !loop_.has_children()) {
    return;  // nothing left; the owner's finish() follows its last reap
  }
  killed_ = true;
  send_(SIGKILL);  // the signal before any word about it
  timer_.set_deadline(Clock::now() + kResweep);
  if (first && on_killed_) {
    on_killed_();
  }
}

}  // namespace trainit

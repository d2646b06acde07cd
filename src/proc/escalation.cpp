#include "proc/escalation.h"

#include <csignal>

namespace trainit {

Escalation::Escalation(Loop& loop, Duration grace, SendFn send) : grace_(grace), send_(std::move(send)) {
  timer_ = loop.add_timer(
      Clock::time_point::max(),
      [this] {
        killed_ = true;
        send_(SIGKILL);
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
  timer_.set_deadline(Clock::now() + grace_);
}

}  // namespace trainit

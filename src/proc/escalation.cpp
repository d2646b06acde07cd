#include "proc/escalation.h"

#include <csignal>

namespace trainit {

void Escalation::start(int signo) {
  send_(signo);
  if (started_) {
    return;
  }
  started_ = true;
  killed_ = false;
  timer_ = loop_.add_timer(
      Clock::now() + grace_,
      [this] {
        killed_ = true;
        send_(SIGKILL);
        return 0;
      },
      "grace period");
}

}  // namespace trainit

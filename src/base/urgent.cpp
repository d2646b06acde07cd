#include "base/urgent.h"

#include <sched.h>

namespace trainit {

UrgentSection::UrgentSection() noexcept {
  before_ = ::sched_getscheduler(0);
  const int policy = before_ & ~SCHED_RESET_ON_FORK;
  if (before_ >= 0 && (policy == SCHED_FIFO || policy == SCHED_RR)) {
    ahead_ = true;
    return;
  }
  if (before_ < 0 || policy != SCHED_OTHER) {
    return;
  }
  const sched_param lowest{.sched_priority = 1};
  raised_ = ahead_ = ::sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &lowest) == 0;
}

UrgentSection::~UrgentSection() {
  if (raised_) {
    // Leaving the real-time class takes no privilege; clearing the
    // reset-on-fork flag does. A thread ahead by RLIMIT_RTPRIO alone keeps
    // the flag: for SCHED_OTHER it only starts children at nice 0 where the
    // thread's nice is below 0.
    const sched_param none{.sched_priority = 0};
    if (::sched_setscheduler(0, before_, &none) != 0) {
      (void)::sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &none);
    }
  }
}

}  // namespace trainit

#include "base/urgent.h"

#include <sched.h>

namespace trainit {
namespace {

constexpr int kUnread = -2;
// The thread's policy outside its sections (flags included; -1: the kernel
// would not say), once read.
thread_local int outside = kUnread;
// Sections of this thread that raised it and are still open.
thread_local int raising = 0;

}  // namespace

void UrgentSection::prepare() noexcept {
  if (outside == kUnread) {
    outside = ::sched_getscheduler(0);
  }
}

UrgentSection::UrgentSection() noexcept {
  if (raising > 0) {
    ahead_ = true;  // inside a section that raised the thread: it stays as it is
    return;
  }
  prepare();
  before_ = outside;
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
  raising += raised_ ? 1 : 0;
}

UrgentSection::~UrgentSection() {
  if (raised_) {
    --raising;
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

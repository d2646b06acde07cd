// The stop escalation: a signal now, SIGKILL once the grace period is over.
//
// The owner says how to reach its processes (`send`, called with the signal to
// deliver) and tells the escalation when they are all gone (finish()), which
// cancels the SIGKILL. One instance per group of processes to stop; one
// --grace governs every escalation in trainit.
#pragma once

#include <functional>

#include "base/time.h"
#include "loop/loop.h"

namespace trainit {

class Escalation {
 public:
  using SendFn = std::function<void(int signo)>;

  // The SIGKILL timer is registered here, disarmed, so that start() — on the
  // stop path — allocates nothing.
  Escalation(Loop& loop, Duration grace, SendFn send);

  // Sends `signo` now and arms the SIGKILL deadline, unless one is armed
  // already (a second stop request re-sends the signal, keeps the deadline).
  void start(int signo);
  // The processes are gone: no SIGKILL will follow; start() may be called
  // again for the next set.
  void finish() noexcept {
    timer_.set_enabled(false);
    started_ = false;
  }
  [[nodiscard]] bool started() const noexcept { return started_; }
  [[nodiscard]] bool killed() const noexcept { return killed_; }

 private:
  Duration grace_;
  SendFn send_;
  SourceHandle timer_;
  bool started_ = false;
  bool killed_ = false;
};

}  // namespace trainit

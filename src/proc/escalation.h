// The stop escalation, the one way trainit stops processes in every mode: a
// stop signal now, SIGKILL once the grace period is over, and SIGKILL again
// while anything is left.
//
// The owner says how to reach its processes (`send`, called with the signal to
// deliver; the senders of proc/tree.h follow a stop signal with SIGCONT, so a
// stopped process sees it) and tells the escalation when they are all gone
// (finish()), which cancels the SIGKILL. The grace deadline is the only clock:
// after it, a process that escaped a sweep (forked while the sweep walked
// /proc) is caught by the next, every kResweep, until nothing is left. One
// --grace governs every escalation in trainit.
#pragma once

#include <functional>

#include "base/time.h"
#include "loop/loop.h"

namespace trainit {

class Escalation {
 public:
  using SendFn = std::function<void(int signo)>;
  using KilledFn = std::function<void()>;

  // How often SIGKILL is sent again while processes are left after the grace.
  static constexpr Duration kResweep = std::chrono::milliseconds(10);

  // The SIGKILL timer is registered here, disarmed, so that start() — on the
  // stop path — allocates nothing. `on_killed` (optional) is called once the
  // first SIGKILL went out: the grace is over.
  Escalation(Loop& loop, Duration grace, SendFn send, KilledFn on_killed = {});

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
  void on_deadline();

  Loop& loop_;
  Duration grace_;
  SendFn send_;
  KilledFn on_killed_;
  SourceHandle timer_;
  bool started_ = false;
  bool killed_ = false;
};

}  // namespace trainit

// Restarts (Plan::restarts): how often the job may start again after a
// rank failed, how often it did, and whether one is under way. On several
// hosts host 0 numbers the starts (the control channel's generations) and
// every host follows its count.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "base/log.h"
#include "base/time.h"
#include "job/hosts.h"
#include "loop/loop.h"
#include "plan/plan.h"

namespace trainit {

class Restarts {
 public:
  Restarts(const Plan& plan, HostsPhase& hosts) : plan_(plan), hosts_(hosts) {}

  // This host's rank failed while the ranks ran: true when the job starts
  // again (now pending), with restarts left; on several hosts once host 0
  // numbered the start everywhere (false when a stop came first: the
  // failure then ends the job).
  bool restart_for(const StopNotice& failure) {
    if (!plan_.restarts || done_ >= *plan_.restarts) {
      return false;
    }
    if (plan_.hosts && plan_.hosts->hosts > 1) {
      const unsigned generation = hosts_.restart(failure);
      if (generation == 0) {
        return false;
      }
      follow(generation);
    }
    pending_ = true;
    return true;
  }
  // The ranks are being stopped to start again.
  [[nodiscard]] bool pending() const { return pending_; }
  void set_pending(bool pending) { pending_ = pending; }
  // The next restart's number and the limit, as the log says them.
  [[nodiscard]] std::string next_of_limit() const {
    return std::to_string(done_ + 1) + " of " +
           (plan_.restarts && *plan_.restarts == kUnlimitedRestarts ? std::string("unlimited")
                                                                    : std::to_string(plan_.restarts.value_or(0)));
  }
  // Host 0 begins start `generation` (1, 2, ...) everywhere.
  void follow(unsigned generation) { done_ = generation - 1; }

  // Entering spawn: `spawn` now for the first start; for a restart's, once
  // its backoff has passed: 0.1 s before restart 1, doubling with each
  // restart's number, at most 10 s (a job that fails at once is not started
  // again at once, for ever). From the number alone, so that every host of
  // a job waits alike.
  void start(Loop& loop, Plan& plan, std::function<void()> spawn) {
    if (!pending_) {
      spawn();
      return;
    }
    using namespace std::chrono_literals;
    const Duration backoff = std::min<Duration>(100ms * (1LL << std::min(done_, 20U)), 10s);
    log_info("starting the job again in {:.1f} s (restart {})", seconds(backoff), next_of_limit());
    begin(plan);
    backoff_ = loop.add_timer(
        Clock::now() + backoff,
        [this, spawn = std::move(spawn)] {
          backoff_.reset();
          spawn();
          return 0;
        },
        "job restart backoff");
  }
  // Leaving spawn (a stop, or another host's restart) while a restart
  // waits: nothing starts.
  void cancel() { backoff_.reset(); }

 private:
  // The workers learn which start this is (TORCHELASTIC_RESTART_COUNT,
  // where the plan sets it).
  void begin(Plan& plan) {
    pending_ = false;
    ++done_;
    for (ProcessSpec& spec : plan.processes) {
      for (EnvVar& var : spec.env) {
        if (var.name == "TORCHELASTIC_RESTART_COUNT") {
          var.value = std::to_string(done_);
        }
      }
    }
  }

  const Plan& plan_;
  HostsPhase& hosts_;
  unsigned done_ = 0;
  bool pending_ = false;
  SourceHandle backoff_;  // timer: a restart's spawn
};

}  // namespace trainit

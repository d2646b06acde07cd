// Restarts (Plan::restarts): how often the job may start again after a
// rank failed, how often it did, and whether one is under way. On several
// hosts host 0 numbers the starts (the control channel's generations) and
// every host follows its count.
#pragma once

#include <string>

#include "job/hosts.h"
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

  // spawn, again: the workers learn which start this is
  // (TORCHELASTIC_RESTART_COUNT, where the plan sets it).
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

 private:
  const Plan& plan_;
  HostsPhase& hosts_;
  unsigned done_ = 0;
  bool pending_ = false;
};

}  // namespace trainit

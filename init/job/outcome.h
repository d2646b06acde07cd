// How the job ends, and what it says meanwhile.
//
// The first cause decides: its exit code, and its line ("host 1 (NAME) rank
// 3: what"), the status file's cause to the end; a later one changes
// nothing. A cause this host found is logged as the job's error and, where
// the caller says, told to the other hosts; one another host sent is taken
// as it came. The outcome also writes what a person or a supervisor reads
// of the job: the status file (status_file.h) at every transition and rank
// event, STATUS= to NOTIFY_SOCKET, and at the end the termination message.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job/status_file.h"
#include "net/control.h"
#include "notify/notify.h"
#include "plan/plan.h"

namespace trainit {

class JobOutcome {
 public:
  // Tells the other hosts this host's cause (the control channel's stop).
  using TellFn = std::function<void(const StopNotice&)>;

  // `plan` (the runner's, which outlives this) names the hosts. The status
  // file: `status_path`, else default_status_path(); `termination_log`
  // empty: none.
  JobOutcome(const Plan& plan, const std::string& status_path, const Environment& env, Mode mode,
             std::string termination_log, TellFn tell);

  enum class Tell { kNo, kOtherHosts };

  // The first cause decides how the job ends: false for any later one.
  bool decide(int code, std::string line);
  // This host's cause, "host H rank R: what" (rank -1: none), logged as the
  // job's error and, with Tell::kOtherHosts, told to the other hosts, when
  // it is the first.
  void decide_here(int code, const std::string& what, Tell tell, int rank = -1);
  // trainit got a stop signal: the cause when it is the first, told to the
  // other hosts.
  void decide_signal(int code, const std::string& why);
  // Another host stopped the job: its cause, as it names it.
  void decide_remote(const StopNotice& notice);

  [[nodiscard]] bool decided() const { return code_.has_value(); }
  // The exit code: 0 while nothing decided otherwise.
  [[nodiscard]] int code() const { return code_.value_or(0); }
  [[nodiscard]] const std::string& cause() const { return status_.cause; }
  // The job is ending: what is decided now stays, nothing heard later
  // changes it.
  void freeze() { code_ = code(); }

  // Where a cause happened: "host 1 (NAME) rank 3: " in a multi-host job
  // (NAME: the peer's platform name, where the plan has it), "host NAME
  // rank 3: " on one host; without " rank R" for no rank.
  [[nodiscard]] std::string where(int host, int rank) const;
  [[nodiscard]] bool multi_host() const { return plan_.hosts && plan_.hosts->hosts > 1; }
  [[nodiscard]] unsigned host_index() const { return plan_.hosts ? plan_.hosts->index : 0; }

  void set_host(std::string host) { status_.host = std::move(host); }
  void set_mode(std::string mode) { status_.mode = std::move(mode); }

  // The state this host was in when it learned the cause ("start" before
  // the first), for the cause's line: noted once, at the first transition
  // or status write after the decision.
  void note_state(std::string_view state);
  // A transition: the status file and STATUS=.
  void entered(std::string_view state, const std::string& reason, double since, std::vector<StatusRank> ranks);
  // A rank event: the status file.
  void ranks_changed(std::string_view state, std::vector<StatusRank> ranks);

  // The job ends with code(): the status file's last write, the termination
  // message, STATUS=.
  void finish(std::string_view state, std::vector<StatusRank> ranks);

  [[nodiscard]] Notifier& notifier() { return notifier_; }

 private:
  void write_status(std::string_view state, std::vector<StatusRank> ranks);
  void write_termination_message();

  const Plan& plan_;
  StatusFile status_;
  std::string termination_log_;
  TellFn tell_;
  Notifier notifier_ = Notifier::from_environment();
  std::optional<int> code_;
  bool status_error_reported_ = false;
};

}  // namespace trainit

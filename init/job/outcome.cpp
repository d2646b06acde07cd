#include "job/outcome.h"

#include <fmt/core.h>

#include <cerrno>

#include "base/log.h"
#include "exec/termination_log.h"

namespace trainit {

JobOutcome::JobOutcome(const Plan& plan, const std::string& status_path, const Environment& env, Mode mode,
                       std::string termination_log, TellFn tell)
    : plan_(plan), termination_log_(std::move(termination_log)), tell_(std::move(tell)) {
  status_.path = status_path.empty() ? default_status_path(env) : status_path;
  status_.host = this_host_name(env);
  status_.mode = std::string(mode_name(mode));
}

bool JobOutcome::decide(int code, std::string line) {
  if (code_) {
    return false;
  }
  code_ = code;
  status_.cause = std::move(line);
  return true;
}

void JobOutcome::decide_here(int code, const std::string& what, Tell tell, int rank) {
  const int host = static_cast<int>(host_index());
  if (!decide(code, where(host, rank) + what)) {
    return;
  }
  log_error("{}", status_.cause);
  if (tell == Tell::kOtherHosts && tell_) {
    tell_(StopNotice{code, host, rank, what});
  }
}

void JobOutcome::decide_signal(int code, const std::string& why) {
  const int host = static_cast<int>(host_index());
  if (decide(code, where(host, -1) + why) && tell_) {
    tell_(StopNotice{code, host, -1, why});
  }
}

void JobOutcome::decide_remote(const StopNotice& notice) {
  if (decide(notice.exit_code, where(notice.host, notice.rank) + notice.cause)) {
    log_error("the job stops: {}", status_.cause);
  }
}

std::string JobOutcome::where(int host, int rank) const {
  std::string at;
  if (!multi_host()) {
    at = fmt::format("host {}", status_.host);
  } else if (host >= 0 && static_cast<size_t>(host) < plan_.hosts->peers.size()) {
    at = fmt::format("host {} ({})", host, plan_.hosts->peers[static_cast<size_t>(host)]);
  } else {
    at = fmt::format("host {}", host);
  }
  return rank >= 0 ? fmt::format("{} rank {}: ", at, rank) : at + ": ";
}

void JobOutcome::note_state(std::string_view state) {
  if (code_ && status_.cause_state.empty()) {
    status_.cause_state = std::string(state);
    status_.cause_code = *code_;
  }
}

void JobOutcome::entered(std::string_view state, const std::string& reason, double since,
                         std::vector<StatusRank> ranks) {
  status_.since = since;
  status_.reason = reason;
  write_status(state, std::move(ranks));
  notifier_.status("{}: {}", state, reason);
}

void JobOutcome::ranks_changed(std::string_view state, std::vector<StatusRank> ranks) {
  write_status(state, std::move(ranks));
}

void JobOutcome::finish(std::string_view state, std::vector<StatusRank> ranks) {
  code_ = code();
  status_.exit_code = *code_;
  write_status(state, std::move(ranks));
  write_termination_message();
  notifier_.status("exited with {}", *code_);
}

void JobOutcome::write_status(std::string_view state, std::vector<StatusRank> ranks) {
  note_state(state);
  status_.state = std::string(state);
  status_.ranks = std::move(ranks);
  if (auto r = status_.write(); !r && !status_error_reported_) {
    status_error_reported_ = true;
    log_warning("{}", r.error().message);
  }
}

// How the job ended, in one line, where the platform looks for it
// (Kubernetes' termination message), once, when the file is there.
void JobOutcome::write_termination_message() {
  if (termination_log_.empty()) {
    return;
  }
  if (auto r = write_termination_log(termination_log_, status_.end_line()); !r) {
    if (r.error().errnum == ENOENT) {
      log_debug("{}", r.error().message);
    } else {
      log_warning("{}", r.error().message);
    }
  }
}

}  // namespace trainit

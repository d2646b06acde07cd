#include "job/device_check_log.h"

#include <fmt/format.h>

#include <utility>

#include "coll/device_check.h"
#include "os/text.h"
#include "proc/signals.h"

namespace trainit {

// --- StepLog, ReasonLog -------------------------------------------------------

std::string_view StepLog::step_name() const {
  return step_ < 0 ? std::string_view("start") : std::string_view(coll::kDeviceCheckSteps[step_]);
}

void StepLog::feed(std::string_view bytes) {
  if (broken_) {
    return;
  }
  // The steps within the first kMaxBytes count, however the pipe cut them:
  // the step named is the same whatever pieces the bytes came in.
  const size_t room = kMaxBytes - bytes_;
  const bool over = bytes.size() > room;
  bytes = bytes.substr(0, room);
  bytes_ += bytes.size();
  for (char c : bytes) {
    if (c == '\n') {
      line(partial_);
      partial_.clear();
      if (broken_) {
        return;
      }
    } else {
      partial_ += c;
    }
  }
  if (over) {
    broken_ = fmt::format("wrote more than {} bytes to stdout, where only its steps belong", kMaxBytes);
  }
}

void StepLog::line(std::string_view text) {
  const int step = coll::device_check_step(text.data(), text.size());
  if (step < 0) {
    broken_ = fmt::format("wrote {} to stdout, which is no step of the check", quote_for_message(text, 40));
  } else if (step != step_ + 1) {
    broken_ = fmt::format("announced step {} after {}", coll::kDeviceCheckSteps[step], step_name());
  } else {
    step_ = step;
  }
}

void ReasonLog::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n') {
      if (!partial_.empty()) {
        last_ = std::move(partial_);
      }
      partial_.clear();
    } else if (partial_.size() < kMaxLine) {
      partial_ += c;
    }
  }
}

std::string ReasonLog::reason() const {
  return one_line(partial_.empty() ? last_ : partial_);
}

// --- the failure line -----------------------------------------------------------

bool own_failure(CheckEnd::How how) {
  return how == CheckEnd::How::kFailed || how == CheckEnd::How::kKilled || how == CheckEnd::How::kBroken;
}

namespace {

// The reason without the "STEP: " the check puts first: the line names the
// step PID 1 saw, not one the check claims.
std::string_view without_step(std::string_view reason, std::string_view step) {
  if (reason.size() > step.size() + 1 && reason.substr(0, step.size()) == step && reason[step.size()] == ':') {
    reason.remove_prefix(step.size() + 1);
    while (!reason.empty() && reason.front() == ' ') {
      reason.remove_prefix(1);
    }
  }
  return reason;
}

std::string describe(const CheckEnd& end, Duration bound) {
  const std::string_view why = without_step(end.reason, end.step);
  switch (end.how) {
    case CheckEnd::How::kHung:
      return fmt::format("device {}: hung in step {} after {:.1f} s", end.device, end.step, seconds(bound));
    case CheckEnd::How::kKilled:
      return fmt::format("device {}: {}: killed by {}", end.device, end.step, signal_name(end.status));
    case CheckEnd::How::kBroken:
      return fmt::format("device {}: {}: {}", end.device, end.step, end.reason);
    case CheckEnd::How::kFailed:
    case CheckEnd::How::kPeer:
      return why.empty() ? fmt::format("device {}: {}: exited with {}", end.device, end.step, end.status)
                         : fmt::format("device {}: {}: {}", end.device, end.step, why);
    case CheckEnd::How::kPassed:
      break;
  }
  return fmt::format("device {}: passed", end.device);
}

// Device a before device b: by number ("2" before "10"), else by name.
bool lower_device(const std::string& a, const std::string& b) {
  const bool numbers = !a.empty() && !b.empty() && a.find_first_not_of("0123456789") == std::string::npos &&
                       b.find_first_not_of("0123456789") == std::string::npos;
  if (numbers && a.size() != b.size()) {
    return a.size() < b.size();
  }
  return a < b;
}

}  // namespace

std::optional<std::string> preflight_failure(const std::vector<CheckEnd>& ends, Duration bound) {
  const CheckEnd* first = nullptr;
  std::vector<std::string> others;
  for (const CheckEnd& e : ends) {
    if (!own_failure(e.how)) {
      continue;
    }
    if (first == nullptr) {
      first = &e;
    } else {
      others.push_back(e.device);
    }
  }
  // Hangs end together at the bound, and checks give up waiting together:
  // the lowest device of them, not the first the kernel reaped.
  for (CheckEnd::How next : {CheckEnd::How::kHung, CheckEnd::How::kPeer}) {
    if (first != nullptr) {
      break;
    }
    for (const CheckEnd& e : ends) {
      if (e.how == next && (first == nullptr || lower_device(e.device, first->device))) {
        first = &e;
      }
    }
  }
  if (first == nullptr) {
    return std::nullopt;
  }
  std::string line = "device preflight failed: " + describe(*first, bound);
  if (!others.empty()) {
    line += fmt::format(" (failed too: {} {})", others.size() == 1 ? "device" : "devices", fmt::join(others, ", "));
  }
  return line;
}

}  // namespace trainit

#include "job/wait_report.h"

#include <fmt/core.h>

#include <utility>

#include "base/log.h"

namespace trainit {

WaitReport::WaitReport(Loop& loop, std::string what, Duration timeout, PendingFn pending, Duration period)
    : what_(std::move(what)),
      timeout_(timeout),
      pending_(std::move(pending)),
      period_(period),
      started_(Clock::now()),
      timer_(loop.add_timer(
          started_ + period_, [this] { return on_timer(); }, "wait report")) {}

std::string WaitReport::line(Duration waited) const {
  std::string text = timeout_ > Duration::zero() ? fmt::format("waiting for {} for {:.0f} s of {:.0f} s", what_,
                                                               seconds(waited), seconds(timeout_))
                                                 : fmt::format("waiting for {} for {:.0f} s", what_, seconds(waited));
  if (std::string pending = pending_ ? pending_() : std::string(); !pending.empty()) {
    text += ": " + pending;
  }
  return text;
}

int WaitReport::on_timer() {
  const Clock::time_point now = Clock::now();
  log_info("{}", line(now - started_));
  timer_.set_deadline(now + period_);
  return 0;
}

}  // namespace trainit

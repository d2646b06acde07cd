// What a waiting state says while it waits: the rank table, the peers'
// names, the barrier. A wait that lasts minutes must not look like a hang:
// every `period` (30 s) it logs one line naming what it waits for, what is
// still missing, how long it has waited and its timeout:
//
//   waiting for the peers' names to resolve for 30 s of 600 s: worker-2.job
//
// Nothing is said before the first period ends: a short wait stays quiet.
#pragma once

#include <functional>
#include <string>

#include "base/time.h"
#include "loop/loop.h"

namespace trainit {

class WaitReport {
 public:
  static constexpr Duration kPeriod = std::chrono::seconds(30);

  // What is still missing, in words, asked at each report ("worker-2.job").
  using PendingFn = std::function<std::string()>;

  // Starts the clock now. `what` names the wait ("the rank table /x"),
  // `timeout` is its deadline (zero: none to tell).
  WaitReport(Loop& loop, std::string what, Duration timeout, PendingFn pending, Duration period = kPeriod);
  WaitReport(const WaitReport&) = delete;
  WaitReport& operator=(const WaitReport&) = delete;
  ~WaitReport() = default;

  // The report's line after `waited`, as logged.
  [[nodiscard]] std::string line(Duration waited) const;

 private:
  int on_timer();

  std::string what_;
  Duration timeout_;
  PendingFn pending_;
  Duration period_;
  Clock::time_point started_;
  SourceHandle timer_;
};

}  // namespace trainit

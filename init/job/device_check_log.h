// What a device check (trainit-device-check, init/tools/device_check.cpp)
// tells PID 1, and the one line its ends make: pure, bounded, for the
// device preflight (device_preflight.h) and its fuzz target. Nothing a check
// writes is trusted: stdout may carry only the step names in their order,
// stderr gives one printable line, each read a bounded amount.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/time.h"

namespace trainit {

// What a check wrote to stdout: its steps, one line each, in order. Anything
// else (a name not in the list, a step out of order, a line or a total too
// long) marks it broken.
class StepLog {
 public:
  static constexpr size_t kMaxBytes = 256;  // all of the steps take 35

  void feed(std::string_view bytes);
  // The last step it announced, -1 before the first.
  [[nodiscard]] int step() const { return step_; }
  // Its name, or "start" before the first.
  [[nodiscard]] std::string_view step_name() const;
  // What it wrote that is no step, in words; nullopt while nothing.
  [[nodiscard]] const std::optional<std::string>& broken() const { return broken_; }

 private:
  void line(std::string_view text);

  int step_ = -1;
  size_t bytes_ = 0;
  std::string partial_;
  std::optional<std::string> broken_;
};

// What a check wrote to stderr: its last non-empty line (at most kMaxLine
// bytes of it kept), as printable text. Reads any amount, keeps little.
class ReasonLog {
 public:
  static constexpr size_t kMaxLine = 300;

  void feed(std::string_view bytes);
  [[nodiscard]] std::string reason() const;

 private:
  std::string partial_;
  std::string last_;
};

// How a check ended.
struct CheckEnd {
  enum class How {
    kPassed,  // exit 0 after every step
    kFailed,  // exit 1 (or another status): this device's failure
    kPeer,    // exit 2: it gave up waiting for another device's check
    kKilled,  // a signal ended it
    kHung,    // still running at the bound: killed
    kBroken,  // wrote what is no step
  };
  std::string device;  // "2"
  How how = How::kPassed;
  int status = 0;  // kFailed: the exit status; kKilled: the signal
  std::string step;
  std::string reason;  // stderr's last line
};

// Whether an end is the device's own failure (failed, killed, broken), not
// a hang or a check that gave up waiting for another.
[[nodiscard]] bool own_failure(CheckEnd::How how);

// The failure line the checks' ends call for ("device 2: allreduce: ..."),
// nullopt when every one passed. A device's own failure (the first to end)
// wins over a hang, a hang over a check that gave up waiting for another
// (of several, the lowest device); the others that failed on their own are
// counted after it.
[[nodiscard]] std::optional<std::string> preflight_failure(const std::vector<CheckEnd>& ends, Duration bound);

}  // namespace trainit

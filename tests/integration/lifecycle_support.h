// What the drain, stop, restart and notify tests need beside the harness and
// process_support.h: the records tests/helpers/lifecycle writes, and the host
// pid of a process that said it is ready.
//
// Times are CLOCK_MONOTONIC, the clock of steady_clock (and of Clock): a
// helper's record and the test's Clock::now() compare directly.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "harness.h"
#include "process_support.h"

namespace trainit::test::lifecycle {

inline std::string proc_helper() {
  return helper_path("lifecycle");
}

// The time in lifecycle's record `name` ("d.term", "main.done") in `dir`.
inline std::optional<Clock::time_point> stamp(const TempDir& dir, std::string_view name) {
  std::string text = slurp(dir / name);
  if (text.empty()) {
    return std::nullopt;
  }
  return from_ns(std::atoll(text.c_str()));
}

// Waits until the record exists; its time, or nothing after `timeout`.
inline std::optional<Clock::time_point> wait_stamp(const TempDir& dir, std::string_view name,
                                                   Clock::duration timeout = kTimeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto t = stamp(dir, name)) {
      return t;
    }
    if (Clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(1ms);
  }
}

// One run of `lifecycle DIR runs FILE ...`: when it started and exited.
struct Run {
  Clock::time_point start;
  std::optional<Clock::time_point> exit;
};

inline std::vector<Run> read_runs(const std::string& file) {
  std::vector<Run> runs;
  for (const auto& line : lines_of(slurp(file))) {
    if (line.starts_with("start ")) {
      runs.push_back({from_ns(std::atoll(line.c_str() + 6)), std::nullopt});
    } else if (line.starts_with("exit ") && !runs.empty()) {
      runs.back().exit = from_ns(std::atoll(line.c_str() + 5));
    }
  }
  return runs;
}

// The pid in an "NAME ready pid P" line (P: in trainit's namespace).
inline pid_t ready_pid(const std::optional<std::string>& line) {
  if (!line) {
    return -1;
  }
  auto at = line->rfind(' ');
  return at == std::string::npos ? -1 : std::atoi(line->c_str() + at + 1);
}

// Waits for the "NAME ready pid P" line and returns NAME's host pid.
inline pid_t ready_host_pid(Trainit& t, const std::string& name) {
  pid_t ns_pid = ready_pid(t.wait_line_starting(name + " ready pid "));
  return ns_pid > 0 ? host_pid(t.pid(), ns_pid) : -1;
}

}  // namespace trainit::test::lifecycle

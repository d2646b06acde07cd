// What the drain, stop, restart and notify tests need beside the harness:
// the records tests/helpers/it3_proc writes, host pids of processes inside
// trainit's namespace, and pidfds that tell when one of them dies.
//
// Times are CLOCK_MONOTONIC, the clock of steady_clock (and of Clock): a
// helper's record and the test's Clock::now() compare directly.
#pragma once

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "harness.h"

namespace trainit::test::it3 {

inline std::string proc_helper() {
  return helper_path("it3_proc");
}

inline double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

inline Clock::time_point from_ns(long long ns) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The time in it3_proc's record `name` ("d.term", "main.done") in `dir`.
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

// One run of `it3_proc DIR runs FILE ...`: when it started and exited.
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

// The host pid of the process below `root` (a host pid) whose pid in its own
// namespace is `ns_pid` (the last field of NSpid); -1 when there is none.
inline pid_t host_pid(pid_t root, pid_t ns_pid) {
  std::vector<pid_t> queue = children_of(root);
  for (size_t i = 0; i < queue.size(); ++i) {
    for (const auto& line : lines_of(slurp("/proc/" + std::to_string(queue[i]) + "/status"))) {
      if (line.starts_with("NSpid:")) {
        auto at = line.find_last_of(" \t");
        if (at != std::string::npos && std::atoi(line.c_str() + at + 1) == ns_pid) {
          return queue[i];
        }
      }
    }
    auto more = children_of(queue[i]);
    queue.insert(queue.end(), more.begin(), more.end());
  }
  return -1;
}

// Waits for the "NAME ready pid P" line and returns NAME's host pid.
inline pid_t ready_host_pid(Trainit& t, const std::string& name) {
  pid_t ns_pid = ready_pid(t.wait_line_starting(name + " ready pid "));
  return ns_pid > 0 ? host_pid(t.pid(), ns_pid) : -1;
}

// A pidfd: readable once its process has exited (before anyone reaps it).
class Pidfd {
 public:
  explicit Pidfd(pid_t pid) : fd_(pid > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)) : -1) {}
  ~Pidfd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Pidfd(const Pidfd&) = delete;
  Pidfd& operator=(const Pidfd&) = delete;
  [[nodiscard]] bool valid() const { return fd_ >= 0; }

  // When the process died, waiting at most `timeout`; nothing while it lives.
  std::optional<Clock::time_point> wait_dead(Clock::duration timeout) const {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
    struct pollfd pfd = {fd_, POLLIN, 0};
    int r;
    while ((r = ::poll(&pfd, 1, static_cast<int>(ms < 0 ? 0 : ms))) < 0 && errno == EINTR) {
    }
    if (r == 1) {
      return Clock::now();
    }
    return std::nullopt;
  }
  [[nodiscard]] bool alive() const { return !wait_dead(0ms); }

 private:
  int fd_;
};

// Waits until trainit's stderr holds `text`.
inline bool wait_err(const Trainit& t, std::string_view text, Clock::duration timeout = kTimeout) {
  const auto deadline = Clock::now() + timeout;
  while (t.err().find(text) == std::string::npos) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace trainit::test::it3

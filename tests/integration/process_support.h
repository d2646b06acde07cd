// What the tests that watch trainit's processes from the host share beside
// the harness: times from helpers' records, whole files, the host pid of a
// process inside trainit's PID namespace, pidfds that tell when one of them
// dies, and waits with a deadline on a condition or on trainit's stderr.
//
// Times are CLOCK_MONOTONIC, the clock of steady_clock (and of Clock): a
// helper's record and the test's Clock::now() compare directly.
#pragma once

#include <poll.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "harness.h"

namespace trainit::test {

inline double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// A CLOCK_MONOTONIC time in nanoseconds, as the helpers record it.
inline Clock::time_point from_ns(long long ns) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

// The whole file; empty when it cannot be read.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Polls `done` every millisecond; false when `timeout` passed first.
template <typename F>
bool wait_until(F done, Clock::duration timeout = kTimeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Waits until trainit's stderr holds `text`.
inline bool wait_err(const Trainit& t, std::string_view text, Clock::duration timeout = kTimeout) {
  return wait_until([&] { return t.err().find(text) != std::string::npos; }, timeout);
}

// The host pid of the process below `root` (a host pid) whose pid in its own
// namespace is `ns_pid` (NSpid's last field), from one walk of /proc's
// children lists; -1 when the walk did not meet it.
inline pid_t host_pid_once(pid_t root, pid_t ns_pid) {
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

// The same, walking again until it is met: one walk reads the children lists
// one process at a time, and a process reparented between two reads (a
// daemon whose parent just exited, moving to trainit) is in neither. -1 when
// it was not met within `timeout`.
inline pid_t host_pid(pid_t root, pid_t ns_pid, Clock::duration timeout = kTimeout) {
  pid_t pid = -1;
  wait_until([&] { return (pid = host_pid_once(root, ns_pid)) > 0; }, timeout);
  return pid;
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
  [[nodiscard]] std::optional<Clock::time_point> wait_dead(Clock::duration timeout) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
    struct pollfd pfd = {fd_, POLLIN, 0};
    int r;
    while ((r = ::poll(&pfd, 1, static_cast<int>(std::max<long long>(left, 0)))) < 0 && errno == EINTR) {
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

}  // namespace trainit::test

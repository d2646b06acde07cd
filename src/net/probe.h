// Waiting until a peer's port takes TCP connections (its sshd, say).
//
// A TcpProbe connects to ip:port again and again until one connection
// succeeds, then closes it and calls `done`, once. Each attempt is a
// non-blocking connect on the loop; a refused one is retried `retry` later,
// one that has not finished within `attempt` (a SYN nobody answers) is
// abandoned and retried at once. No deadline of its own: the caller owns the
// timeout and destroys the probe (last_error() says what the attempts met).
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/fd.h"
#include "base/time.h"
#include "loop/loop.h"

namespace trainit {

struct ProbeTiming {
  Duration retry = std::chrono::milliseconds(100);  // after a failed attempt
  Duration attempt = std::chrono::seconds(1);       // the longest one attempt may take
};

class TcpProbe {
 public:
  using DoneFn = std::function<void()>;

  // The first attempt starts from the loop, not in the constructor. `done`
  // may destroy the probe.
  TcpProbe(Loop& loop, in_addr addr, uint16_t port, DoneFn done, ProbeTiming timing = {});
  TcpProbe(const TcpProbe&) = delete;
  TcpProbe& operator=(const TcpProbe&) = delete;
  ~TcpProbe() = default;

  [[nodiscard]] bool succeeded() const noexcept { return succeeded_; }
  // -errno of the last failed attempt (-ECONNREFUSED, -ETIMEDOUT: no answer
  // within `attempt`), 0 before any failed.
  [[nodiscard]] int last_error() const noexcept { return last_error_; }
  [[nodiscard]] unsigned attempts() const noexcept { return attempts_; }
  // "10.0.0.3:22", for messages.
  [[nodiscard]] const std::string& endpoint() const noexcept { return endpoint_; }

 private:
  int on_timer();
  int on_connected();
  void failed(int error);
  void succeed();

  Loop& loop_;
  in_addr addr_;
  uint16_t port_;
  DoneFn done_;
  ProbeTiming timing_;
  std::string endpoint_;
  Fd fd_;  // the attempt under way, if any
  int last_error_ = 0;
  unsigned attempts_ = 0;
  bool succeeded_ = false;
  SourceHandle io_;
  SourceHandle timer_;
};

}  // namespace trainit

// What the net_*_test.cpp files share: a loop stepped until a condition with
// a deadline, the log lines trainit writes meanwhile, and a raw TCP peer that
// speaks (or breaks) the control channel's wire format by hand.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "base/time.h"
#include "loop/loop.h"
#include "net/wire.h"

namespace trainit::test {

using namespace std::chrono_literals;

inline in_addr loopback() {
  return in_addr{htonl(INADDR_LOOPBACK)};
}

// Steps `loop` until `done()` or `limit`; returns whether `done()` came true.
// `done` is asked once per step (it may take something, a frame say).
template <typename Pred>
bool step_until(Loop& loop, Pred done, Duration limit = 5s) {
  const auto until = Clock::now() + limit;
  for (;;) {
    if (done()) {
      return true;
    }
    if (Clock::now() >= until) {
      return false;
    }
    EXPECT_GE(loop.run_once(10), 0);
  }
}

// Steps `loop` for `span`: for asserting that something does NOT happen.
inline void step_for(Loop& loop, Duration span) {
  const auto until = Clock::now() + span;
  while (Clock::now() < until) {
    EXPECT_GE(loop.run_once(10), 0);
  }
}

// Takes trainit's log lines (warnings and errors) while it exists.
class LogCapture final : public LogSink {
 public:
  LogCapture() : verbosity_(log_verbosity()) {
    set_log_verbosity(1);
    set_log_sink(this);
  }
  ~LogCapture() {
    set_log_sink(nullptr);
    set_log_verbosity(verbosity_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  void log_line(std::string_view line) noexcept override { lines_.emplace_back(line); }
  void log_flush(int) noexcept override {}

  [[nodiscard]] const std::vector<std::string>& lines() const { return lines_; }
  [[nodiscard]] size_t count(std::string_view text) const {
    return static_cast<size_t>(std::count_if(
        lines_.begin(), lines_.end(), [&](const std::string& line) { return line.find(text) != std::string::npos; }));
  }
  [[nodiscard]] std::string all() const {
    std::string text;
    for (const auto& line : lines_) {
      text += line;
    }
    return text;
  }

 private:
  std::vector<std::string> lines_;
  int verbosity_;
};

// A TCP peer driven by hand: blocking connect, non-blocking reads.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port, in_addr addr = loopback()) {
    fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = addr;
    sa.sin_port = htons(port);
    connected_ = ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0;
  }
  // An accepted connection (the test plays the server).
  explicit RawPeer(Fd fd) : fd_(std::move(fd)), connected_(true) {}
  [[nodiscard]] bool connected() const { return connected_; }
  [[nodiscard]] int fd() const { return fd_.get(); }

  bool send(std::string_view bytes) {
    return ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  bool send(wire::Type type, std::string_view payload = {}) { return send(wire::encode(type, payload)); }

  // Reads what is there without waiting; true once the peer closed.
  bool closed() {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) {
        reader_.append(buffer, static_cast<size_t>(n));
        continue;
      }
      return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }
  // The next frame received, if a whole one is in.
  bool next(wire::Frame& frame) {
    (void)closed();
    std::string why;
    return reader_.next(frame, why) == wire::FrameReader::Status::kFrame;
  }

 private:
  Fd fd_;
  bool connected_ = false;
  wire::FrameReader reader_;
};

}  // namespace trainit::test

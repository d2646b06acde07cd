// What the net_*_test.cpp files share: a loop stepped until a condition with
// a deadline, the log lines trainit writes meanwhile, a raw TCP peer that
// speaks (or breaks) the control channel's wire format, and the test's own
// encoder and decoder of that format (hand::), written from
// src/net/PROTOCOL.md rather than from trainit's classes, so that an attack
// test does not share a bug with the code it attacks.
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

// A TCP socket on 127.0.0.1 at a port the kernel picks, listening unless
// `listen` is false (a port nothing listens on once `fd` is closed); its port.
inline uint16_t bind_loopback(Fd& fd, bool listen = true) {
  fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr = loopback();
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  if (listen) {
    EXPECT_EQ(::listen(fd.get(), 8), 0);
  }
  EXPECT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  return ntohs(addr.sin_port);
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
  // `from`: the local address to connect from (127.0.0.2, say: another
  // "host" on the loopback), the kernel's choice when 0.
  explicit RawPeer(uint16_t port, in_addr addr = loopback(), in_addr from = {}) {
    fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (from.s_addr != 0) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      local.sin_addr = from;
      if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&local), sizeof(local)) < 0) {
        return;
      }
    }
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
  // Bytes received and not taken as frames yet, read without waiting.
  std::string take_bytes() {
    char buffer[4096];
    std::string bytes;
    for (;;) {
      const ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n <= 0) {
        return bytes;
      }
      bytes.append(buffer, static_cast<size_t>(n));
    }
  }

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

// 127.0.0.N: one more source address on the loopback.
inline in_addr loopback_n(uint32_t n) {
  return in_addr{htonl((127U << 24) | n)};
}

// The wire format by hand (PROTOCOL.md), independent of net/wire.*.
namespace hand {

inline constexpr uint32_t kMagic = 0x54524954;  // "TRIT"
inline constexpr uint16_t kVersion = 3;         // the version under test
inline constexpr uint16_t kChallenge = 1, kHello = 2, kWelcome = 3, kRefuse = 4, kCheckIn = 5, kGo = 6, kStop = 7,
                          kRelease = 8, kHeartbeat = 9, kFinished = 10, kRestart = 11;

inline std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
inline std::string be16(uint16_t v) {
  return {static_cast<char>(v >> 8), static_cast<char>(v)};
}
inline uint32_t load32(std::string_view b) {
  const auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(b[i])); };
  return (u(0) << 24) | (u(1) << 16) | (u(2) << 8) | u(3);
}

inline std::string frame(uint16_t type, std::string_view payload = {}, uint16_t version = kVersion) {
  return be32(kMagic) + be16(version) + be16(type) + be32(static_cast<uint32_t>(payload.size())) + std::string(payload);
}
inline std::string stop(int32_t code, int32_t host, int32_t rank, std::string_view cause) {
  return be32(static_cast<uint32_t>(code)) + be32(static_cast<uint32_t>(host)) + be32(static_cast<uint32_t>(rank)) +
         std::string(cause);
}
inline std::string restart(uint32_t generation, int32_t code, int32_t host, int32_t rank, std::string_view cause) {
  return be32(generation) + stop(code, host, rank, cause);
}
// HELLO without a secret: host index, host count, instance, "no secret",
// job id.
inline std::string hello(uint32_t index, uint32_t count, std::string_view job_id, uint64_t instance = 7) {
  return be32(index) + be32(count) + be32(static_cast<uint32_t>(instance >> 32)) +
         be32(static_cast<uint32_t>(instance)) + std::string(1, '\0') + std::string(job_id);
}
// CHALLENGE: a nonce of 32 bytes, host 0's instance.
inline std::string challenge(char nonce = 'n', uint64_t instance = 9) {
  return std::string(32, nonce) + be32(static_cast<uint32_t>(instance >> 32)) + be32(static_cast<uint32_t>(instance));
}

struct Frame {
  uint16_t version = 0;
  uint16_t type = 0;
  std::string payload;
  std::string bytes;  // the whole frame as it came
};
// The whole frames at the front of a recorded byte stream.
inline std::vector<Frame> frames(std::string_view stream) {
  std::vector<Frame> out;
  while (stream.size() >= 12) {
    const uint32_t length = load32(stream.substr(8));
    if (stream.size() < 12 + size_t{length}) {
      break;
    }
    Frame f;
    f.version =
        static_cast<uint16_t>((static_cast<unsigned char>(stream[4]) << 8) | static_cast<unsigned char>(stream[5]));
    f.type =
        static_cast<uint16_t>((static_cast<unsigned char>(stream[6]) << 8) | static_cast<unsigned char>(stream[7]));
    f.payload = std::string(stream.substr(12, length));
    f.bytes = std::string(stream.substr(0, 12 + length));
    out.push_back(std::move(f));
    stream.remove_prefix(12 + length);
  }
  return out;
}

}  // namespace hand

}  // namespace trainit::test

// A supervisor's end of NOTIFY_SOCKET, as systemd holds it: a unix datagram
// socket bound at a path ("/path") or in the abstract namespace ("@name"); a
// thread receives every datagram and keeps it with its arrival time. Every
// wait has a deadline.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "harness.h"

namespace trainit::test {

class NotifyListener {
 public:
  struct Message {
    Clock::time_point at;
    std::string text;
  };

  // `address`: "/path" or "@abstract".
  explicit NotifyListener(std::string address) : address_(std::move(address)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, address_.data(), std::min(address_.size(), sizeof(addr.sun_path) - 1));
    auto len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + address_.size());
    if (address_[0] == '@') {
      addr.sun_path[0] = '\0';
    } else {
      ++len;
    }
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const struct sockaddr*>(&addr), len) < 0 ||
        ::pipe2(stop_, O_CLOEXEC) < 0) {
      error_ = std::strerror(errno);
      return;
    }
    thread_ = std::thread([this] { receive(); });
  }
  ~NotifyListener() {
    if (thread_.joinable()) {
      char byte = 0;
      ssize_t unused = ::write(stop_[1], &byte, 1);
      (void)unused;
      thread_.join();
    }
    for (int fd : {fd_, stop_[0], stop_[1]}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] std::string variable() const { return "NOTIFY_SOCKET=" + address_; }

  // The first message from index `from` on with the line `line`; its index.
  std::optional<size_t> wait_for(std::string_view line, size_t from = 0, Clock::duration timeout = kTimeout) {
    std::unique_lock lock(mu_);
    std::optional<size_t> found;
    cv_.wait_for(lock, timeout, [&] { return (found = find(line, from)).has_value(); });
    return found;
  }
  // Waits until `count` messages hold the line `line`.
  bool wait_count(std::string_view line, size_t count, Clock::duration timeout = kTimeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return holding(line) >= count; });
  }
  [[nodiscard]] std::vector<Message> messages() const {
    std::lock_guard lock(mu_);
    return messages_;
  }
  [[nodiscard]] Message at(size_t i) const {
    std::lock_guard lock(mu_);
    return messages_.at(i);
  }
  // Every line of every message so far, in order of arrival.
  [[nodiscard]] std::vector<std::string> lines() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& m : messages_) {
      for (auto& l : lines_of(m.text)) {
        out.push_back(std::move(l));
      }
    }
    return out;
  }
  // Every message, for failure output.
  [[nodiscard]] std::string dump() const {
    std::string text = "\n--- notify messages ---\n";
    for (const auto& m : messages()) {
      std::string one = m.text;
      std::replace(one.begin(), one.end(), '\n', '|');
      text += one + "\n";
    }
    return text;
  }

 private:
  // How many messages hold the line `line`.
  [[nodiscard]] size_t holding(std::string_view line) const {
    size_t n = 0;
    for (const auto& m : messages_) {
      const auto lines = lines_of(m.text);
      n += std::find(lines.begin(), lines.end(), line) != lines.end() ? 1 : 0;
    }
    return n;
  }
  [[nodiscard]] std::optional<size_t> find(std::string_view line, size_t from) const {
    for (size_t i = from; i < messages_.size(); ++i) {
      for (const auto& l : lines_of(messages_[i].text)) {
        if (l == line) {
          return i;
        }
      }
    }
    return std::nullopt;
  }

  void receive() {
    struct pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
    char buf[4096];
    for (;;) {
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
        return;
      }
      if (fds[0].revents != 0) {
        ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        auto now = Clock::now();
        if (n >= 0) {
          std::lock_guard lock(mu_);
          messages_.push_back({now, std::string(buf, static_cast<size_t>(n))});
          cv_.notify_all();
        }
        continue;  // drain what arrived before looking at the stop pipe
      }
      if (fds[1].revents != 0) {
        return;
      }
    }
  }

  std::string address_;
  std::string error_;
  int fd_ = -1;
  int stop_[2] = {-1, -1};
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
};

}  // namespace trainit::test

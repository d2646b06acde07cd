// One control-channel connection on the loop: frames in, frames out.
//
// Internal to net/control.*. The Connection owns the socket and its io
// source. Frames read are handed to `on_frame` one at a time; the first
// problem (the peer closed, a read or write error, a malformed frame, a peer
// that does not read what is sent) ends the connection and is reported once
// to `on_closed`, with `malformed` set when the peer broke the protocol.
// Either callback may destroy the Connection.
//
// Sending never blocks and never calls back: send() writes what the socket
// takes now and queues the rest (watching for EPOLLOUT meanwhile); a failed
// write is reported through on_closed from the loop. Nothing here waits:
// when_sent() says, from the loop, when what is queued has left.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/time.h"
#include "loop/loop.h"
#include "net/wire.h"

namespace trainit::net {

class Connection {
 public:
  using FrameFn = std::function<void(wire::Frame& frame)>;
  using ClosedFn = std::function<void(std::string why, bool malformed)>;

  // More than this queued for a peer that does not read ends the connection.
  static constexpr size_t kMaxQueued = 1 << 20;

  // `name` describes the connection in the loop's log lines.
  Connection(Loop& loop, Fd fd, std::string name, size_t max_payload, FrameFn on_frame, ClosedFn on_closed);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() = default;

  void set_max_payload(size_t max_payload) noexcept { reader_.set_max_payload(max_payload); }
  void send(wire::Type type, std::string_view payload = {});
  // The same with a frame encoded already (wire::encode): one frame sent to
  // many connections is encoded once.
  void send_frame(std::string_view frame);
  // Whether frames wait for the socket (on an open connection).
  [[nodiscard]] bool sending() const noexcept { return !closed_ && failure_.empty() && !out_.empty(); }
  // `sent` is called once, from the loop, when what is queued now has been
  // written (not when the connection ends first). It may destroy *this.
  void when_sent(std::function<void()> sent) { on_sent_ = std::move(sent); }
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  // Bytes arrived in the socket and not read yet: a peer whose frames wait
  // for this side to read them is not silent. Part of a frame already read
  // does not count.
  [[nodiscard]] bool has_unread() const noexcept;

 private:
  int on_io(uint32_t events);
  void watch(uint32_t events);
  // Returns false when the peer is gone (the reason is in failure_).
  bool write_queued();
  // Reads what the socket holds; returns false when *this is closed or gone.
  bool read_frames();
  // Reports the end, once; the owner may destroy *this meanwhile.
  void close(std::string why, bool malformed);

  Loop& loop_;
  Fd fd_;
  std::string name_;
  SourceHandle io_;
  uint32_t watching_ = 0;
  wire::FrameReader reader_;
  std::string out_;      // queued, not written yet
  std::string failure_;  // a write problem, reported from the loop
  FrameFn on_frame_;
  ClosedFn on_closed_;
  std::function<void()> on_sent_;
  bool closed_ = false;
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace trainit::net

#include "net/connection.h"

#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/log.h"

namespace trainit::net {

Connection::Connection(Loop& loop, Fd fd, std::string name, size_t max_payload, FrameFn on_frame, ClosedFn on_closed)
    : loop_(loop),
      fd_(std::move(fd)),
      name_(std::move(name)),
      reader_(max_payload),
      on_frame_(std::move(on_frame)),
      on_closed_(std::move(on_closed)) {
  watch(EPOLLIN);
}

// One io source per descriptor: epoll holds a descriptor once, so a change of
// the events watched replaces the source.
void Connection::watch(uint32_t events) {
  if (events == watching_ || closed_) {
    return;
  }
  io_.reset();
  io_ = loop_.add_io(
      fd_.get(), events, [this](uint32_t ready) { return on_io(ready); }, name_);
  watching_ = events;
}

void Connection::send(wire::Type type, std::string_view payload) {
  if (closed_ || !failure_.empty()) {
    return;
  }
  send_frame(wire::encode(type, payload));
}

void Connection::send_frame(std::string_view frame) {
  if (closed_ || !failure_.empty()) {
    return;
  }
  if (out_.empty()) {  // the usual case: straight from the caller's bytes
    const ssize_t n = ::send(fd_.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(frame.size())) {
      return;
    }
    if (n > 0) {
      frame.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      failure_ = errno_string(errno);
      ::shutdown(fd_.get(), SHUT_RDWR);  // reported from the loop
      watch(EPOLLIN);
      return;
    }
  }
  out_ += frame;
  if (out_.size() > kMaxQueued) {
    failure_ = "the peer reads nothing (1 MiB queued)";
  } else if (write_queued()) {
    watch(out_.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT);
    return;
  }
  // Reported from the loop: shutting the socket down makes it ready at once.
  out_.clear();
  ::shutdown(fd_.get(), SHUT_RDWR);
  watch(EPOLLIN);
}

bool Connection::write_queued() {
  while (!out_.empty()) {
    const ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else {
      failure_ = n < 0 ? errno_string(errno) : "the socket takes nothing";
      return false;
    }
  }
  return true;
}

// Only what waits in the socket: every whole frame read is handed over at
// once, so what the reader holds is part of a frame, which is no sign of life
// (a peer that sends six bytes of one and falls silent is lost after
// peer_loss, as a silent one is).
bool Connection::has_unread() const noexcept {
  int queued = 0;
  return ::ioctl(fd_.get(), FIONREAD, &queued) == 0 && queued > 0;
}

int Connection::on_io(uint32_t events) {
  if (!failure_.empty()) {
    close(failure_, false);
    return 0;
  }
  if ((events & EPOLLOUT) != 0) {
    if (!write_queued()) {
      close(failure_, false);
      return 0;
    }
    if (out_.empty()) {
      watch(EPOLLIN);
      if (on_sent_) {
        const std::weak_ptr<char> alive = alive_;
        const std::function<void()> sent = std::exchange(on_sent_, nullptr);
        sent();  // may destroy *this
        if (alive.expired()) {
          return 0;
        }
      }
    }
  }
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
    read_frames();
  }
  return 0;
}

bool Connection::read_frames() {
  const std::weak_ptr<char> alive = alive_;
  char buffer[16384];
  // A bounded amount per wake-up: the source is level-triggered, the rest
  // waits for the next iteration and other sources get their turn.
  for (int reads = 0; reads < 8; ++reads) {
    const ssize_t n = ::read(fd_.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    }
    if (n <= 0) {
      close(n == 0 ? std::string("closed by the peer") : std::string(errno_string(errno)), false);
      return false;
    }
    const bool drained = static_cast<size_t>(n) < sizeof(buffer);
    reader_.append(buffer, static_cast<size_t>(n));
    wire::Frame frame;
    std::string why;
    for (;;) {
      const auto status = reader_.next(frame, why);
      if (status == wire::FrameReader::Status::kNeedMore) {
        break;
      }
      if (status == wire::FrameReader::Status::kBad) {
        close(why, true);
        return false;
      }
      const FrameFn on_frame = on_frame_;  // the callback may destroy *this
      on_frame(frame);
      if (alive.expired() || closed_) {
        return false;
      }
    }
    // A short read took all there was: no second read() just to hear
    // EAGAIN (a heartbeat a second from each of 1,023 hosts makes that
    // half of host 0's syscalls). Anything newer wakes the level-triggered
    // source again, an end of stream included.
    if (drained) {
      return true;
    }
  }
  return true;
}

// `why` is taken by value: the callback may destroy *this, failure_ included.
void Connection::close(std::string why, bool malformed) {
  if (closed_) {
    return;
  }
  closed_ = true;
  io_.reset();
  const ClosedFn on_closed = on_closed_;
  on_closed(std::move(why), malformed);
}

}  // namespace trainit::net

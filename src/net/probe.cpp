#include "net/probe.h"

#include <fmt/core.h>
#include <sys/epoll.h>

#include <cerrno>

#include "net/socket.h"

namespace trainit {

TcpProbe::TcpProbe(Loop& loop, in_addr addr, uint16_t port, DoneFn done, ProbeTiming timing)
    : loop_(loop),
      addr_(addr),
      port_(port),
      done_(std::move(done)),
      timing_(timing),
      endpoint_(fmt::format("{}:{}", ipv4_string(addr), port)) {
  timer_ = loop_.add_timer(
      Clock::now(), [this] { return on_timer(); }, "probe " + endpoint_);
}

// Either the wait after a failed attempt is over, or the attempt under way
// took too long.
int TcpProbe::on_timer() {
  if (fd_) {
    failed(-ETIMEDOUT);
    return 0;
  }
  ++attempts_;
  const int r = net::start_connect(addr_, port_, fd_);
  if (r == 0) {
    succeed();
  } else if (r == -EINPROGRESS) {
    io_ = loop_.add_io(
        fd_.get(), EPOLLOUT, [this](uint32_t) { return on_connected(); }, "probe " + endpoint_);
    timer_.set_deadline(Clock::now() + timing_.attempt);
  } else {
    failed(r);
  }
  return 0;
}

int TcpProbe::on_connected() {
  const int r = net::connect_error(fd_.get());
  if (r == 0) {
    succeed();
  } else {
    failed(r);
  }
  return 0;
}

void TcpProbe::failed(int error) {
  last_error_ = error;
  io_.reset();
  fd_.reset();
  timer_.set_deadline(Clock::now() + timing_.retry);
}

void TcpProbe::succeed() {
  io_.reset();
  timer_.reset();
  fd_.reset();
  succeeded_ = true;
  const DoneFn done = std::move(done_);  // it may destroy *this
  if (done) {
    done();
  }
}

}  // namespace trainit

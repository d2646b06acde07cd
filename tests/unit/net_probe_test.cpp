// TcpProbe: it keeps trying while the port refuses, succeeds once a listener
// appears, and gives up on an attempt nobody answers.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cerrno>

#include "net/probe.h"
#include "net/socket.h"
#include "net_support.h"

namespace trainit {
namespace {

using test::loopback;
using test::step_until;
using namespace std::chrono_literals;

// A port nothing listens on (bound for a moment, then closed).
uint16_t closed_port() {
  Fd fd;
  EXPECT_EQ(net::listen_tcp(0, fd), 0);
  return static_cast<uint16_t>(net::local_port(fd.get()));
}

class NetProbe : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(loop_.init(), 0); }
  Loop loop_;
};

TEST_F(NetProbe, SucceedsOnceAListenerAppearsLater) {
  const uint16_t port = closed_port();
  int done = 0;
  TcpProbe probe(
      loop_, loopback(), port, [&] { ++done; }, ProbeTiming{20ms, 1s});
  ASSERT_TRUE(step_until(loop_, [&] { return probe.attempts() >= 3; }));
  EXPECT_EQ(probe.last_error(), -ECONNREFUSED);
  EXPECT_EQ(done, 0);
  Fd listener;
  ASSERT_EQ(net::listen_tcp(port, listener), 0);
  ASSERT_TRUE(step_until(loop_, [&] { return done > 0; }));
  EXPECT_TRUE(probe.succeeded());
  EXPECT_EQ(probe.endpoint(), "127.0.0.1:" + std::to_string(port));
  const unsigned attempts = probe.attempts();
  test::step_for(loop_, 100ms);
  EXPECT_EQ(done, 1);  // once
  EXPECT_EQ(probe.attempts(), attempts);
}

TEST_F(NetProbe, KeepsRetryingEveryRetryIntervalWhileRefused) {
  const uint16_t port = closed_port();
  bool done = false;
  TcpProbe probe(
      loop_, loopback(), port, [&] { done = true; }, ProbeTiming{50ms, 1s});
  const auto start = Clock::now();
  ASSERT_TRUE(step_until(loop_, [&] { return probe.attempts() >= 6; }));
  // Five waits of 50 ms between six attempts.
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_LT(Clock::now() - start, 750ms);
  EXPECT_FALSE(done);
  EXPECT_EQ(probe.last_error(), -ECONNREFUSED);
}

TEST_F(NetProbe, AnAttemptNobodyAnswersIsAbandonedAndRetried) {
  // A listener whose accept queue is full drops further SYNs: the connect
  // hangs until the probe gives up on it.
  Fd listener;
  ASSERT_EQ(net::listen_tcp(0, listener), 0);
  ASSERT_EQ(::listen(listener.get(), 0), 0);
  const auto port = static_cast<uint16_t>(net::local_port(listener.get()));
  std::vector<Fd> fillers;
  for (int i = 0; i < 4; ++i) {
    Fd fd;
    const int r = net::start_connect(loopback(), port, fd);
    ASSERT_TRUE(r == 0 || r == -EINPROGRESS);
    fillers.push_back(std::move(fd));
  }
  bool done = false;
  TcpProbe probe(
      loop_, loopback(), port, [&] { done = true; }, ProbeTiming{10ms, 100ms});
  const bool hung = step_until(
      loop_, [&] { return probe.last_error() == -ETIMEDOUT || done; }, 2s);
  if (done) {
    GTEST_SKIP() << "this kernel accepts beyond the backlog";
  }
  ASSERT_TRUE(hung);
  // Accepting everything makes room: a later attempt gets through.
  fillers.clear();
  in_addr peer{};
  for (int i = 0; i < 100 && !done; ++i) {
    Fd accepted;
    while (net::accept_tcp(listener.get(), accepted, peer) == 0) {
    }
    loop_.run_once(10);
  }
  ASSERT_TRUE(step_until(loop_, [&] { return done; }));
}

TEST_F(NetProbe, DestroyingItStopsTheAttempts) {
  const uint16_t port = closed_port();
  bool done = false;
  auto probe = std::make_unique<TcpProbe>(
      loop_, loopback(), port, [&] { done = true; }, ProbeTiming{10ms, 1s});
  ASSERT_TRUE(step_until(loop_, [&] { return probe->attempts() >= 2; }));
  probe.reset();
  Fd listener;
  ASSERT_EQ(net::listen_tcp(port, listener), 0);
  test::step_for(loop_, 100ms);
  EXPECT_FALSE(done);
}

}  // namespace
}  // namespace trainit

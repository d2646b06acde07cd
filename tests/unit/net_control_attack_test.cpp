// The control channel under attack, each attack as a security review
// reproduced it: a handshake replayed from a recording, silent connections
// that fill host 0's slots, floods of connections that would flood the log,
// and messages whose fields are out of bounds. The attacker is the test,
// speaking the wire format with its own encoder (net_support.h's hand::).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "net/control.h"
#include "net/socket.h"
#include "net_control_fixture.h"
#include "net_support.h"

namespace trainit {
namespace {

using test::Client;
using test::loopback;
using test::loopback_n;
using test::NetControl;
using test::RawPeer;
using test::step_for;
using test::step_until;
using namespace std::chrono_literals;
namespace hand = test::hand;

// Copies what is waiting on `from` to `to`, and to `recorded`.
void pump(int from, int to, std::string& recorded) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(from, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n <= 0) {
      return;
    }
    recorded.append(buffer, static_cast<size_t>(n));
    (void)::send(to, buffer, static_cast<size_t>(n), MSG_NOSIGNAL);
  }
}

// The frames `peer` sent, once there are at least `count`.
std::vector<hand::Frame> read_frames(Loop& loop, RawPeer& peer, size_t count) {
  std::string bytes;
  std::vector<hand::Frame> frames;
  (void)step_until(loop, [&] {
    bytes += peer.take_bytes();
    frames = hand::frames(bytes);
    return frames.size() >= count;
  });
  return frames;
}

const hand::Frame* find(const std::vector<hand::Frame>& frames, uint16_t type) {
  for (const auto& frame : frames) {
    if (frame.type == type) {
      return &frame;
    }
  }
  return nullptr;
}

// --- A. Replayed handshakes -------------------------------------------------

// Host 1 (with the job's secret) joins host 0 through a test-owned proxy
// that records both directions; then host 0 goes away, and whoever answers
// at the proxy's port is "host 0" to host 1.
class NetControlReplay : public NetControl {
 protected:
  void record_a_session() {
    start_server(2, "s3cret");
    ASSERT_EQ(net::listen_tcp(0, proxy_), 0);
    client_ = &add_client(config(1, 2, "s3cret"), static_cast<uint16_t>(net::local_port(proxy_.get())));
    Fd down;
    in_addr from{};
    ASSERT_TRUE(step_until(loop_, [&] { return net::accept_tcp(proxy_.get(), down, from) == 0; }));
    RawPeer up(server_->port());
    ASSERT_TRUE(up.connected());
    ASSERT_TRUE(step_until(loop_, [&] {
      pump(down.get(), up.fd(), to_server_);
      pump(up.fd(), down.get(), to_client_);
      return client_->channel->connected();
    }));
    server_.reset();  // host 0 goes away; `down` and `up` close here too
    const auto from_server = hand::frames(to_client_);
    const auto from_client = hand::frames(to_server_);
    ASSERT_NE(find(from_server, hand::kChallenge), nullptr);
    ASSERT_NE(find(from_server, hand::kWelcome), nullptr);
    ASSERT_NE(find(from_client, hand::kHello), nullptr);
    version_ = from_server[0].version;  // the attacker speaks the recorded version
    welcome_ = find(from_server, hand::kWelcome)->bytes;
    hello_ = find(from_client, hand::kHello)->bytes;
  }

  // For `span`, answers every connection host 1 makes to the proxy's port
  // with `bytes`. Returns how many connections it answered; `joined` says
  // whether host 1 was ever connected meanwhile.
  int impersonate_host0(const std::string& bytes, Duration span, bool& joined) {
    std::vector<std::unique_ptr<RawPeer>> answered;
    joined = false;
    const auto until = Clock::now() + span;
    while (Clock::now() < until) {
      EXPECT_GE(loop_.run_once(10), 0);
      Fd fd;
      in_addr from{};
      if (net::accept_tcp(proxy_.get(), fd, from) == 0) {
        answered.push_back(std::make_unique<RawPeer>(std::move(fd)));
        EXPECT_TRUE(answered.back()->send(bytes));
      }
      joined = joined || client_->channel->connected();
    }
    return static_cast<int>(answered.size());
  }

  Fd proxy_;
  Client* client_ = nullptr;
  std::string to_client_, to_server_;  // what the proxy saw each way
  uint16_t version_ = 0;
  std::string welcome_, hello_;
};

TEST_F(NetControlReplay, AnEmptyChallengeAndARecordedWelcomeDoNotPassAsHost0) {
  record_a_session();
  const std::string forged = hand::frame(hand::kChallenge, {}, version_) + welcome_ +
                             hand::frame(hand::kStop, hand::stop(3, 0, -1, "forged"), version_);
  bool joined = false;
  const int attempts = impersonate_host0(forged, 2500ms, joined);
  EXPECT_GE(attempts, 2) << "host 1 tries again";
  EXPECT_FALSE(joined) << "host 1 took the replayed WELCOME";
  EXPECT_TRUE(client_->seen.stops.empty()) << "host 1 took the forged STOP: " << client_->seen.stops[0].cause;
  EXPECT_EQ(log_.count("CHALLENGE without a 32-byte nonce"), 1U) << "once, not once per attempt: " << log_.all();
}

TEST_F(NetControlReplay, ARecordedChallengeAndWelcomeDoNotPassAsHost0) {
  record_a_session();
  // The whole of host 0's side of the session, as it was, then a STOP.
  const std::string replay = to_client_ + hand::frame(hand::kStop, hand::stop(3, 0, -1, "forged"), version_);
  bool joined = false;
  const int attempts = impersonate_host0(replay, 2500ms, joined);
  EXPECT_GE(attempts, 2);
  EXPECT_FALSE(joined) << "host 1 took the replayed WELCOME";
  EXPECT_TRUE(client_->seen.stops.empty());
  EXPECT_EQ(log_.count("host 0 does not hold this host's secret"), 1U) << log_.all();
}

TEST_F(NetControlReplay, ARecordedHelloDoesNotPassAsHost1) {
  record_a_session();
  start_server(2, "s3cret");  // host 0 again, on another port
  RawPeer impostor(server_->port());
  ASSERT_TRUE(impostor.connected());
  ASSERT_FALSE(read_frames(loop_, impostor, 1).empty());  // its CHALLENGE: a fresh nonce
  ASSERT_TRUE(impostor.send(hello_));
  const auto answer = read_frames(loop_, impostor, 1);
  ASSERT_EQ(answer.size(), 1U);
  EXPECT_EQ(answer[0].type, hand::kRefuse);
  EXPECT_TRUE(step_until(loop_, [&] { return impostor.closed(); }));
  EXPECT_EQ(server_->missing(), (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(server_->connections(), 0U);
}

// --- B. Silent connections and floods ---------------------------------------

TEST_F(NetControl, SilentConnectionsFromStrangersAndFromTheHostsOwnAddressDoNotKeepItOut) {
  start_server(2, {}, {});  // any address may connect: a platform that names only host 0
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (uint32_t address = 2; address < 18; ++address) {  // 16 strangers, 4 connections each
    for (int i = 0; i < 4; ++i) {
      silent.push_back(std::make_unique<RawPeer>(server_->port(), loopback(), loopback_n(address)));
    }
  }
  for (int i = 0; i < 6; ++i) {  // and some at the host's own address
    silent.push_back(std::make_unique<RawPeer>(server_->port()));
  }
  for (const auto& peer : silent) {
    ASSERT_TRUE(peer->connected());
  }
  ASSERT_TRUE(step_until(loop_, [&] { return server_->connections() == ControlServer::kMaxPending; }));
  step_for(loop_, 50ms);  // every connection accepted (or refused)
  Client& one = add_client(1, 2);
  // Well within the handshake deadline (5 s): no slot frees itself meanwhile.
  EXPECT_TRUE(step_until(
      loop_, [&] { return one.channel->connected(); }, 1s))
      << "host 1 was kept out by " << server_->connections() << " silent connections";
  pass_the_barrier();
}

TEST_F(NetControl, ThousandsOfRefusedConnectionsWriteABoundedNumberOfLines) {
  in_addr other{};
  ASSERT_EQ(::inet_pton(AF_INET, "10.9.9.9", &other), 1);
  start_server(2, {}, {other});
  constexpr int kConnections = 3000;
  for (int i = 0; i < kConnections; ++i) {
    RawPeer stranger(server_->port());
    ASSERT_TRUE(stranger.connected());
    if (i % 32 == 31) {
      (void)loop_.run_once(0);
    }
  }
  step_for(loop_, 200ms);  // every one accepted and refused
  server_.reset();         // what it counted and did not log yet: its summary
  ASSERT_FALSE(log_.lines().empty());
  EXPECT_LE(log_.lines().size(), 2U) << log_.lines().size() << " lines, the first: " << log_.lines()[0];
  EXPECT_EQ(log_.count("refused a connection from 127.0.0.1: not one of the job's hosts"), 1U);
  EXPECT_EQ(log_.count("refused 2999 more connections from 127.0.0.1 in the last"), 1U) << log_.all();
}

TEST_F(NetControl, MalformedFramesFromMoreAddressesThanTheTableHoldsWriteABoundedNumberOfLines) {
  start_server(2, {}, {});
  constexpr uint32_t kAddresses = 200;
  for (int round = 0; round < 3; ++round) {
    for (uint32_t address = 0; address < kAddresses; ++address) {
      RawPeer stranger(server_->port(), loopback(), loopback_n(256 + address));  // 127.0.1.x
      ASSERT_TRUE(stranger.connected());
      ASSERT_TRUE(stranger.send("GET / HTTP/1.0\r\n\r\n"));
      if (address % 16 == 15) {
        step_for(loop_, 5ms);
      }
    }
  }
  step_for(loop_, 200ms);
  server_.reset();
  const size_t lines = log_.lines().size();
  // Before the table fills, one line and one summary per address; after, one
  // line and one summary for all the others together.
  EXPECT_LE(lines, 2 * ControlServer::kWarnedAddresses + 2) << lines << " lines for 600 connections";
  EXPECT_EQ(log_.count("from other addresses"), 1U) << log_.all();
}

// --- C. Every field checked -------------------------------------------------

struct Invalid {
  const char* name;
  uint16_t type;
  std::string payload;
  const char* warning;  // in the one line logged
};
void PrintTo(const Invalid& invalid, std::ostream* out) {
  *out << invalid.name;
}

// Host 1 of 3 by hand, through its handshake (no secret), then one message.
class NetControlInvalidFromAClient : public NetControl, public ::testing::WithParamInterface<Invalid> {};

TEST_P(NetControlInvalidFromAClient, IsRefusedWithOneWarningAndChangesNothing) {
  start_server(3);
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  ASSERT_EQ(read_frames(loop_, peer, 1).at(0).type, hand::kChallenge);
  ASSERT_TRUE(peer.send(hand::frame(hand::kHello, hand::hello(1, 3, "job-7"))));
  ASSERT_EQ(read_frames(loop_, peer, 1).at(0).type, hand::kWelcome);
  ASSERT_TRUE(peer.send(hand::frame(GetParam().type, GetParam().payload)));
  EXPECT_TRUE(step_until(loop_, [&] { return peer.closed(); })) << "host 0 took it";
  step_for(loop_, 50ms);
  EXPECT_TRUE(server_seen_.stops.empty());
  EXPECT_TRUE(server_seen_.restarts.empty());
  EXPECT_TRUE(server_seen_.checked_in.empty());
  EXPECT_TRUE(server_seen_.finished.empty());
  ASSERT_EQ(log_.lines().size(), 1U) << log_.all();
  EXPECT_EQ(log_.count("closed the connection from 127.0.0.1 (host 1)"), 1U) << log_.all();
  EXPECT_EQ(log_.count(GetParam().warning), 1U) << log_.all();
  EXPECT_EQ(log_.all().find('\x1b'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, NetControlInvalidFromAClient,
    ::testing::Values(
        Invalid{"StopExitCode256", hand::kStop, hand::stop(256, 1, -1, "x"), "exit code 256 is not 0-255"},
        Invalid{"StopExitCodeNegative", hand::kStop, hand::stop(-1, 1, -1, "x"), "exit code -1 is not 0-255"},
        Invalid{"StopForAnotherHost", hand::kStop, hand::stop(3, 2, -1, "x"), "failing host 2 is not host 1"},
        Invalid{"StopForAHostOutOfRange", hand::kStop, hand::stop(3, 7, -1, "x"), "failing host 7 is not host 1"},
        Invalid{"StopRankBelowMinusOne", hand::kStop, hand::stop(3, 1, -2, "x"), "rank -2 is below -1"},
        Invalid{"StopCauseWithANewline", hand::kStop, hand::stop(3, 1, -1, "a\nforged line"),
                "cause holds a control character"},
        Invalid{"StopCauseWithAnEscape", hand::kStop, hand::stop(3, 1, -1, "\x1b[31mred"),
                "cause holds a control character"},
        Invalid{"StopCauseWithDel", hand::kStop, hand::stop(3, 1, -1, "a\x7f"), "cause holds a control character"},
        // C1 controls (U+0080-U+009F: NEL, CSI), as UTF-8 and as the lone
        // bytes a terminal may take in their 8-bit form, and text that is
        // not UTF-8 at all.
        Invalid{"StopCauseWithAC1NextLine", hand::kStop,
                hand::stop(3, 1, -1,
                           "a\xc2\x85"
                           "forged"),
                "cause holds a control character (U+0085"},
        Invalid{"StopCauseWithAC1Csi", hand::kStop,
                hand::stop(3, 1, -1,
                           "\xc2\x9b"
                           "31mred"),
                "cause holds a control character (U+009B"},
        Invalid{"StopCauseWithALoneCsiByte", hand::kStop,
                hand::stop(3, 1, -1,
                           "\x9b"
                           "31mred"),
                "cause is not UTF-8 (byte 0x9b"},
        Invalid{"StopCauseWithAnOverlongSlash", hand::kStop, hand::stop(3, 1, -1, "a\xc0\xaf"),
                "cause is not UTF-8 (byte 0xc0"},
        Invalid{"StopCauseCutInsideACharacter", hand::kStop, hand::stop(3, 1, -1, "a\xe2\x9c"),
                "cause is not UTF-8 (byte 0xe2"},
        Invalid{"StopCauseTooLong", hand::kStop, hand::stop(3, 1, -1, std::string(4097, 'x')),
                "cause of 4097 bytes is over 4096"},
        Invalid{"StopTooShort", hand::kStop, hand::be32(3) + hand::be32(1), "malformed STOP"},
        Invalid{"RestartExitCode256", hand::kRestart, hand::restart(1, 256, 1, -1, "x"), "exit code 256 is not 0-255"},
        Invalid{"RestartForAnotherHost", hand::kRestart, hand::restart(1, 3, 2, -1, "x"),
                "failing host 2 is not host 1"},
        Invalid{"RestartCauseWithAnEscape", hand::kRestart, hand::restart(1, 3, 1, -1, "\x1b]0;x\x07"),
                "cause holds a control character"},
        Invalid{"CheckInWithTrailingBytes", hand::kCheckIn, hand::be32(0) + "x", "malformed CHECKIN"},
        Invalid{"FinishedWithTrailingBytes", hand::kFinished, hand::be32(0) + hand::be32(0), "malformed FINISHED"},
        Invalid{"HeartbeatWithAPayload", hand::kHeartbeat, "x", "malformed HEARTBEAT"}),
    [](const auto& info) { return info.param.name; });

TEST_F(NetControl, AValidStopFromAClientWithAUtf8CauseIsTaken) {
  start_server(3);
  RawPeer peer(server_->port());
  ASSERT_EQ(read_frames(loop_, peer, 1).at(0).type, hand::kChallenge);
  ASSERT_TRUE(peer.send(hand::frame(hand::kHello, hand::hello(1, 3, "job-7"))));
  ASSERT_EQ(read_frames(loop_, peer, 1).at(0).type, hand::kWelcome);
  ASSERT_TRUE(peer.send(hand::frame(hand::kStop, hand::stop(255, 1, 17, "шаг 3 ✓: rank 17 exited"))));
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.stops.size() == 1; }));
  EXPECT_EQ(server_seen_.stops[0].exit_code, 255);
  EXPECT_EQ(server_seen_.stops[0].host, 1);
  EXPECT_EQ(server_seen_.stops[0].rank, 17);
  EXPECT_EQ(server_seen_.stops[0].cause, "шаг 3 ✓: rank 17 exited");
  EXPECT_TRUE(log_.lines().empty()) << log_.all();
}

// Host 0 by hand: host 1 of 3 (no secret) through its handshake, then one
// message.
class NetControlInvalidFromHost0 : public NetControl, public ::testing::WithParamInterface<Invalid> {
 protected:
  // Returns host 0's end of host 1's connection, handshake done.
  std::unique_ptr<RawPeer> welcome_host1(Client*& one) {
    EXPECT_EQ(net::listen_tcp(0, listener_), 0);
    one = &add_client(config(1, 3), static_cast<uint16_t>(net::local_port(listener_.get())));
    Fd accepted;
    in_addr from{};
    EXPECT_TRUE(step_until(loop_, [&] { return net::accept_tcp(listener_.get(), accepted, from) == 0; }));
    auto host0 = std::make_unique<RawPeer>(std::move(accepted));
    EXPECT_TRUE(host0->send(hand::frame(hand::kChallenge, hand::challenge())));
    const auto hello = read_frames(loop_, *host0, 1);
    EXPECT_TRUE(!hello.empty() && hello[0].type == hand::kHello);
    EXPECT_TRUE(host0->send(hand::frame(hand::kWelcome)));
    EXPECT_TRUE(step_until(loop_, [&] { return one->channel->connected(); }));
    return host0;
  }
  Fd listener_;
};

TEST_P(NetControlInvalidFromHost0, IsRefusedWithOneWarningAndChangesNothing) {
  Client* one = nullptr;
  auto host0 = welcome_host1(one);
  ASSERT_TRUE(one->channel->connected());
  ASSERT_TRUE(host0->send(hand::frame(GetParam().type, GetParam().payload)));
  EXPECT_TRUE(step_until(loop_, [&] { return host0->closed(); })) << "host 1 took it";
  step_for(loop_, 50ms);
  EXPECT_FALSE(one->channel->connected());
  EXPECT_TRUE(one->seen.stops.empty());
  EXPECT_TRUE(one->seen.restarts.empty());
  EXPECT_TRUE(one->seen.releases.empty());
  EXPECT_EQ(one->seen.go, 0);
  ASSERT_EQ(log_.lines().size(), 1U) << log_.all();
  EXPECT_EQ(log_.count("closed the connection to host 0 at 127.0.0.1"), 1U) << log_.all();
  EXPECT_EQ(log_.count(GetParam().warning), 1U) << log_.all();
  EXPECT_EQ(log_.all().find('\x1b'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, NetControlInvalidFromHost0,
    ::testing::Values(
        Invalid{"StopExitCode256", hand::kStop, hand::stop(256, 0, -1, "x"), "exit code 256 is not 0-255"},
        Invalid{"StopExitCodeNegative", hand::kStop, hand::stop(-1, 0, -1, "x"), "exit code -1 is not 0-255"},
        Invalid{"StopHostOutOfRange", hand::kStop, hand::stop(3, 3, -1, "x"), "failing host 3 is not one of 0-2"},
        Invalid{"StopHostNegative", hand::kStop, hand::stop(3, -1, -1, "x"), "failing host -1 is not one of 0-2"},
        Invalid{"StopRankBelowMinusOne", hand::kStop, hand::stop(3, 0, -7, "x"), "rank -7 is below -1"},
        Invalid{"StopCauseWithANewline", hand::kStop, hand::stop(3, 0, -1, "a\nforged line"),
                "cause holds a control character"},
        Invalid{"StopCauseWithAnEscape", hand::kStop, hand::stop(3, 0, -1, "\x1b[31mred"),
                "cause holds a control character"},
        Invalid{"StopCauseWithAC1Csi", hand::kStop,
                hand::stop(3, 0, -1,
                           "\xc2\x9b"
                           "31mred"),
                "cause holds a control character (U+009B"},
        Invalid{"StopCauseNotUtf8", hand::kStop, hand::stop(3, 0, -1, "a\xff"), "cause is not UTF-8 (byte 0xff"},
        Invalid{"StopCauseTooLong", hand::kStop, hand::stop(3, 0, -1, std::string(5000, 'x')),
                "cause of 5000 bytes is over 4096"},
        Invalid{"RestartExitCode256", hand::kRestart, hand::restart(1, 256, 0, -1, "x"), "exit code 256 is not 0-255"},
        Invalid{"RestartHostOutOfRange", hand::kRestart, hand::restart(1, 3, 9, -1, "x"),
                "failing host 9 is not one of 0-2"},
        Invalid{"ReleaseExitCode256", hand::kRelease, hand::be32(256), "exit code 256 is not 0-255"},
        Invalid{"ReleaseExitCodeNegative", hand::kRelease, hand::be32(0xffffffff), "exit code -1 is not 0-255"},
        Invalid{"ReleaseWithTrailingBytes", hand::kRelease, hand::be32(0) + "x", "malformed RELEASE"},
        Invalid{"GoWithTrailingBytes", hand::kGo, hand::be32(0) + "x", "malformed GO"},
        Invalid{"HeartbeatWithAPayload", hand::kHeartbeat, "x", "malformed HEARTBEAT"}),
    [](const auto& info) { return info.param.name; });

TEST_F(NetControlInvalidFromHost0, AValidStopRelayedFromAnotherHostWithAUtf8CauseIsTaken) {
  Client* one = nullptr;
  auto host0 = welcome_host1(one);
  ASSERT_TRUE(host0->send(hand::frame(hand::kStop, hand::stop(0, 2, -1, "hôte 2: signal reçu"))));
  ASSERT_TRUE(step_until(loop_, [&] { return one->seen.stops.size() == 1; }));
  EXPECT_EQ(one->seen.stops[0].exit_code, 0);
  EXPECT_EQ(one->seen.stops[0].host, 2);
  EXPECT_EQ(one->seen.stops[0].cause, "hôte 2: signal reçu");
  EXPECT_TRUE(log_.lines().empty()) << log_.all();
}

}  // namespace
}  // namespace trainit

// The control channel over 127.0.0.1 with real sockets on ephemeral ports,
// every host on one loop stepped until a condition (with a deadline): the
// barrier, job-wide stop, release, peer loss, and the connections refused
// (each with one warning line, the job's own hosts unaffected).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "net/control.h"
#include "net/control_common.h"
#include "net/socket.h"
#include "net_control_fixture.h"
#include "net_support.h"

namespace trainit {
namespace {

using test::Client;
using test::LogCapture;
using test::loopback;
using test::NetControl;
using test::RawPeer;
using test::record;
using test::Seen;
using test::step_for;
using test::step_until;
using namespace std::chrono_literals;

// --- The barrier, stop and release ------------------------------------------

TEST_F(NetControl, BarrierReleasesOnlyOnceEveryHostCheckedInHost0Included) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  EXPECT_EQ(server_->missing(), (std::vector<unsigned>{0, 1, 2}));
  one.channel->check_in();  // before it is connected: sent once it is
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.checked_in.size() == 1; }));
  EXPECT_EQ(server_->missing(), (std::vector<unsigned>{0, 2}));
  two.channel->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.checked_in.size() == 2; }));
  EXPECT_EQ(server_seen_.checked_in, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(server_->missing(), std::vector<unsigned>{0});
  step_for(loop_, 100ms);  // every client is in; host 0 is not
  EXPECT_EQ(one.seen.go + two.seen.go + server_seen_.go, 0);

  server_->check_in();
  EXPECT_EQ(server_seen_.go, 1);
  EXPECT_TRUE(server_->missing().empty());
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.go == 1 && two.seen.go == 1; }));
  step_for(loop_, 50ms);
  EXPECT_EQ(one.seen.go + two.seen.go + server_seen_.go, 3);  // once each
  EXPECT_TRUE(log_.lines().empty()) << log_.all();
}

TEST_F(NetControl, AClientsStopReachesEveryOtherClientAndHost0) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  pass_the_barrier();
  EXPECT_TRUE(one.channel->stop({3, 1, 5, "rank 5 exited with 3"}));
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.stops.size() == 1 && two.seen.stops.size() == 1; }));
  for (const StopNotice& notice : {server_seen_.stops[0], two.seen.stops[0]}) {
    EXPECT_EQ(notice.exit_code, 3);
    EXPECT_EQ(notice.host, 1);
    EXPECT_EQ(notice.rank, 5);
    EXPECT_EQ(notice.cause, "rank 5 exited with 3");
  }
  step_for(loop_, 50ms);
  EXPECT_TRUE(one.seen.stops.empty());  // it knows its own
  EXPECT_EQ(server_seen_.stops.size() + two.seen.stops.size(), 2U);
}

TEST_F(NetControl, Host0sStopReachesEveryClient) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  ASSERT_TRUE(step_until(loop_, [&] { return all_connected(); }));
  EXPECT_TRUE(server_->stop({137, 0, 2, "rank 2 killed by SIGKILL"}));
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.stops.size() == 1 && two.seen.stops.size() == 1; }));
  EXPECT_EQ(one.seen.stops[0].exit_code, 137);
  EXPECT_EQ(two.seen.stops[0].cause, "rank 2 killed by SIGKILL");
  EXPECT_TRUE(server_seen_.stops.empty());
  // The barrier never opens after a stop.
  one.channel->check_in();
  two.channel->check_in();
  server_->check_in();
  step_for(loop_, 100ms);
  EXPECT_EQ(one.seen.go + two.seen.go + server_seen_.go, 0);
}

TEST_F(NetControl, TheFirstStopWinsEverywhere) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  pass_the_barrier();
  ASSERT_TRUE(one.channel->stop({3, 1, 5, "first"}));
  ASSERT_TRUE(step_until(loop_, [&] { return two.seen.stops.size() == 1; }));
  EXPECT_FALSE(two.channel->stop({4, 2, 9, "second"}));  // it heard of the first
  EXPECT_FALSE(server_->stop({5, 0, 0, "third"}));
  step_for(loop_, 100ms);
  ASSERT_EQ(server_seen_.stops.size(), 1U);
  EXPECT_EQ(server_seen_.stops[0].cause, "first");
  EXPECT_EQ(two.seen.stops[0].cause, "first");
  EXPECT_TRUE(one.seen.stops.empty());
}

TEST_F(NetControl, StopsThatRaceAgreeOnOneWinner) {
  set_log_verbosity(2);  // the later stop is an info line
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  pass_the_barrier();
  ASSERT_TRUE(one.channel->stop({3, 1, 5, "from 1"}));
  ASSERT_TRUE(two.channel->stop({4, 2, 9, "from 2"}));  // neither has heard of the other yet
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.stops.size() == 1; }));
  step_for(loop_, 100ms);
  ASSERT_EQ(server_seen_.stops.size(), 1U);
  const std::string winner = server_seen_.stops[0].cause;
  // The loser hears the winner; the winner hears nothing.
  Client& loser = winner == "from 1" ? two : one;
  Client& won = winner == "from 1" ? one : two;
  ASSERT_EQ(loser.seen.stops.size(), 1U);
  EXPECT_EQ(loser.seen.stops[0].cause, winner);
  EXPECT_TRUE(won.seen.stops.empty());
  EXPECT_EQ(log_.count("stopped too"), 1U) << log_.all();  // the later one, logged
}

// --- Restarts: generations ----------------------------------------------------

TEST_F(NetControl, AClientsRestartBeginsTheNextGenerationEverywhereAndTheBarrierStartsOver) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  pass_the_barrier();
  EXPECT_EQ(one.channel->restart({3, 1, 5, "rank 5 exited with 3"}), 1U);
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.restarts.size() == 1 && two.seen.restarts.size() == 1; }));
  for (const auto& [generation, notice] : {server_seen_.restarts[0], two.seen.restarts[0]}) {
    EXPECT_EQ(generation, 1U);
    EXPECT_EQ(notice.host, 1);
    EXPECT_EQ(notice.rank, 5);
  }
  EXPECT_TRUE(one.seen.restarts.empty()) << "it asked for it";
  EXPECT_EQ(server_->missing(), (std::vector<unsigned>{0, 1, 2})) << "every host checks in again";
  one.channel->check_in();
  two.channel->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.checked_in.size() == 4; }));
  step_for(loop_, 50ms);
  EXPECT_EQ(one.seen.go + two.seen.go, 2) << "no GO before host 0 checks in again";
  server_->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.go == 2 && two.seen.go == 2; }));
  EXPECT_EQ(server_seen_.go, 2);
}

TEST_F(NetControl, RestartRequestsThatRaceMakeOneGeneration) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  pass_the_barrier();
  EXPECT_EQ(one.channel->restart({3, 1, 2, "one"}), 1U);
  EXPECT_EQ(two.channel->restart({4, 2, 4, "two"}), 1U);
  EXPECT_EQ(server_->restart({5, 0, 0, "host 0"}), 1U) << "host 0's own, before it heard theirs";
  step_for(loop_, 100ms);
  EXPECT_TRUE(server_seen_.restarts.empty()) << "the requests came after host 0 began generation 1";
  EXPECT_TRUE(one.seen.restarts.empty());
  EXPECT_TRUE(two.seen.restarts.empty());
  one.channel->check_in();
  two.channel->check_in();
  server_->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.go == 2 && two.seen.go == 2; })) << "generation 1 opens";
}

TEST_F(NetControl, FinishedHostsStartOverWithANewGenerationAndAStopEndsRestarting) {
  start_server(2);
  Client& one = add_client(1, 2);
  pass_the_barrier();
  one.channel->finish();
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.finished.size() == 1; }));
  EXPECT_TRUE(server_->unfinished().empty());
  EXPECT_EQ(server_->restart({3, 0, 0, "rank 0 exited with 3"}), 1U);
  EXPECT_EQ(server_->unfinished(), std::vector<unsigned>{1}) << "host 1 runs generation 1 too";
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.restarts.size() == 1; }));
  EXPECT_EQ(one.seen.restarts[0].first, 1U);
  EXPECT_TRUE(server_->stop({9, 0, -1, "SIGTERM"}));
  EXPECT_EQ(server_->restart({3, 0, 0, "again"}), 0U);
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.stops.size() == 1; }));
  EXPECT_EQ(one.channel->restart({3, 1, 1, "too late"}), 0U);
}

TEST_F(NetControl, ReleaseReachesEveryClientAndWhenSentSaysSoFromTheLoop) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  pass_the_barrier();
  server_->release(7);
  server_->release(8);  // once
  bool sent = false;
  server_->when_sent([&sent] { sent = true; });
  ASSERT_TRUE(step_until(loop_, [&] { return sent; })) << "said from the loop, without waiting in it";
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.releases.size() == 1 && two.seen.releases.size() == 1; }));
  EXPECT_EQ(one.seen.releases, std::vector<int>{7});
  EXPECT_EQ(two.seen.releases, std::vector<int>{7});
}

TEST_F(NetControl, FinishedHostsAreToldToHost0OnceEachAndUnfinishedShrinksToNone) {
  start_server(3);
  Client& one = add_client(1, 3);
  Client& two = add_client(2, 3);
  pass_the_barrier();
  EXPECT_EQ(server_->unfinished(), (std::vector<unsigned>{1, 2}));
  two.channel->finish();
  two.channel->finish();  // once
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.finished.size() == 1; }));
  EXPECT_EQ(server_->unfinished(), std::vector<unsigned>{1});
  one.channel->finish();
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.finished.size() == 2; }));
  step_for(loop_, 50ms);
  EXPECT_EQ(server_seen_.finished, (std::vector<unsigned>{2, 1}));
  EXPECT_TRUE(server_->unfinished().empty());
  EXPECT_TRUE(server_seen_.stops.empty()) << "finishing is not a stop";
}

TEST_F(NetControl, AClientThatConnectsLateHearsTheStopAndReleaseItMissed) {
  start_server(3);
  Client& one = add_client(1, 3);
  ASSERT_TRUE(step_until(loop_, [&] { return one.channel->connected(); }));
  server_->stop({2, 0, 1, "rank 1 failed"});
  server_->release(2);
  Client& two = add_client(2, 3);
  ASSERT_TRUE(step_until(loop_, [&] { return two.seen.releases.size() == 1 && one.seen.releases.size() == 1; }));
  ASSERT_EQ(two.seen.stops.size(), 1U);
  EXPECT_EQ(two.seen.stops[0].cause, "rank 1 failed");
  EXPECT_EQ(two.seen.releases[0], 2);
}

TEST_F(NetControl, AClientReconnectsToARestartedHost0AndChecksInAgain) {
  start_server(2);
  Client& one = add_client(1, 2);
  one.channel->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.checked_in.size() == 1; }));
  const uint16_t port = server_->port();
  server_.reset();
  ASSERT_TRUE(step_until(loop_, [&] { return !one.channel->connected(); }));
  Seen again;
  auto restarted = ControlServer::listen(loop_, port, {loopback()}, config(0, 2), record(again));
  ASSERT_TRUE(restarted.ok()) << restarted.error().message;
  ASSERT_TRUE(step_until(loop_, [&] { return again.checked_in.size() == 1; }));  // no second check_in() call
  (*restarted)->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.go == 1; }));
  EXPECT_TRUE(one.seen.lost.empty());  // it came back within peer_loss
}

// --- Liveness ---------------------------------------------------------------

TEST_F(NetControl, HeartbeatsKeepQuietConnectionsAlive) {
  peer_loss_ = 300ms;
  start_server(2);
  Client& one = add_client(1, 2);
  ASSERT_TRUE(step_until(loop_, [&] { return one.channel->connected(); }));
  step_for(loop_, 1s);  // more than three times peer_loss without a word but heartbeats
  EXPECT_TRUE(server_seen_.lost.empty());
  EXPECT_TRUE(one.seen.lost.empty());
  EXPECT_TRUE(one.channel->connected());
}

TEST_F(NetControl, AClientWhoseConnectionClosesAndStaysClosedIsLost) {
  peer_loss_ = 300ms;
  start_server(3);
  add_client(1, 3);
  add_client(2, 3);
  ASSERT_TRUE(step_until(loop_, [&] { return all_connected(); }));
  clients_[1]->channel.reset();  // host 2 goes away for good
  const auto closed = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !server_seen_.lost.empty(); }, 2s));
  const auto after = Clock::now() - closed;
  EXPECT_EQ(server_seen_.lost, std::vector<unsigned>{2});
  EXPECT_GE(after, peer_loss_ - 20ms);
  EXPECT_LT(after, peer_loss_ + 200ms);
  step_for(loop_, 400ms);
  EXPECT_EQ(server_seen_.lost, std::vector<unsigned>{2});  // once; host 1 is fine
}

TEST_F(NetControl, AClientThatStopsRespondingIsLost) {
  peer_loss_ = 300ms;
  start_server(2);
  // Host 1 played by hand: the handshake, then silence (no heartbeats).
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  wire::Frame frame;
  ASSERT_TRUE(step_until(loop_, [&] { return peer.next(frame); }));
  ASSERT_EQ(frame.type, wire::Type::kChallenge);
  ASSERT_TRUE(peer.send(wire::Type::kHello, wire::PayloadWriter().u32(1).u32(2).u64(7).u8(0).bytes("job-7").data()));
  ASSERT_TRUE(step_until(loop_, [&] { return peer.next(frame); }));
  ASSERT_EQ(frame.type, wire::Type::kWelcome);
  const auto welcomed = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !server_seen_.lost.empty(); }, 2s));
  const auto after = Clock::now() - welcomed;
  EXPECT_EQ(server_seen_.lost, std::vector<unsigned>{1});
  EXPECT_GE(after, peer_loss_ - 20ms);
  EXPECT_LT(after, peer_loss_ + 200ms);
  EXPECT_TRUE(step_until(loop_, [&] { return peer.closed(); }));  // host 0 gave up on it
}

// Host 0 played by hand on `listener` for the client `one`: the challenge,
// its HELLO, the welcome. The connection, or nullptr where a step failed.
std::unique_ptr<RawPeer> welcome_by_hand(Loop& loop, int listener, Client& one, uint64_t instance = 9) {
  Fd accepted;
  in_addr from{};
  if (!step_until(loop, [&] { return net::accept_tcp(listener, accepted, from) == 0; })) {
    return nullptr;
  }
  auto host0 = std::make_unique<RawPeer>(std::move(accepted));
  wire::Frame frame;
  if (!host0->send(wire::Type::kChallenge, net::encode_challenge(net::Nonce{}, instance)) ||
      !step_until(loop, [&] { return host0->next(frame); }) || frame.type != wire::Type::kHello ||
      !host0->send(wire::Type::kWelcome) || !step_until(loop, [&] { return one.channel->connected(); })) {
    return nullptr;
  }
  return host0;
}

// Whatever breaks the protocol (here a header no host 0 sends) closes the
// connection and the next try comes 2 s later, as for a refusal: a peer
// that keeps answering garbage is not hammered every 10-500 ms.
TEST_F(NetControl, AClientTriesAgain2sAfterHost0SentAFrameHeaderItDoesNotSend) {
  Fd listener;
  ASSERT_EQ(net::listen_tcp(0, listener), 0);
  Client& one = add_client(config(1, 2), static_cast<uint16_t>(net::local_port(listener.get())));
  (void)one;
  Fd accepted;
  in_addr from{};
  ASSERT_TRUE(step_until(loop_, [&] { return net::accept_tcp(listener.get(), accepted, from) == 0; }));
  RawPeer host0(std::move(accepted));
  ASSERT_TRUE(host0.send(std::string_view("GET / HTTP/1.0\r\n\r\n")));
  ASSERT_TRUE(step_until(loop_, [&] { return host0.closed(); }));
  const auto closed = Clock::now();
  Fd again;
  ASSERT_TRUE(step_until(
      loop_, [&] { return net::accept_tcp(listener.get(), again, from) == 0; }, 5s));
  EXPECT_GE(Clock::now() - closed, 1900ms);
  EXPECT_EQ(log_.count("control: closed the connection to host 0"), 1U) << log_.all();
}

// The same from host 0's side: a client whose host 0 sends part of a
// frame and falls silent loses it after peer_loss.
TEST_F(NetControl, AHost0ThatSendsPartOfAFrameAndFallsSilentIsLost) {
  peer_loss_ = 300ms;
  Fd listener;
  ASSERT_EQ(net::listen_tcp(0, listener), 0);
  Client& one = add_client(config(1, 2), static_cast<uint16_t>(net::local_port(listener.get())));
  std::unique_ptr<RawPeer> host0 = welcome_by_hand(loop_, listener.get(), one);
  ASSERT_NE(host0, nullptr);
  ASSERT_TRUE(host0->send(wire::encode(wire::Type::kHeartbeat).substr(0, 6)));
  const auto sent = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !one.seen.lost.empty(); }, 2s))
      << "a partial frame kept host 0 alive";
  EXPECT_LT(Clock::now() - sent, peer_loss_ + 200ms);
  EXPECT_EQ(one.seen.lost, std::vector<unsigned>{0});
}

TEST_F(NetControl, AClientLosesHost0WhenItGoesAway) {
  peer_loss_ = 300ms;
  start_server(2);
  Client& one = add_client(1, 2);
  ASSERT_TRUE(step_until(loop_, [&] { return one.channel->connected(); }));
  server_.reset();
  const auto gone = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !one.seen.lost.empty(); }, 2s));
  const auto after = Clock::now() - gone;
  EXPECT_EQ(one.seen.lost, std::vector<unsigned>{0});
  EXPECT_GE(after, peer_loss_ - 20ms);
  EXPECT_LT(after, peer_loss_ + 200ms);
}

TEST_F(NetControl, AClientLosesHost0WhenItStopsResponding) {
  peer_loss_ = 300ms;
  // Host 0 played by hand: the handshake, then silence.
  Fd listener;
  ASSERT_EQ(net::listen_tcp(0, listener), 0);
  Client& one = add_client(config(1, 2), static_cast<uint16_t>(net::local_port(listener.get())));
  ASSERT_NE(welcome_by_hand(loop_, listener.get(), one), nullptr);
  const auto welcomed = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !one.seen.lost.empty(); }, 2s));
  const auto after = Clock::now() - welcomed;
  EXPECT_EQ(one.seen.lost, std::vector<unsigned>{0});
  EXPECT_GE(after, peer_loss_ - 20ms);
  EXPECT_LT(after, peer_loss_ + 200ms);
}

// A connection that closes: the host has the reconnect grace, not the whole
// peer_loss, to come back.

// Host 1 played by hand through its handshake; true once welcomed.
bool join_by_hand(Loop& loop, RawPeer& peer, unsigned index, unsigned count, uint64_t instance = 7) {
  wire::Frame frame;
  return peer.connected() && step_until(loop, [&] { return peer.next(frame); }) &&
         frame.type == wire::Type::kChallenge &&
         peer.send(wire::Type::kHello,
                   wire::PayloadWriter().u32(index).u32(count).u64(instance).u8(0).bytes("job-7").data()) &&
         step_until(loop, [&] { return peer.next(frame); }) && frame.type == wire::Type::kWelcome;
}

// Six bytes of a frame, then silence: bytes held for a frame that never
// comes whole are no sign of life. The host is lost after peer_loss.
TEST_F(NetControl, AClientThatSendsPartOfAFrameAndFallsSilentIsLost) {
  peer_loss_ = 300ms;
  start_server(2);
  RawPeer peer(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, peer, 1, 2));
  ASSERT_TRUE(peer.send(wire::encode(wire::Type::kHeartbeat).substr(0, 6)));
  const auto sent = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !server_seen_.lost.empty(); }, 2s))
      << "a partial frame kept the host alive";
  EXPECT_LT(Clock::now() - sent, peer_loss_ + 200ms);
  EXPECT_EQ(server_seen_.lost, std::vector<unsigned>{1});
}

TEST_F(NetControl, AClientWhoseConnectionClosesIsLostAfterTheGraceNotAfterPeerLoss) {
  reconnect_grace_ = 300ms;  // peer_loss: 10 s
  start_server(3);
  add_client(1, 3);
  add_client(2, 3);
  pass_the_barrier();
  clients_[1]->channel.reset();  // host 2's process is gone: its socket closes
  const auto closed = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !server_seen_.lost.empty(); }, 3s));
  const auto after = Clock::now() - closed;
  EXPECT_EQ(server_seen_.lost, std::vector<unsigned>{2});
  EXPECT_EQ(server_seen_.lost_why.at(0), "its connection closed and it did not reconnect within 0.3 s");
  EXPECT_GE(after, reconnect_grace_ - 20ms);
  EXPECT_LT(after, reconnect_grace_ + 200ms);
  step_for(loop_, 400ms);
  EXPECT_EQ(server_seen_.lost, std::vector<unsigned>{2});  // once; host 1 is fine
}

TEST_F(NetControl, AClientThatReconnectsWithinTheGraceIsNotLost) {
  reconnect_grace_ = 300ms;
  start_server(2);
  auto first = std::make_unique<RawPeer>(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, *first, 1, 2));
  first.reset();  // closed; back 100 ms later on a new connection
  step_for(loop_, 100ms);
  RawPeer second(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, second, 1, 2));
  for (int i = 0; i < 5; ++i) {  // heartbeats, well past the grace
    ASSERT_TRUE(second.send(wire::Type::kHeartbeat));
    step_for(loop_, 100ms);
  }
  EXPECT_TRUE(server_seen_.lost.empty());
}

// A host's trainit killed and started again within the reconnect grace
// comes back as another instance: once the barrier let ranks start, the
// ones of the trainit before died with it, and the host is lost (not taken
// for the same host reconnecting). The same instance reconnecting is not.
TEST_F(NetControl, AHostThatComesBackAsAnotherTrainitAfterTheBarrierIsLost) {
  start_server(2);
  auto first = std::make_unique<RawPeer>(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, *first, 1, 2, 5));
  ASSERT_TRUE(first->send(wire::Type::kCheckIn));
  server_->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.go == 1; }));
  first.reset();
  RawPeer again(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, again, 1, 2, 5));
  step_for(loop_, 50ms);
  EXPECT_TRUE(server_seen_.lost.empty()) << "the same trainit reconnecting";
  RawPeer anew(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, anew, 1, 2, 6));
  ASSERT_TRUE(step_until(
      loop_, [&] { return !server_seen_.lost.empty(); }, 1s));
  EXPECT_EQ(server_seen_.lost, std::vector<unsigned>{1});
  EXPECT_EQ(server_seen_.lost_why.at(0), "its trainit started anew after the ranks started: the one before it died");
  // The stop its loss brings reaches the new one, which gets no GO.
  server_->stop({69, 0, -1, "host 1 lost"});
  ASSERT_TRUE(anew.send(wire::Type::kCheckIn));
  wire::Frame frame;
  bool stopped = false;
  bool went = false;
  step_until(
      loop_,
      [&] {
        while (anew.next(frame)) {
          stopped = stopped || frame.type == wire::Type::kStop;
          went = went || frame.type == wire::Type::kGo;
        }
        return false;
      },
      200ms);
  EXPECT_TRUE(stopped);
  EXPECT_FALSE(went);
}

// Before the barrier let any rank start, another trainit of a host takes
// the place of the one before: no loss, but its check-in counts only once
// it checks in itself.
TEST_F(NetControl, AHostThatComesBackAsAnotherTrainitBeforeTheBarrierChecksInAnew) {
  start_server(2);
  auto first = std::make_unique<RawPeer>(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, *first, 1, 2, 5));
  ASSERT_TRUE(first->send(wire::Type::kCheckIn));
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.checked_in.size() == 1; }));
  first.reset();
  RawPeer anew(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, anew, 1, 2, 6));
  server_->check_in();
  step_for(loop_, 100ms);
  EXPECT_EQ(server_seen_.go, 0) << "the trainit before checked in, not this one";
  ASSERT_TRUE(anew.send(wire::Type::kCheckIn));
  ASSERT_TRUE(step_until(loop_, [&] { return server_seen_.go == 1; }));
  EXPECT_TRUE(server_seen_.lost.empty());
}

// The same of host 0, as a client sees it: another trainit there after the
// barrier is host 0 lost, and this host does not check in with it; before
// the barrier it is host 0, and this host checks in with it again.
TEST_F(NetControl, AClientLosesAHost0ThatComesBackAsAnotherTrainitAfterTheBarrier) {
  Fd listener;
  ASSERT_EQ(net::listen_tcp(0, listener), 0);
  Client& one = add_client(config(1, 2), static_cast<uint16_t>(net::local_port(listener.get())));
  std::unique_ptr<RawPeer> host0 = welcome_by_hand(loop_, listener.get(), one, 8);
  ASSERT_NE(host0, nullptr);
  one.channel->check_in();
  host0.reset();  // before the barrier: another trainit, no loss
  host0 = welcome_by_hand(loop_, listener.get(), one, 9);
  ASSERT_NE(host0, nullptr);
  wire::Frame frame;
  ASSERT_TRUE(step_until(loop_, [&] { return host0->next(frame) && frame.type == wire::Type::kCheckIn; }))
      << "no check-in with host 0's new trainit before the barrier";
  ASSERT_TRUE(host0->send(wire::Type::kGo));
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.go == 1; }));
  EXPECT_TRUE(one.seen.lost.empty());
  host0.reset();
  host0 = welcome_by_hand(loop_, listener.get(), one, 10);
  ASSERT_NE(host0, nullptr);
  ASSERT_TRUE(step_until(
      loop_, [&] { return !one.seen.lost.empty(); }, 1s));
  EXPECT_EQ(one.seen.lost, std::vector<unsigned>{0});
  EXPECT_EQ(one.seen.lost_why.at(0), "its trainit started anew after the ranks started: the one before it died");
  bool checked_in = false;
  step_until(
      loop_,
      [&] {
        while (host0->next(frame)) {
          checked_in = checked_in || frame.type == wire::Type::kCheckIn;
        }
        return false;
      },
      200ms);
  EXPECT_FALSE(checked_in) << "this host checked in with a host 0 whose ranks never met its own";
}

// A client's STOP: host 0 is told (and stops its own ranks) before the other
// clients' sockets have it. Each write wakes a host, and on a machine short
// of CPU the woken hosts would run first and host 0 stop last.
TEST_F(NetControl, Host0HearsAClientsStopBeforeItWritesItToTheOthers) {
  RawPeer* other = nullptr;
  std::string other_had;  // what host 2's socket held when host 0 heard the stop
  int stops = 0;
  ControlEvents events = record(server_seen_);
  events.on_stop = [&](const StopNotice&) {
    ++stops;
    other_had = other->take_bytes();
  };
  auto server = ControlServer::listen(loop_, 0, {loopback()}, config(0, 3), std::move(events));
  ASSERT_TRUE(server.ok()) << server.error().message;
  server_ = std::move(*server);
  RawPeer one(server_->port());
  RawPeer two(server_->port());
  other = &two;
  ASSERT_TRUE(join_by_hand(loop_, one, 1, 3));
  ASSERT_TRUE(join_by_hand(loop_, two, 2, 3));
  (void)two.take_bytes();
  ASSERT_TRUE(one.send(wire::Type::kStop, net::encode_stop({3, 1, 5, "rank 5 exited with 3"})));
  ASSERT_TRUE(step_until(loop_, [&] { return stops == 1; }));
  EXPECT_EQ(other_had, "");
  wire::Frame frame;
  ASSERT_TRUE(step_until(loop_, [&] { return two.next(frame); }));
  EXPECT_EQ(frame.type, wire::Type::kStop);  // then it is written to them
}

TEST_F(NetControl, AClientThatStopsRespondingWithoutClosingTakesPeerLoss) {
  peer_loss_ = 600ms;
  reconnect_grace_ = 100ms;
  start_server(2);
  RawPeer peer(server_->port());
  ASSERT_TRUE(join_by_hand(loop_, peer, 1, 2));
  const auto welcomed = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !server_seen_.lost.empty(); }, 3s));
  EXPECT_GE(Clock::now() - welcomed, peer_loss_ - 20ms);
  EXPECT_EQ(server_seen_.lost_why.at(0), "nothing heard from it for 0.6 s");
}

TEST_F(NetControl, AClientLeavingAfterTheStopIsNotLostWithinPeerLoss) {
  reconnect_grace_ = 100ms;
  start_server(2);
  add_client(1, 2);
  pass_the_barrier();
  server_->stop({3, 0, 0, "rank 0 failed"});
  ASSERT_TRUE(step_until(loop_, [&] { return clients_[0]->seen.stops.size() == 1; }));
  clients_[0]->channel.reset();  // it stops and exits, as it should
  step_for(loop_, 500ms);
  EXPECT_TRUE(server_seen_.lost.empty());
}

TEST_F(NetControl, AClientLosesHost0AfterTheGraceWhenItsConnectionCloses) {
  reconnect_grace_ = 300ms;  // peer_loss: 10 s
  start_server(2);
  Client& one = add_client(1, 2);
  pass_the_barrier();
  server_.reset();  // host 0 is gone; nothing listens any more
  const auto gone = Clock::now();
  ASSERT_TRUE(step_until(
      loop_, [&] { return !one.seen.lost.empty(); }, 3s));
  const auto after = Clock::now() - gone;
  EXPECT_EQ(one.seen.lost, std::vector<unsigned>{0});
  EXPECT_EQ(one.seen.lost_why.at(0), "its connection closed and it did not reconnect within 0.3 s");
  EXPECT_GE(after, reconnect_grace_ - 20ms);
  EXPECT_LT(after, reconnect_grace_ + 200ms);
}

// --- Connections refused ----------------------------------------------------

struct BadBytes {
  const char* name;
  std::string bytes;
  const char* warning;  // what the one warning line says
};

std::string header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
  wire::PayloadWriter w;
  w.u32(magic).u8(static_cast<uint8_t>(version >> 8)).u8(static_cast<uint8_t>(version));
  w.u8(static_cast<uint8_t>(type >> 8)).u8(static_cast<uint8_t>(type)).u32(length);
  return w.data();
}

class NetControlBadBytes : public NetControl, public ::testing::WithParamInterface<BadBytes> {};

TEST_P(NetControlBadBytes, CloseThatConnectionWithOneWarningAndTheBarrierStillCompletes) {
  start_server(2);
  add_client(1, 2);
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.send(GetParam().bytes));
  ASSERT_TRUE(step_until(loop_, [&] { return peer.closed(); }));
  pass_the_barrier();
  ASSERT_EQ(log_.lines().size(), 1U) << log_.all();
  EXPECT_NE(log_.lines()[0].find("closed the connection from 127.0.0.1"), std::string::npos) << log_.all();
  EXPECT_NE(log_.lines()[0].find(GetParam().warning), std::string::npos) << log_.all();
  EXPECT_EQ(server_->connections(), 1U);
}

INSTANTIATE_TEST_SUITE_P(
    Frames, NetControlBadBytes,
    ::testing::Values(BadBytes{"Garbage", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad magic"},
                      BadBytes{"WrongMagic", header(0x54524955, 1, 2, 0), "bad magic"},
                      BadBytes{"WrongVersion", header(wire::kMagic, 1, 2, 0), "protocol version 1"},
                      BadBytes{"UnknownType", header(wire::kMagic, wire::kVersion, 77, 0), "unknown frame type 77"},
                      BadBytes{"OversizedLength", header(wire::kMagic, wire::kVersion, 2, 1 << 20), "over the limit"},
                      BadBytes{"HelloTooLargeBeforeTheHandshake",
                               header(wire::kMagic, wire::kVersion, 2, wire::kMaxHelloFrame + 1), "over the limit"},
                      BadBytes{"FrameBeforeHello", wire::encode(wire::Type::kCheckIn), "CHECKIN before HELLO"},
                      BadBytes{"MalformedHello", wire::encode(wire::Type::kHello, "abc"), "malformed HELLO"}),
    [](const auto& info) { return info.param.name; });

TEST_F(NetControl, AnAddressNotInTheAllowlistIsClosedAtAccept) {
  in_addr other{};
  ASSERT_EQ(::inet_pton(AF_INET, "10.9.9.9", &other), 1);
  start_server(2, {}, {other});
  RawPeer peer(server_->port());
  ASSERT_TRUE(step_until(loop_, [&] { return peer.closed(); }));
  wire::Frame frame;
  EXPECT_FALSE(peer.next(frame));  // not even a challenge
  EXPECT_EQ(log_.lines().size(), 1U) << log_.all();
  EXPECT_EQ(log_.count("refused a connection from 127.0.0.1: not one of the job's hosts"), 1U) << log_.all();
  EXPECT_EQ(server_->connections(), 0U);
}

TEST_F(NetControl, AnotherJobsHostIsRefused) {
  start_server(2);
  ControlConfig stranger = config(1, 2);
  stranger.job_id = "job-8";
  Client& bad = add_client(stranger);
  bad.stranger = true;
  add_client(1, 2);
  pass_the_barrier();
  ASSERT_TRUE(step_until(loop_, [&] { return log_.count("refused this host") == 1; }));
  EXPECT_GE(log_.count("refused the connection from 127.0.0.1: host 1 is of job 'job-8', not 'job-7'"), 1U)
      << log_.all();
  EXPECT_FALSE(bad.channel->connected());
  EXPECT_EQ(bad.seen.go, 0);
}

TEST_F(NetControl, AHostOfAnotherHostCountIsRefused) {
  start_server(2);
  Client& bad = add_client(2, 3);
  bad.stranger = true;
  add_client(1, 2);
  pass_the_barrier();
  ASSERT_TRUE(step_until(loop_, [&] { return log_.count("refused this host") == 1; }));
  EXPECT_GE(log_.count("host 2 of 3 is not a client of this job of 2 hosts"), 2U) << log_.all();  // both sides
  EXPECT_EQ(bad.seen.go, 0);
}

// --- The secret -------------------------------------------------------------

TEST_F(NetControl, SecretsOnBothSidesLetTheHostsIn) {
  start_server(3, "s3cret");
  add_client(1, 3, "s3cret");
  add_client(2, 3, "s3cret");
  pass_the_barrier();
  EXPECT_TRUE(log_.lines().empty()) << log_.all();
}

TEST_F(NetControl, AWrongSecretIsRefusedAndDoesNotDisplaceTheRealHost) {
  start_server(2, "s3cret");
  Client& good = add_client(1, 2, "s3cret");
  ASSERT_TRUE(step_until(loop_, [&] { return good.channel->connected(); }));
  Client& impostor = add_client(1, 2, "guess");
  ASSERT_TRUE(step_until(loop_, [&] { return log_.count("refused this host: host 1 has another secret") == 1; }));
  EXPECT_EQ(log_.count("refused the connection from 127.0.0.1: host 1 has another secret"), 1U) << log_.all();
  good.channel->check_in();
  server_->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return good.seen.go == 1; }));
  EXPECT_EQ(impostor.seen.go, 0);
  EXPECT_FALSE(impostor.channel->connected());
}

TEST_F(NetControl, AClientWithoutTheSecretIsRefused) {
  start_server(2, "s3cret");
  Client& bad = add_client(1, 2);
  bad.stranger = true;
  add_client(1, 2, "s3cret");
  pass_the_barrier();
  ASSERT_TRUE(step_until(loop_, [&] { return log_.count("refused this host: host 1 has no secret") == 1; }));
  EXPECT_GE(log_.count("refused the connection from 127.0.0.1: host 1 has no secret; this job has one"), 1U);
  EXPECT_EQ(bad.seen.go, 0);
}

TEST_F(NetControl, AClientWithASecretHost0LacksIsRefused) {
  start_server(2);
  Client& bad = add_client(1, 2, "s3cret");
  ASSERT_TRUE(step_until(loop_, [&] { return log_.count("refused this host: host 1 has a secret; host 0 has none"); }));
  EXPECT_GE(log_.count("refused the connection from 127.0.0.1: host 1 has a secret"), 1U) << log_.all();
  EXPECT_FALSE(bad.channel->connected());
}

TEST_F(NetControl, AHost0WithoutTheSecretIsNotTrusted) {
  // Host 0 played by hand, with no secret: it welcomes anyone.
  Fd listener;
  ASSERT_EQ(net::listen_tcp(0, listener), 0);
  Client& one = add_client(config(1, 2, "s3cret"), static_cast<uint16_t>(net::local_port(listener.get())));
  Fd accepted;
  in_addr from{};
  ASSERT_TRUE(step_until(loop_, [&] { return net::accept_tcp(listener.get(), accepted, from) == 0; }));
  RawPeer host0(std::move(accepted));
  ASSERT_TRUE(host0.send(wire::Type::kChallenge, net::encode_challenge(net::Nonce{}, 9)));
  wire::Frame frame;
  ASSERT_TRUE(step_until(loop_, [&] { return host0.next(frame); }));
  ASSERT_TRUE(host0.send(wire::Type::kWelcome));
  ASSERT_TRUE(host0.send(wire::Type::kGo));
  ASSERT_TRUE(step_until(loop_, [&] { return host0.closed(); }));
  EXPECT_EQ(log_.count("host 0 does not hold this host's secret"), 1U) << log_.all();
  EXPECT_FALSE(one.channel->connected());
  EXPECT_EQ(one.seen.go, 0);
}

// --- Floods -----------------------------------------------------------------

TEST_F(NetControl, ConnectionsInTheirHandshakeAreCappedOverallAndTimedOut) {
  handshake_ = 500ms;
  start_server(2, {}, {});  // any address
  const size_t heap_before = ::mallinfo2().uordblks;
  // 100 connections from 25 addresses, 4 each, each holding a HELLO cut
  // short: as much as peers may make host 0 keep before their handshake.
  const std::string partial =
      header(wire::kMagic, wire::kVersion, 2, wire::kMaxHelloFrame) + std::string(wire::kMaxHelloFrame - 1, 'x');
  std::vector<std::unique_ptr<RawPeer>> flood;
  for (uint32_t address = 2; address < 27; ++address) {
    for (int i = 0; i < 4; ++i) {
      flood.push_back(std::make_unique<RawPeer>(server_->port(), loopback(), test::loopback_n(address)));
      ASSERT_TRUE(flood.back()->connected());
      ASSERT_TRUE(flood.back()->send(partial));
    }
  }
  size_t most = 0;
  const auto closed = [&] {
    return std::count_if(flood.begin(), flood.end(), [](const auto& p) { return p->closed(); });
  };
  // The oldest give way to the newest.
  ASSERT_TRUE(step_until(loop_, [&] {
    most = std::max(most, server_->connections());
    return closed() == 100 - static_cast<long>(ControlServer::kMaxPending) &&
           server_->connections() == ControlServer::kMaxPending;
  }));
  step_for(loop_, 50ms);  // every byte sent is read
  const size_t heap_held = ::mallinfo2().uordblks - heap_before;
  EXPECT_FALSE(flood.back()->closed());
  EXPECT_LT(heap_held, 2U << 20);
  std::printf("heap held by %zu connections in their handshake, each with a %zu-byte HELLO cut short: %zu KiB\n",
              ControlServer::kMaxPending, wire::kMaxHelloFrame, heap_held / 1024);

  // The HELLO deadline frees every slot.
  ASSERT_TRUE(step_until(loop_, [&] {
    most = std::max(most, server_->connections());
    return closed() == 100;
  }));
  EXPECT_LE(most, ControlServer::kMaxPending);
  EXPECT_EQ(server_->connections(), 0U);
  EXPECT_GE(log_.count("no handshake within 500 ms"), 1U) << log_.all();
  // One line per address at most (more are counted for a summary).
  EXPECT_LE(log_.lines().size(), 25U) << log_.all();
  add_client(1, 2);
  pass_the_barrier();
}

TEST_F(NetControl, AnAddressHoldsAtMostFourConnectionsBeforeTheirHelloTheNewestKept) {
  start_server(2);
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (int i = 0; i < 10; ++i) {
    silent.push_back(std::make_unique<RawPeer>(server_->port()));
    ASSERT_TRUE(silent.back()->connected());
    ASSERT_TRUE(step_until(loop_, [&] { return server_->connections() == std::min<size_t>(i + 1, 4); }));
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(step_until(
                  loop_, [&] { return silent[i]->closed(); }, i < 6 ? 5s : 50ms),
              i < 6)
        << "connection " << i;
  }
  EXPECT_EQ(server_->connections(), ControlServer::kMaxPendingPerAddress);
  EXPECT_EQ(log_.lines().size(), 1U) << log_.all();  // the other five are counted for a summary
  EXPECT_EQ(log_.count("a newer connection from that address took its slot (4 at most per address"), 1U) << log_.all();
}

// --- Configuration and measures ---------------------------------------------

TEST_F(NetControl, ConfigsOfTheWrongSideAreRejected) {
  Seen seen;
  auto server = ControlServer::listen(loop_, 0, {loopback()}, config(1, 2), record(seen));
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.error().message.find("not host 0"), std::string::npos);
  auto client = ControlClient::connect(loop_, loopback(), 1, config(0, 2), record(seen));
  ASSERT_FALSE(client.ok());
  auto outside = ControlClient::connect(loop_, loopback(), 1, config(2, 2), record(seen));
  ASSERT_FALSE(outside.ok());
}

TEST_F(NetControl, AHandlerMayDestroyTheChannelThatCalledIt) {
  start_server(2);
  Client& one = add_client(1, 2);
  one.channel->check_in();
  bool destroyed = false;
  one.seen = {};
  // Replace host 1's events by recreating it with a handler that destroys it.
  clients_.clear();
  auto channel = ControlClient::connect(loop_, loopback(), server_->port(), config(1, 2), {});
  ASSERT_TRUE(channel.ok());
  std::unique_ptr<ControlClient> owned = std::move(*channel);
  ControlEvents events;
  events.on_go = [&] {
    owned.reset();
    destroyed = true;
  };
  auto again = ControlClient::connect(loop_, loopback(), server_->port(), config(1, 2), events);
  ASSERT_TRUE(again.ok());
  owned = std::move(*again);
  owned->check_in();
  server_->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return destroyed; }));
  step_for(loop_, 50ms);  // nothing touches the dead client
  EXPECT_EQ(owned, nullptr);
}

TEST_F(NetControl, MeasuredHandshakeAndBarrierRoundTripOnLoopback) {
  start_server(2, "s3cret");
  const auto start = Clock::now();
  Client& one = add_client(1, 2, "s3cret");
  ASSERT_TRUE(step_until(loop_, [&] { return one.channel->connected(); }));
  const auto connected = Clock::now();
  server_->check_in();
  const auto asked = Clock::now();
  one.channel->check_in();  // CHECKIN -> host 0 -> GO: one round trip
  ASSERT_TRUE(step_until(loop_, [&] { return one.seen.go == 1; }));
  const auto went = Clock::now();
  const auto us = [](Duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
  std::printf("connect + handshake with a secret: %ld us; CHECKIN -> GO round trip: %ld us\n",
              static_cast<long>(us(connected - start)), static_cast<long>(us(went - asked)));
}

}  // namespace
}  // namespace trainit

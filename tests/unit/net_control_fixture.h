// The control channel's test fixture, shared by the net_control*_test.cpp
// files: a server and clients on one loop over 127.0.0.1, what each host's
// channel reported, and the barrier passed by every member of the job.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "net/control.h"
#include "net_support.h"

namespace trainit::test {

// What one host's channel reported.
struct Seen {
  int go = 0;
  std::vector<StopNotice> stops;
  std::vector<int> releases;
  std::vector<unsigned> lost;
  std::vector<std::string> lost_why;
  std::vector<unsigned> checked_in;
  std::vector<unsigned> finished;
  std::vector<std::pair<unsigned, StopNotice>> restarts;
};

inline ControlEvents record(Seen& seen) {
  ControlEvents events;
  events.on_go = [&seen] { ++seen.go; };
  events.on_stop = [&seen](const StopNotice& notice) { seen.stops.push_back(notice); };
  events.on_release = [&seen](int code) { seen.releases.push_back(code); };
  events.on_lost = [&seen](unsigned host, const std::string& why) {
    seen.lost.push_back(host);
    seen.lost_why.push_back(why);
  };
  events.on_checked_in = [&seen](unsigned host) { seen.checked_in.push_back(host); };
  events.on_finished = [&seen](unsigned host) { seen.finished.push_back(host); };
  events.on_restart = [&seen](unsigned generation, const StopNotice& notice) {
    seen.restarts.emplace_back(generation, notice);
  };
  return events;
}

struct Client {
  std::unique_ptr<ControlClient> channel;
  Seen seen;
  bool stranger = false;  // host 0 refuses it
};

class NetControl : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(loop_.init(), 0); }

  ControlConfig config(unsigned index, unsigned count, std::string secret = {}) const {
    ControlConfig c;
    c.host_index = index;
    c.host_count = count;
    c.job_id = "job-7";
    c.secret = std::move(secret);
    c.peer_loss = peer_loss_;
    c.handshake = handshake_;
    c.reconnect_grace = reconnect_grace_;
    return c;
  }

  void start_server(unsigned count, std::string secret = {}, std::vector<in_addr> allowed = {loopback()}) {
    auto server =
        ControlServer::listen(loop_, 0, std::move(allowed), config(0, count, std::move(secret)), record(server_seen_));
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(*server);
    ASSERT_NE(server_->port(), 0);
  }

  Client& add_client(const ControlConfig& c, uint16_t port = 0) {
    clients_.push_back(std::make_unique<Client>());
    Client& client = *clients_.back();
    auto channel =
        ControlClient::connect(loop_, loopback(), port != 0 ? port : server_->port(), c, record(client.seen));
    EXPECT_TRUE(channel.ok()) << channel.error().message;
    client.channel = std::move(*channel);
    return client;
  }
  Client& add_client(unsigned index, unsigned count, std::string secret = {}) {
    return add_client(config(index, count, std::move(secret)));
  }

  bool all_connected() const {
    return std::all_of(clients_.begin(), clients_.end(), [](const auto& c) { return c->channel->connected(); });
  }

  // Every client of the job (not the strangers) connected, every host
  // checked in: GO everywhere.
  void pass_the_barrier() {
    std::vector<Client*> members;
    for (auto& client : clients_) {
      if (!client->stranger) {
        members.push_back(client.get());
      }
    }
    ASSERT_TRUE(step_until(loop_, [&] {
      return std::all_of(members.begin(), members.end(), [](Client* c) { return c->channel->connected(); });
    }));
    for (Client* client : members) {
      client->channel->check_in();
    }
    server_->check_in();
    ASSERT_TRUE(step_until(
        loop_, [&] { return std::all_of(members.begin(), members.end(), [](Client* c) { return c->seen.go == 1; }); }));
    EXPECT_EQ(server_seen_.go, 1);
  }

  Duration peer_loss_ = 10s;
  Duration handshake_ = 5s;
  Duration reconnect_grace_ = 1s;
  Loop loop_;
  LogCapture log_;  // outlives the channels, whose destructors may log
  Seen server_seen_;
  std::unique_ptr<ControlServer> server_;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace trainit::test

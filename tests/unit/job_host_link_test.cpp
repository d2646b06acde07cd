// The host link: host 0's end and the others' behave as one interface, so the
// job runner never asks which it holds. Every host on one loop over
// 127.0.0.1, stepped until a condition with a deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "job/host_link.h"
#include "net/socket.h"
#include "net_support.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using test::loopback;
using test::step_for;
using test::step_until;

// What one host's job heard.
struct Heard {
  int go = 0;
  std::vector<StopNotice> stops;
  std::vector<std::pair<int, std::string>> done;
  std::vector<unsigned> restarts;
};

// A port nothing listens on now (the kernel's pick, then let go).
uint16_t free_port() {
  Fd fd;
  return test::bind_loopback(fd, false);
}

class JobHostLink : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(loop_.init(), 0);
    port_ = free_port();
  }

  // Opens host `index` of `count`, host 0 first.
  void open(unsigned index, unsigned count) {
    HostLinkSettings settings;
    settings.host_index = index;
    settings.host_count = count;
    settings.port = port_;
    settings.hosts.assign(count, loopback());
    settings.job_id = "job-7";
    settings.secret = "s3cret";
    settings.peer_loss = 10s;
    heard_.resize(count);
    Heard& heard = heard_[index];
    HostLinkEvents events;
    events.on_go = [&heard] { ++heard.go; };
    events.on_stop = [&heard](const StopNotice& notice) { heard.stops.push_back(notice); };
    events.on_lost = [](unsigned host, const std::string&) { ADD_FAILURE() << "host " << host << " lost"; };
    events.on_restart = [&heard](unsigned generation, const StopNotice&) { heard.restarts.push_back(generation); };
    events.on_job_done = [&heard](int code, const std::string& why) { heard.done.emplace_back(code, why); };
    auto link = open_host_link(loop_, settings, std::move(events));
    ASSERT_TRUE(link.ok()) << link.error().message;
    links_.resize(count);
    links_[index] = std::move(*link);
  }

  void open_all(unsigned count) {
    for (unsigned i = 0; i < count; ++i) {
      open(i, count);
    }
  }

  bool everyone(const std::function<bool(const Heard&)>& pred) {
    return std::all_of(heard_.begin(), heard_.end(), pred);
  }

  Loop loop_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<HostLink>> links_;
  std::vector<Heard> heard_;
};

TEST_F(JobHostLink, EveryHostHearsGoOnceAllCheckedInWhicheverEndItHolds) {
  open_all(3);
  links_[1]->check_in();
  links_[2]->check_in();
  step_for(loop_, 100ms);
  EXPECT_TRUE(everyone([](const Heard& h) { return h.go == 0; })) << "host 0 has not checked in";
  links_[0]->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.go == 1; }); }));
}

TEST_F(JobHostLink, TheJobIsDoneEverywhereOnceTheLastHostFinishedHost0First) {
  open_all(3);
  for (auto& link : links_) {
    link->check_in();
  }
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.go == 1; }); }));
  links_[0]->finish();
  links_[1]->finish();
  step_for(loop_, 100ms);
  EXPECT_TRUE(everyone([](const Heard& h) { return h.done.empty(); })) << "host 2 still runs";
  links_[2]->finish();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.done.size() == 1; }); }));
  EXPECT_EQ(heard_[0].done[0], std::make_pair(0, std::string("every rank of every host exited 0")));
  EXPECT_EQ(heard_[1].done[0], std::make_pair(0, std::string("host 0: every host's ranks exited 0")));
}

TEST_F(JobHostLink, TheJobIsDoneEverywhereOnceTheLastHostFinishedHost0Last) {
  open_all(2);
  links_[0]->check_in();
  links_[1]->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.go == 1; }); }));
  links_[1]->finish();
  step_for(loop_, 100ms);
  EXPECT_TRUE(heard_[0].done.empty()) << "host 0's own ranks still run";
  links_[0]->finish();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.done.size() == 1; }); }));
}

TEST_F(JobHostLink, AStopAfterHost0FinishedKeepsTheJobFromBeingReleased) {
  open_all(2);
  links_[0]->check_in();
  links_[1]->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.go == 1; }); }));
  links_[0]->finish();
  EXPECT_TRUE(links_[0]->stop(StopNotice{143, 0, -1, "trainit got SIGTERM"}));
  ASSERT_TRUE(step_until(loop_, [&] { return heard_[1].stops.size() == 1; }));
  EXPECT_EQ(heard_[1].stops[0].exit_code, 143);
  links_[1]->finish();
  step_for(loop_, 100ms);
  EXPECT_TRUE(everyone([](const Heard& h) { return h.done.empty(); }));
}

TEST_F(JobHostLink, ARestartStartsTheFinishedHostsOver) {
  open_all(2);
  links_[0]->check_in();
  links_[1]->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.go == 1; }); }));
  links_[0]->finish();  // host 0's ranks exited 0; host 1's rank fails
  EXPECT_EQ(links_[1]->restart(StopNotice{3, 1, 4, "rank 4 exited with 3"}), 1U);
  ASSERT_TRUE(step_until(loop_, [&] { return heard_[0].restarts.size() == 1; }));
  links_[0]->check_in();
  links_[1]->check_in();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.go == 2; }); }));
  links_[1]->finish();
  step_for(loop_, 100ms);
  EXPECT_TRUE(heard_[0].done.empty()) << "host 0's ranks of generation 1 have not finished";
  links_[0]->finish();
  ASSERT_TRUE(step_until(loop_, [&] { return everyone([](const Heard& h) { return h.done.size() == 1; }); }));
}

TEST_F(JobHostLink, ABarrierTimeoutNamesTheMissingHostsOnHost0AndHost0ElsewhereWithoutAsking) {
  open_all(3);
  links_[0]->check_in();
  links_[1]->check_in();
  ASSERT_TRUE(
      step_until(loop_, [&] { return links_[0]->barrier_timeout_cause(30s).find(": 2") != std::string::npos; }));
  EXPECT_EQ(links_[0]->barrier_timeout_cause(30s), "hosts missing at the barrier after 30 s: 2");
  EXPECT_EQ(links_[1]->barrier_timeout_cause(30s), "host 0 did not open the barrier within 30 s");
}

TEST_F(JobHostLink, PeerNamesResolveInHostOrder) {
  std::vector<in_addr> got;
  bool done = false;
  auto lookup = [](const std::string& name) {
    in_addr addr{};
    ::inet_pton(AF_INET, name == "host-0" ? "10.0.0.1" : "10.0.0.2", &addr);
    return std::vector<in_addr>{addr};
  };
  PeerNames names(
      loop_, {"host-0", "host-1"},
      [&](std::vector<in_addr> addrs) {
        got = std::move(addrs);
        done = true;
      },
      lookup, Backoff{});
  ASSERT_TRUE(step_until(loop_, [&] { return done; }));
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(ipv4_string(got[0]), "10.0.0.1");
  EXPECT_EQ(ipv4_string(got[1]), "10.0.0.2");
  EXPECT_TRUE(names.missing().empty());
}

TEST_F(JobHostLink, AnUnresolvedPeerNameIsMissingUntilItResolves) {
  // Read on the resolver's worker thread, which may outlive the test's frame.
  auto resolvable = std::make_shared<std::atomic<bool>>(false);
  bool done = false;
  auto lookup = [resolvable](const std::string&) {
    in_addr addr{htonl(0x0a000001)};
    return resolvable->load() ? std::vector<in_addr>{addr} : std::vector<in_addr>{};
  };
  Backoff fast;
  fast.first = 10ms;
  fast.max = 10ms;
  PeerNames names(
      loop_, {"host-1"}, [&](std::vector<in_addr>) { done = true; }, lookup, fast);
  step_for(loop_, 100ms);
  EXPECT_FALSE(done);
  EXPECT_EQ(names.missing(), std::vector<std::string>{"host-1"});
  resolvable->store(true);
  ASSERT_TRUE(step_until(loop_, [&] { return done; }));
}

}  // namespace
}  // namespace trainit

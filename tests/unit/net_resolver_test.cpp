// The Resolver: names resolve on a worker thread and come back through the
// loop; missing names are asked again with backoff; destroying it mid-lookup
// calls nothing. The default lookup reads /etc/hosts itself.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>

#include "net/resolver.h"
#include "net/socket.h"
#include "net_support.h"

namespace trainit {
namespace {

using test::step_for;
using test::step_until;
using namespace std::chrono_literals;

in_addr ip(const char* text) {
  in_addr addr{};
  EXPECT_EQ(::inet_pton(AF_INET, text, &addr), 1);
  return addr;
}

std::vector<std::string> strings(const std::vector<in_addr>& addrs) {
  std::vector<std::string> out;
  for (in_addr a : addrs) {
    out.push_back(ipv4_string(a));
  }
  return out;
}

// A lookup the test scripts: each name fails a given number of times first,
// and every call is recorded with its time. Shared with the worker thread.
struct Script {
  std::mutex mutex;
  std::map<std::string, int> failures;  // calls left that find nothing
  std::map<std::string, std::vector<Clock::time_point>> calls;

  LookupFn lookup(const std::shared_ptr<Script>& self) {
    return [self](const std::string& name) -> std::vector<in_addr> {
      std::lock_guard lock(self->mutex);
      self->calls[name].push_back(Clock::now());
      auto it = self->failures.find(name);
      if (it != self->failures.end() && it->second != 0) {
        --it->second;  // -1: never succeeds
        return {};
      }
      return {ip("10.0.0.1")};
    };
  }
  size_t count(const std::string& name) {
    std::lock_guard lock(mutex);
    return calls[name].size();
  }
};

class NetResolver : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(loop_.init(), 0); }
  Loop loop_;
};

TEST_F(NetResolver, LocalhostResolvesThroughTheDefaultLookup) {
  std::optional<std::vector<Resolved>> result;
  Resolver resolver(loop_, {"localhost", "127.0.0.9"}, [&](std::vector<Resolved> r) { result = std::move(r); });
  ASSERT_TRUE(step_until(loop_, [&] { return result.has_value(); }));
  ASSERT_EQ(result->size(), 2U);
  EXPECT_EQ((*result)[0].name, "localhost");
  EXPECT_EQ(strings((*result)[0].addrs), std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ((*result)[1].name, "127.0.0.9");  // a dotted address stands for itself
  EXPECT_EQ(strings((*result)[1].addrs), std::vector<std::string>{"127.0.0.9"});
  EXPECT_TRUE(resolver.missing().empty());
}

TEST_F(NetResolver, AHostsFileGivesEveryLineNamingTheNameInFileOrder) {
  const std::string hosts =
      "# the platform's peers\n"
      "127.0.0.1\tlocalhost\n"
      "::1 localhost ip6-localhost\n"
      "10.0.0.2   job-worker-1.job job-worker-1   # host 1\n"
      "10.0.0.3 job-worker-2.job\r\n"
      "10.0.0.4 JOB-WORKER-1\n"
      "10.0.0.2 job-worker-1\n"
      "not-an-address job-worker-2.job\n"
      "10.0.0.9 # job-worker-2.job commented out\n";
  EXPECT_EQ(strings(hosts_file_lookup(hosts, "job-worker-1")), (std::vector<std::string>{"10.0.0.2", "10.0.0.4"}));
  EXPECT_EQ(strings(hosts_file_lookup(hosts, "job-worker-2.job")), std::vector<std::string>{"10.0.0.3"});
  EXPECT_EQ(strings(hosts_file_lookup(hosts, "localhost")), std::vector<std::string>{"127.0.0.1"});
  EXPECT_TRUE(hosts_file_lookup(hosts, "job-worker").empty());
  EXPECT_TRUE(hosts_file_lookup(hosts, "ip6-localhost").empty());
  EXPECT_TRUE(hosts_file_lookup("", "localhost").empty());
}

TEST_F(NetResolver, MissingNamesAreAskedAgainWithBackoffUntilAllResolve) {
  auto script = std::make_shared<Script>();
  script->failures["b"] = 3;
  std::optional<std::vector<Resolved>> result;
  Resolver resolver(
      loop_, {"a", "b"}, [&](std::vector<Resolved> r) { result = std::move(r); }, script->lookup(script),
      Backoff{50ms, 2s});
  ASSERT_TRUE(step_until(loop_, [&] { return result.has_value(); }));
  ASSERT_EQ(result->size(), 2U);
  EXPECT_EQ((*result)[0].name, "a");
  EXPECT_EQ((*result)[1].name, "b");
  EXPECT_EQ(strings((*result)[1].addrs), std::vector<std::string>{"10.0.0.1"});
  EXPECT_EQ(script->count("a"), 1U);  // resolved names are not asked again
  ASSERT_EQ(script->count("b"), 4U);
  EXPECT_EQ(resolver.rounds(), 4U);
  // The waits between rounds: 50, 100, 200 ms (timers fire at their deadline
  // or later; a round adds its thread's start-up).
  const auto& calls = script->calls["b"];
  const Duration expected[] = {50ms, 100ms, 200ms};
  for (size_t i = 0; i < 3; ++i) {
    const Duration gap = calls[i + 1] - calls[i];
    EXPECT_GE(gap, expected[i]) << "round " << i + 2;
    EXPECT_LT(gap, expected[i] + 100ms) << "round " << i + 2;
  }
}

TEST_F(NetResolver, BackoffStopsDoublingAtItsMaximum) {
  auto script = std::make_shared<Script>();
  script->failures["x"] = -1;
  Resolver resolver(
      loop_, {"x"}, [](std::vector<Resolved>) { FAIL() << "nothing resolves"; }, script->lookup(script),
      Backoff{10ms, 40ms});
  ASSERT_TRUE(step_until(loop_, [&] { return script->count("x") >= 6; }));
  const auto& calls = script->calls["x"];
  EXPECT_LT(calls[5] - calls[4], 40ms + 100ms);
  EXPECT_GE(calls[5] - calls[4], 40ms);
}

TEST_F(NetResolver, MissingNamesTheUnresolvedInTheOrderGiven) {
  auto script = std::make_shared<Script>();
  script->failures["z"] = -1;
  script->failures["x"] = -1;
  bool done = false;
  Resolver resolver(
      loop_, {"z", "a", "x"}, [&](std::vector<Resolved>) { done = true; }, script->lookup(script));
  EXPECT_EQ(resolver.missing(), (std::vector<std::string>{"z", "a", "x"}));  // nothing back yet
  ASSERT_TRUE(step_until(loop_, [&] { return resolver.rounds() >= 3; }));
  EXPECT_EQ(resolver.missing(), (std::vector<std::string>{"z", "x"}));
  EXPECT_FALSE(done);
}

TEST_F(NetResolver, AnUnresolvableNameStaysMissingWithTheDefaultLookup) {
  // One short DNS try per round, wherever this runs (resolv(5): RES_OPTIONS).
  // Left set: a worker may still read it after the test.
  ASSERT_EQ(::setenv("RES_OPTIONS", "timeout:1 attempts:1", 1), 0);
  bool done = false;
  Resolver resolver(loop_, {"localhost", "no-such-host.invalid"}, [&](std::vector<Resolved>) { done = true; });
  ASSERT_TRUE(step_until(
      loop_, [&] { return resolver.rounds() >= 2; }, 30s));
  EXPECT_EQ(resolver.missing(), std::vector<std::string>{"no-such-host.invalid"});
  EXPECT_FALSE(done);
}

TEST_F(NetResolver, DestroyingItMidLookupCallsNothingAndFreesTheRound) {
  // The lookup blocks until the test opens the gate; its captures die with
  // the worker's round, which `freed` reports.
  struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    bool entered = false;
    int calls = 0;
  };
  struct Token {
    std::promise<void> freed;
    ~Token() { freed.set_value(); }
  };
  auto gate = std::make_shared<Gate>();
  auto token = std::make_shared<Token>();
  std::future<void> freed = token->freed.get_future();
  bool done = false;
  auto resolver = std::make_unique<Resolver>(
      loop_, std::vector<std::string>{"a", "b"}, [&](std::vector<Resolved>) { done = true; },
      [gate, token](const std::string&) -> std::vector<in_addr> {
        std::unique_lock lock(gate->mutex);
        gate->entered = true;
        ++gate->calls;
        gate->cv.notify_all();
        gate->cv.wait(lock, [&] { return gate->open; });
        return {in_addr{htonl(INADDR_LOOPBACK)}};
      });
  token.reset();
  {
    std::unique_lock lock(gate->mutex);
    ASSERT_TRUE(gate->cv.wait_for(lock, 5s, [&] { return gate->entered; }));
  }
  resolver.reset();  // the worker is inside the lookup of "a"
  {
    std::lock_guard lock(gate->mutex);
    gate->open = true;
  }
  gate->cv.notify_all();
  ASSERT_EQ(freed.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(gate->calls, 1);  // "b" was never asked: the round was cancelled
  step_for(loop_, 100ms);
  EXPECT_FALSE(done);
}

}  // namespace
}  // namespace trainit

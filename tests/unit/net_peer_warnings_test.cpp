// Warnings about peers on the control port (net/peer_warnings.h): the first
// about an address at once, then one summary with a count per interval, the
// table of addresses bounded. Time is passed in: no test waits 10 s.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

#include "net/peer_warnings.h"
#include "net_support.h"

namespace trainit::net {
namespace {

using namespace std::chrono_literals;

in_addr address(const char* text) {
  in_addr out{};
  EXPECT_EQ(::inet_pton(AF_INET, text, &out), 1);
  return out;
}

constexpr std::string_view kNotOurs = "not one of the job's hosts";

void refuse(PeerWarnings& warnings, const char* from, Clock::time_point now) {
  warnings.warn(address(from),
                std::string("control: refused a connection from ") + from + ": not one of the job's hosts", "refused",
                kNotOurs, now);
}

TEST(NetPeerWarnings, AFloodFromOneAddressIsOneLineThenOneSummaryPerInterval) {
  test::LogCapture log;
  const auto start = Clock::now();
  PeerWarnings warnings(10s, 64);
  for (int i = 0; i < 14922; ++i) {  // what a review measured in 10 s
    refuse(warnings, "10.0.0.9", start + i * 600us);
    warnings.tick(start + i * 600us);
  }
  ASSERT_EQ(log.lines().size(), 1U) << log.all();
  EXPECT_EQ(log.count("control: refused a connection from 10.0.0.9: not one of the job's hosts"), 1U);
  warnings.tick(start + 10s);
  ASSERT_EQ(log.lines().size(), 2U) << log.all();
  EXPECT_EQ(log.lines()[1],
            "trainit: warning: control: refused 14921 more connections from 10.0.0.9 in the last 10 s: not one of "
            "the job's hosts\n");
  warnings.tick(start + 20s);  // nothing in that interval: the address is forgotten
  EXPECT_EQ(log.lines().size(), 2U) << log.all();
  EXPECT_EQ(warnings.addresses(), 0U);
  refuse(warnings, "10.0.0.9", start + 21s);  // and its next warning is logged at once
  EXPECT_EQ(log.lines().size(), 3U) << log.all();
}

TEST(NetPeerWarnings, ASteadyFloodIsOneLinePerInterval) {
  test::LogCapture log;
  const auto start = Clock::now();
  PeerWarnings warnings(10s, 64);
  for (auto t = 0ms; t < 60s; t += 1ms) {
    refuse(warnings, "10.0.0.9", start + t);
    if (t % 1s == 0ms) {
      warnings.tick(start + t);
    }
  }
  EXPECT_LE(log.lines().size(), 7U) << log.all();
  EXPECT_GE(log.lines().size(), 6U) << log.all();
}

TEST(NetPeerWarnings, AddressesPastTheTableShareOneEntry) {
  test::LogCapture log;
  const auto start = Clock::now();
  PeerWarnings warnings(10s, 8);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 100; ++i) {
      const std::string from = "10.1.0." + std::to_string(i);
      refuse(warnings, from.c_str(), start + std::chrono::milliseconds(round * 100 + i));
    }
  }
  EXPECT_EQ(warnings.addresses(), 9U);             // 8 and the others'
  EXPECT_EQ(log.lines().size(), 9U) << log.all();  // the first of each
  warnings.flush(start + 1s);
  EXPECT_EQ(log.count("refused 2 more connections from 10.1.0.7 in the last 1 s"), 1U) << log.all();
  EXPECT_EQ(log.count("refused 275 more connections from other addresses in the last 1 s"), 1U) << log.all();
  EXPECT_EQ(log.lines().size(), 18U) << log.all();
}

TEST(NetPeerWarnings, ASummaryOfDifferentReasonsSaysTheLast) {
  test::LogCapture log;
  const auto start = Clock::now();
  PeerWarnings warnings(10s, 64);
  const in_addr from = address("10.0.0.9");
  warnings.warn(from, "control: closed the connection from 10.0.0.9: bad magic", "closed", "bad magic", start);
  warnings.warn(from, "-", "closed", "bad magic", start + 1s);
  warnings.warn(from, "-", "refused", "host 1 has another secret", start + 2s);
  warnings.tick(start + 10s);
  EXPECT_EQ(log.count("control: refused or closed 2 more connections from 10.0.0.9 in the last 10 s; the last: host 1 "
                      "has another secret"),
            1U)
      << log.all();
}

}  // namespace
}  // namespace trainit::net

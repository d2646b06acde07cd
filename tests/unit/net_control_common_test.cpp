// What this host sends on the control channel is valid by the rules it
// checks others by (net/control_common.h): an exit code 0-255, a rank from
// -1, a cause of printable text cut to its bound at a character boundary.
#include <gtest/gtest.h>

#include <string>

#include "net/control_common.h"

namespace trainit::net {
namespace {

TEST(NetControlCommon, ASentStopIsOneTheReceiverTakes) {
  const StopNotice notice{256, 1, -5, "line one\nline two \x1b[31mred\x7f"};
  StopNotice taken;
  std::string why;
  ASSERT_TRUE(decode_stop(encode_stop(notice), 2, 1, taken, why)) << why;
  EXPECT_EQ(taken.exit_code, 1) << "not 256 & 0xff, a success";
  EXPECT_EQ(taken.rank, -1);
  EXPECT_EQ(taken.cause, "line one?line two ?[31mred?");
}

TEST(NetControlCommon, ALongCauseIsCutToItsBoundAtACharacterBoundary) {
  // 4095 ASCII bytes, then a 2-byte character across the bound.
  const std::string cause = std::string(kMaxCause - 1, 'x') + "é" + "tail";
  const std::string sent = sendable_text(cause, kMaxCause);
  EXPECT_EQ(sent, std::string(kMaxCause - 1, 'x'));
  EXPECT_TRUE(text_problem("cause", sent, kMaxCause).empty());
  StopNotice taken;
  std::string why;
  EXPECT_TRUE(decode_stop(encode_stop({3, 0, 0, cause}), 2, -1, taken, why)) << why;
}

TEST(NetControlCommon, Utf8PassesAsItIs) {
  EXPECT_EQ(sendable_text("шаг 3 ✓", 100), "шаг 3 ✓");
  EXPECT_TRUE(text_problem("cause", "шаг 3 ✓", 100).empty());
}

TEST(NetControlCommon, AReleaseOutOfRangeIsSentAsAFailure) {
  int code = 0;
  std::string why;
  ASSERT_TRUE(decode_release(encode_release(256), code, why)) << why;
  EXPECT_EQ(code, 1);
  ASSERT_TRUE(decode_release(encode_release(137), code, why)) << why;
  EXPECT_EQ(code, 137);
}

TEST(NetControlCommon, ABeatGoesOutThreeTimesAPeerLossWindowWhileSilenceIsCheckedFourTimes) {
  using std::chrono::milliseconds;
  ControlConfig config;
  config.peer_loss = std::chrono::seconds(9);
  config.heartbeat = std::chrono::seconds(1);
  EXPECT_EQ(beat_interval(config), milliseconds(3000));
  EXPECT_EQ(heartbeat_interval(config), milliseconds(1000));
  config.peer_loss = milliseconds(2000);
  EXPECT_EQ(beat_interval(config), std::chrono::nanoseconds(666'666'666));
  EXPECT_EQ(heartbeat_interval(config), milliseconds(500));
  // Never more often than the checks: a long --heartbeat wins.
  config.heartbeat = std::chrono::seconds(5);
  config.peer_loss = std::chrono::seconds(60);
  EXPECT_EQ(beat_interval(config), std::chrono::seconds(20));
  EXPECT_EQ(heartbeat_interval(config), std::chrono::seconds(5));
}

}  // namespace
}  // namespace trainit::net

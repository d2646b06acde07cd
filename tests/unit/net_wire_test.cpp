// The control channel's frames: encoded big-endian as documented, cut out of
// a byte stream however it arrives, and refused as soon as a header field is
// wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/wire.h"

namespace trainit::wire {
namespace {

FrameReader::Status feed(FrameReader& reader, std::string_view bytes, Frame& frame, std::string& why) {
  reader.append(bytes.data(), bytes.size());
  return reader.next(frame, why);
}

TEST(NetWire, HeaderIsMagicVersionTypeLengthBigEndian) {
  const std::string bytes = encode(Type::kStop, "abc");
  EXPECT_EQ(bytes, std::string("TRIT\0\3\0\7\0\0\0\3abc", 15));
}

TEST(NetWire, FramesComeOutWholeWhateverTheyArriveIn) {
  const std::string stream = encode(Type::kHello, "hello") + encode(Type::kHeartbeat) + encode(Type::kGo, "x");
  FrameReader reader;
  std::vector<Frame> frames;
  std::string why;
  for (char c : stream) {  // one byte at a time
    reader.append(&c, 1);
    Frame frame;
    while (reader.next(frame, why) == FrameReader::Status::kFrame) {
      frames.push_back(frame);
    }
  }
  ASSERT_EQ(frames.size(), 3U);
  EXPECT_EQ(frames[0].type, Type::kHello);
  EXPECT_EQ(frames[0].payload, "hello");
  EXPECT_EQ(frames[1].type, Type::kHeartbeat);
  EXPECT_EQ(frames[1].payload, "");
  EXPECT_EQ(frames[2].type, Type::kGo);
  EXPECT_EQ(reader.buffered(), 0U);
}

TEST(NetWire, WrongMagicIsRefusedAfterFourBytes) {
  FrameReader reader;
  Frame frame;
  std::string why;
  EXPECT_EQ(feed(reader, "GET", frame, why), FrameReader::Status::kNeedMore);
  EXPECT_EQ(feed(reader, " ", frame, why), FrameReader::Status::kBad);
  EXPECT_NE(why.find("bad magic"), std::string::npos);
  EXPECT_EQ(feed(reader, encode(Type::kGo), frame, why), FrameReader::Status::kBad);  // stays bad
}

TEST(NetWire, OtherVersionIsRefused) {
  FrameReader reader;
  Frame frame;
  std::string why;
  // Version 2, the one before: its handshake knows no instances.
  EXPECT_EQ(feed(reader, std::string("TRIT\0\2", 6), frame, why), FrameReader::Status::kBad);
  EXPECT_NE(why.find("version 2"), std::string::npos);
  FrameReader newer;
  EXPECT_EQ(feed(newer, std::string("TRIT\0\4", 6), frame, why), FrameReader::Status::kBad);
  EXPECT_NE(why.find("version 4"), std::string::npos);
}

TEST(NetWire, UnknownTypeIsRefused) {
  FrameReader reader;
  Frame frame;
  std::string why;
  EXPECT_EQ(feed(reader, std::string("TRIT\0\3\0\x63", 8), frame, why), FrameReader::Status::kBad);
  EXPECT_NE(why.find("unknown frame type 99"), std::string::npos);
}

TEST(NetWire, LengthOverTheLimitIsRefusedBeforeThePayloadArrives) {
  FrameReader reader(kMaxHelloFrame);
  Frame frame;
  std::string why;
  EXPECT_EQ(feed(reader, std::string("TRIT\0\3\0\2\0\0\x10\x01", 12), frame, why), FrameReader::Status::kBad);
  EXPECT_NE(why.find("4097 bytes"), std::string::npos);
  FrameReader big;
  EXPECT_EQ(feed(big, std::string("TRIT\0\3\0\2\0\x01\0\x01", 12), frame, why), FrameReader::Status::kBad);
  EXPECT_EQ(feed(big, std::string(), frame, why), FrameReader::Status::kBad);
}

TEST(NetWire, ALimitRaisedLetsLargerFramesThrough) {
  FrameReader reader(kMaxHelloFrame);
  reader.set_max_payload(kMaxFrame);
  Frame frame;
  std::string why;
  EXPECT_EQ(feed(reader, encode(Type::kStop, std::string(kMaxFrame, 'x')), frame, why), FrameReader::Status::kFrame);
  EXPECT_EQ(frame.payload.size(), kMaxFrame);
}

TEST(NetWire, PayloadsReadBackWhatWasWritten) {
  PayloadWriter writer;
  writer.u32(7).i32(-1).u8(1).bytes("cause");
  PayloadReader reader(writer.data());
  uint32_t a = 0;
  int32_t b = 0;
  uint8_t c = 0;
  ASSERT_TRUE(reader.u32(a) && reader.i32(b) && reader.u8(c));
  EXPECT_EQ(a, 7U);
  EXPECT_EQ(b, -1);
  EXPECT_EQ(c, 1);
  EXPECT_EQ(reader.rest(), "cause");
  std::string_view five;
  EXPECT_TRUE(reader.bytes(5, five));
  EXPECT_FALSE(reader.u8(c));  // too short: nothing read
}

}  // namespace
}  // namespace trainit::wire

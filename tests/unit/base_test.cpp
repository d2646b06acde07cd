#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/time.h"

namespace trainit {
namespace {

TEST(ParseSeconds, AcceptsWholeAndFractionalSeconds) {
  EXPECT_EQ(parse_seconds("8"), std::chrono::seconds(8));
  EXPECT_EQ(parse_seconds("0.5"), std::chrono::milliseconds(500));
  EXPECT_EQ(parse_seconds("1.000000001"), std::chrono::nanoseconds(1'000'000'001));
  EXPECT_EQ(parse_seconds(".25"), std::chrono::milliseconds(250));
  EXPECT_EQ(parse_seconds("0"), std::chrono::seconds(0));
}

TEST(ParseSeconds, RefusesAnythingElse) {
  for (const char* bad : {"", ".", "-1", "+1", "1e3", "1s", " 1", "1.2.3", "0x10", "1.0000000001", "86401"}) {
    EXPECT_FALSE(parse_seconds(bad).has_value()) << bad;
  }
}

TEST(Fd, ClosesOnDestructionAndMovesOwnership) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    Fd a(raw);
    Fd b(std::move(a));
    EXPECT_FALSE(a);
    EXPECT_EQ(b.get(), raw);
    EXPECT_NE(::fcntl(raw, F_GETFD), -1);
  }
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace trainit

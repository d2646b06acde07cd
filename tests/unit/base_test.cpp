#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/number.h"
#include "base/time.h"

namespace trainit {
namespace {

TEST(ParseDecimal, AcceptsOnlyPlainDigitStrings) {
  EXPECT_EQ(parse_decimal("0"), 0u);
  EXPECT_EQ(parse_decimal("8"), 8u);
  EXPECT_EQ(parse_decimal("1800"), 1800u);
  EXPECT_EQ(parse_decimal("999999999999999999"), 999999999999999999u);
  EXPECT_EQ(kMaxDecimal, 999999999999999999u);
  for (const char* bad :
       {"", "01", "00", "+1", "-1", " 1", "1 ", "0x1", "1.0", "1e2", "١", "1_000", "1234567890123456789"}) {
    EXPECT_FALSE(parse_decimal(bad).has_value()) << bad;
  }
}

TEST(ParseDecimal, RefusesNumbersOutsideTheRange) {
  EXPECT_EQ(parse_decimal("0", 0, 255), 0u);
  EXPECT_EQ(parse_decimal("255", 0, 255), 255u);
  EXPECT_FALSE(parse_decimal("256", 0, 255).has_value());
  EXPECT_FALSE(parse_decimal("0", 1, 4096).has_value());
  EXPECT_EQ(parse_decimal("4096", 1, 4096), 4096u);
  EXPECT_FALSE(parse_decimal("016", 1, 4096).has_value());
}

TEST(ParseSeconds, AcceptsWholeAndFractionalSeconds) {
  EXPECT_EQ(parse_seconds("8"), std::chrono::seconds(8));
  EXPECT_EQ(parse_seconds("0.5"), std::chrono::milliseconds(500));
  EXPECT_EQ(parse_seconds("1.000000001"), std::chrono::nanoseconds(1'000'000'001));
  EXPECT_EQ(parse_seconds(".25"), std::chrono::milliseconds(250));
  EXPECT_EQ(parse_seconds("0"), std::chrono::seconds(0));
  EXPECT_EQ(parse_seconds("0.05"), std::chrono::milliseconds(50));
  EXPECT_EQ(parse_seconds("2.000"), std::chrono::seconds(2));
  EXPECT_EQ(parse_seconds("3."), std::chrono::seconds(3));
  EXPECT_EQ(parse_seconds("86400"), std::chrono::hours(24));
}

TEST(ParseSeconds, RefusesAnythingElse) {
  for (const char* bad : {"", ".", "-1", "+1", "1e3", "1s", " 1", "1.2.3", "0x10", "1.0000000001", "86401", "08",
                          "00.5", "1.-5", "1.+5", "1. 5"}) {
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

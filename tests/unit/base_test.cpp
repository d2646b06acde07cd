#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/log.h"
#include "base/number.h"
#include "base/redact.h"
#include "base/time.h"
#include "base/utf8.h"
#include "net_support.h"

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
  EXPECT_EQ(parse_seconds("86400.000"), std::chrono::hours(24));
}

TEST(ParseSeconds, RefusesAnythingElse) {
  for (const char* bad : {"", ".", "-1", "+1", "1e3", "1s", " 1", "1.2.3", "0x10", "1.0000000001", "86401", "86400.5",
                          "86400.000000001", "08", "00.5", "1.-5", "1.+5", "1. 5"}) {
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

namespace trainit {
namespace {

// Every log line is one line of printable text, whatever it quotes: C0, DEL
// and C1 controls and malformed UTF-8 as \xNN, well-formed UTF-8 as it is.
TEST(LogLine, ControlCharactersAndMalformedBytesAreEscapedAndUtf8Stays) {
  test::LogCapture log;
  log_warning("cause {}", std::string_view("\x1b[2J a\nb \xc2\x9b"
                                           "31m \x9b \xff \x7f шаг ✓"));
  ASSERT_EQ(log.lines().size(), 1U);
  EXPECT_EQ(log.lines()[0],
            "trainit: warning: cause \\x1b[2J a\\x0ab \\xc2\\x9b"
            "31m \\x9b \\xff \\x7f шаг ✓\n");
}

// A secret that the line's 1,024 bytes would cut in two is hidden whole: it
// is hidden before the line is cut.
TEST(LogLine, ASecretAtTheCutIsHiddenBeforeTheLineIsCut) {
  const std::string secret = "straddling-secret-0123456789";
  add_secret(secret);
  test::LogCapture log;
  const std::string filler(1024 - std::string_view("trainit: warning: ").size() - 10, 'f');
  log_warning("{}{}", filler, secret);
  ASSERT_EQ(log.lines().size(), 1U);
  EXPECT_LE(log.lines()[0].size(), 1024U);
  EXPECT_EQ(log.lines()[0].find("straddl"), std::string::npos) << log.lines()[0];
}

// The check a peer's text passes (net/control_common.h): UTF-8, no control.
TEST(Utf8, FirstUnprintableFindsControlsAndMalformedSequences) {
  EXPECT_EQ(first_unprintable("plain шаг ✓ 🙂"), std::string_view::npos);
  EXPECT_EQ(first_unprintable("ab\x85"), 2U);                         // a lone continuation byte
  EXPECT_EQ(first_unprintable("ab\xc2\x85"), 2U);                     // U+0085, C1
  EXPECT_EQ(first_unprintable("a\xc2\xa0"), std::string_view::npos);  // U+00A0 is no control
  EXPECT_EQ(first_unprintable("a\xc0\xaf"), 1U);                      // overlong '/'
  EXPECT_EQ(first_unprintable("a\xed\xa0\x80"), 1U);                  // a surrogate
  EXPECT_EQ(first_unprintable("a\xf4\x90\x80\x80"), 1U);              // above U+10FFFF
  EXPECT_EQ(first_unprintable("a\xe2\x9c"), 1U);                      // cut short
  EXPECT_EQ(first_unprintable("a\x7f"), 1U);
}

}  // namespace
}  // namespace trainit

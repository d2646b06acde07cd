#include <gtest/gtest.h>

#include "os/path.h"
#include "os/text.h"

namespace trainit {
namespace {

TEST(SafeName, RefusesPathLikeAndOptionLikeNames) {
  EXPECT_TRUE(is_safe_name("ma-job-3f2a"));
  EXPECT_TRUE(is_safe_name("modelarts-job.v2_1"));
  for (const char* bad : {"", ".", "..", ".hidden", "-rf", "a/b", "../x", "a b", "a\nb", "ä"}) {
    EXPECT_FALSE(is_safe_name(bad)) << bad;
  }
  EXPECT_TRUE(is_safe_name(std::string(200, 'a')));
  EXPECT_FALSE(is_safe_name(std::string(201, 'a')));
}

TEST(AppendJsonString, EscapesControlsAndReplacesInvalidUtf8) {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\n\t\x01\x7f", 9));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\"");
  out.clear();
  append_json_string(out, "caf\xc3\xa9 \xff \xed\xa0\x80");  // valid é, bad byte, surrogate
  EXPECT_EQ(out, "\"caf\xc3\xa9 \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(QuoteForMessage, StaysOnOneLineAndCuts) {
  EXPECT_EQ(quote_for_message("a\"b\n"), "\"a\\\"b\\x0a\"");
  EXPECT_EQ(quote_for_message("abcdef", 3), "\"abc\"...");
  EXPECT_EQ(one_line("x\ny\xff"), "x\\x0ay\\xff");
}

TEST(NormalizePath, IsLexicalAndNeverClimbsAboveRoot) {
  EXPECT_EQ(normalize_path("/a//b/./c/../"), "/a/b");
  EXPECT_EQ(normalize_path("/../.."), "/");
  EXPECT_EQ(normalize_path("/"), "/");
  EXPECT_EQ(normalize_path("relative/x"), "relative/x");
  EXPECT_EQ(join_path("/", "x"), "/x");
  EXPECT_EQ(join_path("/a", "x"), "/a/x");
  EXPECT_TRUE(is_absolute_path("/x"));
  EXPECT_FALSE(is_absolute_path("x"));
  EXPECT_FALSE(is_absolute_path(""));
}

TEST(CountOf, TheNounAgreesWithTheCount) {
  EXPECT_EQ(count_of(0, "rank"), "0 ranks");
  EXPECT_EQ(count_of(1, "rank"), "1 rank");
  EXPECT_EQ(count_of(2, "rank"), "2 ranks");
  EXPECT_EQ(count_of(1, "process", "processes"), "1 process");
  EXPECT_EQ(count_of(3, "process", "processes"), "3 processes");
}

}  // namespace
}  // namespace trainit

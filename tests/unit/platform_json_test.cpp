#include <gtest/gtest.h>

#include <string>

#include "platform/json.h"

namespace trainit {
namespace {

std::string refusal(std::string_view text, JsonLimits limits = {}) {
  auto r = parse_json(text, "/t.json", limits);
  return r.ok() ? "(accepted)" : r.error().message;
}

TEST(ParseJson, ReadsOneDocument) {
  auto r = parse_json(R"({"a":[1,"2",{"b":null}],"c":-1.5})", "/t.json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["a"][1], "2");
  EXPECT_TRUE(parse_json("\xef\xbb\xbf{}", "/t.json").ok()) << "a UTF-8 BOM is allowed";
}

TEST(ParseJson, SyntaxErrorsNameFileLineAndColumn) {
  EXPECT_TRUE(refusal("{\"a\":\n tru}")
                  .starts_with("/t.json: not valid JSON: parse error at line 2, column 5: syntax error while parsing "
                               "value - invalid literal; last read: '"));
  EXPECT_TRUE(refusal("").starts_with("/t.json: not valid JSON: parse error at line 1, column 1"));
  EXPECT_TRUE(refusal("{} {}").starts_with("/t.json: not valid JSON: parse error"));
  EXPECT_TRUE(refusal("{\"a\":\"\xff\"}").starts_with("/t.json: not valid JSON: parse error"));
}

TEST(ParseJson, ErrorsAreOneLineEvenForHostileText) {
  std::string message = refusal("{\"a\":\"x\ny\"}");
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  message = refusal("\xfe\n\x01");
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(ParseJson, RefusesRepeatedKeysWithTheirPath) {
  EXPECT_EQ(refusal(R"({"status":"completed","status":"initializing"})"), "/t.json: status: repeated key");
  EXPECT_EQ(refusal(R"({"a":[{},{"b":1,"b":2}]})"), "/t.json: a[1].b: repeated key");
}

TEST(ParseJson, RefusesNestingDeeperThanTheLimitWithoutRecursing) {
  std::string deep(100000, '[');  // would overflow a recursive parser's stack
  EXPECT_EQ(refusal(deep, {1 << 20, 64}).substr(0, 22), "/t.json: [0][0][0][0][");
  EXPECT_NE(refusal(deep).find(": nested deeper than 64 levels"), std::string::npos);
  std::string ok64 = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(refusal(ok64), "(accepted)");
  std::string too_deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_NE(refusal(too_deep).find("nested deeper than 64 levels"), std::string::npos);
  EXPECT_EQ(refusal(R"({"a":{"b":[{}]}})", {1024, 3}), "/t.json: a.b[0]: nested deeper than 3 levels");
}

TEST(ParseJson, RefusesTextOverTheSizeLimit) {
  EXPECT_EQ(refusal("[1, 2]", {5, 64}), "/t.json: 6 bytes, larger than the limit of 5 bytes");
}

TEST(JsonForMessage, IsAsciiAndCut) {
  EXPECT_EQ(json_for_message(Json("caf\xc3\xa9")), "\"caf\\u00e9\"");
  EXPECT_EQ(json_for_message(Json(std::string(100, 'x')), 10), "\"xxxxxxxxx...");
  EXPECT_EQ(json_for_message(Json::parse(R"({"a":1})")), "{\"a\":1}");
}

}  // namespace
}  // namespace trainit

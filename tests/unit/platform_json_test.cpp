#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "os/json.h"

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

// A number or string of megabytes is named by its start, not echoed whole
// into the log line, the status file and the termination message.
TEST(ParseJson, SyntaxErrorsQuoteAtMost64BytesOfTheBadToken) {
  for (const std::string& text :
       {"{\"a\": " + std::string(1 << 20, '7') + "}", "{\"a\": \"" + std::string(1 << 20, 'x')}) {
    std::string message = refusal(text, {4 << 20, 64});
    EXPECT_TRUE(message.starts_with("/t.json: not valid JSON: ")) << message.substr(0, 200);
    EXPECT_LT(message.size(), 300U) << message.substr(0, 400);
    EXPECT_NE(message.find("...'"), std::string::npos) << message.substr(0, 400);
  }
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

// --- parse_json_stream ----------------------------------------------------------

// Records what the stream tells, by JSON pointer: each value's message form
// (scalars through json_for_message(JsonScalar), containers from close()).
class Recorder : public JsonStreamReader {
 public:
  bool scalar(const JsonScalar& value) override {
    forms[pointer()] = json_for_message(value);
    forms_10[pointer()] = json_for_message(value, 10);
    advance();
    return true;
  }
  bool open(bool object) override {
    levels_.push_back(Level{object, 0, {}});
    return true;
  }
  bool key(std::string_view key) override {
    levels_.back().key = std::string(key);
    keys.emplace_back(key);
    return true;
  }
  bool close(std::string_view form) override {
    levels_.pop_back();
    forms[pointer()] = json_for_message_of_form(form);
    advance();
    return true;
  }

  std::map<std::string, std::string> forms, forms_10;
  std::vector<std::string> keys;

 private:
  struct Level {
    bool object;
    std::size_t index;
    std::string key;
  };
  // The pointer of the value now being told.
  std::string pointer() const {
    std::string p;
    for (const Level& l : levels_) {
      std::string part = l.object ? l.key : std::to_string(l.index);
      std::string escaped;
      for (char c : part)
        escaped += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
      p += "/" + escaped;
    }
    return p;
  }
  void advance() {
    if (!levels_.empty() && !levels_.back().object)
      ++levels_.back().index;
  }
  std::vector<Level> levels_;
};

// Random documents with what makes message forms hard: keys out of sorted
// order and more of them than show, long and non-ASCII keys and strings,
// control characters, every kind of number, nesting.
class Documents {
 public:
  explicit Documents(unsigned seed) : rng_(seed) {}

  nlohmann::ordered_json value(int depth) {
    switch (pick(depth > 4 ? 6 : 9)) {
      case 0:
        return nullptr;
      case 1:
        return pick(2) == 0;
      case 2:
        return -static_cast<std::int64_t>(pick(1000000)) - 1;
      case 3:
        return static_cast<std::uint64_t>(pick(1000000)) * (pick(2) ? 1 : 18446744073ULL);
      case 4:
        return (pick(2) ? -1.0 : 1.0) * pick(100000) / (1 + pick(64));
      case 5:
        return text();
      case 6:
      case 7: {
        nlohmann::ordered_json object = nlohmann::ordered_json::object();
        int n = pick(4) == 0 && depth < 2 ? 20 + pick(30) : pick(6);
        for (int i = 0; i < n; ++i)
          object[text()] = value(depth + 1);
        return object;
      }
      default: {
        nlohmann::ordered_json array = nlohmann::ordered_json::array();
        int n = pick(4) == 0 && depth < 2 ? 30 + pick(40) : pick(6);
        for (int i = 0; i < n; ++i)
          array.push_back(value(depth + 1));
        return array;
      }
    }
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string text() {
    static const char* const kPieces[] = {"a",
                                          "b",
                                          "Z",
                                          "0",
                                          "_",
                                          " ",
                                          "\"",
                                          "\\",
                                          "/",
                                          "\n",
                                          "\x01",
                                          "\x7f",
                                          "\xc3\xa9",
                                          "\xe2\x82\xac",
                                          "\xf0\x9f\x98\x80",
                                          "status"};
    std::string out;
    int n = pick(5) == 0 ? 60 + pick(60) : pick(8);
    for (int i = 0; i < n; ++i)
      out += kPieces[pick(static_cast<int>(std::size(kPieces)))];
    return out;
  }
  std::mt19937 rng_;
};

TEST(ParseJsonStream, TellsEveryValueWithTheMessageFormTheDocumentWouldGive) {
  for (unsigned seed = 1; seed <= 200; ++seed) {
    Documents docs(seed);
    nlohmann::ordered_json doc = docs.value(0);
    const std::string text = doc.dump(seed % 2 == 0 ? -1 : 1);
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + text.substr(0, 200));
    auto dom = parse_json(text, "/t.json");
    ASSERT_TRUE(dom.ok()) << dom.error().message;
    Recorder recorder;
    auto streamed = parse_json_stream(text, "/t.json", {}, recorder);
    ASSERT_TRUE(streamed.ok()) << streamed.error().message;
    EXPECT_TRUE(*streamed);
    for (const auto& [pointer, form] : recorder.forms) {
      const Json& value = dom->at(Json::json_pointer(pointer));
      ASSERT_EQ(form, json_for_message(value)) << "at " << pointer;
      if (!value.is_structured()) {
        ASSERT_EQ(recorder.forms_10[pointer], json_for_message(value, 10)) << "at " << pointer;
      }
    }
    std::size_t values = 0;  // every value was told
    std::vector<const Json*> todo = {&*dom};
    while (!todo.empty()) {
      const Json* v = todo.back();
      todo.pop_back();
      ++values;
      if (v->is_structured()) {
        for (const Json& child : *v)
          todo.push_back(&child);
      }
    }
    EXPECT_EQ(recorder.forms.size(), values);
  }
}

TEST(ParseJsonStream, RefusesWhatParseJsonRefusesWithTheSameWords) {
  const std::string cases[] = {
      "",
      "{",
      "{\"a\":\n tru}",
      "{} {}",
      "{\"a\":\"\xff\"}",
      R"({"status":"completed","status":"initializing"})",
      R"({"a":[{},{"b":1,"b":2}]})",
      R"({"a":{"b":[{}]}})",
      std::string(100000, '['),
      std::string(65, '[') + std::string(65, ']'),
      R"({"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k3":3})",
      "{\"" + std::string(100, 'k') + "\":{\"x\":[1,{\"y\":1,\"y\":2}]}}",
      "[1, 2]",
      [] {  // long keys (their lengths kept in 4 bytes), more than are looked through one by one
        std::string text = "{";
        for (int i = 0; i < 12; ++i)
          text += "\"" + std::string(300, 'k') + std::to_string(i) + "\":" + std::to_string(i) + ",";
        return text + "\"" + std::string(300, 'k') + "7\":0}";
      }(),
  };
  for (const std::string& text : cases) {
    for (JsonLimits limits : {JsonLimits{}, JsonLimits{1024, 3}, JsonLimits{5, 64}}) {
      SCOPED_TRACE(text.substr(0, 60));
      Recorder recorder;
      auto dom = parse_json(text, "/t.json", limits);
      auto streamed = parse_json_stream(text, "/t.json", limits, recorder);
      ASSERT_EQ(dom.ok(), streamed.ok());
      if (!dom.ok()) {
        EXPECT_EQ(streamed.error().message, dom.error().message);
        EXPECT_EQ(streamed.error().errnum, dom.error().errnum);
        // A repeated key or too deep a nesting is no document caught mid-write: errnum 0 (refused), not
        // EBADMSG (waited on).
        const bool wrong = dom.error().message.ends_with(": repeated key") ||
                           dom.error().message.find(": nested deeper than ") != std::string::npos;
        EXPECT_TRUE(wrong ? streamed.error().errnum == 0
                          : streamed.error().errnum == EBADMSG || streamed.error().errnum == EFBIG);
      }
    }
  }
}

TEST(ParseJsonStream, KeysOfABigObjectAreCheckedForRepeatsWhereTheyAre) {
  std::string text = "{";
  for (int i = 0; i < 5000; ++i)
    text += "\"key" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  Recorder recorder;
  EXPECT_TRUE(parse_json_stream(text + "\"last\":0}", "/t.json", {}, recorder).value());
  EXPECT_EQ(recorder.keys.size(), 5001u);
  auto repeated = parse_json_stream(text + "\"key4321\":0}", "/t.json", {}, recorder);
  ASSERT_FALSE(repeated.ok());
  EXPECT_EQ(repeated.error().message, "/t.json: key4321: repeated key");
}

TEST(ParseJsonStream, AReaderMayStopIt) {
  struct StopAtSecondKey : Recorder {
    bool key(std::string_view key) override { return Recorder::key(key) && keys.size() < 2; }
  } reader;
  auto r = parse_json_stream(R"({"a":1,"b":2,"c": this is never read)", "/t.json", {}, reader);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(*r);
  EXPECT_EQ(reader.keys, (std::vector<std::string>{"a", "b"}));
}

TEST(PeekTopLevelString, FindsTheTopLevelKeyAndLooksNoFurther) {
  EXPECT_EQ(peek_top_level_string(R"({"status":"initializing","x":[)", "status"), "initializing");
  EXPECT_EQ(peek_top_level_string(R"({"x":{"status":"initializing"},"status":"completed"})", "status"), "completed");
  EXPECT_EQ(peek_top_level_string(R"({"x":[{"status":"a"}],"y":{"z":{"status":"b"}},"status":"c"})", "status"), "c");
  EXPECT_EQ(peek_top_level_string(R"({"st\u0061tus":"escaped"})", "status"), "escaped");
  EXPECT_EQ(peek_top_level_string("\xef\xbb\xbf{\"status\":\"bom\"}", "status"), "bom");
  EXPECT_EQ(peek_top_level_string(R"({"status":"first","status":"second"})", "status"), "first");
}

TEST(PeekTopLevelString, SaysNothingWhenItCannotTell) {
  for (const char* text : {
           R"({"x":{"status":"nested"}})",                  // only nested
           R"({"x":{"status":"nested"})",                   // only nested, and torn
           R"([{"status":"in an array"}])",                 // not an object
           R"("status")",                                   // not an object
           R"({"status":1})",                               // not a string
           R"({"status":{"value":"completed"}})",           // not a string
           R"({"status":["completed"]})",                   // not a string
           R"({"x":tru, "status":"completed"})",            // broken before it
           R"({"x":"unterminated, "status":"completed"})",  // broken before it
           R"({"status")",                                  // torn before the value
           "",                                              //
       }) {
    EXPECT_EQ(peek_top_level_string(text, "status"), std::nullopt) << text;
  }
  EXPECT_EQ(peek_top_level_string(R"({"a":[[{"b":1}]],"status":"deep"})", "status", 4), "deep");
  EXPECT_EQ(peek_top_level_string(R"({"a":[[[{"b":1}]]],"status":"too deep"})", "status", 4), std::nullopt);
}

TEST(TopLevelKeyRepeated, SeesASecondTopLevelKeyBeforeTheTextEndsOrBreaks) {
  for (const char* text : {
           R"({"status":"first","status":"second"})", R"({"status":"first","status":"first"})",
           R"({"status":1,"x":[1,{"status":2}],"status":{"a":[]}})",
           R"({"status":"first","st\u0061tus":"second","x":[)",  // torn after the second
       }) {
    EXPECT_TRUE(top_level_key_repeated(text, "status")) << text;
  }
  for (const char* text : {
           R"({"status":"first","x":{"status":"nested","status":"twice"},"y":[{"status":2}]})",
           R"({"status":"first","x":[)",                // torn after the first
           R"({"status":"first",,"status":"second"})",  // broken before the second
           R"({"x":1,"x":2,"status":"once"})",          // another key twice
           R"([{"status":1},{"status":2}])",            // not an object
           "",
       }) {
    EXPECT_FALSE(top_level_key_repeated(text, "status")) << text;
  }
  EXPECT_TRUE(top_level_key_repeated(R"({"status":1,"a":[[{"b":1}]],"status":2})", "status", 4));
  EXPECT_FALSE(top_level_key_repeated(R"({"status":1,"a":[[[{"b":1}]]],"status":2})", "status", 4));
}

}  // namespace
}  // namespace trainit

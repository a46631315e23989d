// JSON from outside: size and nesting checked before a value is built, strings not miscounted,
// the parser's own message for text that is not JSON, and no crash at any depth.
#include "base/json_input.h"

#include <gtest/gtest.h>

#include <string>

namespace gemlet {
namespace {

std::string Nested(int depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonInput, NestingDepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth("1", 128), 0);
  EXPECT_EQ(JsonNestingDepth("{\"a\": [1, {\"b\": []}]}", 128), 4);
  // Brackets inside strings, escaped quotes and escaped backslashes do not count.
  EXPECT_EQ(JsonNestingDepth(R"(["[[[[", "\"[[[", "\\", [2]])", 128), 2);
  EXPECT_EQ(JsonNestingDepth(R"({"k": "\\\"{{{{"})", 128), 1);
  // It stops early: one level past the limit is enough to know.
  EXPECT_EQ(JsonNestingDepth(Nested(100000), 128), 129);
}

TEST(JsonInput, ParsesWithinTheLimits) {
  Result<nlohmann::json> j = ParseJson(R"({"名前": "静夜思", "n": [1, 2, 3]})", "the body");
  ASSERT_TRUE(j.ok()) << j.message();
  EXPECT_EQ((*j)["名前"], "静夜思");
  EXPECT_EQ((*j)["n"].size(), 3u);
  // Exactly at the limit parses; one deeper does not.
  EXPECT_TRUE(ParseJson(Nested(kJsonMaxDepth), "x").ok());
  Result<nlohmann::json> deep = ParseJson(Nested(kJsonMaxDepth + 1), "the request body");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.message(), "the request body is nested deeper than 128 levels");
}

TEST(JsonInput, RefusesHostileText) {
  // 100,000 levels of arrays and of objects, and the same inside a field: refused, no crash.
  EXPECT_FALSE(ParseJson(Nested(100000), "body").ok());
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  EXPECT_FALSE(ParseJson(objects, "body").ok());
  EXPECT_FALSE(ParseJson("{\"response_format\": " + Nested(50000) + "}", "body").ok());

  Result<nlohmann::json> big = ParseJson(std::string(100, ' ') + "1", "config.json", {.max_bytes = 64});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.message(), "config.json is 101 bytes; at most 64 are read");

  Result<nlohmann::json> bad = ParseJson("{\"a\": tru}", "tokenizer.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("tokenizer.json is not valid JSON: "), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("parse error"), std::string::npos) << bad.message();
}

// Found by fuzz_safetensors: a number too large for a double is an error like any other (nlohmann
// throws out_of_range for it, not parse_error), never an escaped exception.
TEST(JsonInput, NumbersTooLargeAreErrors) {
  Result<nlohmann::json> j = ParseJson(R"({"x": 6666e888888888})", "the header");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.message().find("the header is not valid JSON: "), std::string::npos) << j.message();
  EXPECT_NE(j.message().find("number overflow"), std::string::npos) << j.message();
}

TEST(JsonInput, OrderedJsonKeepsKeyOrder) {
  Result<nlohmann::ordered_json> j = ParseJson<nlohmann::ordered_json>(R"({"z": 1, "a": 2})", "tools");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->begin().key(), "z");
}

}  // namespace
}  // namespace gemlet

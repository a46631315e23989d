// Gemma 4 tool-call text <-> OpenAI JSON arguments: parsing, formatting, round trips, malformed text.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "runtime/tool_calls.h"

namespace gemlet {

using namespace gemlet::runtime;
namespace {

const std::string Q = "<|\"|>";

nlohmann::json Args(const ToolCall& c) { return nlohmann::json::parse(c.arguments); }

TEST(ToolCallsTest, ParsesTheDecodeLoopsText) {
  auto c = ParseGemma4ToolCall("call:get_weather{location:" + Q + "Paris" + Q + ",unit:" + Q + "celsius" + Q + "}");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->name, "get_weather");
  EXPECT_EQ(c->arguments, R"({"location":"Paris","unit":"celsius"})");
  EXPECT_TRUE(c->id.empty());
}

TEST(ToolCallsTest, ParsesValues) {
  const std::string text = "call:search{q:" + Q + "天气 in 北京, \"quoted\" {braces}: [x]\n" + Q +
                           ",n:3,neg:-2,f:0.25,e:1e-05,big:12345678901234567890123,t:true,no:false,nil:null,py:None,"
                           "obj:{site:" + Q + "example.com" + Q + ",years:[2023,2024],deep:{a:[{b:" + Q + "c" + Q +
                           "},[]],e:{}}},arr:[" + Q + "x" + Q + ",1,-1.5,true,null,[1,[2]]]}";
  auto c = ParseGemma4ToolCall(text);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->name, "search");
  const nlohmann::json a = Args(c.value());
  EXPECT_EQ(a["q"], "天气 in 北京, \"quoted\" {braces}: [x]\n");
  EXPECT_EQ(a["n"], 3);
  EXPECT_EQ(a["neg"], -2);
  EXPECT_DOUBLE_EQ(a["f"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(a["e"].get<double>(), 1e-05);
  EXPECT_EQ(a["t"], true);
  EXPECT_EQ(a["no"], false);
  EXPECT_TRUE(a["nil"].is_null());
  EXPECT_TRUE(a["py"].is_null());
  EXPECT_EQ(a["obj"]["years"], nlohmann::json({2023, 2024}));
  EXPECT_EQ(a["obj"]["deep"]["a"][0]["b"], "c");
  EXPECT_TRUE(a["obj"]["deep"]["e"].is_object() && a["obj"]["deep"]["e"].empty());
  EXPECT_EQ(a["arr"].size(), 6u);
  // Numbers are copied as written: a big integer keeps its digits, the keys their order.
  EXPECT_NE(c->arguments.find("\"big\":12345678901234567890123,"), std::string::npos) << c->arguments;
  EXPECT_EQ(c->arguments.rfind("{\"q\":", 0), 0u);
}

TEST(ToolCallsTest, AcceptsSpacingQuotedKeysAndNoArguments) {
  auto spaced = ParseGemma4ToolCall("  call:f{ a : 1 , " + Q + "b c" + Q + " : [ 1 , 2 ] , 名字 :" + Q + "值" + Q + " }\n");
  ASSERT_TRUE(spaced.ok()) << spaced.message();
  EXPECT_EQ(spaced->arguments, R"({"a":1,"b c":[1,2],"名字":"值"})");
  auto marked = ParseGemma4ToolCall("<|tool_call>call:f{a:1}<tool_call|>");
  ASSERT_TRUE(marked.ok()) << marked.message();
  EXPECT_EQ(marked->arguments, R"({"a":1})");
  auto none = ParseGemma4ToolCall("call:ns.tool-name_2{}");
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_EQ(none->name, "ns.tool-name_2");
  EXPECT_EQ(none->arguments, "{}");
  // Strings are verbatim (no escapes in the template's quoting): backslashes stay, JSON escapes them.
  auto raw = ParseGemma4ToolCall("call:f{p:" + Q + "C:\\dir\\\"x\"" + Q + "}");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(Args(raw.value())["p"], "C:\\dir\\\"x\"");
}

TEST(ToolCallsTest, RefusesMalformedText) {
  const std::vector<std::string> bad = {
      "",
      "get_weather{}",
      "call:{}",
      "call:f",
      "call:f g{}",
      "call:f{",
      "call:f}",
      "call:f{a}",
      "call:f{a:}",
      "call:f{:1}",
      "call:f{a:1,}",
      "call:f{a:1,,b:2}",
      "call:f{a:1 b:2}",
      "call:f{a:" + Q + "unterminated}",
      "call:f{a:1}trailing",
      "call:f{a:1}}",
      "call:f{a:Paris}",
      "call:f{a:True}",
      "call:f{a:nullx}",
      "call:f{a:3x}",
      "call:f{a:01}",
      "call:f{a:1.}",
      "call:f{a:.5}",
      "call:f{a:-}",
      "call:f{a:1e}",
      "call:f{a:+1}",
      "call:f{a:[1,]}",
      "call:f{a:[1}",
      "call:f{a:[1 2]}",
      "call:f{a:{b:1}",
      "call:f{a:1,a:2}",
      "call:f{a" + Q + ":1}",
      "call:f{a:inf}",
  };
  for (const std::string& text : bad) {
    auto c = ParseGemma4ToolCall(text);
    EXPECT_FALSE(c.ok()) << "accepted: " << text << " -> " << c->arguments;
    if (!c.ok()) {
      EXPECT_EQ(c.message().rfind("tool call", 0), 0u) << c.message();
    }
  }
  // Deep nesting is an error, not a stack overflow.
  auto deep = ParseGemma4ToolCall("call:f{a:" + std::string(100000, '[') + std::string(100000, ']') + "}");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.message().find("deeper"), std::string::npos) << deep.message();
  auto deep_ok = ParseGemma4ToolCall("call:f{a:" + std::string(50, '[') + std::string(50, ']') + "}");
  EXPECT_TRUE(deep_ok.ok()) << deep_ok.message();
}

TEST(ToolCallsTest, NeverCrashesOnPrefixesAndMutations) {
  const std::string good = "call:f{s:" + Q + "a,b}" + Q + ",n:-1.5e3,o:{x:[1,{y:" + Q + "中" + Q + "}]},t:true}";
  ASSERT_TRUE(ParseGemma4ToolCall(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ParseGemma4ToolCall(good.substr(0, n)).ok()) << good.substr(0, n);
  }
  std::mt19937 rng(7);
  const std::string alphabet = "{}[],:<|\"> \nabc01-.e";
  for (int i = 0; i < 20000; ++i) {
    std::string t = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: t.erase(at, 1); break;
        default: t = t.substr(0, at) + static_cast<char>(rng() % 256) + t.substr(at); break;
      }
      if (t.empty()) t.push_back('x');
    }
    auto c = ParseGemma4ToolCall(t);
    if (c.ok()) {
      EXPECT_TRUE(nlohmann::json::accept(c->arguments)) << t;  // whatever passes is JSON
    }
  }
}

TEST(ToolCallsTest, FormatsAsTheTemplateDoes) {
  // Keys by dictsort (case-insensitive, stable), bare; strings in <|"|>; nested keys bare too.
  auto text = FormatGemma4ToolCall("get_weather", R"({"unit":"celsius","Location":"Paris","days":[1,2],"opts":{"b":true,"A":null}})");
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(text.value(), "call:get_weather{days:[1,2],Location:" + Q + "Paris" + Q + ",opts:{A:None,b:true},unit:" + Q +
                              "celsius" + Q + "}");
  EXPECT_EQ(FormatGemma4ToolCall("ping", "").value(), "call:ping{}");
  EXPECT_EQ(FormatGemma4ToolCall("ping", "{}").value(), "call:ping{}");
  EXPECT_FALSE(FormatGemma4ToolCall("f", "[1]").ok());
  EXPECT_FALSE(FormatGemma4ToolCall("f", "{bad json").ok());
}

TEST(ToolCallsTest, FormatsNumbersAsPython) {
  // Python's str() of what json.loads gives: ints as ints, floats by repr.
  auto text = FormatGemma4ToolCall(
      "f", R"({"a":1e-05,"b":1e16,"c":2.0,"d":0.1,"e":-0.0,"f":123456789012345678.0,"g":1e15,"h":0.0001,"i":-7,"j":1E5,"k":3.14159,"l":18446744073709551615})");
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(text.value(),
            "call:f{a:1e-05,b:1e+16,c:2.0,d:0.1,e:-0.0,f:1.2345678901234568e+17,g:1000000000000000.0,h:0.0001,i:-7,"
            "j:100000.0,k:3.14159,l:18446744073709551615}");
}

TEST(ToolCallsTest, RoundTrips) {
  const std::vector<std::string> arguments = {
      R"({"location":"Paris","unit":"celsius"})",
      R"({"q":"天气 in 北京, \"quoted\" {braces}: [x]\nline two","n":3,"neg":-2,"ratio":0.25,"tiny":1e-05})",
      R"({"filters":{"site":"example.com","years":[2023,2024],"nested":{"deep":[{"a":"b"},[]],"empty":{}}}})",
      R"({"flag":true,"off":false,"nothing":null,"list":["a",1,2.5,[true,null]]})",
      R"({"名字":"张三","年龄":30,"标签":["学生","北京"]})",
      R"({"colon":"a:b","comma":"a,b","brace":"}","bracket":"]","quote":"\"","backslash":"\\"})",
      R"({})",
  };
  for (const std::string& args : arguments) {
    auto text = FormatGemma4ToolCall("tool_x", args);
    ASSERT_TRUE(text.ok()) << args << ": " << text.message();
    auto parsed = ParseGemma4ToolCall(text.value());
    ASSERT_TRUE(parsed.ok()) << text.value() << ": " << parsed.message();
    EXPECT_EQ(parsed->name, "tool_x");
    EXPECT_EQ(nlohmann::json::parse(parsed->arguments), nlohmann::json::parse(args)) << text.value();
    // And back: the canonical text formats to itself.
    auto again = FormatGemma4ToolCall(parsed->name, parsed->arguments);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again.value(), text.value());
  }
}

TEST(ToolCallsTest, WhatCannotRoundTrip) {
  // The template writes keys bare and strings unescaped: a key with ':' or a string holding <|"|>
  // cannot be read back. Parsing says so instead of guessing.
  auto colon = FormatGemma4ToolCall("f", R"({"a:b":1})");
  ASSERT_TRUE(colon.ok());
  EXPECT_EQ(colon.value(), "call:f{a:b:1}");
  EXPECT_FALSE(ParseGemma4ToolCall(colon.value()).ok());
  auto quote = FormatGemma4ToolCall("f", R"({"s":"x<|\"|>y"})");
  ASSERT_TRUE(quote.ok());
  EXPECT_FALSE(ParseGemma4ToolCall(quote.value()).ok());
}

}  // namespace
}  // namespace gemlet

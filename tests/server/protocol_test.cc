// The wire formats as pure functions of JSON (src/server/protocol.h), without a socket: what a
// request's fields become, and how replies are written back.
#include "server/protocol.h"

#include <gtest/gtest.h>

namespace gemlet::server {
namespace {

using nlohmann::json;

Reply TwoCalls() {
  Reply reply;
  reply.tool_calls = {{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"zone":"CET"})"}};
  return reply;
}

TEST(Protocol, ParallelToolCallsFalseAnswersWithTheFirstCall) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "weather and time?"}}}},
                     {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
                     {"parallel_tool_calls", false}};
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(body, Limits{}, &r));
  EXPECT_FALSE(r.parallel_tool_calls);
  ResponseContext c;
  c.id = "x";
  const json one = ChatCompletionJson(c, r, TwoCalls());
  ASSERT_EQ(one["choices"][0]["message"]["tool_calls"].size(), 1u) << one.dump();
  EXPECT_EQ(one["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  r.parallel_tool_calls = true;
  EXPECT_EQ(ChatCompletionJson(c, r, TwoCalls())["choices"][0]["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(ToolCallsJson(c, r, TwoCalls(), true)[1]["index"], 1);

  json bad = body;
  bad["parallel_tool_calls"] = "no";
  CompletionRequest refused;
  auto e = ParseChatRequest(bad, Limits{}, &refused);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "parallel_tool_calls");
}

TEST(Protocol, ChoicesMergeWithTheirUsage) {
  std::vector<json> completions;
  for (int i = 0; i < 3; ++i) {
    completions.push_back({{"choices", {{{"index", 0}, {"message", {{"content", std::to_string(i)}}}}}},
                           {"usage", {{"prompt_tokens", 7}, {"completion_tokens", i + 1}, {"total_tokens", 8 + i}}}});
  }
  const json merged = MergeChoices(completions);
  ASSERT_EQ(merged["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(merged["choices"][i]["index"], i);
    EXPECT_EQ(merged["choices"][i]["message"]["content"], std::to_string(i));
  }
  EXPECT_EQ(merged["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(merged["usage"]["completion_tokens"], 6);
  EXPECT_EQ(merged["usage"]["total_tokens"], 13);
}

}  // namespace
}  // namespace gemlet::server

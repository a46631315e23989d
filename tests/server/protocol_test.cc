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

// The bytes 0..255 and their base64 (Python's base64.b64encode), and a 5-byte tail that needs padding.
std::string AllBytes() {
  std::string b;
  for (int i = 0; i < 256; ++i) b.push_back(static_cast<char>(i));
  return b;
}

TEST(Protocol, Base64DecodesWhatEncodersWrite) {
  const auto decode = [](std::string_view text, size_t max = 1 << 20) {
    std::string out, error;
    bool too_large = false;
    EXPECT_TRUE(DecodeBase64(text, max, &out, &error, &too_large)) << error;
    return out;
  };
  EXPECT_EQ(decode("aGVsbG8="), "hello");
  EXPECT_EQ(decode("aGVsbG8"), "hello");          // padding optional
  EXPECT_EQ(decode("aGVs\r\nbG8=\n"), "hello");   // line breaks (MIME) skipped
  EXPECT_EQ(decode(""), "");
  EXPECT_EQ(decode("/+8="), "\xff\xef");
  EXPECT_EQ(decode("_-8="), "\xff\xef");         // URL-safe alphabet
  const std::string all =
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9Q"
      "UVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6Ch"
      "oqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy"
      "8/T19vf4+fr7/P3+/w==";
  EXPECT_EQ(decode(all), AllBytes());

  const auto refuse = [](std::string_view text, size_t max, bool want_too_large) {
    std::string out, error;
    bool too_large = false;
    EXPECT_FALSE(DecodeBase64(text, max, &out, &error, &too_large)) << text;
    EXPECT_EQ(too_large, want_too_large) << text;
    EXPECT_FALSE(error.empty());
    return error;
  };
  EXPECT_NE(refuse("aGVs*bG8=", 100, false).find("offset 4"), std::string::npos);
  refuse("aGVsbG8=aa", 100, false);  // data after the padding
  refuse("aGVsb", 100, false);       // one character alone ends no byte
  refuse("aGVsbG8=", 4, true);       // 5 bytes, the limit 4
  refuse(std::string(4000, 'A'), 100, true);  // refused before decoding
}

TEST(Protocol, ImageUrlsMustBeInline) {
  Limits limits;
  std::string bytes;
  auto e = ReadImageUrl("https://example.com/cat.png", "messages[0].content[1]", "messages[0].content", limits, &bytes);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->param, "messages[0].content");
  EXPECT_NE(e->message.find("nothing leaves this device"), std::string::npos) << e->message;
  EXPECT_TRUE(ReadImageUrl("HTTP://example.com/cat.png", "x", "x", limits, &bytes));
  EXPECT_TRUE(ReadImageUrl("file:///etc/passwd", "x", "x", limits, &bytes));
  EXPECT_TRUE(ReadImageUrl("data:image/png;base64", "x", "x", limits, &bytes));           // no comma
  EXPECT_TRUE(ReadImageUrl("data:text/plain;base64,aGVsbG8=", "x", "x", limits, &bytes));  // not an image
  EXPECT_TRUE(ReadImageUrl("data:image/png,hello", "x", "x", limits, &bytes));             // not base64
  EXPECT_TRUE(ReadImageUrl("data:image/png;base64,", "x", "x", limits, &bytes));           // empty
  auto bad = ReadImageUrl("data:image/png;base64,aGV*sbG8=", "messages[0].content[0]", "messages[0].content", limits, &bytes);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->message.find("not valid base64"), std::string::npos) << bad->message;
  limits.max_image_bytes = 3;
  auto big = ReadImageUrl("data:image/png;base64,aGVsbG8=", "x", "x", limits, &bytes);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  limits.max_image_bytes = 100;
  EXPECT_FALSE(ReadImageUrl("data:image/jpeg;base64,aGVsbG8=", "x", "x", limits, &bytes));
  EXPECT_EQ(bytes, "hello");
  EXPECT_FALSE(ReadImageUrl("data:;base64,aGVsbG8=", "x", "x", limits, &bytes));  // no type: the decoder sniffs
}

TEST(Protocol, ImagePartsKeepTheirPlaceAmongTheText) {
  const json body = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"},
         {"content",
          {{{"type", "text"}, {"text", "Compare "}},
           {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AQID"}, {"detail", "low"}}}},
           {{"type", "text"}, {"text", "with"}},
           {{"type", "image_url"}, {"image_url", "data:image/webp;base64,BAU="}}}}},
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}};
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(body, Limits{}, &r));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  const Message& m = r.messages[1];
  EXPECT_TRUE(m.content.empty());
  ASSERT_EQ(m.parts.size(), 4u);
  EXPECT_EQ(m.parts[0].text, "Compare ");
  EXPECT_EQ(m.parts[2].text, "with");
  EXPECT_EQ(r.messages[2].content, "ab");  // text parts alone are joined, as before
  EXPECT_TRUE(r.messages[2].parts.empty());
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].message, 1u);
  EXPECT_EQ(r.images[0].part, 1u);
  EXPECT_EQ(r.images[0].bytes, std::string("\x01\x02\x03"));
  EXPECT_EQ(r.images[0].where, "messages[1].content[1]");
  EXPECT_EQ(r.images[1].part, 3u);
  EXPECT_EQ(r.images[1].bytes, std::string("\x04\x05"));

  for (const json& part : {json{{"type", "image_url"}}, json{{"type", "image_url"}, {"image_url", {{"detail", "low"}}}},
                           json{{"type", "input_audio"}, {"input_audio", {{"format", "wav"}}}},
                           json{{"type", "video_url"}, {"video_url", {{"url", "data:video/mp4;base64,AA=="}}}}}) {
    json bad = body;
    bad["messages"][1]["content"][1] = part;
    CompletionRequest refused;
    auto e = ParseChatRequest(bad, Limits{}, &refused);
    ASSERT_TRUE(e) << part.dump();
    EXPECT_EQ(e->param, "messages[1].content");
    EXPECT_NE(e->message.find("messages[1].content[1]"), std::string::npos) << e->message;
  }
}

TEST(Protocol, OllamaImagesGoBeforeTheirText) {
  const json chat = {{"messages",
                      {{{"role", "user"}, {"content", "What is this?"}, {"images", {"AQID", "BAU="}}},
                       {{"role", "assistant"}, {"content", "A cat."}},
                       {{"role", "user"}, {"content", ""}, {"images", {"BgcI"}}}}}};
  CompletionRequest r;
  ASSERT_FALSE(ParseOllamaRequest(chat, true, Limits{}, &r));
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[0].parts.size(), 3u);
  EXPECT_EQ(r.messages[0].parts[2].text, "What is this?");
  EXPECT_TRUE(r.messages[0].content.empty());
  EXPECT_EQ(r.messages[1].content, "A cat.");
  ASSERT_EQ(r.messages[2].parts.size(), 1u);  // an image alone
  ASSERT_EQ(r.images.size(), 3u);
  EXPECT_EQ(r.images[1].part, 1u);
  EXPECT_EQ(r.images[2].message, 2u);
  EXPECT_EQ(r.images[2].param, "messages[2].images");
  EXPECT_EQ(r.images[2].bytes, std::string("\x06\x07\x08"));

  const json generate = {{"prompt", "Describe it"}, {"system", "Be brief."}, {"images", {"AQID"}}};
  CompletionRequest g;
  ASSERT_FALSE(ParseOllamaRequest(generate, false, Limits{}, &g));
  ASSERT_EQ(g.messages.size(), 2u);
  ASSERT_EQ(g.messages[1].parts.size(), 2u);
  EXPECT_EQ(g.messages[1].parts[1].text, "Describe it");
  ASSERT_EQ(g.images.size(), 1u);
  EXPECT_EQ(g.images[0].message, 1u);
  EXPECT_EQ(g.images[0].part, 0u);

  json raw = generate;
  raw["raw"] = true;
  CompletionRequest rr;
  ASSERT_FALSE(ParseOllamaRequest(raw, false, Limits{}, &rr));
  EXPECT_FALSE(rr.chat);
  ASSERT_EQ(rr.prompt_parts.size(), 2u);
  EXPECT_EQ(rr.prompt_parts[1].text, "Describe it");

  json bad = chat;
  bad["messages"][0]["images"] = {"not base64!"};
  CompletionRequest refused;
  auto e = ParseOllamaRequest(bad, true, Limits{}, &refused);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "messages[0].images");
  EXPECT_NE(e->message.find("messages[0].images[0]"), std::string::npos) << e->message;
  bad["messages"][0]["images"] = "AQID";
  EXPECT_TRUE(ParseOllamaRequest(bad, true, Limits{}, &refused));
}

}  // namespace
}  // namespace gemlet::server

// Chat formats vs the official templates' own output (tests/data/chat_goldens.json, rendered by
// Jinja with tools/chat_goldens/render_goldens.py).
#include <gtest/gtest.h>

#include <fstream>

#include "common/test_util.h"
#include "runtime/chat_format.h"
#include "runtime/tool_calls.h"

namespace gemlet {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library
namespace {

bool IsSystemRoleForTest(const std::string& role) { return role == "system" || role == "developer"; }

using OrderedJson = nlohmann::ordered_json;  // the goldens' key order, as the template saw it

std::string StringOr(const OrderedJson& m, const char* key) {
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : std::string();
}

// OpenAI-style messages (as tools/chat_goldens writes them) as ChatMessages.
std::vector<Message> Messages(const OrderedJson& j) {
  std::vector<Message> out;
  for (const auto& m : j) {
    Message c{m["role"], StringOr(m, "content")};
    if (m.contains("tool_calls")) {
      for (const auto& tc : m["tool_calls"]) {
        c.tool_calls.push_back({tc["function"]["name"], StringOr(tc["function"], "arguments"), StringOr(tc, "id")});
      }
    }
    c.reasoning = StringOr(m, "reasoning_content");
    c.tool_call_id = StringOr(m, "tool_call_id");
    c.name = StringOr(m, "name");
    out.push_back(std::move(c));
  }
  return out;
}

ChatStyle StyleOf(const std::string& tname) {
  if (tname == "gemma4") return ChatStyle::kGemma4;
  if (tname == "gemma4_interleaved") return ChatStyle::kGemma4Interleaved;
  return ChatStyle::kGemma;
}

std::string Joined(const std::vector<ChatSegment>& segments) {
  std::string out;
  for (const ChatSegment& s : segments) out += s.text;
  return out;
}

TEST(ChatFormatTest, MatchesOfficialTemplates) {
  std::ifstream in(std::string(GEMLET_SOURCE_DIR) + "/tests/data/chat_goldens.json");
  const OrderedJson goldens = OrderedJson::parse(in);
  int compared = 0, tool_cases = 0, errors = 0;
  for (const auto& c : goldens["cases"]) {
    const std::string tname = c["template"];
    const ChatStyle style = StyleOf(tname);
    ChatRenderOptions o;
    o.add_generation_prompt = c["add_generation_prompt"];
    o.thinking = c["enable_thinking"];
    if (c.contains("tools") && !c["tools"].is_null()) o.tools = c["tools"].dump();
    const std::vector<Message> messages = Messages(c["messages"]);
    auto rendered = RenderChat(style, messages, o);
    const std::string label = tname + "/" + c["conversation"].get<std::string>() +
                              (o.add_generation_prompt ? "/gen" : "") + (o.thinking ? "/think" : "");
    if (c["error"].is_null()) {
      ASSERT_TRUE(rendered.ok()) << label << ": " << rendered.message();
      EXPECT_EQ(rendered.value(), c["expected"].get<std::string>()) << label;
      // The segments are the same text.
      auto segments = RenderChatSegments(style, messages, o);
      ASSERT_TRUE(segments.ok()) << label;
      EXPECT_EQ(Joined(segments.value()), c["expected"].get<std::string>()) << label;
      ++compared;
      if (c.contains("tools")) ++tool_cases;
    } else if (tname == "gemma2" && IsSystemRoleForTest(c["messages"][0]["role"])) {
      // Gemma 2's template rejects a system message; gemlet folds it in as Gemma 3's does instead.
      ASSERT_TRUE(rendered.ok()) << label;
      EXPECT_NE(rendered.value().find("<start_of_turn>user\n" + c["messages"][0]["content"].get<std::string>() + "\n\n"),
                std::string::npos) << label;
    } else {
      // The template fails (roles that do not alternate; a tool result it cannot name): so do we.
      EXPECT_FALSE(rendered.ok()) << label << " should fail like the template: " << c["error"].get<std::string>();
      ++errors;
    }
  }
  EXPECT_GE(compared, 240);
  EXPECT_GE(tool_cases, 140);
  EXPECT_GE(errors, 6);
}

TEST(ChatFormatTest, RejectsBadConversations) {
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma, {}, {}).ok());
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma, {{"user", "a"}, {"user", "b"}}, {}).ok());
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma, {{"wizard", "a"}}, {}).ok());
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma4, {{"user", "a"}, {"system", "b"}}, {}).ok());
}

TEST(ChatFormatTest, StripThinkingAndTrim) {
  EXPECT_EQ(StripThinking("<|channel>thought\nhmm<channel|>Answer "), "Answer");
  EXPECT_EQ(StripThinking("a<|channel>x<channel|>b<|channel>y<channel|>c"), "abc");
  EXPECT_EQ(TrimUnicodeWhitespace("\u3000 你好\u00a0\n"), "你好");
  EXPECT_EQ(TrimUnicodeWhitespace(" \t "), "");
}

TEST(ChatFormatTest, ChoosesStyleFromTemplateThenArchitecture) {
  EXPECT_EQ(ChooseChatStyle("gemma3", "{{ '<|turn>' }}"), ChatStyle::kGemma4);
  EXPECT_EQ(ChooseChatStyle("gemma4", "<start_of_turn>"), ChatStyle::kGemma);
  EXPECT_EQ(ChooseChatStyle("gemma4", ""), ChatStyle::kGemma4);
  EXPECT_EQ(ChooseChatStyle("gemma2", ""), ChatStyle::kGemma);
  const std::string dir = test::TestdataDir() + "/templates/";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string standard = read(dir + "google-gemma-4-31B-it.jinja");
  const std::string interleaved = read(dir + "google-gemma-4-31B-it-interleaved.jinja");
  ASSERT_FALSE(standard.empty());
  ASSERT_FALSE(interleaved.empty());
  EXPECT_EQ(ChooseChatStyle("gemma4", standard), ChatStyle::kGemma4);
  EXPECT_EQ(ChooseChatStyle("gemma4", interleaved), ChatStyle::kGemma4Interleaved);
  EXPECT_STREQ(ChatStyleName(ChatStyle::kGemma4Interleaved), "gemma4");
}

const char* kWeatherTools = R"([{"type":"function","function":{"name":"get_weather","description":"Weather.",
  "parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}])";

std::vector<Message> WeatherCall() {
  std::vector<Message> m = {{"user", "Weather in Paris?"}, {"assistant", ""}};
  m[1].tool_calls.push_back({"get_weather", R"({"location":"Paris"})", "call_1"});
  return m;
}

TEST(ChatFormatTest, ToolsNeedGemma4) {
  ChatRenderOptions o;
  o.tools = kWeatherTools;
  auto with_tools = RenderChat(ChatStyle::kGemma, {{"user", "Hi"}}, o);
  ASSERT_FALSE(with_tools.ok());
  EXPECT_NE(with_tools.message().find("tools need a Gemma 4 model"), std::string::npos) << with_tools.message();
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma, WeatherCall(), {}).ok());
  Message result{"tool", "15 C"};
  result.tool_call_id = "call_1";
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma, {{"user", "Hi"}, result}, {}).ok());
  // tool_choice "none" renders no tools, so Gemma 1-3 can take the request.
  o.tool_choice = R"("none")";
  EXPECT_TRUE(RenderChat(ChatStyle::kGemma, {{"user", "Hi"}}, o).ok());
}

TEST(ChatFormatTest, ToolChoice) {
  ChatRenderOptions o;
  o.tools = kWeatherTools;
  const auto auto_prompt = RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o);
  ASSERT_TRUE(auto_prompt.ok()) << auto_prompt.message();
  EXPECT_NE(auto_prompt->find("<|tool>declaration:get_weather{"), std::string::npos);
  // "none": no declarations at all (the template cannot tell the model not to call).
  o.tool_choice = R"("none")";
  const auto none = RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, {}).value());
  // "required" and a named function render as "auto"; they must name tools that exist.
  o.tool_choice = R"("required")";
  EXPECT_EQ(RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o).value(), auto_prompt.value());
  o.tool_choice = R"({"type":"function","function":{"name":"get_weather"}})";
  EXPECT_EQ(RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o).value(), auto_prompt.value());
  o.tool_choice = R"({"type":"function","function":{"name":"get_time"}})";
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o).ok());
  o.tools.clear();
  o.tool_choice = R"("required")";
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o).ok());
  // An empty list declares nothing: no system turn for it, as the template's `if tools`.
  o.tool_choice = R"("auto")";
  for (const char* empty : {"", "null", "[]", " [ ] "}) {
    o.tools = empty;
    EXPECT_EQ(RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o).value(),
              RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, {}).value()) << empty;
    EXPECT_TRUE(RenderChat(ChatStyle::kGemma, {{"user", "Hi"}}, o).ok()) << empty;
  }

  EXPECT_EQ(ParseToolChoice("").value().mode, ToolChoice::kAuto);
  EXPECT_EQ(ParseToolChoice("\"auto\"").value().mode, ToolChoice::kAuto);
  EXPECT_EQ(ParseToolChoice("\"none\"").value().mode, ToolChoice::kNone);
  EXPECT_EQ(ParseToolChoice("\"required\"").value().mode, ToolChoice::kRequired);
  auto named = ParseToolChoice(R"({"type":"function","function":{"name":"get_weather"}})");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->mode, ToolChoice::kFunction);
  EXPECT_EQ(named->function, "get_weather");
  EXPECT_FALSE(ParseToolChoice("\"always\"").ok());
  EXPECT_FALSE(ParseToolChoice("{\"type\":\"function\"}").ok());
  EXPECT_FALSE(ParseToolChoice("auto").ok());  // JSON text: a bare word is not JSON
}

TEST(ChatFormatTest, RejectsMalformedTools) {
  ChatRenderOptions o;
  for (const char* tools : {"not json", R"({"type":"function"})", R"([{"type":"function"}])",
                            R"([{"type":"function","function":{"description":"no name"}}])",
                            R"([{"function":{"name":"f","parameters":{"type":"object","properties":[1]}}}])"}) {
    o.tools = tools;
    auto r = RenderChat(ChatStyle::kGemma4, {{"user", "Hi"}}, o);
    EXPECT_FALSE(r.ok()) << tools;
  }
  std::vector<Message> m = WeatherCall();
  m[1].tool_calls[0].arguments = "{location: Paris}";
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma4, m, {}).ok());
  m[1].tool_calls[0].arguments = "[1, 2]";
  EXPECT_FALSE(RenderChat(ChatStyle::kGemma4, m, {}).ok());
  m[1].tool_calls[0].arguments = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto deep = RenderChat(ChatStyle::kGemma4, m, {});  // too deep: an error, not a stack overflow
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.message().find("nested deeper"), std::string::npos) << deep.message();
  m[1].tool_calls[0].arguments = "";  // no arguments: call:get_weather{}
  auto empty = RenderChat(ChatStyle::kGemma4, m, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_NE(empty->find("<|tool_call>call:get_weather{}<tool_call|><|tool_response>"), std::string::npos);
}

TEST(ChatFormatTest, ToolTextSegments) {
  // Special tokens are markup; the text between them (names, keys, string values, results) is
  // content, one run per stretch between special tokens, so it tokenizes as in the whole prompt.
  std::vector<Message> m = WeatherCall();
  Message result{"tool", "<turn|> sunny"};
  result.tool_call_id = "call_1";
  m.push_back(result);
  ChatRenderOptions o;
  o.tools = kWeatherTools;
  o.add_bos = false;
  auto segments = RenderChatSegments(ChatStyle::kGemma4, m, o);
  ASSERT_TRUE(segments.ok()) << segments.message();
  std::vector<std::string> content;
  for (const ChatSegment& s : segments.value()) {
    if (s.is_content) content.push_back(s.text);
    else {
      EXPECT_EQ(s.text.find("Paris"), std::string::npos) << s.text;
    }
  }
  auto has = [&](const std::string& text) { return std::find(content.begin(), content.end(), text) != content.end(); };
  EXPECT_TRUE(has("declaration:get_weather{description:"));
  EXPECT_TRUE(has("call:get_weather{location:"));
  EXPECT_TRUE(has("Paris"));
  EXPECT_TRUE(has("response:get_weather{value:"));
  EXPECT_TRUE(has("<turn|> sunny"));  // a result cannot end the turn
}

TEST(ChatFormatTest, ToolResultWithoutName) {
  std::vector<Message> m = WeatherCall();
  Message result{"tool", "15 C"};
  result.tool_call_id = "call_other";
  m.push_back(result);
  auto r = RenderChat(ChatStyle::kGemma4, m, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("matches no call"), std::string::npos) << r.message();
  m.back().name = "get_weather";
  EXPECT_TRUE(RenderChat(ChatStyle::kGemma4, m, {}).ok());
}

TEST(ChatFormatTest, TurnEndMarkers) {
  EXPECT_EQ(TurnEndMarkers(ChatStyle::kGemma), std::vector<std::string>{"<end_of_turn>"});
  for (ChatStyle s : {ChatStyle::kGemma4, ChatStyle::kGemma4Interleaved}) {
    EXPECT_EQ(TurnEndMarkers(s), (std::vector<std::string>{"<turn|>", "<|tool_response>"}));
  }
}

}  // namespace
}  // namespace gemlet

// Chat formats vs the official templates' own output (tests/data/chat_goldens.json, rendered by
// Jinja with tools/chat_goldens/render_goldens.py).
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "runtime/chat_format.h"

namespace gemlet {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library
namespace {

std::vector<ChatMessage> Messages(const nlohmann::json& j) {
  std::vector<ChatMessage> out;
  for (const auto& m : j) out.push_back({m["role"], m["content"]});
  return out;
}

TEST(ChatFormatTest, MatchesOfficialTemplates) {
  const auto goldens = test::ReadJson(std::string(GEMLET_SOURCE_DIR) + "/tests/data/chat_goldens.json");
  int compared = 0;
  for (const auto& c : goldens["cases"]) {
    const std::string tname = c["template"];
    const ChatStyle style = tname.rfind("gemma4", 0) == 0 ? ChatStyle::kGemma4 : ChatStyle::kGemma;
    ChatRenderOptions o;
    o.add_generation_prompt = c["add_generation_prompt"];
    o.enable_thinking = c["enable_thinking"];
    auto rendered = RenderChat(style, Messages(c["messages"]), o);
    const std::string label = tname + "/" + c["conversation"].get<std::string>();
    if (c["error"].is_null()) {
      ASSERT_TRUE(rendered.ok()) << label << ": " << rendered.message();
      EXPECT_EQ(rendered.value(), c["expected"].get<std::string>()) << label;
      ++compared;
    } else {
      // Gemma 2's template rejects a system message; gemlet folds it in as Gemma 3's does instead.
      ASSERT_TRUE(rendered.ok()) << label;
      EXPECT_NE(rendered.value().find("<start_of_turn>user\n" + c["messages"][0]["content"].get<std::string>() + "\n\n"),
                std::string::npos) << label;
    }
  }
  EXPECT_GE(compared, 80);
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
}

}  // namespace
}  // namespace gemlet

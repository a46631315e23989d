// Chat prompt formats of the Gemma families, rendered exactly as the official Jinja templates do
// (tests compare with the templates' own output), without a template engine.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gemlet::runtime {

enum class ChatStyle {
  kGemma,   // Gemma 1/2/3: <start_of_turn>user ... <end_of_turn>; system folded into the first user turn
  kGemma4,  // Gemma 4: <|turn>role ... <turn|>, native system role, optional thinking
};

struct ChatMessage {
  std::string role;     // "system" (or "developer"), "user", "assistant" (or "model")
  std::string content;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // end with the opening of the model's turn
  bool enable_thinking = false;       // Gemma 4: ask the model to think first (<|think|>)
  bool add_bos = true;                // write "<bos>" text first (off when the tokenizer adds BOS)
};

// Picks the style from the GGUF's tokenizer.chat_template when it is one we recognise, else from
// general.architecture.
ChatStyle ChooseChatStyle(const std::string& arch, const std::string& chat_template);
const char* ChatStyleName(ChatStyle style);

// Errors on an empty conversation, an unknown role, or roles that do not alternate (Gemma 1-3).
Result<std::string> RenderChat(ChatStyle style, const std::vector<ChatMessage>& messages,
                               const ChatRenderOptions& options);

// The same prompt split into template markup and message content, so that content can be
// tokenized with special-token parsing off: a user typing "<end_of_turn>" cannot end a turn.
struct ChatSegment {
  std::string text;
  bool is_content = false;
};
Result<std::vector<ChatSegment>> RenderChatSegments(ChatStyle style, const std::vector<ChatMessage>& messages,
                                                    const ChatRenderOptions& options);

// The strings that end a model turn in each style (besides the tokenizer's EOS).
std::vector<std::string> TurnEndMarkers(ChatStyle style);

// Gemma 4 keeps the thought channel out of the history: removes every <|channel>...<channel|>
// part and trims, like the template's strip_thinking macro.
std::string StripThinking(std::string_view text);

// Python's str.strip() (Jinja's trim): removes Unicode whitespace at both ends of UTF-8 text.
std::string TrimUnicodeWhitespace(std::string_view text);

}  // namespace gemlet::runtime

// Chat prompt formats of the Gemma families, rendered exactly as the official Jinja templates do
// (tests compare with the templates' own output), without a template engine.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gemlet/types.hpp"

namespace gemlet::runtime {

enum class ChatStyle {
  kGemma,   // Gemma 1/2/3: <start_of_turn>user ... <end_of_turn>; system folded into the first user turn
  kGemma4,  // Gemma 4: <|turn>role ... <turn|>, native system role, optional thinking, tools
  // Gemma 4's "-interleaved" template: the same without tools; with them it writes declarations in
  // another order, keeps reasoning_content without a newline, and gives role "tool" a turn of its own.
  kGemma4Interleaved,
};

// Messages and tool calls are the public Message and ToolCall (gemlet/types.hpp).

// OpenAI's tool_choice, and what the Gemma 4 template can say of it. The template has no field for
// it: "auto" is the template's only mode (tools declared, the model decides); "none" renders no tool
// declarations (history with tool calls and results is still rendered), so the model is not told
// of them. "required" and a named function cannot be expressed in the prompt: they render like
// "auto" (checked: tools declared, the named one among them), and a server must enforce them while
// sampling (constrained decoding: the model's turn must open with "<|tool_call>call:" or
// "<|tool_call>call:NAME{").
struct ToolChoice {
  enum Mode { kAuto, kNone, kRequired, kFunction };
  Mode mode = kAuto;
  std::string function;  // kFunction: its name
};

// What rendering takes: the public ChatOptions as they are (the generation prompt, thinking, the
// request's tools and tool_choice as JSON text: ParseToolChoice reads it, an error for a bad one),
// and whether "<bos>" is written as text (off when the tokenizer adds BOS as a token).
struct ChatRenderOptions : ChatOptions {
  bool add_bos = true;
};

// Picks the style from the GGUF's tokenizer.chat_template when it is one we recognise, else from
// general.architecture.
ChatStyle ChooseChatStyle(const std::string& arch, const std::string& chat_template);
const char* ChatStyleName(ChatStyle style);

// Errors on an empty conversation, an unknown role, roles that do not alternate (Gemma 1-3), tools
// or tool messages for Gemma 1-3 ("tools need a Gemma 4 model"), malformed tools or call arguments,
// and a tool result whose function cannot be named (no name, and its tool_call_id matches no call:
// the template itself fails there). A tool message that follows no assistant tool call is dropped,
// as the template drops it.
Result<std::string> RenderChat(ChatStyle style, const std::vector<Message>& messages,
                               const ChatRenderOptions& options);

// The same prompt split into template markup and message content, so that content can be
// tokenized with special-token parsing off: a user typing "<end_of_turn>" cannot end a turn.
// A media part of a message (Message::parts) is a segment of its own: `media` counts the media
// parts of the messages in order (0, 1, ...), and `text` holds the template's marker for it
// ("<start_of_image>", "<|image|>", "<|audio|>"), which the tokenizer replaces with the media's soft
// tokens (EncodeChat).
struct ChatSegment {
  std::string text;
  bool is_content = false;
  int media = -1;
};
Result<std::vector<ChatSegment>> RenderChatSegments(ChatStyle style, const std::vector<Message>& messages,
                                                    const ChatRenderOptions& options);

// The strings that end a model turn in each style (besides the tokenizer's EOS). Gemma 4: <turn|>, and
// <|tool_response>: after its tool calls the model writes it and waits for the results (the template
// ends a prompt with pending calls on it; servers report Gemma 4's generation_config eos_token_id as
// [1, 106, 50], <eos> <turn|> <|tool_response>). Without it a tool call runs on to max_tokens.
std::vector<std::string> TurnEndMarkers(ChatStyle style);

// Gemma 4 keeps the thought channel out of the history: removes every <|channel>...<channel|>
// part and trims, like the template's strip_thinking macro.
std::string StripThinking(std::string_view text);

// Python's str.strip() (Jinja's trim): removes Unicode whitespace at both ends of UTF-8 text.
std::string TrimUnicodeWhitespace(std::string_view text);

}  // namespace gemlet::runtime

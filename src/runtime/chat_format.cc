// Chat formats: a transcription of the official Gemma templates' text, tool and media paths.
// Gemma 4's tool syntax itself (declarations, call arguments) lives in tool_calls.cc.
#include "runtime/chat_format.h"

#include <algorithm>

#include "runtime/tool_calls.h"

namespace gemlet::runtime {

namespace {

// Decodes the UTF-8 code point at text[i], setting *len; invalid bytes count as one non-space unit.
uint32_t CodePointAt(std::string_view text, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > text.size()) {
    *len = 1;
    return 0xfffd;
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
  *len = static_cast<size_t>(n);
  return cp;
}

// The characters Python's str.isspace() accepts.
bool IsUnicodeSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

bool IsSystemRole(const std::string& role) { return role == "system" || role == "developer"; }
bool IsModelRole(const std::string& role) { return role == "assistant" || role == "model"; }

Status CheckRoles(const std::vector<Message>& messages) {
  if (messages.empty()) return Status::Error("the conversation is empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (!IsSystemRole(r) && r != "user" && !IsModelRole(r) && r != "tool") {
      return Status::Error("message " + std::to_string(i) + " has unknown role '" + r +
                           "' (system, user, assistant, tool)");
    }
    if (IsSystemRole(r) && i != 0) return Status::Error("only the first message may be a system message");
  }
  return Status::Ok();
}

// Where a message's content is Message::parts, the templates' "content is a sequence" branch: text
// parts each trimmed (a model's stripped of its thought, Gemma 4), media parts as their markers.
// An empty `parts` renders `content` through `text`, the string branch.
template <class TextFn>
void WriteContent(const Message& m, ChatStyle style, const TextFn& text, SegmentWriter* out) {
  if (m.parts.empty()) {
    out->Content(text(m.content));
    return;
  }
  for (const ContentPart& part : m.parts) {
    if (!part.media) {
      out->Content(text(part.text));
    } else if (style == ChatStyle::kGemma) {
      // Gemma 3's template, and Gemma 3n's for audio.
      out->Media(part.media->kind == MediaKind::kAudio ? "<audio_soft_token>" : "<start_of_image>");
    } else {
      out->Media(part.media->kind == MediaKind::kAudio ? "<|audio|>" : "<|image|>");
    }
  }
}

Status CheckParts(const std::vector<Message>& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if (m.parts.empty()) continue;
    const std::string where = "message " + std::to_string(i);
    if (!m.content.empty()) return Status::Error(where + " has both content and parts (give one)");
    if (m.role == "tool") return Status::Error(where + " (tool) cannot hold parts: its content is the result");
    for (size_t k = 0; k < m.parts.size(); ++k) {
      const ContentPart& part = m.parts[k];
      if (!part.media) continue;
      if (part.media->n_tokens <= 0) return Status::Error(where + ": media part " + std::to_string(k) + " is empty");
    }
    // The Gemma 3 template's system prefix is its first part's text: media there would be lost.
    if (i == 0 && (m.role == "system" || m.role == "developer")) {
      for (const ContentPart& part : m.parts) {
        if (part.media) return Status::Error("the system message cannot hold images or audio");
      }
    }
  }
  return Status::Ok();
}

bool UsesTools(const std::vector<Message>& messages) {
  for (const Message& m : messages) {
    if (m.role == "tool" || !m.tool_calls.empty()) return true;
  }
  return false;
}

// Whether the declarations are rendered: tool_choice "none" hides them; "required" and a named
// function render as "auto" (the template cannot say more) after a check that they can be met.
Result<bool> DeclareTools(const ChatRenderOptions& o) {
  ASSIGN_OR_RETURN(const ToolChoice choice, ParseToolChoice(o.tool_choice));
  if (choice.mode == ToolChoice::kNone) return false;
  ASSIGN_OR_RETURN(std::vector<std::string> names, DeclaredToolNames(o.tools));
  if (choice.mode == ToolChoice::kRequired && names.empty()) {
    return Status::Error("tool_choice \"required\" needs tools");
  }
  if (choice.mode == ToolChoice::kFunction && std::find(names.begin(), names.end(), choice.function) == names.end()) {
    return Status::Error("tool_choice names '" + choice.function + "', which is not among the tools");
  }
  return !names.empty();  // an empty list declares nothing, as the template's `if tools` reads it
}

std::vector<ChatSegment> RenderGemma(const std::vector<Message>& messages, const ChatRenderOptions& o) {
  // Gemma 3 template: a system message becomes a prefix of the first user turn, followed by "\n\n".
  SegmentWriter out;
  if (o.add_bos) out.Markup("<bos>");
  std::string first_user_prefix;
  size_t start = 0;
  if (IsSystemRole(messages[0].role)) {
    // The template takes a system message's first part when it has parts.
    const Message& system = messages[0];
    first_user_prefix = (system.parts.empty() ? system.content : system.parts[0].text) + "\n\n";
    start = 1;
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const std::string role = IsModelRole(messages[i].role) ? "model" : messages[i].role;
    out.Markup("<start_of_turn>" + role + "\n");
    if (i == start) out.Content(first_user_prefix);
    WriteContent(messages[i], ChatStyle::kGemma, TrimUnicodeWhitespace, &out);
    out.Markup("<end_of_turn>\n");
  }
  if (o.add_generation_prompt) out.Markup("<start_of_turn>model\n");
  return out.Take();
}

// What the template's ns.prev_message_type remembers of the last message: whether the prompt ends
// inside the model's turn, after its tool calls or the tools' results.
enum class Last { kOther, kToolCall, kToolResponse };

// The system turn: thinking switch, system text, tool declarations. Returns the first message of
// the loop (1 after a system message).
Result<size_t> RenderGemma4System(const std::vector<Message>& messages, const ChatRenderOptions& o, bool tools,
                                  bool interleaved, SegmentWriter* out) {
  if (o.add_bos) out->Markup("<bos>");
  const bool has_system = IsSystemRole(messages[0].role);
  if (!o.thinking && !tools && !has_system) return 0;
  out->Markup("<|turn>system\n");
  if (o.thinking) out->Markup("<|think|>\n");
  if (has_system) WriteContent(messages[0], ChatStyle::kGemma4, TrimUnicodeWhitespace, out);
  if (tools) RETURN_IF_ERROR(WriteGemma4ToolDeclarations(o.tools, interleaved, out));
  out->Markup("<turn|>\n");
  return has_system ? 1 : 0;
}

size_t LastUserIndex(const std::vector<Message>& messages, size_t start) {
  size_t last = std::string::npos;  // the template's -1: every message comes after it
  for (size_t i = start; i < messages.size(); ++i) {
    if (messages[i].role == "user") last = i;
  }
  return last;
}

bool AfterLastUser(size_t i, size_t last_user) { return last_user == std::string::npos || i > last_user; }

// The message's own content: a model's text without its thought channel, anyone else's trimmed.
void WriteGemma4Content(const Message& m, SegmentWriter* out) {
  if (IsModelRole(m.role)) {
    WriteContent(m, ChatStyle::kGemma4, [](const std::string& t) { return StripThinking(t); }, out);
  } else {
    WriteContent(m, ChatStyle::kGemma4, TrimUnicodeWhitespace, out);
  }
}

bool HasContent(const Message& m) { return !m.content.empty() || !m.parts.empty(); }

// google-gemma-4-31B-it.jinja. Tool messages are not turns: the assistant message whose calls they
// answer renders them (OpenAI's role "tool", named through tool_call_id), and the model's turn goes
// on after them. A model message after an assistant one (tool messages aside) continues its turn.
Result<std::vector<ChatSegment>> RenderGemma4(const std::vector<Message>& messages, const ChatRenderOptions& o,
                                              bool tools) {
  SegmentWriter out;
  ASSIGN_OR_RETURN(const size_t start, RenderGemma4System(messages, o, tools, /*interleaved=*/false, &out));
  const size_t last_user = LastUserIndex(messages, start);
  Last last = Last::kOther;
  for (size_t i = start; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if (m.role == "tool") continue;
    last = Last::kOther;
    const std::string role = m.role == "assistant" ? "model" : m.role;
    const std::string* previous = nullptr;  // the role of the last message before, tool messages aside
    for (size_t j = i; j-- > start;) {
      if (messages[j].role != "tool") {
        previous = &messages[j].role;
        break;
      }
    }
    if (!(role == "model" && previous != nullptr && *previous == "assistant")) out.Markup("<|turn>" + role + "\n");
    if (!m.reasoning.empty() && AfterLastUser(i, last_user) && !m.tool_calls.empty()) {
      out.Markup("<|channel>thought\n");
      out.Content(m.reasoning);
      out.Markup("\n<channel|>");
    }
    for (const ToolCall& call : m.tool_calls) {
      RETURN_IF_ERROR(WriteGemma4ToolCall(call, &out));
      last = Last::kToolCall;
    }
    bool responded = false;
    if (!m.tool_calls.empty()) {
      for (size_t k = i + 1; k < messages.size() && messages[k].role == "tool"; ++k) {
        const Message& result = messages[k];
        // The template names the result by its own name, overridden by every call whose id equals
        // its tool_call_id (absent ones equal too: None == None).
        const std::string* name = result.name.empty() ? nullptr : &result.name;
        for (const ToolCall& call : m.tool_calls) {
          if (call.id == result.tool_call_id) name = &call.name;
        }
        if (name == nullptr) {
          return Status::Error("message " + std::to_string(k) + " (tool) has no name, and its tool_call_id '" +
                               result.tool_call_id + "' matches no call of message " + std::to_string(i));
        }
        WriteGemma4ToolResponse(*name, result.content, &out);
        responded = true;
        last = Last::kToolResponse;
      }
    }
    WriteGemma4Content(m, &out);
    // Calls without results: the prompt ends where the model would wait for them.
    if (last == Last::kToolCall && !responded) out.Markup("<|tool_response>");
    else if (!(responded && !HasContent(m))) out.Markup("<turn|>\n");
  }
  if (o.add_generation_prompt && last == Last::kOther) {
    out.Markup("<|turn>model\n");
    // Without thinking, the template opens and closes an empty thought channel for the model.
    if (!o.thinking) out.Markup("<|channel>thought\n<channel|>");
  }
  return out.Take();
}

// google-gemma-4-31B-it-interleaved.jinja: every message is a turn of its own, role "tool" included
// (its content trimmed, as a user's); reasoning_content before tool calls has no closing newline.
// (Its native tool_responses field on assistant messages is not carried by Message.)
Result<std::vector<ChatSegment>> RenderGemma4Interleaved(const std::vector<Message>& messages,
                                                         const ChatRenderOptions& o, bool tools) {
  SegmentWriter out;
  ASSIGN_OR_RETURN(const size_t start, RenderGemma4System(messages, o, tools, /*interleaved=*/true, &out));
  const size_t last_user = LastUserIndex(messages, start);
  for (size_t i = start; i < messages.size(); ++i) {
    const Message& m = messages[i];
    out.Markup("<|turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n");
    if (!m.tool_calls.empty() && !m.reasoning.empty() && AfterLastUser(i, last_user)) {
      out.Markup("<|channel>thought\n");
      out.Content(m.reasoning);
      out.Markup("<channel|>");
    }
    for (const ToolCall& call : m.tool_calls) RETURN_IF_ERROR(WriteGemma4ToolCall(call, &out));
    WriteGemma4Content(m, &out);
    out.Markup("<turn|>\n");
  }
  if (o.add_generation_prompt) {
    out.Markup("<|turn>model\n");
    if (!o.thinking) out.Markup("<|channel>thought\n<channel|>");
  }
  return out.Take();
}

}  // namespace

std::string TrimUnicodeWhitespace(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    size_t len;
    if (!IsUnicodeSpace(CodePointAt(text, begin, &len))) break;
    begin += len;
  }
  // Scan forward for the last non-space code point (UTF-8 cannot be decoded backwards safely).
  size_t last_end = begin;
  for (size_t i = begin; i < end;) {
    size_t len;
    const uint32_t cp = CodePointAt(text, i, &len);
    i += len;
    if (!IsUnicodeSpace(cp)) last_end = i;
  }
  return std::string(text.substr(begin, last_end - begin));
}

std::string StripThinking(std::string_view text) {
  std::string result;
  size_t pos = 0;
  for (;;) {
    const size_t close = text.find("<channel|>", pos);
    std::string_view part = text.substr(pos, close == std::string_view::npos ? std::string_view::npos : close - pos);
    const size_t open = part.find("<|channel>");
    result.append(open == std::string_view::npos ? part : part.substr(0, open));
    if (close == std::string_view::npos) break;
    pos = close + 10;
  }
  return TrimUnicodeWhitespace(result);
}

ChatStyle ChooseChatStyle(const std::string& arch, const std::string& chat_template) {
  if (chat_template.find("<|turn>") != std::string::npos) {
    // The interleaved template tracks ns.last_user_message; the standard one continue_same_model_turn.
    const bool interleaved = chat_template.find("last_user_message") != std::string::npos &&
                             chat_template.find("continue_same_model_turn") == std::string::npos;
    return interleaved ? ChatStyle::kGemma4Interleaved : ChatStyle::kGemma4;
  }
  if (chat_template.find("<start_of_turn>") != std::string::npos) return ChatStyle::kGemma;
  return arch == "gemma4" ? ChatStyle::kGemma4 : ChatStyle::kGemma;
}

// Both Gemma 4 templates are "gemma4" to callers (EngineInfo::chat_format names the prompt family).
const char* ChatStyleName(ChatStyle style) { return style == ChatStyle::kGemma ? "gemma" : "gemma4"; }

Result<std::string> RenderChat(ChatStyle style, const std::vector<Message>& messages,
                               const ChatRenderOptions& options) {
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segments, RenderChatSegments(style, messages, options));
  std::string out;
  for (const ChatSegment& s : segments) out += s.text;
  return out;
}

Result<std::vector<ChatSegment>> RenderChatSegments(ChatStyle style, const std::vector<Message>& messages,
                                                    const ChatRenderOptions& options) {
  RETURN_IF_ERROR(CheckRoles(messages));
  RETURN_IF_ERROR(CheckParts(messages));
  ASSIGN_OR_RETURN(const bool tools, DeclareTools(options));
  if (style == ChatStyle::kGemma4) return RenderGemma4(messages, options, tools);
  if (style == ChatStyle::kGemma4Interleaved) return RenderGemma4Interleaved(messages, options, tools);
  // The Gemma 1-3 templates ignore tools and reject tool messages: saying so beats a model that
  // silently never learns of its tools.
  if (tools || UsesTools(messages)) {
    return Status::Error("tools need a Gemma 4 model: the Gemma 1-3 chat format has no tool calls or results");
  }
  // Gemma 1-3 templates require user/model alternation after the optional system message.
  const size_t start = IsSystemRole(messages[0].role) ? 1 : 0;
  for (size_t i = start; i < messages.size(); ++i) {
    const bool expect_user = (i - start) % 2 == 0;
    if ((messages[i].role == "user") != expect_user) {
      return Status::Error("conversation roles must alternate user/assistant/user/...");
    }
  }
  return RenderGemma(messages, options);
}

std::vector<std::string> TurnEndMarkers(ChatStyle style) {
  if (style != ChatStyle::kGemma) return {"<turn|>", "<|tool_response>"};
  return {"<end_of_turn>"};
}

}  // namespace gemlet::runtime

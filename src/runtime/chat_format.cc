// Chat formats: a transcription of the official Gemma templates' text path (no tools, no images).
#include "runtime/chat_format.h"

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

Status CheckRoles(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) return Status::Error("the conversation is empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (!IsSystemRole(r) && r != "user" && !IsModelRole(r)) {
      return Status::Error("message " + std::to_string(i) + " has unknown role '" + r + "' (system, user, assistant)");
    }
    if (IsSystemRole(r) && i != 0) return Status::Error("only the first message may be a system message");
  }
  return Status::Ok();
}

// Accumulates markup and content segments, merging neighbours of the same kind.
class SegmentWriter {
 public:
  void Markup(const std::string& text) { Add(text, false); }
  void Content(const std::string& text) { Add(text, true); }
  std::vector<ChatSegment> Take() { return std::move(segments_); }

 private:
  void Add(const std::string& text, bool content) {
    if (text.empty()) return;
    if (!segments_.empty() && segments_.back().is_content == content) segments_.back().text += text;
    else segments_.push_back({text, content});
  }
  std::vector<ChatSegment> segments_;
};

std::vector<ChatSegment> RenderGemma(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  // Gemma 3 template: a system message becomes a prefix of the first user turn, followed by "\n\n".
  SegmentWriter out;
  if (o.add_bos) out.Markup("<bos>");
  std::string first_user_prefix;
  size_t start = 0;
  if (IsSystemRole(messages[0].role)) {
    first_user_prefix = messages[0].content + "\n\n";
    start = 1;
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const std::string role = IsModelRole(messages[i].role) ? "model" : messages[i].role;
    out.Markup("<start_of_turn>" + role + "\n");
    if (i == start) out.Content(first_user_prefix);
    out.Content(TrimUnicodeWhitespace(messages[i].content));
    out.Markup("<end_of_turn>\n");
  }
  if (o.add_generation_prompt) out.Markup("<start_of_turn>model\n");
  return out.Take();
}

std::vector<ChatSegment> RenderGemma4(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  SegmentWriter out;
  if (o.add_bos) out.Markup("<bos>");
  size_t start = 0;
  const bool has_system = IsSystemRole(messages[0].role);
  if (o.enable_thinking || has_system) {
    out.Markup("<|turn>system\n");
    if (o.enable_thinking) out.Markup("<|think|>\n");
    if (has_system) {
      out.Content(TrimUnicodeWhitespace(messages[0].content));
      start = 1;
    }
    out.Markup("<turn|>\n");
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const bool model = IsModelRole(messages[i].role);
    // Consecutive model messages continue one turn (the template's continue_same_model_turn).
    const bool continues = model && i > start && IsModelRole(messages[i - 1].role);
    if (!continues) {
      if (i > start) out.Markup("<turn|>\n");
      out.Markup("<|turn>" + std::string(model ? "model" : messages[i].role) + "\n");
    }
    out.Content(model ? StripThinking(messages[i].content) : TrimUnicodeWhitespace(messages[i].content));
  }
  if (messages.size() > start) out.Markup("<turn|>\n");
  if (o.add_generation_prompt) {
    out.Markup("<|turn>model\n");
    // Without thinking, the template opens and closes an empty thought channel for the model.
    if (!o.enable_thinking) out.Markup("<|channel>thought\n<channel|>");
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
  if (chat_template.find("<|turn>") != std::string::npos) return ChatStyle::kGemma4;
  if (chat_template.find("<start_of_turn>") != std::string::npos) return ChatStyle::kGemma;
  return arch == "gemma4" ? ChatStyle::kGemma4 : ChatStyle::kGemma;
}

const char* ChatStyleName(ChatStyle style) { return style == ChatStyle::kGemma4 ? "gemma4" : "gemma"; }

Result<std::string> RenderChat(ChatStyle style, const std::vector<ChatMessage>& messages,
                               const ChatRenderOptions& options) {
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segments, RenderChatSegments(style, messages, options));
  std::string out;
  for (const ChatSegment& s : segments) out += s.text;
  return out;
}

Result<std::vector<ChatSegment>> RenderChatSegments(ChatStyle style, const std::vector<ChatMessage>& messages,
                                                    const ChatRenderOptions& options) {
  RETURN_IF_ERROR(CheckRoles(messages));
  if (style == ChatStyle::kGemma4) return RenderGemma4(messages, options);
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
  if (style == ChatStyle::kGemma4) return {"<turn|>"};
  return {"<end_of_turn>"};
}

}  // namespace gemlet::runtime

// Gemma 4's tool syntax: declarations, calls and responses written as the official template writes
// them, and the model's calls ("call:NAME{key:<|"|>v<|"|>}") parsed back to OpenAI's JSON.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/chat_format.h"
#include "runtime/generate.h"

namespace gemlet::runtime {

// Parses the text of one call, as the decode loop hands it over (between <|tool_call> and
// <tool_call|>, which may also be left on): "call:NAME{ARGS}". ARGS are the template's values: <|"|>strings<|"|> (any text up to
// the next <|"|>, no escapes), JSON numbers, true, false, null (and None, the template's rendering
// of null), {key:value,...} with bare or <|"|>quoted<|"|> keys, and [value,...]; whitespace between
// tokens is allowed. The result's arguments are compact JSON text ({"key":"v"}) in the order written;
// its id is empty. Anything else is an error naming the byte where parsing stopped: a missing
// "call:" or name, an unterminated string or bracket, a bare word, a trailing comma, a duplicate key,
// text after the closing brace, or nesting deeper than 100.
Result<ToolCall> ParseGemma4ToolCall(std::string_view text);
// A call as the model wrote it, for a reply: parsed as above, else (a model may write anything) its
// name when it has one and its raw text as the arguments.
ToolCall ToolCallFromModelText(const std::string& text);

// The inverse, "call:NAME{...}" for JSON arguments (an object, or empty for none), exactly as the
// template renders an assistant's tool call: keys sorted case-insensitively, strings in <|"|>
// without escaping, numbers as Python prints them, null as None. A string that holds <|"|> cannot
// be read back.
Result<std::string> FormatGemma4ToolCall(std::string_view name, std::string_view arguments_json);

// OpenAI's tool_choice as JSON text: "auto", "none", "required" or
// {"type":"function","function":{"name":"NAME"}}; empty text is "auto".
Result<ToolChoice> ParseToolChoice(std::string_view json);

class Engine;

// Enforces a tool_choice the prompt cannot express ("required", a named function) while sampling:
// the answer opens with <|tool_call>, after a thought channel if the model thinks first, and for a
// named function the call's text starts "call:NAME{". What follows is the model's. "none": never
// <|tool_call> (the history may show calls). Null for "auto", and for "none" on a vocabulary
// without tool calls; an error for the others there.
Result<std::unique_ptr<TokenConstraint>> ToolChoiceConstraint(const ToolChoice& choice, const Engine& engine);

// For chat_format.cc: the rendered prompt as segments, special tokens (<|"|>, <|tool>, ...) as markup
// and the text between them as content, so each run tokenizes as it does in the whole prompt.
class SegmentWriter {
 public:
  void Markup(const std::string& text) { Add(text, false); }
  void Content(const std::string& text) { Add(text, true); }
  // A media part: its own segment, never merged (ChatSegment::media).
  void Media(const std::string& marker) { segments_.push_back({marker, false, media_count_++}); }
  std::vector<ChatSegment> Take() { return std::move(segments_); }

 private:
  void Add(const std::string& text, bool content);
  std::vector<ChatSegment> segments_;
  int media_count_ = 0;
};

// Each declaration of `tools_json` (OpenAI's tools array) as <|tool>declaration:...<tool|>.
// `interleaved`: the -interleaved template's format_parameters.
Status WriteGemma4ToolDeclarations(std::string_view tools_json, bool interleaved, SegmentWriter* out);
// <|tool_call>call:NAME{...}<tool_call|>.
Status WriteGemma4ToolCall(const ToolCall& call, SegmentWriter* out);
// <|tool_response>response:NAME{value:<|"|>CONTENT<|"|>}<tool_response|> (the content untrimmed).
void WriteGemma4ToolResponse(const std::string& name, const std::string& content, SegmentWriter* out);
// The names declared in `tools_json` (empty text or null: none), for checking a tool_choice.
Result<std::vector<std::string>> DeclaredToolNames(std::string_view tools_json);

}  // namespace gemlet::runtime

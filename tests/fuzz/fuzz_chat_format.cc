// libFuzzer target for the chat templates with hostile messages: the input's lines become messages
// (a role byte, then content, tool-call arguments and a tool list), rendered in every style. Any
// conversation renders or is refused with a message; what a message typed stays in content
// segments (never markup).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gemlet::runtime;
  using gemlet::Message;
  static const char* kRoles[] = {"system", "developer", "user", "assistant", "model", "tool", "wizard", ""};
  std::vector<Message> messages;
  ChatRenderOptions options;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty() && messages.size() < 64) {
    const size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (line.empty()) continue;
    const unsigned char kind = static_cast<unsigned char>(line[0]);
    line.remove_prefix(1);
    if (kind == 'T') {  // the tools array
      options.tools = std::string(line);
      continue;
    }
    Message m{kRoles[kind % 8], std::string(line)};
    if (kind & 0x40) m.tool_calls.push_back({"f", std::string(line), "call_0"});
    if (kind & 0x20) m.tool_call_id = "call_0";
    if (kind & 0x10) m.reasoning = std::string(line.substr(0, line.size() / 2));
    messages.push_back(std::move(m));
  }
  options.thinking = size % 2 == 1;
  for (ChatStyle style : {ChatStyle::kGemma, ChatStyle::kGemma4, ChatStyle::kGemma4Interleaved}) {
    auto segments = RenderChatSegments(style, messages, options);
    if (!segments.ok()) {
      if (segments.message().empty()) std::abort();
      continue;
    }
    for (const ChatSegment& s : *segments) {
      // Markup segments come from the template (printable ASCII and newlines), never from what a
      // message typed (where the fuzzer puts NULs, control bytes and UTF-8).
      if (s.is_content) continue;
      for (char c : s.text) {
        if (c != '\n' && (c < 0x20 || c > 0x7e)) std::abort();
      }
    }
  }
  return 0;
}

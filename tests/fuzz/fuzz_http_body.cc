// libFuzzer target for what gemlet serve does with a request before it reaches the model: the
// head checks (Host, Origin, preflight headers, log lines) on the input's first line, and the body
// (the rest) through the one JSON entry and every dialect's parser, then the response_format
// grammar and the chat rendering of what parsed. Any input must be refused with a message or
// accepted; no crash, no hang. (cpp-httplib's own request-line parser is Debian's library.)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sampling/json_schema.h"
#include "server/http_guard.h"
#include "server/protocol.h"

namespace {
void Require(bool ok) {
  if (!ok) std::abort();
}

void CheckRequest(const gemlet::server::CompletionRequest& r) {
  if (!r.options.response_format.empty()) {
    auto g = gemlet::GrammarForResponseFormat(r.options.response_format);
    Require(g.ok() || !g.message().empty());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gemlet::server;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view head = input.substr(0, newline == std::string_view::npos ? input.size() : newline);
  const std::string_view body = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);

  // The head: one line used as Host, Origin and the requested headers.
  (void)HostAllowed(head, "127.0.0.1", {"*.lan"}, "laptop");
  (void)CheckOrigin(head, "127.0.0.1:8080", {"http://localhost:*", "app://*"});
  Require(WildcardMatch("*", head));
  const std::string headers = AllowedRequestHeaders(head);
  Require(headers.find('\r') == std::string::npos && headers.find('\n') == std::string::npos);
  const std::string logged = LogSafe(head);
  for (char c : logged) Require(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);

  nlohmann::json j;
  if (auto e = ParseBody(body, 1 << 20, &j)) {
    Require(!e->message.empty() && e->status >= 400);
    (void)ErrorJson(*e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
  }
  Limits limits;
  const auto parse = [&](auto&& parser) {
    CompletionRequest r;
    if (auto e = parser(r)) {
      Require(!e->message.empty());
      (void)ErrorJson(*e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      CheckRequest(r);
    }
  };
  parse([&](CompletionRequest& r) { return ParseChatRequest(j, limits, &r); });
  parse([&](CompletionRequest& r) { return ParseCompletionRequest(j, limits, &r); });
  parse([&](CompletionRequest& r) { return ParseOllamaRequest(j, true, limits, &r); });
  parse([&](CompletionRequest& r) { return ParseOllamaRequest(j, false, limits, &r); });
  parse([&](CompletionRequest& r) {
    gemlet::TaskOptions options;
    std::string task_input;
    return ParseTaskRequest(j, "translate", limits, &options, &task_input, &r);
  });
  return 0;
}

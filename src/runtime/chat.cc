// ChatSession: render, diff against the cache, evaluate the difference, generate.
#include "runtime/chat.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace gemlet::runtime {

ChatSession::ChatSession(std::unique_ptr<Session> session, const SamplingParams& sampling)
    : session_(std::move(session)), sampler_(sampling, session_->engine().config().n_vocab) {}

void ChatSession::SetSystem(const std::string& system) { system_ = system; }

void ChatSession::Reset() {
  messages_.clear();
  session_->Reset();
  sampler_.Reset();
}

Result<std::vector<int32_t>> ChatSession::RenderTokens(bool add_generation_prompt) const {
  const Engine& engine = session_->engine();
  const Tokenizer& tok = engine.tokenizer();
  std::vector<ChatMessage> all;
  if (!system_.empty()) all.push_back({"system", system_});
  all.insert(all.end(), messages_.begin(), messages_.end());
  ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.enable_thinking = thinking_;
  o.add_bos = false;
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segments, RenderChatSegments(engine.chat_style(), all, o));
  std::vector<int32_t> tokens;
  if (tok.bos_id() >= 0) tokens.push_back(tok.bos_id());
  for (const ChatSegment& s : segments) {
    EncodeOptions e;
    e.parse_special = !s.is_content;  // message text cannot smuggle in turn markers
    tok.Encode(s.text, e, &tokens);
  }
  return tokens;
}

Result<GenerateResult> ChatSession::Send(const std::string& user_text, const GenerateOptions& options,
                                         const TextSink& sink) {
  messages_.push_back({"user", user_text});
  auto rendered = RenderTokens(/*add_generation_prompt=*/true);
  if (!rendered.ok()) {
    messages_.pop_back();
    return rendered.status();
  }
  const std::vector<int32_t>& want = rendered.value();
  if (static_cast<int>(want.size()) >= session_->n_ctx()) {
    messages_.pop_back();
    return Status::Error("the conversation (" + std::to_string(want.size()) + " tokens) no longer fits in the context of " +
                         std::to_string(session_->n_ctx()) + " tokens; use /reset or a larger --ctx");
  }
  // Reuse the longest prefix the cache already holds; always evaluate at least one token so the
  // last position's logits exist.
  const std::vector<int32_t>& held = session_->history();
  size_t common = 0;
  while (common < held.size() && common < want.size() && held[common] == want[common]) ++common;
  if (common == want.size()) --common;
  const int64_t before = session_->tokens_evaluated();
  Status s = session_->Truncate(static_cast<int>(common));
  if (!s.ok()) {
    messages_.pop_back();
    return s;
  }
  const std::vector<int32_t> delta(want.begin() + static_cast<std::ptrdiff_t>(common), want.end());
  last_turn_.tokens_reused = static_cast<int>(common);
  auto result = Generate(*session_, sampler_, delta, options, sink);
  if (!result.ok()) {
    messages_.pop_back();
    return result.status();
  }
  // Prompt-side work of this turn: cache refill after a rollback plus the new tokens (the generated
  // tokens that were fed back are not counted).
  const GenerateResult& r = result.value();
  last_turn_.tokens_evaluated = static_cast<int>(session_->tokens_evaluated() - before) -
                                static_cast<int>(r.tokens.size() - r.pending.size());
  if (r.stop == StopReason::kCancelled && r.tokens.empty()) {
    messages_.pop_back();  // cancelled before the answer began: as if the message was not sent
    return result;
  }
  messages_.push_back({"assistant", result.value().text});
  return result;
}

Status ChatSession::Save(const std::string& path) const {
  nlohmann::json j;
  j["system"] = system_;
  j["thinking"] = thinking_;
  j["messages"] = nlohmann::json::array();
  for (const ChatMessage& m : messages_) j["messages"].push_back({{"role", m.role}, {"content", m.content}});
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return Status::Error("cannot write '" + path + "'");
    out << j.dump(1) << "\n";
    if (!out) return Status::Error("cannot write '" + path + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::Error("cannot write '" + path + "'");
  return Status::Ok();
}

Status ChatSession::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot open '" + path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return Status::Error("'" + path + "' is not valid JSON: " + e.what());
  }
  std::vector<ChatMessage> messages;
  std::string system;
  bool thinking = thinking_;
  try {
    if (j.contains("system")) system = j.at("system").get<std::string>();
    if (j.contains("thinking")) thinking = j.at("thinking").get<bool>();
    for (const auto& m : j.at("messages")) messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    return Status::Error("'" + path + "' is not a saved gemlet conversation: " + e.what());
  }
  for (const ChatMessage& m : messages) {
    if (m.role != "user" && m.role != "assistant") return Status::Error("'" + path + "': unknown role '" + m.role + "'");
  }
  system_ = system;
  thinking_ = thinking;
  messages_ = std::move(messages);
  return Status::Ok();  // the cache is reconciled by prefix on the next Send
}

}  // namespace gemlet::runtime

// ChatSession: render, diff against the cache, evaluate the difference, generate.
#include "runtime/chat.h"

#include <algorithm>
#include <fstream>
#include <sstream>

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
  return Render(messages_, add_generation_prompt);
}

Result<std::vector<int32_t>> ChatSession::Render(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const {
  const Engine& engine = session_->engine();
  const Tokenizer& tok = engine.tokenizer();
  std::vector<ChatMessage> all;
  if (!system_.empty()) all.push_back({"system", system_});
  all.insert(all.end(), messages.begin(), messages.end());
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

Status ChatSession::MakeRoom(int room) {
  const int n_ctx = session_->n_ctx();
  ASSIGN_OR_RETURN(std::vector<int32_t> want, Render(messages_, /*add_generation_prompt=*/true));
  if (static_cast<int>(want.size()) + room <= n_ctx) return Status::Ok();
  // The oldest pairs go, as few as will do (the new user message is the last one).
  size_t drop = 0;
  std::vector<ChatMessage> kept = messages_;
  while (static_cast<int>(want.size()) + room > n_ctx && kept.size() >= 3) {
    kept.erase(kept.begin(), kept.begin() + 2);
    drop += 2;
    ASSIGN_OR_RETURN(want, Render(kept, /*add_generation_prompt=*/true));
  }
  if (drop == 0) return Status::Ok();  // nothing to drop: Send reports what does not fit
  // Where the dropped messages lie in the cache: the renders with and without them (no generation
  // prompt) share a prefix (BOS, the system message) and, shifted by the dropped tokens, a suffix.
  const std::vector<ChatMessage> old_messages(messages_.begin(), messages_.end() - 1);
  const std::vector<ChatMessage> kept_old(kept.begin(), kept.end() - 1);
  ASSIGN_OR_RETURN(std::vector<int32_t> before, Render(old_messages, false));
  ASSIGN_OR_RETURN(std::vector<int32_t> after, Render(kept_old, false));
  size_t begin = 0;
  while (begin < after.size() && before[begin] == after[begin]) ++begin;
  const size_t count = before.size() - after.size();
  const std::vector<int32_t>& held = session_->history();
  // The cache must hold what the render says up to the end of the dropped tokens, and the kept
  // render must be the old one with those tokens cut out; otherwise Send's prefix diff re-evaluates.
  bool aligned = begin + count <= held.size() &&
                 std::equal(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(begin + count), held.begin()) &&
                 std::equal(after.begin() + static_cast<std::ptrdiff_t>(begin), after.end(),
                            before.begin() + static_cast<std::ptrdiff_t>(begin + count));
  messages_.erase(messages_.begin(), messages_.begin() + static_cast<std::ptrdiff_t>(drop));
  last_turn_.messages_dropped = static_cast<int>(drop);
  last_turn_.tokens_dropped = static_cast<int>(count);
  if (!aligned) return Status::Ok();
  ASSIGN_OR_RETURN(last_turn_.tokens_reevaluated, session_->Discard(static_cast<int>(begin), static_cast<int>(count)));
  return Status::Ok();
}

Result<GenerateResult> ChatSession::Send(const std::string& user_text, const GenerateOptions& options,
                                         const TextSink& sink) {
  last_turn_ = ChatTurnStats{};
  messages_.push_back({"user", user_text});
  // Room for the answer: what the caller allows, at most half the context (a quarter when unbounded).
  const int n_ctx = session_->n_ctx();
  const int room = options.max_tokens > 0 ? std::min(options.max_tokens, n_ctx / 2) : n_ctx / 4;
  const std::vector<ChatMessage> undo = messages_;
  if (Status s = MakeRoom(room); !s.ok()) {
    messages_ = undo;
    messages_.pop_back();
    return s;
  }
  auto rendered = RenderTokens(/*add_generation_prompt=*/true);
  if (!rendered.ok()) {
    messages_.pop_back();
    return rendered.status();
  }
  const std::vector<int32_t>& want = rendered.value();
  if (static_cast<int>(want.size()) >= session_->n_ctx()) {
    messages_.pop_back();
    return Status::Error("the message (" + std::to_string(want.size()) + " tokens with the system message) does not fit "
                         "in the context of " + std::to_string(session_->n_ctx()) + " tokens; shorten it or use a "
                         "larger --ctx");
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

std::string ChatSession::MessagesJson() const {
  nlohmann::json j;
  j["system"] = system_;
  j["thinking"] = thinking_;
  j["messages"] = nlohmann::json::array();
  for (const ChatMessage& m : messages_) j["messages"].push_back({{"role", m.role}, {"content", m.content}});
  return j.dump(1);
}

Status ChatSession::SetFromJson(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(what + " is not valid JSON: " + e.what());
  }
  std::vector<ChatMessage> messages;
  std::string system;
  bool thinking = thinking_;
  try {
    if (j.contains("system")) system = j.at("system").get<std::string>();
    if (j.contains("thinking")) thinking = j.at("thinking").get<bool>();
    for (const auto& m : j.at("messages")) messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(what + " is not a saved gemlet conversation: " + e.what());
  }
  for (const ChatMessage& m : messages) {
    if (m.role != "user" && m.role != "assistant") return Status::Error(what + ": unknown role '" + m.role + "'");
  }
  system_ = system;
  thinking_ = thinking;
  messages_ = std::move(messages);
  return Status::Ok();
}

Status ChatSession::Save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return Status::Error("cannot write '" + path + "'");
    out << MessagesJson() << "\n";
    if (!out) return Status::Error("cannot write '" + path + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::Error("cannot write '" + path + "'");
  return Status::Ok();
}

Status ChatSession::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return SetFromJson(text.str(), "'" + path + "'");  // the cache is reconciled by prefix on the next Send
}

Status ChatSession::SetMessages(std::vector<ChatMessage> messages) {
  for (const ChatMessage& m : messages) {
    if (m.role != "user" && m.role != "assistant") return Status::Error("unknown role '" + m.role + "'");
  }
  messages_ = std::move(messages);  // the cache is reconciled by prefix on the next Send, as after Load
  return Status::Ok();
}

Status ChatSession::SaveState(const std::string& path) const { return session_->SaveState(path, MessagesJson()); }

Status ChatSession::LoadState(const std::string& path) {
  // The messages are checked before the cache is replaced: a file refused changes nothing.
  std::unique_ptr<Session>& s = session_;
  const std::string before = MessagesJson();
  ASSIGN_OR_RETURN(std::string extra, s->LoadState(path));
  if (Status st = SetFromJson(extra, "'" + path + "'"); !st.ok()) {
    s->Reset();
    (void)SetFromJson(before, "the conversation");
    return st;
  }
  sampler_.Reset();
  return Status::Ok();
}

}  // namespace gemlet::runtime

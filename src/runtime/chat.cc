// ChatSession: render, diff against the cache, evaluate the difference, generate.
#include "runtime/chat.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_input.h"
#include "runtime/media_prompt.h"
#include "runtime/prefix_reuse.h"

namespace gemlet::runtime {

ChatSession::ChatSession(std::unique_ptr<Session> session, const SamplingOptions& sampling)
    : session_(std::move(session)), sampler_(sampling, session_->engine().config().n_vocab) {}

void ChatSession::SetSystem(const std::string& system) { system_ = system; }

void ChatSession::Reset() {
  messages_.clear();
  unsummarized_.clear();
  pending_preface_.clear();
  session_->Reset();
  sampler_.Reset();
}

std::string ChatSession::summary() const {
  if (!pending_preface_.empty()) return pending_preface_;
  for (auto m = messages_.rbegin(); m != messages_.rend(); ++m) {
    if (!m->preface.empty()) return m->preface;
  }
  return std::string();
}

Result<std::vector<int32_t>> ChatSession::RenderTokens(bool add_generation_prompt) const {
  ASSIGN_OR_RETURN(Prompt prompt, Render(messages_, add_generation_prompt));
  return std::move(prompt.tokens);
}

// BOS, then the messages in the model's chat format, tokenized with special-token parsing off for
// message text (it cannot smuggle in turn markers). No messages and no generation prompt: BOS alone.
Result<std::vector<int32_t>> EncodeChat(const Engine& engine, const std::vector<Message>& messages,
                                        const ChatRenderOptions& options) {
  const Tokenizer& tok = engine.tokenizer();
  std::vector<int32_t> tokens;
  if (tok.bos_id() >= 0) tokens.push_back(tok.bos_id());
  if (messages.empty() && !options.add_generation_prompt) return tokens;
  ChatRenderOptions o = options;
  o.add_bos = false;  // the tokenizer's BOS is the token above
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segments, RenderChatSegments(engine.chat_style(), messages, o));
  for (const ChatSegment& s : segments) {
    EncodeOptions e;
    e.parse_special = !s.is_content;
    tok.Encode(s.text, e, &tokens);
  }
  return tokens;
}

Result<Prompt> ChatSession::Render(const std::vector<ChatTurn>& messages, bool add_generation_prompt) const {
  std::vector<Message> all;
  if (!system_.empty()) all.push_back({"system", system_});
  for (const ChatTurn& m : messages) {
    if (m.parts.empty()) {
      all.push_back({m.role, m.preface.empty() ? m.content : m.preface + "\n\n" + m.content});
      continue;
    }
    Message with_parts{m.role, ""};
    with_parts.parts = m.parts;
    if (!m.preface.empty()) {
      // The preface joins the first text part as it joins plain content (trimmed as one).
      if (!with_parts.parts[0].media) with_parts.parts[0].text = m.preface + "\n\n" + with_parts.parts[0].text;
      else with_parts.parts.insert(with_parts.parts.begin(), ContentPart{m.preface, nullptr});
    }
    all.push_back(std::move(with_parts));
  }
  ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.thinking = thinking_;
  // No system message and every earlier turn dropped: what comes before the new turn is BOS alone.
  return EncodeChatPrompt(session_->engine(), all, o);
}

Status ChatSession::MakeRoom(int room) {
  ASSIGN_OR_RETURN(DroppedTurns d, DropOldest(session_->n_ctx() - room, /*keep=*/1, /*uncached=*/1));
  last_turn_.dropped_messages = d.messages;
  last_turn_.dropped_tokens = d.tokens;
  last_turn_.reevaluated_tokens = d.reevaluated;
  return Status::Ok();
}

Result<DroppedTurns> ChatSession::ShedOldTurns(int limit) {
  ASSIGN_OR_RETURN(DroppedTurns d, DropOldest(limit, /*keep=*/2, /*uncached=*/0));
  if (d.messages > 0 && !d.shifted) {
    // The cache could not be shifted: keep only what precedes the dropped turns, so their pages go
    // back now (the next turn evaluates the kept ones again).
    RETURN_IF_ERROR(session_->Truncate(std::min(d.begin, session_->n_past())));
  }
  return d;
}

Result<DroppedTurns> ChatSession::DropOldest(int limit, size_t keep, size_t uncached) {
  ASSIGN_OR_RETURN(std::vector<int32_t> want, RenderTokens(/*add_generation_prompt=*/true));
  DroppedTurns d;
  if (static_cast<int>(want.size()) <= limit) return d;
  // The oldest pairs go, as few as will do.
  size_t drop = 0;
  std::vector<ChatTurn> kept = messages_;
  while (static_cast<int>(want.size()) > limit && kept.size() >= keep + 2) {
    kept.erase(kept.begin(), kept.begin() + 2);
    drop += 2;
    ASSIGN_OR_RETURN(Prompt kept_prompt, Render(kept, /*add_generation_prompt=*/true));
    want = std::move(kept_prompt.tokens);
  }
  if (drop == 0) return d;  // nothing to drop: Send reports what does not fit
  // Where the dropped messages lie in the cache: the renders with and without them (no generation
  // prompt, none of the messages the cache does not hold yet) share a prefix (BOS, the system
  // message) and, shifted by the dropped tokens, a suffix.
  const auto cached = [uncached](const std::vector<ChatTurn>& m) {
    return std::vector<ChatTurn>(m.begin(), m.end() - static_cast<std::ptrdiff_t>(uncached));
  };
  const std::vector<ChatTurn> old_messages = cached(messages_);
  const std::vector<ChatTurn> kept_old = cached(kept);
  ASSIGN_OR_RETURN(Prompt before_prompt, Render(old_messages, false));
  ASSIGN_OR_RETURN(Prompt after_prompt, Render(kept_old, false));
  const std::vector<int32_t>& before = before_prompt.tokens;
  const std::vector<int32_t>& after = after_prompt.tokens;
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
  if (summaries_.enabled) {
    unsummarized_.insert(unsummarized_.end(), messages_.begin(), messages_.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  messages_.erase(messages_.begin(), messages_.begin() + static_cast<std::ptrdiff_t>(drop));
  d.messages = static_cast<int>(drop);
  d.tokens = static_cast<int>(count);
  d.begin = static_cast<int>(begin);
  if (!aligned) return d;
  ASSIGN_OR_RETURN(d.reevaluated, session_->Discard(static_cast<int>(begin), static_cast<int>(count)));
  d.shifted = true;
  return d;
}

Result<Generation> ChatSession::Send(const std::string& user_text, const GenerateOptions& options,
                                     const GenerationControls& controls, const StreamCallback& on_text) {
  return SendTurn({{"user", user_text}, ""}, options, controls, on_text);
}

Result<Generation> ChatSession::Send(std::vector<ContentPart> parts, const GenerateOptions& options,
                                     const GenerationControls& controls, const StreamCallback& on_text) {
  ChatTurn turn{{"user", ""}, ""};
  turn.parts = std::move(parts);
  return SendTurn(std::move(turn), options, controls, on_text);
}

Result<Generation> ChatSession::SendTurn(ChatTurn turn, const GenerateOptions& options,
                                         const GenerationControls& controls, const StreamCallback& on_text) {
  last_turn_ = GenerationStats{};
  last_turn_evaluated_ = 0;
  turn.preface = pending_preface_;
  messages_.push_back(std::move(turn));
  // Room for the answer: what the caller allows, at most half the context (a quarter when unbounded),
  // and for a summary of what is dropped when summaries are on (with its preface's words).
  const int n_ctx = session_->n_ctx();
  int room = options.max_tokens > 0 ? std::min(options.max_tokens, n_ctx / 2) : n_ctx / 4;
  if (summaries_.enabled) room += summaries_.max_tokens + 32;
  const std::vector<ChatTurn> undo = messages_;
  if (Status s = MakeRoom(room); !s.ok()) {
    messages_ = undo;
    messages_.pop_back();
    return s;
  }
  if (!summaries_.enabled) unsummarized_.clear();
  if (!unsummarized_.empty()) {
    if (Status s = Summarize(controls); !s.ok()) {
      messages_.pop_back();  // the dropped turns wait in unsummarized_ for the next turn
      return s;
    }
    messages_.back().preface = pending_preface_;
  }
  auto rendered = Render(messages_, /*add_generation_prompt=*/true);
  if (!rendered.ok()) {
    messages_.pop_back();
    return rendered.status();
  }
  const std::vector<int32_t>& want = rendered.value().tokens;
  const std::vector<MediaSpan>& media = rendered.value().media;
  if (static_cast<int>(want.size()) >= session_->n_ctx()) {
    messages_.pop_back();
    return Status::Error("the message (" + std::to_string(want.size()) + " tokens with the system message) does not fit "
                         "in the context of " + std::to_string(session_->n_ctx()) + " tokens; shorten it or use a "
                         "larger --ctx");
  }
  // Reuse the longest prefix the cache already holds.
  const int64_t before = session_->tokens_evaluated();
  size_t replayed = 0;
  Result<size_t> kept = KeepCachedPrefix(*session_, want, media, &replayed);
  if (!kept.ok()) {
    messages_.pop_back();
    return kept.status();
  }
  const size_t common = kept.value();
  const std::vector<int32_t> delta(want.begin() + static_cast<std::ptrdiff_t>(common), want.end());
  std::vector<MediaSpan> delta_media;  // the media not in the cache, from the delta's first token
  for (const MediaSpan& span : media) {
    if (static_cast<size_t>(span.position) >= common) delta_media.push_back({span.position - static_cast<int>(common), span.media});
  }
  auto result = Generate(*session_, sampler_, delta, options, controls, on_text, delta_media);
  if (!result.ok()) {
    messages_.pop_back();
    return result.status();
  }
  // The turn's stats: the reply's, with the reused prefix and what making room did.
  GenerationStats& st = result.value().reply.stats;
  st.prompt_tokens += static_cast<int>(common);
  st.cached_tokens = static_cast<int>(common - replayed);
  st.dropped_messages = last_turn_.dropped_messages;
  st.dropped_tokens = last_turn_.dropped_tokens;
  st.reevaluated_tokens = last_turn_.reevaluated_tokens;
  st.summarized_messages = last_turn_.summarized_messages;
  st.summary_tokens = last_turn_.summary_tokens;
  last_turn_ = st;
  // Prompt-side work of this turn: cache refill after a rollback plus the new tokens (the generated
  // tokens that were fed back are not counted).
  const Generation& r = result.value();
  last_turn_evaluated_ = static_cast<int>(session_->tokens_evaluated() - before) -
                         static_cast<int>(r.reply.tokens.size() - r.pending.size());
  if (st.stop == StopReason::kCancelled && r.reply.tokens.empty()) {
    messages_.pop_back();  // cancelled before the answer began: as if the message was not sent
    return result;
  }
  pending_preface_.clear();  // carried by this turn now
  messages_.push_back({{"assistant", r.reply.text}, ""});
  return result;
}

namespace {

// A message's words: its content, or its text parts one after another.
std::string TextOf(const Message& m) {
  if (m.parts.empty()) return m.content;
  std::string text;
  for (const ContentPart& part : m.parts) {
    if (!part.media) text += part.text;
  }
  return text;
}

// Chinese when CJK characters outnumber Latin letters (a Chinese message quoting SQL stays Chinese).
bool MostlyChinese(const std::vector<ChatTurn>& turns) {
  size_t cjk = 0, latin = 0;
  for (const ChatTurn& t : turns) {
    const std::string words = TextOf(t);
    for (const std::string* text : {&t.preface, &words}) {
      for (size_t i = 0; i < text->size(); ++i) {
        const unsigned char c = static_cast<unsigned char>((*text)[i]);
        if (std::isalpha(c)) ++latin;
        // Lead bytes of U+3400..U+9FFF (CJK ideographs): E3 followed by 90-BF, then E4-E9.
        if (c >= 0xE4 && c <= 0xE9) ++cjk;
        else if (c == 0xE3 && i + 1 < text->size() && static_cast<unsigned char>((*text)[i + 1]) >= 0x90) ++cjk;
      }
    }
  }
  return cjk > latin;
}

}  // namespace

std::string ChatSession::SummaryPrompt(const std::vector<ChatTurn>& dropped) {
  const bool zh = MostlyChinese(dropped);
  std::string prompt = zh ? "用不超过三句简短的话总结下面这段对话，保留人名、数字、决定和尚未解决的问题。只写摘要。\n\n"
                          : "Summarize the conversation below in at most three short sentences. Keep names, numbers, "
                            "decisions and open questions. Write only the summary.\n\n";
  for (const ChatTurn& t : dropped) {
    if (!t.preface.empty()) prompt += t.preface + "\n";
    const std::string words = TextOf(t);
    if (words.empty()) continue;
    if (t.role == "user") prompt += zh ? "用户：" : "User: ";
    else prompt += zh ? "助手：" : "Assistant: ";
    prompt += StripThinking(words) + "\n";
  }
  return prompt;
}

std::string ChatSession::SummaryPreface(const std::string& summary, const std::vector<ChatTurn>& dropped) {
  return (MostlyChinese(dropped) ? "（此前对话的摘要，原文已不再显示：" + summary + "）"
                                 : "(A summary of our earlier conversation, which is no longer shown: " + summary + ")");
}

Status ChatSession::Summarize(const GenerationControls& controls) {
  // A summary still waiting for its turn (that turn failed) is covered by the new one.
  if (!pending_preface_.empty()) {
    unsummarized_.insert(unsummarized_.begin(), ChatTurn{{"user", ""}, pending_preface_});
    pending_preface_.clear();
  }
  const Engine& engine = session_->engine();
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, EncodeChat(engine, {{"user", SummaryPrompt(unsummarized_)}}, {}));
  // A request longer than the conversation's context keeps its end: the newest of what was dropped.
  const int limit = session_->n_ctx() - summaries_.max_tokens - 1;
  if (limit < 16) return Status::Error("the context is too small for a summary of the dropped turns");
  if (static_cast<int>(tokens.size()) > limit) {
    const size_t head = tokens[0] == engine.tokenizer().bos_id() ? 1 : 0;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(head),
                 tokens.begin() + static_cast<std::ptrdiff_t>(head + tokens.size() - static_cast<size_t>(limit)));
  }
  SessionOptions so = session_->options();  // its KV type
  so.n_ctx = static_cast<int>(tokens.size()) + summaries_.max_tokens + 1;
  so.n_threads = session_->n_threads();
  so.max_batch = std::min(512, so.n_ctx);
  so.rollback_tokens = 0;
  ASSIGN_OR_RETURN(std::unique_ptr<Session> writer,
                   Session::Create(session_->shared_engine(), so, &session_->kernels(), session_->kernel_options()));
  writer->SetStopFlag(controls.cancel);
  SamplingOptions greedy;
  greedy.temperature = 0;  // a summary is reproducible: the same dropped turns, the same words
  Sampler sampler(greedy, engine.config().n_vocab);
  GenerateOptions go;
  go.max_tokens = summaries_.max_tokens;
  go.sampling = greedy;
  GenerationControls gc;
  gc.cancel = controls.cancel;
  ASSIGN_OR_RETURN(Generation r, Generate(*writer, sampler, tokens, go, gc, {}));
  if (r.reply.stats.stop == StopReason::kCancelled) return Status::Error(StatusCode::kCancelled, "cancelled");
  const std::string summary = TrimUnicodeWhitespace(StripThinking(r.reply.text));
  last_turn_.summarized_messages = static_cast<int>(unsummarized_.size());
  last_turn_.summary_tokens = static_cast<int>(r.reply.tokens.size());
  pending_preface_ = summary.empty() ? std::string() : SummaryPreface(summary, unsummarized_);
  unsummarized_.clear();
  return Status::Ok();
}

std::string ChatSession::MessagesJson() const {
  nlohmann::json j;
  j["system"] = system_;
  j["thinking"] = thinking_;
  j["messages"] = nlohmann::json::array();
  for (const ChatTurn& m : messages_) {
    nlohmann::json jm = {{"role", m.role}, {"content", m.content}};
    if (!m.parts.empty()) {
      // Media by its content hash: a saved state (SaveState) holds the embeddings themselves, and
      // SetFromJson finds them there again.
      nlohmann::json parts = nlohmann::json::array();
      for (const ContentPart& part : m.parts) {
        if (!part.media) {
          parts.push_back({{"type", "text"}, {"text", part.text}});
        } else {
          parts.push_back({{"type", part.media->kind == MediaKind::kAudio ? "audio" : "image"},
                           {"content_hash", part.media->content_hash}});
        }
      }
      jm["parts"] = std::move(parts);
    }
    if (!m.preface.empty()) jm["preface"] = m.preface;
    j["messages"].push_back(std::move(jm));
  }
  if (!pending_preface_.empty()) j["pending_preface"] = pending_preface_;
  return j.dump(1);
}

Status ChatSession::SetFromJson(const std::string& text, const std::string& what) {
  ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, what, {.max_bytes = kJsonLargeBytes}));
  std::vector<ChatTurn> messages;
  std::string system;
  std::string pending;
  bool thinking = thinking_;
  try {
    if (j.contains("system")) system = j.at("system").get<std::string>();
    if (j.contains("thinking")) thinking = j.at("thinking").get<bool>();
    if (j.contains("pending_preface")) pending = j.at("pending_preface").get<std::string>();
    for (const auto& m : j.at("messages")) {
      messages.push_back({{m.at("role").get<std::string>(), m.at("content").get<std::string>()},
                          m.contains("preface") ? m.at("preface").get<std::string>() : std::string()});
      if (!m.contains("parts")) continue;
      for (const auto& part : m.at("parts")) {
        const std::string type = part.at("type").get<std::string>();
        if (type == "text") {
          messages.back().parts.push_back({part.at("text").get<std::string>(), nullptr});
          continue;
        }
        // The media the cache holds under that hash (a state file restores both); without it the
        // conversation goes on with a note where the image or clip was.
        const std::string hash = part.at("content_hash").get<std::string>();
        std::shared_ptr<const EncodedMedia> found;
        for (const MediaSpan& span : session_->media()) {
          if (span.media->content_hash == hash) found = span.media;
        }
        messages.back().parts.push_back(found ? ContentPart{"", found} : ContentPart{"[" + type + " not kept]", nullptr});
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(what + " is not a saved gemlet conversation: " + e.what());
  }
  for (const ChatTurn& m : messages) {
    if (m.role != "user" && m.role != "assistant") return Status::Error(what + ": unknown role '" + m.role + "'");
  }
  system_ = system;
  thinking_ = thinking;
  messages_ = std::move(messages);
  pending_preface_ = std::move(pending);
  unsummarized_.clear();
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

Status ChatSession::SetMessages(std::vector<Message> messages) {
  for (const Message& m : messages) {
    if (m.role != "user" && m.role != "assistant") return Status::Error("unknown role '" + m.role + "'");
  }
  messages_.clear();  // the cache is reconciled by prefix on the next Send, as after Load
  for (Message& m : messages) messages_.push_back({std::move(m), ""});
  pending_preface_.clear();
  unsummarized_.clear();
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

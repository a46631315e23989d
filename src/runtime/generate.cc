// The decode loop. Text is streamed through a StreamDecoder (whole UTF-8 only) and held back while
// it could still become a stop string.
#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/drafting.h"
#include "runtime/tool_calls.h"

namespace gemlet::runtime {

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

// Splits streamed text by kind (answer, thought, tool call), and holds back any tail that may start
// a stop string; emits the rest to the sink.
class Generator::Router {
 public:
  Router(const std::vector<std::string>& stops, const StreamCallback& on_text, Reply* reply)
      : stops_(stops), on_text_(on_text), reply_(reply) {}

  // Returns false when the sink asked to stop. Sets *hit when a stop string completed.
  bool Add(const std::string& text, ChunkKind kind, bool* hit) {
    if (kind != kind_ && !held_.empty()) {
      // A change of kind flushes what was held (stop strings apply within one kind).
      Record(held_);
      if (!Emit(held_, kind_)) return false;
      held_.clear();
    }
    kind_ = kind;
    held_ += text;
    for (const std::string& stop : stops_) {
      const size_t at = held_.find(stop);
      if (at != std::string::npos) {
        *hit = true;
        held_.resize(at);
        Record(held_);
        const bool ok = held_.empty() || Emit(held_, kind_);
        held_.clear();
        return ok;
      }
    }
    // Keep the longest suffix that is a prefix of some stop string.
    size_t keep = 0;
    for (const std::string& stop : stops_) {
      for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
        if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
    const std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    Record(out);
    return out.empty() || Emit(out, kind_);
  }

  // A tool call's closing marker: the next tool-call text starts a new call.
  void EndToolCall() { tool_call_open_ = false; }

  bool Finish() {
    Record(held_);
    const bool ok = held_.empty() || Emit(held_, kind_);
    held_.clear();
    return ok;
  }

  // The calls' text as the model wrote it ("call:NAME{ARGS}"), parsed into the reply's calls.
  void ParseToolCalls() {
    for (const std::string& call : tool_call_text_) reply_->tool_calls.push_back(ToolCallFromModelText(call));
  }

 private:
  bool Emit(const std::string& text, ChunkKind kind) { return !on_text_ || on_text_(kind, text); }
  void Record(const std::string& text) {
    if (text.empty()) return;  // a marker alone: a tool call begins with its first text
    switch (kind_) {
      case ChunkKind::kText: reply_->text += text; break;
      case ChunkKind::kThinking: reply_->thinking += text; break;
      case ChunkKind::kToolCall:
        if (!tool_call_open_) tool_call_text_.emplace_back();
        tool_call_open_ = true;
        tool_call_text_.back() += text;
        break;
    }
  }

  const std::vector<std::string>& stops_;
  const StreamCallback& on_text_;
  Reply* reply_;
  std::vector<std::string> tool_call_text_;
  std::string held_;
  ChunkKind kind_ = ChunkKind::kText;
  bool tool_call_open_ = false;
};

Generator::Generator(Session& session, Sampler& sampler, const GenerateOptions& options,
                     const GenerationControls& controls, const StreamCallback& on_text, int prompt_tokens,
                     double prefill_seconds)
    : session_(session),
      sampler_(sampler),
      options_(options),
      controls_(controls),
      router_(std::make_unique<Router>(options.stop, on_text, &result_.reply)),
      decoder_(session.engine().tokenizer(), DecodeOptions{/*skip_special=*/true}),
      start_(std::chrono::steady_clock::now()) {
  const Tokenizer& tok = session.engine().tokenizer();
  // Gemma 4's thought channel and tool calls are delimited by these special tokens (absent in other
  // vocabularies: Find gives -1, which no sampled token equals).
  channel_open_ = tok.vocab().Find("<|channel>");
  channel_close_ = tok.vocab().Find("<channel|>");
  call_open_ = tok.vocab().Find("<|tool_call>");
  call_close_ = tok.vocab().Find("<tool_call|>");
  limit_ = options.max_tokens > 0 ? options.max_tokens : session.n_ctx();
  GenerationStats& st = result_.reply.stats;
  st.prompt_tokens = prompt_tokens;
  st.ttft_seconds = prefill_seconds;
  st.prefill_tokens_per_second = prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0;
  sampler.ClearWindow();
  const std::vector<int32_t>& history = session.history();
  const size_t window = static_cast<size_t>(sampler.params().repeat_last_n);
  for (size_t i = history.size() > window ? history.size() - window : 0; i < history.size(); ++i) sampler.Accept(history[i]);
}

Generator::~Generator() = default;

void Generator::Stop(StopReason reason) {
  result_.reply.stats.stop = reason;
  done_ = true;
}

int32_t Generator::Next(const float* logits) {
  if (done_) return -1;
  result_.pending.clear();  // the token returned last is in the cache now
  if (controls_.cancel && controls_.cancel->load()) {
    Stop(StopReason::kCancelled);
    return -1;
  }
  if (produced_ >= limit_) {
    Stop(StopReason::kMaxTokens);
    return -1;
  }
  ++produced_;
  const float* sample_from = logits;
  if (controls_.constraint) {
    masked_.assign(logits, logits + session_.engine().config().n_vocab);
    controls_.constraint->Mask(masked_.data(), limit_ - produced_ + 1);
    sample_from = masked_.data();
  }
  const int32_t token = sampler_.Sample(sample_from);
  sampler_.Accept(token);
  if (controls_.constraint) {
    if (Status s = controls_.constraint->Accept(token); !s.ok()) {
      // The mask let through a token its matcher then refused: a bug, never the model's fault.
      result_.reply.tokens.push_back(token);
      result_.pending = {token};
      Stop(StopReason::kCancelled);
      return -1;
    }
  }
  if (options_.top_logprobs >= 0) RecordLogprobs(logits, token);
  result_.reply.tokens.push_back(token);
  result_.pending = {token};
  if (controls_.stop_at_end_of_turn && session_.engine().IsEndOfGeneration(token)) {
    Stop(StopReason::kEndOfTurn);
    return -1;
  }
  const bool marker = token == channel_open_ || token == channel_close_ || token == call_open_ || token == call_close_;
  if (token == channel_open_) {
    kind_ = ChunkKind::kThinking;
    in_channel_name_ = true;
    channel_name_.clear();
  }
  if (token == call_open_) kind_ = ChunkKind::kToolCall;
  bool hit = false, keep_going = true;
  piece_.clear();
  if (!marker) decoder_.Push(token, &piece_);
  if (in_channel_name_) {
    // Gemma 4 opens its thought channel with the channel's name on a line of its own
    // (<|channel>thought\n...): the name is not part of the thought. A channel closed (or a line
    // running long) before any newline had no name line: what was held is thought.
    channel_name_ += piece_;
    piece_.clear();
    const size_t newline = channel_name_.find('\n');
    if (newline != std::string::npos) {
      piece_ = channel_name_.substr(newline + 1);
      in_channel_name_ = false;
    } else if (token == channel_close_ || channel_name_.size() > 64) {
      piece_ = channel_name_;
      in_channel_name_ = false;
    }
  }
  keep_going = router_->Add(piece_, kind_, &hit);
  if (token == channel_close_ || token == call_close_) {
    if (token == call_close_) router_->EndToolCall();
    kind_ = ChunkKind::kText;
  }
  if (hit) {
    Stop(StopReason::kStopString);
    return -1;
  }
  if (!keep_going) {
    Stop(StopReason::kCancelled);
    return -1;
  }
  if (!session_.cache().CheckRoom(1).ok()) {
    Stop(StopReason::kContextFull);
    return -1;
  }
  return token;
}

void Generator::RecordLogprobs(const float* logits, int32_t token) {
  const int n_vocab = session_.engine().config().n_vocab;
  float max_logit = logits[0];
  for (int i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const float log_z = max_logit + static_cast<float>(std::log(sum));
  TokenLogprobs entry;
  entry.chosen = {token, logits[token] - log_z};
  const int k = std::min(options_.top_logprobs, n_vocab);
  if (k > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int i = 0; i < n_vocab; ++i) ids[i] = i;
    auto better = [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
    for (int i = 0; i < k; ++i) entry.top.push_back({ids[i], logits[ids[i]] - log_z});
  }
  result_.reply.logprobs.push_back(std::move(entry));
}

Generation& Generator::Finish() {
  if (finished_) return result_;
  finished_ = true;
  piece_.clear();
  decoder_.Flush(&piece_);
  bool hit = false;
  if (!piece_.empty()) router_->Add(piece_, kind_, &hit);
  router_->Finish();
  router_->ParseToolCalls();
  // Decode speed counts the tokens after the first: the first one's time is the prompt's.
  const double decode_seconds = Seconds(start_);
  GenerationStats& st = result_.reply.stats;
  const size_t n = result_.reply.tokens.size();
  st.generated_tokens = static_cast<int>(n);
  st.decode_tokens_per_second = decode_seconds > 0 && n > 1 ? static_cast<double>(n - 1) / decode_seconds : 0;
  return result_;
}

void Generator::CountDraftStep(int drafted, int accepted) {
  GenerationStats& st = result_.reply.stats;
  ++st.draft_steps;
  st.drafted_tokens += drafted;
  st.accepted_tokens += accepted;
}

MemoryStats SessionMemory(const Session& session) {
  MemoryStats m;
  m.kv_cache_bytes = session.cache().bytes();
  m.kv_cache_resident_bytes = session.cache().ResidentBytes();
  m.activation_bytes = session.activation_bytes();
  return m;
}

void AddSessionStats(const Session& session, GenerationStats* stats) {
  stats->memory = SessionMemory(session);
  stats->thermal = session.thermal_stats();
}

Result<Generation> Generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                            const GenerateOptions& options, const GenerationControls& controls,
                            const StreamCallback& on_text, std::span<const MediaSpan> media) {
  if (prompt.empty()) return Status::Error("the prompt is empty");
  for (const std::string& s : options.stop) {
    if (s.empty()) return Status::Error("stop strings must not be empty");
  }
  std::vector<float> logits(static_cast<size_t>(session.engine().config().n_vocab));
  std::vector<float> verify_logits;  // [1 + drafts, n_vocab] of a speculative step
  // Gemma 4's drafter reads the final hidden state of the row whose logits chose the next token.
  AssistantDrafter* const assistant = options.max_draft > 0 ? controls.assistant : nullptr;
  const size_t d_model = static_cast<size_t>(session.engine().config().d_model);
  std::vector<float> hidden(assistant != nullptr ? d_model : 0);
  std::vector<float> verify_hidden;  // [1 + drafts, d_model]
  float* const want_hidden = assistant != nullptr ? hidden.data() : nullptr;
  const auto start = std::chrono::steady_clock::now();
  session.SetStopFlag(controls.cancel);
  struct ClearStop {
    Session& s;
    ~ClearStop() { s.SetStopFlag(nullptr); }
  } clear_stop{session};
  if (Status s = session.Evaluate(prompt, media, logits.data(), false, want_hidden); !s.ok()) {
    if (s.code() != StatusCode::kCancelled) return s;
    Generation cancelled;  // during the prompt: nothing generated, nothing pending
    cancelled.reply.stats.prompt_tokens = static_cast<int>(prompt.size());
    cancelled.reply.stats.stop = StopReason::kCancelled;
    cancelled.reply.stats.ttft_seconds = Seconds(start);
    return cancelled;
  }
  Generator generator(session, sampler, options, controls, on_text, static_cast<int>(prompt.size()), Seconds(start));
  const int n_vocab = session.engine().config().n_vocab;
  // Drafts stay within what Truncate takes back without evaluating anything again, and a
  // verification forward within the rows the matmuls run through the decode kernels (8, as
  // kernels/matmul_simd.cc's kMaxGemvTokens): each row's logits are then those of decoding it alone,
  // so speculation changes no token, greedy or sampled.
  constexpr int kMaxVerifyRows = 8;
  Session* const drafter = assistant != nullptr ? nullptr : controls.draft_session;
  int max_draft = std::min({options.max_draft, session.rollback_room() - 1, kMaxVerifyRows - 1});
  if (drafter != nullptr) {
    // The drafter takes back what it drafted beyond the kept tokens, within its own rollback room.
    max_draft = std::min(max_draft, drafter->rollback_room() - 1);
    drafter->SetStopFlag(controls.cancel);
  }
  struct ClearDraftStop {
    Session* s;
    ~ClearDraftStop() {
      if (s) s->SetStopFlag(nullptr);
    }
  } clear_draft_stop{drafter};
  std::vector<float> draft_logits;
  int draft_len = std::min(max_draft, 4);  // adapts: grows while drafts are kept, shrinks when not
  // After a step that kept nothing, drafting pauses for `pause` tokens, doubling up to 32 while
  // drafts keep failing: a model that does not copy pays for no verification it cannot use.
  int pause = 0, paused = 0;
  std::vector<int32_t> step;
  for (int32_t token = generator.Next(logits.data()); token >= 0;) {
    step.assign(1, token);
    // Room for the drafts and one more: the generator checks the context after every token. And no
    // draft past max_tokens: it could never be kept.
    int room = session.n_ctx() - session.n_past() - 2;
    room = std::min(room, generator.remaining());
    if (max_draft > 0 && room > 0 && paused == 0) {
      std::vector<int32_t> draft;
      if (assistant != nullptr) {
        draft = DraftFromAssistant(session, *assistant, token, hidden.data(), std::min(draft_len, room));
      } else if (drafter != nullptr) {
        Result<std::vector<int32_t>> proposed = DraftFromModel(*drafter, session.history(), token, std::min(draft_len, room), &draft_logits);
        if (!proposed.ok() && proposed.status().code() == StatusCode::kCancelled) {
          generator.Stop(StopReason::kCancelled);
          break;
        }
        if (!proposed.ok()) return proposed.status();
        draft = std::move(proposed).value();
      } else {
        draft = LookupDraftAfter(session.history(), token, std::min(draft_len, room), controls.draft_min_ngram);
      }
      step.insert(step.end(), draft.begin(), draft.end());
    } else if (paused > 0) {
      --paused;
    }
    const int n_draft = static_cast<int>(step.size()) - 1;
    if (n_draft == 0) {
      Status s = session.Evaluate(step, logits.data(), false, want_hidden);
      if (s.code() == StatusCode::kCancelled) {  // the token is not in the cache: it stays pending
        generator.Stop(StopReason::kCancelled);
        break;
      }
      if (!s.ok()) return s;
      token = generator.Next(logits.data());
      continue;
    }
    // The token and its drafts in one forward: row i's logits pick what follows step[i].
    verify_logits.resize(static_cast<size_t>(step.size()) * n_vocab);
    if (assistant != nullptr) verify_hidden.resize(step.size() * d_model);
    Status s = session.EvaluateAsDecode(step, verify_logits.data(), assistant != nullptr ? verify_hidden.data() : nullptr);
    if (s.code() == StatusCode::kCancelled) {
      generator.Stop(StopReason::kCancelled);
      break;
    }
    if (!s.ok()) return s;
    int kept = 0;
    int32_t next = -1;
    for (int i = 0; i <= n_draft; ++i) {
      next = generator.Next(verify_logits.data() + static_cast<size_t>(i) * n_vocab);
      if (i == n_draft || next < 0 || next != step[i + 1]) break;
      ++kept;  // the sample is the draft: it is in the cache already
    }
    generator.CountDraftStep(n_draft, kept);
    // The row that chose `next` is the one after the last kept draft.
    if (assistant != nullptr) std::copy_n(verify_hidden.begin() + static_cast<std::ptrdiff_t>(kept * d_model), d_model, hidden.begin());
    // Drafts past the last kept one leave the cache: the next token (if any) is not in it yet.
    if (kept < n_draft) {
      if (Status t = session.Truncate(session.n_past() - (n_draft - kept)); !t.ok()) return t;
    }
    draft_len = kept == n_draft ? std::min(max_draft, draft_len + 2) : std::max(1, kept + 1);
    if (kept == 0) {
      pause = std::min(32, std::max(1, pause * 2));
      paused = pause;
    } else {
      pause = 0;
    }
    token = next;
  }
  return std::move(generator.Finish());
}

}  // namespace gemlet::runtime

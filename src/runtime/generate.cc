// The decode loop. Text is streamed through a StreamDecoder (whole UTF-8 only) and held back while
// it could still become a stop string.
#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace gemlet::runtime {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfTurn: return "end of turn";
    case StopReason::kStopString: return "stop string";
    case StopReason::kMaxTokens: return "max tokens";
    case StopReason::kContextFull: return "context full";
    case StopReason::kCancelled: return "cancelled";
  }
  return "?";
}

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

// Splits streamed text by kind (answer, thought, tool call), and holds back any tail that may start
// a stop string; emits the rest to the sink.
class Generator::Router {
 public:
  Router(const std::vector<std::string>& stops, const TextSink& sink, GenerateResult* result)
      : stops_(stops), sink_(sink), result_(result) {}

  // Returns false when the sink asked to stop. Sets *hit when a stop string completed.
  bool Add(const std::string& text, TextKind kind, bool* hit) {
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

 private:
  bool Emit(const std::string& text, TextKind kind) { return !sink_ || sink_(text, kind); }
  void Record(const std::string& text) {
    if (text.empty()) return;  // a marker alone: a tool call begins with its first text
    switch (kind_) {
      case TextKind::kAnswer: result_->text += text; break;
      case TextKind::kThought: result_->thought += text; break;
      case TextKind::kToolCall:
        if (!tool_call_open_) result_->tool_calls.emplace_back();
        tool_call_open_ = true;
        result_->tool_calls.back() += text;
        break;
    }
  }

  const std::vector<std::string>& stops_;
  const TextSink& sink_;
  GenerateResult* result_;
  std::string held_;
  TextKind kind_ = TextKind::kAnswer;
  bool tool_call_open_ = false;
};

Generator::Generator(Session& session, Sampler& sampler, const GenerateOptions& options, const TextSink& sink)
    : session_(session),
      sampler_(sampler),
      options_(options),
      router_(std::make_unique<Router>(options.stop_strings, sink, &result_)),
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
  sampler.ClearWindow();
  const std::vector<int32_t>& history = session.history();
  const size_t window = static_cast<size_t>(sampler.params().penalty_last_n);
  for (size_t i = history.size() > window ? history.size() - window : 0; i < history.size(); ++i) sampler.Accept(history[i]);
}

Generator::~Generator() = default;

void Generator::Stop(StopReason reason) {
  result_.stop = reason;
  done_ = true;
}

int32_t Generator::Next(const float* logits) {
  if (done_) return -1;
  result_.pending.clear();  // the token returned last is in the cache now
  if (options_.cancel && options_.cancel->load()) {
    Stop(StopReason::kCancelled);
    return -1;
  }
  if (produced_ >= limit_) {
    Stop(StopReason::kMaxTokens);
    return -1;
  }
  ++produced_;
  const float* sample_from = logits;
  if (options_.constraint) {
    masked_.assign(logits, logits + session_.engine().config().n_vocab);
    options_.constraint->Mask(masked_.data(), limit_ - produced_ + 1);
    sample_from = masked_.data();
  }
  const int32_t token = sampler_.Sample(sample_from);
  sampler_.Accept(token);
  if (options_.constraint) {
    if (Status s = options_.constraint->Accept(token); !s.ok()) {
      // The mask let through a token its matcher then refused: a bug, never the model's fault.
      result_.tokens.push_back(token);
      result_.pending = {token};
      Stop(StopReason::kCancelled);
      return -1;
    }
  }
  if (options_.top_logprobs >= 0) RecordLogprobs(logits, token);
  result_.tokens.push_back(token);
  result_.pending = {token};
  if (options_.stop_at_end_of_turn && session_.engine().IsEndOfGeneration(token)) {
    Stop(StopReason::kEndOfTurn);
    return -1;
  }
  const bool marker = token == channel_open_ || token == channel_close_ || token == call_open_ || token == call_close_;
  if (token == channel_open_) {
    kind_ = TextKind::kThought;
    in_channel_name_ = true;
    channel_name_.clear();
  }
  if (token == call_open_) kind_ = TextKind::kToolCall;
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
    kind_ = TextKind::kAnswer;
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
  entry.token = token;
  entry.logprob = logits[token] - log_z;
  const int k = std::min(options_.top_logprobs, n_vocab);
  if (k > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int i = 0; i < n_vocab; ++i) ids[i] = i;
    auto better = [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
    for (int i = 0; i < k; ++i) entry.top.emplace_back(ids[i], logits[ids[i]] - log_z);
  }
  result_.logprobs.push_back(std::move(entry));
}

GenerateResult& Generator::Finish() {
  if (finished_) return result_;
  finished_ = true;
  piece_.clear();
  decoder_.Flush(&piece_);
  bool hit = false;
  if (!piece_.empty()) router_->Add(piece_, kind_, &hit);
  router_->Finish();
  result_.decode_seconds = Seconds(start_);
  return result_;
}

std::vector<int32_t> LookupDraftAfter(std::span<const int32_t> history, int32_t last, int max_draft, int min_ngram, int max_ngram) {
  std::vector<int32_t> draft;
  const int n = static_cast<int>(history.size()) + 1;  // the context: history, then last
  const auto at = [&](int i) { return i + 1 == n ? last : history[static_cast<size_t>(i)]; };
  if (max_draft <= 0) return draft;
  for (int len = std::min(max_ngram, n - 1); len >= min_ngram; --len) {
    // The most recent earlier occurrence of the last len tokens: rewrites copy what they just read.
    for (int start = n - len - 1; start >= 0; --start) {
      bool match = true;
      for (int k = 0; k < len && match; ++k) match = at(start + k) == at(n - len + k);
      if (!match) continue;
      for (int k = 0; k < max_draft && start + len + k < n; ++k) draft.push_back(at(start + len + k));
      return draft;
    }
  }
  return draft;
}

std::vector<int32_t> LookupDraft(std::span<const int32_t> context, int max_draft, int min_ngram, int max_ngram) {
  if (context.empty()) return {};
  return LookupDraftAfter(context.first(context.size() - 1), context.back(), max_draft, min_ngram, max_ngram);
}

Result<std::vector<int32_t>> DraftFromModel(Session& draft, std::span<const int32_t> history, int32_t last, int n,
                                            std::vector<float>* logits) {
  const auto at = [&](size_t i) { return i < history.size() ? history[i] : last; };
  const size_t total = history.size() + 1;
  // What the draft holds of this context, less at least its last token (whose logits are needed).
  const std::vector<int32_t>& held = draft.history();
  size_t common = 0;
  while (common < held.size() && common + 1 < total && held[common] == at(common)) ++common;
  if (common < held.size()) RETURN_IF_ERROR(draft.Truncate(static_cast<int>(common)));
  std::vector<int32_t> feed;
  feed.reserve(total - common);
  for (size_t i = common; i < total; ++i) feed.push_back(at(i));
  logits->resize(static_cast<size_t>(draft.engine().config().n_vocab));
  std::vector<int32_t> out;
  for (int k = 0; k < n; ++k) {
    RETURN_IF_ERROR(draft.Evaluate(feed, logits->data(), false));
    const int32_t best = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    out.push_back(best);
    feed.assign(1, best);
  }
  return out;
}

Result<GenerateResult> Generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                                const GenerateOptions& options, const TextSink& sink) {
  if (prompt.empty()) return Status::Error("the prompt is empty");
  for (const std::string& s : options.stop_strings) {
    if (s.empty()) return Status::Error("stop strings must not be empty");
  }
  std::vector<float> logits(static_cast<size_t>(session.engine().config().n_vocab));
  std::vector<float> verify_logits;  // [1 + drafts, n_vocab] of a speculative step
  const auto start = std::chrono::steady_clock::now();
  session.SetStopFlag(options.cancel);
  struct ClearStop {
    Session& s;
    ~ClearStop() { s.SetStopFlag(nullptr); }
  } clear_stop{session};
  if (Status s = session.Evaluate(prompt, logits.data(), false); !s.ok()) {
    if (s.code() != StatusCode::kCancelled) return s;
    GenerateResult result;  // cancelled during the prompt: nothing generated, nothing pending
    result.prompt_tokens = static_cast<int>(prompt.size());
    result.stop = StopReason::kCancelled;
    result.prefill_seconds = Seconds(start);
    return result;
  }
  const double prefill_seconds = Seconds(start);
  Generator generator(session, sampler, options, sink);
  const int n_vocab = session.engine().config().n_vocab;
  // Drafts stay within what Truncate takes back without evaluating anything again, and a
  // verification forward within the rows the matmuls run through the decode kernels (8, as
  // kernels/matmul_simd.cc's kMaxGemvTokens): each row's logits are then those of decoding it alone,
  // so speculation changes no token, greedy or sampled.
  constexpr int kMaxVerifyRows = 8;
  Session* const drafter = options.draft_session;
  int max_draft = std::min({options.max_draft, session.rollback_room() - 1, kMaxVerifyRows - 1});
  if (drafter != nullptr) {
    // The drafter takes back what it drafted beyond the kept tokens, within its own rollback room.
    max_draft = std::min(max_draft, drafter->rollback_room() - 1);
    drafter->SetStopFlag(options.cancel);
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
  SpeculationStats spec;
  for (int32_t token = generator.Next(logits.data()); token >= 0;) {
    step.assign(1, token);
    // Room for the drafts and one more: the generator checks the context after every token. And no
    // draft past max_tokens: it could never be kept.
    int room = session.n_ctx() - session.n_past() - 2;
    room = std::min(room, generator.remaining());
    if (max_draft > 0 && room > 0 && paused == 0) {
      std::vector<int32_t> draft;
      if (drafter != nullptr) {
        Result<std::vector<int32_t>> proposed = DraftFromModel(*drafter, session.history(), token, std::min(draft_len, room), &draft_logits);
        if (!proposed.ok() && proposed.status().code() == StatusCode::kCancelled) {
          generator.Stop(StopReason::kCancelled);
          break;
        }
        if (!proposed.ok()) return proposed.status();
        draft = std::move(proposed).value();
      } else {
        draft = LookupDraftAfter(session.history(), token, std::min(draft_len, room), options.draft_min_ngram);
      }
      step.insert(step.end(), draft.begin(), draft.end());
    } else if (paused > 0) {
      --paused;
    }
    const int n_draft = static_cast<int>(step.size()) - 1;
    if (n_draft == 0) {
      Status s = session.Evaluate(step, logits.data(), false);
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
    Status s = session.EvaluateAsDecode(step, verify_logits.data());
    if (s.code() == StatusCode::kCancelled) {
      generator.Stop(StopReason::kCancelled);
      break;
    }
    if (!s.ok()) return s;
    ++spec.steps;
    spec.drafted += n_draft;
    int kept = 0;
    int32_t next = -1;
    for (int i = 0; i <= n_draft; ++i) {
      next = generator.Next(verify_logits.data() + static_cast<size_t>(i) * n_vocab);
      if (i == n_draft || next < 0 || next != step[i + 1]) break;
      ++kept;  // the sample is the draft: it is in the cache already
    }
    spec.accepted += kept;
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
  GenerateResult& result = generator.Finish();
  result.speculation = spec;
  result.prompt_tokens = static_cast<int>(prompt.size());
  result.prefill_seconds = prefill_seconds;
  return std::move(result);
}

}  // namespace gemlet::runtime

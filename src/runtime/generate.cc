// The decode loop. Text is streamed through a StreamDecoder (whole UTF-8 only) and held back while
// it could still become a stop string.
#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

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

// Splits streamed text by kind (answer, thought, tool call), and holds back any tail that may start
// a stop string; emits the rest to the sink.
class TextRouter {
 public:
  TextRouter(const std::vector<std::string>& stops, const TextSink& sink, GenerateResult* result)
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

}  // namespace

Result<GenerateResult> Generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                                const GenerateOptions& options, const TextSink& sink) {
  const Engine& engine = session.engine();
  const Tokenizer& tok = engine.tokenizer();
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  if (prompt.empty()) return Status::Error("the prompt is empty");
  for (const std::string& s : options.stop_strings) {
    if (s.empty()) return Status::Error("stop strings must not be empty");
  }

  const int n_vocab = engine.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  auto start = std::chrono::steady_clock::now();
  session.SetStopFlag(options.cancel);
  struct ClearStop {
    Session& s;
    ~ClearStop() { s.SetStopFlag(nullptr); }
  } clear_stop{session};
  if (Status s = session.Evaluate(prompt, logits.data(), false); !s.ok()) {
    if (s.code() != StatusCode::kCancelled) return s;
    result.stop = StopReason::kCancelled;  // during the prompt: nothing generated, nothing pending
    result.prefill_seconds = Seconds(start);
    return result;
  }
  sampler.ClearWindow();
  const std::vector<int32_t>& history = session.history();
  const size_t window = static_cast<size_t>(sampler.params().penalty_last_n);
  for (size_t i = history.size() > window ? history.size() - window : 0; i < history.size(); ++i) sampler.Accept(history[i]);
  result.prefill_seconds = Seconds(start);
  start = std::chrono::steady_clock::now();

  // Gemma 4's thought channel and tool calls are delimited by these special tokens (absent in other
  // vocabularies: Find gives -1, which no sampled token equals).
  const int32_t channel_open = tok.vocab().Find("<|channel>");
  const int32_t channel_close = tok.vocab().Find("<channel|>");
  const int32_t call_open = tok.vocab().Find("<|tool_call>");
  const int32_t call_close = tok.vocab().Find("<tool_call|>");
  TextKind kind = TextKind::kAnswer;

  StreamDecoder decoder(tok, DecodeOptions{/*skip_special=*/true});
  TextRouter router(options.stop_strings, sink, &result);
  std::string piece;
  const int limit = options.max_tokens > 0 ? options.max_tokens : session.n_ctx();
  for (int produced = 0;; ++produced) {
    if (options.cancel && options.cancel->load()) {
      result.stop = StopReason::kCancelled;
      break;
    }
    if (produced >= limit) {
      result.stop = StopReason::kMaxTokens;
      break;
    }
    const int32_t token = sampler.Sample(logits.data());
    sampler.Accept(token);
    result.tokens.push_back(token);
    if (options.stop_at_end_of_turn && engine.IsEndOfGeneration(token)) {
      result.stop = StopReason::kEndOfTurn;
      result.pending = {token};
      break;
    }
    const bool marker = token == channel_open || token == channel_close || token == call_open || token == call_close;
    if (token == channel_open) kind = TextKind::kThought;
    if (token == call_open) kind = TextKind::kToolCall;
    bool hit = false, keep_going = true;
    if (!marker) {
      piece.clear();
      decoder.Push(token, &piece);
      keep_going = router.Add(piece, kind, &hit);
    } else {
      keep_going = router.Add("", kind, &hit);
    }
    if (token == channel_close || token == call_close) {
      if (token == call_close) router.EndToolCall();
      kind = TextKind::kAnswer;
    }
    if (hit) {
      result.stop = StopReason::kStopString;
      result.pending = {token};
      break;
    }
    if (!keep_going) {
      result.stop = StopReason::kCancelled;
      result.pending = {token};
      break;
    }
    if (!session.cache().CheckRoom(1).ok()) {
      result.stop = StopReason::kContextFull;
      result.pending = {token};
      break;
    }
    Status s = session.Evaluate({token}, logits.data(), false);
    if (s.code() == StatusCode::kCancelled) {  // the token is not in the cache: it stays pending
      result.stop = StopReason::kCancelled;
      result.pending = {token};
      break;
    }
    if (!s.ok()) return s;
  }
  piece.clear();
  decoder.Flush(&piece);
  bool hit = false;
  if (!piece.empty()) router.Add(piece, kind, &hit);
  router.Finish();
  result.decode_seconds = Seconds(start);
  return result;
}

}  // namespace gemlet::runtime

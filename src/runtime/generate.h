// The decode loop: prefill, sample, stream text, stop on end-of-turn / stop strings / limits. A
// Generator is one generation stepped a token at a time, so that one session (Generate) or many at
// once (a batched forward, BatchDecoder) can drive it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet::runtime {

// Restricts which tokens may come next (structured output): the decode loop masks a copy of the
// logits with it before sampling and reports every sampled token back.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of the tokens that cannot come next to -infinity. remaining_tokens: how many
  // tokens may still be generated, this one included (so that the output can be finished in time).
  virtual void Mask(float* logits, int remaining_tokens) = 0;
  virtual Status Accept(int32_t token) = 0;
};

struct GenerateOptions {
  int max_tokens = 512;                  // new tokens at most; <= 0: until the context is full
  SamplingParams sampling;
  std::vector<std::string> stop_strings; // generation stops before any of these texts
  bool stop_at_end_of_turn = true;       // EOS / <end_of_turn> / <turn|> end the answer
  // Set from another thread (Ctrl-C, an app's cancel) to stop early, in the prompt's evaluation
  // too (between layers) and between generated tokens.
  const std::atomic<bool>* cancel = nullptr;
  TokenConstraint* constraint = nullptr;  // not owned; null: any token
  // >= 0: record each generated token's log-probability under the model (its logits before
  // penalties, temperature and constraints) and this many most likely alternatives.
  int top_logprobs = -1;
    // Speculative decoding by prompt lookup: tokens that followed the latest earlier occurrence of the
  // last 2-4 tokens (in the prompt or the answer so far) are drafted, at most max_draft of them, and
  // verified in one forward with the token before them. Each position is sampled as without drafts
  // (the same sampler, the same random draws), and a draft token is kept only where the sample
  // equals it, so the output is what plain decoding gives for the same logits; rejected drafts are
  // taken back from the cache. 0: off.
  int max_draft = 0;
  int draft_min_ngram = 2;  // the shortest match a draft is taken from (1: any earlier token; tests)
  // Not owned. Set: the drafts are this smaller model's greedy continuation instead of prompt
  // lookup (the same vocabulary; verified and kept as above). The draft session follows the
  // target's history by itself: each step it takes back what it drafted beyond what was kept and
  // evaluates what it has not seen, so it may start empty or out of step.
  Session* draft_session = nullptr;
};

// What speculation did in one generation.
struct SpeculationStats {
  int steps = 0;     // verification forwards (each evaluates 1 + its drafts)
  int drafted = 0;   // tokens drafted
  int accepted = 0;  // of those, kept
};

// The next tokens prompt lookup proposes after `context` (at most max_draft): the tokens that
// followed the most recent earlier occurrence of its last n tokens, for the longest n in
// [min_ngram, max_ngram] that occurs. Empty when none does.
std::vector<int32_t> LookupDraft(std::span<const int32_t> context, int max_draft, int min_ngram = 1, int max_ngram = 4);
// The same for context = history followed by `last` (the token about to be evaluated), without
// building that sequence: what the decode loop asks each step.
std::vector<int32_t> LookupDraftAfter(std::span<const int32_t> history, int32_t last, int max_draft, int min_ngram, int max_ngram = 4);
// A draft model's proposal after history + last: the draft session is brought to that context
// (truncated to what it shares with it, then fed the rest), then decodes n tokens greedily; it keeps
// them but the last in its cache. logits: scratch of the draft's n_vocab.
Result<std::vector<int32_t>> DraftFromModel(Session& draft, std::span<const int32_t> history, int32_t last, int n,
                                            std::vector<float>* logits);

struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

// What a piece of streamed text is: the answer, Gemma 4's thought channel, or a tool call (Gemma 4's
// <|tool_call>call:NAME{ARGS}<tool_call|>, streamed without its markers).
enum class TextKind { kAnswer, kThought, kToolCall };

enum class StopReason { kEndOfTurn, kStopString, kMaxTokens, kContextFull, kCancelled };
const char* StopReasonName(StopReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids, the end-of-turn token included when it ended the answer
  std::string text;             // the answer as streamed (special tokens and the thought channel excluded)
  std::string thought;          // Gemma 4: the thought channel's text, kept apart from the answer
  std::vector<std::string> tool_calls;  // Gemma 4: each call's text, "call:NAME{ARGS}"
  StopReason stop = StopReason::kMaxTokens;
  int prompt_tokens = 0;
  double prefill_seconds = 0;   // evaluating the prompt (time to first token, less sampling)
  double decode_seconds = 0;    // everything after the first token
  // Tokens whose K/V are not in the cache yet: the last sampled token (it is evaluated at the
  // start of the next turn, so a chat never re-processes it).
  std::vector<int32_t> pending;
  std::vector<TokenLogprobs> logprobs;  // with GenerateOptions::top_logprobs >= 0: one per token
  SpeculationStats speculation;          // with GenerateOptions::max_draft > 0
};

// Receives streamed text, whole UTF-8 characters only. Return false to stop.
using TextSink = std::function<bool(std::string_view text, TextKind kind)>;

// One generation over a session whose cache already holds the prompt: Next() takes the logits of the
// last evaluated position and returns the token to evaluate next, until the generation ends. The
// caller evaluates (alone, or batched with other sessions).
class Generator {
 public:
  // The sampler's penalty window is refilled from the session's history.
  Generator(Session& session, Sampler& sampler, const GenerateOptions& options, const TextSink& sink);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Samples from logits [n_vocab] and streams the token's text. Returns the token to evaluate
  // before the next call, or -1 when the generation is over (result().stop says why; the last
  // token, if any, is in result().pending).
  int32_t Next(const float* logits);
  // Ends early (the evaluation of the returned token failed or was cancelled): the token stays pending.
  void Stop(StopReason reason);
  bool done() const { return done_; }
  int remaining() const { return limit_ - produced_; }  // tokens Next may still sample
  // Flushes the text held back (a partial stop string, an incomplete character) and returns the
  // result; call once, when done().
  GenerateResult& Finish();
  GenerateResult& result() { return result_; }

 private:
  class Router;
  void RecordLogprobs(const float* logits, int32_t token);

  Session& session_;
  Sampler& sampler_;
  const GenerateOptions& options_;
  GenerateResult result_;
  std::unique_ptr<Router> router_;
  StreamDecoder decoder_;
  std::vector<float> masked_;  // the constrained copy of the logits
  std::string piece_;
  int32_t channel_open_, channel_close_, call_open_, call_close_;
  TextKind kind_ = TextKind::kAnswer;
  // After <|channel>: the channel's name line ("thought\n") is held back here, not part of the thought.
  bool in_channel_name_ = false;
  std::string channel_name_;
  int produced_ = 0;
  int limit_ = 0;
  bool done_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

// Evaluates `prompt` (tokens after the session's history), then samples until a stop condition.
// The sampler's penalty window is refilled from the session's history first.
Result<GenerateResult> Generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                                const GenerateOptions& options, const TextSink& sink);

}  // namespace gemlet::runtime

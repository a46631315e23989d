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

class AssistantDrafter;  // drafting.h

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

// What a generation needs beyond the public GenerateOptions (gemlet/types.hpp), which it takes as
// they are: the hooks the facade and the batch decoder attach, and two knobs for tests.
struct GenerationControls {
  // Set from another thread (Ctrl-C, an app's cancel) to stop early, in the prompt's evaluation
  // too (between layers) and between generated tokens.
  const std::atomic<bool>* cancel = nullptr;
  TokenConstraint* constraint = nullptr;  // not owned; null: any token
  // Not owned. Set: GenerateOptions::max_draft drafts with this smaller model's greedy continuation
  // instead of prompt lookup (the same vocabulary; verified and kept alike). The draft session
  // follows the target's history by itself: each step it takes back what it drafted beyond what was
  // kept and evaluates what it has not seen, so it may start empty or out of step.
  Session* draft_session = nullptr;
  // Not owned. Set: max_draft drafts with Gemma 4's own drafter (drafting.h) from the session's hidden
  // states and cache instead; draft_session is then unused.
  AssistantDrafter* assistant = nullptr;
  bool stop_at_end_of_turn = true;  // EOS / <end_of_turn> / <turn|> end the answer
  int draft_min_ngram = 2;  // the shortest match prompt lookup drafts from (1: any earlier token; tests)
};

// One generation's outcome: the public Reply (text, thought, tool calls, tokens, log-probabilities,
// and its stats but for the session's memory and thermal figures: SessionStats adds those), and
// the tokens whose K/V are not in the cache yet: the last sampled token (it is evaluated at the start
// of the next turn, so a chat never re-processes it).
struct Generation {
  Reply reply;
  std::vector<int32_t> pending;
};

// What a session holds now: its KV cache (reserved and committed) and its workspace.
MemoryStats SessionMemory(const Session& session);
// The session's share of a reply's stats: its memory now and what the thermal governor did to it.
void AddSessionStats(const Session& session, GenerationStats* stats);

// One generation over a session whose cache already holds the prompt: Next() takes the logits of the
// last evaluated position and returns the token to evaluate next, until the generation ends. The
// caller evaluates (alone, or batched with other sessions).
class Generator {
 public:
  // The sampler's penalty window is refilled from the session's history. prompt_tokens and
  // prefill_seconds: what evaluating the prompt took, for the stats.
  Generator(Session& session, Sampler& sampler, const GenerateOptions& options, const GenerationControls& controls,
            const StreamCallback& on_text, int prompt_tokens, double prefill_seconds);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Samples from logits [n_vocab] and streams the token's text. Returns the token to evaluate
  // before the next call, or -1 when the generation is over (its stats' stop says why; the last
  // token, if any, is pending).
  int32_t Next(const float* logits);
  // Ends early (the evaluation of the returned token failed or was cancelled): the token stays pending.
  void Stop(StopReason reason);
  bool done() const { return done_; }
  int remaining() const { return limit_ - produced_; }  // tokens Next may still sample
  // Flushes the text held back (a partial stop string, an incomplete character) and returns the
  // result; call once, when done().
  Generation& Finish();
  // What speculation did (Generate counts its verification steps here).
  void CountDraftStep(int drafted, int accepted);

 private:
  class Router;
  void RecordLogprobs(const float* logits, int32_t token);

  Session& session_;
  Sampler& sampler_;
  const GenerateOptions& options_;
  const GenerationControls& controls_;
  Generation result_;
  std::unique_ptr<Router> router_;
  StreamDecoder decoder_;
  std::vector<float> masked_;  // the constrained copy of the logits
  std::string piece_;
  int32_t channel_open_, channel_close_, call_open_, call_close_;
  ChunkKind kind_ = ChunkKind::kText;
  // After <|channel>: the channel's name line ("thought\n") is held back here, not part of the thought.
  bool in_channel_name_ = false;
  std::string channel_name_;
  int produced_ = 0;
  int limit_ = 0;
  bool done_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

// Evaluates `prompt` (tokens after the session's history) with `media` among them (positions from
// the prompt's first token), then samples until a stop condition. The sampler's penalty window is
// refilled from the session's history first.
Result<Generation> Generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                            const GenerateOptions& options, const GenerationControls& controls,
                            const StreamCallback& on_text, std::span<const MediaSpan> media = {});

}  // namespace gemlet::runtime

// The decode loop: prefill, sample, stream text, stop on end-of-turn / stop strings / limits.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet::runtime {

struct GenerateOptions {
  int max_tokens = 512;                  // new tokens at most; <= 0: until the context is full
  SamplingParams sampling;
  std::vector<std::string> stop_strings; // generation stops before any of these texts
  bool stop_at_end_of_turn = true;       // EOS / <end_of_turn> / <turn|> end the answer
  const std::atomic<bool>* cancel = nullptr;  // set from another thread (Ctrl-C) to stop early
};

enum class StopReason { kEndOfTurn, kStopString, kMaxTokens, kContextFull, kCancelled };
const char* StopReasonName(StopReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids, the end-of-turn token included when it ended the answer
  std::string text;             // the answer as streamed (special tokens and the thought channel excluded)
  std::string thought;          // Gemma 4: the thought channel's text, kept apart from the answer
  StopReason stop = StopReason::kMaxTokens;
  int prompt_tokens = 0;
  double prefill_seconds = 0;   // evaluating the prompt (time to first token, less sampling)
  double decode_seconds = 0;    // everything after the first token
  // Tokens whose K/V are not in the cache yet: the last sampled token (it is evaluated at the
  // start of the next turn, so a chat never re-processes it).
  std::vector<int32_t> pending;
};

// Receives streamed text. `thought` is true inside a Gemma 4 thought channel. Return false to stop.
using TextSink = std::function<bool(std::string_view text, bool thought)>;

// Evaluates `prompt` (tokens after the session's history), then samples until a stop condition.
// The sampler's penalty window is refilled from the session's history first.
Result<GenerateResult> Generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                                const GenerateOptions& options, const TextSink& sink);

}  // namespace gemlet::runtime

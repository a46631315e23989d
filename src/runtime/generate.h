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
  // Set from another thread (Ctrl-C, an app's cancel) to stop early, in the prompt's evaluation
  // too (between layers) and between generated tokens.
  const std::atomic<bool>* cancel = nullptr;
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
};

// Receives streamed text, whole UTF-8 characters only. Return false to stop.
using TextSink = std::function<bool(std::string_view text, TextKind kind)>;

// Evaluates `prompt` (tokens after the session's history), then samples until a stop condition.
// The sampler's penalty window is refilled from the session's history first.
Result<GenerateResult> Generate(Session& session, Sampler& sampler, const std::vector<int32_t>& prompt,
                                const GenerateOptions& options, const TextSink& sink);

}  // namespace gemlet::runtime

// Draft pairing and drafting for speculative decoding: prompt lookup (the tokens that followed an
// earlier occurrence of the last few), a draft model's greedy continuation, and the check that a
// draft model can draft for a target at all (the same vocabulary, token for token).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/session.h"

namespace gemlet::runtime {

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

// Whether `draft` can draft for `target`: the same vocabulary, token for token (a draft's token
// ids are the target's). The error names the first difference.
Status CheckDraftVocabulary(const Engine& target, const Engine& draft);

// Gemma 4's own drafter (a gemma4-assistant engine) beside a target session: the drafter and its
// scratch, sized for the target's context and threads. It keeps no history: each proposal reads the
// target's cache and the hidden state the target's last evaluation left for the row that chose the
// token about to be evaluated.
class AssistantDrafter {
 public:
  // Refused (kInvalidArgument) when `drafter` is not a Gemma 4 drafter or cannot draft for `target`'s
  // model (Assistant::CheckTarget names the difference).
  static Result<std::unique_ptr<AssistantDrafter>> Create(std::shared_ptr<const Engine> drafter, const Session& target);
  const Assistant& assistant() const { return assistant_; }
  AssistantScratch& scratch() { return scratch_; }
  int hidden_width() const { return assistant_.sizes().backbone_width; }

 private:
  AssistantDrafter(std::shared_ptr<const Engine> engine, const Assistant& assistant, int n_ctx, int n_threads)
      : engine_(std::move(engine)), assistant_(assistant), scratch_(assistant, n_ctx, n_threads) {}
  std::shared_ptr<const Engine> engine_;  // keeps the drafter's weights mapped
  const Assistant& assistant_;
  AssistantScratch scratch_;
};

// The drafter's greedy chain after `last` (the token about to be evaluated at target.n_past()):
// step 1 reads `last` and `hidden` (the target's final-normed hidden state of the row whose logits
// chose `last`), each later step its own draft and state, all at that position. n tokens.
std::vector<int32_t> DraftFromAssistant(Session& target, AssistantDrafter& drafter, int32_t last, const float* hidden,
                                        int n);

}  // namespace gemlet::runtime

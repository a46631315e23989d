// Draft pairing and drafting for speculative decoding: prompt lookup (the tokens that followed an
// earlier occurrence of the last few), a draft model's greedy continuation, and the check that a
// draft model can draft for a target at all (the same vocabulary, token for token).
#pragma once

#include <cstdint>
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

}  // namespace gemlet::runtime

// Drafting for speculative decoding (drafting.h).
#include "runtime/drafting.h"

#include <algorithm>
#include <string>

namespace gemlet::runtime {

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

Status CheckDraftVocabulary(const Engine& target, const Engine& draft) {
  const int n_vocab = target.config().n_vocab;
  if (draft.config().n_vocab != n_vocab) {
    return Status::Error(StatusCode::kInvalidArgument, "the draft model's vocabulary has " +
                                                           std::to_string(draft.config().n_vocab) + " tokens and the model's " +
                                                           std::to_string(n_vocab) + ": a draft model must share the model's vocabulary");
  }
  if (&draft == &target) return Status::Ok();
  const Tokenizer& a = target.tokenizer();
  const Tokenizer& b = draft.tokenizer();
  for (int32_t id = 0; id < n_vocab; ++id) {
    const std::span<const int32_t> one(&id, 1);
    const std::string mine = a.Decode(one), theirs = b.Decode(one);
    if (mine != theirs) {
      return Status::Error(StatusCode::kInvalidArgument, "the draft model's token " + std::to_string(id) + " is '" + theirs +
                                                             "' and the model's '" + mine +
                                                             "': a draft model must share the model's vocabulary");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<AssistantDrafter>> AssistantDrafter::Create(std::shared_ptr<const Engine> drafter,
                                                                   const Session& target) {
  const Assistant* a = drafter->model().AsAssistant();
  if (a == nullptr) {
    return Status::Error(StatusCode::kInvalidArgument, "'" + drafter->model().gguf().path() + "' is a " +
                                                           drafter->config().arch +
                                                           " model, not a Gemma 4 drafter (gemma4-assistant)");
  }
  if (Status s = a->CheckTarget(target.engine().model()); !s.ok()) return Status::Error(StatusCode::kInvalidArgument, s.message());
  return std::unique_ptr<AssistantDrafter>(new AssistantDrafter(std::move(drafter), *a, target.n_ctx(), target.options().n_threads));
}

std::vector<int32_t> DraftFromAssistant(Session& target, AssistantDrafter& drafter, int32_t last, const float* hidden,
                                        int n) {
  std::vector<int32_t> out;
  AssistantScratch& s = drafter.scratch();
  const float* state = hidden;
  int32_t token = last;
  for (int k = 0; k < n; ++k) {
    target.DraftStep(drafter.assistant(), token, state, s);
    token = static_cast<int32_t>(std::max_element(s.logits.begin(), s.logits.end()) - s.logits.begin());
    out.push_back(token);
    state = s.state.data();
  }
  return out;
}

}  // namespace gemlet::runtime

// GrammarMatcher: constrained sampling over tokens. It tracks where the output stands in a Grammar
// and says which tokens may come next: only tokens whose bytes continue a valid output, and, under a
// token budget, only those after which the shortest completion still fits, so that an output always
// ends complete however the logits look.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "sampling/grammar.h"
#include "sampling/token_trie.h"

namespace gemlet {

// One matcher per generation; the Grammar and TokenVocabulary are immutable and shared. Not
// thread-safe itself (one decode loop drives it). Every step, in this order:
//
//   matcher.SetRemainingTokens(max_tokens - produced);  // tokens that may still be sampled, this one included
//   if (matcher.must_end()) -> stop: nothing but an end token can follow
//   matcher.Mask(logits, n_logits);                     // on the final logits: after soft-capping
//                                                       // (tanh would turn -inf into -cap), before
//                                                       // penalties, temperature and sampling
//   token = sampler.Sample(logits);
//   if (token is an end token) -> stop
//   matcher.Accept(token);                              // fails only for a token Mask had excluded
//
// Check `max_tokens >= matcher.min_tokens()` before generating: below it the output cannot be
// guaranteed to finish (Mask then steers toward the shortest completion, and budget_exceeded() says so).
class GrammarMatcher {
 public:
  static constexpr int kUnlimited = INT_MAX;

  static Result<GrammarMatcher> Create(std::shared_ptr<const Grammar> grammar,
                                       std::shared_ptr<const TokenVocabulary> vocab);

  // Fewest tokens in which a complete output can always be produced from the start: the length in
  // bytes of the grammar's shortest sentence, each byte being a single-byte token at worst.
  int min_tokens() const { return min_tokens_; }
  // The same from the current state.
  int remaining_min_tokens() const;

  // Tokens that may still be sampled, the next one included (kUnlimited: no budget).
  void SetRemainingTokens(int n);
  // Sets logits[i] = -infinity for every token i that may not come next; indices at or past the
  // vocabulary size (padding rows of the output matrix) are masked too.
  void Mask(float* logits, size_t n_logits);
  // Bitset over the vocabulary (bit i of word i / 64) of the tokens that may come next.
  const std::vector<uint64_t>& AllowedTokens();
  bool IsAllowed(int32_t token);

  // Advances over a token. Fails, leaving the state as it was, when its bytes cannot continue the
  // output, for a special token, and for an end token before the output is complete. It does not
  // check the budget (that is Mask's policy).
  Status Accept(int32_t token);
  // What Accept(token) would leave as remaining_min_tokens(), without accepting it; an error when
  // Accept would fail. One token at a time, by its bytes: the reference Mask is checked against, and
  // a check for a token chosen elsewhere (a draft model's).
  Result<int> ShortestCompletionAfter(int32_t token);
  // The output so far is a complete sentence: an end token may come next.
  bool complete() const;
  // Nothing but an end token can come next (or one was accepted).
  bool must_end() const;
  // An end token was accepted.
  bool finished() const { return finished_; }
  // The last Mask found no token within the budget and allowed the ones closest to a completion.
  bool budget_exceeded() const { return budget_exceeded_; }
  void Reset();

  const Grammar& grammar() const { return *grammar_; }

 private:
  static constexpr uint32_t kNoFrame = UINT32_MAX;
  static constexpr size_t kMaxConfigs = 4096;
  // One level of the parse stack, shared by the configurations above it: where this rule's
  // alternative continues, and the shortest completion of it and everything below.
  struct Frame {
    uint32_t pos;
    uint32_t parent;
    uint32_t cost;
  };
  // One way the output so far can be parsed. frame == kNoFrame: a complete sentence.
  struct Config {
    uint32_t frame;
    uint32_t chars;  // in a string body: characters so far
    int32_t excl;    // in a string body: node of the excluded-values trie still matched, or -1
    uint8_t lex;     // in a string body: a json_string state
  };
  // The walk's state after the bytes from the root to one trie node.
  struct Level {
    std::vector<Config> configs;
    size_t frame_mark = 0;  // frames_ size after this level's frames were made
    uint32_t cost = 0;
    ByteSet next;
  };

  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab);

  uint32_t NewFrame(uint32_t pos, uint32_t parent);
  Config StartConfig(uint32_t frame) const;
  // Appends the configurations that start at element `pos` with `parent` below (rules expanded until
  // each top is a terminal).
  void Expand(uint32_t pos, uint32_t parent, std::vector<Config>* out);
  void Advance(uint32_t frame, std::vector<Config>* out);
  void Step(const Config& c, uint8_t byte, std::vector<Config>* out);
  void StepAll(const std::vector<Config>& in, uint8_t byte, std::vector<Config>* out);
  void Dedup(std::vector<Config>* configs) const;
  void Prune(std::vector<Config>* configs) const;  // down to kMaxConfigs
  bool SameStack(uint32_t a, uint32_t b) const;
  uint32_t Cost(const Config& c) const;
  uint32_t MinCost(const std::vector<Config>& configs) const;
  ByteSet NextBytes(const std::vector<Config>& configs) const;
  void Compact();
  // Steps the current configurations over a token's bytes into tmp_a_ (frames_ grows).
  Status StepToken(int32_t token);

  void ComputeAllowed();
  void OfferAll();
  void Offer(int32_t token, uint32_t cost);  // allow it if it fits the budget, else note the nearest miss
  // Offers every token the configurations can take; first_bytes (optional) limits the first byte.
  void WalkTrie(const std::vector<Config>& configs, const ByteSet* first_bytes);
  void StringFastPath(const Config& c);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<ByteSet> lex_next_;  // per json_string state: the bytes that may follow

  std::vector<Frame> frames_;
  std::vector<Config> configs_;
  int min_tokens_ = 0;
  int remaining_ = kUnlimited;
  bool finished_ = false;

  // Scratch, kept to avoid allocation per step.
  std::vector<uint64_t> allowed_;
  bool allowed_valid_ = false;
  bool any_allowed_ = false;
  bool budget_exceeded_ = false;
  int64_t limit_ = 0;  // cost a token may leave: remaining_ - 1
  uint32_t best_over_ = 0;  // least cost among tokens the budget turned away
  std::vector<Level> levels_;
  std::vector<Config> walk_configs_, tmp_a_, tmp_b_, closing_;
  std::vector<uint32_t> remap_;
  std::vector<std::pair<int32_t, bool>> saved_;
  std::vector<std::pair<uint32_t, uint32_t>> work_;  // Expand's pending (pos, parent)
};

}  // namespace gemlet

// Structured output for the decode loop: a GrammarMatcher (sampling/grammar_matcher.h) behind the
// Generator's TokenConstraint, and the engine's token vocabulary for it (built once per model).
#pragma once

#include <memory>
#include <string_view>

#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/grammar_matcher.h"
#include "sampling/token_trie.h"

namespace gemlet::runtime {

// Every token's bytes as the detokenizer writes them (byte-fallback tokens their byte, pieces their
// text with ▁ as a space), control/unknown/unused tokens marked special, and the end tokens.
Result<std::shared_ptr<const TokenVocabulary>> BuildTokenVocabulary(const Engine& engine);

class GrammarConstraint : public TokenConstraint {
 public:
  // For OpenAI's response_format as JSON text; nullptr (no constraint) for {"type":"text"}. Fails
  // (kInvalidArgument) on a schema outside the supported subset, or when max_tokens cannot hold the
  // shortest valid output.
  static Result<std::unique_ptr<GrammarConstraint>> ForResponseFormat(std::string_view response_format,
                                                                      std::shared_ptr<const TokenVocabulary> vocab,
                                                                      const Engine& engine, int max_tokens);
  void Mask(float* logits, int remaining_tokens) override;
  Status Accept(int32_t token) override;

 private:
  GrammarConstraint(GrammarMatcher matcher, const Engine& engine, size_t n_vocab)
      : matcher_(std::move(matcher)), engine_(engine), n_vocab_(n_vocab) {}
  GrammarMatcher matcher_;
  const Engine& engine_;
  size_t n_vocab_;
};

}  // namespace gemlet::runtime

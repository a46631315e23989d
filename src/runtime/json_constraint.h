// Structured output for the decode loop: a GrammarMatcher (sampling/grammar_matcher.h) behind the
// Generator's TokenConstraint, and the engine's token vocabulary for it (built once per model).
#pragma once

#include <memory>
#include <mutex>
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

// The engine's token vocabulary for grammars, built on first use (16 MiB for 262k tokens, about
// 0.2 s) and shared by every constraint after. Thread-safe.
class TokenVocabularyCache {
 public:
  Result<std::shared_ptr<const TokenVocabulary>> Get(const Engine& engine);

 private:
  std::mutex mutex_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
};

// What constrains a request's sampling, from its public options: the tool_choice the prompt cannot
// express ("required", a named function, "none") and response_format's grammar; nullptr for free
// text. kInvalidArgument for a bad tool_choice or schema, or the two constraining one answer at once.
// n_ctx bounds the output when options.max_tokens does not.
Result<std::unique_ptr<TokenConstraint>> MakeOutputConstraint(const Engine& engine, const GenerateOptions& options,
                                                             int n_ctx, TokenVocabularyCache& vocabulary);

}  // namespace gemlet::runtime

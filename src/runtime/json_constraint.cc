// The grammar matcher as the decode loop's constraint: the budget is set before each mask, end
// tokens (which the mask allows only once the value is complete) end the answer unmatched.
#include "runtime/json_constraint.h"

#include "sampling/json_schema.h"

namespace gemlet::runtime {

Result<std::shared_ptr<const TokenVocabulary>> BuildTokenVocabulary(const Engine& engine) {
  const Tokenizer& tok = engine.tokenizer();
  std::vector<std::string> bytes;
  std::vector<bool> special;
  bytes.reserve(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    bytes.push_back(tok.TokenBytes(id));
    special.push_back(tok.IsSpecial(id));
  }
  return TokenVocabulary::Create(std::move(bytes), std::move(special), engine.end_of_generation());
}

Result<std::unique_ptr<GrammarConstraint>> GrammarConstraint::ForResponseFormat(
    std::string_view response_format, std::shared_ptr<const TokenVocabulary> vocab, const Engine& engine,
    int max_tokens) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar, GrammarForResponseFormat(response_format));
  if (!grammar) return std::unique_ptr<GrammarConstraint>();
  ASSIGN_OR_RETURN(GrammarMatcher matcher, GrammarMatcher::Create(std::move(grammar), std::move(vocab)));
  if (max_tokens < matcher.min_tokens()) {
    return Status::Error(StatusCode::kInvalidArgument,
                         "max_tokens " + std::to_string(max_tokens) + " cannot hold the shortest output the format allows (" +
                             std::to_string(matcher.min_tokens()) + " tokens)");
  }
  return std::unique_ptr<GrammarConstraint>(
      new GrammarConstraint(std::move(matcher), engine, static_cast<size_t>(engine.config().n_vocab)));
}

void GrammarConstraint::Mask(float* logits, int remaining_tokens) {
  matcher_.SetRemainingTokens(remaining_tokens);
  matcher_.Mask(logits, n_vocab_);
}

Status GrammarConstraint::Accept(int32_t token) {
  if (engine_.IsEndOfGeneration(token)) return Status::Ok();  // the answer ends here
  return matcher_.Accept(token);
}

}  // namespace gemlet::runtime

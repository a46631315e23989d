// The grammar matcher as the decode loop's constraint: the budget is set before each mask, end
// tokens (which the mask allows only once the value is complete) end the answer unmatched.
#include "runtime/json_constraint.h"

#include "runtime/tool_calls.h"

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

Result<std::shared_ptr<const TokenVocabulary>> TokenVocabularyCache::Get(const Engine& engine) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!vocabulary_) {
    ASSIGN_OR_RETURN(vocabulary_, BuildTokenVocabulary(engine));
  }
  return vocabulary_;
}

Result<std::unique_ptr<TokenConstraint>> MakeOutputConstraint(const Engine& engine, const GenerateOptions& options,
                                                             int n_ctx, TokenVocabularyCache& vocabulary) {
  ASSIGN_OR_RETURN(const ToolChoice choice, ParseToolChoice(options.tool_choice));
  ASSIGN_OR_RETURN(std::unique_ptr<TokenConstraint> tool_constraint, ToolChoiceConstraint(choice, engine));
  if (options.response_format.empty()) return tool_constraint;
  ASSIGN_OR_RETURN(std::shared_ptr<const TokenVocabulary> vocab, vocabulary.Get(engine));
  const int max_tokens = options.max_tokens > 0 ? options.max_tokens : n_ctx;
  ASSIGN_OR_RETURN(std::unique_ptr<GrammarConstraint> c,
                   GrammarConstraint::ForResponseFormat(options.response_format, std::move(vocab), engine, max_tokens));
  // A grammar never lets a special token through, <|tool_call> included: it serves "none" as it is.
  if (c && tool_constraint && choice.mode != ToolChoice::kNone) {
    return Status::Error(StatusCode::kInvalidArgument,
                         "a required tool_choice and a response_format cannot both constrain one answer");
  }
  if (c) return std::unique_ptr<TokenConstraint>(std::move(c));
  return tool_constraint;
}

}  // namespace gemlet::runtime

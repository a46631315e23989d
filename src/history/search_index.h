// What the history store's FTS5 table holds for a message, and the MATCH expression of a query:
// tokens as text in a plaintext store, their keyed hashes in an encrypted one.
#pragma once

#include <string>
#include <string_view>

#include "history/crypto.h"
#include "history/search_tokens.h"

namespace gemlet::history {

struct IndexRow {
  std::string grams;  // space-separated tokens (FTS5's ascii tokenizer splits on the spaces only)
  std::string chars;
};
// keys == nullptr: a plaintext store.
IndexRow MakeIndexRow(std::string_view text, const Keys* keys);

// `grams : "a b" AND chars : "c"`: every term of the query, a CJK run as the phrase of its bigrams.
// Empty when the query has no word and no CJK character.
std::string MatchExpression(const std::vector<QueryTerm>& terms, const Keys* keys);

}  // namespace gemlet::history

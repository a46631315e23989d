// Search tokens of the history store: overlapping bigrams of Chinese/Japanese/Korean runs, single
// CJK characters, and case-folded words, computed the same way for what is stored and for a query.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gemlet::history {

// FTS5's trigram tokenizer matches nothing shorter than three characters and unicode61 keeps a
// CJK run as one token, so neither finds the two-character words Chinese is made of. We tokenize
// ourselves and give FTS5 space-separated tokens: a bigram index finds any run of two or more CJK
// characters as a phrase of its bigrams, and single characters have a column of their own.
struct IndexTokens {
  std::vector<std::string> grams;  // words and CJK bigrams, in text order (phrases need the order)
  std::vector<std::string> chars;  // every CJK character, in text order
};
IndexTokens TokenizeForIndex(std::string_view text);

// One run of a query: a word (one token), a CJK run of two or more characters (its bigrams, a
// phrase), or a single CJK character (searched in IndexTokens::chars).
struct QueryTerm {
  bool single_char = false;
  std::vector<std::string> tokens;
  std::string text;  // the run as the query wrote it (case-folded), for snippets
};
std::vector<QueryTerm> TokenizeQuery(std::string_view text);

// Words longer than this many bytes are cut (stored and queried alike): no token is unbounded.
inline constexpr size_t kMaxWordBytes = 64;

}  // namespace gemlet::history

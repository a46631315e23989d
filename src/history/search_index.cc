// Index rows and MATCH expressions of the history store's search.
#include "history/search_index.h"

namespace gemlet::history {
namespace {

std::string Join(const std::vector<std::string>& tokens, const Keys* keys) {
  std::string out;
  for (const std::string& t : tokens) {
    if (!out.empty()) out += ' ';
    out += keys ? keys->TokenHash(t) : t;
  }
  return out;
}

}  // namespace

IndexRow MakeIndexRow(std::string_view text, const Keys* keys) {
  const IndexTokens tokens = TokenizeForIndex(text);
  return {Join(tokens.grams, keys), Join(tokens.chars, keys)};
}

std::string MatchExpression(const std::vector<QueryTerm>& terms, const Keys* keys) {
  std::string out;
  for (const QueryTerm& term : terms) {
    if (!out.empty()) out += " AND ";
    // Tokens are letters, digits, CJK or hex: none holds a double quote to escape.
    out += term.single_char ? "chars : \"" : "grams : \"";
    out += Join(term.tokens, keys);
    out += '"';
  }
  return out;
}

}  // namespace gemlet::history

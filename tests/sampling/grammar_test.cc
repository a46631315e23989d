// Grammar and GrammarMatcher on a small synthetic vocabulary: grammar analysis, which tokens a state
// masks, UTF-8 and escapes in strings, bounded whitespace, end tokens, the token budget.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sampling/grammar_test_util.h"

namespace gemlet {
namespace {

using test::SyntheticVocab;

GrammarMatcher MakeMatcher(const std::string& schema) {
  auto g = test::MustCompile(schema);
  auto m = GrammarMatcher::Create(g, SyntheticVocab().vocab);
  EXPECT_TRUE(m.ok()) << m.message();
  return std::move(*m);
}

int32_t Tok(const std::string& bytes) {
  const int32_t id = SyntheticVocab().Find(bytes);
  EXPECT_GE(id, 0) << "no synthetic token for '" << bytes << "'";
  return id;
}

// Accepts the tokens that spell `text`, one token per listed piece.
void AcceptAll(GrammarMatcher& m, const std::vector<std::string>& pieces) {
  for (const std::string& p : pieces) {
    const Status st = m.Accept(Tok(p));
    ASSERT_TRUE(st.ok()) << "piece '" << p << "': " << st.message();
  }
}

TEST(GrammarBuilderTest, ShortestSentenceAndDeadAlternatives) {
  GrammarBuilder b;
  const int root = b.AddRule("root");
  const int loop = b.AddRule("loop");  // loop ::= 'x' loop: no finite expansion
  b.AddAlternative(loop, GrammarBuilder::Sequence().Literal("x").Ref(loop));
  b.AddAlternative(root, GrammarBuilder::Sequence().Literal("abc"));
  b.AddAlternative(root, GrammarBuilder::Sequence().Literal("a").Ref(loop));
  auto g = std::move(b).Build(root);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->min_length(), 3u);
  // The dead alternative is gone: only "abc" remains.
  EXPECT_EQ(g->alternatives_end(root) - g->alternatives_begin(root), 1);
}

TEST(GrammarBuilderTest, RefusesLeftRecursionAndInfiniteRoots) {
  {
    GrammarBuilder b;
    const int a = b.AddRule("a");
    const int c = b.AddRule("c");
    b.AddAlternative(a, GrammarBuilder::Sequence().Ref(c).Literal("x"));
    b.AddAlternative(c, GrammarBuilder::Sequence());
    b.AddAlternative(c, GrammarBuilder::Sequence().Ref(a));
    auto g = std::move(b).Build(a);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.message().find("left-recursive"), std::string::npos) << g.message();
  }
  {
    GrammarBuilder b;
    const int a = b.AddRule("a");
    b.AddAlternative(a, GrammarBuilder::Sequence().Literal("(").Ref(a).Literal(")"));
    auto g = std::move(b).Build(a);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.message().find("no finite expansion"), std::string::npos) << g.message();
  }
}

TEST(TokenVocabularyTest, TrieHoldsOrdinaryTokensOnly) {
  const test::TestVocab& v = SyntheticVocab();
  const TokenTrie& t = v.vocab->trie();
  size_t ordinary = 0;
  for (int32_t id = 0; id < v.vocab->size(); ++id) ordinary += !v.vocab->is_excluded(id);
  EXPECT_EQ(t.tokens.size(), ordinary);
  // Walking each token's bytes from the root finds it at the node where they end.
  for (int32_t id : {Tok("{\""), Tok("a"), Tok("abc"), Tok("\xE4\xBD")}) {
    uint32_t node = 0;
    for (char c : v.bytes[id]) {
      uint32_t child = node + 1;
      while (child < t.skip[node] && t.byte[child] != static_cast<uint8_t>(c)) child = t.skip[child];
      ASSERT_LT(child, t.skip[node]);
      node = child;
    }
    bool found = false;
    for (uint32_t k = t.token_begin[node]; k < t.token_begin[node + 1]; ++k) found = found || t.tokens[k] == id;
    EXPECT_TRUE(found) << v.bytes[id];
  }
  EXPECT_TRUE(v.vocab->is_end(1));
  EXPECT_TRUE(v.vocab->is_excluded(2));  // <start_of_turn>
  EXPECT_TRUE(v.vocab->is_excluded(4));  // the empty token
}

TEST(GrammarMatcherTest, MasksTokensThatBreakTheJson) {
  GrammarMatcher m = MakeMatcher(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
                                     "required":["name","age"]})");
  EXPECT_EQ(m.min_tokens(), static_cast<int>(std::string(R"({"name":"","age":0})").size()));
  EXPECT_TRUE(m.IsAllowed(Tok("{")));
  EXPECT_TRUE(m.IsAllowed(Tok("{\"")));
  EXPECT_TRUE(m.IsAllowed(Tok("{\"name\":")));
  EXPECT_FALSE(m.IsAllowed(Tok("{\"id\":")));  // not a property of the schema
  EXPECT_FALSE(m.IsAllowed(Tok("[")));
  EXPECT_FALSE(m.IsAllowed(Tok(" ")));  // no whitespace before the value
  EXPECT_FALSE(m.IsAllowed(Tok("{}")));  // required properties
  EXPECT_FALSE(m.IsAllowed(Tok("\"")));
  for (int32_t special = 0; special < 5; ++special) EXPECT_FALSE(m.IsAllowed(special)) << special;
  AcceptAll(m, {"{\"name\":", " \"", "hello"});
  // Inside the string: text and escapes continue it, raw control characters and bad escapes do not.
  EXPECT_TRUE(m.IsAllowed(Tok(" world")));
  EXPECT_TRUE(m.IsAllowed(Tok("\\n")));
  EXPECT_TRUE(m.IsAllowed(Tok("\\\"")));
  EXPECT_TRUE(m.IsAllowed(Tok("\",\"")));
  EXPECT_FALSE(m.IsAllowed(Tok("\n")));
  EXPECT_FALSE(m.IsAllowed(Tok("\t")));
  EXPECT_FALSE(m.IsAllowed(Tok("\"}")));  // closes the object without the required "age"
  EXPECT_FALSE(m.IsAllowed(Tok("\\ud83d")));  // surrogate escapes are never written
  EXPECT_FALSE(m.IsAllowed(1));  // <eos>: the value is not complete
  // A token the mask excludes is refused, and the state stays as it was.
  const Status bad = m.Accept(Tok("\n"));
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(m.IsAllowed(Tok(" world")));
  AcceptAll(m, {"\", \"", "age", "\":", "12"});
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.IsAllowed(Tok("}")));
  EXPECT_TRUE(m.IsAllowed(Tok("00")));
  EXPECT_FALSE(m.IsAllowed(Tok("0.5")));  // an integer has no fraction
  EXPECT_FALSE(m.IsAllowed(Tok("\"")));
  AcceptAll(m, {"}"});
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.must_end());
  for (int32_t id = 0; id < SyntheticVocab().vocab->size(); ++id) {
    EXPECT_EQ(m.IsAllowed(id), SyntheticVocab().vocab->is_end(id)) << id;
  }
  EXPECT_TRUE(m.Accept(3).ok());  // <end_of_turn>
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.Accept(Tok("a")).ok());
}

TEST(GrammarMatcherTest, EndTokensOnlyWhenComplete) {
  GrammarMatcher m = MakeMatcher(R"({"type":"integer"})");
  EXPECT_FALSE(m.IsAllowed(1));
  EXPECT_FALSE(m.Accept(1).ok());
  AcceptAll(m, {"12"});
  // "12" is complete and may also go on: both the end tokens and more digits are allowed.
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.must_end());
  EXPECT_TRUE(m.IsAllowed(1));
  EXPECT_TRUE(m.IsAllowed(3));
  EXPECT_TRUE(m.IsAllowed(Tok("00")));
  EXPECT_FALSE(m.IsAllowed(Tok(" ")));  // no trailing whitespace
  EXPECT_FALSE(m.IsAllowed(2));         // <start_of_turn> never
}

TEST(GrammarMatcherTest, MaskWritesMinusInfinityExactlyWhereNotAllowed) {
  GrammarMatcher m = MakeMatcher(R"({"type":"array","items":{"type":"boolean"}})");
  const int32_t n = SyntheticVocab().vocab->size();
  std::vector<float> logits(n + 70, 1.5f);  // padded past the vocabulary, as output matrices are
  m.Mask(logits.data(), logits.size());
  const std::vector<uint64_t>& allowed = m.AllowedTokens();
  int kept = 0;
  for (int32_t i = 0; i < n; ++i) {
    const bool bit = (allowed[i >> 6] >> (i & 63)) & 1;
    EXPECT_EQ(std::isinf(logits[i]) && logits[i] < 0, !bit) << i;
    if (bit) {
      EXPECT_EQ(logits[i], 1.5f);
    }
    kept += bit;
  }
  for (size_t i = n; i < logits.size(); ++i) EXPECT_TRUE(std::isinf(logits[i])) << i;
  EXPECT_GT(kept, 0);
  EXPECT_TRUE(m.IsAllowed(Tok("[")));
  EXPECT_TRUE(m.IsAllowed(Tok("[]")));
  EXPECT_FALSE(m.IsAllowed(Tok("[\"")));
}

TEST(GrammarMatcherTest, Utf8SplitAcrossTokensStaysValid) {
  GrammarMatcher m = MakeMatcher(R"({"type":"string"})");
  AcceptAll(m, {"\""});
  // Bad sequences never start: overlong, surrogate, above U+10FFFF, a lone continuation byte.
  EXPECT_FALSE(m.IsAllowed(Tok("\xC0\xAF")));
  EXPECT_FALSE(m.IsAllowed(Tok("\xE0\x80\xAF")));
  EXPECT_FALSE(m.IsAllowed(Tok("\xED\xA0\x80")));
  EXPECT_FALSE(m.IsAllowed(Tok("\xF4\x90\x80\x80")));
  EXPECT_FALSE(m.IsAllowed(Tok("\xA0")));
  EXPECT_FALSE(m.IsAllowed(Tok("\xFF")));
  EXPECT_TRUE(m.IsAllowed(Tok("你好")));
  EXPECT_TRUE(m.IsAllowed(Tok("\xF0\x9F\x98\x80")));
  // "你" = E4 BD A0, split as the tokens "E4 BD" and "A0".
  EXPECT_TRUE(m.IsAllowed(Tok("\xE4\xBD")));
  AcceptAll(m, {"\xE4\xBD"});
  EXPECT_TRUE(m.IsAllowed(Tok("\xA0")));
  for (const char* bad : {"\"", "a", "你", "\xE4\xBD", "\\n", "\x98\x80"}) EXPECT_FALSE(m.IsAllowed(Tok(bad))) << bad;
  AcceptAll(m, {"\xA0"});
  // A 4-byte emoji as F0 9F + 98 80, then single bytes 0xE4 0xBD 0xA0 (byte-fallback tokens).
  AcceptAll(m, {"\xF0\x9F"});
  EXPECT_FALSE(m.IsAllowed(Tok("\"")));
  EXPECT_FALSE(m.IsAllowed(Tok("\xF0\x9F")));
  AcceptAll(m, {"\x98\x80", std::string(1, '\xE4'), std::string(1, '\xBD'), std::string(1, '\xA0'), "\""});
  EXPECT_TRUE(m.must_end());
}

TEST(GrammarMatcherTest, RandomStringsAreValidUtf8AndParse) {
  GrammarMatcher m = MakeMatcher(R"({"type":"array","items":{"type":"string"},"maxItems":4})");
  test::Rng rng(7);
  int multibyte = 0;
  for (int i = 0; i < 300; ++i) {
    m.Reset();
    const test::Generation gen = test::Generate(m, SyntheticVocab(), 40, rng);
    ASSERT_TRUE(gen.error.empty()) << gen.error;
    ASSERT_TRUE(test::IsStrictUtf8(gen.text)) << gen.text;
    const nlohmann::json j = nlohmann::json::parse(gen.text);  // throws, failing the test, if invalid
    ASSERT_TRUE(j.is_array());
    for (const auto& s : j) multibyte += s.get<std::string>().find_first_of("\xE4\xF0\xC3") != std::string::npos;
  }
  EXPECT_GT(multibyte, 10);
}

TEST(GrammarMatcherTest, ExtraPropertiesNeverRepeatAListedKey) {
  GrammarMatcher m = MakeMatcher(R"({"type":"object","properties":{"name":{"type":"integer"}},"required":["name"],
                                     "additionalProperties":{"type":"string"}})");
  AcceptAll(m, {"{\"name\":", "12", ",", "\""});
  // The extra key may start like the listed one ("names") but not be it.
  EXPECT_TRUE(m.IsAllowed(Tok("name")));
  EXPECT_TRUE(m.IsAllowed(Tok("a")));
  EXPECT_TRUE(m.IsAllowed(Tok("\":")));     // the empty key
  EXPECT_FALSE(m.IsAllowed(Tok("\\n")));    // no escapes while it still spells "name"
  AcceptAll(m, {"name"});
  EXPECT_FALSE(m.IsAllowed(Tok("\"")));
  EXPECT_FALSE(m.IsAllowed(Tok("\":")));
  EXPECT_TRUE(m.IsAllowed(Tok("x")));
  EXPECT_TRUE(m.IsAllowed(Tok("\\n")));     // "name\n" differs from "name" already
  AcceptAll(m, {"x", "\":", "\"", "hello", "\"}"});
  EXPECT_TRUE(m.must_end());
  // Random outputs never hold "name" twice: the last one (an extra) would then have to be an integer.
  test::Rng rng(5);
  for (int i = 0; i < 200; ++i) {
    m.Reset();
    const test::Generation gen = test::Generate(m, SyntheticVocab(), 60, rng);
    ASSERT_TRUE(gen.error.empty()) << gen.error;
    // Count the keys as the parser sees them (a parser keeps only the last of duplicates).
    size_t keys = 0;
    const nlohmann::json j = nlohmann::json::parse(gen.text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed == "name") ++keys;
      return true;
    });
    EXPECT_TRUE(j["name"].is_number_integer()) << gen.text;
    EXPECT_EQ(keys, 1u) << gen.text;
  }
}

TEST(GrammarMatcherTest, AmbiguousRecursionStaysBounded) {
  // Two identical recursive branches: the parses double with every '['. The matcher keeps a bounded
  // number of them, and outputs still finish and validate.
  const char* schema = R"({"$defs":{"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2},
                                                {"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}]}},
                          "$ref":"#/$defs/n"})";
  GrammarMatcher m = MakeMatcher(schema);
  test::SchemaValidator validator(nlohmann::json::parse(schema));
  test::Rng rng(17);
  for (int i = 0; i < 40; ++i) {
    m.Reset();
    // 12 levels deep first: 4096 parses of the prefix without the bound.
    const std::string prefix(12, '[');
    for (char c : prefix) ASSERT_TRUE(m.Accept(Tok(std::string(1, c))).ok());
    const test::Generation gen = test::Generate(m, SyntheticVocab(), 60, rng);
    ASSERT_TRUE(gen.error.empty()) << gen.error;
    EXPECT_TRUE(m.complete() || m.finished()) << prefix + gen.text;
    EXPECT_EQ(validator.Check(nlohmann::json::parse(prefix + gen.text)), "") << prefix + gen.text;
  }
}

TEST(GrammarMatcherTest, WhitespaceIsBounded) {
  GrammarMatcher m = MakeMatcher(R"({"type":"array","items":{"type":"integer"}})");
  AcceptAll(m, {"["});
  EXPECT_TRUE(m.IsAllowed(Tok(" ")));
  EXPECT_TRUE(m.IsAllowed(Tok("\n    ")));
  AcceptAll(m, {" "});
  EXPECT_FALSE(m.IsAllowed(Tok(" ")));  // one space at most
  EXPECT_FALSE(m.IsAllowed(Tok("\n")));
  AcceptAll(m, {"12", "\n", "    ", "    ", "    "});
  EXPECT_TRUE(m.IsAllowed(Tok("    ")));  // 16 spaces of indentation in all
  AcceptAll(m, {"    "});
  EXPECT_FALSE(m.IsAllowed(Tok(" ")));
  EXPECT_FALSE(m.IsAllowed(Tok("\n")));
  EXPECT_TRUE(m.IsAllowed(Tok(",")));
  EXPECT_TRUE(m.IsAllowed(Tok("]")));
}

TEST(GrammarMatcherTest, CompactOptionAllowsNoWhitespace) {
  auto g = CompileJsonSchema(R"({"type":"array","items":{"type":"integer"}})", JsonGrammarOptions{.whitespace = false});
  ASSERT_TRUE(g.ok()) << g.message();
  auto m = GrammarMatcher::Create(std::make_shared<const Grammar>(std::move(*g)), SyntheticVocab().vocab);
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_TRUE(m->Accept(Tok("[")).ok());
  EXPECT_FALSE(m->IsAllowed(Tok(" ")));
  EXPECT_FALSE(m->IsAllowed(Tok("\n")));
  EXPECT_TRUE(m->IsAllowed(Tok("12")));
}

TEST(GrammarMatcherTest, BudgetForcesTheShortestCompletion) {
  GrammarMatcher m = MakeMatcher(R"({"type":"object","properties":{"note":{"type":"string"}},"required":["note"]})");
  // {"note":""} is 11 bytes.
  ASSERT_EQ(m.min_tokens(), 11);
  AcceptAll(m, {"{\"", "note", "\":", "\""});
  EXPECT_EQ(m.remaining_min_tokens(), 2);
  m.SetRemainingTokens(3);  // this token and two more: one character may still come
  EXPECT_TRUE(m.IsAllowed(Tok("a")));
  EXPECT_TRUE(m.IsAllowed(Tok("hello")));
  EXPECT_TRUE(m.IsAllowed(Tok("\"")));
  EXPECT_FALSE(m.IsAllowed(Tok("\xE4\xBD")));  // would need a continuation byte, the quote and the brace
  m.SetRemainingTokens(2);  // now nothing but closing
  EXPECT_FALSE(m.IsAllowed(Tok("a")));
  EXPECT_TRUE(m.IsAllowed(Tok("\"")));
  EXPECT_TRUE(m.IsAllowed(Tok("\"}")));
  m.SetRemainingTokens(1);  // only a token that finishes everything
  EXPECT_FALSE(m.IsAllowed(Tok("\"")));
  EXPECT_TRUE(m.IsAllowed(Tok("\"}")));
  EXPECT_FALSE(m.budget_exceeded());
}

TEST(GrammarMatcherTest, BudgetBelowTheMinimumIsReported) {
  GrammarMatcher m = MakeMatcher(R"({"type":"object","properties":{"note":{"type":"string"}},"required":["note"]})");
  m.SetRemainingTokens(3);
  (void)m.AllowedTokens();
  EXPECT_TRUE(m.budget_exceeded());
  // It still steers toward the shortest completion: the longest useful token.
  EXPECT_TRUE(m.IsAllowed(Tok("{\"")));
  EXPECT_FALSE(m.IsAllowed(Tok("{")));
}

TEST(GrammarMatcherTest, TerminatesJustAboveTheMinimum) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"string","minLength":3},
      "b":{"type":"array","items":{"type":"string"},"minItems":2},"c":{"enum":["red","green"]}},"required":["a","b","c"]})";
  GrammarMatcher m = MakeMatcher(schema);
  test::SchemaValidator validator(nlohmann::json::parse(schema));
  test::Rng rng(11);
  for (int extra = 0; extra <= 3; ++extra) {
    for (int i = 0; i < 100; ++i) {
      m.Reset();
      const test::Generation gen = test::Generate(m, SyntheticVocab(), m.min_tokens() + extra, rng);
      ASSERT_TRUE(gen.error.empty()) << gen.error;
      ASSERT_TRUE(m.complete() || m.finished()) << gen.text;
      EXPECT_FALSE(m.budget_exceeded());
      const nlohmann::json j = nlohmann::json::parse(gen.text);
      EXPECT_EQ(validator.Check(j), "") << gen.text;
    }
  }
}

}  // namespace
}  // namespace gemlet

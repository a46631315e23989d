// GrammarMatcher on the real Gemma 3 vocabulary (262,144 tokens, byte-fallback <0xNN> tokens): 200
// random-logit outputs per test schema parse and validate, outputs finish just above the minimum
// budget, strings stay valid UTF-8 across byte tokens, and the mask agrees token by token with an
// independent check of what may continue a JSON string.
#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <string>

#include "sampling/grammar_test_util.h"

// Sanitizer trees run a tenth of the random outputs and brute-force fewer states: the same checks,
// in the time of the rest of the tree (ASan's instrumented loops over 262k tokens are ~10x slower).
#if defined(GEMLET_TEST_SANITIZED)
constexpr int kOutputs = 20;
constexpr int kBruteForceEvery = 30;
#else
constexpr int kOutputs = 200;
constexpr int kBruteForceEvery = 6;
#endif

namespace gemlet {
namespace {

using test::Gemma3Vocab;

// Softmax sampling over masked i.i.d. random logits, done by rejection so that a step costs
// microseconds instead of 262,144 exponentials: draw an allowed token uniformly, accept it with
// probability exp(logit - max_logit). The accepted token has exactly the softmax distribution of the
// masked logits. `bias` (per token, optional) is added to the random logit.
int32_t SampleAllowed(const std::vector<uint64_t>& allowed, test::Rng& rng, float spread,
                      const std::vector<float>* bias, float max_bias) {
  uint64_t total = 0;
  for (uint64_t w : allowed) total += std::popcount(w);
  if (total == 0) return -1;
  for (;;) {
    uint64_t k = rng.Next() % total;
    size_t word = 0;
    while (k >= static_cast<uint64_t>(std::popcount(allowed[word]))) k -= std::popcount(allowed[word++]);
    uint64_t bits = allowed[word];
    for (; k > 0; --k) bits &= bits - 1;
    const int32_t token = static_cast<int32_t>(word * 64 + std::countr_zero(bits));
    const float logit = static_cast<float>(rng.Unit()) * spread + (bias ? (*bias)[token] : 0.0f);
    if (rng.Unit() < std::exp(logit - spread - max_bias)) return token;
  }
}

// `bias`: per token, added to its random logit; `biased`: bitset of the tokens with a bias (all the
// same, `max_bias`), so that a step without any of them allowed samples without rejections.
test::Generation GenerateFast(GrammarMatcher& m, int max_tokens, test::Rng& rng, const std::vector<float>* bias = nullptr,
                              const std::vector<uint64_t>* biased = nullptr, float max_bias = 0) {
  const test::TestVocab& v = Gemma3Vocab();
  test::Generation g;
  for (int produced = 0; produced < max_tokens; ++produced) {
    m.SetRemainingTokens(max_tokens - produced);
    if (m.must_end()) break;
    const std::vector<uint64_t>& allowed = m.AllowedTokens();
    float top = 0;
    if (biased) {
      for (size_t w = 0; w < allowed.size() && top == 0; ++w) top = (allowed[w] & (*biased)[w]) ? max_bias : 0.0f;
    }
    const int32_t token = SampleAllowed(allowed, rng, 4.0f, bias, top);
    if (token < 0) {
      g.error = "every token masked";
      return g;
    }
    g.tokens.push_back(token);
    if (v.vocab->is_end(token)) {
      g.ended = true;
      break;
    }
    const Status st = m.Accept(token);
    if (!st.ok()) {
      g.error = st.message();
      return g;
    }
    g.text += v.bytes[token];
  }
  return g;
}

GrammarMatcher MakeMatcher(const std::shared_ptr<const Grammar>& g) {
  auto m = GrammarMatcher::Create(g, Gemma3Vocab().vocab);
  EXPECT_TRUE(m.ok()) << m.message();
  return std::move(*m);
}

int32_t Tok(const std::string& bytes) {
  const int32_t id = Gemma3Vocab().Find(bytes);
  EXPECT_GE(id, 0) << "no Gemma 3 token for '" << bytes << "'";
  return id;
}

// Each test runs every schema (SCOPED_TRACE names it): one process loads the vocabulary once.
TEST(Gemma3SchemaTest, RandomOutputsParseAndValidate) {
  for (const test::TestSchema& s : test::TestSchemas()) {
    SCOPED_TRACE(s.name);
    auto grammar = test::GrammarFor(s);
    ASSERT_NE(grammar, nullptr);
    GrammarMatcher m = MakeMatcher(grammar);
    const test::SchemaValidator validator = test::ValidatorFor(s);
    test::Rng rng(0x9e3 + std::hash<std::string>()(s.name));
    for (int i = 0; i < kOutputs; ++i) {
      m.Reset();
      const int budget = m.min_tokens() + static_cast<int>(rng.Next() % 49);
      const test::Generation gen = GenerateFast(m, budget, rng);
      ASSERT_TRUE(gen.error.empty()) << gen.error;
      ASSERT_LE(static_cast<int>(gen.tokens.size()), budget);
      EXPECT_TRUE(m.complete() || m.finished()) << gen.text;
      EXPECT_FALSE(m.budget_exceeded());
      EXPECT_TRUE(test::IsStrictUtf8(gen.text)) << gen.text;
      test::CheckOutput(s, validator, gen.text);
    }
  }
}

// The decode loop's own path: Mask() on a full row of random logits, then softmax sampling.
TEST(Gemma3SchemaTest, MaskedLogitsSoftmaxSampling) {
  for (const test::TestSchema& s : test::TestSchemas()) {
    SCOPED_TRACE(s.name);
    GrammarMatcher m = MakeMatcher(test::GrammarFor(s));
    const test::SchemaValidator validator = test::ValidatorFor(s);
    test::Rng rng(0x10 + std::hash<std::string>()(s.name));
    for (int i = 0; i < 12; ++i) {
      m.Reset();
      const test::Generation gen = test::Generate(m, Gemma3Vocab(), m.min_tokens() + 24, rng);
      ASSERT_TRUE(gen.error.empty()) << gen.error;
      EXPECT_TRUE(m.complete() || m.finished()) << gen.text;
      test::CheckOutput(s, validator, gen.text);
    }
  }
}

TEST(Gemma3SchemaTest, FinishesJustAboveTheMinimumBudget) {
  for (const test::TestSchema& s : test::TestSchemas()) {
    SCOPED_TRACE(s.name);
    GrammarMatcher m = MakeMatcher(test::GrammarFor(s));
    const test::SchemaValidator validator = test::ValidatorFor(s);
    test::Rng rng(0x77 + std::hash<std::string>()(s.name));
    for (int extra = 0; extra <= 2; ++extra) {
      for (int i = 0; i < 40; ++i) {
        m.Reset();
        const test::Generation gen = GenerateFast(m, m.min_tokens() + extra, rng);
        ASSERT_TRUE(gen.error.empty()) << gen.error;
        EXPECT_TRUE(m.complete() || m.finished()) << "budget " << m.min_tokens() + extra << ": " << gen.text;
        EXPECT_FALSE(m.budget_exceeded());
        test::CheckOutput(s, validator, gen.text);
      }
    }
  }
}

// ---- an independent reading of which bytes may continue a JSON string ----
// Whether `s` is strict UTF-8 up to a possibly unfinished last character (whose bytes so far must be
// a possible start of one).
bool IsUtf8Prefix(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return false;
    for (int k = 1; k < len && i + k < s.size(); ++k) {
      const unsigned char d = s[i + k];
      if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return false;
    }
    i += len;
  }
  return true;
}

TEST(Gemma3GrammarTest, StringMaskAgreesWithAnIndependentCheck) {
  GrammarMatcher m = MakeMatcher(test::MustCompile(R"({"type":"array","items":{"type":"string"}})"));
  ASSERT_TRUE(m.Accept(Tok("[\"")).ok() || (m.Accept(Tok("[")).ok() && m.Accept(Tok("\"")).ok()));
  const test::TestVocab& v = Gemma3Vocab();
  int allowed = 0, checked = 0;
  for (int32_t id = 0; id < v.vocab->size(); ++id) {
    const std::string& b = v.bytes[id];
    if (b.find_first_of("\"\\") != std::string::npos) continue;  // closing and escapes: checked elsewhere
    const bool plain_text = !v.special[id] && !b.empty() &&
                            std::none_of(b.begin(), b.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }) &&
                            IsUtf8Prefix(b);
    EXPECT_EQ(m.IsAllowed(id), plain_text) << "token " << id << " '" << b << "'";
    allowed += plain_text;
    ++checked;
  }
  EXPECT_GT(allowed, 250000);  // nearly the whole vocabulary is text
  EXPECT_GT(checked, 260000);
}

TEST(Gemma3GrammarTest, SpecificTokensAreMasked) {
  GrammarMatcher m = MakeMatcher(test::GrammarFor(test::TestSchemas()[0]));  // "flat"
  EXPECT_TRUE(m.IsAllowed(Tok("{")));
  for (int32_t id : {0, 1, 2, 3, 105, 106, 262144}) EXPECT_FALSE(m.IsAllowed(id)) << id;
  EXPECT_FALSE(m.IsAllowed(Tok("[")));
  EXPECT_FALSE(m.IsAllowed(Tok(" {")));
  EXPECT_FALSE(m.IsAllowed(Tok("\n")));
  EXPECT_FALSE(m.IsAllowed(Tok("```")));
  ASSERT_TRUE(m.Accept(Tok("{")).ok());
  ASSERT_TRUE(m.Accept(Tok("\"")).ok());
  EXPECT_TRUE(m.IsAllowed(Tok("name")));
  EXPECT_FALSE(m.IsAllowed(Tok("title")));  // not a property
  EXPECT_FALSE(m.IsAllowed(Tok("age")));    // comes after the required "name"
  ASSERT_TRUE(m.Accept(Tok("name")).ok());
  ASSERT_TRUE(m.Accept(Tok("\":")).ok());
  ASSERT_TRUE(m.Accept(Tok(" \"")).ok());
  // In the string: text, escapes and quotes that close it are fine; raw newlines, tabs and turn
  // markers are not.
  EXPECT_TRUE(m.IsAllowed(Tok("Hello")));
  EXPECT_TRUE(m.IsAllowed(Tok(" world")));
  EXPECT_TRUE(m.IsAllowed(Tok("\",")));
  EXPECT_FALSE(m.IsAllowed(Tok("\n")));
  EXPECT_FALSE(m.IsAllowed(Tok("\n\n")));
  EXPECT_FALSE(m.IsAllowed(Tok("\t")));
  EXPECT_FALSE(m.IsAllowed(106));
  EXPECT_FALSE(m.IsAllowed(Tok("\"}")));  // "age" and "color" are required
}

TEST(Gemma3GrammarTest, ByteTokensBuildValidUtf8) {
  GrammarMatcher m = MakeMatcher(test::MustCompile(R"({"type":"string"})"));
  const test::TestVocab& v = Gemma3Vocab();
  ASSERT_TRUE(m.Accept(Tok("\"")).ok());
  // <0xFF> and lone continuation bytes can never be written; a lead byte can.
  const int32_t ff = v.vocab->size() > 0 ? Tok("\xFF") : -1, cont = Tok("\xA0"), lead = Tok("\xE4");
  EXPECT_FALSE(m.IsAllowed(ff));
  EXPECT_FALSE(m.IsAllowed(cont));
  EXPECT_TRUE(m.IsAllowed(lead));
  ASSERT_TRUE(m.Accept(lead).ok());
  // After E4 only a continuation byte fits: every allowed token starts with one.
  const std::vector<uint64_t>& allowed = m.AllowedTokens();
  int n = 0;
  for (int32_t id = 0; id < v.vocab->size(); ++id) {
    if (!((allowed[id >> 6] >> (id & 63)) & 1)) continue;
    ++n;
    const unsigned char first = v.bytes[id][0];
    EXPECT_TRUE(first >= 0x80 && first <= 0xBF) << id;
  }
  EXPECT_EQ(n, 64);  // the byte tokens <0x80>..<0xBF>
  ASSERT_TRUE(m.Accept(Tok("\xBD")).ok());
  ASSERT_TRUE(m.Accept(Tok("\xA0")).ok());
  ASSERT_TRUE(m.Accept(Tok("\"")).ok());
  EXPECT_TRUE(m.must_end());
  // A JSON parser reads back the character.
  EXPECT_EQ(nlohmann::json::parse("\"\xE4\xBD\xA0\"").get<std::string>(), "你");
}

TEST(Gemma3GrammarTest, ChineseTextInStrings) {
  // Random logits with a bias toward tokens that hold CJK characters (UTF-8 lead bytes E4..E9).
  const test::TestSchema& s = test::TestSchemas()[5];  // "strings"
  ASSERT_EQ(std::string(s.name), "strings");
  const test::TestVocab& v = Gemma3Vocab();
  std::vector<float> bias(v.vocab->size(), 0.0f);
  std::vector<uint64_t> biased((v.vocab->size() + 63) / 64, 0);
  for (int32_t id = 0; id < v.vocab->size(); ++id) {
    const std::string& b = v.bytes[id];
    if (!v.special[id] && !b.empty() && static_cast<unsigned char>(b[0]) >= 0xE4 && static_cast<unsigned char>(b[0]) <= 0xE9) {
      bias[id] = 6.0f;
      biased[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  GrammarMatcher m = MakeMatcher(test::GrammarFor(s));
  const test::SchemaValidator validator = test::ValidatorFor(s);
  test::Rng rng(2024);
  int chinese = 0;
  for (int i = 0; i < 100; ++i) {
    m.Reset();
    const test::Generation gen = GenerateFast(m, m.min_tokens() + 30, rng, &bias, &biased, 6.0f);
    ASSERT_TRUE(gen.error.empty()) << gen.error;
    test::CheckOutput(s, validator, gen.text);
    const nlohmann::json j = nlohmann::json::parse(gen.text);
    const std::string text = j["text"].get<std::string>();
    chinese += text.find("\xE4") != std::string::npos || text.find("\xE5") != std::string::npos ||
               text.find("\xE6") != std::string::npos || text.find("\xE7") != std::string::npos;
  }
  EXPECT_GT(chinese, 50);
}

// The fast paths (string tables, excluded-key subtrees, the trie walk, the budget) against brute
// force: at states along random outputs, every one of the 262,144 tokens is stepped on its own.
TEST(Gemma3GrammarTest, MaskEqualsBruteForceAtSampledStates) {
  const test::TestVocab& v = Gemma3Vocab();
  int states = 0;
  for (const char* name : {"flat", "nested", "strings", "one_of_definitions", "json_object"}) {
    SCOPED_TRACE(name);
    const test::TestSchema* s = nullptr;
    for (const test::TestSchema& t : test::TestSchemas()) s = std::string(t.name) == name ? &t : s;
    ASSERT_NE(s, nullptr);
    GrammarMatcher m = MakeMatcher(test::GrammarFor(*s));
    test::Rng rng(31 + std::hash<std::string>()(name));
    for (int output = 0; output < 2; ++output) {
      m.Reset();
      const int budget = m.min_tokens() + 14;
      for (int produced = 0; produced < budget && !m.must_end(); ++produced) {
        const int remaining = budget - produced;
        m.SetRemainingTokens(remaining);
        const std::vector<uint64_t> allowed = m.AllowedTokens();
        if (produced % kBruteForceEvery == 0 || remaining - m.remaining_min_tokens() < 3) {
          ++states;
          int mismatches = 0;
          for (int32_t id = 0; id < v.vocab->size() && mismatches < 5; ++id) {
            auto after = m.ShortestCompletionAfter(id);
            const bool expect = after.ok() && *after <= remaining - 1;
            const bool got = (allowed[id >> 6] >> (id & 63)) & 1;
            if (expect != got) {
              ++mismatches;
              ADD_FAILURE() << "token " << id << " '" << v.bytes[id] << "': mask " << got << ", brute force " << expect
                            << " (remaining " << remaining << ")";
            }
          }
        }
        const int32_t token = SampleAllowed(allowed, rng, 4.0f, nullptr, 0);
        if (v.vocab->is_end(token)) break;
        ASSERT_TRUE(m.Accept(token).ok());
      }
    }
  }
  EXPECT_GT(states, 40);
  std::printf("compared %d states\n", states);
}

}  // namespace
}  // namespace gemlet

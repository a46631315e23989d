// Grammar-constrained sampling on the real Gemma 3 vocabulary: how long GrammarMatcher::Mask takes per
// decode step, for several JSON schemas and states (median of many steps), plus the one-time costs.
//
//   gemlet_grammar_bench [--tokenizer-json PATH] [--outputs N]
//
// Without --tokenizer-json the Gemma 3 tokenizer.json is unpacked (xz) from the shared test data.
// Step times are CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), so that preemption on a
// shared machine does not count; one-time costs are wall-clock.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "sampling/grammar_matcher.h"
#include "sampling/json_schema.h"
#include "sampling/token_trie.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace gemlet;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct BenchVocab {
  std::shared_ptr<const TokenVocabulary> vocab;
  std::vector<std::string> bytes;
};

BenchVocab LoadGemma3(const std::string& tokenizer_json, double* build_seconds) {
  const std::string dir = std::filesystem::path(tokenizer_json).parent_path().string();
  auto meta = ReadTokenizerFile(tokenizer_json, dir, "gemma3");
  if (!meta.ok()) {
    std::fprintf(stderr, "%s\n", meta.message().c_str());
    std::exit(1);
  }
  auto v = VocabFromMetadata(*meta);
  if (!v.ok()) {
    std::fprintf(stderr, "%s\n", v.message().c_str());
    std::exit(1);
  }
  const Tokenizer tok(std::move(*v));
  BenchVocab out;
  std::vector<bool> special;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    out.bytes.push_back(tok.TokenBytes(id));
    special.push_back(tok.IsSpecial(id));
  }
  const double t0 = Now();
  auto made = TokenVocabulary::Create(out.bytes, special, {tok.eos_id(), tok.eot_id()});
  *build_seconds = Now() - t0;
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.message().c_str());
    std::exit(1);
  }
  out.vocab = *made;
  return out;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Unit() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t s_;
};

// Softmax over masked i.i.d. uniform logits, by rejection (see tests/sampling/grammar_gemma3_test.cc).
int32_t SampleAllowed(const std::vector<uint64_t>& allowed, Rng& rng) {
  uint64_t total = 0;
  for (uint64_t w : allowed) total += std::popcount(w);
  for (;;) {
    uint64_t k = rng.Next() % total;
    size_t word = 0;
    while (k >= static_cast<uint64_t>(std::popcount(allowed[word]))) k -= std::popcount(allowed[word++]);
    uint64_t bits = allowed[word];
    for (; k > 0; --k) bits &= bits - 1;
    if (rng.Unit() < std::exp(4.0 * rng.Unit() - 4.0)) return static_cast<int32_t>(word * 64 + std::countr_zero(bits));
  }
}

// Whether `text` (a JSON prefix) ends inside a string.
bool InString(const std::string& text) {
  bool in = false, escaped = false;
  for (char c : text) {
    if (escaped) {
      escaped = false;
    } else if (in && c == '\\') {
      escaped = true;
    } else if (c == '"') {
      in = !in;
    }
  }
  return in;
}

struct Stats {
  std::vector<double> ms;
  void Add(double v) { ms.push_back(v); }
  double Quantile(double q) {
    if (ms.empty()) return 0;
    std::sort(ms.begin(), ms.end());
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * (ms.size() - 1) + 0.5))];
  }
};

void PrintRow(const char* schema, const char* what, Stats& s) {
  if (s.ms.empty()) return;
  const size_t n = s.ms.size();
  std::printf("| %-14s | %-28s | %6zu | %7.3f | %7.3f | %7.3f |\n", schema, what, n, s.Quantile(0.5), s.Quantile(0.9),
              s.Quantile(1.0));
}

struct Schema {
  const char* name;
  const char* json;  // nullptr: json_object
};

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_json;
  int outputs = 100;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--tokenizer-json") && i + 1 < argc) {
      tokenizer_json = argv[++i];
    } else if (!std::strcmp(argv[i], "--outputs") && i + 1 < argc) {
      outputs = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--tokenizer-json PATH] [--outputs N]\n", argv[0]);
      return 2;
    }
  }
  std::string tmp_dir;
  if (tokenizer_json.empty()) {
    char tmpl[] = "/tmp/gemlet-grammar-bench-XXXXXX";
    tmp_dir = ::mkdtemp(tmpl) ? tmpl : "";
    const std::string xz = std::string(GEMLET_TESTDATA_DIR) + "/tokenizer/gemma3_tokenizer.json.xz";
    tokenizer_json = tmp_dir + "/tokenizer.json";
    const std::string cmd = "xz -dc '" + xz + "' > '" + tokenizer_json + "'";
    if (tmp_dir.empty() || std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "cannot unpack %s\n", xz.c_str());
      return 1;
    }
  }
  double build_s = 0;
  const BenchVocab v = LoadGemma3(tokenizer_json, &build_s);
  if (!tmp_dir.empty()) std::filesystem::remove_all(tmp_dir);
  const TokenTrie& trie = v.vocab->trie();
  std::printf("vocabulary: %d tokens, trie %u nodes (max depth %u), TokenVocabulary::Create %.0f ms\n", v.vocab->size(),
              trie.size(), trie.max_depth, build_s * 1e3);
  {
    // Tables are built on first use of each string state; build them all up front so that the step
    // times below are steady-state ones.
    const double t0 = Now();
    (void)v.vocab->string_table(json_string::kNormal);
    const double t1 = Now();
    for (uint8_t q = 0; q < json_string::kNumStates; ++q) (void)v.vocab->string_table(q);
    const double t2 = Now();
    std::printf("string table of one state (built once, on first use): %.1f ms; all %d states: %.0f ms; "
                "vocabulary heap with all tables %.1f MiB\n",
                (t1 - t0) * 1e3, json_string::kNumStates, (t2 - t0) * 1e3, v.vocab->Bytes() / 1048576.0);
  }

  const Schema schemas[] = {
      {"flat", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
          "active":{"type":"boolean"},"color":{"enum":["red","green","blue"]}},"required":["name","age","color"],
          "additionalProperties":false})"},
      {"nested+arrays", R"({"type":"object","properties":{"user":{"type":"object","properties":{
          "name":{"type":"string","maxLength":12},"tags":{"type":"array","items":{"type":"string"},"maxItems":4}},
          "required":["name","tags"]},"scores":{"type":"array","items":{"type":"number"},"minItems":1}},"required":["user","scores"]})"},
      {"recursive", R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
          "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["value"]}},"$ref":"#/$defs/node"})"},
      {"map", R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],
          "additionalProperties":{"type":"string"}})"},
      {"json_object", nullptr},
  };

  std::printf("\nMask() per decode step, random-logit generations (budget = minimum + 64 tokens), ms:\n\n");
  std::printf("| %-14s | %-28s | %6s | %7s | %7s | %7s |\n", "schema", "steps", "n", "median", "p90", "max");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(16, '-').c_str(), std::string(30, '-').c_str(),
              std::string(8, '-').c_str(), std::string(9, '-').c_str(), std::string(9, '-').c_str(),
              std::string(9, '-').c_str());
  std::vector<float> logits(v.vocab->size());
  std::vector<double> compile_ms;
  for (const Schema& s : schemas) {
    const double c0 = Now();
    auto g = s.json ? CompileJsonSchema(s.json) : Result<Grammar>(JsonObjectGrammar());
    if (!g.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, g.message().c_str());
      return 1;
    }
    auto grammar = std::make_shared<const Grammar>(std::move(*g));
    auto made = GrammarMatcher::Create(grammar, v.vocab);
    const double c1 = Now();
    if (!made.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, made.message().c_str());
      return 1;
    }
    GrammarMatcher& m = *made;
    Stats all, in_string, structure, tight;
    Rng rng(42);
    for (int o = 0; o < outputs; ++o) {
      m.Reset();
      const int budget = m.min_tokens() + 64;
      std::string text;
      for (int produced = 0; produced < budget; ++produced) {
        const int remaining = budget - produced;
        m.SetRemainingTokens(remaining);
        if (m.must_end()) break;
        std::fill(logits.begin(), logits.end(), 0.0f);
        const double t0 = ThreadCpu();
        m.Mask(logits.data(), logits.size());
        const double ms = (ThreadCpu() - t0) * 1e3;
        all.Add(ms);
        // "tight": few tokens to spare, where the budget filters tokens one by one.
        if (remaining - m.remaining_min_tokens() <= 8) {
          tight.Add(ms);
        } else if (InString(text)) {
          in_string.Add(ms);
        } else {
          structure.Add(ms);
        }
        const int32_t token = SampleAllowed(m.AllowedTokens(), rng);
        if (v.vocab->is_end(token)) break;
        if (!m.Accept(token).ok()) {
          std::fprintf(stderr, "accept failed\n");
          return 1;
        }
        text += v.bytes[token];
      }
    }
    PrintRow(s.name, "all steps", all);
    PrintRow(s.name, "inside a string", in_string);
    PrintRow(s.name, "between values", structure);
    PrintRow(s.name, "budget within 8 of minimum", tight);
    compile_ms.push_back((c1 - c0) * 1e3);
  }
  std::printf("\nCompileJsonSchema + GrammarMatcher::Create, ms:");
  for (size_t i = 0; i < compile_ms.size(); ++i) std::printf(" %s %.2f%s", schemas[i].name, compile_ms[i], i + 1 < compile_ms.size() ? "," : "\n");
  return 0;
}

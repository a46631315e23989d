// Helpers for the grammar tests: a JSON Schema validator written apart from the grammar code, a small
// synthetic vocabulary, the real Gemma 3 vocabulary, and a driver that samples from random logits.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sampling/grammar_matcher.h"
#include "sampling/json_schema.h"
#include "sampling/token_trie.h"

namespace gemlet::test {

// ---- an independent validator for the keywords the compiler supports ----
// Returns "" when `v` validates against `schema` (resolving $ref against `root`), else why not.
class SchemaValidator {
 public:
  explicit SchemaValidator(nlohmann::json root) : root_(std::move(root)) {}
  std::string Check(const nlohmann::json& v) const { return Check(v, root_, "$"); }

 private:
  static size_t CodePoints(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
  static bool IsInteger(const nlohmann::json& v) {
    if (v.is_number_integer()) return true;
    return v.is_number_float() && std::floor(v.get<double>()) == v.get<double>();
  }
  static bool HasType(const nlohmann::json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return IsInteger(v);
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  }
  const nlohmann::json& Resolve(const std::string& ref) const {
    return root_.at(nlohmann::json::json_pointer(ref.substr(1)));
  }

  std::string Check(const nlohmann::json& v, const nlohmann::json& s, const std::string& at) const {
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": schema false";
    if (s.contains("$ref")) return Check(v, Resolve(s["$ref"].get<std::string>()), at);
    if (s.contains("allOf")) {
      for (const auto& sub : s["allOf"]) {
        if (auto e = Check(v, sub, at); !e.empty()) return e;
      }
    }
    if (s.contains("anyOf")) {
      bool any = false;
      for (const auto& sub : s["anyOf"]) any = any || Check(v, sub, at).empty();
      if (!any) return at + ": matches no anyOf branch";
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& sub : s["oneOf"]) n += Check(v, sub, at).empty();
      if (n != 1) return at + ": matches " + std::to_string(n) + " oneOf branches";
    }
    if (s.contains("const") && v != s["const"]) return at + ": not the const";
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found = found || e == v;
      if (!found) return at + ": not in enum";
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_string()) {
        ok = HasType(v, s["type"]);
      } else {
        for (const auto& t : s["type"]) ok = ok || HasType(v, t);
      }
      if (!ok) return at + ": not of type " + s["type"].dump();
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      const bool draft4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() && s["exclusiveMinimum"].get<bool>();
      const bool draft4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() && s["exclusiveMaximum"].get<bool>();
      if (s.contains("minimum") && (draft4_min ? x <= s["minimum"].get<double>() : x < s["minimum"].get<double>())) {
        return at + ": below minimum";
      }
      if (s.contains("maximum") && (draft4_max ? x >= s["maximum"].get<double>() : x > s["maximum"].get<double>())) {
        return at + ": above maximum";
      }
      if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() && x <= s["exclusiveMinimum"].get<double>()) {
        return at + ": not above exclusiveMinimum";
      }
      if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() && x >= s["exclusiveMaximum"].get<double>()) {
        return at + ": not below exclusiveMaximum";
      }
    }
    if (v.is_string()) {
      const size_t n = CodePoints(v.get<std::string>());
      if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": shorter than minLength";
      if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": longer than maxLength";
    }
    if (v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": fewer than minItems";
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": more than maxItems";
      if (s.contains("items")) {
        for (size_t i = 0; i < v.size(); ++i) {
          if (auto e = Check(v[i], s["items"], at + "[" + std::to_string(i) + "]"); !e.empty()) return e;
        }
      }
    }
    if (v.is_object()) {
      if (s.contains("required")) {
        for (const auto& r : s["required"]) {
          if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.dump();
        }
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string sub = at + "." + it.key();
        if (s.contains("properties") && s["properties"].contains(it.key())) {
          if (auto e = Check(it.value(), s["properties"][it.key()], sub); !e.empty()) return e;
        } else if (s.contains("additionalProperties")) {
          if (auto e = Check(it.value(), s["additionalProperties"], sub); !e.empty()) return e;
        }
        // No additionalProperties keyword: JSON Schema allows anything (the compiler emits less).
      }
    }
    return "";
  }

  nlohmann::json root_;
};

// Whether `s` is strict UTF-8 (no overlongs, surrogates, or code points above U+10FFFF).
inline bool IsStrictUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    uint32_t cp;
    int extra;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) { cp = c & 0x1F; extra = 1; }
    else if (c >= 0xE0 && c <= 0xEF) { cp = c & 0x0F; extra = 2; }
    else if (c >= 0xF0 && c <= 0xF4) { cp = c & 0x07; extra = 3; }
    else return false;
    if (i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const unsigned char d = s[i + k];
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// ---- vocabularies ----
struct TestVocab {
  std::shared_ptr<const TokenVocabulary> vocab;
  std::vector<std::string> bytes;  // what each token spells (for reading outputs back)
  std::vector<bool> special;
  std::vector<int32_t> end_tokens;
  int32_t Find(const std::string& b) const {
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] == b && !special[i]) return static_cast<int32_t>(i);
    }
    return -1;
  }
};

// All 256 single bytes (as byte-fallback tokens are), JSON fragments, words, CJK characters whole
// and split, and special tokens: <eos> and <end_of_turn> end generation, <start_of_turn> and <pad>
// may never appear, "" is an empty token.
inline const TestVocab& SyntheticVocab() {
  static const TestVocab v = [] {
    TestVocab t;
    auto add = [&](std::string b, bool special = false) {
      t.bytes.push_back(std::move(b));
      t.special.push_back(special);
      return static_cast<int32_t>(t.bytes.size() - 1);
    };
    add("<pad>", true);
    t.end_tokens.push_back(add("<eos>", true));
    add("<start_of_turn>", true);
    t.end_tokens.push_back(add("<end_of_turn>", true));
    add("");
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
    for (const char* s : {
             "{\"", "\":", "\": ", "\", \"", "\",\"", "\"}", "},", "}}", "]}", "[", "[\"", "\"]", "{}", "[]", "true",
             "false", "null", "tr", "ue", "fal", "se", "nu", "ll", " \"", "\n", "\n  ", "\n    ", "  ", "    ", ", ",
             ",\n", "\\\"", "\\n", "\\u00", "\\u", "\\ud83d", "12", "0.5", "-1", "e+", "E-", "00", "3.14", "name", "age",
             "\"name\"", "\"name\": \"", "\"age\":", "\"tags\"", "\"id\"", "\"kind\"", "\"child\"", "\"red\"", "red",
             "green", "\"blue\"", "hello", " world", "Hello, world!", "a", "ab", "abc", "x", "\"x\"", "\t", "\x7f",
             "你好", "世界", "中文", "数据", "你", "好", "\xE4\xBD", "\xA0", "\xF0\x9F\x98\x80", "\xF0\x9F", "\x98\x80",
             "\xC3\xA9", "caf\xC3\xA9", "\xED\xA0\x80", "\xC0\xAF", "\xE0\x80\xAF", "\xF4\x90\x80\x80", "\" ", "\"\"",
             "\",", "\"]}", "{\"name\":", "{\"id\":", "1}", "2]", "true}", "null,", "\"type\"", "\"circle\"",
             "\"square\"", "\"r\"", "\"side\"", "\"value\"", "\"children\"", "\"note\"", "note", "\"text\"", "\"nums\"",
         }) {
      add(s);
    }
    auto made = TokenVocabulary::Create(t.bytes, t.special, t.end_tokens);
    EXPECT_TRUE(made.ok()) << made.message();
    t.vocab = *made;
    return t;
  }();
  return v;
}

// The Gemma 3 vocabulary (262,144 tokens) from the shared tokenizer.json; loaded once per process.
const TestVocab& Gemma3Vocab();

// ---- sampling from random logits ----
// splitmix64: a tiny seeded generator, fast enough to draw 262,144 logits a step.
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

struct Generation {
  std::vector<int32_t> tokens;
  std::string text;
  bool ended = false;  // an end token was sampled
  std::string error;   // a matcher failure
};

// Runs the decode-loop protocol of grammar_matcher.h with random logits (uniform in [0, spread)),
// masked, then sampled from their softmax, for at most max_tokens tokens.
inline Generation Generate(GrammarMatcher& m, const TestVocab& v, int max_tokens, Rng& rng, float spread = 4.0f) {
  Generation g;
  const int32_t n = v.vocab->size();
  std::vector<float> logits(n);
  std::vector<double> weights(n);
  for (int produced = 0; produced < max_tokens; ++produced) {
    m.SetRemainingTokens(max_tokens - produced);
    if (m.must_end()) break;
    for (int32_t i = 0; i < n; ++i) logits[i] = static_cast<float>(rng.Unit()) * spread;
    m.Mask(logits.data(), logits.size());
    double total = 0;
    for (int32_t i = 0; i < n; ++i) {
      weights[i] = std::isinf(logits[i]) ? 0.0 : std::exp(static_cast<double>(logits[i]));
      total += weights[i];
    }
    if (total == 0) {
      g.error = "every token masked";
      return g;
    }
    double r = rng.Unit() * total;
    int32_t token = n - 1;
    for (int32_t i = 0; i < n; ++i) {
      r -= weights[i];
      if (r < 0 && weights[i] > 0) {
        token = i;
        break;
      }
    }
    while (weights[token] == 0) --token;
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

// ---- the schemas every sampling test runs ----
struct TestSchema {
  const char* name;
  const char* schema;  // nullptr: response_format json_object (any object)
};

inline const std::vector<TestSchema>& TestSchemas() {
  static const std::vector<TestSchema> k = {
      {"flat", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":120},
          "active":{"type":"boolean"},"color":{"enum":["red","green","blue"]},"nickname":{"type":["string","null"]}},
          "required":["name","age","color"],"additionalProperties":false})"},
      {"nested", R"({"type":"object","properties":{"user":{"type":"object","properties":{
          "name":{"type":"string","maxLength":12},"address":{"type":"object","properties":{"city":{"type":"string"},
          "zip":{"type":"string","minLength":5,"maxLength":5}},"required":["city","zip"]}},"required":["name","address"]},
          "score":{"type":"number","minimum":-1,"exclusiveMaximum":100}},"required":["user"]})"},
      {"arrays", R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},
          "matrix":{"type":"array","items":{"type":"array","items":{"type":"integer","exclusiveMinimum":-5,"maximum":99999},"maxItems":2},"minItems":2,"maxItems":2},
          "flags":{"type":"array","items":{"type":"boolean"}}},"required":["tags","matrix","flags"]})"},
      {"any_of", R"({"type":"object","properties":{"shape":{"anyOf":[
          {"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"],"additionalProperties":false},
          {"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"integer"}},"required":["kind","side"],"additionalProperties":false}]},
          "label":{"anyOf":[{"type":"string","maxLength":3},{"type":"null"},{"type":"integer"}]}},"required":["shape","label"]})"},
      {"ref_recursion", R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
          "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"]}},
          "$ref":"#/$defs/node"})"},
      {"strings", R"({"type":"object","properties":{"title":{"type":"string","minLength":2,"maxLength":8},
          "text":{"type":"string"},"lang":{"const":"中文"}},"required":["title","text","lang"]})"},
      {"json_object", nullptr},
      {"one_of_definitions", R"({"definitions":{"id":{"type":"integer"},"entry":{"oneOf":[{"type":"string","maxLength":4},
          {"type":"array","items":{"$ref":"#/definitions/id"},"maxItems":3}]}},"type":"object",
          "properties":{"id":{"$ref":"#/definitions/id"}},"required":["id"],"additionalProperties":{"$ref":"#/definitions/entry"}})"},
      {"top_level_enum_array", R"({"type":"array","items":{"enum":[1,"two",null,true,{"a":[1,"é"]}]},"minItems":1})"},
  };
  return k;
}

inline std::shared_ptr<const Grammar> GrammarFor(const TestSchema& s) {
  if (s.schema == nullptr) return std::make_shared<const Grammar>(JsonObjectGrammar());
  auto g = CompileJsonSchema(s.schema);
  EXPECT_TRUE(g.ok()) << s.name << ": " << g.message();
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(*g));
}

inline SchemaValidator ValidatorFor(const TestSchema& s) {
  return SchemaValidator(s.schema ? nlohmann::json::parse(s.schema) : nlohmann::json{{"type", "object"}});
}

// Checks one output: it parses, validates, and (for "flat" and "nested", whose objects list their
// properties) has only listed keys in the schema's order.
inline void CheckOutput(const TestSchema& s, const SchemaValidator& validator, const std::string& text) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << s.name << ": does not parse (" << e.what() << "): " << text;
    return;
  }
  EXPECT_EQ(validator.Check(nlohmann::json::parse(text)), "") << s.name << ": " << text;
  if (std::string(s.name) == "flat") {
    const std::vector<std::string> order = {"name", "age", "active", "color", "nickname"};
    size_t at = 0;
    for (auto it = j.begin(); it != j.end(); ++it) {
      while (at < order.size() && order[at] != it.key()) ++at;
      EXPECT_LT(at, order.size()) << "key '" << it.key() << "' out of order or not listed: " << text;
    }
  }
  if (std::string(s.name) == "nested") {
    for (auto it = j["user"].begin(); it != j["user"].end(); ++it) {
      EXPECT_TRUE(it.key() == "name" || it.key() == "address") << "unlisted key: " << text;
    }
  }
}

inline std::shared_ptr<const Grammar> MustCompile(const std::string& schema) {
  auto g = CompileJsonSchema(schema);
  EXPECT_TRUE(g.ok()) << g.message();
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(*g));
}

}  // namespace gemlet::test

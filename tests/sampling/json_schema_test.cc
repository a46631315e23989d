// JSON Schema compiler: what it refuses (and that the message names why), and 200 random-logit
// outputs per test schema on the synthetic vocabulary, each parsed and validated independently.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "sampling/grammar_test_util.h"

namespace gemlet {
namespace {

std::string CompileError(const std::string& schema) {
  auto g = CompileJsonSchema(schema);
  EXPECT_FALSE(g.ok()) << "compiled: " << schema;
  return g.ok() ? std::string() : g.message();
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"string","pattern":"^a+$"})", "'pattern'"},
      {R"({"type":"object","properties":{"x":{"not":{"type":"null"}}}})", "'not'"},
      {R"({"if":{"type":"string"},"then":{"minLength":2}})", "'if'"},
      {R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"array","prefixItems":[{"type":"integer"}]})", "'prefixItems'"},
      {R"({"type":"number","multipleOf":3})", "'multipleOf'"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "'patternProperties'"},
      {R"({"type":"object","minProperties":1})", "'minProperties'"},
      {R"({"type":"object","propertyNames":{"maxLength":3}})", "'propertyNames'"},
      {R"({"type":"array","contains":{"type":"integer"}})", "'contains'"},
      {R"({"type":"object","dependentRequired":{"a":["b"]}})", "'dependentRequired'"},
      {R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "'allOf' with more than one"},
      {R"({"type":"array","items":[{"type":"string"}]})", "tuple"},
      {R"({"$ref":"#/$defs/a","maxLength":3,"$defs":{"a":{"type":"string"}}})", "'$ref' together with 'maxLength'"},
      {R"({"type":"object","anyOf":[{"required":["a"]}]})", "'anyOf' together with 'type'"},
  };
  for (const auto& [schema, needle] : cases) {
    const std::string msg = CompileError(schema);
    EXPECT_NE(msg.find(needle), std::string::npos) << schema << " -> " << msg;
  }
  // The message also says where: the path of the offending subschema.
  const std::string msg = CompileError(R"({"type":"object","properties":{"x":{"not":{"type":"null"}}}})");
  EXPECT_NE(msg.find("#/properties/x"), std::string::npos) << msg;
}

TEST(JsonSchemaTest, MalformedAndUnsatisfiableSchemasAreRefused) {
  EXPECT_NE(CompileError(R"({"type": "object", )").find("not valid JSON"), std::string::npos);
  EXPECT_NE(CompileError("").find("not valid JSON"), std::string::npos);
  EXPECT_NE(CompileError("[1, 2]").find("must be an object or a boolean"), std::string::npos);
  EXPECT_NE(CompileError("false").find("admits no value"), std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"strnig"})").find("unknown type"), std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"string","minLength":-1})").find("'minLength' must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"string","minLength":5,"maxLength":2})").find("minLength is above maxLength"),
            std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"array","minItems":3,"maxItems":1})").find("minItems is above maxItems"),
            std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"string","enum":[1,2]})").find("no value of 'enum'"), std::string::npos);
  EXPECT_NE(CompileError(R"({"enum":[]})").find("non-empty"), std::string::npos);
  EXPECT_NE(CompileError(R"({"$ref":"#/$defs/missing"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(CompileError(R"({"$ref":"https://example.com/s.json"})").find("only local references"), std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["b"],
                              "additionalProperties":false})").find("required property 'b'"),
            std::string::npos);
  // Every value would be infinitely deep.
  EXPECT_NE(CompileError(R"({"$defs":{"n":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}},"required":["c"]}},
                             "$ref":"#/$defs/n"})").find("no finite expansion"),
            std::string::npos);
  // A reference cycle that writes nothing.
  EXPECT_NE(CompileError(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},
                             "$ref":"#/$defs/a"})").find("left-recursive"),
            std::string::npos);
}

TEST(JsonSchemaTest, AnnotationsAndIgnoredKeywordsCompile) {
  for (const char* schema : {
           R"({"type":"number","description":"d","title":"t","default":3,"examples":[1],"readOnly":true})",
           R"({"type":"string","format":"date-time","$comment":"c","deprecated":false})",
           R"({"$schema":"https://json-schema.org/draft/2020-12/schema","type":"boolean","x-vendor":1})",
           R"({"allOf":[{"type":"string"}],"description":"one schema in allOf"})",
           R"({"anyOf":[{"$ref":"#/definitions/a"},{"type":"null"}],"default":null,"definitions":{"a":{"type":"string"}}})",
           "true",
           "{}",
       }) {
    auto g = CompileJsonSchema(schema);
    EXPECT_TRUE(g.ok()) << schema << ": " << g.message();
  }
}

// Feeds `text` one byte at a time (the synthetic vocabulary has every single byte) and says whether
// the grammar accepts it as a complete output.
bool AcceptsWhole(const std::string& schema, const std::vector<std::string>& texts, std::vector<bool>* out) {
  auto g = test::MustCompile(schema);
  if (!g) return false;
  auto m = GrammarMatcher::Create(g, test::SyntheticVocab().vocab);
  if (!m.ok()) return false;
  for (const std::string& text : texts) {
    m->Reset();
    bool ok = true;
    for (char c : text) ok = ok && m->Accept(test::SyntheticVocab().Find(std::string(1, c))).ok();
    out->push_back(ok && m->complete());
  }
  return true;
}

TEST(JsonSchemaTest, IntegerBoundsAreExact) {
  const struct {
    const char* bounds;
    int64_t lo, hi;
  } cases[] = {
      {R"("minimum":-12,"maximum":345)", -12, 345},
      {R"("minimum":0,"maximum":0)", 0, 0},
      {R"("minimum":-100,"maximum":-3)", -100, -3},
      {R"("minimum":99,"maximum":101)", 99, 101},
      {R"("minimum":1000,"maximum":1999)", 1000, 1999},
      {R"("exclusiveMinimum":0,"exclusiveMaximum":10)", 1, 9},
      {R"("minimum":2.5,"maximum":7.9)", 3, 7},
      {R"("minimum":5,"exclusiveMinimum":true,"maximum":8,"exclusiveMaximum":true)", 6, 7},
      {R"("minimum":10,"exclusiveMinimum":12)", 13, 999999999999999},
      {R"("maximum":-20)", -999999999999999, -20},
  };
  for (const auto& c : cases) {
    const std::string schema = std::string(R"({"type":"integer",)") + c.bounds + "}";
    std::vector<std::string> texts;
    std::vector<bool> want;
    for (int64_t v = std::max<int64_t>(c.lo, -2100) - 30; v <= std::min<int64_t>(c.hi, 2100) + 30; ++v) {
      texts.push_back(std::to_string(v));
      want.push_back(v >= c.lo && v <= c.hi);
    }
    for (const char* odd : {"-0", "007", "1.0", "1e2", ""}) {
      texts.push_back(odd);
      want.push_back(false);
    }
    std::vector<bool> got;
    ASSERT_TRUE(AcceptsWhole(schema, texts, &got)) << schema;
    for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(got[i], want[i]) << schema << " '" << texts[i] << "'";
  }
}

TEST(JsonSchemaTest, NumberBoundsAreSound) {
  // Every accepted number is in range; integers in range and fractions well inside it are accepted.
  const std::string schema = R"({"type":"number","minimum":-2.5,"maximum":3})";
  const std::vector<std::string> texts = {"-2", "-1.75", "-0.5", "0", "0.25", "2.999", "3", "-2.5", "3.5", "-3", "4",
                                          "-2.6", "1e1", "3.0001"};
  const std::vector<bool> want = {true, true, true, true, true, true, true, false, false, false, false, false, false, false};
  std::vector<bool> got;
  ASSERT_TRUE(AcceptsWhole(schema, texts, &got));
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(got[i], want[i]) << texts[i];
  EXPECT_NE(CompileError(R"({"type":"number","minimum":0.5,"maximum":0.7})").find("bounds leave no number"),
            std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"integer","minimum":3,"maximum":2})").find("no integer"), std::string::npos);
  EXPECT_NE(CompileError(R"({"type":"integer","minimum":"3"})").find("'minimum' must be a number"), std::string::npos);
  // enum values outside the bounds are dropped.
  auto g = CompileJsonSchema(R"({"enum":[1,50,200],"maximum":100})");
  ASSERT_TRUE(g.ok()) << g.message();
  std::vector<bool> enum_got;
  ASSERT_TRUE(AcceptsWhole(R"({"enum":[1,50,200],"maximum":100})", {"1", "50", "200"}, &enum_got));
  EXPECT_EQ(enum_got, (std::vector<bool>{true, true, false}));
}

TEST(JsonSchemaTest, LargeEnumsAndManyOptionalPropertiesStayReachable) {
  // 1000 enum strings with shared prefixes, and an object of 300 optional properties: every value and
  // every key can still be written (nothing is cut for breadth).
  nlohmann::json values = nlohmann::json::array();
  std::vector<std::string> texts;
  for (int i = 0; i < 1000; ++i) {
    const std::string v = std::string("v").append(std::to_string(i));
    values.push_back(v);
    texts.push_back(std::string("\"").append(v).append("\""));
  }
  std::vector<bool> got;
  ASSERT_TRUE(AcceptsWhole(nlohmann::json{{"enum", values}}.dump(), texts, &got));
  EXPECT_EQ(std::count(got.begin(), got.end(), true), 1000);
  std::vector<bool> wrong;
  ASSERT_TRUE(AcceptsWhole(nlohmann::json{{"enum", values}}.dump(), {"\"v1000\"", "\"v\"", "\"v01\""}, &wrong));
  EXPECT_EQ(wrong, (std::vector<bool>{false, false, false}));

  nlohmann::ordered_json props = nlohmann::ordered_json::object();  // keeps key0 .. key299 in order
  std::vector<std::string> objects;
  for (int i = 0; i < 300; ++i) {
    const std::string key = std::string("key").append(std::to_string(i));
    props[key] = {{"type", "integer"}};
    objects.push_back(std::string("{\"").append(key).append("\":1}"));
  }
  objects.push_back("{\"key3\":1,\"key299\":2}");
  objects.push_back("{\"key299\":1,\"key3\":2}");  // out of the schema's order
  const std::string schema = nlohmann::ordered_json{{"type", "object"}, {"properties", props}}.dump();
  got.clear();
  ASSERT_TRUE(AcceptsWhole(schema, objects, &got));
  EXPECT_EQ(std::count(got.begin(), got.end(), true), 301);
  EXPECT_FALSE(got.back());
}

TEST(JsonSchemaTest, ResponseFormat) {
  auto text = GrammarForResponseFormat(R"({"type":"text"})");
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(*text, nullptr);
  auto object = GrammarForResponseFormat(R"({"type":"json_object"})");
  ASSERT_TRUE(object.ok()) << object.message();
  ASSERT_NE(*object, nullptr);
  EXPECT_EQ((*object)->min_length(), 2u);  // {}
  auto schema = GrammarForResponseFormat(
      R"({"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object",
          "properties":{"a":{"type":"boolean"}},"required":["a"],"additionalProperties":false}}})");
  ASSERT_TRUE(schema.ok()) << schema.message();
  EXPECT_EQ((*schema)->min_length(), std::string(R"({"a":true})").size());
  EXPECT_FALSE(GrammarForResponseFormat(R"({"type":"json_schema","json_schema":{"name":"x"}})").ok());
  EXPECT_FALSE(GrammarForResponseFormat(R"({"type":"yaml"})").ok());
  EXPECT_FALSE(GrammarForResponseFormat(R"({"type":"json_schema","json_schema":{"schema":{"pattern":"x"}}})").ok());
  EXPECT_FALSE(GrammarForResponseFormat("nope").ok());
}

TEST(JsonSchemaTest, MinimumLengthIsTheShortestValidOutput) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"object","properties":{"a":{"type":"string","minLength":3}},"required":["a"]})", R"({"a":"aaa"})"},
      {R"({"type":"array","items":{"type":"integer"},"minItems":3})", "[0,0,0]"},
      {R"({"enum":["long value", 12345, null]})", "null"},
      {R"({"type":["string","integer"]})", "0"},
      {R"({"type":"object","properties":{"x":{"type":"null"}}})", "{}"},
  };
  for (const auto& [schema, shortest] : cases) {
    auto g = CompileJsonSchema(schema);
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_EQ(g->min_length(), std::string(shortest).size()) << schema;
  }
}

// 200 outputs per schema from random logits (Mask, then softmax sampling) under a random budget
// between the minimum and the minimum + 40 tokens.
class SyntheticSchemaTest : public testing::TestWithParam<test::TestSchema> {};

TEST_P(SyntheticSchemaTest, RandomOutputsParseAndValidate) {
  const test::TestSchema& s = GetParam();
  auto grammar = test::GrammarFor(s);
  ASSERT_NE(grammar, nullptr);
  auto m = GrammarMatcher::Create(grammar, test::SyntheticVocab().vocab);
  ASSERT_TRUE(m.ok()) << m.message();
  const test::SchemaValidator validator = test::ValidatorFor(s);
  test::Rng rng(0x5eed + std::hash<std::string>()(s.name));
  std::set<std::string> distinct;
  for (int i = 0; i < 200; ++i) {
    m->Reset();
    const int budget = m->min_tokens() + static_cast<int>(rng.Next() % 41);
    const test::Generation gen = test::Generate(*m, test::SyntheticVocab(), budget, rng);
    ASSERT_TRUE(gen.error.empty()) << gen.error;
    ASSERT_LE(static_cast<int>(gen.tokens.size()), budget);
    EXPECT_TRUE(m->complete() || m->finished()) << gen.text;
    EXPECT_FALSE(m->budget_exceeded());
    EXPECT_TRUE(test::IsStrictUtf8(gen.text)) << gen.text;
    test::CheckOutput(s, validator, gen.text);
    distinct.insert(gen.text);
  }
  EXPECT_GT(distinct.size(), 100u);  // random outputs, not one forced answer ("{}" is a token)
}

INSTANTIATE_TEST_SUITE_P(Schemas, SyntheticSchemaTest, testing::ValuesIn(test::TestSchemas()),
                         [](const testing::TestParamInfo<test::TestSchema>& info) { return std::string(info.param.name); });

TEST(JsonSchemaTest, BranchesAndCountsAreAllReached) {
  // The alternatives of anyOf, and every allowed array length, come up among random outputs.
  auto count = [](const char* name, int extra, auto&& record) {
    for (const test::TestSchema& s : test::TestSchemas()) {
      if (std::string(s.name) != name) continue;
      auto m = GrammarMatcher::Create(test::GrammarFor(s), test::SyntheticVocab().vocab);
      ASSERT_TRUE(m.ok());
      test::Rng rng(99);
      for (int i = 0; i < 300; ++i) {
        m->Reset();
        const test::Generation gen = test::Generate(*m, test::SyntheticVocab(), m->min_tokens() + extra, rng);
        record(nlohmann::json::parse(gen.text));
      }
    }
  };
  std::set<std::string> kinds, labels;
  count("any_of", 40, [&](const nlohmann::json& j) {
    kinds.insert(j["shape"]["kind"].get<std::string>());
    labels.insert(j["label"].type_name());
  });
  EXPECT_EQ(kinds, (std::set<std::string>{"circle", "square"}));
  EXPECT_EQ(labels, (std::set<std::string>{"string", "null", "number"}));
  std::set<size_t> tag_counts;
  count("arrays", 40, [&](const nlohmann::json& j) { tag_counts.insert(j["tags"].size()); });
  EXPECT_EQ(tag_counts, (std::set<size_t>{1, 2, 3}));
  int deep = 0, extras = 0;
  count("ref_recursion", 150, [&](const nlohmann::json& j) {
    if (j.contains("children")) {
      for (const auto& c : j["children"]) deep += c.contains("children") && !c["children"].empty();
    }
  });
  count("one_of_definitions", 40, [&](const nlohmann::json& j) { extras += j.size() > 1; });
  EXPECT_GT(deep, 0);
  EXPECT_GT(extras, 0);
}

}  // namespace
}  // namespace gemlet

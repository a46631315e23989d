// GenerateOptions::response_format end to end: on a model with random weights (gemlet synth's tiny
// Gemma 4 with the released 262k vocabulary) and on the demo model, sampled answers parse
// and hold the schema's fields, through Session, Conversation and BatchDecoder alike.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api_test_util.h"

namespace gemlet::test {
namespace {

using nlohmann::json;

const char* kSchemaFormat = R"({"type":"json_schema","json_schema":{"name":"person","schema":{
  "type":"object",
  "properties":{
    "name":{"type":"string","maxLength":12},
    "age":{"type":"integer","minimum":0,"maximum":150},
    "city":{"type":"string","enum":["北京","上海","Paris"]},
    "tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":3}
  },
  "required":["name","age","city"],
  "additionalProperties":false}}})";

void ExpectPerson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "not JSON: " << text;
  ASSERT_TRUE(j.is_object()) << text;
  ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << text;
  EXPECT_LE(j["name"].get<std::string>().size(), 12u * 4) << text;
  ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer()) << text;
  EXPECT_GE(j["age"].get<int64_t>(), 0);
  EXPECT_LE(j["age"].get<int64_t>(), 150);
  ASSERT_TRUE(j.contains("city") && j["city"].is_string()) << text;
  const std::string city = j["city"];
  EXPECT_TRUE(city == "北京" || city == "上海" || city == "Paris") << city;
  if (j.contains("tags")) {
    ASSERT_TRUE(j["tags"].is_array()) << text;
    EXPECT_LE(j["tags"].size(), 3u);
  }
  for (auto& [key, value] : j.items()) {
    EXPECT_TRUE(key == "name" || key == "age" || key == "city" || key == "tags") << "extra key " << key;
    (void)value;
  }
}

#if defined(GEMLET_RANDOM_GEMMA4)
std::shared_ptr<Engine> RandomGemma4() {
  static std::shared_ptr<Engine> engine = [] {
    EngineOptions o;
    o.memory_pressure_path = "";
    auto e = Engine::Load(GEMLET_RANDOM_GEMMA4, o);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? std::move(e).value() : nullptr;
  }();
  return engine;
}
#endif

GenerateOptions Constrained(const std::string& format, int max_tokens, uint64_t seed) {
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 1.0f;
  g.sampling.top_k = 0;
  g.sampling.top_p = 1.0f;
  g.sampling.seed = seed;
  g.response_format = format;
  return g;
}

#if defined(GEMLET_RANDOM_GEMMA4)
TEST(StructuredOutput, RandomWeightsStillGiveValidJson) {
  auto engine = RandomGemma4();
  ASSERT_TRUE(engine);
  SessionOptions so;
  so.n_ctx = 256;
  auto session = Session::Create(engine, so);
  ASSERT_TRUE(session.ok());
  std::vector<Message> m = {{"user", "Describe a person."}};
  auto prompt = engine->TokenizeChat(m);
  ASSERT_TRUE(prompt.ok());
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    auto r = session.value()->Complete(prompt.value(), Constrained(kSchemaFormat, 120, seed));
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r.value().stats.stop, StopReason::kEndOfTurn) << r.value().text;
    ExpectPerson(r.value().text);
  }
  // json_object: any object.
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto r = session.value()->Complete(prompt.value(), Constrained(R"({"type":"json_object"})", 60, seed));
    ASSERT_TRUE(r.ok()) << r.message();
    json j = json::parse(r.value().text, nullptr, false);
    EXPECT_TRUE(!j.is_discarded() && j.is_object()) << r.value().text;
  }
}

#endif  // GEMLET_RANDOM_GEMMA4 (made by the synth_random_gemma4 test; not in sanitizer trees)

TEST(StructuredOutput, BatchedAndConversationRequestsAreConstrainedToo) {
  auto batch = BatchDecoder::Create(DemoEngine());
  ASSERT_TRUE(batch.ok());
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<int> ids;
  std::vector<Message> m = {{"user", "介绍一个人，用 JSON。"}};
  auto prompt = DemoEngine()->TokenizeChat(m);
  ASSERT_TRUE(prompt.ok());
  for (int i = 0; i < 4; ++i) {
    sessions.push_back(std::move(Session::Create(DemoEngine(), {}).value()));
    // One request free, three constrained: the mask of one must not leak into another.
    GenerateOptions g = Constrained(i == 0 ? "" : kSchemaFormat, 100, 50 + i);
    auto id = batch.value()->Submit(*sessions.back(), prompt.value(), g);
    ASSERT_TRUE(id.ok()) << id.message();
    ids.push_back(id.value());
  }
  int finished = 0;
  while (batch.value()->running() > 0) {
    for (BatchDecoder::Finished& f : batch.value()->Step()) {
      ASSERT_TRUE(f.reply.ok()) << f.reply.message();
      if (f.id != ids[0]) ExpectPerson(f.reply.value().text);
      ++finished;
    }
  }
  EXPECT_EQ(finished, 4);

  auto chat = Conversation::Create(DemoEngine(), WithContext(512));
  ASSERT_TRUE(chat.ok());
  auto r = chat.value()->Send("Describe a person.", Constrained(kSchemaFormat, 100, 3));
  ASSERT_TRUE(r.ok()) << r.message();
  ExpectPerson(r.value().text);
}

TEST(StructuredOutput, RefusesWhatItCannotEnforce) {
  auto session = Session::Create(DemoEngine(), {});
  ASSERT_TRUE(session.ok());
  const std::vector<int32_t> prompt = DemoEngine()->Tokenize("hi", {.add_special = true});
  auto pattern = session.value()->Generate(
      prompt, Constrained(R"({"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"^a+$"}}})", 20, 1));
  ASSERT_FALSE(pattern.ok());
  EXPECT_EQ(pattern.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pattern.message().find("pattern"), std::string::npos) << pattern.message();
  auto too_short = session.value()->Generate(prompt, Constrained(kSchemaFormat, 5, 1));
  ASSERT_FALSE(too_short.ok());
  EXPECT_NE(too_short.message().find("max_tokens"), std::string::npos) << too_short.message();
  EXPECT_FALSE(DemoEngine()->CheckResponseFormat(Constrained("{not json", 50, 1), 512).ok());
  EXPECT_TRUE(DemoEngine()->CheckResponseFormat(Constrained(kSchemaFormat, 50, 1), 512).ok());
  EXPECT_TRUE(DemoEngine()->CheckResponseFormat(Constrained(R"({"type":"text"})", 50, 1), 512).ok());
}

}  // namespace
}  // namespace gemlet::test

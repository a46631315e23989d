// Ollama's API tells the truth: `format` constrains the answer as OpenAI's response_format does,
// the options that matter are honoured (num_predict, num_ctx, seed, stop, temperature) or refused
// (mirostat, typical_p, tfs_z; num_ctx beyond a slot), images are refused by a model that cannot
// see, and keep_alive loads and unloads the model as Ollama's clients expect.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/protocol.h"
#include "server/server_test_util.h"

namespace gemlet {
namespace {

using nlohmann::json;

json OllamaChat(const std::string& user, json options = json::object()) {
  return {{"model", "demo"}, {"messages", {{{"role", "user"}, {"content", user}}}}, {"stream", false}, {"options", options}};
}

json Answer(const httplib::Result& r) {
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, false);
}

TEST(Ollama, FormatConstrainsTheAnswer) {
  TestServer t;
  json body = OllamaChat("Give me a JSON object.", {{"num_predict", 48}, {"temperature", 0.9}, {"seed", 3}});
  body["format"] = "json";
  const json a = Answer(t.Post("/api/chat", body));
  const json parsed = json::parse(a["message"]["content"].get<std::string>(), nullptr, false);
  EXPECT_TRUE(parsed.is_object()) << a.dump();

  body["format"] = {{"type", "object"},
                    {"properties", {{"n", {{"type", "integer"}}}}},
                    {"required", {"n"}},
                    {"additionalProperties", false}};
  const json b = Answer(t.Post("/api/chat", body));
  const json schema_answer = json::parse(b["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(schema_answer.is_object()) << b.dump();
  EXPECT_TRUE(schema_answer["n"].is_number_integer()) << b.dump();
  EXPECT_EQ(schema_answer.size(), 1u);

  body["format"] = 3;
  ExpectError(t.Post("/api/chat", body), 400, "format");
}

TEST(Ollama, OptionsAreHonouredOrRefused) {
  TestServer t;
  const json three = Answer(t.Post("/api/chat", OllamaChat("Tell me a story.", {{"num_predict", 3}, {"temperature", 0}})));
  EXPECT_EQ(three["eval_count"], 3);
  EXPECT_EQ(three["done_reason"], "length");
  // The same seed draws the same answer.
  const json sampled = OllamaChat("Tell me a story.", {{"num_predict", 12}, {"temperature", 1.0}, {"seed", 42}});
  EXPECT_EQ(Answer(t.Post("/api/chat", sampled))["message"]["content"],
            Answer(t.Post("/api/chat", sampled))["message"]["content"]);
  // num_ctx within a slot bounds the prompt and the answer together.
  const json plain = Answer(t.Post("/api/chat", OllamaChat("Tell me a story.", {{"num_predict", 40}, {"temperature", 0}})));
  const int prompt = plain["prompt_eval_count"];
  const json tight = Answer(t.Post(
      "/api/chat", OllamaChat("Tell me a story.", {{"num_predict", 40}, {"temperature", 0}, {"num_ctx", prompt + 2}})));
  EXPECT_LE(tight["eval_count"].get<int>(), 2) << tight.dump();
  ExpectError(t.Post("/api/chat", OllamaChat("Hi", {{"num_ctx", 100000}})), 400, "options.num_ctx");
  ExpectError(t.Post("/api/chat", OllamaChat("Tell me a story.", {{"num_ctx", prompt}})), 400, "messages");
  // Samplers gemlet does not have: refused unless turned off.
  ExpectError(t.Post("/api/chat", OllamaChat("Hi", {{"mirostat", 2}})), 400, "options.mirostat");
  ExpectError(t.Post("/api/chat", OllamaChat("Hi", {{"typical_p", 0.5}})), 400, "options.typical_p");
  Answer(t.Post("/api/chat", OllamaChat("Hi", {{"mirostat", 0}, {"typical_p", 1.0}, {"tfs_z", 1}, {"num_predict", 1}})));
  // A model without a vision tower refuses images rather than answering without them.
  json with_image = OllamaChat("What is in this picture?");
  with_image["messages"][0]["images"] = {"iVBORw0KGgo="};
  ExpectError(t.Post("/api/chat", with_image), 400, "messages[0].images");
  ExpectError(t.Post("/api/generate", {{"prompt", "Describe it"}, {"images", {"iVBORw0KGgo="}}, {"stream", false}}), 400,
              "images");
  ExpectError(t.Post("/api/generate", {{"prompt", "x"}, {"suffix", "y"}, {"stream", false}}), 400, "suffix");
}

bool Loaded(TestServer& t) {
  auto r = t.client->Get("/health");
  return r && json::parse(r->body)["model_loaded"].get<bool>();
}

TEST(Ollama, KeepAliveLoadsAndUnloads) {
  ServerOptions o;
  int reloads = 0;
  o.reload = [&reloads]() -> Result<std::shared_ptr<Engine>> {
    ++reloads;
    return DemoEngine();
  };
  TestServer t(o);
  ASSERT_TRUE(Loaded(t));
  // An empty request with keep_alive 0 unloads at once; an empty one loads again.
  const json unload = Answer(t.Post("/api/generate", {{"model", "demo"}, {"keep_alive", 0}}));
  EXPECT_EQ(unload["done_reason"], "unload");
  EXPECT_FALSE(Loaded(t));
  const json load = Answer(t.Post("/api/generate", {{"model", "demo"}, {"keep_alive", "5m"}}));
  EXPECT_EQ(load["done_reason"], "load");
  EXPECT_TRUE(Loaded(t));
  EXPECT_EQ(reloads, 1);
  // keep_alive 0 with a request: answered, then unloaded once idle.
  json body = OllamaChat("Hi", {{"num_predict", 2}});
  body["keep_alive"] = 0;
  Answer(t.Post("/api/chat", body));
  bool unloaded = false;
  for (int i = 0; i < 100 && !unloaded; ++i) {
    unloaded = !Loaded(t);
    if (!unloaded) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(unloaded) << "keep_alive 0 did not unload the model within 5 s";
  // Negative: for ever.
  body["keep_alive"] = "-1";
  Answer(t.Post("/api/chat", body));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(Loaded(t));
  body["keep_alive"] = "soon";
  ExpectError(t.Post("/api/chat", body), 400, "keep_alive");
}

TEST(Ollama, KeepAliveNeedsAWayToReload) {
  TestServer t;  // no reload function
  json body = OllamaChat("Hi", {{"num_predict", 1}});
  body["keep_alive"] = "10m";
  ExpectError(t.Post("/api/chat", body), 400, "keep_alive");
  body["keep_alive"] = -1;  // keeping it loaded is what this server does anyway
  Answer(t.Post("/api/chat", body));
}

TEST(Ollama, Durations) {
  using server::ParseOllamaDuration;
  EXPECT_EQ(ParseOllamaDuration(json(300)), 300);
  EXPECT_EQ(ParseOllamaDuration(json("5m")), 300);
  EXPECT_EQ(ParseOllamaDuration(json("1h30m")), 5400);
  EXPECT_EQ(ParseOllamaDuration(json("90s")), 90);
  EXPECT_EQ(ParseOllamaDuration(json("250ms")), 0.25);
  EXPECT_EQ(ParseOllamaDuration(json("-1")), -1);
  EXPECT_EQ(ParseOllamaDuration(json("-1m")), -60);
  EXPECT_EQ(ParseOllamaDuration(json("0")), 0);
  EXPECT_FALSE(ParseOllamaDuration(json("5 minutes")));
  EXPECT_FALSE(ParseOllamaDuration(json("m")));
  EXPECT_FALSE(ParseOllamaDuration(json("")));
  EXPECT_FALSE(ParseOllamaDuration(json(true)));
}

}  // namespace
}  // namespace gemlet

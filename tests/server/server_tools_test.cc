// Tool calls and thinking end to end, on a scripted Gemma 4 (tools::WriteScriptedModel: the real
// vocabulary and chat template, answers played back from scripted/gemma4_tools.json): what the
// library's replies hold (thought apart from the answer, calls parsed to JSON), tool_choice enforced
// while sampling, and the server's OpenAI and Ollama shapes of both, streamed and not.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"
#include "gemlet/tools.hpp"

namespace gemlet {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The three answers of the script, in the order a conversation meets them.
const std::string kThought = "先算：2 + 2 = 4。";
const std::string kSum = "2 + 2 = 4";
const std::string kWeather = "Paris: sunny, 21 °C. 巴黎今天晴，21 °C。";

const std::string kTools = R"([{"type":"function","function":{"name":"get_weather","description":"The weather in a city",
  "parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},
  "required":["city"]}}}])";

class ToolCalls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("gemlet-scripted-" + std::to_string(::getpid()) + ".gguf")).string());
    Result<tools::ScriptedModelOptions> o = tools::ReadModelScript(std::string(GEMLET_SOURCE_DIR) + "/tests/server/scripted/gemma4_tools.json");
    ASSERT_TRUE(o.ok()) << o.message();
    o->tokenizer = std::string(GEMLET_TESTDATA_DIR) + "/tokenizer/gemma4/ggml-vocab-gemma-4.gguf.xz";
    o->output_path = *path_;
    Result<tools::ScriptedModelReport> r = tools::WriteScriptedModel(*o);
    ASSERT_TRUE(r.ok()) << r.message();
    EngineOptions eo;
    eo.memory_pressure_path = "";
    auto e = Engine::Load(*path_, eo);
    ASSERT_TRUE(e.ok()) << e.message();
    engine_ = new std::shared_ptr<Engine>(std::move(e).value());
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
    if (path_) fs::remove(*path_);
    delete path_;
    path_ = nullptr;
  }

  static Engine& engine() { return **engine_; }
  static std::shared_ptr<Engine> shared_engine() { return *engine_; }

  // The conversation after n of its scripted answers: the next request gets answer n + 1.
  static std::vector<Message> Conversation(int answered) {
    std::vector<Message> m = {{"user", "What is 2 + 2?"}};
    if (answered >= 1) {
      m.push_back({"assistant", kSum});
      m.push_back({"user", "And the weather in Paris?"});
    }
    if (answered >= 2) {
      Message call{"assistant", ""};
      call.tool_calls.push_back({"get_weather", R"({"city":"Paris","unit":"celsius"})", "call_1"});
      m.push_back(call);
      Message result{"tool", R"({"sky":"sunny","celsius":21})"};
      result.tool_call_id = "call_1";
      m.push_back(result);
    }
    return m;
  }

  static Result<Reply> Ask(const std::vector<Message>& messages, const std::string& tool_choice = "",
                           SessionOptions so = {}) {
    ChatOptions co;
    co.tools = kTools;
    co.tool_choice = tool_choice;
    Result<std::vector<int32_t>> prompt = engine().TokenizeChat(messages, co);
    if (!prompt.ok()) return prompt.status();
    if (so.n_ctx == 0) so.n_ctx = 1024;
    auto session = Session::Create(shared_engine(), so);
    if (!session.ok()) return session.status();
    GenerateOptions go;
    go.max_tokens = 64;
    go.tool_choice = tool_choice;
    return (*session)->Complete(*prompt, go);
  }

  static std::string* path_;
  static std::shared_ptr<Engine>* engine_;
};
std::string* ToolCalls::path_ = nullptr;
std::shared_ptr<Engine>* ToolCalls::engine_ = nullptr;

TEST_F(ToolCalls, TheThoughtChannelIsKeptApartWithoutItsName) {
  Result<Reply> r = Ask(Conversation(0));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->thinking, kThought);  // "<|channel>thought\n" opened it: the name line is not thought
  EXPECT_EQ(r->text, kSum);
  EXPECT_TRUE(r->tool_calls.empty());
}

TEST_F(ToolCalls, ACallIsParsedToJsonArgumentsAndItsResultAnswered) {
  Result<Reply> call = Ask(Conversation(1));
  ASSERT_TRUE(call.ok()) << call.message();
  ASSERT_EQ(call->tool_calls.size(), 1u);  // the marker ending the call opens no second, empty one
  EXPECT_EQ(call->tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(call->tool_calls[0].arguments), json::parse(R"({"city":"Paris","unit":"celsius"})"));
  EXPECT_EQ(call->text, "");
  EXPECT_FALSE(call->thinking.empty());

  Result<Reply> answer = Ask(Conversation(2));
  ASSERT_TRUE(answer.ok()) << answer.message();
  EXPECT_EQ(answer->text, kWeather);
  EXPECT_TRUE(answer->tool_calls.empty());
}

TEST_F(ToolCalls, TheScriptPlaysTheSameFromEveryKvCacheType) {
  // The model keeps its context in the KV cache, as a network would: quantized caches must hold it.
  for (KvCacheType type : {KvCacheType::kF32, KvCacheType::kQ8_0, KvCacheType::kQ4_0}) {
    SessionOptions so;
    so.kv_cache_type = type;
    Result<Reply> r = Ask(Conversation(2), "", so);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->text, kWeather);
  }
}

TEST_F(ToolCalls, ToolChoiceIsEnforcedWhileSampling) {
  // The script answers "2 + 2 = 4" after its thought; "required" makes a call of it instead.
  Result<Reply> required = Ask(Conversation(0), R"("required")");
  ASSERT_TRUE(required.ok()) << required.message();
  EXPECT_EQ(required->thinking, kThought);  // thinking first is allowed
  ASSERT_EQ(required->tool_calls.size(), 1u);
  EXPECT_EQ(required->text, "");

  Result<Reply> named = Ask(Conversation(0), R"({"type":"function","function":{"name":"get_weather"}})");
  ASSERT_TRUE(named.ok()) << named.message();
  ASSERT_EQ(named->tool_calls.size(), 1u);
  EXPECT_EQ(named->tool_calls[0].name, "get_weather");

  // "none": the script's call is refused (the rest of the script plays on as text).
  Result<Reply> none = Ask(Conversation(1), R"("none")");
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_TRUE(none->tool_calls.empty());

  // A choice the request cannot have: unknown function, or together with a response_format.
  EXPECT_FALSE(Ask(Conversation(0), R"({"type":"function","function":{"name":"nope"}})").ok());
  GenerateOptions both;
  both.tool_choice = R"("required")";
  both.response_format = R"({"type":"json_object"})";
  EXPECT_EQ(engine().CheckResponseFormat(both, 1024).code(), StatusCode::kInvalidArgument);
  both.tool_choice = R"("none")";
  EXPECT_TRUE(engine().CheckResponseFormat(both, 1024).ok());
}

TEST_F(ToolCalls, BatchedRequestsPlayTheirOwnScripts) {
  // Three conversations at three points of the script, decoded in one batch.
  BatchOptions bo;
  auto batch = BatchDecoder::Create(shared_engine(), bo);
  ASSERT_TRUE(batch.ok()) << batch.message();
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<int> ids;
  for (int answered = 0; answered < 3; ++answered) {
    SessionOptions so;
    so.n_ctx = 1024;
    auto s = Session::Create(shared_engine(), so);
    ASSERT_TRUE(s.ok()) << s.message();
    sessions.push_back(std::move(s).value());
    ChatOptions co;
    co.tools = kTools;
    auto prompt = engine().TokenizeChat(Conversation(answered), co);
    ASSERT_TRUE(prompt.ok()) << prompt.message();
    GenerateOptions go;
    go.max_tokens = 64;
    auto id = (*batch)->Submit(*sessions.back(), *prompt, go);
    ASSERT_TRUE(id.ok()) << id.message();
    ids.push_back(*id);
  }
  std::vector<Reply> replies(3);
  int done = 0;
  for (int step = 0; step < 200 && done < 3; ++step) {
    for (BatchDecoder::Finished& f : (*batch)->Step()) {
      ASSERT_TRUE(f.reply.ok()) << f.reply.message();
      replies[f.id - ids[0]] = std::move(f.reply).value();
      ++done;
    }
  }
  ASSERT_EQ(done, 3);
  EXPECT_EQ(replies[0].text, kSum);
  ASSERT_EQ(replies[1].tool_calls.size(), 1u);
  EXPECT_EQ(replies[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(replies[2].text, kWeather);
}

// ---- over HTTP ----

struct ScriptedServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<httplib::Client> client;
  explicit ScriptedServer(std::shared_ptr<Engine> engine) {
    ServerOptions o;
    o.port = 0;
    o.slot.n_ctx = 1024;
    o.model_name = "scripted";
    auto s = Server::Create(std::move(engine), o);
    EXPECT_TRUE(s.ok()) << s.message();
    server = std::move(s).value();
    EXPECT_TRUE(server->Start().ok());
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(60, 0);
  }
  ~ScriptedServer() { server->Stop(); }
  json Post(const std::string& path, const json& body, int want_status = 200) {
    auto r = client->Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, want_status) << r->body;
    if (body.value("stream", false)) return json(r->body);
    return json::parse(r->body, nullptr, false);
  }
};

json MessagesJson(const std::vector<Message>& messages) {
  json out = json::array();
  for (const Message& m : messages) {
    json j = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      j["content"] = nullptr;
      j["tool_calls"] = json::array();
      for (const ToolCall& c : m.tool_calls) {
        j["tool_calls"].push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    out.push_back(j);
  }
  return out;
}

TEST_F(ToolCalls, OpenAiShapesStreamedAndNot) {
  ScriptedServer s(shared_engine());
  const json tools = json::parse(kTools);
  json thought = s.Post("/v1/chat/completions", {{"messages", MessagesJson(Conversation(0))}, {"tools", tools}});
  EXPECT_EQ(thought["choices"][0]["message"]["reasoning_content"], kThought);
  EXPECT_EQ(thought["choices"][0]["message"]["content"], kSum);
  EXPECT_EQ(thought["choices"][0]["finish_reason"], "stop");

  json call = s.Post("/v1/chat/completions", {{"messages", MessagesJson(Conversation(1))}, {"tools", tools}});
  const json& message = call["choices"][0]["message"];
  EXPECT_EQ(call["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u) << call.dump();
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_TRUE(message["tool_calls"][0]["id"].is_string());
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city":"Paris","unit":"celsius"})"));

  // Streamed: reasoning_content deltas, then one tool_calls delta with its index, then the finish.
  const std::string body = s.Post("/v1/chat/completions", {{"messages", MessagesJson(Conversation(1))}, {"tools", tools}, {"stream", true}});
  std::string reasoning;
  json calls;
  std::string finish;
  for (size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("reasoning_content")) reasoning += choice["delta"]["reasoning_content"].get<std::string>();
    if (choice["delta"].contains("tool_calls")) calls = choice["delta"]["tool_calls"];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(reasoning, message["reasoning_content"]);
  ASSERT_EQ(calls.size(), 1u) << body;
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(finish, "tool_calls");

  json answer = s.Post("/v1/chat/completions", {{"messages", MessagesJson(Conversation(2))}, {"tools", tools}});
  EXPECT_EQ(answer["choices"][0]["message"]["content"], kWeather);

  // tool_choice naming an undeclared function: 400 naming the field.
  json bad = s.Post("/v1/chat/completions",
                    {{"messages", MessagesJson(Conversation(0))}, {"tools", tools},
                     {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
                    400);
  EXPECT_TRUE(bad.contains("error")) << bad.dump();
}

TEST_F(ToolCalls, OllamaShapes) {
  ScriptedServer s(shared_engine());
  const json tools = json::parse(kTools);
  json messages = MessagesJson(Conversation(1));
  json call = s.Post("/api/chat", {{"messages", messages}, {"tools", tools}, {"stream", false}});
  ASSERT_TRUE(call["message"].contains("tool_calls")) << call.dump();
  EXPECT_EQ(call["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  // Ollama's arguments are an object, not JSON text.
  EXPECT_EQ(call["message"]["tool_calls"][0]["function"]["arguments"], json::parse(R"({"city":"Paris","unit":"celsius"})"));
  EXPECT_FALSE(call["message"]["thinking"].get<std::string>().empty());

  // The result goes back as Ollama sends it: arguments as an object, the result named by tool_name.
  messages.push_back({{"role", "assistant"}, {"content", ""},
                      {"tool_calls", {{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"unit", "celsius"}}}}}}}}});
  messages.push_back({{"role", "tool"}, {"content", R"({"sky":"sunny","celsius":21})"}, {"tool_name", "get_weather"}});
  json answer = s.Post("/api/chat", {{"messages", messages}, {"tools", tools}, {"stream", false}});
  EXPECT_EQ(answer["message"]["content"], kWeather) << answer.dump();
}

TEST_F(ToolCalls, TaskPresetsOverHttpAnswerWithTheResultAlone) {
  ScriptedServer s(shared_engine());
  // The script's first answer thinks, then says "2 + 2 = 4": the task's output is that alone.
  json r = s.Post("/v1/tasks/explain", {{"input", "2 + 2 等于几？毛肚呢？"}, {"glossary", "毛肚\tbeef tripe\n"}});
  EXPECT_EQ(r["object"], "gemlet.task");
  EXPECT_EQ(r["task"], "explain");
  EXPECT_EQ(r["output"], kSum);
  EXPECT_EQ(r["input_language"], "zh-Hans");
  EXPECT_EQ(r["answer_language"], "zh-Hans");
  EXPECT_EQ(r["glossary_terms"], json::array({"毛肚"}));
  EXPECT_EQ(r["glossary_missing"], json::array());  // explain only lists the terms
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 0);
  // Polish must keep 毛肚 verbatim, and the scripted answer lacks it: the reply says so.
  json polished = s.Post("/v1/tasks/polish", {{"input", "2 + 2 等于几？毛肚呢？"}, {"glossary", "毛肚\tbeef tripe\n"}});
  EXPECT_EQ(polished["output"], kSum);
  EXPECT_EQ(polished["glossary_missing"], json::array({"毛肚"})) << polished.dump();
  EXPECT_EQ(polished["glossary_repaired"], json::array());
  // The contract's breaches, named: "2 + 2 = 4" keeps 1 of the input's 7 words, and lacks 毛肚.
  ASSERT_EQ(polished["violations"].size(), 2u) << polished.dump();
  EXPECT_EQ(polished["violations"][0]["kind"], "unrelated");
  EXPECT_EQ(polished["violations"][1]["kind"], "glossary");
  EXPECT_EQ(polished["violations"][1]["detail"], "the answer lacks the glossary's '毛肚'");
  EXPECT_EQ(r["violations"], json::array()) << "explain: " << r.dump();
  json list = json::parse(s.client->Get("/v1/tasks")->body);
  EXPECT_EQ(list["data"].size(), 8u);  // describe and transcribe among them
  EXPECT_TRUE(s.Post("/v1/tasks/haiku", {{"input", "x"}}, 404).contains("error"));
  auto streamed = s.client->Post("/v1/tasks/polish", json({{"input", "x"}, {"stream", true}}).dump(), "application/json");
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 400);
  EXPECT_EQ(json::parse(streamed->body)["error"]["param"], "stream");
  EXPECT_EQ(s.Post("/v1/tasks/polish", {{"text", "x"}}, 400)["error"]["param"], "input");
  EXPECT_EQ(s.Post("/v1/tasks/translate", {{"input", "x"}, {"to", "xx"}}, 400)["error"]["message"].get<std::string>().rfind("unknown language", 0), 0u);
}

}  // namespace
}  // namespace gemlet

// Images through gemlet serve, on hf-mm's gemma3_image converted by gemlet::Convert (text GGUF +
// mmproj): OpenAI's image_url data URLs and Ollama's images answer with the tokens
// Session::Complete gives for the same Prompt through the C++ API (greedy), streamed or not, alone
// or beside another request; a second turn that resends the image takes it from the image cache
// and its KV from the slot's cache; /api/show and /v1/models say the model sees; and each bad
// image gets one clear error (remote URL, bad base64, corrupt or oversized file, a decompression
// bomb, a model without a vision tower).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"
#include "common/hf_mm_models.h"
#include "gemlet/tools.hpp"
#include "server/server_test_util.h"

namespace gemlet {
namespace {

using nlohmann::json;

const std::string kHfMm = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/";
constexpr int kMaxTokens = 10;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i < bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (i + 1 < bytes.size() ? uint8_t(bytes[i + 1]) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

const std::string& Png() {
  static const std::string png = ReadFile(kHfMm + "gemma3_image/image.png");
  return png;
}
std::string DataUrl(const std::string& bytes) { return "data:image/png;base64," + Base64(bytes); }

const test::HfMmModel& Gemma3Image() { return test::ConvertHfMm("gemma3_image"); }

std::shared_ptr<Engine> ImageEngine() {
  static std::shared_ptr<Engine> engine = [] {
    EngineOptions o;
    o.mmproj_path = Gemma3Image().mmproj;
    o.n_threads = 2;
    o.thermal.enabled = false;
    o.memory_pressure_path = "";
    auto e = Engine::Load(Gemma3Image().model, o);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? e.value() : nullptr;
  }();
  return engine;
}

ServerOptions ImageServerOptions() {
  ServerOptions o;
  o.port = 0;
  o.parallel = 2;
  o.slot.n_ctx = 256;
  o.slot.max_batch = 64;
  o.model_name = "gemma3-image";
  return o;
}

struct ImageServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<httplib::Client> client;
  explicit ImageServer(ServerOptions o = ImageServerOptions()) {
    auto s = Server::Create(ImageEngine(), o);
    EXPECT_TRUE(s.ok()) << s.message();
    server = std::move(s).value();
    Status st = server->Start();
    EXPECT_TRUE(st.ok()) << st.message();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(300, 0);
  }
  ~ImageServer() { server->Stop(); }
  httplib::Result Post(const std::string& path, const json& body) {
    return client->Post(path, body.dump(), "application/json");
  }
  // A counter of /metrics.
  double Metric(const std::string& name) {
    auto r = client->Get("/metrics");
    EXPECT_TRUE(r);
    std::smatch m;
    const std::string body = r ? r->body : "";
    if (!std::regex_search(body, m, std::regex("\ngemlet_" + name + " ([0-9.e+]+)\n"))) return -1;
    return std::stod(m[1]);
  }
};

json Ok(const httplib::Result& r) {
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, false);
}

// The end-of-turn tokens banned (OpenAI's logit_bias), so that every answer runs to max_tokens.
std::vector<int32_t> EndTokens() {
  std::vector<int32_t> ids;
  for (const char* piece : {"<end_of_turn>", "<eos>"}) {
    const std::vector<int32_t> t = ImageEngine()->Tokenize(piece, {.add_special = false, .parse_special = true});
    if (t.size() == 1) ids.push_back(t[0]);
  }
  return ids;
}

GenerateOptions Reference(bool ban_end) {
  GenerateOptions g;
  g.max_tokens = kMaxTokens;
  g.sampling.temperature = 0;
  if (ban_end) {
    for (int32_t id : EndTokens()) g.sampling.logit_bias.emplace_back(id, -100.0f);
  }
  return g;
}

// What Session::Complete gives for these messages (the image encoded by the C++ API) on a session
// like a slot's.
Reply Expected(std::vector<Message> messages, bool ban_end = true) {
  auto image = ImageEngine()->EncodeImage(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(Png().data()), Png().size()));
  EXPECT_TRUE(image.ok()) << image.message();
  for (Message& m : messages) {
    for (ContentPart& p : m.parts) {
      if (p.text == "<image>") p = {"", image.value()};
    }
  }
  auto prompt = ImageEngine()->ChatPrompt(messages);
  EXPECT_TRUE(prompt.ok()) << prompt.message();
  auto session = Session::Create(ImageEngine(), ImageServerOptions().slot);
  EXPECT_TRUE(session.ok());
  auto reply = (*session)->Complete(prompt.value(), Reference(ban_end));
  EXPECT_TRUE(reply.ok()) << reply.message();
  return reply.ok() ? reply.value() : Reply{};
}

json ImageChat(const json& messages, bool stream = false) {
  json bias = json::object();
  for (int32_t id : EndTokens()) bias[std::to_string(id)] = -100;
  return {{"model", "gemma3-image"}, {"messages", messages}, {"max_tokens", kMaxTokens}, {"temperature", 0},
          {"logit_bias", bias},      {"logprobs", true},     {"stream", stream}};
}

json FirstTurn() {
  return json::array({{{"role", "user"},
                       {"content",
                        {{{"type", "text"}, {"text", "What is in this picture?"}},
                         {{"type", "image_url"}, {"image_url", {{"url", DataUrl(Png())}, {"detail", "high"}}}},
                         {{"type", "text"}, {"text", "One line."}}}}}});
}
std::vector<Message> FirstTurnMessages() {
  return {{"user", "", {{"What is in this picture?", nullptr}, {"<image>", nullptr}, {"One line.", nullptr}}}};
}

// The answer's tokens as OpenAI's logprobs give them: each token's bytes.
std::vector<std::string> TokenBytes(const json& answer) {
  std::vector<std::string> out;
  for (const json& entry : answer["choices"][0]["logprobs"]["content"]) {
    std::string bytes;
    for (int b : entry["bytes"]) bytes.push_back(static_cast<char>(b));
    out.push_back(bytes);
  }
  return out;
}
std::vector<std::string> TokenBytes(const Reply& reply) {
  std::vector<std::string> out;
  for (int32_t t : reply.tokens) out.push_back(ImageEngine()->Detokenize(std::span<const int32_t>(&t, 1)));
  return out;
}

TEST(ServerImages, OpenAiImageUrlAnswersAsTheApi) {
  ImageServer s;
  const Reply want = Expected(FirstTurnMessages());
  ASSERT_EQ(static_cast<int>(want.tokens.size()), kMaxTokens);
  const json a = Ok(s.Post("/v1/chat/completions", ImageChat(FirstTurn())));
  EXPECT_EQ(a["choices"][0]["message"]["content"], want.text);
  EXPECT_EQ(TokenBytes(a), TokenBytes(want));
  EXPECT_EQ(a["usage"]["completion_tokens"], kMaxTokens);
  EXPECT_EQ(a["usage"]["prompt_tokens"], want.stats.prompt_tokens);
  EXPECT_EQ(s.Metric("image_encodes_total"), 1);

  // Streamed: the same text, in chunks.
  auto streamed = s.Post("/v1/chat/completions", ImageChat(FirstTurn(), true));
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  std::string text;
  std::istringstream lines(streamed->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const json chunk = json::parse(line.substr(6));
    if (!chunk["choices"].empty() && chunk["choices"][0]["delta"].contains("content")) {
      text += chunk["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, want.text);
  EXPECT_EQ(s.Metric("image_encodes_total"), 1);  // the same bytes: from the cache
  EXPECT_EQ(s.Metric("image_cache_hits_total"), 1);
}

TEST(ServerImages, ASecondTurnReusesTheImageAndItsCache) {
  ImageServer s;
  const json first = Ok(s.Post("/v1/chat/completions", ImageChat(FirstTurn())));
  const std::string answer = first["choices"][0]["message"]["content"];
  json messages = FirstTurn();
  messages.push_back({{"role", "assistant"}, {"content", answer}});
  messages.push_back({{"role", "user"}, {"content", "And the colours?"}});
  const json second = Ok(s.Post("/v1/chat/completions", ImageChat(messages)));

  std::vector<Message> turns = FirstTurnMessages();
  turns.push_back({"assistant", answer});
  turns.push_back({"user", "And the colours?"});
  const Reply want = Expected(turns);
  EXPECT_EQ(second["choices"][0]["message"]["content"], want.text);
  EXPECT_EQ(TokenBytes(second), TokenBytes(want));

  // The first turn's prompt, image included, came from the slot's cache.
  auto image = ImageEngine()->EncodeImage(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(Png().data()), Png().size()));
  ASSERT_TRUE(image.ok());
  std::vector<Message> one = FirstTurnMessages();
  one[0].parts[1] = {"", image.value()};
  auto first_prompt = ImageEngine()->ChatPrompt(one);
  ASSERT_TRUE(first_prompt.ok());
  const int image_end = first_prompt->media[0].position + first_prompt->media[0].media->n_tokens;
  const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, static_cast<int>(first_prompt->tokens.size()) - 1);
  EXPECT_GT(cached, image_end);
  EXPECT_EQ(s.Metric("image_encodes_total"), 1);
  EXPECT_EQ(s.Metric("image_cache_hits_total"), 1);
  EXPECT_GT(s.Metric("image_cache_bytes"), 0);
  std::printf("second turn: %d prompt tokens, %d cached (the image ends at %d)\n",
              second["usage"]["prompt_tokens"].get<int>(), cached, image_end);

  // Beside another request (two slots stepped together): the same answer.
  json text_only = ImageChat(json::array({{{"role", "user"}, {"content", "Tell me about the sea."}}}));
  std::thread other([&s, &text_only] {
    httplib::Client c("127.0.0.1", s.server->port());
    c.set_read_timeout(300, 0);
    auto r = c.Post("/v1/chat/completions", text_only.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200);
  });
  json again = ImageChat(FirstTurn());
  again["messages"][0]["content"][2]["text"] = "Two lines.";  // not the cached prompt
  const json beside = Ok(s.Post("/v1/chat/completions", again));
  other.join();
  std::vector<Message> two = FirstTurnMessages();
  two[0].parts[2].text = "Two lines.";
  EXPECT_EQ(TokenBytes(beside), TokenBytes(Expected(two)));
}

TEST(ServerImages, OllamaImagesAnswerAsTheApi) {
  ImageServer s;
  const json chat = {{"model", "gemma3-image"},
                     {"messages", {{{"role", "user"}, {"content", "Describe it."}, {"images", {Base64(Png())}}}}},
                     {"stream", false},
                     {"options", {{"temperature", 0}, {"num_predict", kMaxTokens}}}};
  const json a = Ok(s.Post("/api/chat", chat));
  const Reply want = Expected({{"user", "", {{"<image>", nullptr}, {"Describe it.", nullptr}}}}, false);
  EXPECT_EQ(a["message"]["content"], want.text);
  EXPECT_EQ(a["eval_count"], static_cast<int>(want.tokens.size()));
  EXPECT_EQ(a["prompt_eval_count"], want.stats.prompt_tokens);

  const json generate = {{"model", "gemma3-image"},
                         {"prompt", "Describe it."},
                         {"images", {Base64(Png())}},
                         {"stream", false},
                         {"options", {{"temperature", 0}, {"num_predict", kMaxTokens}}}};
  const json g = Ok(s.Post("/api/generate", generate));
  EXPECT_EQ(g["response"], want.text);
  EXPECT_EQ(s.Metric("image_encodes_total"), 1);
  EXPECT_EQ(s.Metric("image_cache_hits_total"), 1);
}

TEST(ServerImages, ModelsSayWhatTheyTake) {
  ImageServer s;
  const json models = Ok(s.client->Get("/v1/models"));
  EXPECT_EQ(models["data"][0]["input_modalities"], json::array({"text", "image"}));
  EXPECT_EQ(models["data"][0]["meta"]["mmproj_projector"], "gemma3");
  const json show = Ok(s.Post("/api/show", {{"model", "gemma3-image"}}));
  EXPECT_EQ(show["capabilities"], json::array({"completion", "vision"}));

  TestServer demo;  // no vision tower
  const json text_models = Ok(demo.client->Get("/v1/models"));
  EXPECT_EQ(text_models["data"][0]["input_modalities"], json::array({"text"}));
  const json text_show = Ok(demo.Post("/api/show", {{"model", "demo"}}));
  EXPECT_EQ(text_show["capabilities"], json::array({"completion"}));
}

// A PNG header that claims 30000 x 30000 pixels (a decompression bomb): IHDR with its CRC.
std::string BombPng() {
  const auto crc32 = [](const std::string& data) {
    uint32_t c = 0xFFFFFFFFu;
    for (unsigned char byte : data) {
      c ^= byte;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
  };
  const auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  const auto chunk = [&](const std::string& type_and_data) {
    return be32(static_cast<uint32_t>(type_and_data.size() - 4)) + type_and_data + be32(crc32(type_and_data));
  };
  // The decoder reads the header up to the first IDAT, then refuses: the data is never inflated.
  return std::string("\x89PNG\r\n\x1a\n", 8) +
         chunk("IHDR" + be32(30000) + be32(30000) + std::string("\x08\x02\x00\x00\x00", 5)) +
         chunk("IDAT" + std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8)) + chunk("IEND");
}

json WithImageUrl(const std::string& url) {
  return ImageChat(json::array(
      {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", url}}}}, {{"type", "text"}, {"text", "?"}}}}}}));
}

std::string ErrorMessage(const httplib::Result& r) {
  return r ? json::parse(r->body, nullptr, false)["error"]["message"].get<std::string>() : "";
}

TEST(ServerImages, BadImagesAreRefusedClearly) {
  ServerOptions o = ImageServerOptions();
  o.max_image_bytes = 64 << 10;
  ImageServer s(o);
  auto remote = s.Post("/v1/chat/completions", WithImageUrl("https://example.com/cat.png"));
  ExpectError(remote, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(remote).find("nothing leaves this device"), std::string::npos) << ErrorMessage(remote);

  auto bad64 = s.Post("/v1/chat/completions", WithImageUrl("data:image/png;base64,iVBOR*w0KGgo="));
  ExpectError(bad64, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(bad64).find("not valid base64"), std::string::npos) << ErrorMessage(bad64);

  std::string corrupt = Png().substr(0, Png().size() / 2);  // truncated
  auto broken = s.Post("/v1/chat/completions", WithImageUrl(DataUrl(corrupt)));
  ExpectError(broken, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(broken).find("messages[0].content[0]"), std::string::npos) << ErrorMessage(broken);
  auto garbage = s.Post("/v1/chat/completions", WithImageUrl(DataUrl(std::string(1000, 'x'))));
  ExpectError(garbage, 400, "messages[0].content");

  auto bomb = s.Post("/v1/chat/completions", WithImageUrl(DataUrl(BombPng())));
  ExpectError(bomb, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(bomb).find("pixel"), std::string::npos) << ErrorMessage(bomb);

  auto big = s.Post("/v1/chat/completions", WithImageUrl(DataUrl(std::string(100 << 10, 'x'))));
  ExpectError(big, 413, "messages[0].content");

  auto ollama = s.Post("/api/chat", {{"messages", {{{"role", "user"}, {"content", "?"}, {"images", {"@@@"}}}}}, {"stream", false}});
  ExpectError(ollama, 400, "messages[0].images");
  EXPECT_EQ(s.Metric("image_encodes_total"), 3);  // the corrupt, the garbage, the bomb: nothing kept
  EXPECT_EQ(s.Metric("image_cache_bytes"), 0);

  // The server still answers after all that.
  Ok(s.Post("/v1/chat/completions", ImageChat(FirstTurn())));

  // A model without a vision tower refuses images rather than answering without them.
  TestServer demo;
  auto blind = demo.Post("/v1/chat/completions", WithImageUrl(DataUrl(Png())));
  ExpectError(blind, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(blind).find("no vision tower"), std::string::npos) << ErrorMessage(blind);
  // ... and bodies beyond the text limit stay 413 there.
  auto huge = demo.Post("/v1/chat/completions", WithImageUrl(DataUrl(std::string(5 << 20, 'x'))));
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 413);
}

}  // namespace
}  // namespace gemlet

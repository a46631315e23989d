// Audio through gemlet serve, on hf-mm's gemma4_e2b_image_audio converted by gemlet::Convert (text
// GGUF + mmproj with vision and audio towers; a placeholder vocabulary, so the words are noise and
// the tests hold the protocol and the plumbing): POST /v1/audio/transcriptions gives the text
// RunTask's transcribe preset gives through the C++ API (greedy), as text, json and verbose_json,
// for a clip within the window and a 70 s one in pieces (its segments at the pieces' real times);
// OpenAI's input_audio parts answer with Session::Complete's tokens (a long clip's pieces placed in
// a row), a clip sent again comes from the audio cache; /v1/models and /api/show say the model hears;
// and each bad clip gets one clear error (too long: 413; bad base64, corrupt file, no audio tower: 400).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "common/long_clip.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"
#include "gemlet/tasks.hpp"
#include "common/hf_mm_models.h"
#include "gemlet/tools.hpp"
#include "server/server_test_util.h"

namespace gemlet {
namespace {

using nlohmann::json;

constexpr int kMaxTokens = 8;
constexpr int kSlotCtx = 2048;

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

const test::HfMmModel& E2b() { return test::ConvertHfMm("gemma4_e2b_image_audio"); }

std::shared_ptr<Engine> AudioEngine() {
  static std::shared_ptr<Engine> engine = [] {
    EngineOptions o;
    o.mmproj_path = E2b().mmproj;
    o.n_threads = 2;
    o.thermal.enabled = false;
    o.memory_pressure_path = "";
    auto e = Engine::Load(E2b().model, o);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? e.value() : nullptr;
  }();
  return engine;
}

ServerOptions AudioServerOptions() {
  ServerOptions o;
  o.port = 0;
  o.parallel = 2;
  o.slot.n_ctx = kSlotCtx;
  o.slot.max_batch = 64;
  o.max_tokens = kMaxTokens;  // a transcription's room for its text, as RunTask's generate.max_tokens
  o.model_name = "gemma4-e2b";
  return o;
}

struct AudioServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<httplib::Client> client;
  explicit AudioServer(ServerOptions o = AudioServerOptions()) {
    auto s = Server::Create(AudioEngine(), o);
    EXPECT_TRUE(s.ok()) << s.message();
    server = std::move(s).value();
    Status st = server->Start();
    EXPECT_TRUE(st.ok()) << st.message();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(300, 0);
  }
  ~AudioServer() { server->Stop(); }
  httplib::Result Post(const std::string& path, const json& body) { return client->Post(path, body.dump(), "application/json"); }
  httplib::Result Transcribe(const std::string& clip, std::vector<std::pair<std::string, std::string>> fields = {}) {
    httplib::MultipartFormDataItems items = {{"file", clip, "clip.wav", "audio/wav"}, {"model", "whisper-1", "", ""}};
    for (const auto& [name, value] : fields) items.push_back({name, value, "", ""});
    return client->Post("/v1/audio/transcriptions", items);
  }
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

std::string ErrorMessage(const httplib::Result& r) {
  if (!r) return "";
  const json j = json::parse(r->body, nullptr, false);
  return j.contains("error") ? j["error"]["message"].get<std::string>() : r->body;
}

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

struct Expected {
  std::string text;
  std::vector<AudioPiece> pieces;
};

// What the transcribe preset gives through the C++ API on a session like a slot's.
Expected RunTaskTranscript(const std::string& clip, const std::string& to = "") {
  auto pieces = AudioEngine()->EncodeAudioPieces(Bytes(clip));
  EXPECT_TRUE(pieces.ok()) << pieces.message();
  SessionOptions so = AudioServerOptions().slot;
  auto session = Session::Create(AudioEngine(), so);
  EXPECT_TRUE(session.ok());
  TaskOptions o;
  o.task = "transcribe";
  o.to = to;
  o.generate.max_tokens = kMaxTokens;
  o.generate.sampling.temperature = 0;
  for (const AudioPiece& p : pieces.value()) o.media.push_back(p.media);
  auto reply = RunTask(*session.value(), "", o);
  EXPECT_TRUE(reply.ok()) << reply.message();
  EXPECT_EQ(reply->parts, static_cast<int>(pieces->size()));
  return {reply.ok() ? reply->output : "", pieces.value()};
}

TEST(ServerAudio, TranscriptionsGiveRunTasksText) {
  AudioServer s;
  const std::string shortclip = test::Wav16k(test::ShortClipSamples());
  const Expected want = RunTaskTranscript(shortclip);
  ASSERT_FALSE(want.text.empty());
  const json j = Ok(s.Transcribe(shortclip));
  EXPECT_EQ(j["text"], want.text);
  EXPECT_GT(j["usage"]["input_tokens"].get<int>(), want.pieces[0].media->n_tokens);
  EXPECT_GT(j["usage"]["output_tokens"].get<int>(), 0);
  auto text = s.Transcribe(shortclip, {{"response_format", "text"}});
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 200);
  EXPECT_EQ(text->body, want.text + "\n");
  EXPECT_EQ(text->get_header_value("Content-Type").rfind("text/plain", 0), 0u);
  EXPECT_EQ(s.Metric("audio_encodes_total"), 1);  // the same bytes twice: encoded once
  EXPECT_EQ(s.Metric("audio_cache_hits_total"), 1);

  // The language: the transcript asked in it (RunTask's --to).
  const json zh = Ok(s.Transcribe(shortclip, {{"language", "zh"}, {"response_format", "verbose_json"}}));
  EXPECT_EQ(zh["text"], RunTaskTranscript(shortclip, "zh").text);
  EXPECT_EQ(zh["language"], "zh");
  ASSERT_EQ(zh["segments"].size(), 1u);
  EXPECT_NEAR(zh["duration"].get<double>(), 27237 / 16000.0, 1e-9);
}

TEST(ServerAudio, ALongClipIsTranscribedInItsPieces) {
  AudioServer s;
  const std::string clip = test::LongClipWav(70.0);
  const Expected want = RunTaskTranscript(clip);
  ASSERT_GE(want.pieces.size(), 3u);
  const json j = Ok(s.Transcribe(clip, {{"response_format", "verbose_json"}, {"timestamp_granularities[]", "segment"}}));
  EXPECT_EQ(j["text"], want.text);
  EXPECT_EQ(j["task"], "transcribe");
  EXPECT_DOUBLE_EQ(j["duration"].get<double>(), 70.0);
  EXPECT_TRUE(j["language"].is_string());
  ASSERT_EQ(j["segments"].size(), want.pieces.size());
  std::vector<std::string> texts;
  for (size_t i = 0; i < want.pieces.size(); ++i) {
    const json& seg = j["segments"][i];
    EXPECT_EQ(seg["id"], i);
    EXPECT_EQ(seg["start"].get<double>(), want.pieces[i].start_seconds);  // the split's real times
    EXPECT_EQ(seg["end"].get<double>(), want.pieces[i].end_seconds);
    EXPECT_FALSE(seg.contains("words"));
    EXPECT_FALSE(seg.contains("avg_logprob"));  // not measured: not written
    texts.push_back(seg["text"]);
  }
  EXPECT_EQ(JoinTranscripts(texts), want.text);
  std::printf("70 s clip: %zu segments, %s\n", texts.size(), j["segments"].dump().substr(0, 200).c_str());
}

// The end-of-turn tokens banned (OpenAI's logit_bias), so that every answer runs to max_tokens.
std::vector<int32_t> EndTokens() {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < AudioEngine()->info().n_vocab; ++t) {
    if (AudioEngine()->IsEndOfGeneration(t)) ids.push_back(t);
  }
  return ids;
}

json AudioChat(const std::string& clip) {
  json bias = json::object();
  for (int32_t id : EndTokens()) bias[std::to_string(id)] = -100;
  const json content = {{{"type", "text"}, {"text", "What is said here?"}},
                        {{"type", "input_audio"}, {"input_audio", {{"data", Base64(clip)}, {"format", "wav"}}}}};
  return {{"model", "gemma4-e2b"}, {"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", kMaxTokens},
          {"temperature", 0},       {"logit_bias", bias},                                     {"logprobs", true}};
}

// Session::Complete's answer to the same chat, the clip's pieces placed in a row.
Reply ExpectedChat(const std::string& clip) {
  auto pieces = AudioEngine()->EncodeAudioPieces(Bytes(clip));
  EXPECT_TRUE(pieces.ok()) << pieces.message();
  std::vector<ContentPart> parts = {{"What is said here?", nullptr}};
  for (const AudioPiece& p : pieces.value()) parts.push_back({"", p.media});
  const std::vector<Message> messages = {{"user", "", parts}};
  auto prompt = AudioEngine()->ChatPrompt(messages);
  EXPECT_TRUE(prompt.ok()) << prompt.message();
  auto session = Session::Create(AudioEngine(), AudioServerOptions().slot);
  EXPECT_TRUE(session.ok());
  GenerateOptions g;
  g.max_tokens = kMaxTokens;
  g.sampling.temperature = 0;
  for (int32_t id : EndTokens()) g.sampling.logit_bias.emplace_back(id, -100.0f);
  auto reply = (*session)->Complete(prompt.value(), g);
  EXPECT_TRUE(reply.ok()) << reply.message();
  return reply.ok() ? reply.value() : Reply{};
}

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
  for (int32_t t : reply.tokens) out.push_back(AudioEngine()->Detokenize(std::span<const int32_t>(&t, 1)));
  return out;
}

TEST(ServerAudio, InputAudioAnswersAsTheApi) {
  AudioServer s;
  const std::string shortclip = test::Wav16k(test::ShortClipSamples());
  for (const std::string& clip : {shortclip, test::LongClipWav(70.0)}) {
    const Reply want = ExpectedChat(clip);
    ASSERT_EQ(static_cast<int>(want.tokens.size()), kMaxTokens);
    const json a = Ok(s.Post("/v1/chat/completions", AudioChat(clip)));
    EXPECT_EQ(a["choices"][0]["message"]["content"], want.text);
    EXPECT_EQ(TokenBytes(a), TokenBytes(want));
    EXPECT_EQ(a["usage"]["prompt_tokens"], want.stats.prompt_tokens);
    std::printf("input_audio of %zu bytes: %d prompt tokens\n", clip.size(), a["usage"]["prompt_tokens"].get<int>());
    if (clip != shortclip) continue;
    // The short clip again, in a second turn: from the audio cache, and its KV from the slot's.
    json again = AudioChat(clip);
    again["messages"].push_back({{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
    again["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
    const json second = Ok(s.Post("/v1/chat/completions", again));
    auto piece = AudioEngine()->EncodeAudio(Bytes(clip));
    ASSERT_TRUE(piece.ok());
    auto first = AudioEngine()->ChatPrompt(std::vector<Message>{{"user", "", {{"What is said here?", nullptr}, {"", piece.value()}}}});
    ASSERT_TRUE(first.ok());
    const int clip_end = first->media[0].position + first->media[0].media->n_tokens;
    const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    EXPECT_GT(cached, clip_end);
    std::printf("second turn: %d of %d prompt tokens cached (the clip ends at %d)\n", cached,
                second["usage"]["prompt_tokens"].get<int>(), clip_end);
    EXPECT_EQ(s.Metric("audio_encodes_total"), 1);
    EXPECT_EQ(s.Metric("audio_cache_hits_total"), 1);
    EXPECT_GT(s.Metric("audio_cache_bytes"), 0);
  }
}

TEST(ServerAudio, ModelsSayTheyHear) {
  AudioServer s;
  const json models = Ok(s.client->Get("/v1/models"));
  EXPECT_EQ(models["data"][0]["input_modalities"], json::array({"text", "image", "audio"}));
  EXPECT_EQ(models["data"][0]["meta"]["mmproj_projector"], "gemma4v,gemma4a");
  const json show = Ok(s.Post("/api/show", {{"model", "gemma4-e2b"}}));
  EXPECT_EQ(show["capabilities"], json::array({"completion", "vision", "audio", "tools", "thinking"}));
}

json WithAudioData(const std::string& data) {
  return {{"messages",
           {{{"role", "user"},
             {"content", {{{"type", "input_audio"}, {"input_audio", {{"data", data}, {"format", "wav"}}}}}}}}},
          {"max_tokens", 2}};
}

TEST(ServerAudio, BadAudioIsRefusedClearly) {
  ServerOptions o = AudioServerOptions();
  o.max_audio_seconds = 60;
  o.max_audio_bytes = 3 << 20;
  AudioServer s(o);
  const std::string long_clip = test::LongClipWav(70.0);  // 2.2 MB: within the bytes, over the seconds
  auto too_long = s.Transcribe(long_clip);
  ExpectError(too_long, 413, "file");
  EXPECT_NE(ErrorMessage(too_long).find("70.0 s"), std::string::npos) << ErrorMessage(too_long);
  EXPECT_NE(ErrorMessage(too_long).find("60 s"), std::string::npos) << ErrorMessage(too_long);
  ExpectError(s.Post("/v1/chat/completions", WithAudioData(Base64(long_clip))), 413, "messages[0].content");
  const std::string big(4 << 20, 'x');
  ExpectError(s.Transcribe(big), 413, "file");
  ExpectError(s.Post("/v1/chat/completions", WithAudioData(Base64(big))), 413, "messages[0].content");

  auto bad64 = s.Post("/v1/chat/completions", WithAudioData("UklGR*"));
  ExpectError(bad64, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(bad64).find("not valid base64"), std::string::npos) << ErrorMessage(bad64);
  const std::string corrupt = long_clip.substr(0, 30);
  auto broken = s.Transcribe(corrupt);
  ExpectError(broken, 400, "file");
  EXPECT_NE(ErrorMessage(broken).find("the audio cannot be used"), std::string::npos) << ErrorMessage(broken);
  auto broken_chat = s.Post("/v1/chat/completions", WithAudioData(Base64(corrupt)));
  ExpectError(broken_chat, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(broken_chat).find("messages[0].content[0]"), std::string::npos) << ErrorMessage(broken_chat);
  ExpectError(s.Transcribe(std::string("not audio at all")), 400, "file");

  const std::string clip = test::Wav16k(test::ShortClipSamples());
  ExpectError(s.Transcribe(clip, {{"response_format", "srt"}}), 400, "response_format");
  auto words = s.Transcribe(clip, {{"timestamp_granularities[]", "word"}});
  ExpectError(words, 400, "timestamp_granularities");
  EXPECT_NE(ErrorMessage(words).find("does not invent"), std::string::npos) << ErrorMessage(words);
  ExpectError(s.Transcribe(clip, {{"temperature", "3"}}), 400, "temperature");
  ExpectError(s.Transcribe(clip, {{"language", "xx"}}), 400, "language");
  ExpectError(s.Transcribe(clip, {{"stream", "true"}}), 400, "stream");
  ExpectError(s.client->Post("/v1/audio/transcriptions", "{}", "application/json"), 400, "file");
  httplib::MultipartFormDataItems no_file = {{"model", "whisper-1", "", ""}};
  ExpectError(s.client->Post("/v1/audio/transcriptions", no_file), 400, "file");

  // The server still answers after all that.
  EXPECT_EQ(Ok(s.Transcribe(clip))["text"].is_string(), true);

  // A model without an audio tower refuses audio rather than answering without it.
  TestServer demo;
  auto deaf = demo.client->Post("/v1/audio/transcriptions", httplib::MultipartFormDataItems{{"file", clip, "a.wav", ""}});
  ExpectError(deaf, 400, "file");
  EXPECT_NE(ErrorMessage(deaf).find("no audio tower"), std::string::npos) << ErrorMessage(deaf);
  auto deaf_chat = demo.Post("/v1/chat/completions", WithAudioData(Base64(clip)));
  ExpectError(deaf_chat, 400, "messages[0].content");
  EXPECT_NE(ErrorMessage(deaf_chat).find("no audio tower"), std::string::npos) << ErrorMessage(deaf_chat);
  const json text_models = Ok(demo.client->Get("/v1/models"));
  EXPECT_EQ(text_models["data"][0]["input_modalities"], json::array({"text"}));
}

}  // namespace
}  // namespace gemlet

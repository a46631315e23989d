// OpenAI's audio on the wire (src/server/audio_protocol.h), without a socket: input_audio parts in
// their place among the text, the transcription form's fields and refusals, and the three answers.
#include "server/audio_protocol.h"

#include <gtest/gtest.h>

namespace gemlet::server {
namespace {

using nlohmann::json;

json Audio(const std::string& data, const json& format = "wav") {
  json part = {{"type", "input_audio"}, {"input_audio", {{"data", data}}}};
  if (!format.is_null()) part["input_audio"]["format"] = format;
  return part;
}

TEST(AudioProtocol, InputAudioPartsKeepTheirPlace) {
  const json body = {{"messages",
                      {{{"role", "user"},
                        {"content",
                         {{{"type", "text"}, {"text", "Listen: "}},
                          Audio("AQID"),
                          {{"type", "image_url"}, {"image_url", "data:image/png;base64,BAU="}},
                          Audio("BgcI", "mp3")}}}}}};
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(body, Limits{}, &r));
  const Message& m = r.messages[0];
  ASSERT_EQ(m.parts.size(), 4u);
  EXPECT_EQ(m.parts[0].text, "Listen: ");
  ASSERT_EQ(r.audio.size(), 2u);
  EXPECT_EQ(r.audio[0].part, 1u);
  EXPECT_EQ(r.audio[0].bytes, std::string("\x01\x02\x03"));
  EXPECT_EQ(r.audio[0].format, "wav");
  EXPECT_EQ(r.audio[0].where, "messages[0].content[1]");
  EXPECT_EQ(r.audio[0].param, "messages[0].content");
  EXPECT_EQ(r.audio[1].part, 3u);
  EXPECT_EQ(r.audio[1].format, "mp3");
  ASSERT_EQ(r.images.size(), 1u);
  EXPECT_EQ(r.images[0].part, 2u);

  // A clip alone, without a format (the bytes are sniffed).
  CompletionRequest alone;
  ASSERT_FALSE(ParseChatRequest({{"messages", {{{"role", "user"}, {"content", {Audio("AQID", nullptr)}}}}}}, Limits{}, &alone));
  EXPECT_EQ(alone.messages[0].parts.size(), 1u);
  EXPECT_EQ(alone.audio.size(), 1u);
}

TEST(AudioProtocol, BadInputAudioIsRefusedNamingThePart) {
  const auto refuse = [](const json& part, Limits limits = {}) {
    CompletionRequest r;
    auto e = ParseChatRequest({{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "?"}}, part}}}}}},
                              limits, &r);
    EXPECT_TRUE(e) << part.dump();
    return e.value_or(ApiError{});
  };
  ApiError e = refuse(Audio("UklG*RiQ="));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[0].content");
  EXPECT_NE(e.message.find("messages[0].content[1]"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("not valid base64"), std::string::npos) << e.message;
  EXPECT_EQ(refuse(Audio("")).status, 400);  // empty
  EXPECT_EQ(refuse({{"type", "input_audio"}, {"input_audio", "AQID"}}).status, 400);
  EXPECT_EQ(refuse(Audio("AQID", 3)).status, 400);
  Limits small;
  small.max_audio_bytes = 2;
  e = refuse(Audio("AQID"), small);
  EXPECT_EQ(e.status, 413);
  EXPECT_NE(e.message.find("per clip"), std::string::npos) << e.message;
}

TEST(AudioProtocol, TheTranscriptionForm) {
  TranscriptionRequest r;
  ASSERT_FALSE(ParseTranscriptionRequest({{"file", "a.wav", "audio/wav", "RIFF...."},
                                          {"model", "", "", "whisper-1"},
                                          {"language", "", "", "zh"},
                                          {"prompt", "", "", "Names: Zoë"},
                                          {"temperature", "", "", "0.4"},
                                          {"response_format", "", "", "verbose_json"},
                                          {"timestamp_granularities[]", "", "", "segment"},
                                          {"chunking_strategy", "", "", "auto"},
                                          {"stream", "", "", "false"}},
                                         Limits{}, &r));
  EXPECT_EQ(r.file, "RIFF....");
  EXPECT_EQ(r.filename, "a.wav");
  EXPECT_EQ(r.model, "whisper-1");
  EXPECT_EQ(r.language, "zh");
  EXPECT_EQ(r.prompt, "Names: Zoë");
  EXPECT_FLOAT_EQ(r.temperature, 0.4f);
  EXPECT_EQ(r.response_format, "verbose_json");
  TranscriptionRequest plain;
  ASSERT_FALSE(ParseTranscriptionRequest({{"file", "", "", "x"}}, Limits{}, &plain));
  EXPECT_EQ(plain.response_format, "json");
  EXPECT_EQ(plain.temperature, 0.0f);

  const auto param = [](std::vector<FormField> fields, int status = 400) {
    if (fields.empty() || fields[0].name != "file") fields.insert(fields.begin(), {"file", "", "", "x"});
    TranscriptionRequest t;
    Limits limits;
    limits.max_audio_bytes = 8;
    auto e = ParseTranscriptionRequest(fields, limits, &t);
    EXPECT_TRUE(e);
    if (!e) return std::string();
    EXPECT_EQ(e->status, status) << e->message;
    return e->param;
  };
  EXPECT_EQ(param({{"model", "", "", "m"}, {"file", "", "", ""}}), "file");  // empty
  EXPECT_EQ(param({{"file", "", "", "123456789"}}, 413), "file");
  EXPECT_EQ(param({{"response_format", "", "", "srt"}}), "response_format");
  EXPECT_EQ(param({{"temperature", "", "", "hot"}}), "temperature");
  EXPECT_EQ(param({{"temperature", "", "", "1.5"}}), "temperature");
  EXPECT_EQ(param({{"timestamp_granularities[]", "", "", "word"}}), "timestamp_granularities");
  EXPECT_EQ(param({{"stream", "", "", "true"}}), "stream");
  TranscriptionRequest none;
  auto no_file = ParseTranscriptionRequest({{"model", "", "", "m"}}, Limits{}, &none);
  ASSERT_TRUE(no_file);
  EXPECT_EQ(no_file->param, "file");
}

TEST(AudioProtocol, TheThreeAnswers) {
  Transcription t;
  t.text = "one two";
  t.language = "en";
  t.duration = 41.5;
  t.pieces = {{0.0, 28.25, "one", {5, 6}}, {28.25, 41.5, "two", {7}}};
  t.input_tokens = 900;
  t.output_tokens = 3;
  TranscriptionRequest r;
  auto [json_body, json_type] = TranscriptionBody(r, t);
  EXPECT_EQ(json_type, "application/json; charset=utf-8");
  const json j = json::parse(json_body);
  EXPECT_EQ(j["text"], "one two");
  EXPECT_EQ(j["usage"]["type"], "tokens");
  EXPECT_EQ(j["usage"]["total_tokens"], 903);
  EXPECT_FALSE(j.contains("segments"));

  r.response_format = "text";
  auto [text_body, text_type] = TranscriptionBody(r, t);
  EXPECT_EQ(text_body, "one two\n");
  EXPECT_EQ(text_type, "text/plain; charset=utf-8");

  r.response_format = "verbose_json";
  r.temperature = 0.2f;
  const json v = json::parse(TranscriptionBody(r, t).first);
  EXPECT_EQ(v["task"], "transcribe");
  EXPECT_EQ(v["language"], "en");
  EXPECT_EQ(v["duration"], 41.5);
  EXPECT_EQ(v["usage"], json({{"type", "duration"}, {"seconds", 42}}));
  ASSERT_EQ(v["segments"].size(), 2u);
  const json& second = v["segments"][1];
  EXPECT_EQ(second["id"], 1);
  EXPECT_EQ(second["start"], 28.25);
  EXPECT_EQ(second["end"], 41.5);
  EXPECT_EQ(second["seek"], 2825);
  EXPECT_EQ(second["text"], "two");
  EXPECT_EQ(second["tokens"], json::array({7}));
  EXPECT_NEAR(second["temperature"].get<double>(), 0.2, 1e-6);
  // Nothing gemlet does not measure: no words, no log-probabilities, no no-speech figure.
  for (const char* absent : {"words", "avg_logprob", "compression_ratio", "no_speech_prob"}) {
    EXPECT_FALSE(second.contains(absent)) << absent;
    EXPECT_FALSE(v.contains(absent)) << absent;
  }
}

}  // namespace
}  // namespace gemlet::server

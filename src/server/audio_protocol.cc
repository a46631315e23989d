// OpenAI's audio on the wire: input_audio parts, the transcription form and its three answers.
#include "server/audio_protocol.h"

#include <cmath>
#include <cstdlib>

namespace gemlet::server {

using nlohmann::json;

namespace {

ApiError Invalid(const std::string& param, const std::string& message) {
  ApiError e = MakeError(400, message);
  e.param = param;
  return e;
}

}  // namespace

std::optional<ApiError> ReadInputAudio(const json& part, const Limits& limits, RequestAudio* clip) {
  const std::string& at = clip->where;
  const json* audio = part.contains("input_audio") ? &part["input_audio"] : nullptr;
  if (audio == nullptr || !audio->is_object() || !audio->contains("data") || !(*audio)["data"].is_string()) {
    return Invalid(clip->param, "'" + at + "' needs 'input_audio': {\"data\": BASE64, \"format\": \"wav\"}");
  }
  if (auto f = audio->find("format"); f != audio->end() && !f->is_null()) {
    if (!f->is_string()) return Invalid(clip->param, "'" + at + ".input_audio.format' must be a string (\"wav\", \"mp3\")");
    clip->format = f->get<std::string>();
  }
  std::string error;
  bool too_large = false;
  if (!DecodeBase64((*audio)["data"].get<std::string>(), limits.max_audio_bytes, &clip->bytes, &error, &too_large, "clip")) {
    ApiError e = Invalid(clip->param, "'" + at + "': the audio " + error);
    if (too_large) e.status = 413;
    return e;
  }
  if (clip->bytes.empty()) return Invalid(clip->param, "'" + at + "': the audio data is empty");
  return std::nullopt;
}

std::optional<ApiError> ParseTranscriptionRequest(const std::vector<FormField>& fields, const Limits& limits,
                                                  TranscriptionRequest* out) {
  bool have_file = false;
  for (const FormField& f : fields) {
    if (f.name == "file") {
      if (f.content.size() > limits.max_audio_bytes) {
        ApiError e = Invalid("file", "'file' is " + std::to_string(f.content.size()) + " bytes, over the server's limit of " +
                                         std::to_string(limits.max_audio_bytes) + " per clip");
        e.status = 413;
        return e;
      }
      if (f.content.empty()) return Invalid("file", "'file' is empty");
      out->file = f.content;
      out->filename = f.filename;
      have_file = true;
    } else if (f.name == "model") {
      out->model = f.content;
    } else if (f.name == "language") {
      out->language = f.content;
    } else if (f.name == "prompt") {
      out->prompt = f.content;
    } else if (f.name == "response_format") {
      if (f.content != "json" && f.content != "text" && f.content != "verbose_json") {
        return Invalid("response_format", "'response_format' must be json, text or verbose_json (gemlet has no "
                                          "timings finer than its pieces for srt or vtt)");
      }
      out->response_format = f.content;
    } else if (f.name == "temperature") {
      char* end = nullptr;
      const double t = std::strtod(f.content.c_str(), &end);
      if (f.content.empty() || end != f.content.c_str() + f.content.size() || !std::isfinite(t) || t < 0 || t > 1) {
        return Invalid("temperature", "'temperature' must be a number in [0, 1]");
      }
      out->temperature = static_cast<float>(t);
    } else if (f.name == "timestamp_granularities[]" || f.name == "timestamp_granularities") {
      if (f.content == "word") {
        return Invalid("timestamp_granularities", "word timestamps are not available: the model gives no word timings, "
                                                  "and gemlet does not invent them (verbose_json has its pieces' times)");
      }
      if (f.content != "segment") return Invalid("timestamp_granularities", "'timestamp_granularities' must be segment");
    } else if (f.name == "stream") {
      if (f.content == "true") return Invalid("stream", "streamed transcriptions are not supported: ask without 'stream'");
    }
  }
  if (!have_file) return Invalid("file", "the form needs the clip in a 'file' field (WAV, FLAC, Ogg or MP3)");
  return std::nullopt;
}

std::pair<std::string, std::string> TranscriptionBody(const TranscriptionRequest& r, const Transcription& t) {
  if (r.response_format == "text") return {t.text + "\n", "text/plain; charset=utf-8"};
  json body = {{"text", t.text}};
  if (r.response_format == "json") {
    body["usage"] = {{"type", "tokens"},
                     {"input_tokens", t.input_tokens},
                     {"output_tokens", t.output_tokens},
                     {"total_tokens", t.input_tokens + t.output_tokens}};
    return {body.dump(), "application/json; charset=utf-8"};
  }
  json segments = json::array();
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    const TranscribedPiece& p = t.pieces[i];
    // Whisper's fields that gemlet has: the piece's place (seek counts 10 ms frames, as Whisper's
    // does), its text and tokens, the temperature it was sampled at.
    segments.push_back({{"id", i},
                        {"seek", std::lround(p.start * 100)},
                        {"start", p.start},
                        {"end", p.end},
                        {"text", p.text},
                        {"tokens", p.tokens},
                        {"temperature", r.temperature}});
  }
  body = {{"task", "transcribe"},
          {"language", t.language},
          {"duration", t.duration},
          {"text", t.text},
          {"segments", segments},
          {"usage", {{"type", "duration"}, {"seconds", static_cast<int>(std::ceil(t.duration))}}}};
  return {body.dump(), "application/json; charset=utf-8"};
}

}  // namespace gemlet::server

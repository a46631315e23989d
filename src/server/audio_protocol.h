// OpenAI's audio as the server speaks it: input_audio content parts in a chat, and POST
// /v1/audio/transcriptions (a multipart/form-data upload) with its answers, text, json and
// verbose_json. Pure functions, tested without a socket.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/protocol.h"

namespace gemlet::server {

// A chat's {"type": "input_audio", "input_audio": {"data": BASE64, "format": "wav"}} into
// clip->bytes and clip->format (clip->param and ->where name it in errors). The format is taken as
// the client's word only: the decoder sniffs the bytes (WAV, FLAC, Ogg Opus/Vorbis, MP3).
std::optional<ApiError> ReadInputAudio(const nlohmann::json& part, const Limits& limits, RequestAudio* clip);

// One field of a multipart/form-data body.
struct FormField {
  std::string name;
  std::string filename;      // a file's name ("" for a plain field)
  std::string content_type;  // a file's type as the client named it
  std::string content;
};

struct TranscriptionRequest {
  std::string file;      // the clip's bytes
  std::string filename;
  std::string model;     // accepted and ignored: the server has one model
  // OpenAI's hint of the language spoken. gemlet asks for the transcript in it (TaskOptions::to, as
  // `gemlet transcribe --to`): the words as spoken when the hint is right, translated into it when
  // the speech is in another language. "": in the language spoken.
  std::string language;
  // The user's words to the model in place of the task's own request ("Transcribe this audio."), as
  // `gemlet transcribe -p`: what to listen for, names to spell.
  std::string prompt;
  std::string response_format = "json";  // "json", "text" or "verbose_json"
  float temperature = 0;                  // OpenAI's default for transcriptions: greedy
};

// The form's fields (file, model, language, prompt, temperature, response_format,
// timestamp_granularities[]; others ignored). Refused with a 400 naming the field: no file, a
// response_format other than the three, word timestamps (gemlet has no word timings), stream; a
// file over limits.max_audio_bytes is 413.
std::optional<ApiError> ParseTranscriptionRequest(const std::vector<FormField>& fields, const Limits& limits,
                                                  TranscriptionRequest* out);

// A piece of the clip (Engine::EncodeAudioPieces) and what the model heard in it.
struct TranscribedPiece {
  double start = 0;  // seconds, where the split cut the clip: the only times gemlet has
  double end = 0;
  std::string text;
  std::vector<int32_t> tokens;
};
struct Transcription {
  std::string text;      // the pieces' texts joined (JoinTranscripts)
  std::string language;  // the request's `language`, else the transcript's ("en", "zh-Hans", ...)
  double duration = 0;   // of the clip, in seconds
  std::vector<TranscribedPiece> pieces;
  int input_tokens = 0;   // the prompts' tokens, the clip's soft tokens among them
  int output_tokens = 0;
};

// The answer's body and content type for the request's response_format: text (the text and a
// newline), json ({"text", "usage"}), verbose_json ({"task", "language", "duration", "text",
// "segments": one per piece, with its start and end, "usage"}: no word timings, no log-probability or
// no-speech figures, which gemlet does not measure).
std::pair<std::string, std::string> TranscriptionBody(const TranscriptionRequest& r, const Transcription& t);

}  // namespace gemlet::server

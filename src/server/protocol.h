// The wire formats: OpenAI's chat and text completions (and llama-server's extensions where OpenAI
// is silent), Ollama's chat and generate, parsed into one request shape and written back from a
// Reply. Pure functions of JSON, tested without a socket.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "gemlet/tasks.hpp"

namespace gemlet::server {

// A refused request: the HTTP status and OpenAI's error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("" when none)
  std::string code;   // "" when none
};
// An error of this status and message (the OpenAI "type" and "code" as given).
ApiError MakeError(int status, std::string message, std::string type = "invalid_request_error", std::string code = "");
nlohmann::json ErrorJson(const ApiError& e);

// A request body as JSON, its size and nesting checked first (gemlet/json_input.hpp): a body nested
// 100,000 levels deep is a 400, never a walk that overflows the stack.
std::optional<ApiError> ParseBody(std::string_view body, size_t max_bytes, nlohmann::json* out);

// An image a request carries inline (OpenAI's image_url data URL, Ollama's images), its base64
// decoded; the server encodes it (Engine::EncodeImage, through its cache) into its content part.
struct RequestImage {
  size_t message = 0;  // the message whose parts hold it (raw /api/generate: CompletionRequest::prompt_parts)
  size_t part = 0;     // the part that takes its EncodedMedia
  std::string bytes;   // the image file's bytes (PNG, JPEG, WebP, HEIC: the decoder sniffs which)
  std::string param;   // the request's field, for errors: "messages[0].content", "images"
  std::string where;   // the image itself, for messages: "messages[0].content[1]", "images[0]"
};

// A clip a request carries inline (OpenAI's input_audio part), its base64 decoded; the server
// encodes it (Engine::EncodeAudioPieces, through its cache) into its content part, or into as many
// parts in a row as the pieces of a clip longer than the model's window.
struct RequestAudio {
  size_t message = 0;  // the message whose parts hold it
  size_t part = 0;     // the part that takes its first piece
  std::string bytes;   // the file's bytes (WAV, FLAC, Ogg, MP3: the decoder sniffs which)
  std::string format;  // as the client named it ("wav", "mp3", ...), for messages
  std::string param;   // "messages[0].content"
  std::string where;   // "messages[0].content[1]"
};

// What every dialect's request comes down to.
struct CompletionRequest {
  bool chat = true;                 // messages (else a raw prompt)
  std::vector<Message> messages;
  std::string prompt;               // text completions
  std::vector<int32_t> prompt_tokens;  // text completions given as token ids
  // Images, in request order: each fills messages[message].parts[part].media (or prompt_parts'),
  // a part the parser left empty. A message with images has its text in parts too, in order.
  std::vector<RequestImage> images;
  std::vector<ContentPart> prompt_parts;  // raw /api/generate with images: the images, then the prompt
  // Clips (chat), in request order, each in the part the parser left empty for it.
  std::vector<RequestAudio> audio;
  bool thinking = false;            // Gemma 4: think before answering
  std::string tools;                // Gemma 4: OpenAI's tools array, as JSON text ("" none)
  std::string tool_choice;          // as JSON text ("" auto)
  GenerateOptions options;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool logprobs = false;
  std::string model;
  // OpenAI's n: choices generated for the prompt, choice i sampling with seed + i (the same prompt,
  // decoded in n slots side by side).
  int n = 1;
  // OpenAI's parallel_tool_calls: false answers with the first tool call only.
  bool parallel_tool_calls = true;
  // Ollama: options.num_ctx, the context this request may use (0: the slot's); keep_alive, how long
  // the model stays loaded after it (seconds; negative: for ever; unset: the server's setting);
  // and a request with no prompt, which only loads (or with keep_alive 0 unloads) the model.
  int num_ctx = 0;
  std::optional<double> keep_alive_seconds;
  // llama-server's per-request adapters, [{"id": N, "scale": S}, ...]: the server's adapters by
  // their index (GET /lora-adapters), those not listed at scale 0. nullopt: the server's scales.
  std::optional<std::vector<std::pair<int, float>>> lora;
  bool load_only = false;
};

struct Limits {
  int max_tokens = 4096;  // the most a request may ask for
  int max_stop = 16;      // stop strings
  int max_choices = 8;    // OpenAI's n
  size_t max_image_bytes = 20u << 20;  // one image's file, decoded from base64 (more: 413)
  size_t max_audio_bytes = 25u << 20;  // one clip's file, from base64 or uploaded (more: 413)
};

// An image's bytes from base64 (RFC 4648's alphabet, padding optional, line breaks and spaces
// skipped; '-' and '_' of the URL-safe alphabet taken too). false, with *error saying where, when
// the text is not base64 or decodes to more than max_bytes (*too_large then set).
// `what` names the thing in the limit's message ("image", "clip").
bool DecodeBase64(std::string_view text, size_t max_bytes, std::string* out, std::string* error, bool* too_large,
                  const char* what = "image");
// OpenAI's image_url.url: a data URL (data:image/png;base64,...) decoded into *bytes. Remote
// (http, https) and other URLs are refused: nothing leaves the device.
std::optional<ApiError> ReadImageUrl(std::string_view url, const std::string& where, const std::string& param,
                                     const Limits& limits, std::string* bytes);

// OpenAI: POST /v1/chat/completions and /v1/completions. Unknown fields are ignored; wrong types
// and values out of range are refused with a message naming the field.
std::optional<ApiError> ParseChatRequest(const nlohmann::json& body, const Limits& limits, CompletionRequest* out);
std::optional<ApiError> ParseCompletionRequest(const nlohmann::json& body, const Limits& limits, CompletionRequest* out);
// Ollama: POST /api/chat and /api/generate (options.temperature, num_predict, ...; stream defaults on;
// `format` "json" or a schema is a response_format). Options that would change the answer and are
// not implemented (mirostat, typical_p, tfs_z) are refused unless at their no-op values; `images`
// (base64 strings, on /api/chat's messages and /api/generate) go before the text they come with, as
// Ollama places them; the runner's own settings (num_gpu, num_thread, num_batch, use_mmap, ...) are
// the server's and listed in docs/server.md as ignored.

std::optional<ApiError> ParseOllamaRequest(const nlohmann::json& body, bool chat, const Limits& limits,
                                           CompletionRequest* out);

// Ollama's keep_alive: a number of seconds, or a duration ("5m", "1h30m", "90s", "-1"); negative
// keeps the model loaded for ever. nullopt when the text is none of these.
std::optional<double> ParseOllamaDuration(const nlohmann::json& value);

// gemlet's POST /v1/tasks/NAME: {"input", "style", "to", "schema", "glossary", "thinking"} and the
// chat completion's generation fields (max_tokens, temperature, ... ; greedy unless given). The
// prompt comes from TaskMessages: r->messages is left for the caller to fill.
std::optional<ApiError> ParseTaskRequest(const nlohmann::json& body, const std::string& task, const Limits& limits,
                                         TaskOptions* task_out, std::string* input, CompletionRequest* r);

// llama-server's adapter list (a request's "lora", the body of POST /lora-adapters): an array of
// {"id": integer >= 0, "scale": number}; an id given twice keeps the last. `param` names it in errors.
std::optional<ApiError> ParseLoraList(const nlohmann::json& list, const std::string& param,
                                      std::vector<std::pair<int, float>>* out);

// OpenAI's finish_reason for a reply: "stop", "length", "tool_calls".
const char* FinishReason(const Reply& reply);

// The response bodies. `id` is the completion's ("chatcmpl-..."), `created` a Unix time.
struct ResponseContext {
  std::string id;
  int64_t created = 0;
  std::string model;
  const Engine* engine = nullptr;  // token texts for logprobs
};
nlohmann::json ChatCompletionJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply);
nlohmann::json TextCompletionJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply);
nlohmann::json UsageJson(const Reply& reply);
// The n completions of one request (each with its one choice) as one: choices indexed 0..n-1, the
// usage added up with the prompt counted once.
nlohmann::json MergeChoices(std::vector<nlohmann::json> completions);
// The reply's logprobs as the request's API writes them (chat: {"content": [...]}; text:
// {"tokens", "token_logprobs", "top_logprobs"}); null unless the request asked for them.
nlohmann::json LogprobsJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply);
// The reply's tool calls as OpenAI's tool_calls array (with "index" for a streamed delta).
// With r.parallel_tool_calls false, the first call only.
nlohmann::json ToolCallsJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply, bool with_index);
// Streaming: one chunk's JSON. delta is {"role":...} / {"content":...} / {"reasoning_content":...}.
nlohmann::json ChatChunkJson(const ResponseContext& c, const nlohmann::json& delta, const char* finish_reason);
nlohmann::json TextChunkJson(const ResponseContext& c, const std::string& text, const char* finish_reason);
// Ollama's bodies (one NDJSON line each when streaming; `done` with the totals at the end).
// The answer to /v1/tasks/NAME: the cleaned output, the languages, the glossary terms found, usage.
nlohmann::json TaskJson(const ResponseContext& c, const std::string& task, const TaskPrompt& prompt, const Reply& reply);
nlohmann::json OllamaChunkJson(const ResponseContext& c, bool chat, const std::string& text, const std::string& thinking);
nlohmann::json OllamaDoneJson(const ResponseContext& c, bool chat, const Reply& reply, bool with_text);
// Ollama's answer to a request that only loads or unloads the model.
nlohmann::json OllamaLoadJson(const ResponseContext& c, bool chat, bool unloaded);

}  // namespace gemlet::server

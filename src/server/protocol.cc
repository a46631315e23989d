// Request parsing and response writing for the OpenAI and Ollama dialects. Field names, defaults
// and shapes follow OpenAI's API reference; llama-server's extensions (top_k, min_p,
// repeat_penalty, chat_template_kwargs) are accepted where OpenAI has nothing.
#include "server/protocol.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "gemlet/json_input.hpp"
#include "server/audio_protocol.h"

namespace gemlet::server {

using nlohmann::json;

ApiError MakeError(int status, std::string message, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

json ErrorJson(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return {{"error", err}};
}

std::optional<ApiError> ParseBody(std::string_view body, size_t max_bytes, json* out) {
  if (Status s = CheckJsonText(body, "the request body", {.max_bytes = max_bytes}); !s.ok()) {
    ApiError e;
    e.status = body.size() > max_bytes ? 413 : 400;
    e.message = s.message();
    return e;
  }
  *out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    ApiError e;
    e.message = "the request body is not valid JSON";
    return e;
  }
  return std::nullopt;
}

namespace {

ApiError Invalid(const std::string& param, const std::string& message) {
  ApiError e;
  e.param = param;
  e.message = message;
  return e;
}

// Typed field readers: absent or null leaves *out alone; a wrong type is an error naming the field.
std::optional<ApiError> ReadNumber(const json& body, const char* key, double lo, double hi, double* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return Invalid(key, std::string("'") + key + "' must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return Invalid(key, std::string("'") + key + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  }
  *out = v;
  return std::nullopt;
}

std::optional<ApiError> ReadFloat(const json& body, const char* key, double lo, double hi, float* out) {
  double v = *out;
  if (auto e = ReadNumber(body, key, lo, hi, &v)) return e;
  *out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const json& body, const char* key, int64_t lo, int64_t hi, int64_t* out,
                                bool* given = nullptr) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() && !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>())) {
    return Invalid(key, std::string("'") + key + "' must be an integer");
  }
  const double v = it->get<double>();
  if (v < static_cast<double>(lo) || v > static_cast<double>(hi)) {
    return Invalid(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = static_cast<int64_t>(v);
  if (given) *given = true;
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return Invalid(key, std::string("'") + key + "' must be a boolean");
  *out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ReadString(const json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return Invalid(key, std::string("'") + key + "' must be a string");
  *out = it->get<std::string>();
  return std::nullopt;
}

// "stop": a string or an array of strings.
std::optional<ApiError> ReadStop(const json& body, const Limits& limits, std::vector<std::string>* out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  std::vector<std::string> stops;
  if (it->is_string()) {
    stops.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const json& s : *it) {
      if (!s.is_string()) return Invalid("stop", "'stop' must be a string or an array of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    return Invalid("stop", "'stop' must be a string or an array of strings");
  }
  if (static_cast<int>(stops.size()) > limits.max_stop) {
    return Invalid("stop", "'stop' may hold at most " + std::to_string(limits.max_stop) + " strings");
  }
  for (const std::string& s : stops) {
    if (s.empty()) return Invalid("stop", "'stop' strings must not be empty");
  }
  *out = std::move(stops);
  return std::nullopt;
}

// "logit_bias": {"TOKEN_ID": BIAS, ...} with BIAS in [-100, 100] (OpenAI's shape; the ids are
// checked against the vocabulary when the prompt is tokenized).
std::optional<ApiError> ReadLogitBias(const json& body, std::vector<std::pair<int32_t, float>>* out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return Invalid("logit_bias", "'logit_bias' must be an object of token ids to biases");
  constexpr size_t kMaxEntries = 1024;  // OpenAI's limit is 300
  if (it->size() > kMaxEntries) {
    return Invalid("logit_bias", "'logit_bias' may hold at most " + std::to_string(kMaxEntries) + " tokens");
  }
  for (const auto& [key, value] : it->items()) {
    char* end = nullptr;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || end == nullptr || *end != '\0' || id < 0 || id > INT32_MAX) {
      return Invalid("logit_bias", "'logit_bias' keys must be token ids (\"" + key.substr(0, 32) + "\" is not one)");
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 || value.get<double>() > 100) {
      return Invalid("logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
    }
    out->emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  return std::nullopt;
}

}  // namespace

bool DecodeBase64(std::string_view text, size_t max_bytes, std::string* out, std::string* error, bool* too_large,
                  const char* what) {
  *too_large = false;
  out->clear();
  // Three bytes for every four characters: refuse an image too large before decoding it.
  if (text.size() / 4 * 3 > max_bytes + 3 + text.size() / 16) {
    // (whitespace may pad the text; a line every 64 characters at most costs 1/16 of it)
    size_t chars = 0;
    for (char c : text) chars += c != '\n' && c != '\r' && c != ' ' && c != '\t' && c != '=';
    if (chars / 4 * 3 + (chars % 4 > 1 ? chars % 4 - 1 : 0) > max_bytes) {
      *too_large = true;
      *error = "is too large: more than " + std::to_string(max_bytes) + " bytes decoded (the server's limit per " + what + ")";
      return false;
    }
  }
  out->reserve(text.size() / 4 * 3 + 3);
  uint32_t bits = 0;
  int n_bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+' || c == '-') v = 62;
    else if (c == '/' || c == '_') v = 63;
    else if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    else if (c == '=') {
      ++padding;
      continue;
    }
    if (v < 0 || padding > 0) {
      *error = "is not valid base64 (" + std::string(v < 0 ? "an unexpected character" : "data after the '=' padding") +
               " at offset " + std::to_string(i) + ")";
      return false;
    }
    bits = (bits << 6) | static_cast<uint32_t>(v);
    n_bits += 6;
    if (n_bits >= 8) {
      n_bits -= 8;
      out->push_back(static_cast<char>((bits >> n_bits) & 0xFF));
    }
  }
  // Leftover bits: 0 (complete), 2 or 4 (one or two bytes short of a group, padded or not); 6 is one
  // character alone, which no encoder writes.
  if (n_bits == 6 || padding > 2) {
    *error = "is not valid base64 (its length does not end a group of four characters)";
    return false;
  }
  if (out->size() > max_bytes) {
    *too_large = true;
    *error = "is too large: " + std::to_string(out->size()) + " bytes decoded, more than the server's limit of " +
             std::to_string(max_bytes) + " per " + what;
    return false;
  }
  return true;
}

std::optional<ApiError> ReadImageUrl(std::string_view url, const std::string& where, const std::string& param,
                                     const Limits& limits, std::string* bytes) {
  const auto starts = [&url](std::string_view prefix) {
    if (url.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(url[i])) != prefix[i]) return false;
    }
    return true;
  };
  if (starts("http://") || starts("https://")) {
    return Invalid(param, "'" + where + "': remote image URLs are not fetched, since nothing leaves this device; send the "
                          "image inline as a data URL (data:image/png;base64,...)");
  }
  if (!starts("data:")) {
    return Invalid(param, "'" + where + "': the image must be a data URL (data:image/png;base64,...); no other URL is read");
  }
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) {
    return Invalid(param, "'" + where + "': a malformed data URL (no ',' before the data)");
  }
  const std::string_view head = url.substr(5, comma - 5);  // "image/png;base64"
  const std::string_view type = head.substr(0, head.find(';'));
  if (!type.empty() && type.substr(0, 6) != "image/") {
    std::string shown;  // the type as sent, printable ASCII only
    for (char c : type.substr(0, 40)) shown += c > ' ' && c < 127 && c != '\'' ? c : '?';
    return Invalid(param, "'" + where + "': a data URL of type '" + shown + "', not an image");
  }
  if (head.size() < 7 || head.substr(head.size() - 7) != ";base64") {
    return Invalid(param, "'" + where + "': the data URL must be base64 (data:image/png;base64,...)");
  }
  std::string error;
  bool too_large = false;
  if (!DecodeBase64(url.substr(comma + 1), limits.max_image_bytes, bytes, &error, &too_large)) {
    ApiError e = Invalid(param, "'" + where + "': the image " + error);
    if (too_large) e.status = 413;
    return e;
  }
  if (bytes->empty()) return Invalid(param, "'" + where + "': the data URL holds no image");
  return std::nullopt;
}

namespace {

// The sampling and length fields both OpenAI endpoints share.
std::optional<ApiError> ReadGenerationFields(const json& body, const Limits& limits, CompletionRequest* r) {
  SamplingOptions& s = r->options.sampling;
  if (auto e = ReadFloat(body, "temperature", 0, 2, &s.temperature)) return e;
  if (auto e = ReadFloat(body, "top_p", 0, 1, &s.top_p)) return e;
  if (body.contains("top_p") && body["top_p"].is_number() && body["top_p"].get<double>() <= 0) {
    return Invalid("top_p", "'top_p' must be in (0, 1]");
  }
  if (auto e = ReadFloat(body, "presence_penalty", -2, 2, &s.presence_penalty)) return e;
  if (auto e = ReadFloat(body, "frequency_penalty", -2, 2, &s.frequency_penalty)) return e;
  if (auto e = ReadFloat(body, "min_p", 0, 1, &s.min_p)) return e;
  if (auto e = ReadFloat(body, "repeat_penalty", 0.01, 10, &s.repeat_penalty)) return e;
  int64_t top_k = s.top_k;
  if (auto e = ReadInt(body, "top_k", 0, 1 << 20, &top_k)) return e;
  s.top_k = static_cast<int>(top_k);
  int64_t seed = 0;
  bool seed_given = false;
  if (auto e = ReadInt(body, "seed", INT64_MIN / 2, INT64_MAX / 2, &seed, &seed_given)) return e;
  if (seed_given) s.seed = static_cast<uint64_t>(seed);
  // max_completion_tokens replaced max_tokens in OpenAI's API; both are accepted, the newer wins.
  int64_t max_tokens = 0;
  bool given = false;
  if (auto e = ReadInt(body, "max_tokens", 1, limits.max_tokens, &max_tokens, &given)) return e;
  if (auto e = ReadInt(body, "max_completion_tokens", 1, limits.max_tokens, &max_tokens, &given)) return e;
  r->max_tokens_given = given;
  r->options.max_tokens = given ? static_cast<int>(max_tokens) : limits.max_tokens;
  if (auto e = ReadLogitBias(body, &s.logit_bias)) return e;
  int64_t n = 1;
  if (auto e = ReadInt(body, "n", 1, limits.max_choices, &n)) return e;
  r->n = static_cast<int>(n);
  if (auto it = body.find("lora"); it != body.end() && !it->is_null()) {
    std::vector<std::pair<int, float>> lora;
    if (auto e = ParseLoraList(*it, "lora", &lora)) return e;
    r->lora = std::move(lora);
  }
  if (auto e = ReadStop(body, limits, &r->options.stop)) return e;
  if (auto e = ReadBool(body, "stream", &r->stream)) return e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("stream_options", "'stream_options' must be an object");
    if (auto e = ReadBool(*it, "include_usage", &r->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  if (auto e = ReadString(body, "model", &r->model)) return e;
  // Structured output: checked here for shape; the schema itself when the request is tokenized.
  if (auto f = body.find("response_format"); f != body.end() && !f->is_null()) {
    if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string()) {
      return Invalid("response_format", "'response_format' must be an object with a 'type'");
    }
    const std::string type = (*f)["type"].get<std::string>();
    if (type == "json_schema") {
      const json* js = f->contains("json_schema") ? &(*f)["json_schema"] : nullptr;
      if (!js || !js->is_object() || !js->contains("schema") || !(*js)["schema"].is_object()) {
        return Invalid("response_format", "'response_format.json_schema.schema' must be an object");
      }
    } else if (type != "text" && type != "json_object") {
      return Invalid("response_format", "'response_format.type' must be text, json_object or json_schema");
    }
    if (type != "text") r->options.response_format = f->dump();
  }
  return std::nullopt;
}

// A message's content: a string, null, or an array of text and image_url parts. Text alone is
// joined into msg->content; with images every part goes into msg->parts in order, each image's
// part left for the server to fill (r->images). `message` is the index msg will have.
std::optional<ApiError> ReadContent(const json& m, size_t index, size_t message, const Limits& limits, Message* msg,
                                    CompletionRequest* r) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    msg->content = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) return Invalid(where, "'" + where + "' must be a string or an array of parts");
  std::vector<ContentPart> parts;
  std::vector<RequestImage> images;
  std::vector<RequestAudio> audio;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    const std::string at = where + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return Invalid(where, "each part of '" + where + "' must be an object with a 'type'");
    }
    const std::string type = part["type"].get<std::string>();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) {
        return Invalid(where, "a text part of '" + where + "' needs a string 'text'");
      }
      parts.push_back({part["text"].get<std::string>(), nullptr});
    } else if (type == "image_url") {
      // {"image_url": {"url": ..., "detail": ...}}; some clients send the URL as a plain string.
      // detail (low, high, auto) is accepted and ignored: the model's processor sets the resolution.
      const json* u = part.contains("image_url") ? &part["image_url"] : nullptr;
      if (u != nullptr && u->is_object()) u = u->contains("url") ? &(*u)["url"] : nullptr;
      if (u == nullptr || !u->is_string()) {
        return Invalid(where, "'" + at + "' needs 'image_url': {\"url\": \"data:image/png;base64,...\"}");
      }
      RequestImage image{message, parts.size(), {}, where, at};
      if (auto e = ReadImageUrl(u->get<std::string>(), at, where, limits, &image.bytes)) return e;
      images.push_back(std::move(image));
      parts.push_back({});
    } else if (type == "input_audio") {
      RequestAudio clip{message, parts.size(), {}, {}, where, at};
      if (auto e = ReadInputAudio(part, limits, &clip)) return e;
      audio.push_back(std::move(clip));
      parts.push_back({});
    } else {
      return Invalid(where, "'" + at + "': '" + type + "' parts are not supported (text, image_url and input_audio)");
    }
  }
  if (images.empty() && audio.empty()) {
    for (const ContentPart& p : parts) msg->content += p.text;
    return std::nullopt;
  }
  msg->parts = std::move(parts);
  for (RequestImage& image : images) r->images.push_back(std::move(image));
  for (RequestAudio& clip : audio) r->audio.push_back(std::move(clip));
  return std::nullopt;
}

// Ollama's "images": base64 strings, placed before the text they come with (as Ollama does).
// Appends their parts to *parts (the text part is the caller's) and the images to r->images.
std::optional<ApiError> ReadOllamaImages(const json& object, const std::string& param, size_t message,
                                         const Limits& limits, std::vector<ContentPart>* parts, CompletionRequest* r) {
  auto it = object.find("images");
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return Invalid(param, "'" + param + "' must be an array of base64 strings");
  for (size_t k = 0; k < it->size(); ++k) {
    const std::string at = param + "[" + std::to_string(k) + "]";
    if (!(*it)[k].is_string()) return Invalid(param, "'" + at + "' must be a base64 string");
    RequestImage image{message, parts->size(), {}, param, at};
    std::string error;
    bool too_large = false;
    if (!DecodeBase64((*it)[k].get<std::string>(), limits.max_image_bytes, &image.bytes, &error, &too_large)) {
      ApiError e = Invalid(param, "'" + at + "' " + error);
      if (too_large) e.status = 413;
      return e;
    }
    if (image.bytes.empty()) return Invalid(param, "'" + at + "' is empty");
    r->images.push_back(std::move(image));
    parts->push_back({});
  }
  return std::nullopt;
}

// An assistant message's tool_calls: [{"function": {"name", "arguments"}, "id"?}]. OpenAI sends
// the arguments as JSON text, Ollama as an object: either is kept as JSON text.
std::optional<ApiError> ReadToolCalls(const json& m, const std::string& where, std::vector<ToolCall>* out) {
  auto calls = m.find("tool_calls");
  if (calls == m.end() || calls->is_null()) return std::nullopt;
  if (!calls->is_array()) return Invalid(where + ".tool_calls", "'" + where + ".tool_calls' must be an array");
  for (const json& c : *calls) {
    const json* f = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      return Invalid(where + ".tool_calls", "each tool call needs function.name");
    }
    ToolCall call;
    call.name = (*f)["name"].get<std::string>();
    if (f->contains("arguments")) {
      const json& a = (*f)["arguments"];
      call.arguments = a.is_string() ? a.get<std::string>() : a.dump();
    }
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    out->push_back(std::move(call));
  }
  return std::nullopt;
}

// "tools" and "tool_choice", as OpenAI and Ollama both write them.
std::optional<ApiError> ReadTools(const json& body, CompletionRequest* r) {
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    if (!t->is_array()) return Invalid("tools", "'tools' must be an array");
    for (const json& tool : *t) {
      if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") ||
          !tool["function"].is_object() || !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
        return Invalid("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
    }
    if (!t->empty()) r->tools = t->dump();
  }
  if (auto e = ReadBool(body, "parallel_tool_calls", &r->parallel_tool_calls)) return e;
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    if (!c->is_string() && !c->is_object()) return Invalid("tool_choice", "'tool_choice' must be a string or an object");
    r->tool_choice = c->dump();
    r->options.tool_choice = r->tool_choice;  // "required" and a named function are enforced while sampling
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseLoraList(const json& list, const std::string& param, std::vector<std::pair<int, float>>* out) {
  if (!list.is_array()) return Invalid(param, "'" + param + "' must be an array of {\"id\", \"scale\"} objects");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& entry = list[i];
    const std::string where = param + "[" + std::to_string(i) + "]";
    if (!entry.is_object()) return Invalid(where, "'" + where + "' must be an object with 'id' and 'scale'");
    auto id = entry.find("id");
    if (id == entry.end() || !id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > (1 << 20)) {
      return Invalid(where + ".id", "'" + where + ".id' must be an adapter's index (an integer >= 0)");
    }
    auto scale = entry.find("scale");
    if (scale == entry.end() || !scale->is_number() || !std::isfinite(scale->get<double>())) {
      return Invalid(where + ".scale", "'" + where + ".scale' must be a number");
    }
    const int index = static_cast<int>(id->get<int64_t>());
    std::erase_if(*out, [index](const auto& e) { return e.first == index; });
    out->emplace_back(index, static_cast<float>(scale->get<double>()));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseChatRequest(const json& body, const Limits& limits, CompletionRequest* r) {
  if (!body.is_object()) return Invalid("", "the request body must be a JSON object");
  r->chat = true;
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array()) return Invalid("messages", "'messages' must be an array");
  if (it->empty()) return Invalid("messages", "'messages' must not be empty");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Invalid(where, "'" + where + "' must be an object");
    std::string role;
    if (auto e = ReadString(m, "role", &role)) {
      e->param = where + ".role";
      return e;
    }
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return Invalid(where + ".role", "'" + where + ".role' must be system, developer, user, assistant or tool");
    }
    Message msg{role, ""};
    if (auto e = ReadContent(m, i, r->messages.size(), limits, &msg, r)) return e;
    if (role == "tool") {
      if (auto e = ReadString(m, "tool_call_id", &msg.tool_call_id)) return e;
      if (auto e = ReadString(m, "name", &msg.name)) return e;
    }
    if (role == "assistant") {
      if (auto e = ReadString(m, "reasoning_content", &msg.reasoning)) return e;
      if (auto e = ReadToolCalls(m, where, &msg.tool_calls)) return e;
    }
    r->messages.push_back(std::move(msg));
  }
  if (auto e = ReadTools(body, r)) return e;
  if (auto e = ReadGenerationFields(body, limits, r)) return e;
  if (auto e = ReadBool(body, "logprobs", &r->logprobs)) return e;
  int64_t top = 0;
  bool top_given = false;
  if (auto e = ReadInt(body, "top_logprobs", 0, 20, &top, &top_given)) return e;
  if (top_given && !r->logprobs) return Invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (r->logprobs) r->options.top_logprobs = static_cast<int>(top);
  // Thinking: llama-server's chat_template_kwargs.enable_thinking, or OpenAI's reasoning_effort
  // (any effort but "none" thinks: Gemma 4 has no effort levels).
  if (auto k = body.find("chat_template_kwargs"); k != body.end() && k->is_object()) {
    if (auto e = ReadBool(*k, "enable_thinking", &r->thinking)) {
      e->param = "chat_template_kwargs.enable_thinking";
      return e;
    }
  }
  std::string effort;
  if (auto e = ReadString(body, "reasoning_effort", &effort)) return e;
  if (!effort.empty()) r->thinking = effort != "none";
  return std::nullopt;
}

std::optional<ApiError> ParseCompletionRequest(const json& body, const Limits& limits, CompletionRequest* r) {
  if (!body.is_object()) return Invalid("", "the request body must be a JSON object");
  r->chat = false;
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Invalid("prompt", "'prompt' is required");
  if (it->is_string()) {
    r->prompt = it->get<std::string>();
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r->prompt = (*it)[0].get<std::string>();
  } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    for (const json& t : *it) {
      if (!t.is_number_integer()) return Invalid("prompt", "a token prompt must be an array of integers");
      r->prompt_tokens.push_back(t.get<int32_t>());
    }
  } else {
    return Invalid("prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
  }
  if (r->prompt.empty() && r->prompt_tokens.empty()) return Invalid("prompt", "'prompt' must not be empty");
  if (auto e = ReadGenerationFields(body, limits, r)) return e;
  // Text completions: "logprobs" is the number of alternatives (0..5 in OpenAI's API).
  int64_t lp = 0;
  bool lp_given = false;
  if (auto e = ReadInt(body, "logprobs", 0, 20, &lp, &lp_given)) return e;
  if (lp_given) {
    r->logprobs = true;
    r->options.top_logprobs = static_cast<int>(lp);
  }
  return std::nullopt;
}

std::optional<double> ParseOllamaDuration(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const std::string text = value.get<std::string>();
  if (text.empty()) return std::nullopt;
  // A bare number is seconds; else Go's duration syntax: [-]N unit [N unit ...] with h, m, s, ms.
  char* end = nullptr;
  const double plain = std::strtod(text.c_str(), &end);
  if (end != nullptr && *end == '\0') return plain;
  size_t i = 0;
  double sign = 1, total = 0;
  if (text[0] == '-') {
    sign = -1;
    i = 1;
  }
  bool any = false;
  while (i < text.size()) {
    size_t used = 0;
    double number = 0;
    try {
      number = std::stod(text.substr(i), &used);
    } catch (...) {
      return std::nullopt;
    }
    if (used == 0 || number < 0) return std::nullopt;
    i += used;
    if (text.compare(i, 2, "ms") == 0) {
      total += number / 1000;
      i += 2;
    } else if (i < text.size() && (text[i] == 'h' || text[i] == 'm' || text[i] == 's')) {
      total += number * (text[i] == 'h' ? 3600 : text[i] == 'm' ? 60 : 1);
      i += 1;
    } else {
      return std::nullopt;
    }
    any = true;
  }
  if (!any) return std::nullopt;
  return sign * total;
}

json OllamaLoadJson(const ResponseContext& c, bool chat, bool unloaded) {
  json j = OllamaChunkJson(c, chat, "", "");
  j["done"] = true;
  j["done_reason"] = unloaded ? "unload" : "load";
  return j;
}

namespace {

// Ollama's "format": "json" (any JSON object) or a JSON schema, as OpenAI's response_format.
std::optional<ApiError> ReadOllamaFormat(const json& body, CompletionRequest* r) {
  auto it = body.find("format");
  if (it == body.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty())) return std::nullopt;
  if (it->is_string() && it->get<std::string>() == "json") {
    r->options.response_format = R"({"type":"json_object"})";
  } else if (it->is_object()) {
    r->options.response_format = json({{"type", "json_schema"}, {"json_schema", {{"schema", *it}}}}).dump();
  } else {
    return Invalid("format", "'format' must be \"json\" or a JSON schema object");
  }
  return std::nullopt;
}

// Options that change the answer and are not implemented: refused, unless at the value that turns
// them off (clients send Ollama's defaults).
std::optional<ApiError> RefuseUnsupportedOptions(const json& o) {
  const struct {
    const char* key;
    double off;
  } unsupported[] = {{"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}};
  for (const auto& u : unsupported) {
    auto it = o.find(u.key);
    if (it == o.end() || it->is_null()) continue;
    if (!it->is_number() || it->get<double>() != u.off) {
      return Invalid(std::string("options.") + u.key, std::string("'options.") + u.key + "' is not supported (only " +
                                                           json(u.off).dump() + ", which turns it off)");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseOllamaRequest(const json& body, bool chat, const Limits& limits, CompletionRequest* r) {
  if (!body.is_object()) return Invalid("", "the request body must be a JSON object");
  r->chat = chat;
  r->stream = true;  // Ollama streams unless told not to
  if (auto e = ReadBool(body, "stream", &r->stream)) return e;
  if (auto e = ReadString(body, "model", &r->model)) return e;
  if (auto e = ReadBool(body, "think", &r->thinking)) return e;
  if (auto e = ReadOllamaFormat(body, r)) return e;
  for (const char* key : {"template", "suffix", "context"}) {
    if (auto it = body.find(key); it != body.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()) &&
                                  !(it->is_array() && it->empty())) {
      return Invalid(key, std::string("'") + key + "' is not supported");
    }
  }
  if (auto it = body.find("keep_alive"); it != body.end() && !it->is_null()) {
    r->keep_alive_seconds = ParseOllamaDuration(*it);
    if (!r->keep_alive_seconds) {
      return Invalid("keep_alive", "'keep_alive' must be seconds or a duration such as \"5m\" (negative: for ever)");
    }
  }
  if (chat) {
    auto it = body.find("messages");
    if (it == body.end() || it->is_null() || (it->is_array() && it->empty())) {
      r->load_only = true;  // Ollama: no messages loads the model (keep_alive 0: unloads it)
      return std::nullopt;
    }
    if (!it->is_array()) return Invalid("messages", "'messages' must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      Message msg;
      if (!m.is_object()) return Invalid("messages", "each message must be an object");
      if (auto e = ReadString(m, "role", &msg.role)) return e;
      if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
        return Invalid("messages", "a message's role must be system, user, assistant or tool");
      }
      if (auto e = ReadString(m, "content", &msg.content)) return e;
      const size_t before = r->images.size();
      if (auto e = ReadOllamaImages(m, "messages[" + std::to_string(i) + "].images", r->messages.size(), limits,
                                    &msg.parts, r)) {
        return e;
      }
      if (r->images.size() > before) {  // the images, then the text
        if (!msg.content.empty()) msg.parts.push_back({std::move(msg.content), nullptr});
        msg.content.clear();
      }
      if (msg.role == "assistant") {
        if (auto e = ReadString(m, "thinking", &msg.reasoning)) return e;
        if (auto e = ReadToolCalls(m, "messages[" + std::to_string(i) + "]", &msg.tool_calls)) return e;
      }
      // Ollama names a tool's result by tool_name; its calls carry no ids, so results go in order.
      if (msg.role == "tool") {
        if (auto e = ReadString(m, "tool_name", &msg.name)) return e;
      }
      r->messages.push_back(std::move(msg));
    }
    if (auto e = ReadTools(body, r)) return e;
  } else {
    if (auto e = ReadString(body, "prompt", &r->prompt)) return e;
    std::string system;
    if (auto e = ReadString(body, "system", &system)) return e;
    bool raw = false;
    if (auto e = ReadBool(body, "raw", &raw)) return e;
    std::vector<ContentPart> parts;
    const size_t message = raw ? 0 : system.empty() ? 0 : 1;
    if (auto e = ReadOllamaImages(body, "images", message, limits, &parts, r)) return e;
    if (r->prompt.empty() && parts.empty()) {
      r->load_only = true;  // Ollama: no prompt loads the model (keep_alive 0: unloads it)
      return std::nullopt;
    }
    if (!parts.empty() && !r->prompt.empty()) parts.push_back({r->prompt, nullptr});  // the images, then the prompt
    if (!raw) {  // /api/generate applies the chat template unless raw
      r->chat = true;
      if (!system.empty()) r->messages.push_back({"system", system});
      r->messages.push_back({"user", parts.empty() ? r->prompt : std::string()});
      r->messages.back().parts = std::move(parts);
    } else {
      r->prompt_parts = std::move(parts);
    }
  }
  r->options.max_tokens = limits.max_tokens;
  if (auto it = body.find("options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("options", "'options' must be an object");
    const json& o = *it;
    SamplingOptions& s = r->options.sampling;
    if (auto e = ReadFloat(o, "temperature", 0, 2, &s.temperature)) return e;
    if (auto e = ReadFloat(o, "top_p", 0, 1, &s.top_p)) return e;
    if (auto e = ReadFloat(o, "min_p", 0, 1, &s.min_p)) return e;
    if (auto e = ReadFloat(o, "repeat_penalty", 0.01, 10, &s.repeat_penalty)) return e;
    if (auto e = ReadFloat(o, "presence_penalty", -2, 2, &s.presence_penalty)) return e;
    if (auto e = ReadFloat(o, "frequency_penalty", -2, 2, &s.frequency_penalty)) return e;
    int64_t v = s.top_k;
    if (auto e = ReadInt(o, "top_k", 0, 1 << 20, &v)) return e;
    s.top_k = static_cast<int>(v);
    v = 64;
    if (auto e = ReadInt(o, "repeat_last_n", 0, 1 << 20, &v)) return e;
    s.repeat_last_n = static_cast<int>(v);
    int64_t seed = 0;
    bool seed_given = false;
    if (auto e = ReadInt(o, "seed", INT64_MIN / 2, INT64_MAX / 2, &seed, &seed_given)) return e;
    if (seed_given) s.seed = static_cast<uint64_t>(seed);
    // num_predict: -1 is Ollama's "until done".
    int64_t n = -1;
    bool given = false;
    if (auto e = ReadInt(o, "num_predict", -2, limits.max_tokens, &n, &given)) return e;
    if (given && n > 0) {
      r->options.max_tokens = static_cast<int>(n);
      r->max_tokens_given = true;
    }
    if (auto e = ReadStop(o, limits, &r->options.stop)) return e;
    int64_t num_ctx = 0;
    if (auto e = ReadInt(o, "num_ctx", 1, 1 << 24, &num_ctx)) {
      e->param = "options.num_ctx";
      return e;
    }
    r->num_ctx = static_cast<int>(num_ctx);
    if (auto e = RefuseUnsupportedOptions(o)) return e;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseTaskRequest(const json& body, const std::string& task, const Limits& limits,
                                         TaskOptions* t, std::string* input, CompletionRequest* r) {
  if (!body.is_object()) return Invalid("", "the request body must be a JSON object");
  r->chat = true;
  t->task = task;
  auto it = body.find("input");
  if (it == body.end() || !it->is_string()) return Invalid("input", "'input' must be a string: the text to work on");
  *input = it->get<std::string>();
  if (auto e = ReadString(body, "style", &t->style)) return e;
  if (auto e = ReadString(body, "to", &t->to)) return e;
  if (auto e = ReadString(body, "schema", &t->schema)) return e;
  if (auto e = ReadString(body, "glossary", &t->glossary)) return e;
  if (auto e = ReadBool(body, "thinking", &t->thinking)) return e;
  r->thinking = t->thinking;
  r->options.sampling.temperature = 0;  // a preset answers the same text the same way unless asked to sample
  if (auto e = ReadGenerationFields(body, limits, r)) return e;
  if (r->stream) return Invalid("stream", "tasks answer in one piece: 'stream' must be false");
  if (r->n != 1) return Invalid("n", "tasks give one answer: 'n' must be 1");
  return std::nullopt;
}

json TaskJson(const ResponseContext& c, const std::string& task, const TaskPrompt& prompt, const Reply& reply) {
  const TaskOutput out = FinishTaskOutput(reply.text, prompt);
  // The contract's breaches, as the CLI's exit codes tell them: a client decides what to do with them.
  json violations = json::array();
  const std::string input = prompt.messages.empty() ? std::string() : prompt.messages.back().content;
  for (const TaskViolation& v : CheckTaskContract(input, prompt, out, reply.stats.stop)) {
    violations.push_back({{"kind", TaskViolationName(v.kind)}, {"detail", v.detail}});
  }
  return {{"id", c.id},
          {"object", "gemlet.task"},
          {"created", c.created},
          {"model", c.model},
          {"task", task},
          {"output", out.text},
          {"input_language", prompt.input_language},
          {"answer_language", prompt.answer_language},
          {"glossary_terms", prompt.glossary_terms},
          {"glossary_repaired", out.glossary_repaired},
          {"glossary_missing", out.glossary_missing},
          {"violations", std::move(violations)},
          {"finish_reason", FinishReason(reply)},
          {"usage", UsageJson(reply)}};
}

const char* FinishReason(const Reply& reply) {
  if (!reply.tool_calls.empty()) return "tool_calls";
  switch (reply.stats.stop) {
    case StopReason::kMaxTokens:
    case StopReason::kContextFull: return "length";
    default: return "stop";
  }
}

json MergeChoices(std::vector<json> completions) {
  json merged = std::move(completions[0]);
  int completion_tokens = merged["usage"]["completion_tokens"].get<int>();
  for (size_t i = 1; i < completions.size(); ++i) {
    json choice = std::move(completions[i]["choices"][0]);
    choice["index"] = i;
    merged["choices"].push_back(std::move(choice));
    completion_tokens += completions[i]["usage"]["completion_tokens"].get<int>();
  }
  merged["usage"]["completion_tokens"] = completion_tokens;
  merged["usage"]["total_tokens"] = merged["usage"]["prompt_tokens"].get<int>() + completion_tokens;
  return merged;
}

json UsageJson(const Reply& reply) {
  const GenerationStats& st = reply.stats;
  return {{"prompt_tokens", st.prompt_tokens},
          {"completion_tokens", st.generated_tokens},
          {"total_tokens", st.prompt_tokens + st.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", st.cached_tokens}}}};
}

namespace {

json Bytes(const std::string& text) {
  json b = json::array();
  for (unsigned char c : text) b.push_back(static_cast<int>(c));
  return b;
}

// The token's text as a JSON string: a piece that is part of a UTF-8 character is not valid text
// on its own, so it is written with the replacement character (its bytes are in "bytes").
std::string Printable(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(text, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

json LogprobEntry(const Engine& engine, const TokenLogprob& t) {
  const std::string text = engine.Detokenize(std::span<const int32_t>(&t.token, 1));
  return {{"token", Printable(text)}, {"logprob", t.logprob}, {"bytes", Bytes(text)}};
}

json ChatLogprobs(const Engine& engine, const Reply& reply) {
  json content = json::array();
  for (const TokenLogprobs& lp : reply.logprobs) {
    json entry = LogprobEntry(engine, lp.chosen);
    json top = json::array();
    for (const TokenLogprob& t : lp.top) top.push_back(LogprobEntry(engine, t));
    entry["top_logprobs"] = top;
    content.push_back(entry);
  }
  return {{"content", content}};
}

}  // namespace

json LogprobsJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply) {
  if (!r.logprobs || !c.engine) return nullptr;
  if (r.chat) return ChatLogprobs(*c.engine, reply);
  json tokens = json::array(), logprobs = json::array(), top = json::array();
  for (const TokenLogprobs& lp : reply.logprobs) {
    const std::string text = c.engine->Detokenize(std::span<const int32_t>(&lp.chosen.token, 1));
    tokens.push_back(Printable(text));
    logprobs.push_back(lp.chosen.logprob);
    json alternatives = json::object();
    for (const TokenLogprob& t : lp.top) {
      alternatives[Printable(c.engine->Detokenize(std::span<const int32_t>(&t.token, 1)))] = t.logprob;
    }
    top.push_back(alternatives);
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", top}};
}

json ToolCallsJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply, bool with_index) {
  json calls = json::array();
  const size_t n = r.parallel_tool_calls ? reply.tool_calls.size() : std::min<size_t>(1, reply.tool_calls.size());
  for (size_t i = 0; i < n; ++i) {
    json call = {{"id", "call_" + c.id + "_" + std::to_string(i)},
                 {"type", "function"},
                 {"function", {{"name", reply.tool_calls[i].name}, {"arguments", reply.tool_calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    calls.push_back(call);
  }
  return calls;
}

json ChatCompletionJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply) {
  json message = {{"role", "assistant"}, {"content", reply.text}};
  if (!reply.thinking.empty()) message["reasoning_content"] = reply.thinking;
  if (!reply.tool_calls.empty()) {
    message["tool_calls"] = ToolCallsJson(c, r, reply, false);
    if (reply.text.empty()) message["content"] = nullptr;  // as OpenAI answers a call alone
  }
  json choice = {{"index", 0}, {"message", message}, {"finish_reason", FinishReason(reply)}};
  choice["logprobs"] = LogprobsJson(c, r, reply);
  return {{"id", c.id},          {"object", "chat.completion"}, {"created", c.created},
          {"model", c.model},    {"choices", json::array({choice})}, {"usage", UsageJson(reply)},
          {"system_fingerprint", "gemlet"}};
}

json TextCompletionJson(const ResponseContext& c, const CompletionRequest& r, const Reply& reply) {
  json choice = {{"index", 0}, {"text", reply.text}, {"finish_reason", FinishReason(reply)}};
  choice["logprobs"] = LogprobsJson(c, r, reply);
  return {{"id", c.id},       {"object", "text_completion"}, {"created", c.created},
          {"model", c.model}, {"choices", json::array({choice})}, {"usage", UsageJson(reply)},
          {"system_fingerprint", "gemlet"}};
}

json ChatChunkJson(const ResponseContext& c, const json& delta, const char* finish_reason) {
  json choice = {{"index", 0}, {"delta", delta}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
  return {{"id", c.id},       {"object", "chat.completion.chunk"}, {"created", c.created},
          {"model", c.model}, {"system_fingerprint", "gemlet"},     {"choices", json::array({choice})}};
}

json TextChunkJson(const ResponseContext& c, const std::string& text, const char* finish_reason) {
  json choice = {{"index", 0}, {"text", text}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
  return {{"id", c.id},       {"object", "text_completion"}, {"created", c.created},
          {"model", c.model}, {"system_fingerprint", "gemlet"}, {"choices", json::array({choice})}};
}

namespace {

std::string Rfc3339(int64_t unix_seconds) {
  const time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm_utc;
  gmtime_r(&t, &tm_utc);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  return buf;
}

}  // namespace

json OllamaChunkJson(const ResponseContext& c, bool chat, const std::string& text, const std::string& thinking) {
  json j = {{"model", c.model}, {"created_at", Rfc3339(c.created)}, {"done", false}};
  if (chat) {
    json message = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) message["thinking"] = thinking;
    j["message"] = message;
  } else {
    j["response"] = text;
    if (!thinking.empty()) j["thinking"] = thinking;
  }
  return j;
}

json OllamaDoneJson(const ResponseContext& c, bool chat, const Reply& reply, bool with_text) {
  json j = OllamaChunkJson(c, chat, with_text ? reply.text : std::string(), with_text ? reply.thinking : std::string());
  const GenerationStats& st = reply.stats;
  const auto ns = [](double seconds) { return static_cast<int64_t>(seconds * 1e9); };
  const double decode_seconds = st.decode_tokens_per_second > 0 ? st.generated_tokens / st.decode_tokens_per_second : 0;
  if (chat && !reply.tool_calls.empty()) {
    // Ollama gives a call's arguments as an object.
    json calls = json::array();
    for (const ToolCall& call : reply.tool_calls) {
      json arguments = CheckJsonText(call.arguments, "the tool call's arguments").ok()
                           ? json::parse(call.arguments, nullptr, /*allow_exceptions=*/false)
                           : json::object();
      if (arguments.is_discarded()) arguments = json::object();
      calls.push_back({{"function", {{"name", call.name}, {"arguments", arguments}}}});
    }
    j["message"]["tool_calls"] = calls;
  }
  j["done"] = true;
  j["done_reason"] = st.stop == StopReason::kMaxTokens || st.stop == StopReason::kContextFull ? "length" : "stop";
  j["total_duration"] = ns(st.ttft_seconds + decode_seconds);
  j["load_duration"] = 0;
  j["prompt_eval_count"] = st.prompt_tokens;
  j["prompt_eval_duration"] = ns(st.ttft_seconds);
  j["eval_count"] = st.generated_tokens;
  j["eval_duration"] = ns(decode_seconds);
  return j;
}

}  // namespace gemlet::server

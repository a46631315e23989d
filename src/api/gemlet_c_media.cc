// The C API's images and prompts (gemlet.h "images and audio"): gemlet_media over the C++ API's
// shared EncodedMedia, gemlet_prompt over Prompt, and the session and conversation calls that take them.
#include "api/gemlet_c_internal.h"

using gemlet::capi::BadStruct;
using gemlet::capi::Fail;
using gemlet::capi::Guard;
using gemlet::capi::NullHandle;
using gemlet::capi::Report;

struct gemlet_prompt {
  gemlet::Prompt prompt;
};

namespace {

gemlet_status Hand(const std::shared_ptr<const gemlet::EncodedMedia>& media, gemlet_media** out) {
  *out = new gemlet_media{media};
  return GEMLET_OK;
}

gemlet_status HandResult(const gemlet::Result<std::shared_ptr<const gemlet::EncodedMedia>>& r, gemlet_media** out) {
  if (!r.ok()) return Report(r.status());
  return Hand(r.value(), out);
}

gemlet::ImageOptions ToImageOptions(const gemlet_image_options* in) {
  gemlet_image_options o = gemlet_image_options_default();
  if (in != nullptr) gemlet::capi::ReadOptions(in, &o);
  gemlet::ImageOptions out;
  out.max_soft_tokens = o.max_soft_tokens;
  out.pan_and_scan.enabled = o.pan_and_scan != 0;
  return out;
}

// n parts of the caller's struct_size (that of parts[0]); false with the last error set.
bool ToParts(const gemlet_content_part* parts, size_t n, std::vector<gemlet::ContentPart>* out) {
  out->clear();
  if (n == 0) return true;
  if (parts == nullptr) return NullHandle("parts"), false;
  const size_t stride = parts[0].struct_size;
  if (stride < sizeof(size_t) || stride > sizeof(gemlet_content_part)) return BadStruct("gemlet_content_part"), false;
  const auto* base = reinterpret_cast<const unsigned char*>(parts);
  for (size_t i = 0; i < n; ++i) {
    const auto* in = reinterpret_cast<const gemlet_content_part*>(base + i * stride);
    gemlet_content_part p = gemlet_content_part_default();
    if (in->struct_size != stride) {
      return Fail(GEMLET_INVALID_ARGUMENT, "part " + std::to_string(i) + ": struct_size differs from part 0's"), false;
    }
    gemlet::capi::ReadOptions(in, &p);
    gemlet::ContentPart part;
    if (p.media != nullptr) part.media = p.media->media;
    else part.text = p.text != nullptr ? p.text : "";
    out->push_back(std::move(part));
  }
  return true;
}

gemlet_status MediaAt(const std::vector<gemlet::MediaSpan>& media, size_t index, int* position, gemlet_media** out) {
  if (index >= media.size()) {
    return Fail(GEMLET_INVALID_ARGUMENT, "media " + std::to_string(index) + " of " + std::to_string(media.size()));
  }
  if (position != nullptr) *position = media[index].position;
  if (out != nullptr) *out = new gemlet_media{media[index].media};
  return GEMLET_OK;
}

}  // namespace

namespace gemlet::capi {
bool ToContentParts(const gemlet_content_part* parts, size_t n, std::vector<ContentPart>* out) {
  return ToParts(parts, n, out);
}
const Prompt* PromptOf(const gemlet_prompt* prompt) { return &prompt->prompt; }
}  // namespace gemlet::capi

extern "C" {

gemlet_image_options gemlet_image_options_default(void) {
  gemlet_image_options o{};
  o.struct_size = sizeof o;
  return o;
}

gemlet_content_part gemlet_content_part_default(void) {
  gemlet_content_part p{};
  p.struct_size = sizeof p;
  return p;
}

gemlet_status gemlet_engine_encode_image(const gemlet_engine* engine, const uint8_t* bytes, size_t n_bytes,
                                         const gemlet_image_options* options, gemlet_media** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    if (bytes == nullptr && n_bytes > 0) return NullHandle("bytes");
    return HandResult(engine->engine->EncodeImage(std::span<const uint8_t>(bytes, n_bytes), ToImageOptions(options)), out);
  });
}

gemlet_status gemlet_engine_encode_image_file(const gemlet_engine* engine, const char* path,
                                              const gemlet_image_options* options, gemlet_media** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (path == nullptr) return NullHandle("path");
    if (out == nullptr) return NullHandle("out");
    return HandResult(engine->engine->EncodeImageFile(path, ToImageOptions(options)), out);
  });
}

gemlet_status gemlet_engine_encode_image_pixels(const gemlet_engine* engine, const float* values, size_t n_values,
                                                const int32_t* positions, size_t n_positions, gemlet_media** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    if (values == nullptr && n_values > 0) return NullHandle("values");
    if (positions == nullptr && n_positions > 0) return NullHandle("positions");
    return HandResult(engine->engine->EncodeImagePixels(std::span<const float>(values, n_values),
                                                        std::span<const int32_t>(positions, n_positions)),
                      out);
  });
}

gemlet_status gemlet_engine_encode_audio(const gemlet_engine* engine, const uint8_t* bytes, size_t n_bytes,
                                         gemlet_media** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    if (bytes == nullptr && n_bytes > 0) return NullHandle("bytes");
    return HandResult(engine->engine->EncodeAudio(std::span<const uint8_t>(bytes, n_bytes)), out);
  });
}

gemlet_status gemlet_engine_encode_audio_file(const gemlet_engine* engine, const char* path, gemlet_media** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (path == nullptr) return NullHandle("path");
    if (out == nullptr) return NullHandle("out");
    return HandResult(engine->engine->EncodeAudioFile(path), out);
  });
}

gemlet_status gemlet_engine_encode_audio_pcm(const gemlet_engine* engine, const float* samples, size_t n_samples,
                                             int sample_rate, int channels, gemlet_media** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    if (samples == nullptr && n_samples > 0) return NullHandle("samples");
    return HandResult(engine->engine->EncodeAudioPcm(std::span<const float>(samples, n_samples), sample_rate, channels),
                      out);
  });
}

gemlet_status gemlet_engine_encode_audio_features(const gemlet_engine* engine, const float* features, size_t n_features,
                                                  const uint8_t* mask, size_t n_mask, gemlet_media** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    if (features == nullptr && n_features > 0) return NullHandle("features");
    if (mask == nullptr && n_mask > 0) return NullHandle("mask");
    return HandResult(engine->engine->EncodeAudioFeatures(std::span<const float>(features, n_features),
                                                          std::span<const uint8_t>(mask, n_mask)),
                      out);
  });
}

void gemlet_media_free(gemlet_media* media) { delete media; }
gemlet_media_kind gemlet_media_get_kind(const gemlet_media* media) {
  return media != nullptr && media->media->kind == gemlet::MediaKind::kAudio ? GEMLET_MEDIA_AUDIO : GEMLET_MEDIA_IMAGE;
}
int gemlet_media_n_tokens(const gemlet_media* media) { return media != nullptr ? media->media->n_tokens : 0; }
int gemlet_media_n_embd(const gemlet_media* media) { return media != nullptr ? media->media->n_embd : 0; }
const float* gemlet_media_embeddings(const gemlet_media* media) {
  return media != nullptr ? media->media->embeddings.data() : nullptr;
}
const char* gemlet_media_content_hash(const gemlet_media* media) {
  return media != nullptr ? media->media->content_hash.c_str() : "";
}

gemlet_status gemlet_engine_media_token(const gemlet_engine* engine, gemlet_media_kind kind, int32_t* token) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (token == nullptr) return NullHandle("token");
    auto id = engine->engine->MediaToken(kind == GEMLET_MEDIA_AUDIO ? gemlet::MediaKind::kAudio : gemlet::MediaKind::kImage);
    if (!id.ok()) return Report(id.status());
    *token = id.value();
    return GEMLET_OK;
  });
}

gemlet_status gemlet_engine_tokenize_prompt(const gemlet_engine* engine, const gemlet_content_part* parts, size_t n_parts,
                                            bool add_special, bool parse_special, gemlet_prompt** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    std::vector<gemlet::ContentPart> cpp;
    if (!ToParts(parts, n_parts, &cpp)) return GEMLET_INVALID_ARGUMENT;
    auto prompt = engine->engine->TokenizePrompt(cpp, {.add_special = add_special, .parse_special = parse_special});
    if (!prompt.ok()) return Report(prompt.status());
    *out = new gemlet_prompt{std::move(prompt).value()};
    return GEMLET_OK;
  });
}

gemlet_status gemlet_engine_chat_prompt(const gemlet_engine* engine, const gemlet_message* messages, size_t n_messages,
                                        const gemlet_chat_options* options, gemlet_prompt** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    std::vector<gemlet::Message> chat;
    if (!gemlet::capi::ToMessages(messages, n_messages, &chat)) return GEMLET_INVALID_ARGUMENT;
    gemlet_chat_options o = gemlet_chat_options_default();
    if (options != nullptr && !gemlet::capi::ReadOptions(options, &o)) return BadStruct("gemlet_chat_options");
    auto prompt = engine->engine->ChatPrompt(chat, gemlet::capi::ToChatOptions(o));
    if (!prompt.ok()) return Report(prompt.status());
    *out = new gemlet_prompt{std::move(prompt).value()};
    return GEMLET_OK;
  });
}

gemlet_status gemlet_prompt_new(const int32_t* tokens, size_t n_tokens, gemlet_prompt** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    if (tokens == nullptr && n_tokens > 0) return NullHandle("tokens");
    *out = new gemlet_prompt{{std::vector<int32_t>(tokens, tokens + n_tokens), {}}};
    return GEMLET_OK;
  });
}

gemlet_status gemlet_prompt_place_media(gemlet_prompt* prompt, int position, const gemlet_media* media) {
  return Guard([&] {
    if (prompt == nullptr) return NullHandle("prompt");
    if (media == nullptr) return NullHandle("media");
    gemlet::Prompt& p = prompt->prompt;
    const int end = position + media->media->n_tokens;
    const int previous_end = p.media.empty() ? 0 : p.media.back().position + p.media.back().media->n_tokens;
    if (position < previous_end || end > static_cast<int>(p.tokens.size())) {
      return Fail(GEMLET_INVALID_ARGUMENT, "media at [" + std::to_string(position) + ", " + std::to_string(end) +
                                               ") overlaps earlier media or lies outside the " +
                                               std::to_string(p.tokens.size()) + " tokens (place media in order)");
    }
    p.media.push_back({position, media->media});
    return GEMLET_OK;
  });
}

void gemlet_prompt_free(gemlet_prompt* prompt) { delete prompt; }

const int32_t* gemlet_prompt_tokens(const gemlet_prompt* prompt, size_t* n_tokens) {
  if (n_tokens != nullptr) *n_tokens = prompt != nullptr ? prompt->prompt.tokens.size() : 0;
  return prompt != nullptr ? prompt->prompt.tokens.data() : nullptr;
}

size_t gemlet_prompt_n_media(const gemlet_prompt* prompt) { return prompt != nullptr ? prompt->prompt.media.size() : 0; }

gemlet_status gemlet_prompt_media_at(const gemlet_prompt* prompt, size_t index, int* position, gemlet_media** media) {
  return Guard([&] {
    if (prompt == nullptr) return NullHandle("prompt");
    return MediaAt(prompt->prompt.media, index, position, media);
  });
}

gemlet_status gemlet_session_evaluate_prompt(gemlet_session* session, const gemlet_prompt* prompt, float* logits,
                                             bool all_logits) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (prompt == nullptr) return NullHandle("prompt");
    return Report(session->session->Evaluate(prompt->prompt, logits, all_logits));
  });
}

size_t gemlet_session_n_media(const gemlet_session* session) {
  return session != nullptr ? session->session->media().size() : 0;
}

gemlet_status gemlet_session_media_at(const gemlet_session* session, size_t index, int* position, gemlet_media** media) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    return MediaAt(session->session->media(), index, position, media);
  });
}

}  // extern "C"

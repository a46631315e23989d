// The C API's long clips (gemlet.h "images and audio"): gemlet_audio_pieces over the C++ API's
// Engine::EncodeAudioPieces, each piece handed out as a gemlet_media.
#include "api/gemlet_c_internal.h"

using gemlet::capi::BadStruct;
using gemlet::capi::Fail;
using gemlet::capi::Guard;
using gemlet::capi::NullHandle;
using gemlet::capi::Report;

namespace {

bool ToAudioOptions(const gemlet_audio_options* in, gemlet::AudioOptions* out) {
  gemlet_audio_options o = gemlet_audio_options_default();
  if (!gemlet::capi::ReadOptions(in, &o)) return false;
  out->max_seconds = o.max_seconds;
  return true;
}

gemlet_status HandPieces(gemlet::Result<std::vector<gemlet::AudioPiece>> r, gemlet_audio_pieces** out) {
  if (!r.ok()) return Report(r.status());
  *out = new gemlet_audio_pieces{std::move(r).value()};
  return GEMLET_OK;
}

}  // namespace

extern "C" {

gemlet_audio_options gemlet_audio_options_default(void) {
  gemlet_audio_options o{};
  o.struct_size = sizeof o;
  o.max_seconds = gemlet::AudioOptions{}.max_seconds;
  return o;
}

gemlet_status gemlet_engine_encode_audio_pieces(const gemlet_engine* engine, const uint8_t* bytes, size_t n_bytes,
                                                const gemlet_audio_options* options, gemlet_audio_pieces** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    if (bytes == nullptr && n_bytes > 0) return NullHandle("bytes");
    gemlet::AudioOptions o;
    if (!ToAudioOptions(options, &o)) return BadStruct("gemlet_audio_options");
    return HandPieces(engine->engine->EncodeAudioPieces(std::span<const uint8_t>(bytes, n_bytes), o), out);
  });
}

gemlet_status gemlet_engine_encode_audio_pieces_file(const gemlet_engine* engine, const char* path,
                                                     const gemlet_audio_options* options, gemlet_audio_pieces** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (path == nullptr) return NullHandle("path");
    if (out == nullptr) return NullHandle("out");
    gemlet::AudioOptions o;
    if (!ToAudioOptions(options, &o)) return BadStruct("gemlet_audio_options");
    return HandPieces(engine->engine->EncodeAudioPiecesFile(path, o), out);
  });
}

gemlet_status gemlet_engine_encode_audio_pieces_pcm(const gemlet_engine* engine, const float* samples, size_t n_samples,
                                                    int sample_rate, int channels, const gemlet_audio_options* options,
                                                    gemlet_audio_pieces** out) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (out == nullptr) return NullHandle("out");
    if (samples == nullptr && n_samples > 0) return NullHandle("samples");
    gemlet::AudioOptions o;
    if (!ToAudioOptions(options, &o)) return BadStruct("gemlet_audio_options");
    return HandPieces(
        engine->engine->EncodeAudioPiecesPcm(std::span<const float>(samples, n_samples), sample_rate, channels, o), out);
  });
}

size_t gemlet_audio_pieces_count(const gemlet_audio_pieces* pieces) { return pieces == nullptr ? 0 : pieces->pieces.size(); }

gemlet_status gemlet_audio_pieces_at(const gemlet_audio_pieces* pieces, size_t index, gemlet_media** media,
                                     double* start_seconds, double* end_seconds) {
  return Guard([&] {
    if (pieces == nullptr) return NullHandle("pieces");
    if (index >= pieces->pieces.size()) {
      return Fail(GEMLET_INVALID_ARGUMENT, "piece " + std::to_string(index) + " of " + std::to_string(pieces->pieces.size()));
    }
    const gemlet::AudioPiece& p = pieces->pieces[index];
    if (media != nullptr) *media = new gemlet_media{p.media};
    if (start_seconds != nullptr) *start_seconds = p.start_seconds;
    if (end_seconds != nullptr) *end_seconds = p.end_seconds;
    return GEMLET_OK;
  });
}

void gemlet_audio_pieces_free(gemlet_audio_pieces* pieces) { delete pieces; }

}  // extern "C"

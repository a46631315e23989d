// Engine::EncodeAudioPieces: a clip longer than the model's 30 s window, decoded and resampled once,
// cut at its quiet moments (media/audio_split.h) and each piece encoded as EncodeAudioPcm encodes a
// clip. A build without src/media (the arm64 cross build) says it cannot decode.
#include <cmath>
#include <cstdio>

#include "base/status.h"
#include "gemlet/gemlet.hpp"
#if defined(GEMLET_HAVE_MEDIA)
#include "media/audio.h"
#include "media/audio_features.h"
#include "media/audio_split.h"
#endif

namespace gemlet {
namespace {

Status CheckOptions(const AudioOptions& options) {
  if (!(options.max_seconds > 0) || !std::isfinite(options.max_seconds)) {
    return Status::Error(StatusCode::kInvalidArgument, "AudioOptions::max_seconds must be a positive number of seconds");
  }
  return Status::Ok();
}

// The engine's own refusal of audio when it has no audio tower (EncodeAudioPcm checks that first).
Status CheckTower(const Engine& engine) {
  if (engine.info().takes_audio) return Status::Ok();
  return engine.EncodeAudioPcm({}, 16000).status();
}

Status CheckDuration(double seconds, const AudioOptions& options) {
  if (seconds <= options.max_seconds) return Status::Ok();
  char text[128];
  std::snprintf(text, sizeof text, "the clip is %.1f s, over the limit of %g s", seconds, options.max_seconds);
  return Status::Error(StatusCode::kTooLarge, text);
}

#if defined(GEMLET_HAVE_MEDIA)
media::AudioLimits Limits(const AudioOptions& options) {
  media::AudioLimits limits;
  limits.max_seconds = options.max_seconds;
  return limits;
}

// A mono clip at any rate: resampled to the model's rate once, cut, each piece encoded.
Result<std::vector<AudioPiece>> EncodePieces(const Engine& engine, const media::Audio& clip, const AudioOptions& options) {
  RETURN_IF_ERROR(CheckDuration(clip.Seconds(), options));
  const media::LogMelParams features = media::Gemma4LogMelParams();
  ASSIGN_OR_RETURN(media::Audio at_rate, media::ResampleAudio(clip, features.sampling_rate));
  const double window = static_cast<double>(features.max_samples) / features.sampling_rate;
  const std::vector<int64_t> bounds =
      media::SplitPoints(at_rate.samples, media::AudioSplitFor(features.sampling_rate, window));
  if (bounds.size() < 2) return Status::Error("the clip is empty: it holds no samples");
  std::vector<AudioPiece> pieces;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    const std::span<const float> samples(at_rate.samples.data() + bounds[i], static_cast<size_t>(bounds[i + 1] - bounds[i]));
    AudioPiece piece;
    piece.start_seconds = static_cast<double>(bounds[i]) / features.sampling_rate;
    piece.end_seconds = static_cast<double>(bounds[i + 1]) / features.sampling_rate;
    Result<std::shared_ptr<const EncodedMedia>> media = engine.EncodeAudioPcm(samples, features.sampling_rate);
    if (!media.ok()) {
      if (bounds.size() == 2) return media.status();
      char where[96];
      std::snprintf(where, sizeof where, "the piece from %.2f s to %.2f s", piece.start_seconds, piece.end_seconds);
      return media.status().WithContext(where);
    }
    piece.media = std::move(media).value();
    pieces.push_back(std::move(piece));
  }
  return pieces;
}
#else
Status NoMedia() {
  return Status::Error("this gemlet was built without audio decoding (libsndfile, libmpg123, libsoxr): encode "
                       "features instead (EncodeAudioFeatures)");
}
#endif

}  // namespace

Result<std::vector<AudioPiece>> Engine::EncodeAudioPieces(std::span<const uint8_t> bytes, const AudioOptions& options) const {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckTower(*this));
#if defined(GEMLET_HAVE_MEDIA)
  ASSIGN_OR_RETURN(media::Audio clip, media::DecodeAudio(bytes, Limits(options)));
  return EncodePieces(*this, clip, options);
#else
  (void)bytes;
  return NoMedia();
#endif
}

Result<std::vector<AudioPiece>> Engine::EncodeAudioPiecesFile(const std::string& path, const AudioOptions& options) const {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckTower(*this));
#if defined(GEMLET_HAVE_MEDIA)
  ASSIGN_OR_RETURN(media::Audio clip, media::LoadAudioFile(path, Limits(options)));
  return EncodePieces(*this, clip, options);
#else
  (void)path;
  return NoMedia();
#endif
}

Result<std::vector<AudioPiece>> Engine::EncodeAudioPiecesPcm(std::span<const float> samples, int sample_rate, int channels,
                                                             const AudioOptions& options) const {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckTower(*this));
  if (sample_rate < 1000 || sample_rate > 384000 || channels < 1 || channels > 64 ||
      samples.size() % static_cast<size_t>(channels) != 0) {
    // EncodeAudioPcm's own message for the same.
    return EncodeAudioPcm(samples, sample_rate, channels).status();
  }
  const size_t frames = samples.size() / static_cast<size_t>(channels);
  // The duration first: the host's buffer is not copied when it is refused.
  RETURN_IF_ERROR(CheckDuration(static_cast<double>(frames) / sample_rate, options));
#if defined(GEMLET_HAVE_MEDIA)
  media::Audio clip;
  clip.sample_rate = sample_rate;
  clip.samples.resize(frames);
  for (size_t i = 0; i < frames; ++i) {
    float sum = 0;
    for (int ch = 0; ch < channels; ++ch) sum += samples[i * static_cast<size_t>(channels) + static_cast<size_t>(ch)];
    clip.samples[i] = sum / static_cast<float>(channels);
  }
  return EncodePieces(*this, clip, options);
#else
  return NoMedia();
#endif
}

}  // namespace gemlet

// libFuzzer target for the audio decoders behind DecodeAudio (WAV read here, FLAC and Ogg through
// libsndfile, MP3 through libmpg123): any bytes decode to finite mono samples within the limits or
// are refused with a message; a short decoded clip also goes through both log-mel extractors
// (resampled to 16 kHz first when it is at another rate).
//
// GEMLET_FUZZ_FORMAT=wav|flac|ogg|mp3 holds a run to one decoder (the per-format campaigns of
// bench/RESULTS.md): an input that does not start as that format gets its signature put in front.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "media/audio.h"
#include "media/audio_features.h"

namespace {

void CheckFeatures(const gemlet::media::Audio& audio, gemlet::media::LogMelParams params) {
  params.feature_size = 16;
  auto features = gemlet::media::ComputeLogMel(audio, params);
  if (!features.ok()) {
    if (features.message().empty()) std::abort();
    return;
  }
  const size_t frames = static_cast<size_t>(features->num_frames);
  if (features->num_mels != 16 || features->values.size() != frames * 16 || features->mask.size() != frames) {
    std::abort();
  }
  // Samples of ordinary size give finite features (HF's would be the same).
  bool ordinary = true;
  for (float v : audio.samples) ordinary &= std::abs(v) <= 16.0f;
  if (!ordinary) return;
  for (float v : features->values) {
    if (!std::isfinite(v)) std::abort();
  }
}

struct Forced {
  gemlet::media::AudioFormat format = gemlet::media::AudioFormat::kUnknown;
  std::string_view signature;
};

Forced ForcedFormat() {
  using gemlet::media::AudioFormat;
  const char* name = std::getenv("GEMLET_FUZZ_FORMAT");
  const std::string_view n = name == nullptr ? "" : name;
  static constexpr char kWav[] = "RIFF\x24\x00\x00\x00WAVEfmt ";
  static constexpr char kFlac[] = "fLaC";
  static constexpr char kOgg[] = "OggS";
  static constexpr char kMp3[] = "ID3\x04\x00\x00\x00\x00\x00\x00";
  if (n == "wav") return {AudioFormat::kWav, {kWav, sizeof kWav - 1}};
  if (n == "flac") return {AudioFormat::kFlac, {kFlac, sizeof kFlac - 1}};
  if (n == "ogg") return {AudioFormat::kOgg, {kOgg, sizeof kOgg - 1}};
  if (n == "mp3") return {AudioFormat::kMp3, {kMp3, sizeof kMp3 - 1}};
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Forced forced = ForcedFormat();
  std::vector<uint8_t> with_signature;
  std::span<const uint8_t> bytes(data, size);
  if (forced.format != gemlet::media::AudioFormat::kUnknown && gemlet::media::SniffAudioFormat(bytes) != forced.format) {
    with_signature.assign(forced.signature.begin(), forced.signature.end());
    with_signature.insert(with_signature.end(), data, data + size);
    bytes = with_signature;
  }
  // A lower duration limit than the default keeps each run fast; the check is the same.
  gemlet::media::AudioLimits limits;
  limits.max_seconds = 20.0;
  auto audio = gemlet::media::DecodeAudio(bytes, limits);
  if (!audio.ok()) {
    if (audio.message().empty()) std::abort();
    return 0;
  }
  const double seconds = audio->Seconds();
  if (audio->sample_rate <= 0 || audio->samples.empty() || seconds > limits.max_seconds) std::abort();
  for (float v : audio->samples) {
    if (!std::isfinite(v)) std::abort();
  }
  if (seconds > 0.5 || audio->sample_rate > 96000) return 0;
  CheckFeatures(*audio, gemlet::media::Gemma3nLogMelParams());
  CheckFeatures(*audio, gemlet::media::Gemma4LogMelParams());
  return 0;
}

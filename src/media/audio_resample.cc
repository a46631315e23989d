// ResampleAudio through libsoxr. Why soxr rather than libsamplerate: transformers' own audio loading
// resamples with soxr at its "HQ" setting (audio_utils.load_audio_as, and librosa.load's default
// res_type "soxr_hq"), so a clip resampled here is the one HF's pipeline would have made; soxr is
// also the faster of the two at that quality.
#include <soxr.h>

#include <cmath>
#include <string>

#include "media/audio.h"
#include "media/audio_codecs.h"

namespace gemlet::media {

Result<Audio> ResampleAudio(const Audio& audio, int target_rate) {
  if (target_rate <= 0 || target_rate > internal::kMaxSampleRate) {
    return Status::Error("resample: the target rate " + std::to_string(target_rate) + " Hz is out of range");
  }
  if (audio.sample_rate <= 0 || audio.sample_rate > internal::kMaxSampleRate) {
    return Status::Error("resample: the clip's rate " + std::to_string(audio.sample_rate) + " Hz is out of range");
  }
  if (audio.sample_rate == target_rate || audio.samples.empty()) {
    Audio same = audio;
    same.sample_rate = target_rate;
    return same;
  }
  // python-soxr's length: the input length scaled by the ratio, rounded.
  const double ratio = static_cast<double>(target_rate) / audio.sample_rate;
  const size_t out_len = static_cast<size_t>(std::llround(static_cast<double>(audio.samples.size()) * ratio));
  Audio out;
  out.sample_rate = target_rate;
  // soxr_oneshot writes through the output pointer even when there is no room (an empty vector's null):
  // a clip too short for one output sample is not handed to it.
  if (out_len == 0) return out;
  out.samples.resize(out_len);
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  // One thread: the library starts none of its own, and the result does not depend on a thread count.
  const soxr_runtime_spec_t runtime = soxr_runtime_spec(1);
  size_t done = 0;
  const soxr_error_t error = soxr_oneshot(audio.sample_rate, target_rate, 1, audio.samples.data(), audio.samples.size(),
                                          nullptr, out.samples.data(), out_len, &done, &io, &quality, &runtime);
  if (error != nullptr) return Status::Error(std::string("resample: libsoxr failed: ") + error);
  out.samples.resize(done);
  return out;
}

}  // namespace gemlet::media

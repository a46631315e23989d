// HF-exact log-mel features for Gemma audio encoders, as transformers 5.17's
// Gemma3nAudioFeatureExtractor and Gemma4AudioFeatureExtractor compute them, and their parameters read
// from an HF feature_extractor_config.json / preprocessor_config.json.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "media/audio.h"

namespace gemlet::media {

// Where the two extractors differ (both: frames of frame_length + 1 samples every hop_length, HTK
// pre-emphasis inside the frame, periodic Hann window, |rFFT| of fft_length, HTK mel triangles without
// normalisation, natural log, per-bin mean/stddev):
//   Gemma 3n: frames start at sample 0; log(max(mel, mel_floor)); frame i is valid when sample
//             i * hop is real audio (HF subsamples the sample mask); padding frames keep their values.
//   Gemma 4:  frame_length / 2 zeros first (semicausal: frame 0 centred on t = 0); log(mel + mel_floor);
//             frame i is valid when its last sample is real audio; invalid frames are zeroed.
enum class LogMelStyle { kGemma3n, kGemma4 };

struct LogMelParams {
  LogMelStyle style = LogMelStyle::kGemma4;
  int sampling_rate = 16000;
  int feature_size = 128;  // mel bins
  int frame_length = 320;
  int hop_length = 160;
  int fft_length = 512;  // a power of two >= frame_length
  double min_frequency = 0.0;
  double max_frequency = 8000.0;
  double preemphasis = 0.0;  // 0: none
  bool preemphasis_htk_flavor = true;
  double mel_floor = 1e-3;
  double input_scale_factor = 1.0;
  // HF adds dither * N(0, 1) noise from numpy's unseeded global generator, which cannot be
  // reproduced; here the noise is drawn from a generator seeded with dither_seed.
  double dither = 0.0;
  uint64_t dither_seed = 0;
  // The call's padding: the clip is padded with padding_value to a multiple of pad_to_multiple_of
  // samples (0: none), on the right unless pad_left, after being cut to max_samples (HF's max_length
  // with truncation=True, 30 s at 16 kHz; 0: no cut).
  float padding_value = 0.0f;
  bool pad_left = false;
  int pad_to_multiple_of = 128;
  int64_t max_samples = 480'000;
  std::vector<double> per_bin_mean;    // empty or feature_size values, subtracted
  std::vector<double> per_bin_stddev;  // empty or feature_size values, divided by
};

// The HF classes' defaults (the released checkpoints use them, with feature_size 128).
LogMelParams Gemma3nLogMelParams();
LogMelParams Gemma4LogMelParams();

struct LogMelFeatures {
  int num_frames = 0;
  int num_mels = 0;
  std::vector<float> values;  // [num_frames, num_mels]
  std::vector<uint8_t> mask;  // [num_frames]: 1 = valid frame

  int NumValid() const;
};

// The features of a clip. A clip at another rate is resampled to params.sampling_rate first (HF
// refuses one; ResampleAudio is what its own loader would have done). A clip shorter than one frame
// gives no frames, as HF does.
Result<LogMelFeatures> ComputeLogMel(const Audio& audio, const LogMelParams& params);

// The parameters from an HF feature extractor config (flat, or nested under "feature_extractor" as
// processor_config.json has it), starting from the defaults of the class its feature_extractor_type
// names. Absent keys keep those defaults; a key of the wrong type or out of range is an error that
// names it.
Result<LogMelParams> LogMelParamsFromHfJson(std::string_view json_text);

}  // namespace gemlet::media

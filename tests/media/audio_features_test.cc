// Gemma 3n / Gemma 4 log-mel features against transformers' own outputs (shared/testdata/hf-mm: each
// audio folder's audio.wav -> input_features.f32, input_features_mask.u8), the frame counts and masks
// from HF's rules over many clip lengths, truncation, the mel scale, and the config reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <numbers>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "media/audio.h"
#include "media/audio_features.h"
#include "test_audio.h"

namespace gemlet::media {
namespace {

std::string Folder(const std::string& name) { return test::TestdataDir() + "/hf-mm/" + name; }

std::vector<uint8_t> ReadU8File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

LogMelParams ParamsOf(const std::string& dir) {
  auto params = LogMelParamsFromHfJson(test::ReadTextFile(dir + "/feature_extractor_config.json"));
  EXPECT_TRUE(params.ok()) << params.message();
  return params.ok() ? *params : LogMelParams{};
}

// audio.wav through DecodeAudio and the folder's config against HF's features and mask; returns
// max |diff| (printed for the record).
float CheckGolden(const std::string& name, LogMelStyle style, int frames, int mels) {
  const std::string dir = Folder(name);
  const LogMelParams params = ParamsOf(dir);
  EXPECT_EQ(params.style, style);
  auto audio = LoadAudioFile(dir + "/audio.wav");
  EXPECT_TRUE(audio.ok()) << audio.message();
  if (!audio.ok()) return INFINITY;
  auto features = ComputeLogMel(*audio, params);
  EXPECT_TRUE(features.ok()) << features.message();
  if (!features.ok()) return INFINITY;
  EXPECT_EQ(features->num_frames, frames);
  EXPECT_EQ(features->num_mels, mels);
  std::vector<float> want;
  EXPECT_TRUE(test::ReadF32Exactly(dir + "/input_features.f32", size_t{1} * frames * mels, &want));
  const std::vector<uint8_t> want_mask = ReadU8File(dir + "/input_features_mask.u8");
  EXPECT_EQ(features->mask, want_mask);
  const float max_diff = test::MaxAbsDiff(features->values, want);
  double sum = 0.0;
  for (size_t i = 0; i < want.size() && i < features->values.size(); ++i) sum += std::abs(features->values[i] - want[i]);
  std::printf("%s input_features: %zu samples -> [%d, %d], max |diff| %.3g, mean |diff| %.3g, mask %d of %d valid\n",
              name.c_str(), audio->samples.size(), features->num_frames, features->num_mels, max_diff,
              sum / static_cast<double>(want.size()), features->NumValid(), features->num_frames);
  return max_diff;
}

TEST(AudioFeatures, Gemma3nMatchesHfInputFeatures) {
  EXPECT_LE(CheckGolden("gemma3n_audio", LogMelStyle::kGemma3n, 188, 32), 1e-4f);
}

TEST(AudioFeatures, Gemma4MatchesHfInputFeatures) {
  EXPECT_LE(CheckGolden("gemma4_e2b_image_audio", LogMelStyle::kGemma4, 170, 32), 1e-4f);
}

// A clip of n samples of a tone among noise (deterministic), at 16 kHz.
Audio Clip(size_t n, double hz = 700.0) {
  Audio audio{16000, std::vector<float>(n)};
  uint32_t state = 12345;
  for (size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    const double noise = (static_cast<double>(state >> 8) / (1 << 24) - 0.5) * 0.02;
    const double tone = 0.3 * std::sin(2 * std::numbers::pi * hz * static_cast<double>(i) / 16000);
    audio.samples[i] = static_cast<float>(tone + noise);
  }
  return audio;
}

// HF's frame count and mask, from its rules: pad the clip to a multiple of 128; Gemma 4 puts
// frame_length / 2 zeros in front; frames of frame_length + 1 samples every hop; Gemma 3n's frame i
// is valid when sample i * hop is real, Gemma 4's when the last sample of its window is.
std::vector<uint8_t> HfMask(int64_t n, const LogMelParams& p) {
  const int64_t padded = (n + 127) / 128 * 128;
  const int64_t front = p.style == LogMelStyle::kGemma4 ? p.frame_length / 2 : 0;
  const int64_t total = front + padded;
  const int64_t frames = total < p.frame_length + 1 ? 0 : (total - p.frame_length - 1) / p.hop_length + 1;
  std::vector<uint8_t> mask(frames);
  for (int64_t i = 0; i < frames; ++i) {
    const int64_t first = i * p.hop_length - front;  // in the clip's own sample numbers
    const int64_t sample = p.style == LogMelStyle::kGemma3n ? first : first + p.frame_length;
    mask[i] = sample >= 0 && sample < n;
  }
  return mask;
}

TEST(AudioFeatures, FramesAndMasksFollowHfRules) {
  int gemma4_partial = 0;
  for (const LogMelParams& params : {Gemma3nLogMelParams(), Gemma4LogMelParams()}) {
    for (int64_t n : {0, 1, 100, 160, 320, 400, 512, 513, 1000, 1030, 1151, 1152, 1153, 4000, 16000, 16037}) {
      auto features = ComputeLogMel(Clip(static_cast<size_t>(n)), params);
      ASSERT_TRUE(features.ok()) << features.message();
      const std::vector<uint8_t> want = HfMask(n, params);
      EXPECT_EQ(features->mask, want) << n << " samples";
      ASSERT_EQ(features->values.size(), want.size() * static_cast<size_t>(params.feature_size));
      for (size_t t = 0; t < want.size(); ++t) {
        bool all_zero = true;
        for (int m = 0; m < params.feature_size; ++m) all_zero &= features->values[t * params.feature_size + m] == 0.0f;
        // Gemma 4 zeroes the invalid frames; a real frame's log-mel is never all zero.
        EXPECT_EQ(all_zero, params.style == LogMelStyle::kGemma4 && want[t] == 0) << n << " samples, frame " << t;
      }
      if (params.style == LogMelStyle::kGemma4) gemma4_partial += features->NumValid() < features->num_frames;
    }
  }
  EXPECT_GT(gemma4_partial, 0);  // the lengths above include clips whose last Gemma 4 frames are padding
}

TEST(AudioFeatures, LongClipsAreCutToThirtySeconds) {
  for (const LogMelParams& params : {Gemma3nLogMelParams(), Gemma4LogMelParams()}) {
    auto cut = ComputeLogMel(Clip(480'000), params);
    auto longer = ComputeLogMel(Clip(480'000 + 5'000), params);
    ASSERT_TRUE(cut.ok() && longer.ok());
    EXPECT_EQ(longer->num_frames, cut->num_frames);
    EXPECT_EQ(longer->values, cut->values);
    EXPECT_EQ(cut->mask, HfMask(480'000, params));
  }
}

TEST(AudioFeatures, ToneLandsInItsMelBin) {
  // On the HTK scale the filter centred nearest 1 kHz is the strongest for a 1 kHz tone.
  for (LogMelParams params : {Gemma3nLogMelParams(), Gemma4LogMelParams()}) {
    params.feature_size = 64;
    auto features = ComputeLogMel(Clip(16000, 1000.0), params);
    ASSERT_TRUE(features.ok()) << features.message();
    const int t = features->num_frames / 2;
    const float* row = features->values.data() + static_cast<size_t>(t) * 64;
    const int loudest = static_cast<int>(std::max_element(row, row + 64) - row);
    const double mel_min = 2595 * std::log10(1 + params.min_frequency / 700);
    const double mel_max = 2595 * std::log10(1 + params.max_frequency / 700);
    const auto corner_hz = [&](int i) {
      return 700 * (std::pow(10.0, (mel_min + i * (mel_max - mel_min) / 65) / 2595) - 1);
    };
    // Filter m peaks at corner m + 1; the tone lies within half a corner spacing of it.
    const double centre_hz = corner_hz(loudest + 1);
    EXPECT_NEAR(centre_hz, 1000.0, 0.5 * (corner_hz(loudest + 2) - corner_hz(loudest)))
        << "loudest filter " << loudest << " is centred at " << centre_hz << " Hz";
  }
}

TEST(AudioFeatures, PerBinNormalisationAndOtherRates) {
  LogMelParams params = Gemma4LogMelParams();
  params.feature_size = 16;
  const Audio clip = Clip(8000);
  auto plain = ComputeLogMel(clip, params);
  params.per_bin_mean.assign(16, 1.5);
  params.per_bin_stddev.assign(16, 4.0);
  auto normalised = ComputeLogMel(clip, params);
  ASSERT_TRUE(plain.ok() && normalised.ok());
  for (size_t i = 0; i < plain->values.size(); ++i) {
    const float want = plain->mask[i / 16] ? static_cast<float>((plain->values[i] - 1.5) / 4.0) : 0.0f;
    ASSERT_NEAR(normalised->values[i], want, 1e-6f) << i;
  }
  // A clip at 48 kHz is resampled to the extractor's 16 kHz first.
  params = Gemma4LogMelParams();
  const std::vector<double> tone = testing::Tone(48000, 0.5, 700.0, 0.3);
  const Audio at48k{48000, std::vector<float>(tone.begin(), tone.end())};
  auto direct = ComputeLogMel(at48k, params);
  auto resampled = ResampleAudio(at48k, 16000);
  ASSERT_TRUE(direct.ok() && resampled.ok());
  auto via = ComputeLogMel(*resampled, params);
  ASSERT_TRUE(via.ok());
  EXPECT_EQ(direct->values, via->values);
  EXPECT_EQ(direct->num_frames, 50);
}

TEST(AudioFeatures, ConfigReaderTakesHfKeysAndNamesBadOnes) {
  auto g3n = LogMelParamsFromHfJson(R"({"feature_extractor_type": "Gemma3nAudioFeatureExtractor"})");
  ASSERT_TRUE(g3n.ok()) << g3n.message();
  EXPECT_EQ(g3n->style, LogMelStyle::kGemma3n);
  EXPECT_EQ(g3n->feature_size, 128);
  EXPECT_EQ(g3n->frame_length, 512);
  EXPECT_EQ(g3n->fft_length, 1024);
  EXPECT_EQ(g3n->mel_floor, 1e-5);
  // processor_config.json nests the extractor; the sizes follow from the durations and fft_overdrive.
  auto g4 = LogMelParamsFromHfJson(R"({"feature_extractor": {"feature_extractor_type": "Gemma4AudioFeatureExtractor",
      "feature_size": 64, "frame_length_ms": 25.0, "hop_length_ms": 12.5, "fft_overdrive": true,
      "per_bin_mean": null, "padding_side": "left"}})");
  ASSERT_TRUE(g4.ok()) << g4.message();
  EXPECT_EQ(g4->style, LogMelStyle::kGemma4);
  EXPECT_EQ(g4->feature_size, 64);
  EXPECT_EQ(g4->frame_length, 400);
  EXPECT_EQ(g4->hop_length, 200);
  EXPECT_EQ(g4->fft_length, 1024);  // 512 doubled
  EXPECT_TRUE(g4->pad_left);
  EXPECT_TRUE(g4->per_bin_mean.empty());
  const std::pair<const char*, const char*> bad[] = {
      {R"({"feature_size": 32})", "feature_extractor_type is missing"},
      {R"({"feature_extractor_type": "WhisperFeatureExtractor"})", R"("WhisperFeatureExtractor", not Gemma3n)"},
      {R"({"feature_extractor_type": "Gemma4AudioFeatureExtractor", "feature_size": 4, "per_bin_mean": [1, 2]})",
       "'per_bin_mean' must be null or a list of feature_size (4) numbers"},
      {R"({"feature_extractor_type": "Gemma4AudioFeatureExtractor", "hop_length": "160"})", "'hop_length' must be"},
      {R"({"feature_extractor_type": "Gemma4AudioFeatureExtractor", "padding_side": "middle"})", "'padding_side'"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"feature_extractor_type": )", "feature extractor config"},
  };
  for (const auto& [text, message] : bad) {
    auto params = LogMelParamsFromHfJson(text);
    ASSERT_FALSE(params.ok()) << text;
    EXPECT_NE(params.message().find(message), std::string::npos) << params.message();
  }
  // Values the reader takes but the extractor cannot use are refused when features are computed.
  auto odd_fft =
      LogMelParamsFromHfJson(R"({"feature_extractor_type": "Gemma4AudioFeatureExtractor", "fft_length": 500})");
  ASSERT_TRUE(odd_fft.ok());
  auto features = ComputeLogMel(Clip(1000), *odd_fft);
  ASSERT_FALSE(features.ok());
  EXPECT_NE(features.message().find("fft_length must be a power of two"), std::string::npos) << features.message();
}

}  // namespace
}  // namespace gemlet::media

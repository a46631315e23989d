// ResampleAudio (libsoxr HQ): a tone keeps its frequency and amplitude, what lies above the new Nyquist
// frequency is filtered out rather than folded back, and a clip at the target rate comes back unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <vector>

#include "media/audio.h"
#include "test_audio.h"

namespace gemlet::media {
namespace {

Audio ToneClip(int rate, double seconds, double hz, double amplitude) {
  const std::vector<double> tone = testing::Tone(rate, seconds, hz, amplitude);
  return {rate, std::vector<float>(tone.begin(), tone.end())};
}

TEST(AudioResample, ToneKeepsFrequencyAndAmplitude) {
  for (const double hz : {440.0, 1000.0, 5000.0}) {
    auto out = ResampleAudio(ToneClip(44100, 1.0, hz, 0.5), 16000);
    ASSERT_TRUE(out.ok()) << out.message();
    EXPECT_EQ(out->sample_rate, 16000);
    ASSERT_EQ(out->samples.size(), 16000u);
    const double found = testing::DominantFrequency(out->samples, 16000, hz - 20, hz + 20);
    const double level = testing::ToneAmplitude(out->samples, 16000, hz);
    // soxr is linear-phase with its delay removed: sample by sample against the ideal tone, away from
    // the clip's edges, where the filter sees the signal start and stop.
    double worst = 0.0;
    for (size_t i = 800; i < out->samples.size() - 800; ++i) {
      const double ideal = 0.5 * std::sin(2.0 * std::numbers::pi * hz * static_cast<double>(i) / 16000);
      worst = std::max(worst, std::abs(out->samples[i] - ideal));
    }
    std::printf("  %.0f Hz at 44100 -> 16000 Hz: frequency %.5f Hz, amplitude %.6f (want 0.5), "
                "max |sample - ideal| %.2e\n", hz, found, level, worst);
    EXPECT_NEAR(found, hz, 0.01);
    EXPECT_NEAR(level, 0.5, 1e-3);
    EXPECT_LT(worst, 1e-3);
  }
}

TEST(AudioResample, WhatLiesAboveTheNewNyquistIsRemoved) {
  // 10 kHz at 44.1 kHz would fold to 6 kHz at 16 kHz without the anti-aliasing filter.
  auto out = ResampleAudio(ToneClip(44100, 1.0, 10000.0, 0.5), 16000);
  ASSERT_TRUE(out.ok()) << out.message();
  const double alias = testing::ToneAmplitude(out->samples, 16000, 6000.0);
  std::printf("  10 kHz at 44100 -> 16000 Hz: what remains at the 6 kHz alias: %.2e\n", alias);
  EXPECT_LT(alias, 1e-4);
}

TEST(AudioResample, UpsamplingKeepsTheTone) {
  auto out = ResampleAudio(ToneClip(8000, 1.0, 700.0, 0.5), 16000);
  ASSERT_TRUE(out.ok()) << out.message();
  ASSERT_EQ(out->samples.size(), 16000u);
  EXPECT_NEAR(testing::DominantFrequency(out->samples, 16000, 650, 750), 700.0, 0.01);
  EXPECT_NEAR(testing::ToneAmplitude(out->samples, 16000, 700.0), 0.5, 1e-3);
}

TEST(AudioResample, TheTargetRateComesBackUnchanged) {
  const Audio clip = ToneClip(16000, 0.3, 440.0, 0.5);
  auto out = ResampleAudio(clip, 16000);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->sample_rate, 16000);
  EXPECT_EQ(out->samples, clip.samples);
}

TEST(AudioResample, ClipsOfAFewSamples) {
  // One sample at 44.1 kHz is 0.36 of a sample at 16 kHz: nothing (soxr itself would crash on it).
  for (size_t n : {1, 2, 3, 5}) {
    auto out = ResampleAudio(Audio{44100, std::vector<float>(n, 0.25f)}, 16000);
    ASSERT_TRUE(out.ok()) << out.message();
    EXPECT_EQ(out->samples.size(), static_cast<size_t>(std::llround(n * 16000.0 / 44100))) << n;
  }
}

TEST(AudioResample, BadRatesAreRefused) {
  EXPECT_FALSE(ResampleAudio(ToneClip(16000, 0.1, 440.0, 0.5), 0).ok());
  EXPECT_FALSE(ResampleAudio(ToneClip(16000, 0.1, 440.0, 0.5), 10'000'000).ok());
  Audio no_rate = ToneClip(16000, 0.1, 440.0, 0.5);
  no_rate.sample_rate = 0;
  EXPECT_FALSE(ResampleAudio(no_rate, 16000).ok());
}

}  // namespace
}  // namespace gemlet::media

// SplitPoints: a long clip is cut in the quietest moment of each window's last seconds, every piece
// within the window and none too short; continuous sound is cut at the window's end.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "media/audio_split.h"

namespace gemlet::media {
namespace {

constexpr int kRate = 16000;

// "Speech": noise bursts of 0.2-0.6 s with pauses of 0.1-0.3 s between them, and, where given, a
// silent second starting at each of `gaps` (seconds).
std::vector<float> Babble(double seconds, std::vector<double> gaps, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(-0.5f, 0.5f);
  std::uniform_real_distribution<double> word(0.2, 0.6), pause(0.1, 0.3);
  std::vector<float> x(static_cast<size_t>(seconds * kRate), 0.0f);
  double t = 0;
  while (t < seconds) {
    const double w = word(rng);
    for (size_t i = static_cast<size_t>(t * kRate); i < std::min(x.size(), static_cast<size_t>((t + w) * kRate)); ++i) {
      x[i] = noise(rng);
    }
    t += w;
    // A pause: quiet, not silent (room noise).
    const double p = pause(rng);
    for (size_t i = static_cast<size_t>(t * kRate); i < std::min(x.size(), static_cast<size_t>((t + p) * kRate)); ++i) {
      x[i] = 0.01f * noise(rng);
    }
    t += p;
  }
  for (double g : gaps) {
    for (size_t i = static_cast<size_t>(g * kRate); i < std::min(x.size(), static_cast<size_t>((g + 1) * kRate)); ++i) {
      x[i] = 0.0f;
    }
  }
  return x;
}

double Energy(const std::vector<float>& x, int64_t centre, int64_t width) {
  double e = 0;
  for (int64_t i = std::max<int64_t>(0, centre - width / 2); i < std::min<int64_t>(x.size(), centre + width / 2); ++i) {
    e += double(x[i]) * x[i];
  }
  return e;
}

TEST(AudioSplit, ShortClipsAreOnePiece) {
  const AudioSplitParams p = AudioSplitFor(kRate, 30.0);
  EXPECT_EQ(p.max_piece, 480000);
  EXPECT_EQ(SplitPoints({}, p), std::vector<int64_t>({0}));
  const std::vector<float> half(kRate / 2, 0.1f);
  EXPECT_EQ(SplitPoints(half, p), std::vector<int64_t>({0, kRate / 2}));
  const std::vector<float> exact(480000, 0.1f);
  EXPECT_EQ(SplitPoints(exact, p), std::vector<int64_t>({0, 480000}));
}

TEST(AudioSplit, CutsFallInTheSilencesNearTheWindowsEnd) {
  // 70 s with silent seconds at 27.5 s and 55 s (within 5 s of each window's end) and one at 10 s (not).
  const std::vector<float> x = Babble(70, {10.0, 27.5, 55.0});
  const std::vector<int64_t> b = SplitPoints(x, AudioSplitFor(kRate, 30.0));
  ASSERT_EQ(b.size(), 4u);  // three pieces
  EXPECT_GE(b[1], 27.5 * kRate);
  EXPECT_LE(b[1], 28.5 * kRate);
  EXPECT_GE(b[2], 55.0 * kRate);
  EXPECT_LE(b[2], 56.0 * kRate);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LE(b[i] - b[i - 1], 480000);
  // The latest of the silent moments: each piece as long as the silence allows.
  EXPECT_EQ(b[1] % 160, 0);
  EXPECT_GE(b[1], 28.4 * kRate);
}

TEST(AudioSplit, WithoutSilenceTheQuietestPauseIsTaken) {
  const std::vector<float> x = Babble(95, {});
  const AudioSplitParams p = AudioSplitFor(kRate, 30.0);
  const std::vector<int64_t> b = SplitPoints(x, p);
  ASSERT_GE(b.size(), 5u);  // four pieces at least
  for (size_t i = 1; i + 1 < b.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_LE(b[i] - b[i - 1], p.max_piece);
    EXPECT_GE(b[i] - b[i - 1], p.max_piece - p.search);
    // In a pause (room noise at 1/50 of the words' level: about 0.013 over 100 ms, where ten samples
    // of a word add 0.8), not in a word; and no 100 ms stretch of the window's last 5 s is quieter.
    const double at_cut = Energy(x, b[i], p.quiet);
    EXPECT_LT(at_cut, 0.1) << "the cut at " << double(b[i]) / kRate << " s is in a word";
    for (int64_t c = b[i - 1] + p.max_piece - p.search; c <= b[i - 1] + p.max_piece; c += p.hop) {
      ASSERT_GE(Energy(x, c, p.quiet) + 1e-9, at_cut) << double(c) / kRate;
    }
  }
  EXPECT_EQ(b.back(), static_cast<int64_t>(x.size()));
}

TEST(AudioSplit, ContinuousSoundIsCutAtTheWindowAndNoPieceIsTooShort) {
  // A steady tone: every moment as loud as the next, so the cut is the window's end.
  std::vector<float> tone(static_cast<size_t>(60.5 * kRate));
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = 0.5f * static_cast<float>(std::sin(2 * M_PI * 440.0 * double(i) / kRate));
  const AudioSplitParams p = AudioSplitFor(kRate, 30.0);
  const std::vector<int64_t> b = SplitPoints(tone, p);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_LE(b[i] - b[i - 1], p.max_piece);
    EXPECT_GE(b[i] - b[i - 1], p.min_piece);
  }
  // 30.2 s of silence: the last piece keeps its second, the first is 29.2 s.
  const std::vector<float> silence(static_cast<size_t>(30.2 * kRate), 0.0f);
  const std::vector<int64_t> s = SplitPoints(silence, p);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2] - s[1], static_cast<int64_t>(silence.size()) - s[1]);
  EXPECT_GE(s[2] - s[1], p.min_piece);
  EXPECT_LE(s[1], static_cast<int64_t>(silence.size()) - p.min_piece);
}

}  // namespace
}  // namespace gemlet::media

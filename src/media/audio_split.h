// Where a clip longer than a model's window is cut: at its quietest moment near the window's end, so
// that a piece ends in a pause between words rather than inside one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gemlet::media {

// The rule (SplitPoints): a piece that starts at s and cannot hold the rest of the clip ends at the
// quietest `quiet` stretch whose centre lies in [s + max_piece - search, s + max_piece] (and leaves
// at least min_piece after it): the stretches are compared by the energy (sum of squares) of their
// samples, on a grid of `hop` samples; among equally quiet ones the latest wins (the longest piece).
// So a cut falls inside a word only when no quieter moment exists in the window's last `search`
// samples (continuous speech or music for that long). Sizes are in samples.
struct AudioSplitParams {
  int64_t max_piece = 480'000;  // the model's window (Gemma's 30 s at 16 kHz)
  int64_t search = 80'000;      // 5 s: how much shorter than the window a piece may be
  int64_t min_piece = 16'000;   // 1 s: no piece shorter, the last one included (unless the clip is)
  int64_t quiet = 1'600;        // 100 ms: a short pause between words
  int64_t hop = 160;            // 10 ms
};

// The defaults above for a window of window_seconds at sample_rate.
AudioSplitParams AudioSplitFor(int sample_rate, double window_seconds);

// The pieces' boundaries: 0, the cuts, samples.size() (a clip within max_piece: {0, size}; an empty
// one: {0}). Piece i is [bounds[i], bounds[i + 1]).
std::vector<int64_t> SplitPoints(std::span<const float> samples, const AudioSplitParams& params);

}  // namespace gemlet::media

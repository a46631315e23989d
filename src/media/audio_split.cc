// SplitPoints: a long clip's cuts at its quietest moments near the window's end (the rule is in
// audio_split.h).
#include "media/audio_split.h"

#include <algorithm>
#include <cmath>

namespace gemlet::media {

AudioSplitParams AudioSplitFor(int sample_rate, double window_seconds) {
  const auto samples = [sample_rate](double seconds) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::llround(seconds * sample_rate)));
  };
  AudioSplitParams p;
  // The window rounded down: a piece must never be longer than the model hears.
  p.max_piece = std::max<int64_t>(1, static_cast<int64_t>(std::floor(window_seconds * sample_rate)));
  p.search = std::min(samples(5.0), p.max_piece / 2);
  p.min_piece = std::min(samples(1.0), p.search);
  p.quiet = samples(0.1);
  p.hop = samples(0.01);
  return p;
}

std::vector<int64_t> SplitPoints(std::span<const float> samples, const AudioSplitParams& params) {
  const int64_t n = static_cast<int64_t>(samples.size());
  std::vector<int64_t> bounds = {0};
  if (n == 0) return bounds;
  const int64_t max_piece = std::max<int64_t>(1, params.max_piece);
  const int64_t hop = std::max<int64_t>(1, params.hop);
  // energy[k]: the sum of squares of hop k's samples; prefix[k]: of hops [0, k).
  const int64_t hops = (n + hop - 1) / hop;
  std::vector<double> prefix(static_cast<size_t>(hops) + 1, 0.0);
  for (int64_t k = 0; k < hops; ++k) {
    double e = 0;
    for (int64_t i = k * hop; i < std::min(n, (k + 1) * hop); ++i) {
      e += static_cast<double>(samples[static_cast<size_t>(i)]) * samples[static_cast<size_t>(i)];
    }
    prefix[static_cast<size_t>(k) + 1] = prefix[static_cast<size_t>(k)] + e;
  }
  const int64_t quiet_hops = std::max<int64_t>(1, params.quiet / hop);
  // The energy of the quiet stretch centred on the hop boundary j (clipped to the clip).
  const auto stretch = [&](int64_t j) {
    const int64_t a = std::clamp<int64_t>(j - quiet_hops / 2, 0, hops);
    const int64_t b = std::clamp<int64_t>(j - quiet_hops / 2 + quiet_hops, 0, hops);
    return prefix[static_cast<size_t>(b)] - prefix[static_cast<size_t>(a)];
  };
  int64_t s = 0;
  while (n - s > max_piece) {
    const int64_t end = s + max_piece;
    const int64_t lo = std::max(s + 1, end - std::max<int64_t>(0, params.search));
    const int64_t hi = std::max(lo, std::min(end, n - std::max<int64_t>(0, params.min_piece)));
    int64_t cut = hi;
    double best = INFINITY;
    for (int64_t j = (lo + hop - 1) / hop; j * hop <= hi; ++j) {
      const double e = stretch(j);
      if (e <= best) {  // the latest of equally quiet ones: the longest piece
        best = e;
        cut = j * hop;
      }
    }
    bounds.push_back(cut);
    s = cut;
  }
  bounds.push_back(n);
  return bounds;
}

}  // namespace gemlet::media

// Rounding and search helpers shared by the reference quantizers (quants.cc, quants_k.cc). Internal
// to gemlet_tensor: nothing outside src/tensor includes it.
#pragma once

#include <algorithm>
#include <cmath>

namespace gemlet {

// Round to nearest, ties to even (the default floating-point rounding mode, which std::rint uses).
// Magnitudes past 2^22 - 1 saturate there and NaN gives 0, so every input has a defined result;
// the quantizers only ever pass values far inside that range.
inline int NearestInt(float v) {
  constexpr float kLimit = 4194303.0f;
  if (std::fabs(v) <= kLimit) return static_cast<int>(std::rint(v));
  if (v > 0.0f) return 4194303;
  return v < 0.0f ? -4194303 : 0;
}

// NearestInt(v) limited to [lo, hi].
inline int RoundToLevel(float v, int lo, int hi) { return std::clamp(NearestInt(v), lo, hi); }

// The value of largest magnitude, with its sign; the earliest one wins a tie, 0 for an all-zero
// input. llama.cpp's symmetric formats put it on the most negative level, the side with one step
// more than the positive one.
inline float SignedAbsMax(const float* x, int n) {
  float extreme = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  }
  return extreme;
}

}  // namespace gemlet

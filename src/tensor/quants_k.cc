// Reference (scalar) dequantize / quantize of the K types (256-value super-blocks) and Q8_K.
// Dequantization is bit-exact with ggml. Quantization follows llama.cpp's search (no importance
// matrix): fit each group's scale (and min) by sweeping candidate scales with a weighted
// least-squares refit, quantize the group scales against one f16 super-scale, then re-pick every
// level against the scales actually stored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/half.h"
#include "tensor/quant_blocks.h"

namespace gemlet {

namespace {

// Below this a group counts as all zeros (llama.cpp's GROUP_MAX_EPS).
constexpr float kZeroGroup = 1e-15f;

// Round to nearest, ties to even: adding 1.5 * 2^23 makes the FPU round v to an integer in the
// low mantissa bits. Out-of-range inputs saturate and NaN gives 0.
inline int NearestInt(float v) {
  constexpr float kLimit = 4194303.0f;
  if (!(std::fabs(v) <= kLimit)) return v > 0.0f ? 4194303 : (v < 0.0f ? -4194303 : 0);
  const float shifted = v + 12582912.0f;
  return static_cast<int>(FloatToBits(shifted) & 0x007fffffu) - 0x00400000;
}

inline int Clamp(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

// Packs 2-bit levels (0..3) of 256 values into 64 bytes: byte 32h + l holds values 128h + 32s + l
// at bits 2s. Shared by Q2_K and the low bits of Q3_K.
void Pack2Bit(const uint8_t* levels, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* l = levels + 128 * h;
    for (int i = 0; i < 32; ++i) {
      qs[32 * h + i] = static_cast<uint8_t>(l[i] | (l[i + 32] << 2) | (l[i + 64] << 4) | (l[i + 96] << 6));
    }
  }
}

// Writes 6-bit scale and min of group j into Q4_K / Q5_K's 12 scale bytes (inverse of
// UnpackScaleMinK4); `scales` must start zeroed.
void PackScaleMinK4(int j, int sc, int m, uint8_t* scales) {
  if (j < 4) {
    scales[j] = static_cast<uint8_t>(sc);
    scales[j + 4] = static_cast<uint8_t>(m);
  } else {
    scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

// Fits x ~= scale * l + min with l in 0..nmax and min <= 0, minimizing sum w * |err| (abs_err) or
// sum w * err^2. Starts from the min..max range, then tries inverse scales (nmax + rmin + k * rdelta)
// / range for k = 0..nstep, refitting scale and min by weighted least squares for each level set.
// Returns scale; *neg_min receives -min (>= 0). n <= 32.
float FitScaleMin(const float* x, const float* w, int n, int nmax, float rmin, float rdelta, int nstep,
                  bool abs_err, uint8_t* levels, float* neg_min) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(levels, levels + n, uint8_t{0});
    *neg_min = -min;
    return 0.0f;
  }
  auto error_of = [&](float scale, float offset, const uint8_t* l) {
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * static_cast<float>(l[i]) + offset - x[i];
      err += w[i] * (abs_err ? std::fabs(diff) : diff * diff);
    }
    return err;
  };

  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax));
  float best_error = error_of(scale, min, levels);

  uint8_t trial[32];
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = w[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float trial_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float trial_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (trial_min > 0.0f) {  // the model keeps min <= 0: refit the scale alone
      trial_min = 0.0f;
      trial_scale = sum_xl / sum_l2;
    }
    const float err = error_of(trial_scale, trial_min, trial);
    if (err < best_error) {
      std::copy(trial, trial + n, levels);
      best_error = err;
      scale = trial_scale;
      min = trial_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// Fits x ~= scale * l with l in -nmax..nmax-1, the extreme value on -nmax, minimizing
// sum w * err^2 with w = x^2. Tries 19 inverse scales around nmax / extreme and keeps the one whose
// least-squares scale explains the most. levels receive l + nmax. n <= 16.
float FitSymmetric(const float* x, int n, int nmax, uint8_t* levels) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kZeroGroup) {
    std::fill(levels, levels + n, uint8_t{0});
    return 0.0f;
  }
  // sum_lx^2 / sum_l2 is the squared norm of x explained by the best scale for levels l.
  auto sums_for = [&](float iscale, float* sum_lx, float* sum_l2) {
    *sum_lx = 0.0f;
    *sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      *sum_lx += w * x[i] * static_cast<float>(l);
      *sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  auto set_levels = [&](float iscale) {
    for (int i = 0; i < n; ++i) {
      levels[i] = static_cast<uint8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
    }
  };

  float iscale = -static_cast<float>(nmax) / max;
  float sum_lx, sum_l2;
  sums_for(iscale, &sum_lx, &sum_l2);
  set_levels(iscale);
  float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    sums_for(iscale, &sum_lx, &sum_l2);
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      set_levels(iscale);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Q3_K's group fit: x ~= scale * l, l in -nmax..nmax-1, weights x^2; starts from nmax / extreme and
// then moves single levels while that raises the explained norm (up to 5 passes). levels receive
// l + nmax. n <= 16.
float FitSymmetricRefined(const float* x, int n, int nmax, uint8_t* levels) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kZeroGroup) {
    std::fill(levels, levels + n, uint8_t{0});
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  int l[16];
  float sum_lx = 0.0f, sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    l[i] = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l[i]);
    sum_l2 += w * static_cast<float>(l[i]) * static_cast<float>(l[i]);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float fl = static_cast<float>(l[i]);
      float lx = sum_lx - w * x[i] * fl;  // the sums without value i
      if (!(lx > 0.0f)) continue;
      float l2 = sum_l2 - w * fl * fl;
      const int candidate = Clamp(NearestInt(x[i] * l2 / lx), -nmax, nmax - 1);
      if (candidate == l[i]) continue;
      const float fc = static_cast<float>(candidate);
      lx += w * x[i] * fc;
      l2 += w * fc * fc;
      if (l2 > 0.0f && lx * lx * sum_l2 > sum_lx * sum_lx * l2) {
        l[i] = candidate;
        sum_lx = lx;
        sum_l2 = l2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(l[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

}  // namespace

// ---- dequantization (every product is exact in float; only the final "- min" rounds) ----

void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, y += kBlockK) {
    const BlockQ2_K& blk = x[b];
    const float d = F16ToF32(blk.d);
    const float dmin = F16ToF32(blk.dmin);
    for (int i = 0; i < kBlockK; ++i) {
      const int h = i / 128, s = (i / 32) % 4, l = i % 32;
      const uint8_t sc = blk.scales[i / 16];
      const float dl = d * static_cast<float>(sc & 0xF);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const int q = (blk.qs[32 * h + l] >> (2 * s)) & 3;
      y[i] = dl * static_cast<float>(q) - ml;
    }
  }
}

void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, y += kBlockK) {
    const BlockQ3_K& blk = x[b];
    const float d = F16ToF32(blk.d);
    int8_t scales[16];
    UnpackQ3KScales(blk.scales, scales);
    for (int i = 0; i < kBlockK; ++i) {
      const int h = i / 128, s = (i / 32) % 4, l = i % 32;
      const int low = (blk.qs[32 * h + l] >> (2 * s)) & 3;
      const bool high = (blk.hmask[l] >> (4 * h + s)) & 1;
      const float dl = d * static_cast<float>(scales[i / 16]);
      y[i] = dl * static_cast<float>(low - (high ? 0 : 4));
    }
  }
}

void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, y += kBlockK) {
    const BlockQ4_K& blk = x[b];
    const float d = F16ToF32(blk.d);
    const float dmin = F16ToF32(blk.dmin);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      UnpackScaleMinK4(g, blk.scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = blk.qs + 32 * (g / 2);
      const int shift = 4 * (g % 2);
      for (int l = 0; l < 32; ++l) y[32 * g + l] = dl * static_cast<float>((q[l] >> shift) & 0xF) - ml;
    }
  }
}

void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, y += kBlockK) {
    const BlockQ5_K& blk = x[b];
    const float d = F16ToF32(blk.d);
    const float dmin = F16ToF32(blk.dmin);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      UnpackScaleMinK4(g, blk.scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = blk.qs + 32 * (g / 2);
      const int shift = 4 * (g % 2);
      for (int l = 0; l < 32; ++l) {
        const int level = ((q[l] >> shift) & 0xF) | (((blk.qh[l] >> g) & 1) << 4);
        y[32 * g + l] = dl * static_cast<float>(level) - ml;
      }
    }
  }
}

void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, y += kBlockK) {
    const BlockQ6_K& blk = x[b];
    const float d = F16ToF32(blk.d);
    for (int i = 0; i < kBlockK; ++i) {
      const int h = i / 128, s = (i / 32) % 4, l = i % 32;
      // Quarter s of half h: low nibbles from ql[64h + 32(s & 1) + l], high nibble when s >= 2.
      const int low = (blk.ql[64 * h + 32 * (s & 1) + l] >> (4 * (s >> 1))) & 0xF;
      const int high = (blk.qh[32 * h + l] >> (2 * s)) & 3;
      const float dl = d * static_cast<float>(blk.scales[i / 16]);
      y[i] = dl * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, y += kBlockK) {
    for (int i = 0; i < kBlockK; ++i) y[i] = x[b].d * static_cast<float>(x[b].qs[i]);
  }
}

// ---- quantization ----

void QuantizeRowQ2_K(const float* x, BlockQ2_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    BlockQ2_K& blk = y[b];
    uint8_t levels[kBlockK];
    float scales[16], mins[16];
    float max_scale = 0.0f, max_min = 0.0f;  // scales are positive: the min absorbs the offset
    for (int g = 0; g < 16; ++g) {
      float w[16];
      for (int i = 0; i < 16; ++i) w[i] = std::fabs(x[16 * g + i]);
      scales[g] = FitScaleMin(x + 16 * g, w, 16, 3, -0.5f, 0.1f, 15, /*abs_err=*/true, levels + 16 * g, &mins[g]);
      max_scale = std::max(max_scale, scales[g]);
      max_min = std::max(max_min, mins[g]);
    }
    // 4-bit group scales and mins against f16 super-scales.
    std::memset(blk.scales, 0, sizeof blk.scales);
    if (max_scale > 0.0f) {
      const float iscale = 15.0f / max_scale;
      for (int g = 0; g < 16; ++g) blk.scales[g] = static_cast<uint8_t>(Clamp(NearestInt(iscale * scales[g]), 0, 15));
      blk.d = F32ToF16(max_scale / 15.0f);
    } else {
      blk.d = F32ToF16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = 15.0f / max_min;
      for (int g = 0; g < 16; ++g) {
        blk.scales[g] |= static_cast<uint8_t>(Clamp(NearestInt(iscale * mins[g]), 0, 15) << 4);
      }
      blk.dmin = F32ToF16(max_min / 15.0f);
    } else {
      blk.dmin = F32ToF16(0.0f);
    }
    // Re-pick the levels against the stored scales.
    const float d = F16ToF32(blk.d), dmin = F16ToF32(blk.dmin);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(blk.scales[g] & 0xF);
      if (dl == 0.0f) continue;
      const float ml = dmin * static_cast<float>(blk.scales[g] >> 4);
      for (int i = 0; i < 16; ++i) {
        levels[16 * g + i] = static_cast<uint8_t>(Clamp(NearestInt((x[16 * g + i] + ml) / dl), 0, 3));
      }
    }
    Pack2Bit(levels, blk.qs);
  }
}

void QuantizeRowQ3_K(const float* x, BlockQ3_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    BlockQ3_K& blk = y[b];
    uint8_t levels[kBlockK];
    float scales[16];
    float max_scale = 0.0f, amax = 0.0f;  // the group scale of largest magnitude, signed
    for (int g = 0; g < 16; ++g) {
      scales[g] = FitSymmetricRefined(x + 16 * g, 16, 4, levels + 16 * g);
      if (std::fabs(scales[g]) > amax) {
        amax = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    // 6-bit signed group scales: the largest maps to -32, the side with one more step.
    std::memset(blk.scales, 0, sizeof blk.scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int g = 0; g < 16; ++g) {
        const int q = Clamp(NearestInt(iscale * scales[g]), -32, 31) + 32;
        blk.scales[g % 8] |= static_cast<uint8_t>((q & 0xF) << (4 * (g / 8)));
        blk.scales[8 + g % 4] |= static_cast<uint8_t>((q >> 4) << (2 * (g / 4)));
      }
      blk.d = F32ToF16(1.0f / iscale);
    } else {
      blk.d = F32ToF16(0.0f);
    }
    int8_t stored[16];
    UnpackQ3KScales(blk.scales, stored);
    const float d = F16ToF32(blk.d);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(stored[g]);
      if (dl == 0.0f) continue;
      for (int i = 0; i < 16; ++i) {
        levels[16 * g + i] = static_cast<uint8_t>(Clamp(NearestInt(x[16 * g + i] / dl), -4, 3) + 4);
      }
    }
    // Level bit 2 goes to hmask (value 128h + 32s + l -> byte l, bit 4h + s), bits 0-1 to qs.
    std::memset(blk.hmask, 0, sizeof blk.hmask);
    for (int i = 0; i < kBlockK; ++i) {
      if (levels[i] > 3) {
        blk.hmask[i % 32] |= static_cast<uint8_t>(1u << (i / 32));
        levels[i] -= 4;
      }
    }
    Pack2Bit(levels, blk.qs);
  }
}

namespace {

// Q4_K and Q5_K share everything but the level count and the search range.
template <typename Block>
void QuantizeScaleMinK(const float* x, Block& blk, int nmax, float rmin, float rdelta, int nstep,
                       uint8_t* levels) {
  float scales[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int g = 0; g < 8; ++g) {
    const float* xg = x + 32 * g;
    float sum_x2 = 0.0f;
    for (int i = 0; i < 32; ++i) sum_x2 += xg[i] * xg[i];
    // Weights favour large values but keep a floor at the group's RMS so small ones still count.
    const float rms = std::sqrt(sum_x2 / 32.0f);
    float w[32];
    for (int i = 0; i < 32; ++i) w[i] = rms + std::fabs(xg[i]);
    scales[g] = FitScaleMin(xg, w, 32, nmax, rmin, rdelta, nstep, /*abs_err=*/false, levels + 32 * g, &mins[g]);
    max_scale = std::max(max_scale, scales[g]);
    max_min = std::max(max_min, mins[g]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::memset(blk.scales, 0, sizeof blk.scales);
  for (int g = 0; g < 8; ++g) {
    PackScaleMinK4(g, Clamp(NearestInt(inv_scale * scales[g]), 0, 63), Clamp(NearestInt(inv_min * mins[g]), 0, 63),
                   blk.scales);
  }
  blk.d = F32ToF16(max_scale / 63.0f);
  blk.dmin = F32ToF16(max_min / 63.0f);
  const float d = F16ToF32(blk.d), dmin = F16ToF32(blk.dmin);
  for (int g = 0; g < 8; ++g) {
    uint8_t sc, m;
    UnpackScaleMinK4(g, blk.scales, &sc, &m);
    const float dl = d * static_cast<float>(sc);
    if (dl == 0.0f) continue;
    const float ml = dmin * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      levels[32 * g + i] = static_cast<uint8_t>(Clamp(NearestInt((x[32 * g + i] + ml) / dl), 0, nmax));
    }
  }
}

}  // namespace

void QuantizeRowQ4_K(const float* x, BlockQ4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    uint8_t levels[kBlockK];
    QuantizeScaleMinK(x, y[b], 15, -1.0f, 0.1f, 20, levels);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[32 * c + l] = static_cast<uint8_t>(levels[64 * c + l] | (levels[64 * c + 32 + l] << 4));
      }
    }
  }
}

void QuantizeRowQ5_K(const float* x, BlockQ5_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    uint8_t levels[kBlockK];
    QuantizeScaleMinK(x, y[b], 31, -0.5f, 0.1f, 15, levels);
    std::memset(y[b].qh, 0, sizeof y[b].qh);
    for (int g = 0; g < 8; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int level = levels[32 * g + l];
        y[b].qh[l] |= static_cast<uint8_t>((level >> 4) << g);
        const int shift = 4 * (g % 2);
        if (shift == 0) y[b].qs[32 * (g / 2) + l] = static_cast<uint8_t>(level & 0xF);
        else y[b].qs[32 * (g / 2) + l] |= static_cast<uint8_t>((level & 0xF) << 4);
      }
    }
  }
}

void QuantizeRowQ6_K(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    BlockQ6_K& blk = y[b];
    uint8_t levels[kBlockK];
    float scales[16];
    float max_scale = 0.0f, amax = 0.0f;
    for (int g = 0; g < 16; ++g) {
      scales[g] = FitSymmetric(x + 16 * g, 16, 32, levels + 16 * g);
      if (std::fabs(scales[g]) > amax) {
        amax = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    if (amax < kZeroGroup) {
      std::memset(&blk, 0, sizeof blk);
      continue;
    }
    // 8-bit signed group scales, the largest on -128.
    const float iscale = -128.0f / max_scale;
    blk.d = F32ToF16(1.0f / iscale);
    for (int g = 0; g < 16; ++g) blk.scales[g] = static_cast<int8_t>(Clamp(NearestInt(iscale * scales[g]), -128, 127));
    const float d = F16ToF32(blk.d);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(blk.scales[g]);
      if (dl == 0.0f) continue;
      for (int i = 0; i < 16; ++i) {
        levels[16 * g + i] = static_cast<uint8_t>(Clamp(NearestInt(x[16 * g + i] / dl), -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* l = levels + 128 * h;
      for (int i = 0; i < 32; ++i) {
        blk.ql[64 * h + i] = static_cast<uint8_t>((l[i] & 0xF) | ((l[i + 64] & 0xF) << 4));
        blk.ql[64 * h + 32 + i] = static_cast<uint8_t>((l[i + 32] & 0xF) | ((l[i + 96] & 0xF) << 4));
        blk.qh[32 * h + i] = static_cast<uint8_t>((l[i] >> 4) | ((l[i + 32] >> 4) << 2) | ((l[i + 64] >> 4) << 4) |
                                                  ((l[i + 96] >> 4) << 6));
      }
    }
  }
}

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    BlockQ8_K& blk = y[b];
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < kBlockK; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    if (amax == 0.0f) {
      std::memset(&blk, 0, sizeof blk);
      continue;
    }
    // -127 rather than -128 keeps every q in -127..127, which SIMD dot products rely on.
    const float iscale = -127.0f / max;
    for (int i = 0; i < kBlockK; ++i) blk.qs[i] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[i])));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk.qs[16 * g + i];
      blk.bsums[g] = static_cast<int16_t>(sum);
    }
    blk.d = 1.0f / iscale;
  }
}

}  // namespace gemlet

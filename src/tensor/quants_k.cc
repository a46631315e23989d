// Reference (scalar) dequantize / quantize of the K types (256-value super-blocks) and Q8_K.
// Dequantization is bit-exact with ggml. Quantization gives llama-quantize's bytes (no importance
// matrix): every group of 16 or 32 values gets its own scale (and offset) from a small search, the
// group scales are then coded against one f16 super-scale, and last every level is picked again
// against the scales the block really stores. The float arithmetic that decides levels is kept in
// llama.cpp's order, so the results match to the bit; the code around it is ours.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_math.h"

namespace gemlet {

namespace {

// A group whose largest magnitude is below this is stored as zeros (llama.cpp's GROUP_MAX_EPS).
constexpr float kZeroGroup = 1e-15f;

// ---- group fit with an offset (Q2_K, Q4_K, Q5_K) ----
//
// A group x[0..n) with weights w is stored as x ~= d * q + m: integer levels q in 0..qmax, a step
// d and an offset m <= 0 (the block keeps -m, which must not be negative). Finding the levels and
// the pair (d, m) together is a small discrete problem; the search below scans a grid of level
// assignments and solves each one exactly:
//   * Levels come from mapping [origin, hi] onto the level grid with an inverse step t:
//     q = round((x - origin) * t), clamped. The starting point is the plain mapping of the group's
//     range: origin = lo (the minimum, lifted to 0 when positive), t = qmax / (hi - lo), d = 1 / t,
//     m = lo.
//   * The candidates are t_k = (qmax + r0 + k * dr) / (hi - origin), k = 0..steps: level counts a
//     little below and above qmax, so a few outliers may clip while the bulk gets finer steps. The
//     origin is the offset m of the best fit found so far, so a win moves the grid of the next
//     candidates (llama.cpp's search does exactly this, and its bytes depend on it).
//   * For fixed levels, the (d, m) minimizing sum w * (d * q + m - x)^2 solves the 2x2 normal
//     equations  [Sw  Swq; Swq  Swq2] [m; d] = [Swx; Swqx]  (Cramer's rule, AffineSolve). If that
//     puts m above 0, m is pinned to 0 and d refit alone: d = Swqx / Swq2.
//   * Each candidate is scored by sum w * |err| or sum w * err^2 with its own (d, m); one that
//     scores strictly lower than the best so far replaces it.
// Returns d and writes -m and the levels.

struct AffineGrid {
  int qmax;       // levels 0..qmax
  float r0, dr;   // candidate level counts qmax + r0 + k * dr ...
  int steps;      // ... for k = 0..steps
  bool abs_err;   // score by weighted absolute error (else squared)
};
constexpr AffineGrid kQ2Grid = {3, -0.5f, 0.1f, 15, true};
constexpr AffineGrid kQ4Grid = {15, -1.0f, 0.1f, 20, false};
constexpr AffineGrid kQ5Grid = {31, -0.5f, 0.1f, 15, false};

// Weighted moments of one level assignment: Swq, Swq2, Swqx.
struct LevelMoments {
  float wq = 0.0f, wq2 = 0.0f, wqx = 0.0f;
};

// q = round((x - lo) * t) in 0..qmax for the whole group, and the moments of that assignment.
LevelMoments AssignAffine(const float* x, const float* w, int n, float lo, float t, int qmax, uint8_t* q) {
  LevelMoments m;
  for (int i = 0; i < n; ++i) {
    const int level = RoundToLevel(t * (x[i] - lo), 0, qmax);
    q[i] = static_cast<uint8_t>(level);
    const float fl = static_cast<float>(level);
    const float wl = w[i] * fl;
    m.wq += wl;
    m.wq2 += wl * fl;
    m.wqx += wl * x[i];
  }
  return m;
}

// Least-squares (d, m) for fixed levels, given Sw and Swx of the group; m is kept <= 0. False when
// the system is singular (every level equal), which leaves nothing to fit.
bool AffineSolve(float sw, float swx, const LevelMoments& lm, float* d, float* m) {
  const float det = sw * lm.wq2 - lm.wq * lm.wq;
  if (!(det > 0.0f)) return false;
  *d = (sw * lm.wqx - swx * lm.wq) / det;
  *m = (lm.wq2 * swx - lm.wq * lm.wqx) / det;
  if (*m > 0.0f) {
    *m = 0.0f;
    *d = lm.wqx / lm.wq2;
  }
  return true;
}

// A candidate's step, offset and score.
struct AffineFit {
  float d = 0.0f, m = 0.0f, err = 0.0f;
};

float AffineError(const float* x, const float* w, int n, const uint8_t* q, float d, float m, bool abs_err) {
  float total = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float r = d * static_cast<float>(q[i]) + m - x[i];
    total += w[i] * (abs_err ? std::fabs(r) : r * r);
  }
  return total;
}

// n <= 32.
float FitAffine(const float* x, const float* w, int n, const AffineGrid& grid, uint8_t* levels, float* neg_m) {
  float lo = x[0], hi = x[0];
  float sw = 0.0f, swx = 0.0f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sw += w[i];
    swx += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);  // m <= 0: a range above zero is widened down to it
  if (hi == lo) {
    std::fill(levels, levels + n, uint8_t{0});
    *neg_m = -lo;
    return 0.0f;
  }
  // Two level buffers: `best` holds the winner so far, `trial` the candidate; a win swaps them.
  uint8_t scratch[32];
  uint8_t* best = levels;
  uint8_t* trial = scratch;
  const float t0 = static_cast<float>(grid.qmax) / (hi - lo);
  AssignAffine(x, w, n, lo, t0, grid.qmax, best);
  AffineFit fit{1.0f / t0, lo, 0.0f};
  fit.err = AffineError(x, w, n, best, fit.d, fit.m, grid.abs_err);

  for (int k = 0; k <= grid.steps; ++k) {
    const float origin = fit.m;  // the best offset so far (see above)
    const float t = (grid.r0 + grid.dr * static_cast<float>(k) + static_cast<float>(grid.qmax)) / (hi - origin);
    const LevelMoments lm = AssignAffine(x, w, n, origin, t, grid.qmax, trial);
    AffineFit cand;
    if (!AffineSolve(sw, swx, lm, &cand.d, &cand.m)) continue;
    cand.err = AffineError(x, w, n, trial, cand.d, cand.m, grid.abs_err);
    if (cand.err < fit.err) {
      std::swap(best, trial);
      fit = cand;
    }
  }
  if (best != levels) std::copy(best, best + n, levels);
  *neg_m = -fit.m;
  return fit.d;
}

// ---- symmetric group fits (Q3_K, Q6_K) ----
//
// A group is stored as x ~= d * q with q in -qmax..qmax-1, weights w = x^2 (large values matter
// most). The starting levels map the signed extreme onto -qmax: q = round(x * t), t = -qmax /
// extreme. For fixed levels the best step is d = Swxq / Swq2, and the weighted squared error left
// is Swx2 - Swxq^2 / Swq2: maximizing the explained part Swxq^2 / Swq2 is the same as minimizing
// the error. Q6_K tries a few other inverse steps (GridFit), Q3_K moves single levels (RefinedFit).

struct SymMoments {
  float wxq = 0.0f, wq2 = 0.0f;
};

// q = round(x * t) in -qmax..qmax-1 and the moments Swxq, Swq2 with w = x^2.
SymMoments AssignSymmetric(const float* x, int n, float t, int qmax, int8_t* q) {
  SymMoments s;
  for (int i = 0; i < n; ++i) {
    const int level = RoundToLevel(t * x[i], -qmax, qmax - 1);
    q[i] = static_cast<int8_t>(level);
    const float fl = static_cast<float>(level);
    const float w = x[i] * x[i];
    s.wxq += w * x[i] * fl;
    s.wq2 += w * fl * fl;
  }
  return s;
}

void StoreBiased(const int8_t* q, int n, int bias, uint8_t* out) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(q[i] + bias);
}

// Q6_K: besides t = -qmax / extreme, the level counts qmax - 0.9 .. qmax + 0.9 in tenths (not
// qmax itself again), in this order; a candidate replaces the best when it explains strictly more.
// Levels are written as q + qmax. n <= 16.
constexpr int kTenths[] = {-9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9};

float GridFit(const float* x, int n, int qmax, uint8_t* levels) {
  const float extreme = SignedAbsMax(x, n);
  if (std::fabs(extreme) < kZeroGroup) {
    std::fill(levels, levels + n, uint8_t{0});
    return 0.0f;
  }
  int8_t buf_a[16], buf_b[16];
  int8_t* best = buf_a;
  int8_t* trial = buf_b;
  const SymMoments s0 = AssignSymmetric(x, n, -static_cast<float>(qmax) / extreme, qmax, best);
  float d = s0.wq2 != 0.0f ? s0.wxq / s0.wq2 : 0.0f;
  float explained = d * s0.wxq;
  for (int tenth : kTenths) {
    const float t = -(static_cast<float>(qmax) + 0.1f * static_cast<float>(tenth)) / extreme;
    const SymMoments s = AssignSymmetric(x, n, t, qmax, trial);
    if (s.wq2 > 0.0f && s.wxq * s.wxq > explained * s.wq2) {
      std::swap(best, trial);
      d = s.wxq / s.wq2;
      explained = d * s.wxq;
    }
  }
  StoreBiased(best, n, qmax, levels);
  return d;
}

// One sweep of single-level moves for RefinedFit: for each value, the level that fits it best
// under the step the other values imply (x * Swq2' / Swxq', primes meaning "without this value")
// replaces the current one if the group then explains strictly more. True if a level moved.
bool RefineSweep(const float* x, int n, int qmax, int8_t* q, SymMoments* s) {
  bool moved = false;
  for (int i = 0; i < n; ++i) {
    const float w = x[i] * x[i];
    const float cur = static_cast<float>(q[i]);
    SymMoments rest{s->wxq - w * x[i] * cur, s->wq2 - w * cur * cur};
    if (!(rest.wxq > 0.0f)) continue;
    const int cand = RoundToLevel(x[i] * rest.wq2 / rest.wxq, -qmax, qmax - 1);
    if (cand == q[i]) continue;
    const float fc = static_cast<float>(cand);
    const SymMoments with{rest.wxq + w * x[i] * fc, rest.wq2 + w * fc * fc};
    if (with.wq2 > 0.0f && with.wxq * with.wxq * s->wq2 > s->wxq * s->wxq * with.wq2) {
      q[i] = static_cast<int8_t>(cand);
      *s = with;
      moved = true;
    }
  }
  return moved;
}

// Q3_K: the starting levels, then up to five sweeps of RefineSweep, stopping after one that moves
// nothing. Levels are written as q + qmax. n <= 16.
float RefinedFit(const float* x, int n, int qmax, uint8_t* levels) {
  const float extreme = SignedAbsMax(x, n);
  if (std::fabs(extreme) < kZeroGroup) {
    std::fill(levels, levels + n, uint8_t{0});
    return 0.0f;
  }
  int8_t q[16];
  SymMoments s = AssignSymmetric(x, n, -static_cast<float>(qmax) / extreme, qmax, q);
  for (int sweep = 0; sweep < 5 && RefineSweep(x, n, qmax, q, &s); ++sweep) {
  }
  StoreBiased(q, n, qmax, levels);
  return s.wq2 > 0.0f ? s.wxq / s.wq2 : 0.0f;
}

// ---- group scales against the super-scale ----

// Non-negative group values (steps or -offsets) as codes 0..top of one f16 super-scale, the largest
// value on `top`; all zero gives codes 0 and a zero super-scale. Returns the super-scale.
uint16_t UnsignedScaleCodes(const float* v, int n, int top, int* codes) {
  float largest = 0.0f;
  for (int g = 0; g < n; ++g) largest = std::max(largest, v[g]);
  const float inv = largest > 0.0f ? static_cast<float>(top) / largest : 0.0f;
  for (int g = 0; g < n; ++g) codes[g] = RoundToLevel(inv * v[g], 0, top);
  return F32ToF16(largest / static_cast<float>(top));
}

// Signed group steps as codes -half..half-1; `extreme` (SignedAbsMax of v, nonzero) lands on -half.
// Returns the f16 super-scale.
uint16_t SignedScaleCodes(const float* v, int n, float extreme, int half, int* codes) {
  const float inv = -static_cast<float>(half) / extreme;
  for (int g = 0; g < n; ++g) codes[g] = RoundToLevel(inv * v[g], -half, half - 1);
  return F32ToF16(1.0f / inv);
}

// The final pass: a group's levels again from the step and offset the block stores,
// q = round((x + offset) / step) in lo..hi, written as q - lo. A zero step keeps the fit's levels.
void Requantize(const float* x, int n, float step, float offset, int lo, int hi, uint8_t* levels) {
  if (step == 0.0f) return;
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(RoundToLevel((x[i] + offset) / step, lo, hi) - lo);
}

// ---- bit packing (the layouts are described in quant_blocks.h and mirrored by the dequantizers) ----

// 2-bit fields of 256 values: value 128h + 32s + l in byte 32h + l, bits 2s (Q2_K; Q3_K's low bits).
void PackTwoBit(const uint8_t* v, uint8_t* qs) {
  std::memset(qs, 0, kBlockK / 4);
  for (int i = 0; i < kBlockK; ++i) {
    qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>((v[i] & 3) << (2 * ((i / 32) % 4)));
  }
}

// 4-bit fields of Q4_K / Q5_K: value 32g + l in byte 32 (g / 2) + l, low nibble for even g.
void PackNibblesK(const uint8_t* v, uint8_t* qs) {
  std::memset(qs, 0, kBlockK / 2);
  for (int i = 0; i < kBlockK; ++i) {
    const int g = i / 32;
    qs[32 * (g / 2) + i % 32] |= static_cast<uint8_t>((v[i] & 0xF) << (4 * (g % 2)));
  }
}

// Q4_K / Q5_K's 6-bit code pair of group g in the 12 scale bytes (inverse of UnpackScaleMinK4):
// groups 0-3 whole in bytes g and g + 4; groups 4-7 split into nibbles in byte g + 4 and top bits
// in bits 6-7 of bytes g - 4 (scale) and g (min). `scales` must start zeroed.
void PackScaleMinK4(int g, int sc, int m, uint8_t* scales) {
  if (g < 4) {
    scales[g] = static_cast<uint8_t>(sc);
    scales[g + 4] = static_cast<uint8_t>(m);
    return;
  }
  scales[g + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
  scales[g - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
  scales[g] |= static_cast<uint8_t>((m >> 4) << 6);
}

// Q3_K's 6-bit code of group g (inverse of UnpackQ3KScales); `scales` must start zeroed.
void PackQ3KScale(int g, int code, uint8_t* scales) {
  scales[g % 8] |= static_cast<uint8_t>((code & 0xF) << (4 * (g / 8)));
  scales[8 + g % 4] |= static_cast<uint8_t>((code >> 4) << (2 * (g / 4)));
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
    float step[16], neg_offset[16];
    for (int g = 0; g < 16; ++g) {
      const float* xg = x + 16 * g;
      float w[16];
      for (int i = 0; i < 16; ++i) w[i] = std::fabs(xg[i]);
      step[g] = FitAffine(xg, w, 16, kQ2Grid, levels + 16 * g, &neg_offset[g]);
    }
    // 4-bit codes for both, a scale in the low and a min in the high nibble of each byte.
    int sc[16], mn[16];
    blk.d = UnsignedScaleCodes(step, 16, 15, sc);
    blk.dmin = UnsignedScaleCodes(neg_offset, 16, 15, mn);
    for (int g = 0; g < 16; ++g) blk.scales[g] = static_cast<uint8_t>(sc[g] | (mn[g] << 4));
    const float d = F16ToF32(blk.d), dmin = F16ToF32(blk.dmin);
    for (int g = 0; g < 16; ++g) {
      Requantize(x + 16 * g, 16, d * static_cast<float>(sc[g]), dmin * static_cast<float>(mn[g]), 0, 3,
                 levels + 16 * g);
    }
    PackTwoBit(levels, blk.qs);
  }
}

void QuantizeRowQ3_K(const float* x, BlockQ3_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    BlockQ3_K& blk = y[b];
    uint8_t levels[kBlockK];
    float step[16];
    for (int g = 0; g < 16; ++g) step[g] = RefinedFit(x + 16 * g, 16, 4, levels + 16 * g);
    // 6-bit signed codes; with every step zero the bytes stay zero (codes of -32 under d = 0).
    std::memset(blk.scales, 0, sizeof blk.scales);
    blk.d = F32ToF16(0.0f);
    const float extreme = SignedAbsMax(step, 16);
    if (extreme != 0.0f) {
      int code[16];
      blk.d = SignedScaleCodes(step, 16, extreme, 32, code);
      for (int g = 0; g < 16; ++g) PackQ3KScale(g, code[g] + 32, blk.scales);
    }
    int8_t stored[16];
    UnpackQ3KScales(blk.scales, stored);
    const float d = F16ToF32(blk.d);
    for (int g = 0; g < 16; ++g) {
      Requantize(x + 16 * g, 16, d * static_cast<float>(stored[g]), 0.0f, -4, 3, levels + 16 * g);
    }
    // Level bit 2 to hmask (value i -> byte i % 32, bit i / 32), bits 0-1 to qs.
    std::memset(blk.hmask, 0, sizeof blk.hmask);
    for (int i = 0; i < kBlockK; ++i) {
      blk.hmask[i % 32] |= static_cast<uint8_t>((levels[i] >> 2) << (i / 32));
      levels[i] &= 3;
    }
    PackTwoBit(levels, blk.qs);
  }
}

namespace {

// Q4_K and Q5_K: 8 groups of 32 with an offset, 6-bit codes for steps and offsets.
template <typename Block>
void QuantizeGroupsWithMin(const float* x, const AffineGrid& grid, Block& blk, uint8_t* levels) {
  float step[8], neg_offset[8];
  for (int g = 0; g < 8; ++g) {
    const float* xg = x + 32 * g;
    // Weights: the value's magnitude on top of the group's RMS, so that small values still count.
    float sum_sq = 0.0f;
    for (int i = 0; i < 32; ++i) sum_sq += xg[i] * xg[i];
    const float rms = std::sqrt(sum_sq / 32.0f);
    float w[32];
    for (int i = 0; i < 32; ++i) w[i] = rms + std::fabs(xg[i]);
    step[g] = FitAffine(xg, w, 32, grid, levels + 32 * g, &neg_offset[g]);
  }
  int sc[8], mn[8];
  blk.d = UnsignedScaleCodes(step, 8, 63, sc);
  blk.dmin = UnsignedScaleCodes(neg_offset, 8, 63, mn);
  std::memset(blk.scales, 0, sizeof blk.scales);
  for (int g = 0; g < 8; ++g) PackScaleMinK4(g, sc[g], mn[g], blk.scales);
  const float d = F16ToF32(blk.d), dmin = F16ToF32(blk.dmin);
  for (int g = 0; g < 8; ++g) {
    Requantize(x + 32 * g, 32, d * static_cast<float>(sc[g]), dmin * static_cast<float>(mn[g]), 0, grid.qmax,
               levels + 32 * g);
  }
}

}  // namespace

void QuantizeRowQ4_K(const float* x, BlockQ4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    uint8_t levels[kBlockK];
    QuantizeGroupsWithMin(x, kQ4Grid, y[b], levels);
    PackNibblesK(levels, y[b].qs);
  }
}

void QuantizeRowQ5_K(const float* x, BlockQ5_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    uint8_t levels[kBlockK];
    QuantizeGroupsWithMin(x, kQ5Grid, y[b], levels);
    PackNibblesK(levels, y[b].qs);
    // The fifth bit of value 32g + l: qh[l] bit g.
    std::memset(y[b].qh, 0, sizeof y[b].qh);
    for (int i = 0; i < kBlockK; ++i) y[b].qh[i % 32] |= static_cast<uint8_t>((levels[i] >> 4) << (i / 32));
  }
}

void QuantizeRowQ6_K(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    BlockQ6_K& blk = y[b];
    uint8_t levels[kBlockK];
    float step[16];
    for (int g = 0; g < 16; ++g) step[g] = GridFit(x + 16 * g, 16, 32, levels + 16 * g);
    const float extreme = SignedAbsMax(step, 16);
    if (std::fabs(extreme) < kZeroGroup) {
      std::memset(&blk, 0, sizeof blk);
      continue;
    }
    // 8-bit signed codes.
    int code[16];
    blk.d = SignedScaleCodes(step, 16, extreme, 128, code);
    for (int g = 0; g < 16; ++g) blk.scales[g] = static_cast<int8_t>(code[g]);
    const float d = F16ToF32(blk.d);
    for (int g = 0; g < 16; ++g) {
      Requantize(x + 16 * g, 16, d * static_cast<float>(code[g]), 0.0f, -32, 31, levels + 16 * g);
    }
    // Value 128h + 32s + l: low nibble in ql[64h + 32 (s & 1) + l] (high nibble of it when s >= 2),
    // top two bits in qh[32h + l] at bit 2s.
    std::memset(blk.ql, 0, sizeof blk.ql);
    std::memset(blk.qh, 0, sizeof blk.qh);
    for (int i = 0; i < kBlockK; ++i) {
      const int h = i / 128, s = (i / 32) % 4, l = i % 32;
      blk.ql[64 * h + 32 * (s & 1) + l] |= static_cast<uint8_t>((levels[i] & 0xF) << (4 * (s >> 1)));
      blk.qh[32 * h + l] |= static_cast<uint8_t>((levels[i] >> 4) << (2 * s));
    }
  }
}

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    BlockQ8_K& blk = y[b];
    const float extreme = SignedAbsMax(x, kBlockK);
    if (extreme == 0.0f) {
      std::memset(&blk, 0, sizeof blk);
      continue;
    }
    // The extreme on -127 rather than -128 keeps every q in -127..127, which SIMD dot products rely on.
    const float inv = -127.0f / extreme;
    for (int i = 0; i < kBlockK; ++i) blk.qs[i] = static_cast<int8_t>(std::min(127, NearestInt(inv * x[i])));
    for (int g = 0; g < kBlockK / 16; ++g) {
      const int8_t* q = blk.qs + 16 * g;
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[i];
      blk.bsums[g] = static_cast<int16_t>(sum);
    }
    blk.d = 1.0f / inv;
  }
}

}  // namespace gemlet

// Prefill on 64-bit ARM through the 8-bit matrix multiply (i8mm: smmla, ARMv8.6, optional from
// v8.2; Cortex-A710/X2 and later, Apple M2/A15 and later). One smmla multiplies a 2 x 8 block of
// weights (two rows' next 8 values) by an 8 x 2 block of activations (two tokens') into a 2 x 2
// block of sums: 32 multiply-adds, twice sdot's 16. Compiled with -march=armv8.2-a+dotprod+i8mm;
// called only by the NEON_I8MM table (matmul_neon.cc), which exists only where the CPU has it.
//
// Each panel of 16 rows is decoded once (the type's Fill, in sdot's layout) and re-laid in place
// for smmla: per 32-value block and 8-value step k, register p holds rows 2p and 2p+1. Activations
// are re-laid once per call the same way, two tokens per register. A tile is 8 rows x 4 tokens: 8
// integer and 8 float accumulators, each 2 rows x 2 tokens, whose scales (w scale x activation
// scale) come as [r0 r0 r1 r1] x [t0 t1 t0 t1]. The K types' tiles keep integer accumulators per
// 256-value super-block instead (their GEMV's arithmetic), which the caller's finish turns to floats.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/matmul_neon.h"

namespace gemlet::neon {
namespace {

// Token pairs: [pair][block][k 4][16] values (token 2p's 8, then 2p + 1's), and per pair and block
// [x0 x1 x0 x1] of the scales d (a missing second token: zeros).
struct PairActs {
  const int8_t* q = nullptr;
  const float* d = nullptr;  // [pair][block][4]
};

PairActs PairTokens(const Acts32& a, int64_t n_tokens, int64_t n_blocks, KernelContext& ctx) {
  const int64_t n_pairs = (n_tokens + 1) / 2;
  KernelScratch& scratch = ctx.scratch();
  int8_t* q = scratch.Get<int8_t>(0, KernelScratch::kActPairQ, static_cast<size_t>(n_pairs * n_blocks * 64));
  float* d = scratch.Get<float>(0, KernelScratch::kActPairD, static_cast<size_t>(n_pairs * n_blocks * 4));
  ctx.pool().ParallelFor(static_cast<size_t>(n_pairs), [&](size_t begin, size_t end, int) {
    for (size_t p = begin; p < end; ++p) {
      const int64_t t0 = 2 * static_cast<int64_t>(p), t1 = t0 + 1;
      const bool second = t1 < n_tokens;
      for (int64_t j = 0; j < n_blocks; ++j) {
        int8_t* out = q + (static_cast<int64_t>(p) * n_blocks + j) * 64;
        const int8_t* x0 = a.q + (t0 * n_blocks + j) * 32;
        const int8_t* x1 = a.q + (t1 * n_blocks + j) * 32;
        for (int k = 0; k < 4; ++k) {
          std::memcpy(out + 16 * k, x0 + 8 * k, 8);
          if (second) std::memcpy(out + 16 * k + 8, x1 + 8 * k, 8);
          else std::memset(out + 16 * k + 8, 0, 8);
        }
        if (a.d == nullptr) continue;  // the K types: values alone
        const float d0 = a.d[t0 * n_blocks + j], d1 = second ? a.d[t1 * n_blocks + j] : 0.0f;
        float* dd = d + (static_cast<int64_t>(p) * n_blocks + j) * 4;
        dd[0] = dd[2] = d0;
        dd[1] = dd[3] = d1;
      }
    }
  });
  return {q, d};
}

// The panel from sdot's layout to smmla's, in the order the tiles read it: per 8-row half h, per
// block, per 8-value step k, its 4 row pairs (register p: rows 8h + 2p and 8h + 2p + 1), so that a
// tile streams 256 contiguous bytes per block. The scales likewise as [r0 r0 r1 r1] per row pair:
// [half][block][groups][4 pairs][4].
struct PairPanel {
  int8_t* q = nullptr;        // [2][n_blocks][4][4][16]
  float* scale = nullptr;     // [2][n_blocks][16]
  int32_t* iscale = nullptr;  // [2][n_blocks * groups][16], for a panel with Panel::iscale
};

inline float32x4x2_t ZipSelf(float32x4_t v) { return vzipq_f32(v, v); }
inline int32x4x2_t ZipSelf(int32x4_t v) { return vzipq_s32(v, v); }
inline float32x4_t Load32(const float* p) { return vld1q_f32(p); }
inline int32x4_t Load32(const int32_t* p) { return vld1q_s32(p); }
inline void Store32(float* p, float32x4_t v) { vst1q_f32(p, v); }
inline void Store32(int32_t* p, int32x4_t v) { vst1q_s32(p, v); }

// Per-row values [group][16 rows] -> [half][group][4 row pairs][r0 r0 r1 r1].
template <class E>
void ExpandPairs(const E* in, int64_t n_groups, E* to) {
  for (int64_t i = 0; i < n_groups; ++i, in += kRows) {
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 2; ++s) {
        const auto v = ZipSelf(Load32(in + 8 * h + 4 * s));
        E* dst = to + (h * n_groups + i) * 16 + 8 * s;
        Store32(dst, v.val[0]);
        Store32(dst + 4, v.val[1]);
      }
    }
  }
}

void RelayPanel(const Panel& p, int64_t n_blocks, int groups, const PairPanel& out) {
  for (int64_t j = 0; j < n_blocks; ++j) {
    for (int k = 0; k < 4; ++k) {
      // Vectors 2k and 2k + 1 (values 8k..8k+3 and 8k+4..8k+7, 4 rows per register): zipping
      // their 32-bit lanes gives each row's 8 values together, two rows per register.
      const int8_t* at = p.q + 512 * j + 128 * k;
      const int32x4x4_t a = vld1q_s32_x4(reinterpret_cast<const int32_t*>(at));
      const int32x4x4_t b = vld1q_s32_x4(reinterpret_cast<const int32_t*>(at + 64));
      for (int h = 0; h < 2; ++h) {
        int32x4x4_t pairs;
        for (int s = 0; s < 2; ++s) {
          pairs.val[2 * s] = vzip1q_s32(a.val[2 * h + s], b.val[2 * h + s]);
          pairs.val[2 * s + 1] = vzip2q_s32(a.val[2 * h + s], b.val[2 * h + s]);
        }
        vst1q_s32_x4(reinterpret_cast<int32_t*>(out.q + ((h * n_blocks + j) * 4 + k) * 64), pairs);
      }
    }
  }
  if (p.iscale != nullptr) ExpandPairs(p.iscale, n_blocks * groups, out.iscale);
  else ExpandPairs(p.scale, n_blocks, out.scale);
}

// The integer part of a tile of 4 row pairs x 2 token pairs over K 8-value steps (4: a 32-value
// block, 2: a 16-value group), in assembly: 8 fresh sums, per step one 64-byte load of the row
// pairs and one 16-byte load per token pair, all post-indexed, then 8 smmla. As intrinsics, GCC 12
// adds address arithmetic and register copies around the 4-register loads (86-91 instructions
// per block and tile against 77 here: bench/RESULTS.md).
#define GEMLET_SMMLA_STEP                                                                            \
  "ld1 {v16.16b-v19.16b}, [%[w]], #64\n"                                                          \
  "ldr q20, [%[x0]], #16\n"                                                                       \
  "ldr q21, [%[x1]], #16\n"                                                                       \
  "smmla %[s00].4s, v16.16b, v20.16b\n"                                                            \
  "smmla %[s10].4s, v17.16b, v20.16b\n"                                                            \
  "smmla %[s20].4s, v18.16b, v20.16b\n"                                                            \
  "smmla %[s30].4s, v19.16b, v20.16b\n"                                                            \
  "smmla %[s01].4s, v16.16b, v21.16b\n"                                                            \
  "smmla %[s11].4s, v17.16b, v21.16b\n"                                                            \
  "smmla %[s21].4s, v18.16b, v21.16b\n"                                                            \
  "smmla %[s31].4s, v19.16b, v21.16b\n"
template <int K>
inline __attribute__((always_inline)) void SmmlaSteps(const int8_t*& w, const int8_t*& x0, const int8_t*& x1,
                                                      int32x4_t sum[4][2]) {
  static_assert(K == 2 || K == 4);
  int32x4_t s00, s10, s20, s30, s01, s11, s21, s31;
#define GEMLET_SMMLA_OPERANDS                                                                        \
  : [s00] "=&w"(s00), [s10] "=&w"(s10), [s20] "=&w"(s20), [s30] "=&w"(s30), [s01] "=&w"(s01),    \
    [s11] "=&w"(s11), [s21] "=&w"(s21), [s31] "=&w"(s31), [w] "+r"(w), [x0] "+r"(x0), [x1] "+r"(x1) \
  : "m"(*w), "m"(*x0), "m"(*x1)                                                                      \
  : "v16", "v17", "v18", "v19", "v20", "v21"
#define GEMLET_SMMLA_ZERO                                                                            \
  "movi %[s00].4s, #0\n movi %[s10].4s, #0\n movi %[s20].4s, #0\n movi %[s30].4s, #0\n"            \
  "movi %[s01].4s, #0\n movi %[s11].4s, #0\n movi %[s21].4s, #0\n movi %[s31].4s, #0\n"
  if constexpr (K == 4) {
    asm(GEMLET_SMMLA_ZERO GEMLET_SMMLA_STEP GEMLET_SMMLA_STEP GEMLET_SMMLA_STEP GEMLET_SMMLA_STEP GEMLET_SMMLA_OPERANDS);
  } else {
    asm(GEMLET_SMMLA_ZERO GEMLET_SMMLA_STEP GEMLET_SMMLA_STEP GEMLET_SMMLA_OPERANDS);
  }
#undef GEMLET_SMMLA_ZERO
#undef GEMLET_SMMLA_OPERANDS
  sum[0][0] = s00;
  sum[1][0] = s10;
  sum[2][0] = s20;
  sum[3][0] = s30;
  sum[0][1] = s01;
  sum[1][1] = s11;
  sum[2][1] = s21;
  sum[3][1] = s31;
}
#undef GEMLET_SMMLA_STEP

// Rows 8h..8h+7 of the panel x token pairs tp0.. (NP of them) -> out[token 0..2NP-1][8 rows]: per
// 32-value block the integer sums times (row scale * token scale), the GEMV's float operations.
template <int NP>
void Tile(const PairPanel& panel, int64_t n_blocks, int h, const PairActs& a, int64_t tp0, float* out) {
  float32x4_t acc[4][NP];
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < NP; ++t) acc[r][t] = vdupq_n_f32(0);
  }
  const int8_t* wq = panel.q + h * n_blocks * 256;
  const float* ws = panel.scale + h * n_blocks * 16;
  const int8_t* xq[NP];
  const float* xd[NP];
  for (int t = 0; t < NP; ++t) {
    xq[t] = a.q + (tp0 + t) * n_blocks * 64;
    xd[t] = a.d + (tp0 + t) * n_blocks * 4;
  }
  for (int64_t j = 0; j < n_blocks; ++j, ws += 16) {
    int32x4_t sum[4][NP];
    if constexpr (NP == 2) {
      SmmlaSteps<4>(wq, xq[0], xq[1], sum);
    } else {
      for (int r = 0; r < 4; ++r) sum[r][0] = vdupq_n_s32(0);
      for (int k = 0; k < 4; ++k, wq += 64, xq[0] += 16) {
        const int8x16x4_t w = vld1q_s8_x4(wq);
        const int8x16_t x = vld1q_s8(xq[0]);
        for (int r = 0; r < 4; ++r) sum[r][0] = vmmlaq_s32(sum[r][0], w.val[r], x);
      }
    }
    const float32x4x4_t sw = vld1q_f32_x4(ws);
    for (int t = 0; t < NP; ++t) {
      const float32x4_t dx = vld1q_f32(xd[t]);
      xd[t] += 4;
      for (int r = 0; r < 4; ++r) acc[r][t] = vfmaq_f32(acc[r][t], vcvtq_f32_s32(sum[r][t]), vmulq_f32(sw.val[r], dx));
    }
  }
  // Lanes: [row 2r, token 2t], [2r, 2t + 1], [2r + 1, 2t], [2r + 1, 2t + 1].
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < NP; ++t) {
      float v[4];
      vst1q_f32(v, acc[r][t]);
      out[(2 * t) * 8 + 2 * r] = v[0];
      out[(2 * t + 1) * 8 + 2 * r] = v[1];
      out[(2 * t) * 8 + 2 * r + 1] = v[2];
      out[(2 * t + 1) * 8 + 2 * r + 1] = v[3];
    }
  }
}

// The 32-value types (Q4_0, Q5_0, Q8_0: one float scale per block and row).
void Run(const PanelSource& w, const PairActs& a, int64_t n_tokens, float* y, KernelContext& ctx) {
  const int64_t n_blocks = w.n_blocks, n_pairs = (n_tokens + 1) / 2;
  KernelScratch& scratch = ctx.scratch();
  ctx.pool().ParallelForDynamic(static_cast<size_t>(w.n_out / kRows), 1, [&](size_t begin, size_t end, int thread) {
    const size_t n = static_cast<size_t>(n_blocks);
    Panel p;
    p.q = scratch.Get<int8_t>(thread, KernelScratch::kPanelQ, n * 512);
    p.scale = scratch.Get<float>(thread, KernelScratch::kPanelScale, n * kRows);
    PairPanel pairs;
    pairs.q = scratch.Get<int8_t>(thread, KernelScratch::kPanelPairQ, n * 512);
    pairs.scale = scratch.Get<float>(thread, KernelScratch::kPanelPairScale, n * 2 * kRows);
    float out[4 * 8];
    for (size_t panel = begin; panel < end; ++panel) {
      const int64_t row0 = static_cast<int64_t>(panel) * kRows;
      w.fill(w.state, row0, p);
      RelayPanel(p, n_blocks, 1, pairs);
      for (int h = 0; h < 2; ++h) {
        for (int64_t tp0 = 0; tp0 < n_pairs; tp0 += 2) {
          const int np = static_cast<int>(std::min<int64_t>(2, n_pairs - tp0));
          if (np == 2) Tile<2>(pairs, n_blocks, h, a, tp0, out);
          else Tile<1>(pairs, n_blocks, h, a, tp0, out);
          for (int64_t t = 2 * tp0; t < std::min(n_tokens, 2 * (tp0 + np)); ++t) {
            std::memcpy(y + t * w.n_out + row0 + 8 * h, out + (t - 2 * tp0) * 8, 8 * sizeof(float));
          }
        }
      }
    }
  });
}

// The K types (PanelSource::finish): rows 8h..8h+7 of the panel x the token
// pairs at x0 and x1 -> sums[super-block][4 tokens][16 rows] at rows 8h..: each group's fresh sums
// times the rows' integer scales, accumulated in integers over the super-block as the GEMV does.
template <int G>
void TileSuper(const PairPanel& panel, int64_t n_blocks, int h, const int8_t* x0, const int8_t* x1, int32_t* out) {
  const int8_t* wq = panel.q + h * n_blocks * 256;
  const int32_t* ws = panel.iscale + h * n_blocks * G * 16;
  for (int64_t i = 0; i < n_blocks / 8; ++i, out += kSuperTileTokens * kRows) {
    int32x4_t acc[4][2];
    for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    for (int j = 0; j < 8 * G; ++j, ws += 16) {
      int32x4_t sum[4][2];
      SmmlaSteps<4 / G>(wq, x0, x1, sum);
      const int32x4x4_t sc = vld1q_s32_x4(ws);
      for (int r = 0; r < 4; ++r) {
        for (int t = 0; t < 2; ++t) acc[r][t] = vmlaq_s32(acc[r][t], sum[r][t], sc.val[r]);
      }
    }
    // Lanes [row 2r, token 2t], [2r, 2t + 1], [2r + 1, 2t], [2r + 1, 2t + 1] to rows per token.
    for (int t = 0; t < 2; ++t) {
      int32_t* even = out + 2 * t * kRows + 8 * h;
      int32_t* odd = even + kRows;
      vst1q_s32(even, vuzp1q_s32(acc[0][t], acc[1][t]));
      vst1q_s32(even + 4, vuzp1q_s32(acc[2][t], acc[3][t]));
      vst1q_s32(odd, vuzp2q_s32(acc[0][t], acc[1][t]));
      vst1q_s32(odd + 4, vuzp2q_s32(acc[2][t], acc[3][t]));
    }
  }
}

// Tiles of 4 tokens (at the batch's end a missing pair repeats the last), both halves of a panel
// into one tile's sums, then the source's finish.
template <int G>
void RunSuper(const PanelSource& w, const PairActs& a, int64_t n_tokens, KernelContext& ctx) {
  const int64_t n_blocks = w.n_blocks, n_pairs = (n_tokens + 1) / 2;
  static_assert(kSuperTileTokens == 4, "a tile is 2 token pairs");
  KernelScratch& scratch = ctx.scratch();
  ctx.pool().ParallelForDynamic(static_cast<size_t>(w.n_out / kRows), 1, [&](size_t begin, size_t end, int thread) {
    const size_t n = static_cast<size_t>(n_blocks);
    Panel p;
    p.q = scratch.Get<int8_t>(thread, KernelScratch::kPanelQ, n * 512);
    p.iscale = scratch.Get<int32_t>(thread, KernelScratch::kPanelScale, n * G * kRows);
    PairPanel pairs;
    pairs.q = scratch.Get<int8_t>(thread, KernelScratch::kPanelPairQ, n * 512);
    pairs.iscale = scratch.Get<int32_t>(thread, KernelScratch::kPanelPairScale, n * G * 2 * kRows);
    int32_t* sums = scratch.Get<int32_t>(thread, KernelScratch::kPanelPairOffset, n / 8 * kSuperTileTokens * kRows);
    for (size_t panel = begin; panel < end; ++panel) {
      const int64_t row0 = static_cast<int64_t>(panel) * kRows;
      w.fill(w.state, row0, p);
      RelayPanel(p, n_blocks, G, pairs);
      for (int64_t tp0 = 0; tp0 < n_pairs; tp0 += 2) {
        const int8_t* x0 = a.q + tp0 * n_blocks * 64;
        const int8_t* x1 = tp0 + 1 < n_pairs ? x0 + n_blocks * 64 : x0;
        for (int h = 0; h < 2; ++h) TileSuper<G>(pairs, n_blocks, h, x0, x1, sums);
        w.finish(w.state, row0, sums, 2 * tp0, static_cast<int>(std::min<int64_t>(kSuperTileTokens, n_tokens - 2 * tp0)));
      }
    }
  });
}

}  // namespace

void GemmI8mm(const PanelSource& w, const Acts32& acts, int64_t n_tokens, float* y, KernelContext& ctx) {
  const PairActs pairs = PairTokens(acts, n_tokens, w.n_blocks, ctx);
  if (w.finish == nullptr) Run(w, pairs, n_tokens, y, ctx);
  else if (w.groups == 2) RunSuper<2>(w, pairs, n_tokens, ctx);
  else RunSuper<1>(w, pairs, n_tokens, ctx);
}

}  // namespace gemlet::neon

// Prefill GEMM for quantized weights on AVX-512 VNNI (the AVX3_DL target). Each panel of 16 weight
// rows is decoded once into unsigned bytes laid out row-interleaved: one 512-bit vector holds 4
// consecutive values of each of the 16 rows, so one vpdpbusd against 4 activation bytes broadcast
// to every lane advances all 16 rows of one token. A 32-value block is 8 such vectors; its integer
// sums, one lane per row, meet the block's per-row weight scales and the token's activation scale
// once per block (or per 16-value group): 8 vpdpbusd + 1 convert + 2 float ops per 512
// multiply-adds, where a layout with one row per vector pays a convert and a scale per vpdpbusd.
// The result vector is 16 rows of one token: stored as it is, no horizontal sums. Other targets use
// the per-row tiles of quant_dot-inl.h. Included by matmul_simd.cc.
//
// Every weight type becomes the same thing: w_i = scale_g * (q_i - z) + offset_g with q_i an unsigned
// byte, z the type's integer zero point (Q4_0 8, Q5_0 16, Q8_0 128 for q + 128, Q6_K 32, Q3_K 4; 0
// for the types with a float min) and g the scale group of i (32 values, or 16 for Q2_K, Q3_K and
// Q6_K). With x ~= d_x * x_q per block of 32,
//   sum_i w_i x_i = sum_g scale_g * d_x * (sum_{i in g} q_i x_q,i - z * sum_{i in g} x_q,i)
//                   + sum_g offset_g * d_x * sum_{i in g} x_q,i
// The zero point is taken off in integers (the vpdpbusd chain starts from -z * sum x_q): as a float
// offset it would be a large term that cancels (128x the result for Q8_0) and rounding would move
// the result visibly.
//
// K-quant weights (kSuperBlockActs) take activations quantized per 256 values instead, as their
// decode GEMV does (BlockQ8_K): d_x is then the same for a super-block's 8 blocks, so a block's
// sums meet only the weights' scales and offsets, and d_x once per super-block. That is one float
// operation less per block and token (cvt, FMA and, with a min, FMA, against cvt, mul, FMA, FMA),
// and on these cores the float work beside the vpdpbusd chain is what a tile waits for
// (bench/RESULTS.md, session 20: Q4_K prefill +9-15%).
#if defined(GEMLET_KERNELS_GEMM_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GEMLET_KERNELS_GEMM_VNNI_INL_H_
#undef GEMLET_KERNELS_GEMM_VNNI_INL_H_
#else
#define GEMLET_KERNELS_GEMM_VNNI_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/quant_dot-inl.h"

#if HWY_TARGET == HWY_AVX3_DL
HWY_BEFORE_NAMESPACE();
namespace gemlet {
namespace HWY_NAMESPACE {
namespace vnni {

using qd::B32;

constexpr int kPanelRows = 16;  // one 32-bit lane per row
constexpr int kTileTokens = 8;  // tokens per register tile: 8 integer + 8 float accumulators

// acc += per lane, the dot product of the 4 unsigned bytes of w with the 4 signed bytes at x4 (the
// same 4 for every lane: an embedded broadcast). EVEX assembly for the reason DpbusdEvex gives.
HWY_INLINE __m512i DpbusdBroadcast(__m512i acc, __m512i w, const int8_t* x4) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(x4)));
  return acc;
}

// Activations of n_tokens rows quantized per 32 values (per 256 for K-quant weights), natural
// order, with per scale group (G per block: 1 for 32-value groups, 2 for 16) the float sum
// d * sum x_q (for the offsets; sum x_q alone with per-256 scales) and the integer start -z * sum x_q
// (for the zero point).
struct Acts {
  int64_t n_blocks = 0;
  int8_t* q = nullptr;      // [token][n_blocks * 32]
  float* d = nullptr;       // [token][n_blocks], or [token][n_blocks / 8] for K-quant weights
  float* sum = nullptr;     // [token][n_blocks * G]
  int32_t* zero = nullptr;  // [token][n_blocks * G]
  // Types with super-block scales and a min (packed Q2_K, Q4_K, Q5_K): per super-block 4 * G pairs of the
  // scale groups' sums of x_q, two 16-bit values each (groups 2p and 2p + 1), as the decode GEMV takes them.
  int32_t* pair_sums = nullptr;  // [token][n_blocks * G / 2]
};

// Whether weights D scale each super-block's sum once, as their decode GEMV does (kSuperBlockScales:
// packed Q2_K, Q3_K, Q4_K, Q5_K and Q6_K, packed-inl.h): the panel then holds their own layout, and D its own tile.
template <class D>
constexpr bool SuperBlockScales() {
  if constexpr (requires { D::kSuperBlockScales; }) return D::kSuperBlockScales;
  return false;
}

// pair_sums (see Acts) of one token's n_groups scale groups from their integer sums.
inline void PairSums(const int32_t* group_sums, int64_t n_groups, int32_t* pair_sums) {
  for (int64_t j = 0; j < n_groups; j += 2) {
    const auto lo = static_cast<uint16_t>(group_sums[j]), hi = static_cast<uint16_t>(group_sums[j + 1]);
    pair_sums[j / 2] = static_cast<int32_t>(static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16);
  }
}

// One token's row of n_blocks * 32 floats, one activation scale per kBlocksPerScale blocks: 1, or 8
// for K-quant weights (one per 256 values, as QuantizeRowK gives their decode GEMV; d then holds
// n_blocks / 8 scales). sum: with a scale per block d * sum x_q, else sum x_q alone (the tile
// applies d once per super-block).
template <int G, int kBlocksPerScale = 1>
void QuantizeActRow(const float* x, int64_t n_blocks, int zero_point, int8_t* q, float* d, float* sum,
                    int32_t* zero) {
  constexpr int kSpan = 32 * kBlocksPerScale;  // values per scale
  for (int64_t s = 0; s < n_blocks / kBlocksPerScale; ++s) {
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < kSpan; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + kSpan * s + i)));
    const float amax = _mm512_reduce_max_ps(m);
    d[s] = ActScale(amax);
    const __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
    const float sum_scale = kBlocksPerScale == 1 ? d[s] : 1.0f;
    for (int64_t j = kBlocksPerScale * s; j < kBlocksPerScale * (s + 1); ++j) {
      const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * j), id));  // round to nearest even
      const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * j + 16), id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * j), _mm512_cvtsepi32_epi8(qlo));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * j + 16), _mm512_cvtsepi32_epi8(qhi));
      const int32_t s_lo = _mm512_reduce_add_epi32(qlo), s_hi = _mm512_reduce_add_epi32(qhi);
      if constexpr (G == 1) {
        sum[j] = sum_scale * static_cast<float>(s_lo + s_hi);
        zero[j] = -zero_point * (s_lo + s_hi);
      } else {
        sum[2 * j] = sum_scale * static_cast<float>(s_lo);
        sum[2 * j + 1] = sum_scale * static_cast<float>(s_hi);
        zero[2 * j] = -zero_point * s_lo;
        zero[2 * j + 1] = -zero_point * s_hi;
      }
    }
  }
}

// 32-value blocks per activation scale for weights D: 8 (one scale per 256 values) for K-quants.
template <class D>
constexpr int kActBlocksPerScale = D::kSuperBlockActs ? 8 : 1;

// A panel of kPanelRows decoded rows, row-interleaved (see the top of this file).
struct Panel {
  uint8_t* q = nullptr;       // [block][8][row][4]: block * 512 + 64 * k + 4 * row holds values 4k..4k+3
  float* scale = nullptr;     // [block][G][row]
  float* offset = nullptr;    // [block][G][row]
};

// Receives one row's 32-value blocks in order (as the decoders emit them) and writes them into its
// lane of the panel.
template <int G>
class PanelRowWriter {
 public:
  PanelRowWriter(const Panel& p, int row) : q_(p.q + 4 * row), scale_(p.scale + row), offset_(p.offset + row) {}
  // q: the block's 32 bytes; s0/o0 the scale and offset of its first 16 values, s1/o1 of the rest
  // (equal for 32-value groups).
  HWY_INLINE void Add(const B32& q, float s0, float s1, float o0, float o1) {
    alignas(32) uint8_t bytes[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bytes), q.p[0].raw);
    for (int k = 0; k < 8; ++k) std::memcpy(q_ + 64 * k, bytes + 4 * k, 4);
    q_ += 512;
    scale_[0] = s0;
    offset_[0] = o0;
    if constexpr (G == 2) {
      scale_[kPanelRows] = s1;
      offset_[kPanelRows] = o1;
    }
    scale_ += G * kPanelRows;
    offset_ += G * kPanelRows;
  }

 private:
  uint8_t* q_;
  float* scale_;
  float* offset_;
};

// ---------------------------------------------------------------------------------------------
// Per type: DecodeRow(row, n_in, writer) emits every 32-value block with its two 16-group scales
// and offsets (w = scale * q + offset); kGroups: 2 where those differ, else 1.

template <class Block>
HWY_INLINE const Block* Blocks(const uint8_t* row) {
  return reinterpret_cast<const Block*>(row);
}

// The 32-value types, with the GEMV tiles' decoders (quant_dot-inl.h): w = d * (q - kZero), or
// d * q + m for the types with a min.
template <class Block, int kZero, bool kMin, class Decode>
struct D32 {
  static constexpr int kZeroPoint = kZero, kGroups = 1;
  static constexpr bool kHasMin = kMin, kSuperBlockActs = false;
  template <class Writer>
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, Writer& w) {
    const Block* b = Blocks<Block>(row);
    for (int64_t i = 0; i < n_in / kBlock32; ++i) {
      const float d = qd::HalfToFloat(b[i].d);
      float m = 0.0f;
      if constexpr (kMin) m = qd::HalfToFloat(b[i].m);
      w.Add(Decode()(b[i]), d, d, m, m);
    }
  }
};
using DQ4_0 = D32<BlockQ4_0, 8, false, qd::DecodeQ4>;
using DQ4_1 = D32<BlockQ4_1, 0, true, qd::DecodeQ4>;
using DQ5_0 = D32<BlockQ5_0, 16, false, qd::DecodeQ5>;
using DQ5_1 = D32<BlockQ5_1, 0, true, qd::DecodeQ5>;
using DQ8_0 = D32<BlockQ8_0, 128, false, qd::DecodeQ8Biased>;  // q + 128

template <class Block>
struct DScaleMin {  // Q4_K, Q5_K
  static constexpr int kZeroPoint = 0, kGroups = 1;
  static constexpr bool kHasMin = true, kSuperBlockActs = true;
  template <class Writer>
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, Writer& w) {
    const Block* b = Blocks<Block>(row);
    for (int64_t i = 0; i < n_in / kBlockK; ++i) {
      uint8_t sm[16];
      qd::UnpackScaleMinK4All(b[i].scales, sm);
      const float d = qd::HalfToFloat(b[i].d), dmin = qd::HalfToFloat(b[i].dmin);
      B32 q[8];
      qd::SlicesScaleMin(b[i], q);
      for (int k = 0; k < 8; ++k) {
        const float scale = d * sm[k], offset = -dmin * sm[8 + k];
        w.Add(q[k], scale, scale, offset, offset);
      }
    }
  }
};
using DQ4_K = DScaleMin<BlockQ4_K>;
using DQ5_K = DScaleMin<BlockQ5_K>;
struct DQ6_K {
  static constexpr int kZeroPoint = 32, kGroups = 2;
  static constexpr bool kHasMin = false, kSuperBlockActs = true;
  template <class Writer>
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, Writer& w) {
    const BlockQ6_K* b = Blocks<BlockQ6_K>(row);
    for (int64_t i = 0; i < n_in / kBlockK; ++i) {
      const float d = qd::HalfToFloat(b[i].d);
      float s[16];
      for (int g = 0; g < 16; ++g) s[g] = d * static_cast<float>(b[i].scales[g]);
      for (int h = 0; h < 2; ++h) {
        const B32 l0 = qd::Load(b[i].ql + 64 * h), l1 = qd::Load(b[i].ql + 64 * h + 32);
        const B32 hb = qd::Load(b[i].qh + 32 * h);
        const B32 q[4] = {qd::Or(qd::And(l0, 0x0F), qd::Shl<4>(qd::And(hb, 0x03))),
                          qd::Or(qd::And(l1, 0x0F), qd::Shl<2>(qd::And(hb, 0x0C))),
                          qd::Or(qd::Shr<4>(l0), qd::And(hb, 0x30)),
                          qd::Or(qd::Shr<4>(l1), qd::Shr<2>(qd::And(hb, 0xC0)))};
        for (int j = 0; j < 4; ++j) {
          const int g = 8 * h + 2 * j;
          w.Add(q[j], s[g], s[g + 1], 0, 0);
        }
      }
    }
  }
};
struct DQ3_K {
  static constexpr int kZeroPoint = 4, kGroups = 2;
  static constexpr bool kHasMin = false, kSuperBlockActs = true;
  template <class Writer>
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, Writer& w) {
    const BlockQ3_K* b = Blocks<BlockQ3_K>(row);
    for (int64_t i = 0; i < n_in / kBlockK; ++i) {
      int8_t sc[16];
      UnpackQ3KScales(b[i].scales, sc);
      const float d = qd::HalfToFloat(b[i].d);
      B32 high = qd::Load(b[i].hmask);
      for (int h = 0; h < 2; ++h) {
        B32 raw = qd::Load(b[i].qs + 32 * h);
        for (int j = 0; j < 4; ++j) {
          const int g = 8 * h + 2 * j;
          const float s0 = d * sc[g], s1 = d * sc[g + 1];
          w.Add(qd::Or(qd::And(raw, 0x03), qd::Shl<2>(qd::And(high, 0x01))), s0, s1, 0, 0);
          raw = qd::Shr<2>(raw);
          high = qd::Shr<1>(high);
        }
      }
    }
  }
};
struct DQ2_K {
  static constexpr int kZeroPoint = 0, kGroups = 2;
  static constexpr bool kHasMin = true, kSuperBlockActs = true;
  template <class Writer>
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, Writer& w) {
    const BlockQ2_K* b = Blocks<BlockQ2_K>(row);
    for (int64_t i = 0; i < n_in / kBlockK; ++i) {
      const float d = qd::HalfToFloat(b[i].d), dmin = qd::HalfToFloat(b[i].dmin);
      for (int h = 0; h < 2; ++h) {
        B32 raw = qd::Load(b[i].qs + 32 * h);
        for (int j = 0; j < 4; ++j) {
          const int g = 8 * h + 2 * j;
          const uint8_t* sc = b[i].scales;
          w.Add(qd::And(raw, 0x03), d * (sc[g] & 15), d * (sc[g + 1] & 15), -dmin * (sc[g] >> 4),
                -dmin * (sc[g + 1] >> 4));
          raw = qd::Shr<2>(raw);
        }
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// The register tile: the panel's 16 rows x T tokens, one float accumulator per token (a lane per
// row). out[t * 16 + r]. With super-block activations each super-block's sum is gathered apart
// (part) and meets its activation scale once.

template <class D, int T>
HWY_INLINE void PanelTile(const Panel& p, int64_t n_blocks, const Acts& a, int64_t t0, float* out) {
  constexpr int G = D::kGroups;
  constexpr bool kZero = D::kZeroPoint != 0, kSuper = D::kSuperBlockActs;
  constexpr int64_t kBlocksPerScale = kActBlocksPerScale<D>;
  const int8_t* xq[T];
  const float* xd[T];
  const float* xs[T];
  const int32_t* xz[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = a.q + (t0 + t) * n_blocks * 32;
    xd[t] = a.d + (t0 + t) * (n_blocks / kBlocksPerScale);
    xs[t] = a.sum + (t0 + t) * n_blocks * G;
    xz[t] = a.zero + (t0 + t) * n_blocks * G;
  }
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t j0 = 0; j0 < n_blocks; j0 += kBlocksPerScale) {
    __m512 part[T];
    if constexpr (kSuper) {
      for (int t = 0; t < T; ++t) part[t] = _mm512_setzero_ps();
    }
    for (int64_t j = j0; j < j0 + kBlocksPerScale; ++j) {
      const uint8_t* wq = p.q + j * 512;
      for (int g = 0; g < G; ++g) {
        __m512i isum[T];
        for (int t = 0; t < T; ++t) isum[t] = kZero ? _mm512_set1_epi32(xz[t][j * G + g]) : _mm512_setzero_si512();
        for (int k = g * 8 / G; k < (g + 1) * 8 / G; ++k) {
          const __m512i w = _mm512_loadu_si512(wq + 64 * k);
          for (int t = 0; t < T; ++t) isum[t] = DpbusdBroadcast(isum[t], w, xq[t] + 32 * j + 4 * k);
        }
        const __m512 scale = _mm512_loadu_ps(p.scale + (j * G + g) * kPanelRows);
        if constexpr (kSuper) {
          for (int t = 0; t < T; ++t) part[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), scale, part[t]);
        } else {
          for (int t = 0; t < T; ++t) {
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(scale, _mm512_set1_ps(xd[t][j])), acc[t]);
          }
        }
        if constexpr (D::kHasMin) {
          const __m512 offset = _mm512_loadu_ps(p.offset + (j * G + g) * kPanelRows);
          __m512* into = kSuper ? part : acc;
          for (int t = 0; t < T; ++t) into[t] = _mm512_fmadd_ps(offset, _mm512_set1_ps(xs[t][j * G + g]), into[t]);
        }
      }
    }
    if constexpr (kSuper) {
      for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(part[t], _mm512_set1_ps(xd[t][j0 / kBlocksPerScale]), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * kPanelRows, acc[t]);
}

template <class D, int T>
HWY_INLINE void Tile(const Panel& p, int64_t n_blocks, const Acts& a, int64_t t0, float* out) {
  if constexpr (SuperBlockScales<D>()) D::template Tile<T>(p, n_blocks, a, t0, out);
  else PanelTile<D, T>(p, n_blocks, a, t0, out);
}

// fill(row0, rows, panel) decodes rows [row0, row0 + rows) into the panel, kGroups scale groups per
// 32-value block; D gives kGroups, kZeroPoint and kHasMin.
template <class D, class Fill>
void Gemm(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx, const Fill& fill) {
  constexpr int G = D::kGroups;
  const int64_t n_blocks = w.n_in / kBlock32;
  Acts acts;
  acts.n_blocks = n_blocks;
  KernelScratch& scratch = ctx.scratch();
  acts.q = scratch.Get<int8_t>(0, KernelScratch::kActQ, static_cast<size_t>(n_tokens * n_blocks * 32));
  constexpr int kBlocksPerScale = kActBlocksPerScale<D>;
  const int64_t n_scales = n_blocks / kBlocksPerScale;  // activation scales per token
  acts.d = scratch.Get<float>(0, KernelScratch::kActD, static_cast<size_t>(n_tokens * n_scales));
  acts.sum = scratch.Get<float>(0, KernelScratch::kActSum, static_cast<size_t>(n_tokens * n_blocks * G));
  acts.zero = scratch.Get<int32_t>(0, KernelScratch::kActZero, static_cast<size_t>(n_tokens * n_blocks * G));
  constexpr bool kPairSums = SuperBlockScales<D>() && D::kHasMin;
  if constexpr (kPairSums) {
    const auto n_pairs = static_cast<size_t>(n_tokens * n_blocks * G / 2);
    acts.pair_sums = scratch.Get<int32_t>(0, KernelScratch::kActPairSums, n_pairs);
  }
  ctx.pool().ParallelFor(static_cast<size_t>(n_tokens), [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) {
      int8_t* q = acts.q + t * n_blocks * 32;
      float* sum = acts.sum + t * n_blocks * G;
      int32_t* zero = acts.zero + t * n_blocks * G;
      QuantizeActRow<G, kBlocksPerScale>(x + t * w.n_in, n_blocks, D::kZeroPoint, q, acts.d + t * n_scales, sum, zero);
      if constexpr (kPairSums) {
        // A min's term is an integer: the groups' sums of x_q, exact in the float sums (|sum| < 2^13).
        int32_t* group_sums = zero;  // Q2_K, Q4_K and Q5_K have no zero point: the slots are free for the sums
        for (int64_t j = 0; j < n_blocks * G; ++j) group_sums[j] = static_cast<int32_t>(sum[j]);
        PairSums(group_sums, n_blocks * G, acts.pair_sums + t * n_blocks * G / 2);
      }
    }
  });
  const int64_t n_panels = (w.n_out + kPanelRows - 1) / kPanelRows;
  // Panels are taken one at a time: a thread that the OS time-slices away holds up no one.
  ctx.pool().ParallelForDynamic(static_cast<size_t>(n_panels), 1, [&](size_t begin, size_t end, int thread) {
    Panel p;
    p.q = scratch.Get<uint8_t>(thread, KernelScratch::kPanelQ, static_cast<size_t>(n_blocks * 512));
    p.scale = scratch.Get<float>(thread, KernelScratch::kPanelScale, static_cast<size_t>(n_blocks * G * kPanelRows));
    p.offset = scratch.Get<float>(thread, KernelScratch::kPanelOffset, static_cast<size_t>(n_blocks * G * kPanelRows));
    alignas(64) float out[kTileTokens * kPanelRows];
    for (size_t panel = begin; panel < end; ++panel) {
      const int64_t row0 = static_cast<int64_t>(panel) * kPanelRows;
      const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, w.n_out - row0));
      if (rows < kPanelRows) {  // the missing rows' lanes compute zeros
        std::memset(p.q, 0, static_cast<size_t>(n_blocks * 512));
        std::fill_n(p.scale, n_blocks * G * kPanelRows, 0.0f);
        std::fill_n(p.offset, n_blocks * G * kPanelRows, 0.0f);
      }
      fill(row0, rows, p);
      const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
      for (int64_t t0 = 0; t0 < n_tokens;) {
        const int64_t left = n_tokens - t0;
        const int nt = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        switch (nt) {
          case 8: Tile<D, 8>(p, n_blocks, acts, t0, out); break;
          case 4: Tile<D, 4>(p, n_blocks, acts, t0, out); break;
          case 2: Tile<D, 2>(p, n_blocks, acts, t0, out); break;
          default: Tile<D, 1>(p, n_blocks, acts, t0, out); break;
        }
        for (int t = 0; t < nt; ++t) {
          _mm512_mask_storeu_ps(y + (t0 + t) * w.n_out + row0, valid, _mm512_load_ps(out + t * kPanelRows));
        }
        t0 += nt;
      }
    }
  });
}
static_assert(kTileTokens == 8, "Gemm's switch lists the tile sizes");

// The GEMM over rows as stored: panels filled by the type's row decoder.
template <class D>
void Gemm(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  Gemm<D>(w, x, n_tokens, y, ctx, [&](int64_t row0, int rows, const Panel& p) {
    for (int r = 0; r < rows; ++r) {
      PanelRowWriter<D::kGroups> writer(p, r);
      D::DecodeRow(w.Row(row0 + r), w.n_in, writer);
    }
  });
}

}  // namespace vnni
// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace gemlet
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // include guard

// Prefill GEMM for quantized weights on AVX-512 VNNI (the AVX3_DL target): rows are decoded once
// into a panel of unsigned bytes with per-4-byte float scales, activations are quantized once per
// call, and a 4x4 register tile of (rows x tokens) runs vpdpbusd over 64 bytes per instruction.
// Other targets use the per-row tiles of quant_dot-inl.h. Included by matmul_simd.cc.
//
// Every weight type becomes the same thing: w_i = scale_g * (q_i - z) + offset_g with q_i an unsigned
// byte, z the type's integer zero point (Q4_0 8, Q5_0 16, Q8_0 128 for q + 128, Q6_K 32, Q3_K 4; 0
// for the types with a float min) and g the 16-value group of i. Then
//   sum_i w_i x_i = sum over 4-byte lanes of scale * d_x * (dpbusd(q, x_q) - z * lanesum(x_q))
//                   + sum_g offset_g * xsum_g
// where x ~= d_x * x_q per block of 32 and xsum_g = d_x * sum of x_q over group g. The zero point is
// taken off in integers (dpbusd starts from -z * lanesum): as a float offset it would be a large
// term that cancels (128x the result for Q8_0) and rounding would move the result visibly. The
// scale term is the GEMM; the offset term (mins) is a short float dot product per (row, token).
//
// Layout: a pair of 32-value blocks (a, b) is one 512-bit vector, their 4-byte groups interleaved
// (a0 b0 a1 b1 ... per 128-bit half, from unpacklo/hi_epi32), weights and activations alike, so the
// per-lane activation scale is [d_a, d_b, d_a, d_b, ...]: one vbroadcastf32x2.
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

// The pair interleave, for bytes (as dwords) and for float lanes.
HWY_INLINE __m512i Interleave(__m256i a, __m256i b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi32(a, b)), _mm256_unpackhi_epi32(a, b), 1);
}
HWY_INLINE __m512 Interleave(__m256 a, __m256 b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_unpacklo_ps(a, b)), _mm256_unpackhi_ps(a, b), 1);
}

// Activations of n_tokens rows, quantized per 32 values, in pair layout.
struct Acts {
  int64_t n_pairs = 0;
  int8_t* q = nullptr;    // [token][n_pairs * 64]
  float* d = nullptr;     // [token][n_pairs * 2]: d_a, d_b
  float* sum = nullptr;   // [token][n_pairs * 4]: d * sum of q per 16 values, natural order
  int32_t* zero = nullptr;  // [token][n_pairs * 16]: -z * sum of q per 4-byte lane, pair layout
};

// One block of 32 floats (n_valid < 32 pads with zeros) -> 32 bytes, its scale and two 16-sums.
HWY_INLINE __m256i QuantizeBlock(const float* x, int n_valid, float* d, float* sum) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  if (n_valid >= 32) {
    lo = _mm512_loadu_ps(x);
    hi = _mm512_loadu_ps(x + 16);
  }
  const __m512 amax_v = _mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi));
  const float amax = _mm512_reduce_max_ps(amax_v);
  *d = ActScale(amax);
  const __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
  const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, id));  // round to nearest even
  const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, id));
  sum[0] = *d * static_cast<float>(_mm512_reduce_add_epi32(qlo));
  sum[1] = *d * static_cast<float>(_mm512_reduce_add_epi32(qhi));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtsepi32_epi8(qlo)), _mm512_cvtsepi32_epi8(qhi), 1);
}

void QuantizeActRow(const float* x, int64_t n_in, int64_t n_pairs, int zero_point, int8_t* q, float* d, float* sum,
                    int32_t* zero) {
  const __m512i ones = _mm512_set1_epi8(1), minus_z = _mm512_set1_epi32(-zero_point);
  for (int64_t j = 0; j < n_pairs; ++j) {
    const int64_t a = 64 * j, b = a + 32;
    const __m256i qa = QuantizeBlock(x + a, a < n_in ? 32 : 0, d + 2 * j, sum + 4 * j);
    const __m256i qb = QuantizeBlock(x + b, b < n_in ? 32 : 0, d + 2 * j + 1, sum + 4 * j + 2);
    const __m512i pair = Interleave(qa, qb);
    _mm512_storeu_si512(q + 64 * j, pair);
    const __m512i lanesum = qd::DpbusdEvex(_mm512_setzero_si512(), ones, pair);
    _mm512_storeu_si512(zero + 16 * j, _mm512_mullo_epi32(lanesum, minus_z));
  }
}

// A panel of decoded rows.
struct Panel {
  int64_t n_pairs = 0;
  uint8_t* q = nullptr;     // [row][n_pairs * 64]
  float* scale = nullptr;   // [row][n_pairs * 16]: per 4-byte lane, pair layout
  float* offset = nullptr;  // [row][n_pairs * 4]: per 16 values, natural order
};

// Receives a row's 32-value slices in order and writes them to a panel row in pair layout.
class PanelRowWriter {
 public:
  PanelRowWriter(uint8_t* q, float* scale, float* offset) : q_(q), scale_(scale), offset_(offset) {}
  HWY_INLINE void Add(const B32& q, float s0, float s1, float o0, float o1) {
    if (!have_a_) {
      qa_ = q.p[0].raw;
      sa_ = Scales(s0, s1);
      oa_[0] = o0;
      oa_[1] = o1;
      have_a_ = true;
      return;
    }
    _mm512_storeu_si512(q_, Interleave(qa_, q.p[0].raw));
    _mm512_storeu_ps(scale_, Interleave(sa_, Scales(s0, s1)));
    offset_[0] = oa_[0];
    offset_[1] = oa_[1];
    offset_[2] = o0;
    offset_[3] = o1;
    q_ += 64;
    scale_ += 16;
    offset_ += 4;
    have_a_ = false;
  }
  // An odd slice count pairs the last slice with zeros.
  HWY_INLINE void Finish() {
    if (have_a_) {
      B32 zero;
      zero.p[0] = qd::VU8{_mm256_setzero_si256()};
      Add(zero, 0.0f, 0.0f, 0.0f, 0.0f);
    }
  }

 private:
  static HWY_INLINE __m256 Scales(float s0, float s1) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(s0)), _mm_set1_ps(s1), 1);
  }
  uint8_t* q_;
  float* scale_;
  float* offset_;
  __m256i qa_;
  __m256 sa_;
  float oa_[2];
  bool have_a_ = false;
};

// ---------------------------------------------------------------------------------------------
// Per type: DecodeRow(row, n_in, writer) emits every 32-value slice with its two 16-group scales
// and offsets (w = scale * q + offset).

template <class Block>
HWY_INLINE const Block* Blocks(const uint8_t* row) {
  return reinterpret_cast<const Block*>(row);
}

// The 32-value types, with the GEMV tiles' decoders (quant_dot-inl.h): w = d * (q - kZero), or
// d * q + m for the types with a min.
template <class Block, int kZero, bool kMin, class Decode>
struct D32 {
  static constexpr int kZeroPoint = kZero;
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, PanelRowWriter& w) {
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
  static constexpr int kZeroPoint = 0;
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, PanelRowWriter& w) {
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
  static constexpr int kZeroPoint = 32;
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, PanelRowWriter& w) {
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
  static constexpr int kZeroPoint = 4;
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, PanelRowWriter& w) {
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
  static constexpr int kZeroPoint = 0;
  static HWY_INLINE void DecodeRow(const uint8_t* row, int64_t n_in, PanelRowWriter& w) {
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
// The register tile: R panel rows x T tokens; out[r * T + t].

// kZero: the type has an integer zero point (and no float offsets).
template <bool kZero, int R, int T>
HWY_INLINE void MicroKernel(const Panel& p, int r0, const Acts& a, int64_t t0, float* out) {
  const int64_t np = p.n_pairs;
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const uint8_t* wq[R];
  const float* ws[R];
  for (int r = 0; r < R; ++r) {
    wq[r] = p.q + (r0 + r) * np * 64;
    ws[r] = p.scale + (r0 + r) * np * 16;
  }
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* xz[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = a.q + (t0 + t) * np * 64;
    xd[t] = a.d + (t0 + t) * np * 2;
    xz[t] = a.zero + (t0 + t) * np * 16;
  }
  for (int64_t j = 0; j < np; ++j) {
    __m512i w[R];
    __m512 s[R];
    for (int r = 0; r < R; ++r) {
      w[r] = _mm512_loadu_si512(wq[r] + 64 * j);
      s[r] = _mm512_loadu_ps(ws[r] + 16 * j);
    }
    for (int t = 0; t < T; ++t) {
      const __m512i x = _mm512_loadu_si512(xq[t] + 64 * j);
      const __m512 d = _mm512_broadcast_f32x2(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(xd[t] + 2 * j))));
      const __m512i start = kZero ? _mm512_loadu_si512(xz[t] + 16 * j) : _mm512_setzero_si512();
      for (int r = 0; r < R; ++r) {
        const __m512 isum = _mm512_cvtepi32_ps(qd::DpbusdEvex(start, w[r], x));
        acc[r][t] = _mm512_fmadd_ps(isum, _mm512_mul_ps(s[r], d), acc[r][t]);
      }
    }
    if constexpr (!kZero) {
      // The offsets, sum_g offset[r][g] * xsum[t][g] (4 groups per pair), go into the same
      // accumulators every 4 pairs: their lanes are summed at the end anyway.
      if (j % 4 == 3) {
        const int64_t g = (j - 3) * 4;
        __m512 wo[R];
        for (int r = 0; r < R; ++r) wo[r] = _mm512_loadu_ps(p.offset + (r0 + r) * np * 4 + g);
        for (int t = 0; t < T; ++t) {
          const __m512 xs = _mm512_loadu_ps(a.sum + (t0 + t) * np * 4 + g);
          for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wo[r], xs, acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float tail = 0.0f;
      if constexpr (!kZero) {  // the groups of the last np % 4 pairs
        const float* wo = p.offset + (r0 + r) * np * 4;
        const float* xs = a.sum + (t0 + t) * np * 4;
        for (int64_t g = np / 4 * 16; g < np * 4; ++g) tail += wo[g] * xs[g];
      }
      out[r * T + t] = _mm512_reduce_add_ps(acc[r][t]) + tail;
    }
  }
}

template <bool kZero, int R>
HWY_INLINE void MicroKernelRows(const Panel& p, int r0, const Acts& a, int64_t t0, int nt, float* out) {
  switch (nt) {
    case 4: return MicroKernel<kZero, R, 4>(p, r0, a, t0, out);
    case 3: return MicroKernel<kZero, R, 3>(p, r0, a, t0, out);
    case 2: return MicroKernel<kZero, R, 2>(p, r0, a, t0, out);
    default: return MicroKernel<kZero, R, 1>(p, r0, a, t0, out);
  }
}

// GEMLET_VNNI_GEMM=0 falls back to the per-row tiles of quant_dot-inl.h (A/B measurements only).
inline bool Enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("GEMLET_VNNI_GEMM");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return enabled;
}

constexpr int kPanelRows = 16;  // rows decoded per panel (4 register tiles of 4)
constexpr int kTileRows = 4, kTileTokens = 4;

// Thread-local buffers that grow to the largest size seen: no allocation in steady state.
template <class T>
T* Scratch(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

template <class D>
void Gemm(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const int64_t n_pairs = (w.n_in + 63) / 64;
  Acts acts;
  acts.n_pairs = n_pairs;
  {
    thread_local std::vector<int8_t> q;
    thread_local std::vector<float> d, sum;
    thread_local std::vector<int32_t> zero;
    acts.q = Scratch(q, static_cast<size_t>(n_tokens * n_pairs * 64));
    acts.d = Scratch(d, static_cast<size_t>(n_tokens * n_pairs * 2));
    acts.sum = Scratch(sum, static_cast<size_t>(n_tokens * n_pairs * 4));
    acts.zero = Scratch(zero, static_cast<size_t>(n_tokens * n_pairs * 16));
  }
  pool.ParallelFor(static_cast<size_t>(n_tokens), [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) {
      QuantizeActRow(x + t * w.n_in, w.n_in, n_pairs, D::kZeroPoint, acts.q + t * n_pairs * 64,
                     acts.d + t * n_pairs * 2, acts.sum + t * n_pairs * 4, acts.zero + t * n_pairs * 16);
    }
  });
  constexpr bool kZero = D::kZeroPoint != 0;
  const int64_t n_panels = (w.n_out + kPanelRows - 1) / kPanelRows;
  // Panels are taken one at a time: a thread that the OS time-slices away holds up no one.
  pool.ParallelForDynamic(static_cast<size_t>(n_panels), 1, [&](size_t begin, size_t end, int) {
    thread_local std::vector<uint8_t> pq;
    thread_local std::vector<float> ps, po;
    Panel p;
    p.n_pairs = n_pairs;
    p.q = Scratch(pq, static_cast<size_t>(kPanelRows * n_pairs * 64));
    p.scale = Scratch(ps, static_cast<size_t>(kPanelRows * n_pairs * 16));
    p.offset = Scratch(po, static_cast<size_t>(kPanelRows * n_pairs * 4));
    float out[kTileRows * kTileTokens];
    for (size_t panel = begin; panel < end; ++panel) {
      const int64_t row0 = static_cast<int64_t>(panel) * kPanelRows;
      const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, w.n_out - row0));
      for (int r = 0; r < rows; ++r) {
        PanelRowWriter writer(p.q + r * n_pairs * 64, p.scale + r * n_pairs * 16, p.offset + r * n_pairs * 4);
        D::DecodeRow(w.Row(row0 + r), w.n_in, writer);
        writer.Finish();
      }
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
        for (int r0 = 0; r0 < rows; r0 += kTileRows) {
          const int nr = std::min(kTileRows, rows - r0);
          switch (nr) {
            case 4: MicroKernelRows<kZero, 4>(p, r0, acts, t0, nt, out); break;
            case 3: MicroKernelRows<kZero, 3>(p, r0, acts, t0, nt, out); break;
            case 2: MicroKernelRows<kZero, 2>(p, r0, acts, t0, nt, out); break;
            default: MicroKernelRows<kZero, 1>(p, r0, acts, t0, nt, out); break;
          }
          for (int r = 0; r < nr; ++r) {
            for (int t = 0; t < nt; ++t) y[(t0 + t) * w.n_out + row0 + r0 + r] = out[r * nt + t];
          }
        }
      }
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

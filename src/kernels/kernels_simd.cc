// Highway SIMD element-wise kernels (norms, activations, softmax, attention dots), one source compiled
// for every CPU target, and the per-target KernelTable that the dispatcher picks from at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kernels_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "base/half.h"
#include "kernels/kernel_table.h"
#include "tensor/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace gemlet {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Defined per target in matmul_simd.cc.
void MatMulSimd(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx);
void PrepareMatMulSimd(const WeightMatrix& w, KernelContext& ctx);
void TowerMatMulSimd(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, const TowerClamp* clamp,
                     KernelContext& ctx);
const PackedLayout* PackedLayoutSimd(DType type);
void MatMulExpertsSimd(const WeightMatrix* w, int n, const float* x, bool one_input, float* y, KernelContext& ctx);
#if HWY_TARGET == HWY_AVX2
void MatMulSimdVnni(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx);
void MatMulExpertsSimdVnni(const WeightMatrix* w, int n, const float* x, bool one_input, float* y,
                           KernelContext& ctx);
#endif

namespace {
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

HWY_INLINE float ReduceSum(DF d, VF v) { return hn::GetLane(hn::SumOfLanes(d, v)); }

// f16 lanes from memory as floats (F16C on x86, fcvtl on NEON).
HWY_INLINE VF LoadF16(DF df, const uint16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

// Attention rows are f32 (the batch's new keys/values, an f32 cache), f16 (the default cache) or
// Q8_0 or Q4_0 blocks (the compact caches). LoadRow reads the lanes from value i of a row on: a
// vector's lanes divide 16, so it never straddles two blocks, nor a Q4_0 block's two nibble halves.
HWY_INLINE VF LoadRow(DF d, const float* row, int64_t i) { return hn::LoadU(d, row + i); }
HWY_INLINE VF LoadRow(DF d, const uint16_t* row, int64_t i) { return LoadF16(d, row + i); }
HWY_INLINE VF LoadRow(DF d, const BlockQ8_0* row, int64_t i) {
  const BlockQ8_0& b = row[i / kBlock32];
  const hn::Rebind<int8_t, DF> d8;
  const hn::Rebind<int32_t, DF> d32;
  const VF levels = hn::ConvertTo(d, hn::PromoteTo(d32, hn::LoadU(d8, b.qs + i % kBlock32)));
  return hn::Mul(levels, hn::Set(d, F16ToF32(b.d)));
}
// Q4_0: value j of a block in the low nibble of byte j, value j + 16 in its high nibble, offset 8.
HWY_INLINE VF LoadRow(DF d, const BlockQ4_0* row, int64_t i) {
  const BlockQ4_0& b = row[i / kBlock32];
  const int64_t j = i % kBlock32;
  const hn::Rebind<uint8_t, DF> d8;
  const hn::Rebind<int32_t, DF> d32;
  const auto bytes = hn::PromoteTo(d32, hn::LoadU(d8, b.qs + (j & 15)));
  const auto nibbles = j < 16 ? hn::And(bytes, hn::Set(d32, 0x0F)) : hn::ShiftRight<4>(bytes);
  return hn::Mul(hn::ConvertTo(d, hn::Sub(nibbles, hn::Set(d32, 8))), hn::Set(d, F16ToF32(b.d)));
}
HWY_INLINE float RowValue(const float* row, int64_t i) { return row[i]; }
HWY_INLINE float RowValue(const uint16_t* row, int64_t i) { return F16ToF32(row[i]); }
HWY_INLINE float RowValue(const BlockQ8_0* row, int64_t i) {
  const BlockQ8_0& b = row[i / kBlock32];
  return static_cast<float>(b.qs[i % kBlock32]) * F16ToF32(b.d);
}
HWY_INLINE float RowValue(const BlockQ4_0* row, int64_t i) {
  const BlockQ4_0& b = row[i / kBlock32];
  const int j = static_cast<int>(i % kBlock32);
  return static_cast<float>((j < 16 ? b.qs[j] & 0x0F : b.qs[j - 16] >> 4) - 8) * F16ToF32(b.d);
}

// Where value i of a row lies in memory, for prefetching.
HWY_INLINE const void* ValueAddress(const float* row, int64_t i) { return row + i; }
HWY_INLINE const void* ValueAddress(const uint16_t* row, int64_t i) { return row + i; }
HWY_INLINE const void* ValueAddress(const BlockQ8_0* row, int64_t i) { return row + i / kBlock32; }
HWY_INLINE const void* ValueAddress(const BlockQ4_0* row, int64_t i) { return row + i / kBlock32; }
// The lines of values [from, to) of a row.
template <class T>
HWY_INLINE void PrefetchValues(const T* row, int64_t from, int64_t to) {
  const auto* begin = static_cast<const uint8_t*>(ValueAddress(row, from));
  const auto* last = static_cast<const uint8_t*>(ValueAddress(row, to - 1));
  for (const uint8_t* line = begin; line <= last + 63; line += 64) hwy::Prefetch(line);
}

// A cache's rows of one KV head lie n_kv_heads * head_dim values apart (4 KiB for Gemma 3 12B's
// f16 keys): each a few lines on a page of its own, a pattern the hardware prefetchers do not
// follow, so the row kernels ask for the rows they will read this many rows ahead. From DRAM a
// decode step's 4,096 keys were read at 3-5 GB/s on a Zen 3 core without.
constexpr int64_t kRowsAhead = 8;

// Tails shorter than a vector are done in scalar code: masked loads are not fault-safe everywhere.
// Explicit fma: left to the compiler, a tile of several queries or rows was vectorised across them
// with other contractions than a tile of one, and a score depended on its tile in the last bit.
template <class T>
HWY_INLINE float DotTail(const float* q, const T* row, int64_t from, int64_t n) {
  float sum = 0;
  for (int64_t i = from; i < n; ++i) sum = std::fma(q[i], RowValue(row, i), sum);
  return sum;
}

// Attention of a group of queries that share their keys and values (grouped-query attention): each
// row is loaded (and converted from f16) once for the whole tile of queries.
//
// Scores of QT queries against KT rows: one accumulator per pair, so every score is summed in the
// same order whatever tile computed it (prefill in chunks equals prefill at once).
template <int QT, int KT, class T>
HWY_INLINE void DotTile(const float* q, size_t q_stride, const T* rows, size_t stride, int64_t n, float* out,
                        size_t out_stride) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t nv = n / N * N;
  VF acc[QT][KT];
  for (int a = 0; a < QT; ++a) {
    for (int k = 0; k < KT; ++k) acc[a][k] = hn::Zero(d);
  }
  for (int64_t i = 0; i < nv; i += N) {
    VF row[KT];
    for (int k = 0; k < KT; ++k) row[k] = LoadRow(d, rows + k * stride, i);
    for (int a = 0; a < QT; ++a) {
      const VF x = hn::LoadU(d, q + a * q_stride + i);
      for (int k = 0; k < KT; ++k) acc[a][k] = hn::MulAdd(x, row[k], acc[a][k]);
    }
  }
  for (int a = 0; a < QT; ++a) {
    for (int k = 0; k < KT; ++k) {
      out[a * out_stride + k] = ReduceSum(d, acc[a][k]) + DotTail(q + a * q_stride, rows + k * stride, nv, n);
    }
  }
}

template <int QT, int KT, class T>
HWY_INLINE void DotRowsForQueries(const float* q, size_t q_stride, const T* rows, size_t stride, int64_t n_rows,
                                  int64_t n, float* out, size_t out_stride) {
  int64_t j = 0;
  for (; j + KT <= n_rows; j += KT) {
    for (int64_t k = j + kRowsAhead; k < std::min(n_rows, j + kRowsAhead + KT); ++k) PrefetchValues(rows + k * stride, 0, n);
    DotTile<QT, KT>(q, q_stride, rows + j * stride, stride, n, out + j, out_stride);
  }
  for (; j < n_rows; ++j) DotTile<QT, 1>(q, q_stride, rows + j * stride, stride, n, out + j, out_stride);
}

// Targets with 32 vector registers hold an 8 x 2 tile (16 accumulators): each row is converted once
// for 8 queries (Gemma 4 E2B's group) instead of twice. AVX2's 16 registers would spill it.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_NEON
constexpr bool kTilesOf8 = true;
#else
constexpr bool kTilesOf8 = false;
#endif

// out[a * out_stride + j] = query a . row j, for n_q queries q_stride apart.
template <class T>
void DotRows(const float* q, size_t q_stride, int n_q, const T* rows, size_t stride, int64_t n_rows, int64_t n,
             float* out, size_t out_stride) {
  int a = 0;
  if constexpr (kTilesOf8) {
    for (; a + 8 <= n_q; a += 8) {
      DotRowsForQueries<8, 2>(q + a * q_stride, q_stride, rows, stride, n_rows, n, out + a * out_stride, out_stride);
    }
  }
  for (; a + 4 <= n_q; a += 4) {
    DotRowsForQueries<4, 2>(q + a * q_stride, q_stride, rows, stride, n_rows, n, out + a * out_stride, out_stride);
  }
  // Pairs (Gemma 2 and 3 from 2B up have two query heads per KV head): each row converted once for
  // both, and 8 chains where a query alone has 4, too few to hide the FMA's latency.
  for (; a + 2 <= n_q; a += 2) {
    DotRowsForQueries<2, 4>(q + a * q_stride, q_stride, rows, stride, n_rows, n, out + a * out_stride, out_stride);
  }
  for (; a < n_q; ++a) {
    DotRowsForQueries<1, 4>(q + a * q_stride, q_stride, rows, stride, n_rows, n, out + a * out_stride, out_stride);
  }
}

// y_a += sum_j p_a[j] * row j for QT outputs, VT vectors of each kept in registers while the rows
// stream past (an axpy per row would load and store y once per row). Every element sums the rows
// in order, whatever the tile. Values col.. of the rows, into y[col..].
template <int QT, int VT, class T>
HWY_INLINE void WeightedSumTile(const float* p, size_t p_stride, const T* rows, size_t stride, int64_t n_rows,
                                int64_t col, float* y, size_t y_stride, const T* next_rows, int64_t n_next) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc[QT][VT];
  for (int a = 0; a < QT; ++a) {
    for (int v = 0; v < VT; ++v) acc[a][v] = hn::LoadU(d, y + a * y_stride + col + v * N);
  }
  for (int64_t j = 0; j < n_rows; ++j) {
    if (j < n_next) PrefetchValues(next_rows + j * stride, col, col + VT * N);
    VF row[VT];
    for (int v = 0; v < VT; ++v) row[v] = LoadRow(d, rows + j * stride, col + v * N);
    for (int a = 0; a < QT; ++a) {
      const VF w = hn::Set(d, p[a * p_stride + j]);
      for (int v = 0; v < VT; ++v) acc[a][v] = hn::MulAdd(w, row[v], acc[a][v]);
    }
  }
  for (int a = 0; a < QT; ++a) {
    for (int v = 0; v < VT; ++v) hn::StoreU(acc[a][v], d, y + a * y_stride + col + v * N);
  }
}

// Rows per pass of WeightedSumForOutputs: a block's rows stay in the L1/L2 caches while each column
// tile passes over them (a pass over all of a decode step's 4,096 rows per tile read them from
// DRAM a line at a time, once per tile), and each tile prefetches its columns of the next block.
constexpr int64_t kWeightedSumRowBlock = 64;

template <int QT, int VT, class T>
HWY_INLINE void WeightedSumForOutputs(const float* p, size_t p_stride, const T* rows, size_t stride, int64_t n_rows,
                                      int64_t n, float* y, size_t y_stride) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // Blocks of rows in order, each adding to y what the tiles kept in registers: every element still
  // sums the rows in order, one multiply-add each, the same bits as one pass over all the rows.
  for (int64_t j0 = 0; j0 < n_rows; j0 += kWeightedSumRowBlock) {
    const int64_t rows_here = std::min(kWeightedSumRowBlock, n_rows - j0);
    const int64_t n_next = std::min(kWeightedSumRowBlock, n_rows - j0 - rows_here);
    const float* pj = p + j0;
    const T* block = rows + j0 * stride;
    const T* next = block + rows_here * stride;
    int64_t i = 0;
    for (; i + VT * N <= n; i += VT * N) {
      WeightedSumTile<QT, VT>(pj, p_stride, block, stride, rows_here, i, y, y_stride, next, n_next);
    }
    for (; i + N <= n; i += N) WeightedSumTile<QT, 1>(pj, p_stride, block, stride, rows_here, i, y, y_stride, next, n_next);
    for (; i < n; ++i) {
      for (int a = 0; a < QT; ++a) {
        float sum = y[a * y_stride + i];
        for (int64_t j = 0; j < rows_here; ++j) {
          sum = std::fma(pj[a * p_stride + j], RowValue(block + j * stride, i), sum);  // see DotTail
        }
        y[a * y_stride + i] = sum;
      }
    }
  }
}

// y_a += sum_j p_a[j] * row j for n_p weight rows p_stride apart and outputs y_stride apart.
template <class T>
void WeightedSum(const float* p, size_t p_stride, int n_p, const T* rows, size_t stride, int64_t n_rows, int64_t n,
                 float* y, size_t y_stride) {
  int a = 0;
  if constexpr (kTilesOf8) {
    for (; a + 8 <= n_p; a += 8) {
      WeightedSumForOutputs<8, 2>(p + a * p_stride, p_stride, rows, stride, n_rows, n, y + a * y_stride, y_stride);
    }
  }
  for (; a + 4 <= n_p; a += 4) {
    WeightedSumForOutputs<4, 2>(p + a * p_stride, p_stride, rows, stride, n_rows, n, y + a * y_stride, y_stride);
  }
  for (; a + 2 <= n_p; a += 2) {  // pairs, as DotRows
    WeightedSumForOutputs<2, 4>(p + a * p_stride, p_stride, rows, stride, n_rows, n, y + a * y_stride, y_stride);
  }
  for (; a < n_p; ++a) {
    WeightedSumForOutputs<1, 4>(p + a * p_stride, p_stride, rows, stride, n_rows, n, y + a * y_stride, y_stride);
  }
}

void DotRowsF32(const float* q, size_t q_stride, int n_q, const float* rows, size_t stride, int64_t n_rows, int64_t n,
                float* out, size_t out_stride) {
  DotRows(q, q_stride, n_q, rows, stride, n_rows, n, out, out_stride);
}
void DotRowsF16(const float* q, size_t q_stride, int n_q, const uint16_t* rows, size_t stride, int64_t n_rows,
                int64_t n, float* out, size_t out_stride) {
  DotRows(q, q_stride, n_q, rows, stride, n_rows, n, out, out_stride);
}
void WeightedSumF32(const float* p, size_t p_stride, int n_p, const float* rows, size_t stride, int64_t n_rows,
                    int64_t n, float* y, size_t y_stride) {
  WeightedSum(p, p_stride, n_p, rows, stride, n_rows, n, y, y_stride);
}
void WeightedSumF16(const float* p, size_t p_stride, int n_p, const uint16_t* rows, size_t stride, int64_t n_rows,
                    int64_t n, float* y, size_t y_stride) {
  WeightedSum(p, p_stride, n_p, rows, stride, n_rows, n, y, y_stride);
}
void DotRowsQ8_0(const float* q, size_t q_stride, int n_q, const BlockQ8_0* rows, size_t stride, int64_t n_rows,
                 int64_t n, float* out, size_t out_stride) {
  DotRows(q, q_stride, n_q, rows, stride, n_rows, n, out, out_stride);
}
void WeightedSumQ8_0(const float* p, size_t p_stride, int n_p, const BlockQ8_0* rows, size_t stride, int64_t n_rows,
                     int64_t n, float* y, size_t y_stride) {
  WeightedSum(p, p_stride, n_p, rows, stride, n_rows, n, y, y_stride);
}
void DotRowsQ4_0(const float* q, size_t q_stride, int n_q, const BlockQ4_0* rows, size_t stride, int64_t n_rows,
                 int64_t n, float* out, size_t out_stride) {
  DotRows(q, q_stride, n_q, rows, stride, n_rows, n, out, out_stride);
}
void WeightedSumQ4_0(const float* p, size_t p_stride, int n_p, const BlockQ4_0* rows, size_t stride, int64_t n_rows,
                     int64_t n, float* y, size_t y_stride) {
  WeightedSum(p, p_stride, n_p, rows, stride, n_rows, n, y, y_stride);
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // Squares are positive, so float partial sums in four lanes-wide accumulators lose only
  // ~n/(4N) ulps; the reference's double sum is the exact value they are tested against.
  VF s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const VF a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + N);
    const VF c = hn::LoadU(d, x + i + 2 * N), e = hn::LoadU(d, x + i + 3 * N);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
    s2 = hn::MulAdd(c, c, s2);
    s3 = hn::MulAdd(e, e, s3);
  }
  for (; i + N <= n; i += N) {
    const VF a = hn::LoadU(d, x + i);
    s0 = hn::MulAdd(a, a, s0);
  }
  double sum_sq = ReduceSum(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
  for (; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum_sq / static_cast<double>(n)) + eps);
  const VF vinv = hn::Set(d, inv);
  i = 0;
  if (w != nullptr) {
    for (; i + N <= n; i += N) {
      hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), vinv), hn::LoadU(d, w + i)), d, out + i);
    }
    for (; i < n; ++i) out[i] = x[i] * inv * w[i];
  } else {
    for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vinv), d, out + i);
    for (; i < n; ++i) out[i] = x[i] * inv;
  }
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), written as the reference writes it; Highway's
// Tanh is within 4 ulp of std::tanh.
HWY_INLINE VF GeluTanhV(DF d, VF x) {
  const VF k = hn::Set(d, 0.7978845608028654f);
  const VF c = hn::Set(d, 0.044715f);
  const VF half = hn::Set(d, 0.5f);
  const VF one = hn::Set(d, 1.0f);
  const VF inner = hn::Mul(k, hn::Add(x, hn::Mul(hn::Mul(hn::Mul(c, x), x), x)));
  return hn::Mul(hn::Mul(half, x), hn::Add(one, hn::Tanh(d, inner)));
}

void GeluTanhMul(float* gate, const float* up, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(GeluTanhV(d, hn::LoadU(d, gate + i)), hn::LoadU(d, up + i)), d, gate + i);
  }
  for (; i < n; ++i) gate[i] = GeluTanh(gate[i]) * up[i];
}

void GeluTanhInPlace(float* x, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(GeluTanhV(d, hn::LoadU(d, x + i)), d, x + i);
  for (; i < n; ++i) x[i] = GeluTanh(x[i]);
}

// 1 / (1 + exp(-x)) as the reference writes it (Highway's Exp is within 1 ulp of std::exp); past
// its valid range (-x above 104) exp(-x) is infinite, as std::exp's float result is.
HWY_INLINE VF SigmoidV(DF d, VF x) {
  const VF one = hn::Set(d, 1.0f);
  const VF e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 104.0f)));
  return hn::Div(one, hn::Add(one, e));
}

void SiluInPlace(float* x, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF one = hn::Set(d, 1.0f);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::LoadU(d, x + i);
    hn::StoreU(hn::Div(v, hn::Add(one, hn::Exp(d, hn::Min(hn::Neg(v), hn::Set(d, 104.0f))))), d, x + i);
  }
  for (; i < n; ++i) x[i] = Silu(x[i]);
}

void SigmoidMul(const float* a, const float* b, float* out, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, a + i), SigmoidV(d, hn::LoadU(d, b + i))), d, out + i);
  for (; i < n; ++i) out[i] = a[i] * Sigmoid(b[i]);
}

// The sums in float lanes (the reference sums in double): within float rounding of it.
void LayerNorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc = hn::Zero(d);
  int64_t i = 0;
  for (; i + N <= n; i += N) acc = hn::Add(acc, hn::LoadU(d, x + i));
  float sum = ReduceSum(d, acc);
  for (; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  const VF vmean = hn::Set(d, mean);
  VF acc_sq = hn::Zero(d);
  for (i = 0; i + N <= n; i += N) {
    const VF c = hn::Sub(hn::LoadU(d, x + i), vmean);
    acc_sq = hn::MulAdd(c, c, acc_sq);
  }
  float sum_sq = ReduceSum(d, acc_sq);
  for (; i < n; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  const VF vinv = hn::Set(d, inv);
  for (i = 0; i + N <= n; i += N) {
    const VF y = hn::Mul(hn::Mul(hn::Sub(hn::LoadU(d, x + i), vmean), vinv), hn::LoadU(d, w + i));
    hn::StoreU(b ? hn::Add(y, hn::LoadU(d, b + i)) : y, d, out + i);
  }
  for (; i < n; ++i) out[i] = (x[i] - mean) * inv * w[i] + (b ? b[i] : 0.0f);
}

// Angles and their sin/cos stay scalar (as in the reference, so positions far into the context
// rotate identically); the rotation of every head is vectorised over the pair index.
void RopeRotateHalf(float* x, int n_heads, int head_dim, const float* inv_freq, int64_t pos) {
  const DF d;
  const int N = static_cast<int>(hn::Lanes(d));
  const int half = head_dim / 2;
  const float p = static_cast<float>(pos);
  constexpr int kMaxHalf = 2048;  // head_dim <= 4096 (model config checks)
  HWY_ALIGN float cos_buf[kMaxHalf], sin_buf[kMaxHalf];
  for (int i = 0; i < half; ++i) {
    const float angle = p * inv_freq[i];
    cos_buf[i] = std::cos(angle);
    sin_buf[i] = std::sin(angle);
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim;
    int i = 0;
    for (; i + N <= half; i += N) {
      const VF a = hn::LoadU(d, v + i), b = hn::LoadU(d, v + i + half);
      const VF c = hn::Load(d, cos_buf + i), s = hn::Load(d, sin_buf + i);
      hn::StoreU(hn::Sub(hn::Mul(a, c), hn::Mul(b, s)), d, v + i);
      hn::StoreU(hn::Add(hn::Mul(b, c), hn::Mul(a, s)), d, v + i + half);
    }
    for (; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos_buf[i] - b * sin_buf[i];
      v[i + half] = b * cos_buf[i] + a * sin_buf[i];
    }
  }
}

float Softmax(float* x, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  float max = x[0];
  int64_t i = 0;
  if (n >= N) {
    VF vmax = hn::LoadU(d, x);
    for (i = N; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
    max = hn::GetLane(hn::MaxOfLanes(d, vmax));
  }
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const VF vmax = hn::Set(d, max);
  VF vsum = hn::Zero(d);
  i = 0;
  for (; i + N <= n; i += N) {
    const VF e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vmax));
    vsum = hn::Add(vsum, e);
    hn::StoreU(e, d, x + i);
  }
  float sum = ReduceSum(d, vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  const VF vinv = hn::Set(d, inv);
  i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vinv), d, x + i);
  for (; i < n; ++i) x[i] *= inv;
  return max + std::log(sum);
}

void SoftCap(float* x, int64_t n, float cap) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const float inv = 1.0f / cap;
  const VF vcap = hn::Set(d, cap), vinv = hn::Set(d, inv);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(vcap, hn::Tanh(d, hn::Mul(hn::LoadU(d, x + i), vinv))), d, x + i);
  }
  for (; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

}  // namespace

// Sums n bytes from each of n_streams regions as 32-bit lanes, the regions read in lock-step (one
// vector from each in turn) and each vector summed into one of four accumulators; with
// prefetch_bytes > 0 each cache line is also prefetched that far ahead. n a multiple of 64 (the
// caller keeps the tail). A read loop the memory system, not the core, limits: the probes of the
// bandwidth bound vary the streams and the prefetch distance, since which is fastest differs
// between CPUs.
uint32_t ReadStreams(const uint8_t* const* regions, int n_streams, size_t n, size_t prefetch_bytes) {
  const hn::ScalableTag<uint32_t> d;
  const size_t N = hn::Lanes(d);
  const size_t words = n / 4;
  const size_t vector_bytes = N * 4, prefetch_words = prefetch_bytes / 4;
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  constexpr int kMaxStreams = 8;
  const uint32_t* p[kMaxStreams];
  const int streams = std::min(n_streams, kMaxStreams);
  for (int k = 0; k < streams; ++k) p[k] = reinterpret_cast<const uint32_t*>(regions[k]);
  size_t i = 0;
  for (; i + 4 * N <= words; i += 4 * N) {
    for (int k = 0; k < streams; ++k) {
      const uint32_t* q = p[k] + i;
      if (prefetch_words > 0) {
        for (size_t line = 0; line < 4 * vector_bytes; line += 64) hwy::Prefetch(reinterpret_cast<const uint8_t*>(q + prefetch_words) + line);
      }
      s0 = hn::Add(s0, hn::LoadU(d, q));
      s1 = hn::Add(s1, hn::LoadU(d, q + N));
      s2 = hn::Add(s2, hn::LoadU(d, q + 2 * N));
      s3 = hn::Add(s3, hn::LoadU(d, q + 3 * N));
    }
  }
  // Lanes summed in scalar code: unsigned wrap-around is intended here, and Highway's SumOfLanes
  // reduces u32 with a signed intrinsic on AVX-512, which UBSan reports as an overflow.
  uint32_t lanes[HWY_MAX_BYTES / sizeof(uint32_t)];
  hn::StoreU(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), d, lanes);
  uint32_t sum = 0;
  for (size_t l = 0; l < N; ++l) sum += lanes[l];
  for (int k = 0; k < streams; ++k) {
    for (size_t j = i; j < words; ++j) sum += p[k][j];
  }
  return sum;
}

uint32_t ReadAll(const void* data, size_t n) {
  const uint8_t* region = static_cast<const uint8_t*>(data);
  return ReadStreams(&region, 1, n, 0);
}

const KernelTable* GetKernelTable() {
  static const KernelTable table = {hwy::TargetName(HWY_TARGET), MatMulSimd, PrepareMatMulSimd, PackedLayoutSimd,
                                    RmsNorm, GeluTanhMul,
                                    RopeRotateHalf, DotRowsF32, DotRowsF16, DotRowsQ8_0, DotRowsQ4_0,
                                    WeightedSumF32, WeightedSumF16, WeightedSumQ8_0, WeightedSumQ4_0, Softmax,
                                    SoftCap, LayerNorm, GeluTanhInPlace, TowerMatMulSimd, SiluInPlace, SigmoidMul,
                                    MatMulExpertsSimd};
  return &table;
}

// AVX2's table with vpdpbusd in the packed kernels (matmul_simd.cc, MatMulSimdVnni); null elsewhere.
const KernelTable* GetVnniKernelTable() {
#if HWY_TARGET == HWY_AVX2
  static const KernelTable table = [] {
    KernelTable t = *GetKernelTable();
    t.name = "AVX2_VNNI";
    t.matmul = MatMulSimdVnni;
    t.matmul_experts = MatMulExpertsSimdVnni;
    return t;
  }();
  return &table;
#else
  return nullptr;
#endif
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace gemlet
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gemlet {

HWY_EXPORT(GetKernelTable);
HWY_EXPORT(GetVnniKernelTable);
HWY_EXPORT(ReadAll);
HWY_EXPORT(ReadStreams);

uint32_t ReadForBandwidth(const void* data, size_t n) { return HWY_DYNAMIC_DISPATCH(ReadAll)(data, n); }
uint32_t ReadStreamsForBandwidth(const uint8_t* const* regions, int n_streams, size_t n, size_t prefetch_bytes) {
  return HWY_DYNAMIC_DISPATCH(ReadStreams)(regions, n_streams, n, prefetch_bytes);
}

std::vector<int64_t> SimdTargets() { return hwy::SupportedAndGeneratedTargets(); }

namespace {

struct TargetTables {
  int64_t target;
  const KernelTable* table;
  const KernelTable* vnni;  // GetVnniKernelTable's
};

const std::vector<TargetTables>& Tables() {
  // Every table is looked up once, together: Highway's only way to reach one target's code is to
  // pretend the CPU supports only it, dispatch and undo, which must not race with other dispatches.
  static const std::vector<TargetTables> tables = [] {
    std::vector<TargetTables> found;
    for (int64_t t : SimdTargets()) {
      hwy::SetSupportedTargetsForTest(t);
      found.push_back({t, HWY_DYNAMIC_DISPATCH(GetKernelTable)(), HWY_DYNAMIC_DISPATCH(GetVnniKernelTable)()});
    }
    hwy::SetSupportedTargetsForTest(0);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    return found;
  }();
  return tables;
}

}  // namespace

const KernelTable* SimdKernels(int64_t target) {
  for (const TargetTables& e : Tables()) {
    if (e.target == target) return e.table;
  }
  return nullptr;
}

const KernelTable* Avx2VnniKernels() {
#if HWY_ARCH_X86
  // vpdpbusd: VEX-encoded with AVX-VNNI; otherwise EVEX-encoded, which AVX-512 VNNI (with VL: what
  // Highway's AVX3_DL target requires) runs.
  static const bool runs = CpuHasAvxVnni() || (hwy::SupportedTargets() & HWY_AVX3_DL) != 0;
  if (!runs) return nullptr;
  for (const TargetTables& e : Tables()) {
    if (e.target == HWY_AVX2) return e.vnni;
  }
#endif
  return nullptr;
}

}  // namespace gemlet
#endif  // HWY_ONCE

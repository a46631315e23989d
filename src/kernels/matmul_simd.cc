// Highway SIMD matmul over stored weights: float types in float (FMA), quantized types as integer
// dot products against activations quantized once per call. Decode (one token: GEMV, rows split
// across threads) and prefill (many tokens: GEMM, row blocks x token tiles so that each weight block
// is decoded once per tile) are separate paths; on AVX3_DL the few tokens of a batched decode step
// keep to the decode kernels (kMaxGemvTokens). Packed weights: packed-inl.h (AVX3_DL) and
// packed_avx2-inl.h (AVX2, and the AVX2_VNNI table's MatMulSimdVnni).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "base/half.h"
#include "kernels/act_quant.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_dot-inl.h"
#include "kernels/gemm_vnni-inl.h"
#include "kernels/packed-inl.h"
#include "kernels/packed_avx2-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gemlet {
namespace HWY_NAMESPACE {
#if HWY_TARGET == HWY_SCALAR
void MatMulSimd(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  RefKernels().matmul(w, x, n_tokens, y, ctx);  // one-lane vectors: see quant_dot-inl.h
}
void PrepareMatMulSimd(const WeightMatrix&, KernelContext&) {}
const PackedLayout* PackedLayoutSimd(DType) { return nullptr; }
void MatMulExpertsSimd(const WeightMatrix* w, int n, const float* x, bool one_input, float* y, KernelContext& ctx) {
  for (int e = 0; e < n; ++e) MatMulSimd(w[e], one_input ? x : x + e * w[e].n_in, 1, y + e * w[e].n_out, ctx);
}
void TowerMatMulSimd(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, const TowerClamp* clamp,
                     KernelContext& ctx) {
  std::vector<float> clamped;
  if (clamp != nullptr && clamp->ClampsInput()) {
    clamped.assign(x, x + n_tokens * w.n_in);
    for (float& v : clamped) v = std::clamp(v, clamp->in_min, clamp->in_max);
    x = clamped.data();
  }
  RefKernels().matmul(w, x, n_tokens, y, ctx);
  if (clamp != nullptr && clamp->ClampsOutput()) {
    for (int64_t i = 0; i < n_tokens * w.n_out; ++i) y[i] = std::clamp(y[i], clamp->out_min, clamp->out_max);
  }
}
#else
namespace {
namespace hn = hwy::HWY_NAMESPACE;

// Tokens per GEMM tile: each decoded weight block is used this many times while in registers.
constexpr int kTileTokens = 4;
// Weight bytes per GEMM row block: small enough to stay in L1/L2 while every token tile passes.
constexpr size_t kRowBlockBytes = 32 * 1024;

// ---------------------------------------------------------------------------------------------
// Float weights.

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kMaxLanes = hn::MaxLanes(DF());

HWY_INLINE VF LoadWeights(DF d, const float* p) { return hn::LoadU(d, p); }
HWY_INLINE VF LoadWeights(DF d, const hwy::float16_t* p) {
  return hn::PromoteTo(d, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}
HWY_INLINE VF LoadWeights(DF d, const hwy::bfloat16_t* p) {
  return hn::PromoteTo(d, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), p));
}
HWY_INLINE float WeightToFloat(float v) { return v; }
HWY_INLINE float WeightToFloat(hwy::float16_t v) {
  uint16_t bits;
  std::memcpy(&bits, &v, 2);
  return F16ToF32(bits);
}
HWY_INLINE float WeightToFloat(hwy::bfloat16_t v) {
  uint16_t bits;
  std::memcpy(&bits, &v, 2);
  return Bf16ToF32(bits);
}

template <typename WT>
struct KFloat {
  using Act = float;
  template <int NT>
  static HWY_INLINE void Tile(const uint8_t* row, int64_t n_in, const float* const* x, float* out) {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const WT* w = reinterpret_cast<const WT*>(row);
    VF acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = hn::Zero(d);
    int64_t i = 0;
    for (; i + N <= n_in; i += N) {
      const VF wv = LoadWeights(d, w + i);
      for (int t = 0; t < NT; ++t) acc[t] = hn::MulAdd(wv, hn::LoadU(d, x[t] + i), acc[t]);
    }
    if (i < n_in) {
      // The tail as one more zero-padded vector: the same operations whatever NT is, so that a
      // token's result does not depend on the tile it was computed in.
      HWY_ALIGN float wt[kMaxLanes] = {}, xt[kMaxLanes] = {};
      for (int64_t j = i; j < n_in; ++j) wt[j - i] = WeightToFloat(w[j]);
      const VF wv = hn::Load(d, wt);
      for (int t = 0; t < NT; ++t) {
        for (int64_t j = i; j < n_in; ++j) xt[j - i] = x[t][j];
        acc[t] = hn::MulAdd(wv, hn::Load(d, xt), acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) out[t] = hn::GetLane(hn::SumOfLanes(d, acc[t]));
  }
  template <int NR>
  static HWY_INLINE void Rows(const uint8_t* const* rows, int64_t n_in, const float* x, float* out, size_t ahead) {
    const float* xs[1] = {x};
    for (int r = 0; r < NR; ++r) {
      if (ahead > 0) qd::PrefetchSpan(rows[r] + ahead, static_cast<size_t>(n_in) * sizeof(WT));
      Tile<1>(rows[r], n_in, xs, out + r);
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Activation quantization (act_quant.h), vectorised over at most 16 lanes so that a lane group
// never straddles two 16-value sums.

using DQ = hn::CappedTag<float, 16>;

// Quantizes n values (a multiple of 16) with scale 1/id into q; returns the sum of q, and when
// group_sums is set, the sum of each 16 values.
HWY_INLINE int QuantizeSpan(const float* x, int n, float id, int8_t* q, int16_t* group_sums) {
  const DQ d;
  const hn::RebindToSigned<DQ> di;
  const hn::Rebind<int8_t, DQ> d8;
  const int N = static_cast<int>(hn::Lanes(d));
  const auto vid = hn::Set(d, id);
  auto total = hn::Zero(di);
  for (int g = 0; g < n; g += 16) {
    auto group = hn::Zero(di);
    for (int i = g; i < g + 16; i += N) {
      const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(d, x + i), vid));
      group = hn::Add(group, qi);
      hn::StoreU(hn::DemoteTo(d8, qi), d8, q + i);
    }
    if (group_sums != nullptr) group_sums[g / 16] = static_cast<int16_t>(hn::GetLane(hn::SumOfLanes(di, group)));
    total = hn::Add(total, group);
  }
  return hn::GetLane(hn::SumOfLanes(di, total));
}

HWY_INLINE float AbsMax(const float* x, int n) {
  const DQ d;
  const int N = static_cast<int>(hn::Lanes(d));
  auto m = hn::Zero(d);
  for (int i = 0; i < n; i += N) m = hn::Max(m, hn::Abs(hn::LoadU(d, x + i)));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// sums: null, or each block's sum of qs (the AVX2 packed kernels take zero points off in integers).
void QuantizeRow32(const float* x, int64_t n, BlockQ8x32* out, int32_t* sums) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    const float amax = AbsMax(x, kBlock32);
    BlockQ8x32& o = out[b];
    o.d = ActScale(amax);
    const int sum = QuantizeSpan(x, kBlock32, amax > 0 ? 127.0f / amax : 0.0f, o.qs, nullptr);
    o.s = o.d * static_cast<float>(sum);
    if (sums != nullptr) sums[b] = sum;
  }
}

void QuantizeRowK(const float* x, int64_t n, BlockQ8_K* out) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    const float amax = AbsMax(x, kBlockK);
    BlockQ8_K& o = out[b];
    o.d = ActScale(amax);
    QuantizeSpan(x, kBlockK, amax > 0 ? 127.0f / amax : 0.0f, o.qs, o.bsums);
  }
}

// sums: null, or [n_tokens][blocks] for each 32-value block's sum of qs.
template <class Act>
const Act* QuantizeActivations(const float* x, int64_t n_tokens, int64_t n_in, KernelContext& ctx,
                               int32_t* sums = nullptr) {
  constexpr int64_t kBlock = sizeof(Act) == sizeof(BlockQ8x32) ? kBlock32 : kBlockK;
  const int64_t nb = n_in / kBlock;
  Act* out = ctx.scratch().Get<Act>(0, KernelScratch::kActivations, static_cast<size_t>(n_tokens * nb));
  auto run = [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) {
      const float* row = x + static_cast<int64_t>(t) * n_in;
      if constexpr (kBlock == kBlock32) {
        QuantizeRow32(row, n_in, out + static_cast<int64_t>(t) * nb, sums ? sums + static_cast<int64_t>(t) * nb : nullptr);
      } else {
        QuantizeRowK(row, n_in, out + static_cast<int64_t>(t) * nb);
      }
    }
  };
  if (n_tokens == 1) run(0, 1, 0);
  else ctx.pool().ParallelFor(static_cast<size_t>(n_tokens), run);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Drivers. act[t * act_stride] is token t's activation row (floats, or its quantized blocks).

// How far ahead of the rows being computed decode prefetches (bytes, KernelOptions::prefetch_bytes).
// Decode streams weights that are not in any cache, and on its own one core keeps too few DRAM
// reads in flight while it also decodes blocks: prefetching 2 KiB ahead took gemma3-1b Q4_0 decode
// from 6.1-7.3 to 8.1-8.4 t/s (bench/RESULTS.md).

// Rows per decode step: independent accumulation chains that share each activation load.
constexpr int kGemvRows = 4;

// Decode: one token, rows split across the pool, kGemvRows at a time.
template <class K>
void Gemv(const WeightMatrix& w, const typename K::Act* act, float* y, KernelContext& ctx) {
  ctx.pool().ParallelFor(static_cast<size_t>(w.n_out), [&](size_t begin, size_t end, int) {
    const size_t ahead = ctx.prefetch_bytes();
    const uint8_t* rows[kGemvRows];
    size_t o = begin;
    for (; o + kGemvRows <= end; o += kGemvRows) {
      for (int r = 0; r < kGemvRows; ++r) rows[r] = w.Row(static_cast<int64_t>(o) + r);
      K::template Rows<kGemvRows>(rows, w.n_in, act, y + o, ahead);
    }
    for (; o < end; ++o) {
      rows[0] = w.Row(static_cast<int64_t>(o));
      K::template Rows<1>(rows, w.n_in, act, y + o, ahead);
    }
  });
}

template <class K, int NT>
HWY_INLINE void GemmTile(const WeightMatrix& w, int64_t r0, int64_t r1, const typename K::Act* const* x,
                         int64_t t0, float* y) {
  float out[NT];
  for (int64_t o = r0; o < r1; ++o) {
    K::template Tile<NT>(w.Row(o), w.n_in, x, out);
    for (int t = 0; t < NT; ++t) y[(t0 + t) * w.n_out + o] = out[t];
  }
}

// Prefill: blocks of rows (kRowBlockBytes) split across the pool; within a block, every tile of
// kTileTokens tokens runs over the block's rows while they are hot in cache.
template <class K>
void Gemm(const WeightMatrix& w, const typename K::Act* act, int64_t act_stride, int64_t n_tokens, float* y,
          KernelContext& ctx) {
  const int64_t rows_per_block =
      std::clamp<int64_t>(static_cast<int64_t>(kRowBlockBytes / std::max<size_t>(w.row_bytes, 1)), 1, 64);
  const int64_t n_blocks = (w.n_out + rows_per_block - 1) / rows_per_block;
  ctx.pool().ParallelForDynamic(static_cast<size_t>(n_blocks), 1, [&](size_t begin, size_t end, int) {
    for (size_t blk = begin; blk < end; ++blk) {
      const int64_t r0 = static_cast<int64_t>(blk) * rows_per_block;
      const int64_t r1 = std::min(w.n_out, r0 + rows_per_block);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
        const typename K::Act* x[kTileTokens];
        const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
        for (int t = 0; t < nt; ++t) x[t] = act + (t0 + t) * act_stride;
        switch (nt) {
          case 4: GemmTile<K, 4>(w, r0, r1, x, t0, y); break;
          case 3: GemmTile<K, 3>(w, r0, r1, x, t0, y); break;
          case 2: GemmTile<K, 2>(w, r0, r1, x, t0, y); break;
          default: GemmTile<K, 1>(w, r0, r1, x, t0, y); break;
        }
      }
    }
  });
}
static_assert(kTileTokens == 4, "Gemm's switch lists the tile sizes");

template <class K>
void Run(const WeightMatrix& w, const typename K::Act* act, int64_t act_stride, int64_t n_tokens, float* y,
         KernelContext& ctx) {
  if (n_tokens == 1) Gemv<K>(w, act, y, ctx);
  else Gemm<K>(w, act, act_stride, n_tokens, y, ctx);
}

template <class K>
void RunQuantized(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  using Act = typename K::Act;
  constexpr int64_t kBlock = sizeof(Act) == sizeof(BlockQ8x32) ? kBlock32 : kBlockK;
  const Act* act = QuantizeActivations<Act>(x, n_tokens, w.n_in, ctx);
  Run<K>(w, act, w.n_in / kBlock, n_tokens, y, ctx);
}

// Experts one MatMulExperts call takes packed (a MoE layer chooses 8); more run one matmul each.
constexpr int kMaxPackedExperts = 64;

// data[e]: expert e's packed weights in T's layout (packed now if not yet); false when one has none
// (or there are more than kMaxPackedExperts), and then the caller reads the rows as stored.
template <class T>
bool PackedExperts(const WeightMatrix* w, int n, KernelContext& ctx, const uint8_t** data) {
  if (n > kMaxPackedExperts || !ctx.options().pack_weights) return false;
  for (int e = 0; e < n; ++e) {
    data[e] = w[e].packed == nullptr ? nullptr : w[e].packed->Get(w[e], packing::LayoutOf<T>(), ctx.pool());
    if (data[e] == nullptr) return false;
  }
  return true;
}

#if HWY_TARGET == HWY_AVX3_DL
// Tokens up to which AVX3_DL keeps to the decode kernels rather than the VNNI GEMM, which first
// decodes every panel of 16 rows into bytes and pays for that over many tokens only. Packed weights
// run the GEMV for all tokens over each group of rows while it is in cache (RunPacked), others the
// per-row tiles; either way the weights are read once, and each token's results are bit for bit
// those of decoding it alone. Gemma 4 E2B's matrices from DRAM, 2 threads (bench/batch/RESULTS.md):
// 2 rows cost 2.7-4.3 one-row GEMVs through the GEMM and 1.1-2.3 through the GEMV; at 8 rows the
// GEMV is faster on Q4_K (5.4 against 7.0 ms over 28 attn_q) and Q6_K ffn_down, 15% slower on the
// Q6_K output head; on non-packed Q4_1 (and Q3_K, Q5_K before they were packed) the tiles beat the
// GEMM at 2, 4 and 8 rows.
constexpr int kMaxGemvTokens = 8;

// Packed weights (packed-inl.h). Calls fn(T()) for the packed type T of `type`; false if none.
template <class Fn>
bool WithPackedType(DType type, Fn&& fn) {
  switch (type) {
    case DType::kQ4_0: fn(packed::Q4_0()); return true;
    case DType::kQ4_1: fn(packed::Q4_1()); return true;
    case DType::kQ5_0: fn(packed::Q5_0()); return true;
    case DType::kQ5_1: fn(packed::Q5_1()); return true;
    case DType::kQ8_0: fn(packed::Q8_0()); return true;
    case DType::kQ4_K: fn(packed::Q4_K()); return true;
    case DType::kQ5_K: fn(packed::Q5_K()); return true;
    case DType::kQ6_K: fn(packed::Q6_K()); return true;
    case DType::kQ3_K: fn(packed::Q3_K()); return true;
    case DType::kQ2_K: fn(packed::Q2_K()); return true;
    default: return false;
  }
}

// nt tokens' activations (x: [nt, n_in]) for packed::Gemv, each as decoding it alone quantizes it.
template <class T>
void QuantizeGemvActs(const float* x, int nt, int64_t n_in, KernelContext& ctx, typename T::Act* acts) {
  const int64_t n_blocks = n_in / T::kBlockValues;
  KernelScratch& scratch = ctx.scratch();
  if constexpr (T::kBlockValues == kBlockK) {
    const BlockQ8_K* blocks = QuantizeActivations<BlockQ8_K>(x, nt, n_in, ctx);
    // Q4_K's and Q5_K's mins take the sums of each pair of 32-value slices as two 16-bit values
    // (the others read the blocks' bsums as they are, or nothing).
    int32_t* pair_sums = nullptr;
    if constexpr (requires { T::kSlicePairSums; }) {
      pair_sums = scratch.Get<int32_t>(0, KernelScratch::kActPairSums, static_cast<size_t>(4 * n_blocks * nt));
      for (int64_t i = 0; i < n_blocks * nt; ++i) {
        const int16_t* b = blocks[i].bsums;
        int32_t slices[8];
        for (int k = 0; k < 8; ++k) slices[k] = b[2 * k] + b[2 * k + 1];
        vnni::PairSums(slices, 8, pair_sums + 4 * i);
      }
    }
    for (int t = 0; t < nt; ++t) acts[t] = {blocks + t * n_blocks, pair_sums ? pair_sums + 4 * n_blocks * t : nullptr};
  } else {
    const size_t nb = static_cast<size_t>(n_blocks), n = static_cast<size_t>(nt);
    int8_t* q = scratch.Get<int8_t>(0, KernelScratch::kActQ, nb * 32 * n);
    float* d = scratch.Get<float>(0, KernelScratch::kActD, nb * n);
    float* sum = scratch.Get<float>(0, KernelScratch::kActSum, nb * n);
    int32_t* zero = scratch.Get<int32_t>(0, KernelScratch::kActZero, nb * n);
    for (int t = 0; t < nt; ++t) {
      typename T::Act& a = acts[t];
      a.n_blocks = n_blocks;
      a.q = q + nb * 32 * t;
      a.d = d + nb * t;
      a.sum = sum + nb * t;
      a.zero = zero + nb * t;
      vnni::QuantizeActRow<1>(x + t * n_in, n_blocks, T::kZeroPoint, a.q, a.d, a.sum, a.zero);
    }
  }
}

// Many tokens: the GEMM over panels filled from the packed groups. Up to kMaxGemvTokens (or any
// number with the GEMM off, kMaxGemvTokens at a time): the decode GEMV, all tokens per group.
template <class T>
void RunPacked(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y,
               KernelContext& ctx) {
  if (n_tokens > kMaxGemvTokens && ctx.options().vnni_gemm) {
    packed::Gemm<T>(w, data, x, n_tokens, y, ctx);
    return;
  }
  typename T::Act acts[kMaxGemvTokens];
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxGemvTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kMaxGemvTokens, n_tokens - t0));
    QuantizeGemvActs<T>(x + t0 * w.n_in, nt, w.n_in, ctx, acts);
    packed::Gemv<T>(w, data, acts, nt, y + t0 * w.n_out, ctx.prefetch_bytes(), ctx);
  }
}

// y[k] = W[k] x[k] for a token's experts (KernelTable::matmul_experts), kMaxGemvTokens at a time:
// one streaming loop over the groups of all of them, each group's dot product as packed::Gemv
// takes it, so each y[k] is that of RunPacked on one token.
template <class T>
void RunPackedExperts(const WeightMatrix* w, const uint8_t* const* data, int n, const float* x, bool one_input,
                      float* y, KernelContext& ctx) {
  const int64_t n_in = w[0].n_in, n_out = w[0].n_out, n_blocks = n_in / T::kBlockValues;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * T::kBlockBytes;
  const auto n_groups = static_cast<size_t>(n_out / packed::kRows);
  const size_t ahead = ctx.prefetch_bytes();
  typename T::Act acts[kMaxGemvTokens];
  for (int e0 = 0; e0 < n; e0 += kMaxGemvTokens) {
    const int ne = std::min(kMaxGemvTokens, n - e0);
    if (one_input) {
      QuantizeGemvActs<T>(x, 1, n_in, ctx, acts);
      std::fill(acts + 1, acts + ne, acts[0]);
    } else {
      QuantizeGemvActs<T>(x + e0 * n_in, ne, n_in, ctx, acts);
    }
    ctx.pool().ParallelForStreaming(static_cast<size_t>(ne) * n_groups, [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i) {
        const size_t k = i / n_groups, g = i % n_groups;
        _mm512_storeu_ps(y + (e0 + k) * n_out + g * packed::kRows,
                         T::Dot(data[e0 + k] + g * group_bytes, n_blocks, acts[k], ahead));
      }
    });
  }
}

// False when w has no packed layout here (then the rows as stored are used).
bool MatMulPacked(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  bool done = false;
  WithPackedType(w.type, [&](auto type) {
    using T = decltype(type);
    const uint8_t* data = w.packed->Get(w, packed::LayoutOf<T>(), ctx.pool());
    if (data == nullptr) return;
    RunPacked<T>(w, data, x, n_tokens, y, ctx);
    done = true;
  });
  return done;
}

// False when an expert has no packed layout here.
bool MatMulExpertsPacked(const WeightMatrix* w, int n, const float* x, bool one_input, float* y, KernelContext& ctx) {
  bool done = false;
  WithPackedType(w[0].type, [&](auto type) {
    using T = decltype(type);
    const uint8_t* data[kMaxPackedExperts];
    if (!PackedExperts<T>(w, n, ctx, data)) return;
    RunPackedExperts<T>(w, data, n, x, one_input, y, ctx);
    done = true;
  });
  return done;
}
#endif

#if HWY_TARGET == HWY_AVX2
// Packed weights (packed_avx2-inl.h). Calls fn(T()) for the packed type T of `type`; false if none.
template <class Fn>
bool WithPackedType(DType type, Fn&& fn) {
  switch (type) {
    case DType::kQ4_0: fn(packed::Q4_0()); return true;
    case DType::kQ4_1: fn(packed::Q4_1()); return true;
    case DType::kQ5_0: fn(packed::Q5_0()); return true;
    case DType::kQ5_1: fn(packed::Q5_1()); return true;
    case DType::kQ8_0: fn(packed::Q8_0()); return true;
    case DType::kQ4_K: fn(packed::Q4_K()); return true;
    case DType::kQ5_K: fn(packed::Q5_K()); return true;
    case DType::kQ6_K: fn(packed::Q6_K()); return true;
    default: return false;
  }
}

// Tokens up to which a step counts as decode: its groups are streamed with prefetching. The kernel
// and the results are the same past it (packed_avx2-inl.h).
constexpr int kMaxGemvTokens = 8;

// Q4_K's and Q5_K's mins take the sums of each pair of 32-value slices of a super-block as two
// 16-bit values: 4 per block.
inline void SlicePairSums(const BlockQ8_K* blocks, int64_t n, int32_t* pair_sums) {
  for (int64_t i = 0; i < n; ++i) {
    const int16_t* b = blocks[i].bsums;
    for (int p = 0; p < 4; ++p) {
      const auto lo = static_cast<uint16_t>(b[4 * p] + b[4 * p + 1]), hi = static_cast<uint16_t>(b[4 * p + 2] + b[4 * p + 3]);
      pair_sums[4 * i + p] = static_cast<int32_t>(static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16);
    }
  }
}

// Every token's activations quantized as decoding it alone quantizes them, then packed::Run.
template <class T, packed::Dp kDp>
void RunPacked(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y,
               KernelContext& ctx) {
  const int64_t n_blocks = w.n_in / T::kBlockValues;
  const bool decode = n_tokens <= kMaxGemvTokens;
  KernelScratch& scratch = ctx.scratch();
  if constexpr (T::kBlockValues == kBlockK) {
    const BlockQ8_K* blocks = QuantizeActivations<BlockQ8_K>(x, n_tokens, w.n_in, ctx);
    int32_t* pair_sums = nullptr;
    if constexpr (requires { T::kSlicePairSums; }) {
      // Q4_K's and Q5_K's mins take the sums of each pair of 32-value slices as two 16-bit values.
      pair_sums = scratch.Get<int32_t>(0, KernelScratch::kActPairSums, static_cast<size_t>(4 * n_blocks * n_tokens));
      SlicePairSums(blocks, n_blocks * n_tokens, pair_sums);
    }
    auto act = [&](int64_t t) { return packed::ActK{blocks + t * n_blocks, pair_sums ? pair_sums + 4 * n_blocks * t : nullptr}; };
    packed::Run<T, kDp>(w, data, act, n_tokens, y, decode, decode ? ctx.prefetch_bytes() : 0, ctx);
  } else {
    int32_t* sums = scratch.Get<int32_t>(0, KernelScratch::kActZero, static_cast<size_t>(n_blocks * n_tokens));
    const BlockQ8x32* blocks = QuantizeActivations<BlockQ8x32>(x, n_tokens, w.n_in, ctx, sums);
    packed::ZeroStarts(T::kActZero, sums, n_blocks * n_tokens);
    auto act = [&](int64_t t) { return packed::Act32{blocks + t * n_blocks, sums + t * n_blocks}; };
    packed::Run<T, kDp>(w, data, act, n_tokens, y, decode, decode ? ctx.prefetch_bytes() : 0, ctx);
  }
}

// y[k] = W[k] x[k] for a token's experts (KernelTable::matmul_experts), kMaxGemvTokens at a time:
// one streaming loop over the groups of all of them, each as packed::Run decodes one token.
template <class T, packed::Dp kDp>
void RunPackedExperts(const WeightMatrix* w, const uint8_t* const* data, int n, const float* x, bool one_input,
                      float* y, KernelContext& ctx) {
  const int64_t n_in = w[0].n_in, n_out = w[0].n_out, n_blocks = n_in / T::kBlockValues;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * T::kBlockBytes;
  const auto n_groups = static_cast<size_t>(n_out / packed::kRows);
  const size_t ahead = ctx.prefetch_bytes();
  KernelScratch& scratch = ctx.scratch();
  for (int e0 = 0; e0 < n; e0 += kMaxGemvTokens) {
    const int ne = std::min(kMaxGemvTokens, n - e0), rows = one_input ? 1 : ne;
    const float* xe = one_input ? x : x + e0 * n_in;
    typename T::Act acts[kMaxGemvTokens];
    if constexpr (T::kBlockValues == kBlockK) {
      const BlockQ8_K* blocks = QuantizeActivations<BlockQ8_K>(xe, rows, n_in, ctx);
      int32_t* pair_sums = nullptr;
      if constexpr (requires { T::kSlicePairSums; }) {
        pair_sums = scratch.Get<int32_t>(0, KernelScratch::kActPairSums, static_cast<size_t>(4 * n_blocks * rows));
        SlicePairSums(blocks, n_blocks * rows, pair_sums);
      }
      for (int k = 0; k < ne; ++k) {
        const int r = one_input ? 0 : k;
        acts[k] = packed::ActK{blocks + r * n_blocks, pair_sums ? pair_sums + 4 * n_blocks * r : nullptr};
      }
    } else {
      int32_t* sums = scratch.Get<int32_t>(0, KernelScratch::kActZero, static_cast<size_t>(n_blocks * rows));
      const BlockQ8x32* blocks = QuantizeActivations<BlockQ8x32>(xe, rows, n_in, ctx, sums);
      packed::ZeroStarts(T::kActZero, sums, n_blocks * rows);
      for (int k = 0; k < ne; ++k) {
        const int r = one_input ? 0 : k;
        acts[k] = packed::Act32{blocks + r * n_blocks, sums + r * n_blocks};
      }
    }
    ctx.pool().ParallelForStreaming(static_cast<size_t>(ne) * n_groups, [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i) {
        const size_t k = i / n_groups, g = i % n_groups;
        packed::Tile<T, kDp, 1>(data[e0 + k] + g * group_bytes, n_blocks, acts + k,
                                y + (e0 + k) * n_out + g * packed::kRows, n_out, ahead);
      }
    });
  }
}

// False when an expert has no packed layout here.
template <packed::Dp kDp>
bool MatMulExpertsPacked(const WeightMatrix* w, int n, const float* x, bool one_input, float* y, KernelContext& ctx) {
  bool done = false;
  WithPackedType(w[0].type, [&](auto type) {
    using T = decltype(type);
    const uint8_t* data[kMaxPackedExperts];
    if (!PackedExperts<T>(w, n, ctx, data)) return;
    RunPackedExperts<T, kDp>(w, data, n, x, one_input, y, ctx);
    done = true;
  });
  return done;
}

// False when w has no packed layout here (then the rows as stored are used).
template <packed::Dp kDp>
bool MatMulPacked(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  if (w.packed == nullptr || !ctx.options().pack_weights) return false;
  bool done = false;
  WithPackedType(w.type, [&](auto type) {
    using T = decltype(type);
    const uint8_t* data = w.packed->Get(w, packing::LayoutOf<T>(), ctx.pool());
    if (data == nullptr) return;
    RunPacked<T, kDp>(w, data, x, n_tokens, y, ctx);
    done = true;
  });
  return done;
}
#endif

}  // namespace

// The rows as stored: per-row tiles (quant_dot-inl.h), float weights in float.
void MatMulStored(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx);

void MatMulSimd(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
#if HWY_TARGET == HWY_AVX2
  if (MatMulPacked<packed::Dp::kMaddubs>(w, x, n_tokens, y, ctx)) return;
#endif
#if HWY_TARGET == HWY_AVX3_DL
  if (w.packed != nullptr && ctx.options().pack_weights && MatMulPacked(w, x, n_tokens, y, ctx)) return;
  // Prefill: the VNNI panel GEMM (gemm_vnni-inl.h). On rows as stored it rounds otherwise than the
  // decode kernels (per-row tiles that sum across lanes), so only where batch invariance is off.
  if (n_tokens > kMaxGemvTokens && ctx.options().vnni_gemm && !ctx.options().batch_invariant) {
    switch (w.type) {
      case DType::kQ4_0: return vnni::Gemm<vnni::DQ4_0>(w, x, n_tokens, y, ctx);
      case DType::kQ4_1: return vnni::Gemm<vnni::DQ4_1>(w, x, n_tokens, y, ctx);
      case DType::kQ5_0: return vnni::Gemm<vnni::DQ5_0>(w, x, n_tokens, y, ctx);
      case DType::kQ5_1: return vnni::Gemm<vnni::DQ5_1>(w, x, n_tokens, y, ctx);
      case DType::kQ8_0: return vnni::Gemm<vnni::DQ8_0>(w, x, n_tokens, y, ctx);
      case DType::kQ2_K: return vnni::Gemm<vnni::DQ2_K>(w, x, n_tokens, y, ctx);
      case DType::kQ3_K: return vnni::Gemm<vnni::DQ3_K>(w, x, n_tokens, y, ctx);
      case DType::kQ4_K: return vnni::Gemm<vnni::DQ4_K>(w, x, n_tokens, y, ctx);
      case DType::kQ5_K: return vnni::Gemm<vnni::DQ5_K>(w, x, n_tokens, y, ctx);
      case DType::kQ6_K: return vnni::Gemm<vnni::DQ6_K>(w, x, n_tokens, y, ctx);
      default: break;
    }
  }
#endif
  MatMulStored(w, x, n_tokens, y, ctx);
}

void MatMulExpertsSimd(const WeightMatrix* w, int n, const float* x, bool one_input, float* y, KernelContext& ctx) {
  if (n <= 0 || w[0].n_out <= 0) return;
#if HWY_TARGET == HWY_AVX2
  if (MatMulExpertsPacked<packed::Dp::kMaddubs>(w, n, x, one_input, y, ctx)) return;
#endif
#if HWY_TARGET == HWY_AVX3_DL
  if (MatMulExpertsPacked(w, n, x, one_input, y, ctx)) return;
#endif
  for (int e = 0; e < n; ++e) MatMulSimd(w[e], one_input ? x : x + e * w[e].n_in, 1, y + e * w[e].n_out, ctx);
}

#if HWY_TARGET == HWY_AVX2
// The AVX2_VNNI table's matmul: MatMulSimd with vpdpbusd in the packed kernels, VEX-encoded where
// the CPU has AVX-VNNI, else (the table is offered only then) EVEX-encoded for AVX-512 VNNI.
void MatMulSimdVnni(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
  static const bool vex = CpuHasAvxVnni();
  if (vex ? MatMulPacked<packed::Dp::kVexVnni>(w, x, n_tokens, y, ctx)
          : MatMulPacked<packed::Dp::kEvexVnni>(w, x, n_tokens, y, ctx)) {
    return;
  }
  MatMulStored(w, x, n_tokens, y, ctx);
}

void MatMulExpertsSimdVnni(const WeightMatrix* w, int n, const float* x, bool one_input, float* y,
                           KernelContext& ctx) {
  if (n <= 0 || w[0].n_out <= 0) return;
  static const bool vex = CpuHasAvxVnni();
  if (vex ? MatMulExpertsPacked<packed::Dp::kVexVnni>(w, n, x, one_input, y, ctx)
          : MatMulExpertsPacked<packed::Dp::kEvexVnni>(w, n, x, one_input, y, ctx)) {
    return;
  }
  for (int e = 0; e < n; ++e) MatMulSimdVnni(w[e], one_input ? x : x + e * w[e].n_in, 1, y + e * w[e].n_out, ctx);
}
#endif

void MatMulStored(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  switch (w.type) {
    // F32 weights are the reference format (converted checkpoints, goldens): they keep the scalar
    // reference's summation order so results are bit-identical to it. Gemma 3n's test model is
    // chaotic enough that a different order alone moves a logit by 3e-2 against HF (1e-2 allowed).
    case DType::kF32: return RefKernels().matmul(w, x, n_tokens, y, ctx);
    case DType::kF16: return Run<KFloat<hwy::float16_t>>(w, x, w.n_in, n_tokens, y, ctx);
    case DType::kBF16: return Run<KFloat<hwy::bfloat16_t>>(w, x, w.n_in, n_tokens, y, ctx);
    case DType::kQ4_0: return RunQuantized<qd::KQ4_0>(w, x, n_tokens, y, ctx);
    case DType::kQ4_1: return RunQuantized<qd::KQ4_1>(w, x, n_tokens, y, ctx);
    case DType::kQ5_0: return RunQuantized<qd::KQ5_0>(w, x, n_tokens, y, ctx);
    case DType::kQ5_1: return RunQuantized<qd::KQ5_1>(w, x, n_tokens, y, ctx);
    case DType::kQ8_0: return RunQuantized<qd::KQ8_0>(w, x, n_tokens, y, ctx);
    case DType::kQ2_K: return RunQuantized<qd::KQ2_K>(w, x, n_tokens, y, ctx);
    case DType::kQ3_K: return RunQuantized<qd::KQ3_K>(w, x, n_tokens, y, ctx);
    case DType::kQ4_K: return RunQuantized<qd::KQ4_K>(w, x, n_tokens, y, ctx);
    case DType::kQ5_K: return RunQuantized<qd::KQ5_K>(w, x, n_tokens, y, ctx);
    case DType::kQ6_K: return RunQuantized<qd::KQ6_K>(w, x, n_tokens, y, ctx);
    default: return RefKernels().matmul(w, x, n_tokens, y, ctx);  // types without a SIMD path
  }
}
// ---------------------------------------------------------------------------------------------
// The towers' matmuls: hundreds to thousands of tokens through float matrices at once (an image's
// patches, a clip's frames), where the row-dot tiles above run out of load bandwidth (each FMA
// needs its own activation load, and every output a horizontal sum). Here a tile of kTowerRows rows,
// converted to float, meets kTowerVecs vectors of tokens from a chunk of the transposed activations:
// per k, kTowerRows broadcasts and kTowerVecs loads feed kTowerRows * kTowerVecs FMAs. The k axis
// runs in blocks of kTowerK (a tile's rows in L1, the block's activations for every chunk in L2):
// each block of weights is read from memory and converted once per call, for all the tokens, and
// the accumulators go to memory between blocks and come back, which leaves every output's sum in k
// order. So a token's result depends neither on the chunk it falls in, nor on the thread count,
// nor on the block size.
// 24 accumulators where the target has 32 vector registers (AVX-512, NEON): 12 rows by 2 vectors,
// which needs less of the activations per FMA than 8 by 3 and pads fewer tokens (a 5 s clip's 125
// frames are 4 chunks of 32, not 3 of 48); 8 where it has 16.
#if HWY_TARGET <= HWY_AVX3 || HWY_ARCH_ARM
constexpr int kTowerRows = 12;
constexpr int kTowerVecs = 2;
#else
constexpr int kTowerRows = 4;
constexpr int kTowerVecs = 2;
#endif
constexpr int64_t kTowerK = 256;
constexpr int64_t kCacheLine = 64;

// Where the tiles' prefetches go: lines [i, end) of the weights the next tiles read, line i at
// base + (i >> shift) * row_bytes + (i & mask) * 64 (rows' pieces rounded up to a power of two lines:
// a prefetch past a piece's end is harmless).
struct TowerPrefetch {
  uintptr_t base = 0;
  uintptr_t row_bytes = 0;
  int shift = 0;
  int64_t i = 0, end = 0;
};
// Prefetches per tile: one every kTowerPrefetchEvery steps of k.
constexpr int64_t kTowerPrefetchEvery = 8;

// acc[r][t] (rows `stride` apart) += sum over k < kb of wf[r * kTowerK + k] * xt[k * chunk + t], for
// the chunk's kTowerVecs vectors of tokens; first: start from zero. Takes up to `budget` of pf's
// lines, spread over the k loop.
template <int R>
void TowerTile(const float* wf, int64_t kb, const float* xt, int64_t chunk, float* acc_io, int64_t stride, bool first,
               TowerPrefetch& pf, int64_t budget) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc[R][kTowerVecs];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kTowerVecs; ++v) acc[r][v] = first ? hn::Zero(d) : hn::LoadU(d, acc_io + r * stride + v * N);
  }
  const auto step = [&](int64_t k) HWY_ATTR {
    VF xv[kTowerVecs];
    for (int v = 0; v < kTowerVecs; ++v) xv[v] = hn::LoadU(d, xt + k * chunk + v * N);
    for (int r = 0; r < R; ++r) {
      const VF wv = hn::Set(d, wf[r * kTowerK + k]);
      for (int v = 0; v < kTowerVecs; ++v) acc[r][v] = hn::MulAdd(wv, xv[v], acc[r][v]);
    }
  };
  int64_t k = 0, i = pf.i;
  const int64_t end = std::min(pf.end, pf.i + budget);
  const uintptr_t mask = (uintptr_t{1} << pf.shift) - 1;
  for (; k + kTowerPrefetchEvery <= kb; k += kTowerPrefetchEvery) {
    if (i < end) {
      const uintptr_t line = static_cast<uintptr_t>(i++);
      // To L2 (locality 2: prefetcht1 on x86): a block's weights (48 KiB) would push the tiles'
      // activations and rows out of L1.
      __builtin_prefetch(reinterpret_cast<const void*>(pf.base + (line >> pf.shift) * pf.row_bytes +
                                                       (line & mask) * kCacheLine), 0, 2);
    }
    for (int64_t j = 0; j < kTowerPrefetchEvery; ++j) step(k + j);
  }
  for (; k < kb; ++k) step(k);
  pf.i = i;
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kTowerVecs; ++v) hn::StoreU(acc[r][v], d, acc_io + r * stride + v * N);
  }
}

// TowerTile over `rows` rows (at most kTowerRows): a full tile, else smaller ones.
HWY_INLINE void TowerTiles(const float* wf, int rows, int64_t kb, const float* xt, int64_t chunk, float* acc_io,
                           int64_t stride, bool first, TowerPrefetch& pf, int64_t budget) {
  int r = 0;
  if (rows == kTowerRows) return TowerTile<kTowerRows>(wf, kb, xt, chunk, acc_io, stride, first, pf, budget);
  for (; r + 4 <= rows; r += 4) {
    TowerTile<4>(wf + r * kTowerK, kb, xt, chunk, acc_io + r * stride, stride, first, pf, budget);
  }
  for (; r < rows; ++r) TowerTile<1>(wf + r * kTowerK, kb, xt, chunk, acc_io + r * stride, stride, first, pf, budget);
}

// dst[r * kTowerK + i] = row r's values k0 .. k0 + kb - 1 in float, for `rows` rows.
template <class WT>
void TowerRowsToFloat(const WeightMatrix& w, int64_t r0, int rows, int64_t k0, int64_t kb, float* dst) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int r = 0; r < rows; ++r) {
    const WT* src = reinterpret_cast<const WT*>(w.data + (r0 + r) * w.row_bytes) + k0;
    float* out = dst + r * kTowerK;
    int64_t i = 0;
    for (; i + N <= kb; i += N) hn::StoreU(LoadWeights(d, src + i), d, out + i);
    for (; i < kb; ++i) out[i] = WeightToFloat(src[i]);
  }
}

// rows[0 .. N) transposed in place (N = the vector's lanes): afterwards lane i of rows[j] is what
// lane j of rows[i] was. log2(N) rounds of unzipping pairs of rows: each round rotates the bits of
// an element's index (row, lane) by one, so log2(N) of them swap row and lane.
HWY_INLINE void TransposeSquare(DF d, VF* rows) {
  constexpr size_t N = kMaxLanes;
  VF unzipped[N];
  for (size_t round = 1; round < N; round <<= 1) {
    for (size_t i = 0; i < N / 2; ++i) {
      unzipped[i] = hn::ConcatEven(d, rows[2 * i + 1], rows[2 * i]);
      unzipped[N / 2 + i] = hn::ConcatOdd(d, rows[2 * i + 1], rows[2 * i]);
    }
    for (size_t i = 0; i < N; ++i) rows[i] = unzipped[i];
  }
}

// The tokens transposed by chunks of `chunk`: xt[(c * n_in + k) * chunk + t] = x[(c * chunk + t) *
// n_in + k] (kClamp: clamped to [lo, hi]), zero past the last token; split across the pool by
// blocks of k. A square of N tokens by N values of k is N loads of contiguous values, transposed in
// registers (a gather of N tokens' values reads N rows whose addresses differ by multiples of 4 KiB:
// one L1 set, thrashed).
template <bool kClamp>
void TowerTranspose(const float* x, int64_t n_tokens, int64_t n_in, int64_t chunk, float lo, float hi, float* xt,
                    KernelContext& ctx) {
  constexpr int64_t kBlock = 64;
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t n_chunks = (n_tokens + chunk - 1) / chunk, k_blocks = (n_in + kBlock - 1) / kBlock;
  ctx.pool().ParallelFor(static_cast<size_t>(n_chunks * k_blocks), [&](size_t begin, size_t end, int) {
    VF rows[kMaxLanes];
    for (size_t item = begin; item < end; ++item) {
      const int64_t c = static_cast<int64_t>(item) / k_blocks, k0 = static_cast<int64_t>(item) % k_blocks * kBlock;
      const int64_t k1 = std::min(n_in, k0 + kBlock);
      float* dst = xt + c * n_in * chunk;
      for (int64_t v = 0; v < chunk / N; ++v) {
        const int64_t t0 = c * chunk + v * N, nt = std::clamp<int64_t>(n_tokens - t0, 0, N);
        int64_t k = k0;
        for (; k + N <= k1; k += N) {
          for (int64_t t = 0; t < N; ++t) {
            if (t >= nt) {
              rows[t] = hn::Zero(d);
              continue;
            }
            rows[t] = hn::LoadU(d, x + (t0 + t) * n_in + k);
            if (kClamp) rows[t] = hn::Min(hn::Max(rows[t], hn::Set(d, lo)), hn::Set(d, hi));
          }
          TransposeSquare(d, rows);
          for (int64_t j = 0; j < N; ++j) hn::StoreU(rows[j], d, dst + (k + j) * chunk + v * N);
        }
        for (; k < k1; ++k) {
          for (int64_t t = 0; t < N; ++t) {
            const float value = t < nt ? x[(t0 + t) * n_in + k] : 0.0f;
            dst[k * chunk + v * N + t] = kClamp && t < nt ? std::clamp(value, lo, hi) : value;
          }
        }
      }
    }
  });
}

// What the tiles prefetch while they run on one block of k: the task's rows in the next block, or
// on the last block nothing (the next task is likely another thread's).
template <class WT>
TowerPrefetch NextBlock(const WeightMatrix& w, int64_t row0, int64_t row1, int64_t next_k0) {
  TowerPrefetch pf;
  if (next_k0 >= w.n_in) return pf;
  const int64_t bytes = std::min(kTowerK, w.n_in - next_k0) * static_cast<int64_t>(sizeof(WT));
  while ((int64_t{1} << pf.shift) * kCacheLine < bytes) ++pf.shift;
  pf.base = reinterpret_cast<uintptr_t>(w.data) + static_cast<uintptr_t>(row0) * w.row_bytes +
            static_cast<uintptr_t>(next_k0) * sizeof(WT);
  pf.row_bytes = w.row_bytes;
  pf.end = (row1 - row0) << pf.shift;
  return pf;
}

// y[t * n_out + r] = acc[(r - row0) * padded + t] for the task's rows (kClamp: clamped to [lo, hi]):
// squares of N rows by N tokens transposed in registers (past the last row, a square's rows read as
// zeros and its tokens' values go through a buffer: y's next rows may be another thread's).
template <bool kClamp>
void TowerStore(const float* acc, int64_t padded, int64_t row0, int64_t row1, int64_t n_tokens, int64_t n_out,
                float lo, float hi, float* y) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF square[kMaxLanes];
  HWY_ALIGN float part[kMaxLanes];
  for (int64_t r = row0; r < row1; r += N) {
    const int64_t rows = std::min(N, row1 - r);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += N) {
      for (int64_t i = 0; i < N; ++i) square[i] = i < rows ? hn::LoadU(d, acc + (r - row0 + i) * padded + t0) : hn::Zero(d);
      TransposeSquare(d, square);
      for (int64_t j = 0; j < N && t0 + j < n_tokens; ++j) {
        if (kClamp) square[j] = hn::Min(hn::Max(square[j], hn::Set(d, lo)), hn::Set(d, hi));
        if (rows == N) {
          hn::StoreU(square[j], d, y + (t0 + j) * n_out + r);
        } else {
          hn::Store(square[j], d, part);
          std::copy(part, part + rows, y + (t0 + j) * n_out + r);
        }
      }
    }
  }
}

template <class WT>
void TowerGemm(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, const TowerClamp& clamp,
               KernelContext& ctx) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d)), chunk = kTowerVecs * N, n_in = w.n_in, n_out = w.n_out;
  const int64_t n_chunks = (n_tokens + chunk - 1) / chunk, padded = n_chunks * chunk;
  const int64_t n_groups = (n_out + kTowerRows - 1) / kTowerRows;
  // A thread takes `per_task` groups of rows at a time, small enough that each thread gets about 8
  // of them: a time-sliced thread does not hold up the matrix's end for long.
  const int64_t per_task = std::clamp<int64_t>(n_groups / (8 * ctx.n_threads()), 1, 8);
  const int64_t n_tasks = (n_groups + per_task - 1) / per_task;
  KernelScratch& scratch = ctx.scratch();
  float* xt = scratch.Get<float>(0, KernelScratch::kTowerActT, static_cast<size_t>(n_chunks * n_in * chunk));
  if (clamp.ClampsInput()) {
    TowerTranspose<true>(x, n_tokens, n_in, chunk, clamp.in_min, clamp.in_max, xt, ctx);
  } else {
    TowerTranspose<false>(x, n_tokens, n_in, chunk, 0.0f, 0.0f, xt, ctx);
  }
  ctx.pool().ParallelForDynamic(static_cast<size_t>(n_tasks), 1, [&](size_t begin, size_t end, int thread) {
    // The task's rows in float, one block of k: [row][k], rows kTowerK apart.
    float* wf = scratch.Get<float>(thread, KernelScratch::kTowerRowsF32, static_cast<size_t>(per_task * kTowerRows * kTowerK));
    // The task's sums, [row][token] (rows `padded` apart), until the last block of k is in.
    float* acc = scratch.Get<float>(thread, KernelScratch::kTowerAcc, static_cast<size_t>(per_task * kTowerRows * padded));
    for (size_t task = begin; task < end; ++task) {
      const int64_t row0 = static_cast<int64_t>(task) * per_task * kTowerRows;
      const int64_t row1 = std::min(n_out, row0 + per_task * kTowerRows);
      const int64_t groups = (row1 - row0 + kTowerRows - 1) / kTowerRows;
      for (int64_t k0 = 0; k0 < n_in; k0 += kTowerK) {
        const int64_t kb = std::min(kTowerK, n_in - k0);
        TowerRowsToFloat<WT>(w, row0, static_cast<int>(row1 - row0), k0, kb, wf);
        TowerPrefetch pf = NextBlock<WT>(w, row0, row1, k0 + kb);
        const int64_t budget = (pf.end + n_chunks * groups - 1) / (n_chunks * groups);
        // Each block of the chunk's activations (kTowerK x chunk) stays in L1 while the task's rows pass.
        for (int64_t c = 0; c < n_chunks; ++c) {
          const float* xc = xt + (c * n_in + k0) * chunk;
          for (int64_t g = 0; g < groups; ++g) {
            const int64_t r0 = g * kTowerRows;
            const int rows = static_cast<int>(std::min<int64_t>(kTowerRows, row1 - row0 - r0));
            TowerTiles(wf + r0 * kTowerK, rows, kb, xc, chunk, acc + r0 * padded + c * chunk, padded, k0 == 0, pf, budget);
          }
        }
      }
      if (clamp.ClampsOutput()) {
        TowerStore<true>(acc, padded, row0, row1, n_tokens, n_out, clamp.out_min, clamp.out_max, y);
      } else {
        TowerStore<false>(acc, padded, row0, row1, n_tokens, n_out, 0.0f, 0.0f, y);
      }
    }
  });
}

const PackedLayout* PackedLayoutSimd(DType type) {
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
  const PackedLayout* layout = nullptr;
  WithPackedType(type, [&](auto t) { layout = &packed::LayoutOf<decltype(t)>(); });
  return layout;
#else
  (void)type;
  return nullptr;
#endif
}

void PrepareMatMulSimd(const WeightMatrix& w, KernelContext& ctx) {
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
  if (w.packed == nullptr || !ctx.options().pack_weights) return;
  WithPackedType(w.type, [&](auto type) { w.packed->Get(w, packed::LayoutOf<decltype(type)>(), ctx.pool()); });
#else
  (void)w;
  (void)ctx;
#endif
}

void TowerMatMulSimd(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, const TowerClamp* clamp,
                     KernelContext& ctx) {
  const TowerClamp none;
  const TowerClamp& bounds = clamp != nullptr ? *clamp : none;
  if (n_tokens >= 2 * static_cast<int64_t>(hn::Lanes(DF())) && w.n_out > 0) {
    if (w.type == DType::kF32) return TowerGemm<float>(w, x, n_tokens, y, bounds, ctx);
    if (w.type == DType::kF16) return TowerGemm<hwy::float16_t>(w, x, n_tokens, y, bounds, ctx);
    if (w.type == DType::kBF16) return TowerGemm<hwy::bfloat16_t>(w, x, n_tokens, y, bounds, ctx);
  }
  // Few tokens gain nothing from a transposed chunk (MatMulSimd); the clamps apart, on every thread.
  if (bounds.ClampsInput()) {
    float* clamped = ctx.scratch().Get<float>(0, KernelScratch::kTowerActT, static_cast<size_t>(n_tokens * w.n_in));
    ctx.pool().ParallelFor(static_cast<size_t>(n_tokens), [&](size_t begin, size_t end, int) {
      for (int64_t i = static_cast<int64_t>(begin) * w.n_in; i < static_cast<int64_t>(end) * w.n_in; ++i) {
        clamped[i] = std::clamp(x[i], bounds.in_min, bounds.in_max);
      }
    });
    x = clamped;
  }
  MatMulSimd(w, x, n_tokens, y, ctx);
  if (bounds.ClampsOutput()) {
    for (int64_t i = 0; i < n_tokens * w.n_out; ++i) y[i] = std::clamp(y[i], bounds.out_min, bounds.out_max);
  }
}
#endif  // HWY_TARGET == HWY_SCALAR

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace gemlet
HWY_AFTER_NAMESPACE();

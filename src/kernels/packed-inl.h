// Packed weights for AVX-512 VNNI (the AVX3_DL target): layouts, packing, the decode GEMV and the
// prefill GEMM's panel decoding over them. Included by matmul_simd.cc after gemm_vnni-inl.h.
//
// A packed matrix is n_out / 16 groups of 16 rows; a group stores its rows' blocks side by side,
// block after block, with every field "row-interleaved": per-row scalars (scales, mins) as 16
// consecutive values, quantized bytes as 64-byte vectors whose 32-bit lane r holds 4 bytes of row r
// (the same 4 byte positions of every row). One vpdpbusd of such a vector with 4 activation bytes
// broadcast to all lanes advances the 16 rows together; a block's integer sums come out one lane
// per row and meet the 16 rows' scales, loaded as one vector. Sizes per group of 16 rows:
//
//   Q4_0 block (288 B = 16 x 18): d[16] (f16), then 4 vectors; vector m, lane r = bytes 4m..4m+3 of
//        row r's qs (low nibbles: values 4m..4m+3, high nibbles: values 16+4m..16+4m+3).
//   Q4_1 block (320 B = 16 x 20): d[16], m[16] (f16), then Q4_0's 4 vectors.
//   Q5_0 block (352 B = 16 x 22): d[16], then per vector m of Q4_0's layout two 64-bit masks (bit
//        4r+b: the fifth bit of row r's value 4m+b, then of value 16+4m+b), then the 4 vectors.
//   Q5_1 block (384 B = 16 x 24): d[16], m[16], then Q5_0's masks and vectors.
//   Q8_0 block (544 B = 16 x 34): d[16], then 8 vectors of q + 128 (unsigned); vector k holds values
//        4k..4k+3.
//   Q4_K super-block (2368 B = 16 x 148; the file's 144 with the 6-bit scales and mins unpacked to
//        bytes): d[16], dmin[16], scale[8 slices][16], min[4 slice pairs][16][2], then 4 chunks of 8
//        vectors; chunk c vector m, lane r = bytes 32c+4m..32c+4m+3 of row r's qs (low nibbles:
//        slice 2c, high nibbles: slice 2c+1, values 4m..4m+3 of the slice).
//   Q5_K super-block (2880 B = 16 x 180): Q4_K's 320 header bytes, then per chunk c and vector m of
//        Q4_K's layout two 64-bit masks (bit 4r+b: the fifth bit of row r's value 4m+b of slice 2c,
//        then of slice 2c+1), then Q4_K's 4 chunks of 8 vectors.
//   Q6_K super-block (3360 B = 16 x 210): d[16], scale[16 groups][16] (int8), then per half h of
//        128 values 8 triples of vectors, triple m: bytes 4m..4m+3 of ql 64h..64h+31, of ql
//        64h+32..64h+63 and of qh 32h..32h+31. (Triples, not three planes of 8 vectors: the
//        three streams 512 B apart defeated the hardware prefetcher on AMD Zen 4, whose Q6_K decode
//        read DRAM at a third of Q4_K's speed; bench/RESULTS.md, session 15.)
//   Q3_K super-block (1824 B = 16 x 114; the file's 110 with the 6-bit scales unpacked to int8,
//        less 32): d[16], scale[16 groups][16], 8 vectors of hmask (vector m: bytes 4m..4m+3),
//        then per half h 8 vectors of qs 32h..32h+31.
//   Q2_K super-block (1344 B = 16 x 84, the file's size): d[16], dmin[16] (f16), then per pair p of
//        16-value groups the rows' scale-min bytes 2p, 2p + 1 as stored ([8 pairs][16 rows][2]),
//        then per half h 8 vectors of qs 32h..32h+31 (vector m: bytes 4m..4m+3).
#if defined(GEMLET_KERNELS_PACKED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GEMLET_KERNELS_PACKED_INL_H_
#undef GEMLET_KERNELS_PACKED_INL_H_
#else
#define GEMLET_KERNELS_PACKED_INL_H_
#endif

#include <hwy/highway.h>

#include <cstring>

#include "kernels/gemm_vnni-inl.h"
#include "kernels/packed_layout.h"
#include "kernels/packed_weights.h"
#include "kernels/packed_x86.h"

#if HWY_TARGET == HWY_AVX3_DL
HWY_BEFORE_NAMESPACE();
namespace gemlet {
namespace HWY_NAMESPACE {
namespace packed {

constexpr int kRows = 16;
static_assert(kRows == PackedWeights::kGroupRows);

// acc += per lane, pairs of signed 16-bit values of a times the two 16-bit values at x2 (broadcast).
HWY_INLINE __m512i DpwssdBroadcast(__m512i acc, __m512i a, const void* x2) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*reinterpret_cast<const int32_t*>(x2)));
  return acc;
}

// acc += per lane, pairs of signed 16-bit values of a times those of b. Assembly: the target attributes
// leave the AVX512_VNNI intrinsics out (GCC refuses to inline _mm512_dpwssd_epi32 here).
HWY_INLINE __m512i Dpwssd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

HWY_INLINE __m512i Load(const uint8_t* p) { return _mm512_loadu_si512(p); }
HWY_INLINE __m128i Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
HWY_INLINE __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// 16 f16 scales as floats.
HWY_INLINE __m512 Halves(const uint8_t* p) { return _mm512_cvtph_ps(Load32(p)); }
HWY_INLINE __m512i Splat(uint8_t b) { return _mm512_set1_epi8(static_cast<char>(b)); }
HWY_INLINE void Prefetch(const uint8_t* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
}

// The packing itself is packed_x86.h's, shared with the AVX2 kernels (packed_avx2-inl.h).
using packed_x86::InterleaveDwords;
using packed_x86::PackBlock32;

// ---------------------------------------------------------------------------------------------
// Per type: kBlockValues and kBlockBytes (one packed block of 16 rows), Pack(16 rows) -> one group,
// Dot(group, activations) -> 16 sums, and Fill(group, panel) for the GEMM: the decoders of
// gemm_vnni-inl.h, reading the packed layout.

// The 32-value types share their block loops: a packed block starts with the 16 rows' f16 scales
// (32 bytes), and Type gives kBlockBytes, kZeroPoint and, per block:
//   PackBlock(block of 16 rows, row_bytes, out)  the packed block from the stored one,
//   BlockSum(g, x, zero)  the 16 rows' integer dot products with the 32 activations x, from `zero`,
//   FillBlock(g, q)       the block's 8 panel vectors (vector k: values 4k..4k+3 of each row).
template <class Type>
struct Packed32 {
  static constexpr int kBlockValues = 32, kGroups = 1;
  static constexpr bool kHasMin = false, kSuperBlockActs = false;
  using Act = vnni::Acts;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t j = 0; j < n_blocks; ++j, out += Type::kBlockBytes) {
      Type::PackBlock(rows + j * sizeof(typename Type::Block), row_bytes, out);
    }
  }
  // The panel GEMM's operations per token (vnni::PanelTile), in its order: the block's scaled sum,
  // then for the types with a min (Q4_1, Q5_1: m[16] after d[16]) m times the activations' sum.
  static HWY_INLINE __m512 Dot(const uint8_t* g, int64_t n_blocks, const Act& a, size_t ahead) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n_blocks; ++j, g += Type::kBlockBytes) {
      if (ahead) Prefetch(g + ahead, Type::kBlockBytes);
      const __m512i sum = Type::BlockSum(g, a.q + 32 * j, _mm512_set1_epi32(a.zero[j]));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(Halves(g), _mm512_set1_ps(a.d[j])), acc);
      if constexpr (Type::kHasMin) acc = _mm512_fmadd_ps(Halves(g + 32), _mm512_set1_ps(a.sum[j]), acc);
    }
    return acc;
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const vnni::Panel& p) {
    for (int64_t j = 0; j < n_blocks; ++j, g += Type::kBlockBytes) {
      Type::FillBlock(g, p.q + 512 * j);
      _mm512_storeu_ps(p.scale + kRows * j, Halves(g));
      if constexpr (Type::kHasMin) _mm512_storeu_ps(p.offset + kRows * j, Halves(g + 32));
    }
  }
};

// A block of 32 4-bit values, 4 vectors from byte kQs of the packed block on (Q4_0's layout).
template <int kQs>
struct Nibbles {
  static HWY_INLINE __m512i BlockSum(const uint8_t* g, const int8_t* x, __m512i zero) {
    const __m512i low = Splat(0x0F), high = Splat(0xF0);
    __m512i lo = zero, hi = _mm512_setzero_si512();  // hi: 16 x the high nibbles
    for (int m = 0; m < 4; ++m) {
      const __m512i v = Load(g + kQs + 64 * m);
      lo = vnni::DpbusdBroadcast(lo, _mm512_and_si512(v, low), x + 4 * m);
      hi = vnni::DpbusdBroadcast(hi, _mm512_and_si512(v, high), x + 16 + 4 * m);
    }
    return _mm512_add_epi32(lo, _mm512_srai_epi32(hi, 4));
  }
  static void FillBlock(const uint8_t* g, uint8_t* q) {
    const __m512i low = Splat(0x0F);
    for (int m = 0; m < 4; ++m) {
      const __m512i v = Load(g + kQs + 64 * m);
      _mm512_storeu_si512(q + 64 * m, _mm512_and_si512(v, low));
      _mm512_storeu_si512(q + 64 * (m + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
    }
  }
};

// A block of 32 5-bit values: Q5_0's layout, its masks at byte kMasks and vectors at kQs.
template <int kMasks, int kQs, class Block>
struct FiveBits {
  static void PackBits(const uint8_t* b, size_t row_bytes, uint8_t* out) {
    packed_x86::PackFifthBits<Block>(b, row_bytes, out + kMasks);
  }
  // The 5-bit values of vector m: values 4m.. in lo, 16+4m.. in hi.
  static HWY_INLINE void Values(const uint8_t* g, int m, __m512i* lo, __m512i* hi) {
    const __m512i low = Splat(0x0F), bit = Splat(0x10);
    uint64_t k[2];
    std::memcpy(k, g + kMasks + 16 * m, 16);
    const __m512i v = Load(g + kQs + 64 * m);
    const __m512i l = _mm512_and_si512(v, low), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    *lo = _mm512_mask_add_epi8(l, _cvtu64_mask64(k[0]), l, bit);
    *hi = _mm512_mask_add_epi8(h, _cvtu64_mask64(k[1]), h, bit);
  }
  static HWY_INLINE __m512i BlockSum(const uint8_t* g, const int8_t* x, __m512i zero) {
    __m512i s0 = zero, s1 = _mm512_setzero_si512();
    for (int m = 0; m < 4; ++m) {
      __m512i lo, hi;
      Values(g, m, &lo, &hi);
      s0 = vnni::DpbusdBroadcast(s0, lo, x + 4 * m);
      s1 = vnni::DpbusdBroadcast(s1, hi, x + 16 + 4 * m);
    }
    return _mm512_add_epi32(s0, s1);
  }
  static void FillBlock(const uint8_t* g, uint8_t* q) {
    for (int m = 0; m < 4; ++m) {
      __m512i lo, hi;
      Values(g, m, &lo, &hi);
      _mm512_storeu_si512(q + 64 * m, lo);
      _mm512_storeu_si512(q + 64 * (m + 4), hi);
    }
  }
};

struct Q4_0 : Packed32<Q4_0>, Nibbles<32> {
  using Block = BlockQ4_0;
  static constexpr int kBlockBytes = packed_x86::kQ4_0Bytes, kZeroPoint = 8;
  static void PackBlock(const uint8_t* b, size_t row_bytes, uint8_t* out) { packed_x86::PackQ4_0Block(b, row_bytes, out); }
};

// Q4_0's layout after d[16] and m[16]: w = d * q + m.
struct Q4_1 : Packed32<Q4_1>, Nibbles<64> {
  using Block = BlockQ4_1;
  static constexpr int kBlockBytes = packed_x86::kQ4_1Bytes, kZeroPoint = 0;
  static constexpr bool kHasMin = true;
  static void PackBlock(const uint8_t* b, size_t row_bytes, uint8_t* out) { packed_x86::PackQ4_1Block(b, row_bytes, out); }
};

struct Q5_0 : Packed32<Q5_0>, FiveBits<32, 96, BlockQ5_0> {
  using Block = BlockQ5_0;
  static constexpr int kBlockBytes = packed_x86::kQ5_0Bytes, kZeroPoint = 16;
  static void PackBlock(const uint8_t* b, size_t row_bytes, uint8_t* out) { packed_x86::PackQ5_0Block(b, row_bytes, out); }
};

// Q5_0's layout after d[16] and m[16]: w = d * q + m.
struct Q5_1 : Packed32<Q5_1>, FiveBits<64, 128, BlockQ5_1> {
  using Block = BlockQ5_1;
  static constexpr int kBlockBytes = packed_x86::kQ5_1Bytes, kZeroPoint = 0;
  static constexpr bool kHasMin = true;
  static void PackBlock(const uint8_t* b, size_t row_bytes, uint8_t* out) { packed_x86::PackQ5_1Block(b, row_bytes, out); }
};

struct Q8_0 : Packed32<Q8_0> {
  using Block = BlockQ8_0;
  static constexpr int kBlockBytes = packed_x86::kQ8_0Bytes, kZeroPoint = 128;
  static void PackBlock(const uint8_t* b, size_t row_bytes, uint8_t* out) { packed_x86::PackQ8_0Block(b, row_bytes, out); }
  static HWY_INLINE __m512i BlockSum(const uint8_t* g, const int8_t* x, __m512i zero) {
    __m512i s0 = zero, s1 = _mm512_setzero_si512();
    for (int k = 0; k < 8; k += 2) {
      s0 = vnni::DpbusdBroadcast(s0, Load(g + 32 + 64 * k), x + 4 * k);
      s1 = vnni::DpbusdBroadcast(s1, Load(g + 96 + 64 * k), x + 4 * k + 4);
    }
    return _mm512_add_epi32(s0, s1);
  }
  static void FillBlock(const uint8_t* g, uint8_t* q) { std::memcpy(q, g + 32, 512); }
};

// The K types' decode runs against activations quantized per 256 values (BlockQ8_K): the integer
// sums of a super-block's slices (Q4_K: 32 values) or groups (Q6_K: 16) meet their 6-bit or 8-bit
// scales in float, one FMA each in a fixed order, and the super-block's sum meets d * d_x once.
// (A product of a sum and its scale is exact in float, |sum * scale| < 2^23, but their total may
// round.) The GEMM's tiles below take the same operations in the same order, so that prefill and
// decode agree bit for bit (docs/determinism.md).
//
// part + sum * (16 unsigned 6-bit scales at sc), one lane per row.
HWY_INLINE __m512 FoldSlice(__m512i sum, const uint8_t* sc, __m512 part) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(Load16(sc))), part);
}
// part + sum * (16 signed 8-bit scales at sc).
HWY_INLINE __m512 FoldGroup(__m512i sum, const uint8_t* sc, __m512 part) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Load16(sc))), part);
}
struct ActK {
  const BlockQ8_K* blocks = nullptr;
  const int32_t* pair_sums = nullptr;  // [super-block][4]: two int16 slice sums (Q4_K's mins)
};

// Q4_K and Q5_K: the same super-block header (d, dmin, the 6-bit scales and mins unpacked to
// bytes), the same float operations per super-block, and the same GEMM panel and tile; they differ
// in how their values are stored and decoded (Pack, Dot, Fill).
struct ScaleMinK {
  static constexpr int kBlockValues = 256;
  static constexpr int kZeroPoint = 0, kGroups = 1;
  static constexpr bool kHasMin = true, kSuperBlockActs = true;  // the GEMM's activations per 256 values
  static constexpr bool kSlicePairSums = true;  // Dot reads ActK::pair_sums
  static constexpr int kScales = packed_x86::kScaleMinScales, kMins = packed_x86::kScaleMinMins;
  static constexpr int kHeaderBytes = packed_x86::kScaleMinHeader;
  using Act = ActK;
  // Super-block i's end in Dot: `scaled` (its slices' sums folded with their scales) meets d * d_x,
  // and the mins (integers: vpdpwssd against the pair sums) meet dmin * d_x.
  static HWY_INLINE __m512 Finish(const uint8_t* g, __m512 scaled, const Act& a, int64_t i, __m512 acc) {
    __m512i mins = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m512i m16 = _mm512_cvtepu8_epi16(Load32(g + kMins + 32 * p));
      mins = DpwssdBroadcast(mins, m16, a.pair_sums + 4 * i + p);
    }
    const __m512 dx = _mm512_set1_ps(a.blocks[i].d);
    acc = _mm512_fmadd_ps(scaled, _mm512_mul_ps(Halves(g), dx), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(Halves(g + 32), dx), acc);
  }
  // The GEMM's panel (kSuperBlockScales): the slices' bytes as vnni::Panel lays them out (the
  // type's Fill), the 6-bit scales as floats in p.scale, and per super-block i at
  // p.offset + kSuper * i the rows' d, dmin and the 4 vectors of 16-bit min pairs Dot reads.
  static constexpr bool kSuperBlockScales = true;
  static constexpr int kSuper = 96;  // floats: d[16], dmin[16], 4 x 64 bytes of mins
  static void FillScales(const uint8_t* g, int64_t i, const vnni::Panel& p) {
    for (int s = 0; s < 8; ++s) {
      const __m512i sc = _mm512_cvtepu8_epi32(Load16(g + kScales + kRows * s));
      _mm512_storeu_ps(p.scale + kRows * (8 * i + s), _mm512_cvtepi32_ps(sc));
    }
    float* super = p.offset + kSuper * i;
    _mm512_storeu_ps(super, Halves(g));
    _mm512_storeu_ps(super + 16, Halves(g + 32));
    for (int q = 0; q < 4; ++q) {
      _mm512_storeu_si512(super + 32 + 16 * q, _mm512_cvtepu8_epi16(Load32(g + kMins + 32 * q)));
    }
  }
  // NT tokens against a panel from Fill: per token the integer sums and float operations of Dot, in
  // its order, so that a token's results are those of decoding it alone, bit for bit.
  template <int NT>
  static HWY_INLINE void Tile(const vnni::Panel& p, int64_t n_blocks, const vnni::Acts& a, int64_t t0, float* out) {
    const int64_t n_super = n_blocks / 8;
    const int8_t* xq[NT];
    const int32_t* xp[NT];
    const float* xd[NT];
    for (int t = 0; t < NT; ++t) {
      xq[t] = a.q + (t0 + t) * n_blocks * 32;
      xp[t] = a.pair_sums + (t0 + t) * n_super * 4;
      xd[t] = a.d + (t0 + t) * n_super;
    }
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_super; ++i) {
      __m512 scaled[NT];
      for (int t = 0; t < NT; ++t) scaled[t] = _mm512_setzero_ps();
      for (int64_t j = 8 * i; j < 8 * i + 8; ++j) {
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
        for (int k = 0; k < 8; ++k) {
          const __m512i w = Load(p.q + 512 * j + 64 * k);
          for (int t = 0; t < NT; ++t) isum[t] = vnni::DpbusdBroadcast(isum[t], w, xq[t] + 32 * j + 4 * k);
        }
        const __m512 sc = _mm512_loadu_ps(p.scale + kRows * j);
        for (int t = 0; t < NT; ++t) scaled[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), sc, scaled[t]);
      }
      const float* super = p.offset + kSuper * i;
      const __m512 d = _mm512_loadu_ps(super), dmin = _mm512_loadu_ps(super + 16);
      for (int t = 0; t < NT; ++t) {
        __m512i mins = _mm512_setzero_si512();
        for (int q = 0; q < 4; ++q) {
          mins = DpwssdBroadcast(mins, _mm512_loadu_si512(super + 32 + 16 * q), xp[t] + 4 * i + q);
        }
        const __m512 dx = _mm512_set1_ps(xd[t][i]);
        acc[t] = _mm512_fmadd_ps(scaled[t], _mm512_mul_ps(d, dx), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dmin, dx), acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + t * kRows, acc[t]);
  }
};

struct Q4_K : ScaleMinK {
  static constexpr int kBlockBytes = packed_x86::kQ4_KBytes, kQs = kHeaderBytes;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    packed_x86::PackQ4_K(rows, row_bytes, n_blocks, out);
  }
  static HWY_INLINE __m512 Dot(const uint8_t* g, int64_t n_blocks, const Act& a, size_t ahead) {
    __m512 acc = _mm512_setzero_ps();
    const __m512i low = Splat(0x0F), high = Splat(0xF0);
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      if (ahead) Prefetch(g + ahead, kQs);
      const int8_t* x = a.blocks[i].qs;
      __m512 scaled = _mm512_setzero_ps();
      for (int c = 0; c < 4; ++c) {
        // Two chains per slice: vpdpbusd's latency, not its throughput, would bound one chain of 8.
        __m512i lo[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        __m512i hi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        const uint8_t* q = g + kQs + 512 * c;
        for (int m = 0; m < 8; ++m) {
          if (ahead) _mm_prefetch(reinterpret_cast<const char*>(q + 64 * m + ahead), _MM_HINT_T0);
          const __m512i v = Load(q + 64 * m);
          lo[m & 1] = vnni::DpbusdBroadcast(lo[m & 1], _mm512_and_si512(v, low), x + 64 * c + 4 * m);
          hi[m & 1] = vnni::DpbusdBroadcast(hi[m & 1], _mm512_and_si512(v, high), x + 64 * c + 32 + 4 * m);
        }
        scaled = FoldSlice(_mm512_add_epi32(lo[0], lo[1]), g + kScales + 32 * c, scaled);
        scaled = FoldSlice(_mm512_srai_epi32(_mm512_add_epi32(hi[0], hi[1]), 4), g + kScales + 32 * c + 16, scaled);
      }
      acc = Finish(g, scaled, a, i, acc);
    }
    return acc;
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const vnni::Panel& p) {
    const __m512i low = Splat(0x0F);
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      for (int c = 0; c < 4; ++c) {
        for (int m = 0; m < 8; ++m) {
          const __m512i v = Load(g + kQs + 512 * c + 64 * m);
          uint8_t* slice = p.q + 512 * (8 * i + 2 * c) + 64 * m;
          _mm512_storeu_si512(slice, _mm512_and_si512(v, low));
          _mm512_storeu_si512(slice + 512, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
        }
      }
      FillScales(g, i, p);
    }
  }
};

// Q5_K: Q4_K's layout with the fifth bits as Q5_0 keeps them, 64-bit masks between the header and
// the nibbles; a set bit adds 16 to its value with one masked byte add before vpdpbusd.
struct Q5_K : ScaleMinK {
  static constexpr int kBlockBytes = packed_x86::kQ5_KBytes, kMasks = packed_x86::kQ5_KMasks;
  static constexpr int kQs = packed_x86::kQ5_KQs;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    packed_x86::PackQ5_K(rows, row_bytes, n_blocks, out);
  }
  // The 5-bit values of chunk c's vector m: values 4m.. of slice 2c in lo, of slice 2c + 1 in hi.
  static HWY_INLINE void Values(const uint8_t* g, int c, int m, __m512i* lo, __m512i* hi) {
    const __m512i low = Splat(0x0F), bit = Splat(0x10);
    uint64_t k[2];
    std::memcpy(k, g + kMasks + 16 * (8 * c + m), 16);
    const __m512i v = Load(g + kQs + 512 * c + 64 * m);
    const __m512i l = _mm512_and_si512(v, low), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    *lo = _mm512_mask_add_epi8(l, _cvtu64_mask64(k[0]), l, bit);
    *hi = _mm512_mask_add_epi8(h, _cvtu64_mask64(k[1]), h, bit);
  }
  static HWY_INLINE __m512 Dot(const uint8_t* g, int64_t n_blocks, const Act& a, size_t ahead) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      if (ahead) Prefetch(g + ahead, kQs);
      const int8_t* x = a.blocks[i].qs;
      __m512 scaled = _mm512_setzero_ps();
      for (int c = 0; c < 4; ++c) {
        // Two chains per slice, as in Q4_K's Dot.
        __m512i lo[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        __m512i hi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int m = 0; m < 8; ++m) {
          if (ahead) _mm_prefetch(reinterpret_cast<const char*>(g + kQs + 512 * c + 64 * m + ahead), _MM_HINT_T0);
          __m512i l, h;
          Values(g, c, m, &l, &h);
          lo[m & 1] = vnni::DpbusdBroadcast(lo[m & 1], l, x + 64 * c + 4 * m);
          hi[m & 1] = vnni::DpbusdBroadcast(hi[m & 1], h, x + 64 * c + 32 + 4 * m);
        }
        scaled = FoldSlice(_mm512_add_epi32(lo[0], lo[1]), g + kScales + 32 * c, scaled);
        scaled = FoldSlice(_mm512_add_epi32(hi[0], hi[1]), g + kScales + 32 * c + 16, scaled);
      }
      acc = Finish(g, scaled, a, i, acc);
    }
    return acc;
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const vnni::Panel& p) {
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      for (int c = 0; c < 4; ++c) {
        for (int m = 0; m < 8; ++m) {
          __m512i l, h;
          Values(g, c, m, &l, &h);
          uint8_t* slice = p.q + 512 * (8 * i + 2 * c) + 64 * m;
          _mm512_storeu_si512(slice, l);
          _mm512_storeu_si512(slice + 512, h);
        }
      }
      FillScales(g, i, p);
    }
  }
};

// Q6_K and Q3_K: 16-value groups with signed 8-bit scales (Q3_K's 6-bit ones less 32), an integer
// zero point and no min. They share the header (d[16], then scale[16 groups][16] as int8), Dot's
// float operations and the GEMM's panel and tile; T gives kBlockBytes, kZeroPoint, Pack,
// Values(g, h, m, out): the values of half h (128 values), vector m, as out[j] = values
// 128h + 32j + 4m.. of the 16 rows, and PrefetchValues(g, h, m): the bytes Values reads.
template <class T>
struct GroupScaleK {
  static constexpr int kBlockValues = 256, kGroups = 2;
  static constexpr bool kHasMin = false, kSuperBlockActs = true;
  static constexpr int kScales = 32, kHeaderBytes = 288;
  using Act = ActK;
  static HWY_INLINE __m512 Dot(const uint8_t* g, int64_t n_blocks, const Act& a, size_t ahead) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_blocks; ++i, g += T::kBlockBytes) {
      if (ahead) Prefetch(g + ahead, kHeaderBytes);
      const BlockQ8_K& xb = a.blocks[i];
      __m512 scaled = _mm512_setzero_ps();
      for (int h = 0; h < 2; ++h) {
        __m512i sums[4][2];  // group 8h + 2j + mh: vectors 4mh..4mh+3 of out[j]
        for (int mh = 0; mh < 2; ++mh) {
          for (int j = 0; j < 4; ++j) sums[j][mh] = _mm512_set1_epi32(-T::kZeroPoint * xb.bsums[8 * h + 2 * j + mh]);
          for (int m = 4 * mh; m < 4 * mh + 4; ++m) {
            if (ahead) T::PrefetchValues(g + ahead, h, m);
            __m512i v[4];
            T::Values(g, h, m, v);
            for (int j = 0; j < 4; ++j) {
              sums[j][mh] = vnni::DpbusdBroadcast(sums[j][mh], v[j], xb.qs + 128 * h + 32 * j + 4 * m);
            }
          }
        }
        for (int grp = 0; grp < 8; ++grp) {
          scaled = FoldGroup(sums[grp / 2][grp % 2], g + kScales + kRows * (8 * h + grp), scaled);
        }
      }
      acc = _mm512_fmadd_ps(scaled, _mm512_mul_ps(Halves(g), _mm512_set1_ps(xb.d)), acc);
    }
    return acc;
  }
  // The GEMM's panel (kSuperBlockScales): values as vnni::Panel lays them out, the 8-bit group
  // scales as floats in p.scale, each super-block's d at p.offset + 16 i.
  static constexpr bool kSuperBlockScales = true;
  static void Fill(const uint8_t* g, int64_t n_blocks, const vnni::Panel& p) {
    for (int64_t i = 0; i < n_blocks; ++i, g += T::kBlockBytes) {
      for (int h = 0; h < 2; ++h) {
        for (int m = 0; m < 8; ++m) {
          __m512i v[4];
          T::Values(g, h, m, v);
          // out[j] holds values 128h + 32j + 4m..: 32-value block 8i + 4h + j, its vector m.
          for (int j = 0; j < 4; ++j) _mm512_storeu_si512(p.q + 512 * (8 * i + 4 * h + j) + 64 * m, v[j]);
        }
      }
      for (int grp = 0; grp < 16; ++grp) {  // group grp of 16 = block grp / 2, scale group grp % 2
        const __m512i sc = _mm512_cvtepi8_epi32(Load16(g + kScales + kRows * grp));
        _mm512_storeu_ps(p.scale + kRows * (16 * i + grp), _mm512_cvtepi32_ps(sc));
      }
      _mm512_storeu_ps(p.offset + kRows * i, Halves(g));
    }
  }
  // NT tokens against a panel from Fill: per token Dot's integer sums and float operations, in its
  // order (the 16 groups of a super-block in turn).
  template <int NT>
  static HWY_INLINE void Tile(const vnni::Panel& p, int64_t n_blocks, const vnni::Acts& a, int64_t t0, float* out) {
    const int64_t n_super = n_blocks / 8;
    const int8_t* xq[NT];
    const int32_t* xz[NT];
    const float* xd[NT];
    for (int t = 0; t < NT; ++t) {
      xq[t] = a.q + (t0 + t) * n_blocks * 32;
      xz[t] = a.zero + (t0 + t) * n_blocks * 2;
      xd[t] = a.d + (t0 + t) * n_super;
    }
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_super; ++i) {
      __m512 scaled[NT];
      for (int t = 0; t < NT; ++t) scaled[t] = _mm512_setzero_ps();
      for (int64_t j = 8 * i; j < 8 * i + 8; ++j) {
        const uint8_t* wq = p.q + 512 * j;
        for (int half = 0; half < 2; ++half) {  // group 2j + half: values 16 half.. of block j
          __m512i isum[NT];
          for (int t = 0; t < NT; ++t) isum[t] = _mm512_set1_epi32(xz[t][2 * j + half]);
          for (int k = 4 * half; k < 4 * half + 4; ++k) {
            const __m512i w = Load(wq + 64 * k);
            for (int t = 0; t < NT; ++t) isum[t] = vnni::DpbusdBroadcast(isum[t], w, xq[t] + 32 * j + 4 * k);
          }
          const __m512 sc = _mm512_loadu_ps(p.scale + kRows * (2 * j + half));
          for (int t = 0; t < NT; ++t) scaled[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), sc, scaled[t]);
        }
      }
      const __m512 d = _mm512_loadu_ps(p.offset + kRows * i);
      for (int t = 0; t < NT; ++t) {
        const __m512 dx = _mm512_set1_ps(xd[t][i]);
        acc[t] = _mm512_fmadd_ps(scaled[t], _mm512_mul_ps(d, dx), acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + t * kRows, acc[t]);
  }
};

struct Q6_K : GroupScaleK<Q6_K> {
  static constexpr int kBlockBytes = 3360, kZeroPoint = 32;
  static constexpr int kQ = kHeaderBytes;
  static constexpr int kTripleBytes = 192;  // vector m of ql's two halves and of qh, side by side
  static HWY_INLINE void PrefetchValues(const uint8_t* g, int h, int m) {
    Prefetch(g + kQ + 1536 * h + kTripleBytes * m, kTripleBytes);
  }
  static HWY_INLINE void Values(const uint8_t* g, int h, int m, __m512i out[4]) {
    const __m512i low = Splat(0x0F);
    const uint8_t* triple = g + kQ + 1536 * h + kTripleBytes * m;
    const __m512i a = Load(triple), b = Load(triple + 64), hb = Load(triple + 128);
    out[0] = _mm512_or_si512(_mm512_and_si512(a, low), _mm512_and_si512(_mm512_slli_epi16(hb, 4), Splat(0x30)));
    out[1] = _mm512_or_si512(_mm512_and_si512(b, low), _mm512_and_si512(_mm512_slli_epi16(hb, 2), Splat(0x30)));
    out[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), low), _mm512_and_si512(hb, Splat(0x30)));
    out[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), low),
                             _mm512_and_si512(_mm512_srli_epi16(hb, 2), Splat(0x30)));
  }
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    packed_x86::PackQ6_K(rows, row_bytes, n_blocks, out);
  }
};

struct Q3_K : GroupScaleK<Q3_K> {
  static constexpr int kBlockBytes = 1824, kZeroPoint = 4;
  static constexpr int kHigh = kHeaderBytes, kQs = kHeaderBytes + 512;
  // Value 128h + 32j + l: bits 2j, 2j + 1 of qs[32h + l], high bit hmask[l] bit 4h + j. Byte-wise
  // the shifts below take every kept bit from its own byte: vpsrlw/vpsllw only move bits across
  // bytes into positions the masks drop.
  static HWY_INLINE void PrefetchValues(const uint8_t* g, int h, int m) {
    if (h == 0) Prefetch(g + kHigh + 64 * m, 64);
    Prefetch(g + kQs + 512 * h + 64 * m, 64);
  }
  static HWY_INLINE void Values(const uint8_t* g, int h, int m, __m512i out[4]) {
    const __m512i q = Load(g + kQs + 512 * h + 64 * m), hb = Load(g + kHigh + 64 * m);
    const __m512i two = Splat(0x03), four = Splat(0x04);
    for (int j = 0; j < 4; ++j) {
      const int up = 4 * h + j - 2;  // the high bit's shift down to bit 2
      const __m512i high = up >= 0 ? _mm512_srli_epi16(hb, up) : _mm512_slli_epi16(hb, -up);
      const __m512i low = _mm512_and_si512(_mm512_srli_epi16(q, 2 * j), two);
      out[j] = _mm512_ternarylogic_epi32(low, high, four, 0xF8);  // low | (high & four)
    }
  }
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t i = 0; i < n_blocks; ++i, out += kBlockBytes) {
      const uint8_t* b = rows + i * sizeof(BlockQ3_K);
      for (int r = 0; r < kRows; ++r) {
        const BlockQ3_K& blk = *reinterpret_cast<const BlockQ3_K*>(b + row_bytes * r);
        std::memcpy(out + 2 * r, &blk.d, 2);
        int8_t sc[16];
        UnpackQ3KScales(blk.scales, sc);
        for (int grp = 0; grp < 16; ++grp) std::memcpy(out + kScales + kRows * grp + r, &sc[grp], 1);
      }
      for (int m = 0; m < 8; ++m) {
        InterleaveDwords(b + offsetof(BlockQ3_K, hmask) + 4 * m, row_bytes, out + kHigh + 64 * m);
        for (int h = 0; h < 2; ++h) {
          InterleaveDwords(b + offsetof(BlockQ3_K, qs) + 32 * h + 4 * m, row_bytes, out + kQs + 512 * h + 64 * m);
        }
      }
    }
  }
};

// Q2_K: 2-bit values in 16-value groups, each with a 4-bit scale (low nibble of the file's byte)
// and a 4-bit min (high nibble). Every product here is an integer: the scaled sum
// T = sum_g sc_g * sum_{i in g} q_i x_i (|T| <= 16 * 15 * 6144 < 2^21) and the mins' sum
// M = sum_g m_g * bsum_g (16-value sums of x_q) are exact in int32, so the GEMV and the GEMM reach
// them by different routes (the GEMV scales each group's sum, the GEMM's panel holds sc * q) and
// still agree bit for bit; the float operations per super-block are then two, as ScaleMinK's: T
// meets d * d_x, M dmin * d_x. Exact integers also round less than Q3_K's float fold per group.
struct Q2_K {
  static constexpr int kBlockValues = 256, kBlockBytes = 1344;
  static constexpr int kZeroPoint = 0, kGroups = 2;
  static constexpr bool kHasMin = true, kSuperBlockActs = true;
  static constexpr int kScales = 64, kQs = 320;
  using Act = ActK;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t i = 0; i < n_blocks; ++i, out += kBlockBytes) {
      const uint8_t* b = rows + i * sizeof(BlockQ2_K);
      for (int r = 0; r < kRows; ++r) {
        const BlockQ2_K& blk = *reinterpret_cast<const BlockQ2_K*>(b + row_bytes * r);
        std::memcpy(out + 2 * r, &blk.d, 2);
        std::memcpy(out + 32 + 2 * r, &blk.dmin, 2);
        for (int p = 0; p < 8; ++p) std::memcpy(out + kScales + 32 * p + 2 * r, blk.scales + 2 * p, 2);
      }
      for (int h = 0; h < 2; ++h) {
        for (int m = 0; m < 8; ++m) {
          InterleaveDwords(b + offsetof(BlockQ2_K, qs) + 32 * h + 4 * m, row_bytes, out + kQs + 512 * h + 64 * m);
        }
      }
    }
  }
  // Groups 2p and 2p + 1 of the 16 rows: their scales, and their mins, as the 16-bit pairs of each lane.
  static HWY_INLINE void ScaleMinPair(const uint8_t* g, int p, __m512i* scale, __m512i* min) {
    const __m512i both = _mm512_cvtepu8_epi16(Load32(g + kScales + 32 * p));
    *scale = _mm512_and_si512(both, _mm512_set1_epi16(15));
    *min = _mm512_srli_epi16(both, 4);
  }
  // The two float operations of a super-block (Dot's and Tile's alike).
  static HWY_INLINE __m512 Finish(__m512 d, __m512 dmin, __m512i scaled, __m512i mins, float d_x, __m512 acc) {
    const __m512 dx = _mm512_set1_ps(d_x);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(scaled), _mm512_mul_ps(d, dx), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dmin, dx), acc);
  }
  // Plane j of a vector (values 32j + 4m.. of its half) is masked in place, not shifted down: its
  // sums come out 4^j times too large, exactly, and one shift per group pair takes that off.
  static HWY_INLINE __m512 Dot(const uint8_t* g, int64_t n_blocks, const Act& a, size_t ahead) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      if (ahead) Prefetch(g + ahead, kBlockBytes);
      const BlockQ8_K& xb = a.blocks[i];
      __m512i scaled = _mm512_setzero_si512(), mins = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        __m512i sums[4][2];  // 4^j times the sum of group 8h + 2j + mh (vectors 4mh..4mh+3)
        for (auto& s : sums) s[0] = s[1] = _mm512_setzero_si512();
        for (int m = 0; m < 8; ++m) {
          const __m512i v = Load(g + kQs + 512 * h + 64 * m);
          for (int j = 0; j < 4; ++j) {
            const __m512i q = _mm512_and_si512(v, Splat(static_cast<uint8_t>(3 << (2 * j))));
            sums[j][m / 4] = vnni::DpbusdBroadcast(sums[j][m / 4], q, xb.qs + 128 * h + 32 * j + 4 * m);
          }
        }
        for (int j = 0; j < 4; ++j) {  // groups 2p, 2p + 1 (|sum| <= 16 * 3 * 128) as a lane's two int16
          const int p = 4 * h + j;
          const __m512i pair = _mm512_mask_blend_epi16(0xAAAAAAAA, _mm512_srai_epi32(sums[j][0], 2 * j),
                                                       _mm512_slli_epi32(sums[j][1], 16 - 2 * j));
          __m512i scale, min;
          ScaleMinPair(g, p, &scale, &min);
          scaled = Dpwssd(scaled, pair, scale);
          mins = DpwssdBroadcast(mins, min, xb.bsums + 2 * p);
        }
      }
      acc = Finish(Halves(g), Halves(g + 32), scaled, mins, xb.d, acc);
    }
    return acc;
  }
  // The GEMM's panel (kSuperBlockScales): bytes sc * q (at most 45), in vnni::Panel's layout, and
  // per super-block i at p.offset + kSuper * i the rows' d, dmin and the 8 vectors of min pairs.
  static constexpr bool kSuperBlockScales = true;
  static constexpr int kSuper = 160;  // floats: d[16], dmin[16], 8 x 64 bytes of min pairs
  // Group grp's scales of the 16 rows, lane r's 4 bytes each row r's.
  static HWY_INLINE __m512i GroupScales(const uint8_t* g, int grp) {
    alignas(64) static constexpr uint8_t kSpread[64] = {
        0,  0,  0,  0,  2,  2,  2,  2,  4,  4,  4,  4,  6,  6,  6,  6,  8,  8,  8,  8,  10, 10,
        10, 10, 12, 12, 12, 12, 14, 14, 14, 14, 16, 16, 16, 16, 18, 18, 18, 18, 20, 20, 20, 20,
        22, 22, 22, 22, 24, 24, 24, 24, 26, 26, 26, 26, 28, 28, 28, 28, 30, 30, 30, 30};
    const __m512i bytes = _mm512_zextsi256_si512(Load32(g + kScales + 32 * (grp / 2) + grp % 2));
    return _mm512_and_si512(_mm512_permutexvar_epi8(_mm512_load_si512(kSpread), bytes), Splat(15));
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const vnni::Panel& p) {
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      __m512i scales[16];
      for (int grp = 0; grp < 16; ++grp) scales[grp] = GroupScales(g, grp);
      for (int h = 0; h < 2; ++h) {
        for (int m = 0; m < 8; ++m) {
          const __m512i v = Load(g + kQs + 512 * h + 64 * m);
          for (int j = 0; j < 4; ++j) {  // values 128h + 32j + 4m..: block 8i + 4h + j, its vector m
            const __m512i q = _mm512_srli_epi16(v, 2 * j), s = scales[8 * h + 2 * j + m / 4];
            const __m512i once = _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(q, Splat(1)), s);
            const __m512i twice = _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(q, Splat(2)), _mm512_add_epi8(s, s));
            _mm512_storeu_si512(p.q + 512 * (8 * i + 4 * h + j) + 64 * m, _mm512_add_epi8(once, twice));
          }
        }
      }
      float* super = p.offset + kSuper * i;
      _mm512_storeu_ps(super, Halves(g));
      _mm512_storeu_ps(super + 16, Halves(g + 32));
      for (int q = 0; q < 8; ++q) {
        __m512i scale, min;
        ScaleMinPair(g, q, &scale, &min);
        _mm512_storeu_si512(super + 32 + 16 * q, min);
      }
    }
  }
  // NT tokens against a panel from Fill: per token the integers of Dot, then its float operations.
  template <int NT>
  static HWY_INLINE void Tile(const vnni::Panel& p, int64_t n_blocks, const vnni::Acts& a, int64_t t0, float* out) {
    const int64_t n_super = n_blocks / 8;
    const int8_t* xq[NT];
    const int32_t* xp[NT];
    const float* xd[NT];
    for (int t = 0; t < NT; ++t) {
      xq[t] = a.q + (t0 + t) * n_blocks * 32;
      xp[t] = a.pair_sums + (t0 + t) * n_super * 8;
      xd[t] = a.d + (t0 + t) * n_super;
    }
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_super; ++i) {
      __m512i isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
      for (int64_t k = 64 * i; k < 64 * i + 64; ++k) {  // vector k % 8 of block k / 8
        const __m512i w = Load(p.q + 64 * k);
        for (int t = 0; t < NT; ++t) isum[t] = vnni::DpbusdBroadcast(isum[t], w, xq[t] + 4 * k);
      }
      const float* super = p.offset + kSuper * i;
      const __m512 d = _mm512_loadu_ps(super), dmin = _mm512_loadu_ps(super + 16);
      for (int t = 0; t < NT; ++t) {
        __m512i mins = _mm512_setzero_si512();
        for (int q = 0; q < 8; ++q) {
          mins = DpwssdBroadcast(mins, _mm512_loadu_si512(super + 32 + 16 * q), xp[t] + 8 * i + q);
        }
        acc[t] = Finish(d, dmin, isum[t], mins, xd[t][i], acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + t * kRows, acc[t]);
  }
};

// ---------------------------------------------------------------------------------------------
// Drivers.

using packing::LayoutOf;

// Decode: n_tokens tokens (one, or the few of a batch of sequences); the pool takes the groups of
// 16 rows in streaming chunks (ThreadPool::ParallelForStreaming). Each group is read from memory
// once, by the first token's dot product (prefetching `ahead` bytes ahead), and is still in L1/L2
// for the others'; every token's dot products are those of decoding it alone, bit for bit. y: [n_tokens, n_out].
template <class T>
void Gemv(const WeightMatrix& w, const uint8_t* data, const typename T::Act* acts, int n_tokens, float* y, size_t ahead,
          KernelContext& ctx) {
  const int64_t n_blocks = w.n_in / T::kBlockValues;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * T::kBlockBytes;
  ctx.pool().ParallelForStreaming(static_cast<size_t>(w.n_out / kRows), [&](size_t begin, size_t end, int) {
    for (size_t g = begin; g < end; ++g) {
      for (int t = 0; t < n_tokens; ++t) {
        _mm512_storeu_ps(y + static_cast<size_t>(t) * w.n_out + g * kRows,
                         T::Dot(data + g * group_bytes, n_blocks, acts[t], t == 0 ? ahead : 0));
      }
    }
  });
}

// Prefill: the VNNI GEMM with panels filled from the packed groups.
template <class T>
void Gemm(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  const int64_t n_blocks = w.n_in / T::kBlockValues;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * T::kBlockBytes;
  vnni::Gemm<T>(w, x, n_tokens, y, ctx, [&](int64_t row0, int rows, const vnni::Panel& p) {
    (void)rows;  // always 16: packed matrices have whole groups
    T::Fill(data + static_cast<size_t>(row0 / kRows) * group_bytes, n_blocks, p);
  });
}

}  // namespace packed
// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace gemlet
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // include guard

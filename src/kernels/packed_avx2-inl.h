// Packed weights on AVX2 (the AVX2 target, and its AVX2_VNNI table): the decode GEMV's and the
// prefill GEMM's kernel over packed_x86.h's 16-row layouts, the ones AVX-512 VNNI reads
// (packed-inl.h gives them). Each 64-byte vector there holds 4 bytes of each of 16 rows; here it is
// two 256-bit halves of 8 rows: a group is computed half by half, in one pass for decode (one token)
// and in two for a tile of tokens, whose chains would not fit 16 registers twice. Included by
// matmul_simd.cc.
//
// The products: 4 unsigned weight bytes of a row (one 32-bit lane) against 4 signed activation bytes
// broadcast to every lane, summed into that lane. AVX2 has no vpdpbusd: vpmaddubsw gives 16-bit
// pair sums that are added in 16 bits (each type keeps its chains short enough that no sum passes
// 2^15: the 4-bit types 8 additions of at most 2 * 15 * 127, the 5-bit ones 4 of 2 * 31 * 127,
// Q6_K 2 of 2 * 63 * 127) and widened once by vpmaddwd, against ones or, for the K types, against the rows'
// integer scales, which applies them for free. Q8_0's bytes reach 255 (q + 128), too many for
// vpmaddubsw's pair sums: its sign moves onto the activations (|q| <= 128) as llama.cpp does. Where
// the CPU has AVX-VNNI (Alder Lake and later, Zen 5) the AVX2_VNNI table runs vpdpbusd instead (its
// VEX encoding; on CPUs with AVX-512 VNNI but not AVX-VNNI, Zen 4 and Ice Lake, the EVEX encoding
// of the same 256-bit instruction, which is how this host tests it).
//
// Every integer sum is exact either way (a block's, or a K super-block's sum with its integer scales
// and mins applied, |sum| < 2^31), so both tables give the same integers, and what rounds is a
// fixed sequence of float operations per block (32-value types) or super-block (K types) and per
// token. A tile of NT tokens runs that sequence for each of them: a token's results are those of
// decoding it alone, bit for bit, whatever NT, the GEMV or the GEMM (docs/determinism.md).
#if defined(GEMLET_KERNELS_PACKED_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GEMLET_KERNELS_PACKED_AVX2_INL_H_
#undef GEMLET_KERNELS_PACKED_AVX2_INL_H_
#else
#define GEMLET_KERNELS_PACKED_AVX2_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/act_quant.h"
#include "kernels/kernel_context.h"
#include "kernels/packed_layout.h"
#include "kernels/packed_weights.h"
#include "kernels/packed_x86.h"

#if HWY_TARGET == HWY_AVX2
HWY_BEFORE_NAMESPACE();
namespace gemlet {
namespace HWY_NAMESPACE {
namespace packed {

constexpr int kRows = packed_x86::kRows;
static_assert(kRows == PackedWeights::kGroupRows);

// How 8-bit products are summed: vpmaddubsw + vpmaddwd, or vpdpbusd in its VEX (AVX-VNNI) or EVEX
// (AVX-512 VNNI with VL) encoding.
enum class Dp { kMaddubs, kVexVnni, kEvexVnni };

// acc += per lane, the dot product of w's 4 unsigned bytes with x's 4 signed ones. Assembly: the
// AVX2 target's attributes leave both VNNI extensions out, and the run-time check chose this path.
template <Dp kDp>
HWY_INLINE __m256i Dpbusd(__m256i acc, __m256i w, __m256i x) {
  if constexpr (kDp == Dp::kVexVnni) {
    asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(w), "x"(x));
  } else {
    asm("%{evex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(w), "x"(x));
  }
  return acc;
}

HWY_INLINE __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
HWY_INLINE void Store32(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
HWY_INLINE __m128i Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
HWY_INLINE __m128i Load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
// 8 f16 scales (one half's rows) as floats.
HWY_INLINE __m256 Halves(const uint8_t* p) { return _mm256_cvtph_ps(Load16(p)); }
// The 4 activation bytes at x in every lane.
HWY_INLINE __m256i Broadcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}
HWY_INLINE __m256i Splat(uint8_t b) { return _mm256_set1_epi8(static_cast<char>(b)); }
HWY_INLINE void Prefetch(const uint8_t* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
}
// Decode's prefetch for the K types, spread over a super-block's kParts steps (this is step part):
// part of the kBytes block `ahead` bytes on. Asked for at once, a 16-row super-block (2.3-3.4 KB,
// 36-53 lines) took more line-fill buffers than a core has, and the loads of the block being
// computed queued behind them: Q4_K's GEMV read 14 GB/s from DRAM on one Zen 3 core where Q4_0's,
// whose 288-byte blocks ask for 5 lines at a time, read 19.
template <size_t kBytes, int kParts>
HWY_INLINE void PrefetchPart(const uint8_t* g, size_t ahead, int part) {
  constexpr size_t kPart = (kBytes + kParts - 1) / kParts;
  if (ahead) Prefetch(g + ahead + kPart * static_cast<size_t>(part), kPart);
}
// 8 rows' integer scales (int32 lanes, |s| < 2^15) and the same as two int16 per lane, vpmaddwd's
// multiplier of a lane's two 16-bit sums.
struct Scales {
  HWY_INLINE explicit Scales(__m256i v)
      : s32(v), s16(_mm256_or_si256(_mm256_slli_epi32(v, 16), _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)))) {}
  // From s16 (its high half is the scale as int16).
  static HWY_INLINE Scales FromPairs(__m256i s16) { return Scales(_mm256_srai_epi32(s16, 16), s16); }
  __m256i s32, s16;

 private:
  HWY_INLINE Scales(__m256i v32, __m256i v16) : s32(v32), s16(v16) {}
};

// One chain of products per lane (see Dpbusd): 16-bit pair sums with vpmaddubsw, kept below 2^15
// by the caller, or vpdpbusd's int32 sums.
template <Dp kDp>
struct Chain {
  HWY_INLINE Chain() : v(_mm256_setzero_si256()) {}
  HWY_INLINE void Add(__m256i w, __m256i x) {
    if constexpr (kDp == Dp::kMaddubs) {
      v = _mm256_add_epi16(v, _mm256_maddubs_epi16(w, x));
      // GCC's reassociation would otherwise turn the chains of a fully unrolled loop into trees
      // of sums, every product live at once: most of them spilled, a store and a load each.
      asm("" : "+x"(v));
    } else {
      v = Dpbusd<kDp>(v, w, x);
    }
  }
  HWY_INLINE __m256i Total() const {
    if constexpr (kDp == Dp::kMaddubs) return _mm256_madd_epi16(v, _mm256_set1_epi16(1));
    else return v;
  }
  // A chain's sums times per-lane scales, and the sum of two chains times them.
  static HWY_INLINE __m256i Scaled(const Chain& a, const Scales& s) {
    if constexpr (kDp == Dp::kMaddubs) return _mm256_madd_epi16(a.v, s.s16);
    else return _mm256_mullo_epi32(a.v, s.s32);
  }
  static HWY_INLINE __m256i Scaled(const Chain& a, const Chain& b, const Scales& s) {
    if constexpr (kDp == Dp::kMaddubs) return _mm256_add_epi32(_mm256_madd_epi16(a.v, s.s16), _mm256_madd_epi16(b.v, s.s16));
    else return _mm256_mullo_epi32(_mm256_add_epi32(a.v, b.v), s.s32);
  }
  __m256i v;
};

// One token's activations for the 32-value types: its blocks (act_quant.h) and, per block, the
// start of its integer sum, -z * sum q for the type's zero point z (T::kActZero; ZeroStarts): a
// broadcast from memory, where computing it per block and token took two shuffles besides.
struct Act32 {
  const BlockQ8x32* blocks = nullptr;
  const int32_t* zero = nullptr;
};
// sums[i] (a block's sum of q) becomes -z * sums[i], in place.
inline void ZeroStarts(int z, int32_t* sums, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sums[i] *= -z;
}
// For the K types: its super-blocks and, for Q4_K and Q5_K's mins, per super-block 4 pairs of slice
// sums of q (two int16 in an int32: slices 2p, 2p + 1).
struct ActK {
  const BlockQ8_K* blocks = nullptr;
  const int32_t* pair_sums = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Per type: kBlockValues, kBlockBytes, Pack (packed_x86.h), Act, and Dot<kDp, NT, kHalves>(g,
// n_blocks, a[NT], h0, acc[kHalves][NT], ahead): rows 8h0.. of group g (8 rows per half) against NT
// tokens, one float vector per half and token; each half's operations are the same however many.

// The 32-value types' float operations per block and token: acc += float(sum) * (d_w * d_x).
template <int NT>
HWY_INLINE void FinishBlock32(const __m256i* sum, __m256 dw, const Act32* a, int64_t j, __m256* acc) {
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(dw, _mm256_set1_ps(a[t].blocks[j].d)), acc[t]);
  }
}

struct Q8_0 {
  static constexpr int kBlockValues = 32, kBlockBytes = packed_x86::kQ8_0Bytes;
  static constexpr int kActZero = 128;  // the VNNI path's stored q + 128 (vpmaddubsw's needs none)
  using Act = Act32;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t j = 0; j < n_blocks; ++j) packed_x86::PackQ8_0Block(rows + j * sizeof(BlockQ8_0), row_bytes, out + j * kBlockBytes);
  }
  // VNNI: the stored q + 128 against x, less 128 sum x. vpmaddubsw: q itself (the stored bytes xor
  // 0x80), |q| as the unsigned operand and x with q's sign, each pair sum widened at once (one pair
  // reaches 2 * 128 * 127).
  template <Dp kDp, int NT, int kHalves = 1, bool kDec = false>
  static HWY_INLINE void Dot(const uint8_t* g, int64_t n_blocks, const Act* a, int h0, __m256* accs, size_t ahead,
                             const uint8_t* dec = nullptr) {
    const __m256i ones = _mm256_set1_epi16(1), bias = Splat(0x80);
    for (int t = 0; t < kHalves * NT; ++t) accs[t] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      if (ahead) Prefetch(g + ahead, kBlockBytes);
      HWY_UNROLL(2)
      for (int hh = 0; hh < kHalves; ++hh) {  // rows 8h..8h+7
        const int h = h0 + hh;
        __m256* acc = accs + hh * NT;
        __m256i sum[NT];
        if constexpr (kDp == Dp::kMaddubs) {
          for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
          for (int k = 0; k < 8; ++k) {
            const __m256i q = _mm256_xor_si256(Load32(g + 32 + 64 * k + 32 * h), bias);
            const __m256i abs_q = _mm256_sign_epi8(q, q);
            for (int t = 0; t < NT; ++t) {
              const __m256i x = _mm256_sign_epi8(Broadcast4(a[t].blocks[j].qs + 4 * k), q);
              sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, x), ones));
              asm("" : "+x"(sum[t]));  // a chain, not a tree of sums (Chain::Add says why)
            }
          }
        } else {
          Chain<kDp> c[NT];
          for (int k = 0; k < 8; ++k) {
            const __m256i v = Load32(g + 32 + 64 * k + 32 * h);
            for (int t = 0; t < NT; ++t) c[t].Add(v, Broadcast4(a[t].blocks[j].qs + 4 * k));
          }
          for (int t = 0; t < NT; ++t) sum[t] = _mm256_add_epi32(c[t].Total(), _mm256_set1_epi32(a[t].zero[j]));
        }
        FinishBlock32<NT>(sum, Halves(g + 16 * h), a, j, acc);
      }
    }
  }
};

// The K types: a super-block's integer sums meet their rows' integer scales in integers (an exact
// int32 per row), and the float operations per super-block and token are one or two.
//
// 8 rows' 6-bit scales (bytes at p) as Scales.
HWY_INLINE Scales UnsignedScales(const uint8_t* p) { return Scales(_mm256_cvtepu8_epi32(Load8(p))); }
// Q4_K's and Q5_K's end of super-block: acc += T * (d * d_x) - M * (dmin * d_x), T the scaled sums, M
// the mins (their 6-bit values against the slice sums of x, vpmaddwd on the pairs of ActK).
template <int NT>
HWY_INLINE void FinishScaleMin(const uint8_t* g, int h, const ActK* a, int64_t i, const __m256i* scaled, __m256* acc) {
  using packed_x86::kScaleMinMins;
  __m256i mins16[4];
  for (int p = 0; p < 4; ++p) mins16[p] = _mm256_cvtepu8_epi16(Load16(g + kScaleMinMins + 32 * p + 16 * h));
  const __m256 d = Halves(g + 16 * h), dmin = Halves(g + 32 + 16 * h);
  for (int t = 0; t < NT; ++t) {
    __m256i mins = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      mins = _mm256_add_epi32(mins, _mm256_madd_epi16(mins16[p], _mm256_set1_epi32(a[t].pair_sums[4 * i + p])));
    }
    const __m256 dx = _mm256_set1_ps(a[t].blocks[i].d);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(scaled[t]), _mm256_mul_ps(d, dx), acc[t]);
    acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dmin, dx), acc[t]);
  }
}

// Q4_K: per slice (32 values, 8 vectors: low nibbles slice 2c, high ones 2c + 1 of chunk c) a chain
// of 8 additions of at most 2 * 15 * 127, times its 6-bit scale: |T| <= 8 * 63 * 32 * 15 * 127.
struct Q4_K {
  static constexpr int kBlockValues = 256, kBlockBytes = packed_x86::kQ4_KBytes;
  static constexpr bool kSlicePairSums = true;
  using Act = ActK;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    packed_x86::PackQ4_K(rows, row_bytes, n_blocks, out);
  }
  // Decoded (Run): per super-block, half h, chunk c, vector m, the low nibbles' 32 bytes and then
  // the high ones' at 2048 h + 512 c + 64 m; then half h's slice s's scales as Scales::s16 at
  // kDecodedScales + 256 h + 32 s.
  static constexpr int kDecodedScales = kRows * kBlockValues, kDecodedBytes = kDecodedScales + 2 * 8 * 32;
  static void Decode(const uint8_t* g, int64_t n_blocks, uint8_t* out) {
    const __m256i low = Splat(0x0F);
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes, out += kDecodedBytes) {
      for (int h = 0; h < 2; ++h) {
        for (int sl = 0; sl < 8; ++sl) {
          Store32(out + kDecodedScales + 256 * h + 32 * sl, UnsignedScales(g + packed_x86::kScaleMinScales + kRows * sl + 8 * h).s16);
        }
        for (int c = 0; c < 4; ++c) {
          for (int m = 0; m < 8; ++m) {
            const __m256i v = Load32(g + packed_x86::kScaleMinHeader + 512 * c + 64 * m + 32 * h);
            Store32(out + 2048 * h + 512 * c + 64 * m, _mm256_and_si256(v, low));
            Store32(out + 2048 * h + 512 * c + 64 * m + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
          }
        }
      }
    }
  }
  template <Dp kDp, int NT, int kHalves = 1, bool kDec = false>
  static HWY_INLINE void Dot(const uint8_t* g, int64_t n_blocks, const Act* a, int h0, __m256* accs, size_t ahead,
                             const uint8_t* dec = nullptr) {
    using packed_x86::kScaleMinHeader;
    using packed_x86::kScaleMinScales;
    const __m256i low = Splat(0x0F);
    for (int t = 0; t < kHalves * NT; ++t) accs[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      HWY_UNROLL(2)
      for (int hh = 0; hh < kHalves; ++hh) {  // rows 8h..8h+7
        const int h = h0 + hh;
        __m256* acc = accs + hh * NT;
        __m256i scaled[NT];
        for (int t = 0; t < NT; ++t) scaled[t] = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          PrefetchPart<kBlockBytes, 4 * kHalves>(g, ahead, 4 * hh + c);
          Chain<kDp> lo[NT], hi[NT];
          const uint8_t* q = g + kScaleMinHeader + 512 * c + 32 * h;
          HWY_UNROLL(8)
          for (int m = 0; m < 8; ++m) {
            __m256i l, hh;
            if constexpr (kDec) {
              const uint8_t* d = dec + i * kDecodedBytes + 2048 * h + 512 * c + 64 * m;
              l = Load32(d);
              hh = Load32(d + 32);
            } else {
              const __m256i v = Load32(q + 64 * m);
              l = _mm256_and_si256(v, low);
              hh = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            }
            for (int t = 0; t < NT; ++t) {
              lo[t].Add(l, Broadcast4(a[t].blocks[i].qs + 64 * c + 4 * m));
              hi[t].Add(hh, Broadcast4(a[t].blocks[i].qs + 64 * c + 32 + 4 * m));
            }
          }
          const Scales s_lo = kDec ? Scales::FromPairs(Load32(dec + i * kDecodedBytes + kDecodedScales + 256 * h + 64 * c))
                                   : UnsignedScales(g + kScaleMinScales + kRows * 2 * c + 8 * h);
          const Scales s_hi = kDec ? Scales::FromPairs(Load32(dec + i * kDecodedBytes + kDecodedScales + 256 * h + 64 * c + 32))
                                   : UnsignedScales(g + kScaleMinScales + kRows * (2 * c + 1) + 8 * h);
          for (int t = 0; t < NT; ++t) {
            scaled[t] = _mm256_add_epi32(scaled[t], _mm256_add_epi32(Chain<kDp>::Scaled(lo[t], s_lo), Chain<kDp>::Scaled(hi[t], s_hi)));
          }
        }
        FinishScaleMin<NT>(g, h, a, i, scaled, acc);
      }
    }
  }
};

// 32 bits of fifth-bit mask (bit k: byte k of a half's vector) as bytes of 16 or 0.
HWY_INLINE __m256i FifthBits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select), Splat(0x10));
}

// The 4- and 5-bit 32-value types: Q4_0 (q - 8) and Q5_0 (q - 16), zero points taken off in
// integers, and Q4_1 and Q5_1 (d q + m: one more float operation per block, m times d_x sum x). A
// 4-bit chain takes a block's 8 additions of at most 2 * 15 * 127; 5-bit values (the masks' fifth
// bits added) take two chains of 4 additions of at most 2 * 31 * 127.
template <int kBytes, int kQs, int kMasks, int kZero, bool kMin, void (*kPack)(const uint8_t*, size_t, uint8_t*),
          class Block>
struct Bits32 {
  static constexpr int kBlockValues = 32, kBlockBytes = kBytes, kActZero = kZero;
  static constexpr bool kFiveBits = kMasks > 0;
  using Act = Act32;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t j = 0; j < n_blocks; ++j) kPack(rows + j * sizeof(Block), row_bytes, out + j * kBlockBytes);
  }
  // A half's vector m of values as bytes (fifth bits added): values 4m.. (lo) or 16 + 4m.. (hi).
  static HWY_INLINE void Values(const uint8_t* g, int m, int h, __m256i& lo, __m256i& hi) {
    const __m256i low = Splat(0x0F);
    const __m256i v = Load32(g + kQs + 64 * m + 32 * h);
    lo = _mm256_and_si256(v, low);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
    if constexpr (kFiveBits) {
      lo = _mm256_or_si256(lo, FifthBits(g + kMasks + 16 * m + 4 * h));
      hi = _mm256_or_si256(hi, FifthBits(g + kMasks + 16 * m + 8 + 4 * h));
    }
  }
  // Decoded (Run): per block, half h, vector m, lo's 32 bytes and then hi's at 256 h + 64 m.
  static constexpr int kDecodedBytes = kRows * kBlockValues;
  static void Decode(const uint8_t* g, int64_t n_blocks, uint8_t* out) {
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes, out += kDecodedBytes) {
      for (int h = 0; h < 2; ++h) {
        for (int m = 0; m < 4; ++m) {
          __m256i lo, hi;
          Values(g, m, h, lo, hi);
          Store32(out + 256 * h + 64 * m, lo);
          Store32(out + 256 * h + 64 * m + 32, hi);
        }
      }
    }
  }
  template <Dp kDp, int NT, int kHalves = 1, bool kDec = false>
  static HWY_INLINE void Dot(const uint8_t* g, int64_t n_blocks, const Act* a, int h0, __m256* accs, size_t ahead,
                             const uint8_t* dec = nullptr) {
    constexpr int kChainVectors = kFiveBits ? 2 : 4;
    for (int t = 0; t < kHalves * NT; ++t) accs[t] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      if (ahead) Prefetch(g + ahead, kBlockBytes);
      HWY_UNROLL(2)
      for (int hh = 0; hh < kHalves; ++hh) {  // rows 8h..8h+7
        const int h = h0 + hh;
        __m256* acc = accs + hh * NT;
        __m256i sum[NT];
        for (int t = 0; t < NT; ++t) sum[t] = kZero != 0 ? _mm256_set1_epi32(a[t].zero[j]) : _mm256_setzero_si256();
        for (int m0 = 0; m0 < 4; m0 += kChainVectors) {
          Chain<kDp> c[NT];
          HWY_UNROLL(4)
          for (int m = m0; m < m0 + kChainVectors; ++m) {
            __m256i lo, hi;
            if constexpr (kDec) {
              const uint8_t* d = dec + j * kDecodedBytes + 256 * h + 64 * m;
              lo = Load32(d);
              hi = Load32(d + 32);
            } else {
              Values(g, m, h, lo, hi);
            }
            for (int t = 0; t < NT; ++t) {
              c[t].Add(lo, Broadcast4(a[t].blocks[j].qs + 4 * m));
              c[t].Add(hi, Broadcast4(a[t].blocks[j].qs + 16 + 4 * m));
            }
          }
          for (int t = 0; t < NT; ++t) sum[t] = _mm256_add_epi32(sum[t], c[t].Total());
        }
        FinishBlock32<NT>(sum, Halves(g + 16 * h), a, j, acc);
        if constexpr (kMin) {
          const __m256 m = Halves(g + 32 + 16 * h);
          for (int t = 0; t < NT; ++t) acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(a[t].blocks[j].s), acc[t]);
        }
      }
    }
  }
};
using Q4_0 = Bits32<packed_x86::kQ4_0Bytes, 32, 0, 8, false, packed_x86::PackQ4_0Block, BlockQ4_0>;
using Q4_1 = Bits32<packed_x86::kQ4_1Bytes, packed_x86::kQ4_1Qs, 0, 0, true, packed_x86::PackQ4_1Block, BlockQ4_1>;
using Q5_0 = Bits32<packed_x86::kQ5_0Bytes, packed_x86::kQ5_0Qs, packed_x86::kQ5_0Masks, 16, false,
                    packed_x86::PackQ5_0Block, BlockQ5_0>;
using Q5_1 = Bits32<packed_x86::kQ5_1Bytes, packed_x86::kQ5_1Qs, packed_x86::kQ5_1Masks, 0, true,
                    packed_x86::PackQ5_1Block, BlockQ5_1>;

// Q5_K: Q4_K's with the fifth bits from the masks; values up to 31, so each slice takes two chains
// of 4 additions of at most 2 * 31 * 127.
struct Q5_K {
  static constexpr int kBlockValues = 256, kBlockBytes = packed_x86::kQ5_KBytes;

  static constexpr bool kSlicePairSums = true;
  using Act = ActK;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    packed_x86::PackQ5_K(rows, row_bytes, n_blocks, out);
  }
  template <Dp kDp, int NT, int kHalves = 1, bool kDec = false>
  static HWY_INLINE void Dot(const uint8_t* g, int64_t n_blocks, const Act* a, int h0, __m256* accs, size_t ahead,
                             const uint8_t* dec = nullptr) {
    using packed_x86::kQ5_KMasks;
    using packed_x86::kQ5_KQs;
    using packed_x86::kScaleMinScales;
    const __m256i low = Splat(0x0F);
    for (int t = 0; t < kHalves * NT; ++t) accs[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      HWY_UNROLL(2)
      for (int hh = 0; hh < kHalves; ++hh) {  // rows 8h..8h+7
        const int h = h0 + hh;
        __m256* acc = accs + hh * NT;
        __m256i scaled[NT];
        for (int t = 0; t < NT; ++t) scaled[t] = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          PrefetchPart<kBlockBytes, 4 * kHalves>(g, ahead, 4 * hh + c);
          const Scales s_lo = UnsignedScales(g + kScaleMinScales + kRows * 2 * c + 8 * h);
          const Scales s_hi = UnsignedScales(g + kScaleMinScales + kRows * (2 * c + 1) + 8 * h);
          for (int m0 = 0; m0 < 8; m0 += 4) {  // a chain per 4 vectors
            Chain<kDp> lo[NT], hi[NT];
            HWY_UNROLL(4)
            for (int m = m0; m < m0 + 4; ++m) {
              const __m256i v = Load32(g + kQ5_KQs + 512 * c + 64 * m + 32 * h);
              const uint8_t* masks = g + kQ5_KMasks + 16 * (8 * c + m) + 4 * h;
              const __m256i l = _mm256_or_si256(_mm256_and_si256(v, low), FifthBits(masks));
              const __m256i hh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), FifthBits(masks + 8));
              for (int t = 0; t < NT; ++t) {
                lo[t].Add(l, Broadcast4(a[t].blocks[i].qs + 64 * c + 4 * m));
                hi[t].Add(hh, Broadcast4(a[t].blocks[i].qs + 64 * c + 32 + 4 * m));
              }
            }
            for (int t = 0; t < NT; ++t) {
              scaled[t] = _mm256_add_epi32(scaled[t], _mm256_add_epi32(Chain<kDp>::Scaled(lo[t], s_lo), Chain<kDp>::Scaled(hi[t], s_hi)));
            }
          }
        }
        FinishScaleMin<NT>(g, h, a, i, scaled, acc);
      }
    }
  }
};

// Q6_K: 16-value groups, signed 8-bit scales, q - 32. Per group two chains of 2 additions of at most
// 2 * 63 * 127; the zero point in integers too: T = sum_g sc_g (sum q x - 32 bsum_g), with
// |T| <= 16 * 128 * 16 * 63 * 127 < 2^31, and one float operation per super-block.
struct Q6_K {
  static constexpr int kBlockValues = 256, kBlockBytes = packed_x86::kQ6_KBytes;

  using Act = ActK;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    packed_x86::PackQ6_K(rows, row_bytes, n_blocks, out);
  }
  // Values 128 hb + 32 j + 4m.. of the 8 rows of half h (packed-inl.h's Q6_K::Values, on one half).
  static HWY_INLINE __m256i Values(const uint8_t* g, int hb, int j, int m, int h) {
    const uint8_t* triple = g + packed_x86::kQ6_KQ + 1536 * hb + packed_x86::kQ6_KTriple * m + 32 * h;
    const __m256i low = Splat(0x0F), two = Splat(0x30);
    const __m256i q = Load32(triple + 64 * (j & 1)), hb2 = Load32(triple + 128);
    const __m256i l = j < 2 ? _mm256_and_si256(q, low) : _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
    // bits 2j, 2j + 1 of the high byte to bits 4, 5
    const __m256i high = j < 2 ? _mm256_slli_epi16(hb2, 4 - 2 * j) : _mm256_srli_epi16(hb2, 2 * j - 4);
    return _mm256_or_si256(l, _mm256_and_si256(high, two));
  }
  // Decoded (Run): per super-block, half h, the vectors Values(hb, j, m) at 2048 h + 32 (8 (4 hb + j) + m);
  // then group grp's Scales::s16 at kDecodedScales + 512 h + 32 grp, and ScalePair(p) at
  // kDecodedPairs + 256 h + 32 p.
  static constexpr int kDecodedScales = kRows * kBlockValues, kDecodedPairs = kDecodedScales + 2 * 16 * 32;
  static constexpr int kDecodedBytes = kDecodedPairs + 2 * 8 * 32;
  static HWY_INLINE int DecodedAt(int hb, int j, int m, int h) { return 2048 * h + 32 * (8 * (4 * hb + j) + m); }
  static void Decode(const uint8_t* g, int64_t n_blocks, uint8_t* out) {
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes, out += kDecodedBytes) {
      for (int h = 0; h < 2; ++h) {
        for (int hb = 0; hb < 2; ++hb) {
          for (int j = 0; j < 4; ++j) {
            for (int m = 0; m < 8; ++m) Store32(out + DecodedAt(hb, j, m, h), Values(g, hb, j, m, h));
          }
        }
        for (int grp = 0; grp < 16; ++grp) {
          const Scales sc(_mm256_cvtepi8_epi32(Load8(g + packed_x86::kQ6_KScales + kRows * grp + 8 * h)));
          Store32(out + kDecodedScales + 512 * h + 32 * grp, sc.s16);
        }
        for (int p = 0; p < 8; ++p) Store32(out + kDecodedPairs + 256 * h + 32 * p, ScalePair(g, p, h));
      }
    }
  }
  // 8 rows' scales of groups 2p and 2p + 1 as the int16 pair of each lane.
  static HWY_INLINE __m256i ScalePair(const uint8_t* g, int p, int h) {
    const uint8_t* sc = g + packed_x86::kQ6_KScales + 8 * h;
    const __m128i a = _mm_cvtepi8_epi16(Load8(sc + kRows * 2 * p)), b = _mm_cvtepi8_epi16(Load8(sc + kRows * (2 * p + 1)));
    return _mm256_set_m128i(_mm_unpackhi_epi16(a, b), _mm_unpacklo_epi16(a, b));
  }
  template <Dp kDp, int NT, int kHalves = 1, bool kDec = false>
  static HWY_INLINE void Dot(const uint8_t* g, int64_t n_blocks, const Act* a, int h0, __m256* accs, size_t ahead,
                             const uint8_t* dec = nullptr) {
    for (int t = 0; t < kHalves * NT; ++t) accs[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      HWY_UNROLL(2)
      for (int hh = 0; hh < kHalves; ++hh) {  // rows 8h..8h+7
        const int h = h0 + hh;
        __m256* acc = accs + hh * NT;
        __m256i scaled[NT], zero[NT];
        for (int t = 0; t < NT; ++t) scaled[t] = zero[t] = _mm256_setzero_si256();
        for (int hb = 0; hb < 2; ++hb) {
          HWY_UNROLL(4)
          for (int j = 0; j < 4; ++j) {
            PrefetchPart<kBlockBytes, 8 * kHalves>(g, ahead, 8 * hh + 4 * hb + j);
            for (int mh = 0; mh < 2; ++mh) {  // group 8 hb + 2 j + mh: vectors 4 mh..4 mh + 3
              const int grp = 8 * hb + 2 * j + mh;
              const Scales s = kDec ? Scales::FromPairs(Load32(dec + i * kDecodedBytes + kDecodedScales + 512 * h + 32 * grp))
                                    : Scales(_mm256_cvtepi8_epi32(Load8(g + packed_x86::kQ6_KScales + kRows * grp + 8 * h)));
              for (int m0 = 4 * mh; m0 < 4 * mh + 4; m0 += 2) {  // a chain per 2 vectors
                Chain<kDp> c[NT];
                HWY_UNROLL(2)
                for (int m = m0; m < m0 + 2; ++m) {
                  __m256i v;
                  if constexpr (kDec) v = Load32(dec + i * kDecodedBytes + DecodedAt(hb, j, m, h));
                  else v = Values(g, hb, j, m, h);
                  for (int t = 0; t < NT; ++t) c[t].Add(v, Broadcast4(a[t].blocks[i].qs + 128 * hb + 32 * j + 4 * m));
                }
                for (int t = 0; t < NT; ++t) scaled[t] = _mm256_add_epi32(scaled[t], Chain<kDp>::Scaled(c[t], s));
              }
            }
          }
        }
        for (int p = 0; p < 8; ++p) {
          const __m256i pair = kDec ? Load32(dec + i * kDecodedBytes + kDecodedPairs + 256 * h + 32 * p) : ScalePair(g, p, h);
          for (int t = 0; t < NT; ++t) {
            int32_t bsums;
            std::memcpy(&bsums, a[t].blocks[i].bsums + 2 * p, 4);  // groups 2p, 2p + 1
            zero[t] = _mm256_add_epi32(zero[t], _mm256_madd_epi16(pair, _mm256_set1_epi32(bsums)));
          }
        }
        const __m256 d = Halves(g + 16 * h);
        for (int t = 0; t < NT; ++t) {
          const __m256i total = _mm256_sub_epi32(scaled[t], _mm256_slli_epi32(zero[t], 5));
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(a[t].blocks[i].d)), acc[t]);
        }
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Drivers.

using packing::LayoutOf;

constexpr int kTileTokens = 4;  // tokens per tile: 4 float accumulators, 4 to 8 integer chains

// Tokens t0..t0+NT-1 against group g: 16 outputs each, to y[t * n_out].
template <class T, Dp kDp, int NT, bool kDec = false>
HWY_INLINE void Tile(const uint8_t* g, int64_t n_blocks, const typename T::Act* a, float* y, int64_t n_out, size_t ahead,
                     const uint8_t* dec = nullptr) {
  if constexpr (NT == 1 && !kDec) {
    // Decode: both halves in one pass over the group, sharing the activations' loads (the registers
    // of two halves' chains fit where those of more tokens would not).
    __m256 acc[2];
    T::template Dot<kDp, 1, 2>(g, n_blocks, a, 0, acc, ahead);
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
  } else {
    for (int h = 0; h < 2; ++h) {
      __m256 acc[NT];
      // The first half reads the group from memory (prefetching ahead); the second finds it in cache.
      T::template Dot<kDp, NT, 1, kDec>(g, n_blocks, a, h, acc, h == 0 ? ahead : 0, dec);
      for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * n_out + 8 * h, acc[t]);
    }
  }
}

// Tokens t0..t0+nt-1 (nt <= kTileTokens) against group g, its weights decoded (kDec) or not.
template <class T, Dp kDp, bool kDec>
HWY_INLINE void TileOf(int nt, const uint8_t* g, int64_t n_blocks, const typename T::Act* a, float* y, int64_t n_out,
                       size_t ahead, const uint8_t* dec) {
  switch (nt) {
    case 4: Tile<T, kDp, 4, kDec>(g, n_blocks, a, y, n_out, ahead, dec); break;
    case 3: Tile<T, kDp, 3, kDec>(g, n_blocks, a, y, n_out, ahead, dec); break;
    case 2: Tile<T, kDp, 2, kDec>(g, n_blocks, a, y, n_out, ahead, dec); break;
    default: Tile<T, kDp, 1, kDec>(g, n_blocks, a, y, n_out, ahead, dec); break;
  }
}

// y[t, o] for n_tokens tokens whose activations act(t) gives, every group of 16 rows read once for
// all of them, kTileTokens tokens at a time. Decode (few tokens) streams the groups in contiguous
// chunks per thread, prefetching `ahead` bytes ahead; prefill takes them one at a time, so that a
// thread the OS time-slices away holds up no one. Prefill also decodes each group's values to
// bytes once (T::Decode, where the type has it: nibbles, fifth bits, Q6_K's high bits), into a
// buffer of the thread's that every tile then loads, rather than each tile decoding them again: the
// decoding was a third of Q6_K's instructions. The results are the same either way: the same
// integers, the same float operations.
template <class T, Dp kDp, class ActOf>
void Run(const WeightMatrix& w, const uint8_t* data, const ActOf& act, int64_t n_tokens, float* y, bool decode,
         size_t ahead, KernelContext& ctx) {
  const int64_t n_blocks = w.n_in / T::kBlockValues;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * T::kBlockBytes;
  const auto n_groups = static_cast<size_t>(w.n_out / kRows);
  constexpr bool kDecodes = requires { T::kDecodedBytes; };
  auto groups = [&](size_t begin, size_t end, int thread) {
    uint8_t* dec = nullptr;
    if constexpr (kDecodes) {
      if (!decode) {
        dec = ctx.scratch().Get<uint8_t>(thread, KernelScratch::kPanelQ, static_cast<size_t>(n_blocks * T::kDecodedBytes));
      }
    }
    for (size_t g = begin; g < end; ++g) {
      const uint8_t* gp = data + g * group_bytes;
      if constexpr (kDecodes) {
        if (dec) T::Decode(gp, n_blocks, dec);
      }
      for (int64_t t0 = 0; t0 < n_tokens;) {
        const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
        typename T::Act a[kTileTokens];
        for (int t = 0; t < nt; ++t) a[t] = act(t0 + t);
        float* yt = y + t0 * w.n_out + static_cast<int64_t>(g) * kRows;
        const size_t pf = t0 == 0 ? ahead : 0;
        if (dec) TileOf<T, kDp, kDecodes>(nt, gp, n_blocks, a, yt, w.n_out, pf, dec);
        else TileOf<T, kDp, false>(nt, gp, n_blocks, a, yt, w.n_out, pf, nullptr);
        t0 += nt;
      }
    }
  };
  if (decode) ctx.pool().ParallelForStreaming(n_groups, groups);
  else ctx.pool().ParallelForDynamic(n_groups, 1, groups);
}
static_assert(kTileTokens == 4, "Run's switch lists the tile sizes");

}  // namespace packed
// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace gemlet
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX2

#endif  // include guard

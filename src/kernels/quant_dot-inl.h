// Per-target integer dot products of quantized weight blocks with 8-bit activations (act_quant.h):
// one weight row against a tile of NT tokens, each block decoded once for the whole tile.
// Included by matmul_simd.cc inside its foreach_target loop (Highway's -inl.h convention).
#if defined(GEMLET_KERNELS_QUANT_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GEMLET_KERNELS_QUANT_DOT_INL_H_
#undef GEMLET_KERNELS_QUANT_DOT_INL_H_
#else
#define GEMLET_KERNELS_QUANT_DOT_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "base/half.h"
#include "kernels/act_quant.h"
#include "tensor/quant_blocks.h"

// HWY_SCALAR (the fallback target where GCC < 12.3 cannot build EMU128) has one-lane vectors only:
// its matmul is the reference one.
#if HWY_TARGET != HWY_SCALAR
HWY_BEFORE_NAMESPACE();
namespace gemlet {
namespace HWY_NAMESPACE {
namespace qd {
namespace hn = hwy::HWY_NAMESPACE;

// The 32 quantized values of a block (or of a 32-value slice of a K block) travel as a B32: one
// 256-bit vector on x86 (AVX2 and AVX-512 use 256-bit ops here: a block is 32 bytes, and maddubs /
// dpbusd exist at that width), two 128-bit vectors elsewhere (NEON, EMU128).
#undef GEMLET_X86_256
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define GEMLET_X86_256 1
using DU8 = hn::Full256<uint8_t>;
constexpr int kParts = 1;
#else
#define GEMLET_X86_256 0
using DU8 = hn::Full128<uint8_t>;
constexpr int kParts = 2;
#endif
constexpr int kPartBytes = 32 / kParts;
using DI8 = hn::RebindToSigned<DU8>;
using DI16 = hn::Repartition<int16_t, DU8>;
using DI32 = hn::Repartition<int32_t, DU8>;
using DF32 = hn::Repartition<float, DU8>;
using VU8 = hn::Vec<DU8>;
using VI16 = hn::Vec<DI16>;
using VI32 = hn::Vec<DI32>;
using VF32 = hn::Vec<DF32>;

// (Explicit constructors: GCC gives implicit ones no target attributes, which fails on NEON.)
struct B32 {
  HWY_INLINE B32() {}
#if GEMLET_X86_256
  HWY_INLINE explicit B32(VU8 v0) : p{v0} {}
#else
  HWY_INLINE B32(VU8 v0, VU8 v1) : p{v0, v1} {}
#endif
  VU8 p[kParts];
};
// Per-16-byte i16 multipliers for DotScaled: p[k] applies to bytes 16k..16k+15 of a B32 (on x86 the
// low 128 bits of the one vector carry the first multiplier, the high 128 bits the second).
struct S16 {
  HWY_INLINE S16() {}
#if GEMLET_X86_256
  HWY_INLINE explicit S16(VI16 v0) : p{v0} {}
#else
  HWY_INLINE S16(VI16 v0, VI16 v1) : p{v0, v1} {}
#endif
  VI16 p[kParts];
};

HWY_INLINE float HalfToFloat(uint16_t h) {
#if GEMLET_X86_256
  return _cvtsh_ss(h);
#else
  return F16ToF32(h);
#endif
}

HWY_INLINE B32 Load(const void* ptr) {
  const uint8_t* p = static_cast<const uint8_t*>(ptr);
  B32 r;
  for (int k = 0; k < kParts; ++k) r.p[k] = hn::LoadU(DU8(), p + k * kPartBytes);
  return r;
}
HWY_INLINE B32 And(B32 a, uint8_t mask) {
  for (int k = 0; k < kParts; ++k) a.p[k] = hn::And(a.p[k], hn::Set(DU8(), mask));
  return a;
}
HWY_INLINE B32 Or(B32 a, B32 b) {
  for (int k = 0; k < kParts; ++k) a.p[k] = hn::Or(a.p[k], b.p[k]);
  return a;
}
template <int kBits>
HWY_INLINE B32 Shr(B32 a) {
  for (int k = 0; k < kParts; ++k) a.p[k] = hn::ShiftRight<kBits>(a.p[k]);
  return a;
}
template <int kBits>
HWY_INLINE B32 Shl(B32 a) {
  for (int k = 0; k < kParts; ++k) a.p[k] = hn::ShiftLeft<kBits>(a.p[k]);
  return a;
}

// 16 bytes of nibbles as 32 values, the 32-value types' order: low nibbles first, then high ones.
HWY_INLINE B32 Nibbles16(const uint8_t* p) {
  const hn::Full128<uint8_t> d16;
  const auto x = hn::LoadU(d16, p);
  const auto low = hn::And(x, hn::Set(d16, 0x0F));
#if GEMLET_X86_256
  return B32(hn::Combine(DU8(), hn::ShiftRight<4>(x), low));
#else
  return B32(low, hn::ShiftRight<4>(x));
#endif
}

// Byte j = value where bit j of the 32 little-endian bits at p is set, else 0.
HWY_INLINE B32 BitsToBytes(const uint8_t* bits, uint8_t value) {
  B32 r;
  for (int k = 0; k < kParts; ++k) {
    r.p[k] = hn::IfThenElseZero(hn::LoadMaskBits(DU8(), bits + k * kPartBytes / 8), hn::Set(DU8(), value));
  }
  return r;
}

HWY_INLINE S16 Scales(int first16, int second16) {
#if GEMLET_X86_256
  return S16(VI16{_mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(second16)),
                                   _mm_set1_epi16(static_cast<int16_t>(first16)))});
#else
  return S16(hn::Set(DI16(), static_cast<int16_t>(first16)), hn::Set(DI16(), static_cast<int16_t>(second16)));
#endif
}

#if !GEMLET_X86_256
// sum over bytes of w * x * scale (w, x as signed bytes), partial sums spread over i32 lanes. The
// products fit i16 (|w| <= 128, |x| <= 127) and the pair sums with a scale <= 128 fit i32.
HWY_INLINE VI32 DotScaledGeneric(B32 w, B32 x, S16 s) {
  const DI8 d8;
  const hn::Half<DI8> h8;
  const DI16 d16;
  VI32 s0 = hn::Zero(DI32()), s1 = hn::Zero(DI32());
  for (int k = 0; k < kParts; ++k) {
    const auto wi = hn::BitCast(d8, w.p[k]), xi = hn::BitCast(d8, x.p[k]);
    const VI16 lo = hn::Mul(hn::PromoteTo(d16, hn::LowerHalf(h8, wi)), hn::PromoteTo(d16, hn::LowerHalf(h8, xi)));
    const VI16 hi = hn::Mul(hn::PromoteTo(d16, hn::UpperHalf(h8, wi)), hn::PromoteTo(d16, hn::UpperHalf(h8, xi)));
    s0 = hn::ReorderWidenMulAccumulate(DI32(), lo, s.p[k], s0, s1);
    s0 = hn::ReorderWidenMulAccumulate(DI32(), hi, s.p[k], s0, s1);
  }
  return hn::Add(s0, s1);
}
#endif

// sum_j w_j * x_j * scale(j) for unsigned w_j <= 63 and signed x_j in -127..127 (no saturation:
// maddubs pair sums stay below 2 * 63 * 128).
HWY_INLINE VI32 DotScaled(B32 w, B32 x, S16 s) {
#if GEMLET_X86_256
  return VI32{_mm256_madd_epi16(_mm256_maddubs_epi16(w.p[0].raw, x.p[0].raw), s.p[0].raw)};
#else
  return DotScaledGeneric(w, x, s);
#endif
}

#if HWY_TARGET == HWY_AVX3_DL
// acc += the dot products of unsigned bytes of a with signed bytes of b, per 4-byte lane. Written as
// EVEX (AVX-512 VNNI) assembly: Highway 1.0's AVX3_DL target enables "avxvnni" rather than
// "avx512vnni", so the intrinsic would compile to the VEX (AVX-VNNI) encoding, which CPUs with
// AVX-512 VNNI but without AVX-VNNI (Ice Lake, Zen 4) do not have.
HWY_INLINE __m256i DpbusdEvex(__m256i acc, __m256i a, __m256i b) {
  asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}
#endif

// acc + sum_j w_j * x_j for unsigned w_j, signed x_j: w_j <= 128 on AVX2 (maddubs saturates its
// pair sums at 32767), any byte with AVX-512 VNNI's dpbusd.
HWY_INLINE VI32 DotAcc(VI32 acc, B32 w, B32 x) {
#if GEMLET_X86_256 && HWY_TARGET == HWY_AVX3_DL
  return VI32{DpbusdEvex(acc.raw, w.p[0].raw, x.p[0].raw)};
#elif GEMLET_X86_256
  return hn::Add(acc, VI32{_mm256_madd_epi16(_mm256_maddubs_epi16(w.p[0].raw, x.p[0].raw), _mm256_set1_epi16(1))});
#else
  return hn::Add(acc, DotScaledGeneric(w, x, Scales(1, 1)));
#endif
}

// acc + sum_j w_j * x_j for signed w_j (Q8_0): x86 moves w's sign onto x so that maddubs / dpbusd
// see |w| <= 128 unsigned.
HWY_INLINE VI32 DotSignedAcc(VI32 acc, B32 w, B32 x) {
#if GEMLET_X86_256
  B32 aw, sx;
  aw.p[0] = VU8{_mm256_sign_epi8(w.p[0].raw, w.p[0].raw)};
  sx.p[0] = VU8{_mm256_sign_epi8(x.p[0].raw, w.p[0].raw)};
  return DotAcc(acc, aw, sx);
#else
  return hn::Add(acc, DotScaledGeneric(w, x, Scales(1, 1)));
#endif
}

HWY_INLINE VF32 MulAddInt(VI32 isum, float scale, VF32 acc) {
  return hn::MulAdd(hn::ConvertTo(DF32(), isum), hn::Set(DF32(), scale), acc);
}
HWY_INLINE float Sum(VF32 v) { return hn::GetLane(hn::SumOfLanes(DF32(), v)); }

// ---------------------------------------------------------------------------------------------
// Each weight type offers Tile<NT> (prefill) and Rows<NR> (decode), below. Offsets (Q4_0's -8,
// Q5_0's -16, the K types' mins and fixed offsets) are kept out of the byte products, so every
// weight byte is an unsigned value.

// The block's f16 scale d, broadcast to every float lane (on x86 one vpbroadcastw + vcvtph2ps from
// memory, instead of a scalar conversion, a multiply and a broadcast).
HWY_INLINE VF32 HalfToFloats(const uint16_t* h) {
#if GEMLET_X86_256
  return VF32{_mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(*h)))};
#else
  return hn::Set(DF32(), F16ToF32(*h));
#endif
}

// Decode streams weights that no cache holds: the kernels prefetch `ahead` bytes in front of the
// blocks they read (0: none), spread over the loop rather than in bursts that would fill the
// core's few outstanding-miss slots at once.
HWY_INLINE void PrefetchSpan(const void* p, size_t bytes) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < bytes; i += 64) hwy::Prefetch(b + i);
}

// The 32-value types: w = d * (q - kZeroPoint), or w = d * q + m when the block has a min (Q4_1,
// Q5_1). decode(block) returns q as unsigned bytes. The zero point comes off in integers: the dot
// product starts from -kZeroPoint x the activation's 4-byte sums (NegZeroPointSums), so
// sum d (q - z) x = d * d_x * sum((q - z) x_q) with one rounding, as in the VNNI GEMM. A min goes
// through the activation's sum: sum (d q + m) x = d * d_x * sum(q x_q) + m * s_x.
enum class Offset { kZeroPoint, kMin, kNone };

// Per i32 lane: -z * (sum of the lane's 4 activation bytes).
HWY_INLINE VI32 NegZeroPointSums(B32 x, uint8_t z) {
  B32 zb;
  for (int k = 0; k < kParts; ++k) zb.p[k] = hn::Set(DU8(), z);
  return hn::Sub(hn::Zero(DI32()), DotAcc(hn::Zero(DI32()), zb, x));
}

template <class Block, Offset kOffset, int kZeroPoint, bool kSigned, class Decode>
struct Blocks32 {
  // One block of NR weight rows (w[r][i]) against one activation block, accumulated per row.
  template <int NR>
  static HWY_INLINE void Accumulate(const Block* const* w, int64_t i, const BlockQ8x32& a, VF32* acc, float* off,
                                    Decode decode) {
    const B32 xa = Load(a.qs);
    const VF32 da = hn::Set(DF32(), a.d);
    VI32 start = hn::Zero(DI32());
    if constexpr (kOffset == Offset::kZeroPoint) start = NegZeroPointSums(xa, static_cast<uint8_t>(kZeroPoint));
    for (int r = 0; r < NR; ++r) {
      const Block& b = w[r][i];
      const B32 q = decode(b);
      const VI32 isum = kSigned ? DotSignedAcc(start, q, xa) : DotAcc(start, q, xa);
      acc[r] = hn::MulAdd(hn::ConvertTo(DF32(), isum), hn::Mul(HalfToFloats(&b.d), da), acc[r]);
      // An explicit fma: left to the compiler, contraction could differ between Tile and Rows.
      if constexpr (kOffset == Offset::kMin) off[r] = std::fma(HalfToFloat(b.m), a.s, off[r]);
    }
  }

  // Prefill: one row against NT tokens.
  template <int NT>
  static HWY_INLINE void Tile(const uint8_t* row, int64_t n_in, const BlockQ8x32* const* x, float* out,
                              Decode decode) {
    const Block* w[1] = {reinterpret_cast<const Block*>(row)};
    VF32 acc[NT];
    float off[NT];
    for (int t = 0; t < NT; ++t) {
      acc[t] = hn::Zero(DF32());
      off[t] = 0.0f;
    }
    for (int64_t i = 0; i < n_in / kBlock32; ++i) {
      for (int t = 0; t < NT; ++t) Accumulate<1>(w, i, x[t][i], &acc[t], &off[t], decode);
    }
    for (int t = 0; t < NT; ++t) out[t] = Sum(acc[t]) + off[t];
  }

  // Decode: NR rows against one token. Each row is its own dependency chain, and the rows share
  // the activation loads and zero-point sums. Gives each row the same result as Tile.
  template <int NR>
  static HWY_INLINE void Rows(const uint8_t* const* rows, int64_t n_in, const BlockQ8x32* x, float* out,
                              size_t ahead, Decode decode) {
    constexpr int kPrefetchBlocks = 4;  // one prefetch pass per 72-136 bytes of each row
    const Block* w[NR];
    VF32 acc[NR];
    float off[NR];
    for (int r = 0; r < NR; ++r) {
      w[r] = reinterpret_cast<const Block*>(rows[r]);
      acc[r] = hn::Zero(DF32());
      off[r] = 0.0f;
    }
    for (int64_t i = 0; i < n_in / kBlock32; ++i) {
      if (ahead > 0 && i % kPrefetchBlocks == 0) {
        for (int r = 0; r < NR; ++r) PrefetchSpan(reinterpret_cast<const uint8_t*>(w[r] + i) + ahead, kPrefetchBlocks * sizeof(Block));
      }
      Accumulate<NR>(w, i, x[i], acc, off, decode);
    }
    for (int r = 0; r < NR; ++r) out[r] = Sum(acc[r]) + off[r];
  }
};

// The interface every weight type offers the drivers (matmul_simd.cc):
//   Tile<NT>(row, n_in, x, out): out[t] = dot(row, activations x[t]) for t < NT (prefill);
//   Rows<NR>(rows, n_in, x, out, ahead): out[r] = dot(rows[r], activations x) for r < NR (decode,
//   prefetching `ahead` bytes in front).
template <class Block, Offset kOffset, int kZeroPoint, bool kSigned, class Decode>
struct K32 {
  using Act = BlockQ8x32;
  using Impl = Blocks32<Block, kOffset, kZeroPoint, kSigned, Decode>;
  template <int NT>
  static HWY_INLINE void Tile(const uint8_t* row, int64_t n_in, const Act* const* x, float* out) {
    Impl::template Tile<NT>(row, n_in, x, out, Decode());
  }
  template <int NR>
  static HWY_INLINE void Rows(const uint8_t* const* rows, int64_t n_in, const Act* x, float* out, size_t ahead) {
    Impl::template Rows<NR>(rows, n_in, x, out, ahead, Decode());
  }
};

struct DecodeQ4 {
  template <class Block>
  HWY_INLINE B32 operator()(const Block& b) const { return Nibbles16(b.qs); }
};
struct DecodeQ5 {
  template <class Block>
  HWY_INLINE B32 operator()(const Block& b) const { return Or(Nibbles16(b.qs), BitsToBytes(b.qh, 0x10)); }
};

using KQ4_0 = K32<BlockQ4_0, Offset::kZeroPoint, 8, false, DecodeQ4>;
using KQ4_1 = K32<BlockQ4_1, Offset::kMin, 0, false, DecodeQ4>;
using KQ5_0 = K32<BlockQ5_0, Offset::kZeroPoint, 16, false, DecodeQ5>;
using KQ5_1 = K32<BlockQ5_1, Offset::kMin, 0, false, DecodeQ5>;

#if HWY_TARGET == HWY_AVX3_DL
// Q8_0 with VNNI: q + 128 as unsigned bytes and a zero point of 128 (dpbusd has no saturation) cost
// one xor per block, where moving w's sign onto x costs two.
struct DecodeQ8Biased {
  HWY_INLINE B32 operator()(const BlockQ8_0& b) const {
    return B32(VU8{_mm256_xor_si256(Load(b.qs).p[0].raw, _mm256_set1_epi8(static_cast<char>(0x80)))});
  }
};
using KQ8_0 = K32<BlockQ8_0, Offset::kZeroPoint, 128, false, DecodeQ8Biased>;
#else
// Elsewhere maddubs would saturate on q + 128: signed bytes, the sign moved onto x (DotSignedAcc).
struct DecodeQ8 {
  HWY_INLINE B32 operator()(const BlockQ8_0& b) const { return Load(b.qs); }
};
using KQ8_0 = K32<BlockQ8_0, Offset::kNone, 0, true, DecodeQ8>;
#endif

// ---------------------------------------------------------------------------------------------
// K types: a 256-value super-block is 8 B32 slices; slice k holds values 32k..32k+31.

// Decode for types whose Tile already keeps enough independent work per block (a super-block
// is 8 dot products before its one float accumulation): one row at a time.
template <class K>
struct RowsOneByOne {
  template <int NR, class Act>
  static HWY_INLINE void Rows(const uint8_t* const* rows, int64_t n_in, const Act* x, float* out, size_t ahead) {
    const Act* xs[1] = {x};
    for (int r = 0; r < NR; ++r) K::template Tile<1>(rows[r], n_in, xs, out + r, ahead);
  }
};

// The eight 6-bit scales and eight 6-bit mins of a Q4_K / Q5_K block, out as sc[0..7] then
// m[0..7] (the scalar UnpackScaleMinK4 gives one pair). The format packs them in 12 bytes:
//   bytes 0-3:  sc[0..3] in their low 6 bits; bits 4-5 of sc[4..7] in their top 2 bits
//   bytes 4-7:  m[0..3] in their low 6 bits;  bits 4-5 of m[4..7] in their top 2 bits
//   bytes 8-11: bits 0-3 of sc[4..7] in their low nibbles, of m[4..7] in their high nibbles
// Each row of that table is four bytes with the same rule, so each is one 32-bit word here, and
// every output group of four is a couple of masks and shifts of two words (little-endian: byte i
// of a word is entry i of its group).
HWY_INLINE void UnpackScaleMinK4All(const uint8_t* scales, uint8_t* out16) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLowNibble = 0x0f0f0f0f, kTwoBits = 0x03030303;
  uint32_t sc_low, m_low, nibbles;
  std::memcpy(&sc_low, scales, 4);
  std::memcpy(&m_low, scales + 4, 4);
  std::memcpy(&nibbles, scales + 8, 4);
  const uint32_t groups[4] = {
      sc_low & kLow6,                                                // sc[0..3]
      (nibbles & kLowNibble) | (((sc_low >> 6) & kTwoBits) << 4),    // sc[4..7]
      m_low & kLow6,                                                 // m[0..3]
      ((nibbles >> 4) & kLowNibble) | (((m_low >> 6) & kTwoBits) << 4),  // m[4..7]
  };
  std::memcpy(out16, groups, 16);
}

// The i16 multipliers of the 8 slices (S16 per slice: its first 16 values, then its second 16).
// x86 widens the scales once and picks each slice's pair with one byte shuffle (pshufb with the
// byte pair 2k, 2k+1 in every i16 lane broadcasts lane k within each 128-bit half), where a
// broadcast per half would cost 5 instructions per slice.
#if GEMLET_X86_256
// v: i16 lanes [scale of the first 16 of slice 0..7 | scale of the second 16 of slice 0..7].
HWY_INLINE void SlicePairScales(__m256i v, S16* s) {
  for (int k = 0; k < 8; ++k) s[k] = S16(VI16{_mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * k)))});
}
// Bytes [b0, b1, ..., b15] -> [b0, b2, ..., b14, b1, b3, ..., b15].
HWY_INLINE __m128i EvensThenOdds(__m128i v) {
  return _mm_shuffle_epi8(v, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
}
#endif

// Slice k scaled by scale8[k] (Q4_K, Q5_K).
HWY_INLINE void ScalesPerSlice(const uint8_t* scale8, S16* s) {
#if GEMLET_X86_256
  const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scale8)));
  SlicePairScales(_mm256_broadcastsi128_si256(w), s);
#else
  for (int k = 0; k < 8; ++k) s[k] = Scales(scale8[k], scale8[k]);
#endif
}

// Group g of 16 values scaled by scale16[g], signed bytes (Q6_K, Q3_K).
HWY_INLINE void ScalesPerGroup(const int8_t* scale16, S16* s) {
#if GEMLET_X86_256
  SlicePairScales(_mm256_cvtepi8_epi16(EvensThenOdds(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scale16)))), s);
#else
  for (int k = 0; k < 8; ++k) s[k] = Scales(scale16[2 * k], scale16[2 * k + 1]);
#endif
}

// Offsets and mins meet the activations through the group sums (BlockQ8_K::bsums). These return
// the sum over groups as partial sums spread over i32 lanes, accumulated in float by the caller.
HWY_INLINE VI32 LaneSum(int32_t sum) {
  HWY_ALIGN int32_t lanes[hn::MaxLanes(DI32())] = {sum};
  return hn::Load(DI32(), lanes);
}
// sum_g w16[g] * bsums[g] over the 16 groups, signed weights (Q6_K, Q3_K).
HWY_INLINE VI32 GroupDot(const int8_t* w16, const int16_t* bsums) {
#if GEMLET_X86_256
  const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w16)));
  return VI32{_mm256_madd_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)))};
#else
  int32_t sum = 0;
  for (int g = 0; g < 16; ++g) sum += w16[g] * bsums[g];
  return LaneSum(sum);
#endif
}
// sum_k w8[k] * (bsums[2k] + bsums[2k + 1]) over the 8 slices (the mins of Q4_K, Q5_K).
HWY_INLINE VI32 SliceDot(const uint8_t* w8, const int16_t* bsums) {
#if GEMLET_X86_256
  const __m128i w = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w8));
  const __m256i twice = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(w, w));
  return VI32{_mm256_madd_epi16(twice, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)))};
#else
  int32_t sum = 0;
  for (int k = 0; k < 8; ++k) sum += w8[k] * (bsums[2 * k] + bsums[2 * k + 1]);
  return LaneSum(sum);
#endif
}

// acc[t] += d * a.d * sum_k DotScaled(q[k], a, s[k]); acc_off[t] += off_scale * a.d * offset(a), per
// token; the row's dot product is Sum(acc - acc_off).
template <int NT, class OffsetFn>
HWY_INLINE void AccumulateK(const B32* q, const S16* s, float d, float off_scale, const BlockQ8_K* const* x,
                            int64_t i, VF32* acc, VF32* acc_off, OffsetFn offset) {
  for (int t = 0; t < NT; ++t) {
    const BlockQ8_K& a = x[t][i];
    VI32 sum = DotScaled(q[0], Load(a.qs), s[0]);
    for (int k = 1; k < 8; ++k) sum = hn::Add(sum, DotScaled(q[k], Load(a.qs + 32 * k), s[k]));
    acc[t] = MulAddInt(sum, d * a.d, acc[t]);
    acc_off[t] = MulAddInt(offset(a), off_scale * a.d, acc_off[t]);
  }
}

template <int NT, class Block, class DecodeFn>
HWY_INLINE void TileK(const uint8_t* row, int64_t n_in, const BlockQ8_K* const* x, float* out, size_t ahead,
                      DecodeFn decode) {
  const Block* w = reinterpret_cast<const Block*>(row);
  const int64_t nb = n_in / kBlockK;
  VF32 acc[NT], acc_off[NT];
  for (int t = 0; t < NT; ++t) acc[t] = acc_off[t] = hn::Zero(DF32());
  for (int64_t i = 0; i < nb; ++i) {
    if (ahead > 0) PrefetchSpan(reinterpret_cast<const uint8_t*>(w + i) + ahead, sizeof(Block));
    decode(w[i], x, i, acc, acc_off);
  }
  for (int t = 0; t < NT; ++t) out[t] = Sum(hn::Sub(acc[t], acc_off[t]));
}

// The 8 slices of a Q4_K or Q5_K super-block as unsigned bytes, slice k = values 32k..32k+31:
// byte 32c + l of qs holds value 64c + l (low nibble) and 64c + 32 + l (high nibble); Q5_K's fifth
// bits come from qh, bit 2c for the low nibble's slice and 2c + 1 for the high one's.
template <class Block>
HWY_INLINE void SlicesScaleMin(const Block& b, B32* q) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  B32 high;
  if constexpr (kFifthBit) high = Load(b.qh);
  for (int c = 0; c < 4; ++c) {
    const B32 raw = Load(b.qs + 32 * c);
    q[2 * c] = And(raw, 0x0F);
    q[2 * c + 1] = Shr<4>(raw);
    if constexpr (kFifthBit) {
      q[2 * c] = Or(q[2 * c], Shl<4>(And(high, 1)));
      q[2 * c + 1] = Or(q[2 * c + 1], Shl<3>(And(high, 2)));
      high = Shr<2>(high);
    }
  }
}

// Q4_K and Q5_K: x = d * sc * q - dmin * m per slice, 6-bit sc and m (UnpackScaleMinK4All).
template <class Block>
struct KScaleMin : RowsOneByOne<KScaleMin<Block>> {
  using Act = BlockQ8_K;
  template <int NT>
  static HWY_INLINE void Tile(const uint8_t* row, int64_t n_in, const Act* const* x, float* out, size_t ahead = 0) {
    TileK<NT, Block>(row, n_in, x, out, ahead, [](const Block& b, const Act* const* xs, int64_t i, VF32* acc,
                                                  VF32* acc_off) {
      uint8_t sm[16];
      UnpackScaleMinK4All(b.scales, sm);
      B32 q[8];
      S16 s[8];
      SlicesScaleMin(b, q);
      ScalesPerSlice(sm, s);
      AccumulateK<NT>(q, s, HalfToFloat(b.d), HalfToFloat(b.dmin), xs, i, acc, acc_off,
                      [&](const Act& a) { return SliceDot(sm + 8, a.bsums); });
    });
  }
};
using KQ4_K = KScaleMin<BlockQ4_K>;
using KQ5_K = KScaleMin<BlockQ5_K>;

struct KQ6_K : RowsOneByOne<KQ6_K> {
  using Act = BlockQ8_K;
  template <int NT>
  static HWY_INLINE void Tile(const uint8_t* row, int64_t n_in, const Act* const* x, float* out, size_t ahead = 0) {
    TileK<NT, BlockQ6_K>(row, n_in, x, out, ahead, [](const BlockQ6_K& b, const Act* const* xs, int64_t i, VF32* acc,
                                                VF32* acc_off) {
      B32 q[8];
      S16 s[8];
      for (int h = 0; h < 2; ++h) {
        const B32 l0 = Load(b.ql + 64 * h), l1 = Load(b.ql + 64 * h + 32), hb = Load(b.qh + 32 * h);
        q[4 * h + 0] = Or(And(l0, 0x0F), Shl<4>(And(hb, 0x03)));
        q[4 * h + 1] = Or(And(l1, 0x0F), Shl<2>(And(hb, 0x0C)));
        q[4 * h + 2] = Or(Shr<4>(l0), And(hb, 0x30));
        q[4 * h + 3] = Or(Shr<4>(l1), Shr<2>(And(hb, 0xC0)));
      }
      ScalesPerGroup(b.scales, s);
      const float d = HalfToFloat(b.d);
      // x = d * sc * (q - 32): the -32 goes through the group sums.
      AccumulateK<NT>(q, s, d, 32.0f * d, xs, i, acc, acc_off, [&](const Act& a) { return GroupDot(b.scales, a.bsums); });
    });
  }
};

struct KQ3_K : RowsOneByOne<KQ3_K> {
  using Act = BlockQ8_K;
  template <int NT>
  static HWY_INLINE void Tile(const uint8_t* row, int64_t n_in, const Act* const* x, float* out, size_t ahead = 0) {
    TileK<NT, BlockQ3_K>(row, n_in, x, out, ahead, [](const BlockQ3_K& b, const Act* const* xs, int64_t i, VF32* acc,
                                                VF32* acc_off) {
      int8_t sc[16];
      UnpackQ3KScales(b.scales, sc);
      B32 q[8];
      S16 s[8];
      B32 high = Load(b.hmask);
      for (int h = 0; h < 2; ++h) {
        B32 raw = Load(b.qs + 32 * h);
        for (int j = 0; j < 4; ++j) {
          // q = low 2 bits + 4 * high bit, in 0..7; x = d * sc * (q - 4).
          q[4 * h + j] = Or(And(raw, 0x03), Shl<2>(And(high, 0x01)));
          raw = Shr<2>(raw);
          high = Shr<1>(high);
        }
      }
      ScalesPerGroup(sc, s);
      const float d = HalfToFloat(b.d);
      AccumulateK<NT>(q, s, d, 4.0f * d, xs, i, acc, acc_off, [&](const Act& a) { return GroupDot(sc, a.bsums); });
    });
  }
};

struct KQ2_K : RowsOneByOne<KQ2_K> {
  using Act = BlockQ8_K;
  template <int NT>
  static HWY_INLINE void Tile(const uint8_t* row, int64_t n_in, const Act* const* x, float* out, size_t ahead = 0) {
    TileK<NT, BlockQ2_K>(row, n_in, x, out, ahead, [](const BlockQ2_K& b, const Act* const* xs, int64_t i, VF32* acc,
                                                VF32* acc_off) {
      B32 q[8];
      S16 s[8];
      for (int h = 0; h < 2; ++h) {
        B32 raw = Load(b.qs + 32 * h);
        for (int j = 0; j < 4; ++j) {
          q[4 * h + j] = And(raw, 0x03);
          raw = Shr<2>(raw);
        }
      }
      // x = d * (sc & 15) * q - dmin * (sc >> 4), per group.
      int8_t scale[16], min[16];
      for (int g = 0; g < 16; ++g) {
        scale[g] = static_cast<int8_t>(b.scales[g] & 15);
        min[g] = static_cast<int8_t>(b.scales[g] >> 4);
      }
      ScalesPerGroup(scale, s);
      AccumulateK<NT>(q, s, HalfToFloat(b.d), HalfToFloat(b.dmin), xs, i, acc, acc_off,
                      [&](const Act& a) { return GroupDot(min, a.bsums); });
    });
  }
};

}  // namespace qd
// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace gemlet
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET != HWY_SCALAR

#endif  // include guard

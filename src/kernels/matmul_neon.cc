// Packed weights for 64-bit ARM with the dot-product instruction (ARMv8.2 dotprod, every phone
// core since Cortex-A76 and Apple A11): the layouts, packing, the decode GEMV, the prefill GEMM on
// sdot, and the kernel tables NEON_DOTPROD and NEON_I8MM (whose prefill is gemm_neon_i8mm.cc's).
// Compiled with -march=armv8.2-a+dotprod; reached only through tables offered where the CPU has it.
//
// A packed matrix is groups of 16 rows. Within a group every field is row-interleaved: per-row
// scalars (scales, mins) as 16 consecutive values, quantized bytes as 64-byte "vectors" holding 4
// bytes of each row (bytes 4r..4r+3: row r), i.e. four 16-byte registers of 4 rows each. One
// sdot-by-lane of such a register with 4 activation bytes advances 4 rows; a block's integer sums
// come out one lane per row and meet the rows' scales loaded as vectors, with no sums across
// lanes. The vectors are those of the AVX-512 layout (packed-inl.h); the scalars differ where
// signed arithmetic (sdot is signed x signed) asks for it. Per group of 16 rows:
//   Q4_0 block (288 B): d[16] (f16), 4 vectors: vector m = bytes 4m..4m+3 of the rows' qs, each
//        byte XOR 0x88: a nibble n becomes n - 8 as a signed 4-bit value, so that (b << 4) and
//        (b & 0xF0) are 16 (q - 8) as signed bytes, for the low and high value (16x, taken off in
//        the conversion to float).
//   Q5_0 block (352 B): d[16], 4 registers of fifth bits (register m, byte 4j + b: bit 2s the fifth
//        bit of row 4s + j's value 4m + b, bit 2s + 1 of its value 16 + 4m + b), then Q4_0's 4
//        vectors of the rows' qs as stored.
//   Q8_0 block (544 B): d[16], 8 vectors of q (vector k: values 4k..4k+3).
//   Q4_K super-block (2368 B): d[16], dmin[16], scale[8 slices][16], min[8 slices][16] (6-bit,
//        unpacked to bytes), 4 chunks of 8 vectors: chunk c vector m = bytes 32c+4m.. of qs (low
//        nibbles: slice 2c, high: slice 2c+1, values 4m..4m+3 of the slice).
//   Q6_K super-block (3360 B): d[16], then its values and scales in the order the GEMV reads them
//        (see Q6_K below).
#include <arm_neon.h>
#include <sys/auxv.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "base/half.h"
#include "kernels/act_quant.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul_neon.h"
#include "kernels/packed_layout.h"
#include "kernels/packed_weights.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif

namespace gemlet::neon {
namespace {

// Calls f(std::integral_constant<int, i>) for i = 0..N-1: lanes of sdot-by-lane must be constants.
template <int N, class F>
inline __attribute__((always_inline)) void Unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>()), ...); }
  (std::make_integer_sequence<int, N>());
}

inline int8x16x4_t Load4(const uint8_t* p) { return vld1q_s8_x4(reinterpret_cast<const int8_t*>(p)); }
inline int8x16_t Load(const int8_t* p) { return vld1q_s8(p); }
// 16 f16 values as 4 x 4 floats.
inline float32x4x4_t Halves(const uint8_t* p) {
  const float16x8_t a = vreinterpretq_f16_u8(vld1q_u8(p)), b = vreinterpretq_f16_u8(vld1q_u8(p + 16));
  return {{vcvt_f32_f16(vget_low_f16(a)), vcvt_high_f32_f16(a), vcvt_f32_f16(vget_low_f16(b)), vcvt_high_f32_f16(b)}};
}
inline int8x16_t And(int8x16_t v, uint8_t mask) {
  return vreinterpretq_s8_u8(vandq_u8(vreinterpretq_u8_s8(v), vdupq_n_u8(mask)));
}
inline int8x16_t ShrU(int8x16_t v, int n4) {  // logical >> 4 (n4 must be 4: the only use)
  (void)n4;
  return vreinterpretq_s8_u8(vshrq_n_u8(vreinterpretq_u8_s8(v), 4));
}
// 16 bytes as 4 x 4 int32 (unsigned or signed bytes).
inline int32x4x4_t WidenU8(const uint8_t* p) {
  const uint8x16_t b = vld1q_u8(p);
  const uint16x8_t lo = vmovl_u8(vget_low_u8(b)), hi = vmovl_high_u8(b);
  return {{vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))), vreinterpretq_s32_u32(vmovl_high_u16(lo)),
           vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))), vreinterpretq_s32_u32(vmovl_high_u16(hi))}};
}

// Copies 4 bytes at src + stride * r (XOR mask) to dst + 4r for the 16 rows: one vector.
void InterleaveDwords(const uint8_t* src, size_t stride, uint8_t* dst, uint8_t mask = 0) {
  for (int r = 0; r < kRows; ++r) {
    for (int b = 0; b < 4; ++b) dst[4 * r + b] = src[stride * r + b] ^ mask;
  }
}
void CopyHalves(const uint8_t* src, size_t stride, uint8_t* dst) {
  for (int r = 0; r < kRows; ++r) std::memcpy(dst + 2 * r, src + stride * r, 2);
}

// ---------------------------------------------------------------------------------------------
// Activations, per 32 values (Q4_0, Q5_0, Q8_0) or per 256 (the K types: BlockQ8_K), as the row
// kernels quantize them; the GEMMs quantize each token as the GEMV does (Acts32, ActsK).

// Quantizes n values (a multiple of 16) with 1/d = id into q; returns the sum of q, and the sum of
// each 16 values into sums16 when given.
int QuantizeSpan(const float* x, int n, float id, int8_t* q, int16_t* sums16) {
  int total = 0;
  for (int i = 0; i < n; i += 16) {
    int32x4_t v[4];
    for (int k = 0; k < 4; ++k) v[k] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + i + 4 * k), id));  // nearest, ties even
    const int16x8_t a = vcombine_s16(vqmovn_s32(v[0]), vqmovn_s32(v[1]));
    const int16x8_t b = vcombine_s16(vqmovn_s32(v[2]), vqmovn_s32(v[3]));
    vst1q_s8(q + i, vcombine_s8(vqmovn_s16(a), vqmovn_s16(b)));
    const int s = vaddvq_s32(vaddq_s32(vaddq_s32(v[0], v[1]), vaddq_s32(v[2], v[3])));
    if (sums16 != nullptr) sums16[i / 16] = static_cast<int16_t>(s);
    total += s;
  }
  return total;
}
float AbsMax(const float* x, int n) {
  float32x4_t m = vdupq_n_f32(0);
  for (int i = 0; i < n; i += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + i)));
  return vmaxvq_f32(m);
}

// One row into 32-value blocks; zero (nullable) gets -zero_point * sum(q) per block.
void Quantize32(const float* x, int64_t n_blocks, int8_t* q, float* d, int32_t* zero = nullptr, int zero_point = 0) {
  for (int64_t j = 0; j < n_blocks; ++j, x += 32, q += 32) {
    const float amax = AbsMax(x, 32);
    d[j] = ActScale(amax);
    int16_t s16[2];
    QuantizeSpan(x, 32, amax > 0 ? 127.0f / amax : 0.0f, q, s16);
    if (zero != nullptr) zero[j] = -zero_point * (s16[0] + s16[1]);
  }
}
// 256 values as BlockQ8_K holds them: q, the sums of each 16 and (returned) d. One function for
// the GEMV's blocks and the invariant GEMM's arrays, so both see the same activations.
float QuantizeBlockK(const float* x, int8_t* q, int16_t* bsums) {
  const float amax = AbsMax(x, kBlockK);
  QuantizeSpan(x, kBlockK, amax > 0 ? 127.0f / amax : 0.0f, q, bsums);
  return ActScale(amax);
}
void QuantizeK(const float* x, int64_t n_blocks, BlockQ8_K* out) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kBlockK) out[b].d = QuantizeBlockK(x, out[b].qs, out[b].bsums);
}

// The K types' activations for the batch-invariant GEMM: BlockQ8_K's, with each token's values
// contiguous (as Acts32's) for the panel tiles.
struct ActsK {
  const int8_t* q = nullptr;        // [token][n_in]
  const float* d = nullptr;         // [token][super-block]
  const int16_t* bsums = nullptr;   // [token][super-block][16]
};

// One token's activations for the GEMV.
struct GemvAct {
  const int8_t* q = nullptr;  // 32-value types
  const float* d = nullptr;
  const int32_t* zero = nullptr;  // -zero point * sum(q) per block (Q5_0)
  const BlockQ8_K* k = nullptr;  // K types
};

// ---------------------------------------------------------------------------------------------
// Per type: kBlockValues, kBlockBytes (one block of 16 rows packed), kGroups (scale groups per 32
// values in the panel), kK (256-value super-blocks), Pack(16 rows) -> group, Dot(group, token) ->
// 16 sums, Fill(group, panel); the K types' Finish(super-block) is their float part.

// Adds 4 weight registers' sdot with activation lane L of x to acc (rows 4s.. in register s).
template <int L>
inline __attribute__((always_inline)) void Dot4(int32x4_t acc[4], const int8x16_t w[4], int8x16_t x) {
  for (int s = 0; s < 4; ++s) acc[s] = vdotq_laneq_s32(acc[s], w[s], x, L);
}

struct Q4_0 {
  static constexpr int kBlockValues = 32, kBlockBytes = 288, kGroups = 1;
  static constexpr bool kK = false;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t j = 0; j < n_blocks; ++j, out += kBlockBytes) {
      const uint8_t* b = rows + j * sizeof(BlockQ4_0);
      CopyHalves(b, row_bytes, out);
      for (int m = 0; m < 4; ++m) InterleaveDwords(b + offsetof(BlockQ4_0, qs) + 4 * m, row_bytes, out + 32 + 64 * m, 0x88);
    }
  }
  static float32x4x4_t Dot(const uint8_t* g, int64_t n_blocks, const GemvAct& a) {
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      const int8x16_t x0 = Load(a.q + 32 * j), x1 = Load(a.q + 32 * j + 16);
      int32x4_t sum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      Unroll<4>([&](auto m) {
        const int8x16x4_t v = Load4(g + 32 + 64 * m);
        const int8x16_t lo[4] = {vshlq_n_s8(v.val[0], 4), vshlq_n_s8(v.val[1], 4), vshlq_n_s8(v.val[2], 4),
                                 vshlq_n_s8(v.val[3], 4)};
        const int8x16_t hi[4] = {And(v.val[0], 0xF0), And(v.val[1], 0xF0), And(v.val[2], 0xF0), And(v.val[3], 0xF0)};
        Dot4<m>(sum, lo, x0);
        Dot4<m>(sum, hi, x1);
      });
      const float32x4x4_t dw = Halves(g);
      for (int s = 0; s < 4; ++s) acc[s] = vfmaq_f32(acc[s], vcvtq_n_f32_s32(sum[s], 4), vmulq_n_f32(dw.val[s], a.d[j]));
    }
    return {{acc[0], acc[1], acc[2], acc[3]}};
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const Panel& p) {
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      int8_t* q = p.q + 512 * j;
      for (int m = 0; m < 4; ++m) {
        const int8x16x4_t v = Load4(g + 32 + 64 * m);
        for (int s = 0; s < 4; ++s) {
          vst1q_s8(q + 64 * m + 16 * s, vshrq_n_s8(vshlq_n_s8(v.val[s], 4), 4));  // q - 8, sign-extended
          vst1q_s8(q + 64 * (m + 4) + 16 * s, vshrq_n_s8(v.val[s], 4));
        }
      }
      const float32x4x4_t d = Halves(g);
      vst1q_f32_x4(p.scale + kRows * j, d);
    }
  }
};

struct Q5_0 {
  static constexpr int kBlockValues = 32, kBlockBytes = 352, kGroups = 1, kZeroPoint = 16;
  static constexpr bool kK = false;
  static constexpr int kBits = 32, kQs = 96;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t j = 0; j < n_blocks; ++j, out += kBlockBytes) {
      const uint8_t* b = rows + j * sizeof(BlockQ5_0);
      CopyHalves(b, row_bytes, out);
      for (int m = 0; m < 4; ++m) InterleaveDwords(b + offsetof(BlockQ5_0, qs) + 4 * m, row_bytes, out + kQs + 64 * m);
      std::memset(out + kBits, 0, 64);
      for (int r = 0; r < kRows; ++r) {
        uint32_t qh;
        std::memcpy(&qh, b + row_bytes * r + offsetof(BlockQ5_0, qh), 4);
        const int s = r / 4, j4 = r % 4;
        for (int m = 0; m < 4; ++m) {
          for (int v = 0; v < 4; ++v) {
            uint8_t& bits = out[kBits + 16 * m + 4 * j4 + v];
            bits |= static_cast<uint8_t>(((qh >> (4 * m + v)) & 1) << (2 * s));
            bits |= static_cast<uint8_t>(((qh >> (16 + 4 * m + v)) & 1) << (2 * s + 1));
          }
        }
      }
    }
  }
  // The 5-bit values (0..31) of vector m: lo[s] values 4m.. and hi[s] values 16 + 4m.. of rows 4s..
  static inline __attribute__((always_inline)) void Values(const uint8_t* g, int m, int8x16_t lo[4], int8x16_t hi[4]) {
    const int8x16x4_t v = Load4(g + kQs + 64 * m);
    const uint8x16_t bits = vld1q_u8(g + kBits + 16 * m), bit4 = vdupq_n_u8(0x10), low = vdupq_n_u8(0x0F);
    // Register s's fifth bits (bits 2s and 2s + 1 of `bits`) moved to bit 4.
    const uint8x16_t lo_bits[4] = {vshlq_n_u8(bits, 4), vshlq_n_u8(bits, 2), bits, vshrq_n_u8(bits, 2)};
    const uint8x16_t hi_bits[4] = {vshlq_n_u8(bits, 3), vshlq_n_u8(bits, 1), vshrq_n_u8(bits, 1), vshrq_n_u8(bits, 3)};
    for (int s = 0; s < 4; ++s) {
      const uint8x16_t q = vreinterpretq_u8_s8(v.val[s]);
      lo[s] = vreinterpretq_s8_u8(vbslq_u8(bit4, lo_bits[s], vandq_u8(q, low)));
      hi[s] = vreinterpretq_s8_u8(vbslq_u8(bit4, hi_bits[s], vshrq_n_u8(q, 4)));
    }
  }
  static float32x4x4_t Dot(const uint8_t* g, int64_t n_blocks, const GemvAct& a) {
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      const int8x16_t x0 = Load(a.q + 32 * j), x1 = Load(a.q + 32 * j + 16);
      // The zero point taken off in integers: the chains start at -16 times the block's sum.
      const int32x4_t zero = vdupq_n_s32(a.zero[j]);
      int32x4_t sum[4] = {zero, zero, zero, zero};
      Unroll<4>([&](auto m) {
        int8x16_t lo[4], hi[4];
        Values(g, m, lo, hi);
        Dot4<m>(sum, lo, x0);
        Dot4<m>(sum, hi, x1);
      });
      const float32x4x4_t dw = Halves(g);
      for (int s = 0; s < 4; ++s) acc[s] = vfmaq_f32(acc[s], vcvtq_f32_s32(sum[s]), vmulq_n_f32(dw.val[s], a.d[j]));
    }
    return {{acc[0], acc[1], acc[2], acc[3]}};
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const Panel& p) {
    const int8x16_t zero_point = vdupq_n_s8(kZeroPoint);
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      int8_t* q = p.q + 512 * j;
      for (int m = 0; m < 4; ++m) {
        int8x16_t lo[4], hi[4];
        Values(g, m, lo, hi);
        for (int s = 0; s < 4; ++s) {
          vst1q_s8(q + 64 * m + 16 * s, vsubq_s8(lo[s], zero_point));
          vst1q_s8(q + 64 * (m + 4) + 16 * s, vsubq_s8(hi[s], zero_point));
        }
      }
      vst1q_f32_x4(p.scale + kRows * j, Halves(g));
    }
  }
};

struct Q8_0 {
  static constexpr int kBlockValues = 32, kBlockBytes = 544, kGroups = 1;
  static constexpr bool kK = false;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t j = 0; j < n_blocks; ++j, out += kBlockBytes) {
      const uint8_t* b = rows + j * sizeof(BlockQ8_0);
      CopyHalves(b, row_bytes, out);
      for (int k = 0; k < 8; ++k) InterleaveDwords(b + offsetof(BlockQ8_0, qs) + 4 * k, row_bytes, out + 32 + 64 * k);
    }
  }
  static float32x4x4_t Dot(const uint8_t* g, int64_t n_blocks, const GemvAct& a) {
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      const int8x16_t x[2] = {Load(a.q + 32 * j), Load(a.q + 32 * j + 16)};
      int32x4_t sum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      Unroll<8>([&](auto k) {
        const int8x16x4_t v = Load4(g + 32 + 64 * k);
        Dot4<k % 4>(sum, v.val, x[k / 4]);
      });
      const float32x4x4_t dw = Halves(g);
      for (int s = 0; s < 4; ++s) acc[s] = vfmaq_f32(acc[s], vcvtq_f32_s32(sum[s]), vmulq_n_f32(dw.val[s], a.d[j]));
    }
    return {{acc[0], acc[1], acc[2], acc[3]}};
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const Panel& p) {
    for (int64_t j = 0; j < n_blocks; ++j, g += kBlockBytes) {
      std::memcpy(p.q + 512 * j, g + 32, 512);
      vst1q_f32_x4(p.scale + kRows * j, Halves(g));
    }
  }
};

struct Q4_K {
  static constexpr int kBlockValues = 256, kBlockBytes = 2368, kGroups = 1;
  static constexpr bool kK = true;
  static constexpr int kScales = 64, kMins = 192, kQs = 320;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t i = 0; i < n_blocks; ++i, out += kBlockBytes) {
      const uint8_t* b = rows + i * sizeof(BlockQ4_K);
      for (int r = 0; r < kRows; ++r) {
        const BlockQ4_K& blk = *reinterpret_cast<const BlockQ4_K*>(b + row_bytes * r);
        std::memcpy(out + 2 * r, &blk.d, 2);
        std::memcpy(out + 32 + 2 * r, &blk.dmin, 2);
        for (int s = 0; s < 8; ++s) UnpackScaleMinK4(s, blk.scales, &out[kScales + kRows * s + r], &out[kMins + kRows * s + r]);
      }
      for (int c = 0; c < 4; ++c) {
        for (int m = 0; m < 8; ++m) {
          InterleaveDwords(b + offsetof(BlockQ4_K, qs) + 32 * c + 4 * m, row_bytes, out + kQs + 512 * c + 64 * m);
        }
      }
    }
  }
  static float32x4x4_t Dot(const uint8_t* g, int64_t n_blocks, const GemvAct& a) {
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      const BlockQ8_K& xb = a.k[i];
      int32x4_t scaled[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      for (int c = 0; c < 4; ++c) {
        const int8x16_t xl[2] = {Load(xb.qs + 64 * c), Load(xb.qs + 64 * c + 16)};
        const int8x16_t xh[2] = {Load(xb.qs + 64 * c + 32), Load(xb.qs + 64 * c + 48)};
        int32x4_t lo[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
        int32x4_t hi[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
        const uint8_t* q = g + kQs + 512 * c;
        Unroll<8>([&](auto m) {
          const int8x16x4_t v = Load4(q + 64 * m);
          const int8x16_t l[4] = {And(v.val[0], 0x0F), And(v.val[1], 0x0F), And(v.val[2], 0x0F), And(v.val[3], 0x0F)};
          const int8x16_t h[4] = {ShrU(v.val[0], 4), ShrU(v.val[1], 4), ShrU(v.val[2], 4), ShrU(v.val[3], 4)};
          Dot4<m % 4>(lo, l, xl[m / 4]);
          Dot4<m % 4>(hi, h, xh[m / 4]);
        });
        const int32x4x4_t sc_lo = WidenU8(g + kScales + kRows * (2 * c)), sc_hi = WidenU8(g + kScales + kRows * (2 * c + 1));
        for (int s = 0; s < 4; ++s) {
          scaled[s] = vmlaq_s32(scaled[s], lo[s], sc_lo.val[s]);
          scaled[s] = vmlaq_s32(scaled[s], hi[s], sc_hi.val[s]);
        }
      }
      Finish(g, scaled, xb.bsums, xb.d, acc);
    }
    return {{acc[0], acc[1], acc[2], acc[3]}};
  }
  // A super-block's float part from its integer sums with the slices' scales applied (scaled), for
  // the GEMV and the invariant GEMM both: a token's result must not depend on which ran it.
  static inline __attribute__((always_inline)) void Finish(const uint8_t* g, const int32x4_t scaled[4],
                                                           const int16_t* bsums, float xd, float32x4_t acc[4]) {
    // The mins meet each 32-value slice's activation sum (two 16-value sums, pairwise).
    const int16x8_t slice_sums = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    int32x4_t mins[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    Unroll<8>([&](auto s) {
      const uint8x16_t m8 = vld1q_u8(g + kMins + kRows * s);
      const int16x8_t m_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m8)));
      const int16x8_t m_hi = vreinterpretq_s16_u16(vmovl_high_u8(m8));
      mins[0] = vmlal_laneq_s16(mins[0], vget_low_s16(m_lo), slice_sums, s);
      mins[1] = vmlal_high_laneq_s16(mins[1], m_lo, slice_sums, s);
      mins[2] = vmlal_laneq_s16(mins[2], vget_low_s16(m_hi), slice_sums, s);
      mins[3] = vmlal_high_laneq_s16(mins[3], m_hi, slice_sums, s);
    });
    const float32x4x4_t d = Halves(g), dmin = Halves(g + 32);
    for (int s = 0; s < 4; ++s) {
      acc[s] = vfmaq_f32(acc[s], vcvtq_f32_s32(scaled[s]), vmulq_n_f32(d.val[s], xd));
      acc[s] = vfmsq_f32(acc[s], vcvtq_f32_s32(mins[s]), vmulq_n_f32(dmin.val[s], xd));
    }
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const Panel& p) {
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      for (int c = 0; c < 4; ++c) {
        int8_t* lo = p.q + 512 * (8 * i + 2 * c);
        int8_t* hi = lo + 512;
        for (int m = 0; m < 8; ++m) {
          const int8x16x4_t v = Load4(g + kQs + 512 * c + 64 * m);
          for (int s = 0; s < 4; ++s) {
            vst1q_s8(lo + 64 * m + 16 * s, And(v.val[s], 0x0F));
            vst1q_s8(hi + 64 * m + 16 * s, ShrU(v.val[s], 4));
          }
        }
      }
      for (int s = 0; s < 8; ++s) vst1q_s32_x4(p.iscale + kRows * (8 * i + s), WidenU8(g + kScales + kRows * s));
    }
  }
};

// Q6_K in the order its GEMV reads it: per half h of 128 values, per half mh of a 32-value slice
// (its 16-value scale groups), per 8 rows sp, one 416-byte segment: the segment's scales, then for
// each of its 4 steps m the 32 bytes (8 rows x 4) of ql's low slice, ql's high slice and qh. Values
// are rebuilt as 4 (q - 32) in signed bytes (sdot's sums come out 4x, taken off in the conversion
// to float): q's 6 bits moved to the byte's top, with the top bit flipped by XOR 0xAA on qh at
// packing. That needs no mask and no zero point.
struct Q6_K {
  static constexpr int kBlockValues = 256, kBlockBytes = 3360, kGroups = 2;
  static constexpr bool kK = true;
  static constexpr int kSegmentBytes = 416;
  static void Pack(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
    for (int64_t i = 0; i < n_blocks; ++i, out += kBlockBytes) {
      const uint8_t* b = rows + i * sizeof(BlockQ6_K);
      CopyHalves(b + offsetof(BlockQ6_K, d), row_bytes, out);
      uint8_t* seg = out + 32;
      for (int h = 0; h < 2; ++h) {
        for (int mh = 0; mh < 2; ++mh) {
          for (int sp = 0; sp < 2; ++sp, seg += kSegmentBytes) {
            for (int j = 0; j < 4; ++j) {
              for (int r = 0; r < 8; ++r) {
                seg[8 * j + r] = b[row_bytes * (8 * sp + r) + offsetof(BlockQ6_K, scales) + 8 * h + 2 * j + mh];
              }
            }
            for (int mm = 0; mm < 4; ++mm) {
              const int m = 4 * mh + mm;
              uint8_t vec[3][64];
              InterleaveDwords(b + offsetof(BlockQ6_K, ql) + 64 * h + 4 * m, row_bytes, vec[0]);
              InterleaveDwords(b + offsetof(BlockQ6_K, ql) + 64 * h + 32 + 4 * m, row_bytes, vec[1]);
              InterleaveDwords(b + offsetof(BlockQ6_K, qh) + 32 * h + 4 * m, row_bytes, vec[2], 0xAA);
              for (int plane = 0; plane < 3; ++plane) std::memcpy(seg + 32 + 96 * mm + 32 * plane, vec[plane] + 32 * sp, 32);
            }
          }
        }
      }
    }
  }
  // One register of a step: 4 rows' values 32j + 4m.. as 4 (q - 32), for j = 0..3, from its ql low
  // slice a, ql high slice b and qh bits hb (a, b: values' low nibbles at 4m.. and 32 + 4m..).
  static inline __attribute__((always_inline)) void Values(int8x16_t a, int8x16_t b, int8x16_t hb, int8x16_t out[4]) {
    const uint8x16_t ua = vreinterpretq_u8_s8(a), ub = vreinterpretq_u8_s8(b), uh = vreinterpretq_u8_s8(hb);
    const uint8x16_t high = vdupq_n_u8(0xF0);
    out[0] = vreinterpretq_s8_u8(vsliq_n_u8(vshlq_n_u8(ua, 2), uh, 6));                   // a's low nibble, h bits 0-1
    out[1] = vreinterpretq_s8_u8(vsliq_n_u8(vshlq_n_u8(ub, 2), vshrq_n_u8(uh, 2), 6));    // b's low nibble, h bits 2-3
    out[2] = vreinterpretq_s8_u8(vsriq_n_u8(vshlq_n_u8(uh, 2), vandq_u8(ua, high), 2));  // a's high nibble, h bits 4-5
    out[3] = vreinterpretq_s8_u8(vsriq_n_u8(uh, vandq_u8(ub, high), 2));                  // b's high nibble, h bits 6-7
  }
  static float32x4x4_t Dot(const uint8_t* g, int64_t n_blocks, const GemvAct& a) {
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < n_blocks; ++i) {
      const BlockQ8_K& xb = a.k[i];
      const int8_t* seg = reinterpret_cast<const int8_t*>(g + 32);
      int32x4_t scaled[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      for (int h = 0; h < 2; ++h) {
        for (int mh = 0; mh < 2; ++mh) {  // out[j] of step m is in group 8h + 2j + mh
          int8x16_t x[4];
          for (int j = 0; j < 4; ++j) x[j] = Load(xb.qs + 128 * h + 32 * j + 16 * mh);
          for (int sp = 0; sp < 2; ++sp) {  // registers 2sp, 2sp + 1 (rows 8sp..8sp+7)
            const int8x16x2_t sc = vld1q_s8_x2(seg);
            seg += 32;
            int32x4_t sums[4][2];
            for (int j = 0; j < 4; ++j) sums[j][0] = sums[j][1] = vdupq_n_s32(0);
            Unroll<4>([&](auto m) {
              // Single-register loads: GCC 12 copies register tuples (vld1q_s8_x2) around.
              for (int r = 0; r < 2; ++r) {
                int8x16_t v[4];
                Values(Load(seg + 16 * r), Load(seg + 32 + 16 * r), Load(seg + 64 + 16 * r), v);
                for (int j = 0; j < 4; ++j) sums[j][r] = vdotq_laneq_s32(sums[j][r], v[j], x[j], m);
              }
              seg += 96;
            });
            for (int j = 0; j < 4; ++j) {
              const int16x8_t sc16 = vmovl_s8(j % 2 ? vget_high_s8(sc.val[j / 2]) : vget_low_s8(sc.val[j / 2]));
              scaled[2 * sp] = vmlaq_s32(scaled[2 * sp], sums[j][0], vmovl_s16(vget_low_s16(sc16)));
              scaled[2 * sp + 1] = vmlaq_s32(scaled[2 * sp + 1], sums[j][1], vmovl_high_s16(sc16));
            }
          }
        }
      }
      Finish<2>(g, scaled, xb.bsums, xb.d, acc);
      g += kBlockBytes;
    }
    return {{acc[0], acc[1], acc[2], acc[3]}};
  }
  // A super-block's float part (as Q4_K's Finish), from its sums with the scales applied, in units
  // of 2^-kFracBits (the GEMV's values are 4 (q - 32), the panel's q - 32: the same float either way).
  template <int kFracBits = 0>
  static inline __attribute__((always_inline)) void Finish(const uint8_t* g, const int32x4_t scaled[4], const int16_t*,
                                                           float xd, float32x4_t acc[4]) {
    const float32x4x4_t d = Halves(g);
    for (int s = 0; s < 4; ++s) {
      float32x4_t sum;
      if constexpr (kFracBits == 0) sum = vcvtq_f32_s32(scaled[s]);
      else sum = vcvtq_n_f32_s32(scaled[s], kFracBits);
      acc[s] = vfmaq_f32(acc[s], sum, vmulq_n_f32(d.val[s], xd));
    }
  }
  static void Fill(const uint8_t* g, int64_t n_blocks, const Panel& p) {
    for (int64_t i = 0; i < n_blocks; ++i, g += kBlockBytes) {
      const uint8_t* seg = g + 32;
      for (int h = 0; h < 2; ++h) {
        for (int mh = 0; mh < 2; ++mh) {
          for (int sp = 0; sp < 2; ++sp, seg += kSegmentBytes) {
            for (int j = 0; j < 4; ++j) {
              // Group 8h + 2j + mh: 32-value block 8i + 4h + j, its scale group mh.
              int32_t* scale = p.iscale + kRows * (2 * (8 * i + 4 * h + j) + mh) + 8 * sp;
              for (int r = 0; r < 8; ++r) scale[r] = static_cast<int8_t>(seg[8 * j + r]);
            }
            for (int mm = 0; mm < 4; ++mm) {
              const int8_t* step = reinterpret_cast<const int8_t*>(seg + 32 + 96 * mm);
              const int8x16x2_t va = vld1q_s8_x2(step), vb = vld1q_s8_x2(step + 32), vh = vld1q_s8_x2(step + 64);
              for (int r = 0; r < 2; ++r) {
                int8x16_t v[4];
                Values(va.val[r], vb.val[r], vh.val[r], v);
                // out[j] holds values 128h + 32j + 4m..: 32-value block 8i + 4h + j, its vector m.
                for (int j = 0; j < 4; ++j) {
                  vst1q_s8(p.q + 512 * (8 * i + 4 * h + j) + 64 * (4 * mh + mm) + 16 * (2 * sp + r), vshrq_n_s8(v[j], 2));
                }
              }
            }
          }
        }
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Drivers.

using packing::LayoutOf;

template <class Fn>
bool WithPackedType(DType type, Fn&& fn) {
  switch (type) {
    case DType::kQ4_0: fn(Q4_0()); return true;
    case DType::kQ5_0: fn(Q5_0()); return true;
    case DType::kQ8_0: fn(Q8_0()); return true;
    case DType::kQ4_K: fn(Q4_K()); return true;
    case DType::kQ6_K: fn(Q6_K()); return true;
    default: return false;
  }
}

// Tokens up to which the decode GEMV runs (each token's results those of decoding it alone, bit for
// bit), as on AVX3_DL; more go through the panel GEMM.
constexpr int kMaxGemvTokens = 8;

// Decode: the pool takes the groups of 16 rows in streaming chunks (ThreadPool::ParallelForStreaming);
// each group is read once, by the first token, and is in cache for the others'. No software
// prefetch: the weights are one sequential stream per chunk, which ARM cores' hardware prefetchers follow, and a prefetch per 64 bytes would add ~5%
// to the instructions (which is what can be measured here: bench/RESULTS.md).
template <class T>
void Gemv(const WeightMatrix& w, const uint8_t* data, const GemvAct* acts, int n_tokens, float* y, KernelContext& ctx) {
  const int64_t n_blocks = w.n_in / T::kBlockValues;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * T::kBlockBytes;
  ctx.pool().ParallelForStreaming(static_cast<size_t>(w.n_out / kRows), [&](size_t begin, size_t end, int) {
    for (size_t g = begin; g < end; ++g) {
      for (int t = 0; t < n_tokens; ++t) {
        vst1q_f32_x4(y + static_cast<size_t>(t) * w.n_out + g * kRows, T::Dot(data + g * group_bytes, n_blocks, acts[t]));
      }
    }
  });
}

// The integer zero point a type's GEMV takes off through the activations' sums (Q5_0's 16; the
// others take theirs off in the weights, or have a min).
template <class T>
constexpr int ZeroPointOf() {
  if constexpr (requires { T::kZeroPoint; }) return T::kZeroPoint;
  else return 0;
}

template <class T>
void RunGemv(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  KernelScratch& scratch = ctx.scratch();
  const int64_t n_blocks = w.n_in / T::kBlockValues;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxGemvTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kMaxGemvTokens, n_tokens - t0));
    const float* xt = x + t0 * w.n_in;
    GemvAct acts[kMaxGemvTokens];
    if constexpr (T::kK) {
      BlockQ8_K* blocks = scratch.Get<BlockQ8_K>(0, KernelScratch::kActivations, static_cast<size_t>(n_blocks * nt));
      for (int t = 0; t < nt; ++t) {
        QuantizeK(xt + t * w.n_in, n_blocks, blocks + t * n_blocks);
        acts[t].k = blocks + t * n_blocks;
      }
    } else {
      int8_t* q = scratch.Get<int8_t>(0, KernelScratch::kActQ, static_cast<size_t>(n_blocks * 32 * nt));
      float* d = scratch.Get<float>(0, KernelScratch::kActD, static_cast<size_t>(n_blocks * nt));
      int32_t* zero = ZeroPointOf<T>() != 0 ? scratch.Get<int32_t>(0, KernelScratch::kActZero, static_cast<size_t>(n_blocks * nt)) : nullptr;
      for (int t = 0; t < nt; ++t) {
        Quantize32(xt + t * w.n_in, n_blocks, q + t * n_blocks * 32, d + t * n_blocks,
                   zero != nullptr ? zero + t * n_blocks : nullptr, ZeroPointOf<T>());
        acts[t].q = q + t * n_blocks * 32;
        acts[t].d = d + t * n_blocks;
        acts[t].zero = zero != nullptr ? zero + t * n_blocks : nullptr;
      }
    }
    Gemv<T>(w, data, acts, nt, y + t0 * w.n_out, ctx);
  }
}

// ---------------------------------------------------------------------------------------------
// Prefill on sdot: each panel of 16 rows is decoded once (Fill) and every tile of 3 tokens (2 or 1
// at the batch's end) runs over it from cache: per 4 activation bytes, one 64-byte load of the
// panel feeds 12 sdot.

constexpr int kDotTileTokens = 2;

// The integer part of a 2-token tile over 4 steps of 4 activation bytes (lanes 0-3 of xa and xb),
// in assembly: per step one post-indexed 64-byte load of the panel (16 rows x 4 bytes), then 4
// sdot per token. As intrinsics, GCC 12 computes each load's address with two adds and copies
// sums between registers around the 4-register loads (gemma3-1b Q4_0 prefill on a Cortex-A76:
// 106.4 M instructions per token with them, 89.4 with this; bench/RESULTS.md). The 2- and 1-token
// tiles take the tokens a batch's 3-token tiles leave.
#define GEMLET_SDOT_STEP(L)                                                                          \
  "ld1 {v16.16b-v19.16b}, [%[w]], #64\n"                                                          \
  "sdot %[a0].4s, v16.16b, %[xa].4b[" #L "]\n"                                                     \
  "sdot %[a1].4s, v17.16b, %[xa].4b[" #L "]\n"                                                     \
  "sdot %[a2].4s, v18.16b, %[xa].4b[" #L "]\n"                                                     \
  "sdot %[a3].4s, v19.16b, %[xa].4b[" #L "]\n"                                                     \
  "sdot %[b0].4s, v16.16b, %[xb].4b[" #L "]\n"                                                     \
  "sdot %[b1].4s, v17.16b, %[xb].4b[" #L "]\n"                                                     \
  "sdot %[b2].4s, v18.16b, %[xb].4b[" #L "]\n"                                                     \
  "sdot %[b3].4s, v19.16b, %[xb].4b[" #L "]\n"
inline __attribute__((always_inline)) void SdotSteps4x2(const int8_t*& w, int8x16_t xa, int8x16_t xb, int32x4_t a[4],
                                                        int32x4_t b[4]) {
  asm(GEMLET_SDOT_STEP(0) GEMLET_SDOT_STEP(1) GEMLET_SDOT_STEP(2) GEMLET_SDOT_STEP(3)
      : [a0] "+w"(a[0]), [a1] "+w"(a[1]), [a2] "+w"(a[2]), [a3] "+w"(a[3]), [b0] "+w"(b[0]), [b1] "+w"(b[1]),
        [b2] "+w"(b[2]), [b3] "+w"(b[3]), [w] "+r"(w)
      : [xa] "w"(xa), [xb] "w"(xb), "m"(*reinterpret_cast<const int8_t(*)[256]>(w))  // the 4 steps' bytes
      : "v16", "v17", "v18", "v19");
}
#undef GEMLET_SDOT_STEP

// Tiles of 3 tokens, wholly in assembly with every value in a fixed register: sums v0-v11 and
// accumulators v12-v23 (token t, rows 4s..: register 4t + s), activations v24-v26, the panel's
// 4 registers v27-v30. Per scale group: the 3 tokens' 16 activation bytes, 4 steps of one 64-byte
// panel load and 12 sdot into fresh sums, then acc += float(sum) * (row scale * token scale): the
// operations and their order of the intrinsics in DotPanelTile and of the GEMV, so every output is
// bit for bit what the 1- and 2-token tiles and decode give.
// Q4_0's block: ~164 instructions for 3 x 16 x 32 multiply-adds (9.4 per instruction; the 2-token
// tile as GCC compiles its intrinsics: 7.0).
constexpr int kDotTile3Tokens = 3;
#define GEMLET_SDOT3_STEP(L)                                                                         \
  "ld1 {v27.16b-v30.16b}, [%[w]], #64\n"                                                          \
  "sdot v0.4s, v27.16b, v24.4b[" #L "]\n sdot v1.4s, v28.16b, v24.4b[" #L "]\n"                    \
  "sdot v2.4s, v29.16b, v24.4b[" #L "]\n sdot v3.4s, v30.16b, v24.4b[" #L "]\n"                    \
  "sdot v4.4s, v27.16b, v25.4b[" #L "]\n sdot v5.4s, v28.16b, v25.4b[" #L "]\n"                    \
  "sdot v6.4s, v29.16b, v25.4b[" #L "]\n sdot v7.4s, v30.16b, v25.4b[" #L "]\n"                    \
  "sdot v8.4s, v27.16b, v26.4b[" #L "]\n sdot v9.4s, v28.16b, v26.4b[" #L "]\n"                    \
  "sdot v10.4s, v29.16b, v26.4b[" #L "]\n sdot v11.4s, v30.16b, v26.4b[" #L "]\n"
// The 3 tokens' next 16 activation bytes and the 4 steps over them, into fresh sums (HALF) or
// into the sums as they are (HALF_MORE: a 32-value group's second half).
#define GEMLET_SDOT3_STEPS                                                                           \
  "ldr q24, [%[x0]], #16\n ldr q25, [%[x1]], #16\n ldr q26, [%[x2]], #16\n"                        \
  GEMLET_SDOT3_STEP(0) GEMLET_SDOT3_STEP(1) GEMLET_SDOT3_STEP(2) GEMLET_SDOT3_STEP(3)
#define GEMLET_SDOT3_HALF                                                                            \
  "movi v0.4s, #0\n movi v1.4s, #0\n movi v2.4s, #0\n movi v3.4s, #0\n"                            \
  "movi v4.4s, #0\n movi v5.4s, #0\n movi v6.4s, #0\n movi v7.4s, #0\n"                            \
  "movi v8.4s, #0\n movi v9.4s, #0\n movi v10.4s, #0\n movi v11.4s, #0\n" GEMLET_SDOT3_STEPS
#define GEMLET_SDOT3_HALF_MORE GEMLET_SDOT3_STEPS
#define GEMLET_SDOT3_SCALE(T, S, SUM, ACC)                                                           \
  "fmul v31.4s, v" #S ".4s, v" #T ".s[0]\n fmla v" #ACC ".4s, v" #SUM ".4s, v31.4s\n"
// One block's sums into the accumulators: the rows' scales (v27-v30; the panel is done with
// them) times the tokens' (v24-v26).
#define GEMLET_SDOT3_APPLY                                                                           \
  "ld1 {v27.4s-v30.4s}, [%[scale]], #64\n"                                                        \
  "ldr s24, [%[d0]], #4\n ldr s25, [%[d1]], #4\n ldr s26, [%[d2]], #4\n"                          \
  "scvtf v0.4s, v0.4s\n scvtf v1.4s, v1.4s\n scvtf v2.4s, v2.4s\n scvtf v3.4s, v3.4s\n"            \
  "scvtf v4.4s, v4.4s\n scvtf v5.4s, v5.4s\n scvtf v6.4s, v6.4s\n scvtf v7.4s, v7.4s\n"            \
  "scvtf v8.4s, v8.4s\n scvtf v9.4s, v9.4s\n scvtf v10.4s, v10.4s\n scvtf v11.4s, v11.4s\n"        \
  GEMLET_SDOT3_SCALE(24, 27, 0, 12) GEMLET_SDOT3_SCALE(24, 28, 1, 13)                             \
  GEMLET_SDOT3_SCALE(24, 29, 2, 14) GEMLET_SDOT3_SCALE(24, 30, 3, 15)                             \
  GEMLET_SDOT3_SCALE(25, 27, 4, 16) GEMLET_SDOT3_SCALE(25, 28, 5, 17)                             \
  GEMLET_SDOT3_SCALE(25, 29, 6, 18) GEMLET_SDOT3_SCALE(25, 30, 7, 19)                             \
  GEMLET_SDOT3_SCALE(26, 27, 8, 20) GEMLET_SDOT3_SCALE(26, 28, 9, 21)                             \
  GEMLET_SDOT3_SCALE(26, 29, 10, 22) GEMLET_SDOT3_SCALE(26, 30, 11, 23)
#define GEMLET_SDOT3_TILE(BLOCK)                                                                     \
  asm volatile(                                                                                    \
      "movi v12.4s, #0\n movi v13.4s, #0\n movi v14.4s, #0\n movi v15.4s, #0\n"                    \
      "movi v16.4s, #0\n movi v17.4s, #0\n movi v18.4s, #0\n movi v19.4s, #0\n"                    \
      "movi v20.4s, #0\n movi v21.4s, #0\n movi v22.4s, #0\n movi v23.4s, #0\n"                    \
      "1:\n" BLOCK                                                                                 \
      "subs %[n], %[n], #1\n b.ne 1b\n"                                                            \
      "st1 {v12.4s-v15.4s}, [%[out]], #64\n st1 {v16.4s-v19.4s}, [%[out]], #64\n"                  \
      "st1 {v20.4s-v23.4s}, [%[out]]\n"                                                            \
      : [w] "+r"(w), [scale] "+r"(scale), [x0] "+r"(x0), [x1] "+r"(x1), [x2] "+r"(x2),             \
        [d0] "+r"(d0), [d1] "+r"(d1), [d2] "+r"(d2), [n] "+r"(n), [out] "+r"(out)                   \
      :                                                                                            \
      : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13",    \
        "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", \
        "v27", "v28", "v29", "v30", "v31", "cc", "memory")
// Rows 0-15 of the panel x tokens t0..t0+2 -> out[3 tokens][16 rows]; n_blocks >= 1.
void DotPanelTile3(const Panel& p, int64_t n_blocks, const Acts32& a, int64_t t0, float* out) {
  const int8_t* w = p.q;
  const float* scale = p.scale;
  const int8_t* x0 = a.q + t0 * n_blocks * 32;
  const int8_t* x1 = x0 + n_blocks * 32;
  const int8_t* x2 = x1 + n_blocks * 32;
  const float* d0 = a.d + t0 * n_blocks;
  const float* d1 = d0 + n_blocks;
  const float* d2 = d1 + n_blocks;
  int64_t n = n_blocks;
  GEMLET_SDOT3_TILE(GEMLET_SDOT3_HALF GEMLET_SDOT3_HALF_MORE GEMLET_SDOT3_APPLY);
}

// The K types' batch-invariant tile, the 3-token tile's integer part with the GEMV's arithmetic:
// each group's fresh sums times the rows' integer scales (Panel::iscale, v27-v30 after the steps)
// into integer accumulators v12-v23, which leave per 256-value super-block as they are, for
// FinishTokens' float part. Per group 12 mla where scaling each group in floats took 12 scvtf,
// 12 fmul and 12 fmla (and 12 more fmla for Q4_K's mins).
#define GEMLET_SDOT3_MLA(S, SUM, ACC) "mla v" #ACC ".4s, v" #SUM ".4s, v" #S ".4s\n"
#define GEMLET_SDOT3_APPLY_INT                                                                       \
  "ld1 {v27.4s-v30.4s}, [%[scale]], #64\n"                                                        \
  GEMLET_SDOT3_MLA(27, 0, 12) GEMLET_SDOT3_MLA(28, 1, 13) GEMLET_SDOT3_MLA(29, 2, 14)              \
  GEMLET_SDOT3_MLA(30, 3, 15) GEMLET_SDOT3_MLA(27, 4, 16) GEMLET_SDOT3_MLA(28, 5, 17)              \
  GEMLET_SDOT3_MLA(29, 6, 18) GEMLET_SDOT3_MLA(30, 7, 19) GEMLET_SDOT3_MLA(27, 8, 20)              \
  GEMLET_SDOT3_MLA(28, 9, 21) GEMLET_SDOT3_MLA(29, 10, 22) GEMLET_SDOT3_MLA(30, 11, 23)
#define GEMLET_SDOT3_SUPER_TILE(BLOCK)                                                               \
  asm volatile(                                                                                    \
      "1:\n movi v12.4s, #0\n movi v13.4s, #0\n movi v14.4s, #0\n movi v15.4s, #0\n"               \
      "movi v16.4s, #0\n movi v17.4s, #0\n movi v18.4s, #0\n movi v19.4s, #0\n"                    \
      "movi v20.4s, #0\n movi v21.4s, #0\n movi v22.4s, #0\n movi v23.4s, #0\n"                    \
      "mov %[k], #8\n"                                                                             \
      "2:\n" BLOCK                                                                                 \
      "subs %[k], %[k], #1\n b.ne 2b\n"                                                            \
      "st1 {v12.4s-v15.4s}, [%[out]], #64\n st1 {v16.4s-v19.4s}, [%[out]], #64\n"                  \
      "st1 {v20.4s-v23.4s}, [%[out]], #64\n"                                                        \
      "subs %[n], %[n], #1\n b.ne 1b\n"                                                            \
      : [w] "+r"(w), [scale] "+r"(scale), [x0] "+r"(x0), [x1] "+r"(x1), [x2] "+r"(x2), [n] "+r"(n), \
        [k] "=&r"(k), [out] "+r"(out)                                                              \
      :                                                                                            \
      : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13",    \
        "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", \
        "v27", "v28", "v29", "v30", "cc", "memory")
// Rows 0-15 of the panel (iscale form) x the tokens at x[0..2] -> sums[super-block][3][16 rows];
// n_super >= 1.
template <int G>
void DotPanelTileSuper3(const Panel& p, int64_t n_super, const int8_t* const x[3], int32_t* out) {
  static_assert(G == 1 || G == 2);
  const int8_t* w = p.q;
  const int32_t* scale = p.iscale;
  const int8_t *x0 = x[0], *x1 = x[1], *x2 = x[2];
  int64_t n = n_super, k;
  if constexpr (G == 2) {
    GEMLET_SDOT3_SUPER_TILE(GEMLET_SDOT3_HALF GEMLET_SDOT3_APPLY_INT GEMLET_SDOT3_HALF GEMLET_SDOT3_APPLY_INT);
  } else {
    GEMLET_SDOT3_SUPER_TILE(GEMLET_SDOT3_HALF GEMLET_SDOT3_HALF_MORE GEMLET_SDOT3_APPLY_INT);
  }
}
#undef GEMLET_SDOT3_MLA
#undef GEMLET_SDOT3_APPLY_INT
#undef GEMLET_SDOT3_SUPER_TILE
#undef GEMLET_SDOT3_STEP
#undef GEMLET_SDOT3_STEPS
#undef GEMLET_SDOT3_HALF
#undef GEMLET_SDOT3_HALF_MORE
#undef GEMLET_SDOT3_SCALE
#undef GEMLET_SDOT3_APPLY
#undef GEMLET_SDOT3_TILE

// Rows 0-15 of the panel x tokens t0.. (NT of them) -> out[token][16 rows]: per 32-value block,
// 8 steps, the integer sums scaled by the rows' scales and the token's.
template <int NT>
void DotPanelTile(const Panel& p, int64_t n_blocks, const Acts32& a, int64_t t0, float* out) {
  static_assert(NT == 1 || NT == 2);
  float32x4_t acc[NT][4];
  for (int t = 0; t < NT; ++t) {
    for (int s = 0; s < 4; ++s) acc[t][s] = vdupq_n_f32(0);
  }
  const int8_t* w = p.q;
  for (int64_t j = 0; j < n_blocks; ++j) {
    int8x16_t x[NT][2];
    for (int t = 0; t < NT; ++t) {
      x[t][0] = Load(a.q + (t0 + t) * n_blocks * 32 + 32 * j);
      x[t][1] = Load(a.q + (t0 + t) * n_blocks * 32 + 32 * j + 16);
    }
    int32x4_t sum[NT][4];
    for (int t = 0; t < NT; ++t) {
      for (int s = 0; s < 4; ++s) sum[t][s] = vdupq_n_s32(0);
    }
    if constexpr (NT == 2) {
      for (int h = 0; h < 2; ++h) SdotSteps4x2(w, x[0][h], x[1][h], sum[0], sum[1]);
    } else {
      Unroll<8>([&](auto k) {
        const int8x16x4_t v = vld1q_s8_x4(w + 64 * k);
        Dot4<k % 4>(sum[0], v.val, x[0][k / 4]);
      });
      w += 64 * 8;
    }
    const float32x4x4_t scale = vld1q_f32_x4(p.scale + kRows * j);
    for (int t = 0; t < NT; ++t) {
      const float dx = a.d[(t0 + t) * n_blocks + j];
      for (int s = 0; s < 4; ++s) acc[t][s] = vfmaq_f32(acc[t][s], vcvtq_f32_s32(sum[t][s]), vmulq_n_f32(scale.val[s], dx));
    }
  }
  for (int t = 0; t < NT; ++t) {
    for (int s = 0; s < 4; ++s) vst1q_f32(out + kRows * t + 4 * s, acc[t][s]);
  }
}

// Every token's activations per 32 values, as the 32-value types' GEMV quantizes them.
Acts32 QuantizeForGemm(const float* x, int64_t n_tokens, int64_t n_in, KernelContext& ctx) {
  const int64_t n_blocks = n_in / 32;
  KernelScratch& scratch = ctx.scratch();
  int8_t* q = scratch.Get<int8_t>(0, KernelScratch::kActQ, static_cast<size_t>(n_tokens * n_blocks * 32));
  float* d = scratch.Get<float>(0, KernelScratch::kActD, static_cast<size_t>(n_tokens * n_blocks));
  ctx.pool().ParallelFor(static_cast<size_t>(n_tokens), [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) Quantize32(x + t * n_in, n_blocks, q + t * n_blocks * 32, d + t * n_blocks);
  });
  return {q, d};
}

// The 32-value types' prefill on sdot (Q4_0, Q5_0, Q8_0: one scale group per block, no min).
template <class T>
void GemmDot(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  static_assert(!T::kK && T::kGroups == 1);
  const Acts32 acts = QuantizeForGemm(x, n_tokens, w.n_in, ctx);
  const int64_t n_blocks = w.n_in / 32;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * T::kBlockBytes;
  KernelScratch& scratch = ctx.scratch();
  ctx.pool().ParallelForDynamic(static_cast<size_t>(w.n_out / kRows), 1, [&](size_t begin, size_t end, int thread) {
    Panel panel;
    panel.q = scratch.Get<int8_t>(thread, KernelScratch::kPanelQ, static_cast<size_t>(n_blocks) * 512);
    panel.scale = scratch.Get<float>(thread, KernelScratch::kPanelScale, static_cast<size_t>(n_blocks) * kRows);
    float out[kDotTile3Tokens * kRows];
    for (size_t p = begin; p < end; ++p) {
      T::Fill(data + p * group_bytes, n_blocks, panel);
      for (int64_t t0 = 0; t0 < n_tokens;) {
        const int64_t left = n_tokens - t0;
        int nt;
        if (left >= kDotTile3Tokens && n_blocks > 0) {
          nt = kDotTile3Tokens;
          DotPanelTile3(panel, n_blocks, acts, t0, out);
        } else if (left >= 2) {
          nt = 2;
          DotPanelTile<2>(panel, n_blocks, acts, t0, out);
        } else {
          nt = 1;
          DotPanelTile<1>(panel, n_blocks, acts, t0, out);
        }
        for (int t = 0; t < nt; ++t) std::memcpy(y + (t0 + t) * w.n_out + p * kRows, out + kRows * t, sizeof(float) * kRows);
        t0 += nt;
      }
    }
  });
}
static_assert(kDotTileTokens == 2 && kDotTile3Tokens == 3, "GemmDot's dispatch lists the tile sizes");

// Every token's activations as the K types' GEMV quantizes them (QuantizeBlockK).
ActsK QuantizeForGemmK(const float* x, int64_t n_tokens, int64_t n_in, KernelContext& ctx) {
  const int64_t n_super = n_in / kBlockK;
  KernelScratch& scratch = ctx.scratch();
  int8_t* q = scratch.Get<int8_t>(0, KernelScratch::kActQ, static_cast<size_t>(n_tokens * n_in));
  float* d = scratch.Get<float>(0, KernelScratch::kActD, static_cast<size_t>(n_tokens * n_super));
  int16_t* bsums = scratch.Get<int16_t>(0, KernelScratch::kActSum, static_cast<size_t>(n_tokens * n_super * 16));
  ctx.pool().ParallelFor(static_cast<size_t>(n_tokens), [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) {
      for (int64_t i = 0; i < n_super; ++i) {
        const size_t b = t * n_super + i;
        d[b] = QuantizeBlockK(x + t * n_in + i * kBlockK, q + t * n_in + i * kBlockK, bsums + 16 * b);
      }
    }
  });
  return {q, d, bsums};
}

// What the invariant GEMM's finishing needs of a call (PanelSource::state on i8mm).
struct SuperCall {
  const uint8_t* data = nullptr;  // the packed matrix
  size_t group_bytes = 0;
  int64_t n_super = 0, n_out = 0;
  ActsK acts;
  float* y = nullptr;
};

// Tokens t0..t0+nt-1 of the 16 rows row0..: sums[super-block][tile][16 rows] through the type's
// Finish in super-block order, each token's float operations those of its GEMV.
template <class T>
void FinishTokens(const SuperCall& c, int64_t row0, const int32_t* sums, int tile, int64_t t0, int nt) {
  const uint8_t* group = c.data + static_cast<size_t>(row0 / kRows) * c.group_bytes;
  for (int t = 0; t < nt; ++t) {
    const int64_t token = t0 + t;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < c.n_super; ++i) {
      const int32_t* s = sums + (i * tile + t) * kRows;
      const int32x4_t scaled[4] = {vld1q_s32(s), vld1q_s32(s + 4), vld1q_s32(s + 8), vld1q_s32(s + 12)};
      const int64_t b = token * c.n_super + i;
      T::Finish(group + i * T::kBlockBytes, scaled, c.acts.bsums + 16 * b, c.acts.d[b], acc);
    }
    vst1q_f32_x4(c.y + token * c.n_out + row0, float32x4x4_t{{acc[0], acc[1], acc[2], acc[3]}});
  }
}

template <class T>
void FinishPanel(const void* state, int64_t row0, const int32_t* sums, int64_t t0, int nt) {
  FinishTokens<T>(*static_cast<const SuperCall*>(state), row0, sums, kSuperTileTokens, t0, nt);
}

template <class T>
SuperCall MakeSuperCall(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y,
                        KernelContext& ctx) {
  SuperCall c;
  c.data = data;
  c.n_super = w.n_in / kBlockK;
  c.group_bytes = static_cast<size_t>(c.n_super) * T::kBlockBytes;
  c.n_out = w.n_out;
  c.acts = QuantizeForGemmK(x, n_tokens, w.n_in, ctx);
  c.y = y;
  return c;
}

// The K types' prefill on sdot with their GEMV's float operations: integer sums scaled per group
// in integers over each 256-value super-block, then per token the GEMV's Finish. Tiles of 3 tokens; at the batch's end the missing ones repeat the last token.
template <class T>
void GemmDotSuper(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y,
                  KernelContext& ctx) {
  const SuperCall c = MakeSuperCall<T>(w, data, x, n_tokens, y, ctx);
  if (c.n_super == 0) return;
  KernelScratch& scratch = ctx.scratch();
  ctx.pool().ParallelForDynamic(static_cast<size_t>(w.n_out / kRows), 1, [&](size_t begin, size_t end, int thread) {
    const size_t n_groups = static_cast<size_t>(w.n_in / 32) * T::kGroups;
    Panel panel;
    panel.q = scratch.Get<int8_t>(thread, KernelScratch::kPanelQ, static_cast<size_t>(w.n_in / 32) * 512);
    panel.iscale = scratch.Get<int32_t>(thread, KernelScratch::kPanelScale, n_groups * kRows);
    int32_t* sums = scratch.Get<int32_t>(thread, KernelScratch::kPanelOffset, static_cast<size_t>(c.n_super) * kDotTile3Tokens * kRows);
    for (size_t p = begin; p < end; ++p) {
      T::Fill(data + p * c.group_bytes, c.n_super, panel);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kDotTile3Tokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kDotTile3Tokens, n_tokens - t0));
        const int8_t* xs[kDotTile3Tokens];
        for (int t = 0; t < kDotTile3Tokens; ++t) xs[t] = c.acts.q + (t0 + std::min(t, nt - 1)) * w.n_in;
        DotPanelTileSuper3<T::kGroups>(panel, c.n_super, xs, sums);
        FinishTokens<T>(c, static_cast<int64_t>(p) * kRows, sums, kDotTile3Tokens, t0, nt);
      }
    }
  });
}

template <class T>
void FillPanel(const void* state, int64_t row0, const Panel& panel) {
  const auto* s = static_cast<const std::pair<const WeightMatrix*, const uint8_t*>*>(state);
  const int64_t n_type_blocks = s->first->n_in / T::kBlockValues;
  T::Fill(s->second + static_cast<size_t>(row0 / kRows) * static_cast<size_t>(n_type_blocks) * T::kBlockBytes,
          n_type_blocks, panel);
}

// GemmDot's arithmetic on smmla.
template <class T>
void GemmSmmla(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  static_assert(!T::kK && T::kGroups == 1);
  const Acts32 acts = QuantizeForGemm(x, n_tokens, w.n_in, ctx);
  const std::pair<const WeightMatrix*, const uint8_t*> state{&w, data};
  PanelSource source{w.n_in / 32, w.n_out, 1, &state, &FillPanel<T>};
  GemmI8mm(source, acts, n_tokens, y, ctx);
}

template <class T>
void FillPanelSuper(const void* state, int64_t row0, const Panel& panel) {
  const auto* c = static_cast<const SuperCall*>(state);
  T::Fill(c->data + static_cast<size_t>(row0 / kRows) * c->group_bytes, c->n_super, panel);
}

// GemmDotSuper's arithmetic on smmla.
template <class T>
void GemmSmmlaSuper(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y,
                    KernelContext& ctx) {
  const SuperCall c = MakeSuperCall<T>(w, data, x, n_tokens, y, ctx);
  if (c.n_super == 0) return;
  PanelSource source{w.n_in / 32, w.n_out, T::kGroups, &c, &FillPanelSuper<T>, &FinishPanel<T>};
  GemmI8mm(source, Acts32{c.acts.q, nullptr}, n_tokens, y, ctx);
}

// ---------------------------------------------------------------------------------------------
// The tables: Highway's NEON table with a matmul that runs packed weights here.

const KernelTable& NeonTable() {
  static const KernelTable* neon = [] {
    for (int64_t t : SimdTargets()) {
      const KernelTable* k = SimdKernels(t);
      if (k != nullptr && std::strcmp(k->name, "NEON") == 0) return k;
    }
    return &RefKernels();
  }();
  return *neon;
}

// Every GEMM does its GEMV's float operations in their order on the same activations, so a token's
// result does not depend on the tokens beside it (KernelOptions::batch_invariant holds here either
// way). The K types' earlier GEMM quantized activations per 32 values and scaled each group in
// floats; per 256 with the groups' scales in integers (GemmDotSuper) counts no more instructions.
template <class T, bool kI8mm>
void RunGemm(const WeightMatrix& w, const uint8_t* data, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  if constexpr (T::kK && kI8mm) GemmSmmlaSuper<T>(w, data, x, n_tokens, y, ctx);
  else if constexpr (T::kK) GemmDotSuper<T>(w, data, x, n_tokens, y, ctx);
  else if constexpr (kI8mm) GemmSmmla<T>(w, data, x, n_tokens, y, ctx);
  else GemmDot<T>(w, data, x, n_tokens, y, ctx);
}

template <bool kI8mm>
void MatMulPacked(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
  bool done = false;
  if (w.packed != nullptr && ctx.options().pack_weights) {
    WithPackedType(w.type, [&](auto type) {
      using T = decltype(type);
      const uint8_t* data = w.packed->Get(w, LayoutOf<T>(), ctx.pool());
      if (data == nullptr) return;
      done = true;
      if (n_tokens <= kMaxGemvTokens || !ctx.options().vnni_gemm) RunGemv<T>(w, data, x, n_tokens, y, ctx);
      else RunGemm<T, kI8mm>(w, data, x, n_tokens, y, ctx);
    });
  }
  if (!done) NeonTable().matmul(w, x, n_tokens, y, ctx);  // rows as stored: the NEON row kernels
}

void PrepareMatMulPacked(const WeightMatrix& w, KernelContext& ctx) {
  if (w.packed == nullptr || !ctx.options().pack_weights) return;
  WithPackedType(w.type, [&](auto type) { w.packed->Get(w, LayoutOf<decltype(type)>(), ctx.pool()); });
}

const PackedLayout* PackedLayoutOf(DType type) {
  const PackedLayout* layout = nullptr;
  WithPackedType(type, [&](auto t) { layout = &LayoutOf<decltype(t)>(); });
  return layout;
}

KernelTable MakeTable(const char* name, void (*matmul)(const WeightMatrix&, const float*, int64_t, float*, KernelContext&)) {
  KernelTable table = NeonTable();
  table.name = name;
  table.matmul = matmul;
  table.matmul_experts = nullptr;  // Highway's NEON one loops over its own matmul, not this one
  table.prepare_matmul = &PrepareMatMulPacked;
  table.packed_layout = &PackedLayoutOf;
  return table;
}

}  // namespace
}  // namespace gemlet::neon

namespace gemlet {

std::vector<const KernelTable*> NeonPackedTables() {
  static const std::vector<const KernelTable*> tables = [] {
    std::vector<const KernelTable*> found;
    if (std::strcmp(neon::NeonTable().name, "NEON") != 0) return found;  // no NEON table to build on
    const bool dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    const bool i8mm = dotprod && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
    static const KernelTable with_i8mm = neon::MakeTable("NEON_I8MM", &neon::MatMulPacked<true>);
    static const KernelTable with_dotprod = neon::MakeTable("NEON_DOTPROD", &neon::MatMulPacked<false>);
    if (i8mm) found.push_back(&with_i8mm);
    if (dotprod) found.push_back(&with_dotprod);
    return found;
  }();
  return tables;
}

}  // namespace gemlet

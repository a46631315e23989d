// GGML quantized block layouts, byte for byte as ggml writes them into GGUF, and per-type row codecs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gemlet {

// Values per block of the 32-value types and per super-block of the K types (ggml's QK4_0.., QK_K).
inline constexpr int kBlock32 = 32;
inline constexpr int kBlockK = 256;

// Scales are IEEE half bits (uint16_t), little-endian as stored; convert with F16ToF32.
// No struct has padding: every field is naturally aligned at its offset (static_asserts below).

// x = (q - 8) * d. qs[j] holds value j in the low nibble and value j + 16 in the high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kBlock32 / 2];
};

// x = q * d + m, nibbles as in Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kBlock32 / 2];
};

// x = (q - 16) * d; q's fifth bit of value j is bit j of the little-endian uint32 qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};

// x = q * d + m, bits as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};

// x = q * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kBlock32];
};

// 16 groups of 16: x = d * (sc & 15) * q - dmin * (sc >> 4), q in 0..3.
// qs packs 2-bit values: byte 32h + l holds values 128h + 32s + l at bits 2s (s = 0..3).
struct BlockQ2_K {
  uint8_t scales[kBlockK / 16];
  uint8_t qs[kBlockK / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 groups of 16: x = d * (sc - 32) * (q - 4), q in 0..7 from 2 low bits (packed as in Q2_K) plus a
// high bit: value 128h + 32s + l has it in hmask[l] bit 4h + s. The 6-bit scales: see UnpackQ3KScales.
struct BlockQ3_K {
  uint8_t hmask[kBlockK / 8];
  uint8_t qs[kBlockK / 4];
  uint8_t scales[12];
  uint16_t d;
};

// 8 groups of 32: x = d * sc * q - dmin * m, q in 0..15, 6-bit sc and m packed in `scales`
// (UnpackScaleMinK4). Byte 32c + l holds value 64c + l (low nibble) and 64c + 32 + l (high nibble).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kBlockK / 2];
};

// As Q4_K with q in 0..31: the fifth bit of value 64c + l is qh[l] bit 2c, of 64c + 32 + l bit 2c + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kBlockK / 8];
  uint8_t qs[kBlockK / 2];
};

// 16 groups of 16: x = d * scales[g] * (q - 32), q in 0..63. In half h (128 values), for l < 32:
// ql[64h + l] holds values l (low) and l + 64 (high), ql[64h + 32 + l] holds l + 32 and l + 96;
// qh[32h + l] holds the top two bits of values l, l + 32, l + 64, l + 96 at bits 0, 2, 4, 6.
struct BlockQ6_K {
  uint8_t ql[kBlockK / 2];
  uint8_t qh[kBlockK / 4];
  int8_t scales[kBlockK / 16];
  uint16_t d;
};

// Activations for K-type dot products: x = d * q, d a full float; bsums[g] = sum of qs in group g of 16.
struct BlockQ8_K {
  float d;
  int8_t qs[kBlockK];
  int16_t bsums[kBlockK / 16];
};

// Sizes match dtype.cc's block_bytes (a test checks them against GetDTypeInfo as well).
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ3_K, d) == 108);
static_assert(offsetof(BlockQ5_K, qs) == 48 && offsetof(BlockQ6_K, d) == 208);
static_assert(offsetof(BlockQ8_K, bsums) == 260);

// Scale and min of group j (0..7) of a Q4_K / Q5_K block: groups 0..3 keep 6 bits in bytes j and
// j + 4; groups 4..7 keep their low 4 bits in byte j + 4 and their top 2 bits in bytes j - 4 and j.
inline void UnpackScaleMinK4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The 16 signed scales (sc - 32, in -32..31) of a Q3_K block: low 4 bits of group j in byte j % 8
// (low nibble for j < 8, high for j >= 8), top 2 bits in byte 8 + j % 4 at bit 2 * (j / 4).
inline void UnpackQ3KScales(const uint8_t* scales, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// Per-type reference row codecs; n is a multiple of the type's block size. DequantizeRow and
// QuantizeRow (tensor/dtype.h) dispatch to these; kernels may call them directly.
void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n);
void DequantizeRowQ4_1(const BlockQ4_1* x, float* y, int64_t n);
void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n);
void DequantizeRowQ5_1(const BlockQ5_1* x, float* y, int64_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n);
void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n);
void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n);
void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n);
void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n);
void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n);
void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n);

// Quantizers give the bytes of llama.cpp's reference ones, i.e. of llama-quantize without an
// importance matrix. For the 32-value types that is the format's definition; for the K types it is
// llama.cpp's scale search (tests hold them to its accuracy and, today, to its bytes).
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n);
void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n);
void QuantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n);
void QuantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n);
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ2_K(const float* x, BlockQ2_K* y, int64_t n);
void QuantizeRowQ3_K(const float* x, BlockQ3_K* y, int64_t n);
void QuantizeRowQ4_K(const float* x, BlockQ4_K* y, int64_t n);
void QuantizeRowQ5_K(const float* x, BlockQ5_K* y, int64_t n);
void QuantizeRowQ6_K(const float* x, BlockQ6_K* y, int64_t n);
void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n);

}  // namespace gemlet

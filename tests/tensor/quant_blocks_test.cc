// Hand-built blocks with values worked out by hand: pins each format's bit layout and the sign of
// zero independently of llama.cpp's files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace gemlet {
namespace {

constexpr uint16_t kF16One = 0x3C00, kF16Half = 0x3800, kF16Quarter = 0x3400, kF16MinusHalf = 0xB800,
                   kF16Eighth = 0x3000, kF16Two = 0x4000, kF16MinusOne = 0xBC00;

template <typename Block>
std::vector<float> Dequant(DType type, const Block& block) {
  std::vector<float> out(static_cast<size_t>(GetDTypeInfo(type).block_size));
  DequantizeRow(type, &block, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

TEST(QuantBlocks, SizesMatchTheDTypeTable) {
  EXPECT_EQ(sizeof(BlockQ4_0), static_cast<size_t>(GetDTypeInfo(DType::kQ4_0).block_bytes));
  EXPECT_EQ(sizeof(BlockQ4_1), static_cast<size_t>(GetDTypeInfo(DType::kQ4_1).block_bytes));
  EXPECT_EQ(sizeof(BlockQ5_0), static_cast<size_t>(GetDTypeInfo(DType::kQ5_0).block_bytes));
  EXPECT_EQ(sizeof(BlockQ5_1), static_cast<size_t>(GetDTypeInfo(DType::kQ5_1).block_bytes));
  EXPECT_EQ(sizeof(BlockQ8_0), static_cast<size_t>(GetDTypeInfo(DType::kQ8_0).block_bytes));
  EXPECT_EQ(sizeof(BlockQ2_K), static_cast<size_t>(GetDTypeInfo(DType::kQ2_K).block_bytes));
  EXPECT_EQ(sizeof(BlockQ3_K), static_cast<size_t>(GetDTypeInfo(DType::kQ3_K).block_bytes));
  EXPECT_EQ(sizeof(BlockQ4_K), static_cast<size_t>(GetDTypeInfo(DType::kQ4_K).block_bytes));
  EXPECT_EQ(sizeof(BlockQ5_K), static_cast<size_t>(GetDTypeInfo(DType::kQ5_K).block_bytes));
  EXPECT_EQ(sizeof(BlockQ6_K), static_cast<size_t>(GetDTypeInfo(DType::kQ6_K).block_bytes));
  EXPECT_EQ(sizeof(BlockQ8_K), static_cast<size_t>(GetDTypeInfo(DType::kQ8_K).block_bytes));
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0}) {
    EXPECT_EQ(GetDTypeInfo(t).block_size, kBlock32);
  }
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K}) {
    EXPECT_EQ(GetDTypeInfo(t).block_size, kBlockK);
    EXPECT_TRUE(GetDTypeInfo(t).can_compute);
  }
}

TEST(QuantBlocks, Q4_0) {
  BlockQ4_0 b{};
  b.d = kF16Half;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));  // value j: j, value j+16: 15-j
  const std::vector<float> y = Dequant(DType::kQ4_0, b);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[7], -0.5f);
  EXPECT_EQ(y[8], 0.0f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j));
  }
  EXPECT_FALSE(std::signbit(y[8]));
  // A negative scale flips every value, and q == 8 becomes -0.0 as in ggml.
  b.d = kF16MinusHalf;
  const std::vector<float> z = Dequant(DType::kQ4_0, b);
  EXPECT_EQ(z[0], 4.0f);
  EXPECT_EQ(z[15], -3.5f);
  EXPECT_EQ(z[8], 0.0f);
  EXPECT_TRUE(std::signbit(z[8]));
  EXPECT_TRUE(std::signbit(z[23]));  // value 16 + 7 has q = 15 - 7 = 8
}

TEST(QuantBlocks, Q4_1) {
  BlockQ4_1 b{};
  b.d = kF16Quarter;
  b.m = kF16MinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  const std::vector<float> y = Dequant(DType::kQ4_1, b);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[15], 2.75f);
  EXPECT_EQ(y[16 + 6], 0.5f);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(y[j], y[j + 16]);
}

TEST(QuantBlocks, Q5_0) {
  BlockQ5_0 b{};
  b.d = kF16One;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  // Little-endian qh = 0x80000001: the fifth bit of values 0 and 31.
  b.qh[0] = 0x01;
  b.qh[3] = 0x80;
  const std::vector<float> y = Dequant(DType::kQ5_0, b);
  EXPECT_EQ(y[0], 0.0f);     // 0 | 16 = 16 -> 0
  EXPECT_EQ(y[1], -15.0f);   // 1 - 16
  EXPECT_EQ(y[15], -1.0f);
  EXPECT_EQ(y[16], -16.0f);
  EXPECT_EQ(y[30], -2.0f);
  EXPECT_EQ(y[31], 15.0f);   // 15 | 16 = 31 -> 15
  b.qh[1] = 0x01;            // bit 8: value 8
  b.d = kF16MinusOne;
  const std::vector<float> z = Dequant(DType::kQ5_0, b);
  EXPECT_EQ(z[8], -8.0f);    // (8 | 16) - 16 = 8, times -1
  EXPECT_TRUE(std::signbit(z[0]));
}

TEST(QuantBlocks, Q5_1) {
  BlockQ5_1 b{};
  b.d = kF16Half;
  b.m = kF16Two;
  b.qs[2] = 0x3F;  // value 2: 15, value 18: 3
  b.qh[2] = 0x04;  // bit 18: value 18 gets +16
  b.qh[0] = 0x04;  // bit 2: value 2 gets +16
  const std::vector<float> y = Dequant(DType::kQ5_1, b);
  EXPECT_EQ(y[2], 2.0f + 0.5f * 31.0f);
  EXPECT_EQ(y[18], 2.0f + 0.5f * 19.0f);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[31], 2.0f);
}

TEST(QuantBlocks, Q8_0) {
  BlockQ8_0 b{};
  b.d = kF16Eighth;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  const std::vector<float> y = Dequant(DType::kQ8_0, b);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[31], 15.0f);
}

TEST(QuantBlocks, Q2_K) {
  BlockQ2_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  // Group g: scale (g % 4) + 1, min (g % 3).
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(((g % 4) + 1) | ((g % 3) << 4));
  b.qs[0] = 0xE4;   // 0b11'10'01'00: values 0, 32, 64, 96 get 0, 1, 2, 3
  b.qs[33] = 0xC0;  // bits 6-7 of byte 32 + 1: value 128 + 96 + 1 = 225 gets 3
  const std::vector<float> y = Dequant(DType::kQ2_K, b);
  EXPECT_EQ(y[0], 0.0f);     // group 0: 1 * 0 - 0.5 * 0
  EXPECT_EQ(y[32], 2.0f);    // group 2: 3 * 1 - 0.5 * 2
  EXPECT_EQ(y[64], 1.5f);    // group 4: 1 * 2 - 0.5 * 1
  EXPECT_EQ(y[96], 9.0f);    // group 6: 3 * 3 - 0.5 * 0
  EXPECT_EQ(y[225], 8.0f);   // group 14: 3 * 3 - 0.5 * 2
  EXPECT_EQ(y[33], -1.0f);   // group 2, level 0
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[16], -0.5f);   // group 1: min 1
  EXPECT_EQ(y[255], 0.0f);   // group 15: min 0
}

TEST(QuantBlocks, Q3_KScales) {
  uint8_t s[12] = {};
  s[0] = 0x21;  // group 0 low 1, group 8 low 2
  s[4] = 0x0F;  // group 4 low 15, group 12 low 0
  s[8] = 0xE4;  // top bits: group 0 -> 0, group 4 -> 1, group 8 -> 2, group 12 -> 3
  int8_t out[16];
  UnpackQ3KScales(s, out);
  EXPECT_EQ(out[0], 1 - 32);
  EXPECT_EQ(out[4], 31 - 32);
  EXPECT_EQ(out[8], 34 - 32);
  EXPECT_EQ(out[12], 48 - 32);
  for (int g : {1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15}) EXPECT_EQ(out[g], -32) << g;
}

TEST(QuantBlocks, Q3_K) {
  BlockQ3_K b{};
  b.d = kF16Quarter;
  // Every group's 6-bit scale is 33 (signed +1): low nibbles 1, top bits 2.
  for (int i = 0; i < 8; ++i) b.scales[i] = 0x11;
  for (int i = 8; i < 12; ++i) b.scales[i] = 0xAA;
  std::memset(b.hmask, 0xFF, sizeof b.hmask);  // high bit set: level = low bits
  b.qs[0] = 0xE4;                              // values 0, 32, 64, 96: 0, 1, 2, 3
  b.hmask[1] = 0xFE;                           // value 1 (bit 0 of byte 1) loses its high bit
  b.hmask[2] = 0x7F;                           // value 128 + 96 + 2 (bit 7 of byte 2) too
  const std::vector<float> y = Dequant(DType::kQ3_K, b);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[32], 0.25f);
  EXPECT_EQ(y[64], 0.5f);
  EXPECT_EQ(y[96], 0.75f);
  EXPECT_EQ(y[1], -1.0f);    // (0 - 4) * 0.25
  EXPECT_EQ(y[226], -1.0f);
  EXPECT_EQ(y[2], 0.0f);
  // Group 0 with 6-bit scale 32 (signed 0): low nibble 0, top bits still 2. ggml's d * 0 * (q - 4)
  // is -0.0 for a level below 4 and +0.0 otherwise.
  b.scales[0] = 0x10;
  const std::vector<float> z = Dequant(DType::kQ3_K, b);
  EXPECT_EQ(z[1], 0.0f);
  EXPECT_TRUE(std::signbit(z[1]));
  EXPECT_FALSE(std::signbit(z[0]));
}

TEST(QuantBlocks, ScaleMinK4) {
  uint8_t s[12] = {};
  s[0] = 0xC5;  // group 0 scale 5; top bits 3 for group 4's scale
  s[4] = 0x47;  // group 0 min 7; top bits 1 for group 4's min
  s[8] = 0x2A;  // group 4: scale low 0xA, min low 2
  uint8_t sc, m;
  UnpackScaleMinK4(0, s, &sc, &m);
  EXPECT_EQ(sc, 5);
  EXPECT_EQ(m, 7);
  UnpackScaleMinK4(4, s, &sc, &m);
  EXPECT_EQ(sc, 0xA | (3 << 4));
  EXPECT_EQ(m, 2 | (1 << 4));
  UnpackScaleMinK4(1, s, &sc, &m);
  EXPECT_EQ(sc, 0);
  EXPECT_EQ(m, 0);
}

TEST(QuantBlocks, Q4_K) {
  BlockQ4_K b{};
  b.d = kF16One;
  b.dmin = kF16Quarter;
  b.scales[0] = 0xC5;
  b.scales[4] = 0x47;
  b.scales[8] = 0x2A;  // group 0: scale 5, min 7; group 4: scale 58, min 18
  b.qs[0] = 0x3A;      // value 0 (group 0): 10; value 32 (group 1): 3
  b.qs[64 + 5] = 0x0F; // chunk 2 low nibble: value 128 + 5 (group 4): 15
  const std::vector<float> y = Dequant(DType::kQ4_K, b);
  EXPECT_EQ(y[0], 48.25f);   // 5 * 10 - 0.25 * 7
  EXPECT_EQ(y[1], -1.75f);
  EXPECT_EQ(y[32], 0.0f);    // group 1: scale 0, min 0
  EXPECT_EQ(y[133], 865.5f); // 58 * 15 - 0.25 * 18
  EXPECT_EQ(y[128], -4.5f);
  EXPECT_EQ(y[160], 0.0f);   // group 5
}

TEST(QuantBlocks, Q5_K) {
  BlockQ5_K b{};
  b.d = kF16One;
  b.dmin = kF16Quarter;
  b.scales[0] = 0xC5;
  b.scales[4] = 0x47;
  b.scales[8] = 0x2A;
  b.scales[1] = 2;     // group 1: scale 2, min 0
  b.qs[0] = 0x3A;
  b.qh[3] = 0x01;      // value 3 (group 0) +16
  b.qh[0] = 0x02;      // value 32 (group 1) +16
  b.qh[5] = 0x10;      // value 128 + 5 (group 4) +16
  const std::vector<float> y = Dequant(DType::kQ5_K, b);
  EXPECT_EQ(y[0], 48.25f);
  EXPECT_EQ(y[3], 5.0f * 16.0f - 1.75f);
  EXPECT_EQ(y[32], 2.0f * 19.0f);
  EXPECT_EQ(y[133], 58.0f * 16.0f - 4.5f);
  EXPECT_EQ(y[134], -4.5f);
}

TEST(QuantBlocks, Q6_K) {
  BlockQ6_K b{};
  b.d = kF16Half;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g - 8);
  b.ql[0] = 0x21;           // value 0 low 1, value 64 low 2
  b.qh[0] = 0xE4;           // top bits: value 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3
  b.ql[64 + 32 + 7] = 0xF0; // value 128 + 96 + 7 = 231: low 15
  const std::vector<float> y = Dequant(DType::kQ6_K, b);
  EXPECT_EQ(y[0], 0.5f * -8.0f * -31.0f);   // group 0
  EXPECT_EQ(y[32], 0.5f * -6.0f * -16.0f);  // group 2, q = 16
  EXPECT_EQ(y[64], 0.5f * -4.0f * 2.0f);    // group 4, q = 34
  EXPECT_EQ(y[96], 0.5f * -2.0f * 16.0f);   // group 6, q = 48
  EXPECT_EQ(y[231], 0.5f * 6.0f * -17.0f);  // group 14
  EXPECT_EQ(y[1], 0.5f * -8.0f * -32.0f);
  // Group 8 has scale 0: d * 0 * (0 - 32) is -0.0 in ggml.
  for (int i = 128; i < 144; ++i) {
    EXPECT_EQ(y[i], 0.0f);
    EXPECT_TRUE(std::signbit(y[i])) << i;
  }
}

TEST(QuantBlocks, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.25f;
  for (int i = 0; i < 256; ++i) b.qs[i] = static_cast<int8_t>(i - 128);
  const std::vector<float> y = Dequant(DType::kQ8_K, b);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.25f * static_cast<float>(i - 128));
  // Quantizing writes the group sums SIMD dot products use.
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16) - 3.0f;
  x[200] = -127.0f;  // the extreme: d = 1, levels are the integers themselves
  BlockQ8_K q{};
  QuantizeRow(DType::kQ8_K, x.data(), &q, 256);
  EXPECT_EQ(q.d, 1.0f);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(q.qs[i], static_cast<int8_t>(x[i])) << i;
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += q.qs[16 * g + i];
    EXPECT_EQ(q.bsums[g], sum);
  }
  EXPECT_EQ(q.bsums[0], 72);  // sum of -3..12
}

}  // namespace
}  // namespace gemlet

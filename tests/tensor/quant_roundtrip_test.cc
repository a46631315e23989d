// Quantize -> dequantize on weight-like data: error bounds per type, edge-case rows, and that a row
// is the concatenation of its independently quantized blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/half.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "tensor_test_util.h"

namespace gemlet {
namespace {

using ::gemlet::testing::RandomWeights;

const DType kBlockTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K,
                             DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K};

std::vector<float> RoundTrip(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> q(RowBytes(type, static_cast<int64_t>(x.size())));
  QuantizeRow(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  std::vector<float> y(x.size());
  DequantizeRow(type, q.data(), y.data(), static_cast<int64_t>(y.size()));
  return y;
}

double Rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

// The 32-value types have worst-case bounds: half a step, plus a whole step for the one level the
// symmetric types lack on the positive side, plus the f16 rounding of the scale (and of the min).
TEST(QuantRoundTrip, BlockErrorBounds32) {
  const std::vector<float> x = RandomWeights(32 * 512, 7);
  for (DType type : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0}) {
    const std::vector<float> y = RoundTrip(type, x);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0.0f, min = x[32 * b], max = x[32 * b];
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(x[32 * b + j]));
        min = std::min(min, x[32 * b + j]);
        max = std::max(max, x[32 * b + j]);
      }
      float bound = 0.0f;
      switch (type) {
        case DType::kQ4_0: bound = 1.01f * amax / 8.0f; break;
        case DType::kQ5_0: bound = 1.01f * amax / 16.0f; break;
        case DType::kQ8_0: bound = 0.57f * amax / 127.0f; break;
        case DType::kQ4_1: bound = 0.51f * (max - min) / 15.0f + 15.0f * (max - min) / 15.0f / 2048.0f + std::fabs(min) / 2048.0f; break;
        case DType::kQ5_1: bound = 0.51f * (max - min) / 31.0f + 31.0f * (max - min) / 31.0f / 2048.0f + std::fabs(min) / 2048.0f; break;
        default: break;
      }
      for (int j = 0; j < 32; ++j) {
        ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), bound)
            << DTypeName(type) << " block " << b << " value " << j;
      }
    }
  }
}

// RMSE relative to the data's RMS on N(0, 0.02) weights with 0.5% outliers, against ceilings about
// 15% above what llama.cpp's quantizers reach on the same data (0.131 for Q4_0, 0.285 for Q2_K, 0.0905
// for Q4_K, 0.0271 for Q6_K...). Q8_K's one scale per 256 values is set by the outliers.
TEST(QuantRoundTrip, RelativeRmse) {
  const std::vector<float> x = RandomWeights(256 * 64, 11);
  double rms = 0.0;
  for (float v : x) rms += static_cast<double>(v) * v;
  rms = std::sqrt(rms / static_cast<double>(x.size()));
  struct Case {
    DType type;
    double ceiling;
  };
  const Case cases[] = {{DType::kQ4_0, 0.150}, {DType::kQ4_1, 0.115}, {DType::kQ5_0, 0.081}, {DType::kQ5_1, 0.054},
                        {DType::kQ8_0, 0.0107}, {DType::kQ2_K, 0.33}, {DType::kQ3_K, 0.19}, {DType::kQ4_K, 0.104},
                        {DType::kQ5_K, 0.053}, {DType::kQ6_K, 0.031}, {DType::kQ8_K, 0.027}};
  for (const Case& c : cases) {
    const double rel = Rmse(RoundTrip(c.type, x), x) / rms;
    std::printf("  %-5s relative rmse %.5f\n", DTypeName(c.type), rel);
    EXPECT_LE(rel, c.ceiling) << DTypeName(c.type);
  }
}

// Rows llama.cpp's test data also covers: zeros, constants, values whose scale underflows in f16,
// an outlier, all negative, steps of 1/8. Every output must be finite and the error bounded.
TEST(QuantRoundTrip, EdgeRows) {
  std::vector<std::vector<float>> rows;
  rows.emplace_back(256, 0.0f);
  rows.emplace_back(256, 0.01f);
  rows.emplace_back(256, -0.37f);
  std::vector<float> tiny(256), outlier = RandomWeights(256, 3, 0.02f, 0.0f), negative(256), eighths(256);
  for (int i = 0; i < 256; ++i) {
    tiny[i] = i % 2 ? 1e-8f : -1e-8f;
    negative[i] = -0.001f - std::fabs(outlier[i]);
    eighths[i] = static_cast<float>(i % 17 - 8) / 8.0f;
  }
  outlier[77] = 50.0f;
  for (auto* r : {&tiny, &outlier, &negative, &eighths}) rows.push_back(*r);

  for (DType type : kBlockTypes) {
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::vector<float>& x = rows[r];
      const std::vector<float> y = RoundTrip(type, x);
      float amax = 0.0f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << DTypeName(type) << " row " << r << " value " << i;
        ASSERT_LE(std::fabs(y[i] - x[i]), amax) << DTypeName(type) << " row " << r << " value " << i;
      }
      if (r == 0) {
        for (float v : y) ASSERT_EQ(v, 0.0f) << DTypeName(type);
      }
      if (r == 1 || r == 2) {  // a constant is one level times f16 (and 6-bit) scales: only their rounding remains
        for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 5e-3 * std::fabs(x[i])) << DTypeName(type);
      }
      if (r == 4 && type != DType::kQ8_K) {  // the outlier sets its block's scale and is kept
        EXPECT_NEAR(y[77], 50.0f, 0.05f * 50.0f) << DTypeName(type);
      }
    }
  }
}

// Blocks are independent: a row quantizes to its blocks quantized one by one.
TEST(QuantRoundTrip, RowIsItsBlocks) {
  for (DType type : kBlockTypes) {
    const DTypeInfo& info = GetDTypeInfo(type);
    const int64_t n = 5 * info.block_size;
    const std::vector<float> x = RandomWeights(static_cast<size_t>(n), 21 + static_cast<uint32_t>(type));
    std::vector<uint8_t> whole(RowBytes(type, n)), pieces(RowBytes(type, n));
    QuantizeRow(type, x.data(), whole.data(), n);
    for (int64_t b = 0; b < 5; ++b) {
      QuantizeRow(type, x.data() + b * info.block_size, pieces.data() + b * info.block_bytes, info.block_size);
    }
    EXPECT_EQ(whole, pieces) << DTypeName(type);
    std::vector<float> y(static_cast<size_t>(n)), y_piece(static_cast<size_t>(info.block_size));
    DequantizeRow(type, whole.data(), y.data(), n);
    for (int64_t b = 0; b < 5; ++b) {
      DequantizeRow(type, whole.data() + b * info.block_bytes, y_piece.data(), info.block_size);
      EXPECT_EQ(std::memcmp(y_piece.data(), y.data() + b * info.block_size, y_piece.size() * 4), 0) << DTypeName(type);
    }
  }
}

TEST(QuantRoundTrip, Q8_KInvariants) {
  const std::vector<float> x = RandomWeights(256 * 8, 5, 1.0f, 0.01f);
  std::vector<BlockQ8_K> q(8);
  QuantizeRow(DType::kQ8_K, x.data(), q.data(), 256 * 8);
  for (const BlockQ8_K& b : q) {
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(&b - q.data()) * 256 + i]));
    EXPECT_NEAR(std::fabs(b.d), amax / 127.0f, amax * 1e-6f);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) {
        EXPECT_GE(b.qs[16 * g + i], -127);
        sum += b.qs[16 * g + i];
      }
      EXPECT_EQ(b.bsums[g], sum);
    }
  }
}

// F32, F16 and BF16 rows go through the same entry points.
TEST(QuantRoundTrip, FloatTypes) {
  const std::vector<float> x = RandomWeights(1000, 9, 1.0f);
  EXPECT_EQ(RoundTrip(DType::kF32, x), x);
  const std::vector<float> h = RoundTrip(DType::kF16, x);
  const std::vector<float> b = RoundTrip(DType::kBF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], F16ToF32(F32ToF16(x[i])));
    EXPECT_EQ(b[i], Bf16ToF32(F32ToBf16(x[i])));
    EXPECT_NEAR(h[i], x[i], std::fabs(x[i]) * 0x1p-11f + 0x1p-25f);
    EXPECT_NEAR(b[i], x[i], std::fabs(x[i]) * 0x1p-8f);
  }
  EXPECT_EQ(RoundTrip(DType::kF16, h), h);
  EXPECT_EQ(RoundTrip(DType::kBF16, b), b);
}

}  // namespace
}  // namespace gemlet

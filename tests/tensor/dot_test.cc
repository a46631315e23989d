// DotRowRef against dequantize + dot: bit-exact with the float definition, close to a double sum,
// on odd row lengths and odd row counts for every computable type.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "tensor/dot.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "tensor_test_util.h"

namespace gemlet {
namespace {

using ::gemlet::testing::Bits;
using ::gemlet::testing::RandomWeights;

const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                        DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                        DType::kQ6_K, DType::kQ8_K};

TEST(DotRowRef, MatchesDequantizedDot) {
  for (DType type : kTypes) {
    const DTypeInfo& info = GetDTypeInfo(type);
    // Odd numbers of blocks; the 1-value types get lengths that are not multiples of the chunk.
    const std::vector<int64_t> lengths = info.block_size == 1 ? std::vector<int64_t>{1, 7, 255, 257, 1001}
                                                              : std::vector<int64_t>{1, 3, 7, 9};
    for (int64_t blocks : lengths) {
      const int64_t n = blocks * info.block_size;
      const int rows = 5;
      const size_t row_bytes = RowBytes(type, n);
      const std::vector<float> w = RandomWeights(static_cast<size_t>(n) * rows, 100 + static_cast<uint32_t>(n));
      const std::vector<float> x = RandomWeights(static_cast<size_t>(n), 200 + static_cast<uint32_t>(n), 1.0f);
      std::vector<uint8_t> q(row_bytes * rows);
      for (int r = 0; r < rows; ++r) QuantizeRow(type, &w[r * n], &q[r * row_bytes], n);
      for (int r = 0; r < rows; ++r) {
        std::vector<float> deq(static_cast<size_t>(n));
        DequantizeRow(type, &q[r * row_bytes], deq.data(), n);
        float sum_f = 0.0f;
        double sum_d = 0.0, sum_abs = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          sum_f += deq[i] * x[i];
          sum_d += static_cast<double>(deq[i]) * x[i];
          sum_abs += std::fabs(static_cast<double>(deq[i]) * x[i]);
        }
        const float got = DotRowRef(type, &q[r * row_bytes], x.data(), n);
        // The definition: float products accumulated in index order.
        EXPECT_EQ(Bits(got), Bits(sum_f)) << DTypeName(type) << " n=" << n << " row " << r;
        // And within float accumulation error of the exact sum.
        EXPECT_NEAR(got, sum_d, static_cast<double>(n + 1) * FLT_EPSILON * sum_abs + 1e-30)
            << DTypeName(type) << " n=" << n << " row " << r;
      }
    }
  }
}

// Small integers make every product and partial sum exact, so the expected value is known exactly
// and any misplaced block or byte shows.
TEST(DotRowRef, ExactOnIntegers) {
  const int64_t n = 7 * 32;
  std::vector<BlockQ8_0> w(7);
  std::vector<float> x(static_cast<size_t>(n));
  double want = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int b = static_cast<int>(i / 32);
    w[b].d = 0x3C00 + static_cast<uint16_t>(b % 2 ? 0x400 : 0);  // 1.0 or 2.0 by block
    w[b].qs[i % 32] = static_cast<int8_t>(i % 13 - 6);
    x[i] = static_cast<float>(i % 5 - 2);
    want += (b % 2 ? 2.0 : 1.0) * static_cast<double>(i % 13 - 6) * (i % 5 - 2);
  }
  EXPECT_EQ(DotRowRef(DType::kQ8_0, w.data(), x.data(), n), static_cast<float>(want));

  std::vector<uint16_t> h(1001);
  std::vector<float> xf(1001);
  double want_f16 = 0.0;
  for (int i = 0; i < 1001; ++i) {
    h[i] = static_cast<uint16_t>(0x3C00 + (i % 3) * 0x400);  // 1, 2, 4
    xf[i] = static_cast<float>(i % 7 - 3);
    want_f16 += static_cast<double>(1 << (i % 3)) * (i % 7 - 3);
  }
  EXPECT_EQ(DotRowRef(DType::kF16, h.data(), xf.data(), 1001), static_cast<float>(want_f16));
}

}  // namespace
}  // namespace gemlet

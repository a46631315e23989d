// Every element-wise kernel table (the scalar reference and each compiled SIMD target) against an
// independent evaluation in double precision written here, on odd sizes: no table is compared with
// itself, and the reference is held to the same bounds as the fast paths. Tolerances are float
// rounding bounds of a float evaluation against the exact one (kU = 2^-24), with a factor of 2 to
// spare for the order of summation.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "tensor/quant_blocks.h"

namespace gemlet {
namespace {

using test::kU;

// The kernels' definitions evaluated in double and rounded once at the end. RoPE's angle is the
// float product pos * inv_freq, as the kernels' contract says (positions and frequencies are
// floats); only its cosine and sine are taken in double.
namespace exact {

double Value(const float* row, int64_t i) { return row[i]; }
double Value(const uint16_t* row, int64_t i) { return F16ToF32(row[i]); }
double Value(const BlockQ8_0* row, int64_t i) {
  const BlockQ8_0& b = row[i / kBlock32];
  return static_cast<double>(b.qs[i % kBlock32]) * F16ToF32(b.d);
}
double Value(const BlockQ4_0* row, int64_t i) {
  float block[kBlock32];
  DequantizeRowQ4_0(&row[i / kBlock32], block, kBlock32);  // the format's own reading
  return block[i % kBlock32];
}

template <class T>
void DotRows(const float* q, size_t q_stride, int n_q, const T* rows, size_t stride, int64_t n_rows, int64_t n,
             float* out, size_t out_stride) {
  for (int a = 0; a < n_q; ++a) {
    for (int64_t j = 0; j < n_rows; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += q[a * q_stride + i] * Value(rows + j * stride, i);
      out[a * out_stride + j] = static_cast<float>(sum);
    }
  }
}

template <class T>
void WeightedSum(const float* p, size_t p_stride, int n_p, const T* rows, size_t stride, int64_t n_rows, int64_t n,
                 float* y, size_t y_stride) {
  for (int a = 0; a < n_p; ++a) {
    for (int64_t i = 0; i < n; ++i) {
      double sum = y[a * y_stride + i];
      for (int64_t j = 0; j < n_rows; ++j) sum += p[a * p_stride + j] * Value(rows + j * stride, i);
      y[a * y_stride + i] = static_cast<float>(sum);
    }
  }
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * inv * (w ? w[i] : 1.0));
}

void GeluTanhMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    const double gelu = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    gate[i] = static_cast<float>(gelu * up[i]);
  }
}

void RopeRotateHalf(float* x, int n_heads, int head_dim, const float* inv_freq, int64_t pos) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<size_t>(h) * head_dim;
      const double a = v[i], b = v[i + half];
      v[i] = static_cast<float>(a * c - b * s);
      v[i + half] = static_cast<float>(b * c + a * s);
    }
  }
}

float Softmax(float* x, int64_t n) {
  double max = x[0], sum = 0;
  for (int64_t i = 1; i < n; ++i) max = std::max<double>(max, x[i]);
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sum += e[i] = std::exp(x[i] - max);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[i] / sum);
  return static_cast<float>(max + std::log(sum));
}

void SoftCap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
}

void LayerNorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((x[i] - mean) * inv * w[i] + (b ? b[i] : 0.0));
}

void GeluTanh(float* x, int64_t n) {
  const float one = 1.0f;
  for (int64_t i = 0; i < n; ++i) GeluTanhMul(x + i, &one, 1);
}

void Silu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / (1.0 + std::exp(-static_cast<double>(x[i]))));
}

void SigmoidMul(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(a[i] / (1.0 + std::exp(-static_cast<double>(b[i]))));
}

const KernelTable& Table() {
  static const KernelTable table = {"exact",
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    RmsNorm,
                                    GeluTanhMul,
                                    RopeRotateHalf,
                                    DotRows<float>,
                                    DotRows<uint16_t>,
                                    DotRows<BlockQ8_0>,
                                    DotRows<BlockQ4_0>,
                                    WeightedSum<float>,
                                    WeightedSum<uint16_t>,
                                    WeightedSum<BlockQ8_0>,
                                    WeightedSum<BlockQ4_0>,
                                    Softmax,
                                    SoftCap,
                                    LayerNorm,
                                    GeluTanh,
                                    nullptr,
                                    Silu,
                                    SigmoidMul};
  return table;
}

}  // namespace exact

class ElementwiseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    k_ = test::TableNamed(GetParam());
    ASSERT_NE(k_, nullptr);
  }
  const KernelTable* k_ = nullptr;
  const KernelTable* exact_ = &exact::Table();  // what every table is held to
};

// Attention rows: n_rows rows of n values with a gap between them (stride > n), f32 and f16, read
// by groups of queries (grouped-query attention) of every tile size and remainder.
constexpr int64_t kRowCounts[] = {1, 2, 3, 4, 5, 7, 9};
constexpr int kQueryCounts[] = {1, 2, 3, 4, 5, 8, 15};  // 15: tiles of 8, 4, 2 and 1

struct AttentionRows {
  int64_t n_rows, n;
  size_t stride;
  std::vector<float> f32;
  std::vector<uint16_t> f16;
  float F16At(int64_t j, int64_t i) const { return F16ToF32(f16[static_cast<size_t>(j) * stride + i]); }
  float F32At(int64_t j, int64_t i) const { return f32[static_cast<size_t>(j) * stride + i]; }
};

AttentionRows MakeRows(int64_t n_rows, int64_t n, uint32_t seed) {
  AttentionRows r{n_rows, n, static_cast<size_t>(n + 3), {}, {}};
  r.f32 = test::RandomFloats(static_cast<int64_t>(r.stride) * n_rows, seed);
  r.f16.resize(r.f32.size());
  for (size_t i = 0; i < r.f32.size(); ++i) r.f16[i] = F32ToF16(r.f32[i]);
  return r;
}

TEST_P(ElementwiseTest, DotRowsF32AndF16) {
  for (int64_t n : test::OddSizes()) {
    for (int n_q : kQueryCounts) {
      for (int64_t n_rows : kRowCounts) {
        // Queries n + 1 apart, outputs n_rows + 2 apart: strides are honoured, gaps untouched.
        const size_t q_stride = static_cast<size_t>(n + 1), out_stride = static_cast<size_t>(n_rows + 2);
        const auto q = test::RandomFloats(static_cast<int64_t>(q_stride) * n_q, static_cast<uint32_t>(1 + n + 10 * n_q));
        const AttentionRows r = MakeRows(n_rows, n, static_cast<uint32_t>(2 + n + 100 * n_rows));
        const size_t size = out_stride * n_q;
        std::vector<float> out(size, -7.0f), out_exact(size, -7.0f), out16(size, -7.0f), out16_exact(size, -7.0f);
        k_->dot_rows_f32(q.data(), q_stride, n_q, r.f32.data(), r.stride, n_rows, n, out.data(), out_stride);
        exact_->dot_rows_f32(q.data(), q_stride, n_q, r.f32.data(), r.stride, n_rows, n, out_exact.data(), out_stride);
        k_->dot_rows_f16(q.data(), q_stride, n_q, r.f16.data(), r.stride, n_rows, n, out16.data(), out_stride);
        exact_->dot_rows_f16(q.data(), q_stride, n_q, r.f16.data(), r.stride, n_rows, n, out16_exact.data(), out_stride);
        for (int a = 0; a < n_q; ++a) {
          for (int64_t j = 0; j < n_rows; ++j) {
            double abs_sum = 0, abs_sum16 = 0;
            for (int64_t i = 0; i < n; ++i) {
              const double x = q[a * q_stride + i];
              abs_sum += std::fabs(x * r.F32At(j, i));
              abs_sum16 += std::fabs(x * r.F16At(j, i));
            }
            // Any summation order of n products errs by at most (n - 1) u sum|a b| (plus u per
            // product); two orders differ by at most twice that.
            const size_t o = a * out_stride + j;
            EXPECT_NEAR(out[o], out_exact[o], 2 * (n + 1) * kU * abs_sum) << "n=" << n << " q=" << n_q << " rows=" << n_rows;
            EXPECT_NEAR(out16[o], out16_exact[o], 2 * (n + 1) * kU * abs_sum16)
                << "n=" << n << " q=" << n_q << " rows=" << n_rows;
          }
          EXPECT_EQ(out[a * out_stride + n_rows], -7.0f);  // the gap after each output row
        }
      }
    }
  }
}

TEST_P(ElementwiseTest, DotRowsScoreDoesNotDependOnItsTile) {
  // A key's score must come out bit for bit the same whichever group of rows and queries it was
  // computed in: prefill in chunks has to equal prefill at once.
  const int64_t n = 77, n_rows = 7;
  const int n_q = 15;  // tiles of 8, 4, 2 and 1 queries (AVX2: 4, 4, 4, 2, 1)
  const AttentionRows r = MakeRows(n_rows, n, 11);
  const auto q = test::RandomFloats(n_q * n, 12);
  std::vector<float> all(n_q * n_rows);
  k_->dot_rows_f32(q.data(), n, n_q, r.f32.data(), r.stride, n_rows, n, all.data(), n_rows);
  for (int a = 0; a < n_q; ++a) {
    for (int64_t j = 0; j < n_rows; ++j) {
      float one;
      k_->dot_rows_f32(q.data() + a * n, n, 1, r.f32.data() + j * r.stride, r.stride, 1, n, &one, 1);
      EXPECT_EQ(one, all[a * n_rows + j]) << "query " << a << " row " << j;
    }
  }
}

TEST_P(ElementwiseTest, WeightedSumF32AndF16) {
  for (int64_t n : test::OddSizes()) {
    for (int n_p : kQueryCounts) {
      for (int64_t n_rows : kRowCounts) {
        const size_t p_stride = static_cast<size_t>(n_rows + 1), y_stride = static_cast<size_t>(n + 2);
        const auto p = test::RandomFloats(static_cast<int64_t>(p_stride) * n_p, static_cast<uint32_t>(3 + n + 10 * n_p));
        const auto y0 = test::RandomFloats(static_cast<int64_t>(y_stride) * n_p, static_cast<uint32_t>(4 + n));
        const AttentionRows r = MakeRows(n_rows, n, static_cast<uint32_t>(5 + n + 100 * n_rows));
        auto y = y0, y_exact = y0, y16 = y0, y16_exact = y0;
        k_->weighted_sum_f32(p.data(), p_stride, n_p, r.f32.data(), r.stride, n_rows, n, y.data(), y_stride);
        exact_->weighted_sum_f32(p.data(), p_stride, n_p, r.f32.data(), r.stride, n_rows, n, y_exact.data(), y_stride);
        k_->weighted_sum_f16(p.data(), p_stride, n_p, r.f16.data(), r.stride, n_rows, n, y16.data(), y_stride);
        exact_->weighted_sum_f16(p.data(), p_stride, n_p, r.f16.data(), r.stride, n_rows, n, y16_exact.data(), y_stride);
        for (int a = 0; a < n_p; ++a) {
          for (int64_t i = 0; i < n; ++i) {
            const size_t o = a * y_stride + i;
            double abs_sum = std::fabs(y0[o]), abs_sum16 = std::fabs(y0[o]);
            for (int64_t j = 0; j < n_rows; ++j) {
              abs_sum += std::fabs(static_cast<double>(p[a * p_stride + j]) * r.F32At(j, i));
              abs_sum16 += std::fabs(static_cast<double>(p[a * p_stride + j]) * r.F16At(j, i));
            }
            // n_rows + 1 terms summed in float, with or without fused multiply-adds: within twice
            // the bound of one float summation of n_rows + 1 terms.
            EXPECT_NEAR(y[o], y_exact[o], 2 * (n_rows + 2) * kU * abs_sum) << "n=" << n << " p=" << n_p << " i=" << i;
            EXPECT_NEAR(y16[o], y16_exact[o], 2 * (n_rows + 2) * kU * abs_sum16) << "n=" << n << " p=" << n_p << " i=" << i;
          }
          EXPECT_EQ(y[a * y_stride + n], y0[a * y_stride + n]);  // the gap after each output row
        }
      }
    }
  }
}

// The compact KV caches: rows of Q8_0 or Q4_0 blocks, a gap of one block between rows. n is a
// multiple of 32.
template <class Block>
struct BlockRows {
  int64_t n_rows, n;
  size_t stride;  // blocks
  std::vector<Block> blocks;
  std::vector<float> values;  // dequantized, n per row
  float At(int64_t j, int64_t i) const { return values[static_cast<size_t>(j) * n + i]; }
};

void QuantizeRow(const float* x, BlockQ8_0* y, int64_t n) { QuantizeRowQ8_0(x, y, n); }
void QuantizeRow(const float* x, BlockQ4_0* y, int64_t n) { QuantizeRowQ4_0(x, y, n); }
void DequantizeRow(const BlockQ8_0* x, float* y, int64_t n) { DequantizeRowQ8_0(x, y, n); }
void DequantizeRow(const BlockQ4_0* x, float* y, int64_t n) { DequantizeRowQ4_0(x, y, n); }

template <class Block>
BlockRows<Block> MakeBlockRows(int64_t n_rows, int64_t n, uint32_t seed) {
  BlockRows<Block> r{n_rows, n, static_cast<size_t>(n / kBlock32 + 1), {}, {}};
  const auto x = test::RandomFloats(n * n_rows, seed, 2.0f);
  r.blocks.resize(r.stride * n_rows);
  r.values.resize(x.size());
  for (int64_t j = 0; j < n_rows; ++j) {
    QuantizeRow(&x[j * n], &r.blocks[j * r.stride], n);
    DequantizeRow(&r.blocks[j * r.stride], &r.values[j * n], n);
  }
  return r;
}

constexpr int64_t kBlockSizes[] = {32, 64, 96, 160, 256, 512};

// dot_rows and weighted_sum over block rows equal the sums of the dequantized values (as the
// format's reference dequantizer reads them), within float rounding.
template <class Block, class Dot, class Sum>
void CheckBlockAttention(Dot dot_rows, Sum weighted_sum) {
  for (int64_t n : kBlockSizes) {
    for (int n_q : kQueryCounts) {
      for (int64_t n_rows : kRowCounts) {
        const BlockRows<Block> r = MakeBlockRows<Block>(n_rows, n, static_cast<uint32_t>(6 + n + 100 * n_rows));
        const size_t q_stride = static_cast<size_t>(n + 1), out_stride = static_cast<size_t>(n_rows + 2);
        const auto q = test::RandomFloats(static_cast<int64_t>(q_stride) * n_q, static_cast<uint32_t>(7 + n + 10 * n_q));
        std::vector<float> out(out_stride * n_q, -7.0f);
        dot_rows(q.data(), q_stride, n_q, r.blocks.data(), r.stride, n_rows, n, out.data(), out_stride);
        for (int a = 0; a < n_q; ++a) {
          for (int64_t j = 0; j < n_rows; ++j) {
            double exact = 0, abs_sum = 0;
            for (int64_t i = 0; i < n; ++i) {
              exact += q[a * q_stride + i] * static_cast<double>(r.At(j, i));
              abs_sum += std::fabs(q[a * q_stride + i] * static_cast<double>(r.At(j, i)));
            }
            const size_t o = a * out_stride + j;
            EXPECT_NEAR(out[o], exact, 2 * (n + 1) * kU * abs_sum) << "n=" << n << " q=" << n_q << " rows=" << n_rows;
          }
          EXPECT_EQ(out[a * out_stride + n_rows], -7.0f);
        }
        const size_t p_stride = static_cast<size_t>(n_rows + 1), y_stride = static_cast<size_t>(n + 2);
        const auto p = test::RandomFloats(static_cast<int64_t>(p_stride) * n_q, static_cast<uint32_t>(8 + n + 10 * n_q));
        const auto y0 = test::RandomFloats(static_cast<int64_t>(y_stride) * n_q, static_cast<uint32_t>(9 + n));
        auto y = y0;
        weighted_sum(p.data(), p_stride, n_q, r.blocks.data(), r.stride, n_rows, n, y.data(), y_stride);
        for (int a = 0; a < n_q; ++a) {
          for (int64_t i = 0; i < n; ++i) {
            const size_t o = a * y_stride + i;
            double exact = y0[o], abs_sum = std::fabs(y0[o]);
            for (int64_t j = 0; j < n_rows; ++j) {
              exact += p[a * p_stride + j] * static_cast<double>(r.At(j, i));
              abs_sum += std::fabs(p[a * p_stride + j] * static_cast<double>(r.At(j, i)));
            }
            EXPECT_NEAR(y[o], exact, 2 * (n_rows + 2) * kU * abs_sum) << "n=" << n << " p=" << n_q << " i=" << i;
          }
          EXPECT_EQ(y[a * y_stride + n], y0[a * y_stride + n]);
        }
      }
    }
  }
}

TEST_P(ElementwiseTest, DotRowsAndWeightedSumQ8_0) {
  CheckBlockAttention<BlockQ8_0>(k_->dot_rows_q8_0, k_->weighted_sum_q8_0);
}

TEST_P(ElementwiseTest, DotRowsAndWeightedSumQ4_0) {
  CheckBlockAttention<BlockQ4_0>(k_->dot_rows_q4_0, k_->weighted_sum_q4_0);
}

TEST_P(ElementwiseTest, RmsNormWithAndWithoutWeight) {
  for (int64_t n : test::OddSizes()) {
    const auto x = test::RandomFloats(n, 5 + n), w = test::RandomFloats(n, 6 + n);
    for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> out(n), out_exact(n);
      k_->rms_norm(x.data(), weight, n, 1e-6f, out.data());
      exact_->rms_norm(x.data(), weight, n, 1e-6f, out_exact.data());
      // Float partial sums of positive terms err by at most
      // (n + 8) u relative, the square root halves that, and 1/sqrt and the products add a few u.
      const double rel = ((n + 8) / 2.0 + 6) * kU;
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], out_exact[i], rel * std::fabs(out_exact[i])) << "n=" << n;
    }
    // In place (out aliases x), as NormHeads does.
    auto inplace = x;
    std::vector<float> out_exact(n);
    k_->rms_norm(inplace.data(), nullptr, n, 1e-6f, inplace.data());
    exact_->rms_norm(x.data(), nullptr, n, 1e-6f, out_exact.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(inplace[i], out_exact[i], ((n + 8) / 2.0 + 6) * kU * std::fabs(out_exact[i]));
  }
}

TEST_P(ElementwiseTest, GeluTanhMul) {
  for (int64_t n : test::OddSizes()) {
    auto gate = test::RandomFloats(n, 7 + n, 3.0f);
    const auto up = test::RandomFloats(n, 8 + n);
    auto gate_exact = gate;
    const auto gate0 = gate;
    k_->gelu_tanh_mul(gate.data(), up.data(), n);
    exact_->gelu_tanh_mul(gate_exact.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // tanh within 4 ulp of std::tanh; the inner polynomial (|inner| ulps of tanh's argument, its
      // slope <= 1) and the outer products a few u each.
      const double x = gate0[i];
      const double inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      const double bound = std::fabs(0.5 * x * up[i]) * (8 + 4 * std::fabs(inner)) * kU + 4 * kU * std::fabs(gate_exact[i]);
      EXPECT_NEAR(gate[i], gate_exact[i], bound) << "n=" << n << " x=" << x;
    }
  }
  // The scalar GeluTanh is the reference's element function.
  EXPECT_FLOAT_EQ(GeluTanh(0.0f), 0.0f);
}

// SiLU and the GLU's sigmoid gate (the conformers'): exp within 1 ulp (Highway) or 0.5 (std::exp),
// then 1 + e, the division and the product a few u; far out, exp overflows to infinity on both
// sides of the comparison (an absolute floor covers the subnormal results). Out of place and in
// place (out aliasing a).
TEST_P(ElementwiseTest, SiluAndSigmoidMul) {
  for (int64_t n : test::OddSizes()) {
    auto x = test::RandomFloats(n, 31 + n, 12.0f);
    if (n > 4) x[0] = -120.0f, x[1] = 120.0f, x[2] = -88.5f, x[3] = 0.0f;
    const auto a = test::RandomFloats(n, 32 + n, 2.0f);
    auto silu = x, silu_exact = x;
    k_->silu(silu.data(), n);
    exact_->silu(silu_exact.data(), n);
    std::vector<float> gated(n), gated_exact(n);
    k_->sigmoid_mul(a.data(), x.data(), gated.data(), n);
    exact_->sigmoid_mul(a.data(), x.data(), gated_exact.data(), n);
    auto inplace = a;
    k_->sigmoid_mul(inplace.data(), x.data(), inplace.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(silu[i], silu_exact[i], 6 * kU * std::fabs(silu_exact[i]) + 1e-37) << "n=" << n << " x=" << x[i];
      EXPECT_NEAR(gated[i], gated_exact[i], 6 * kU * std::fabs(gated_exact[i]) + 1e-37) << "n=" << n << " x=" << x[i];
      EXPECT_EQ(inplace[i], gated[i]) << "n=" << n;
    }
  }
  EXPECT_EQ(Silu(0.0f), 0.0f);
  EXPECT_EQ(Sigmoid(0.0f), 0.5f);
}

// LayerNorm (the towers' norm): centred values, so the bound is relative to the spread of x, not
// to each output; with and without a bias, and in place.
TEST_P(ElementwiseTest, LayerNormWithAndWithoutBias) {
  for (int64_t n : test::OddSizes()) {
    std::vector<float> x = test::RandomFloats(n, 21 + n, 2.0f);
    for (float& v : x) v += 3.0f;  // a mean far from zero: the centring matters
    const auto w = test::RandomFloats(n, 22 + n);
    const auto b = test::RandomFloats(n, 23 + n);
    for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
      std::vector<float> out(n), out_exact(n);
      k_->layer_norm(x.data(), w.data(), bias, n, 1e-6f, out.data());
      exact_->layer_norm(x.data(), w.data(), bias, n, 1e-6f, out_exact.data());
      for (int64_t i = 0; i < n; ++i) {
        // The mean's float sum errs by ~n u of |x|'s scale (5 here), over a spread of ~1.
        const double bound = (5.0 * (n + 8) + 16) * kU * (std::fabs(w[i]) + 1);
        EXPECT_NEAR(out[i], out_exact[i], bound) << "n=" << n;
      }
    }
    auto inplace = x;
    std::vector<float> out_exact(n);
    k_->layer_norm(inplace.data(), w.data(), b.data(), n, 1e-6f, inplace.data());
    exact_->layer_norm(x.data(), w.data(), b.data(), n, 1e-6f, out_exact.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(inplace[i], out_exact[i], (5.0 * (n + 8) + 16) * kU * (std::fabs(w[i]) + 1));
  }
}

TEST_P(ElementwiseTest, GeluTanhIsGeluTanhMulByOne) {
  for (int64_t n : test::OddSizes()) {
    auto x = test::RandomFloats(n, 31 + n, 3.0f);
    auto gated = x;
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    k_->gelu_tanh(x.data(), n);
    k_->gelu_tanh_mul(gated.data(), ones.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(x[i], gated[i]) << "n=" << n;
  }
}

TEST_P(ElementwiseTest, SoftCapTanhWithinAMillionth) {
  for (int64_t n : test::OddSizes()) {
    auto x = test::RandomFloats(n, 9 + n, 40.0f);
    const auto x0 = x;
    k_->soft_cap(x.data(), n, 30.0f);
    for (int64_t i = 0; i < n; ++i) {
      const double want = 30.0 * std::tanh(static_cast<double>(x0[i]) / 30.0);
      EXPECT_NEAR(x[i], want, 1e-6 * std::fabs(want) + 1e-30) << x0[i];
    }
  }
}

TEST_P(ElementwiseTest, Softmax) {
  for (int64_t n : test::OddSizes()) {
    auto x = test::RandomFloats(n, 10 + n, 4.0f);
    auto x_exact = x;
    double exact_lse = 0, max = x[0];
    for (int64_t i = 0; i < n; ++i) max = std::max<double>(max, x[i]);
    for (int64_t i = 0; i < n; ++i) exact_lse += std::exp(x[i] - max);
    exact_lse = max + std::log(exact_lse);
    const float lse = k_->softmax(x.data(), n);
    const float lse_exact = exact_->softmax(x_exact.data(), n);
    // The log of a sum good to (n + 8) u, plus the rounding of max + log: relative to |lse| and 1.
    EXPECT_NEAR(lse, exact_lse, (n + 8) * kU * 2 + 2 * kU * std::fabs(exact_lse)) << "n=" << n;
    EXPECT_NEAR(lse_exact, exact_lse, (n + 8) * kU * 2 + 2 * kU * std::fabs(exact_lse)) << "n=" << n;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      // exp within 1 ulp of std::exp; the sum in another order (n u), the scaling 2 u.
      EXPECT_NEAR(x[i], x_exact[i], (n + 8) * kU * 2 * x_exact[i] + 1e-37) << "n=" << n << " i=" << i;
      sum += x[i];
    }
    EXPECT_NEAR(sum, 1.0, (n + 8) * kU * 2);
  }
}

TEST_P(ElementwiseTest, RopeRotateHalf) {
  const float base = 10000.0f;
  for (int head_dim : {2, 6, 16, 34, 64, 128, 256, 512}) {
    std::vector<float> inv_freq(head_dim / 2);
    for (int i = 0; i < head_dim / 2; ++i) inv_freq[i] = 1.0f / std::pow(base, 2.0f * i / head_dim);
    if (head_dim >= 6) inv_freq[1] = 0.0f;  // "not rotated" pairs
    for (int n_heads : {1, 3, 8}) {
      for (int64_t pos : {0, 1, 17, 4095, 131071}) {
        auto x = test::RandomFloats(static_cast<size_t>(n_heads) * head_dim, 11 + head_dim + n_heads);
        auto x_exact = x;
        const auto x0 = x;
        k_->rope_rotate_half(x.data(), n_heads, head_dim, inv_freq.data(), pos);
        exact_->rope_rotate_half(x_exact.data(), n_heads, head_dim, inv_freq.data(), pos);
        const int half = head_dim / 2;
        for (int h = 0; h < n_heads; ++h) {
          for (int i = 0; i < head_dim; ++i) {
            const float* v = x0.data() + h * head_dim;
            const int pair = i % half;
            // Same angles and sin/cos; a*c - b*s with or without fusing differs by 2u(|a c| + |b s|).
            const double bound = 2 * kU * (std::fabs(v[pair]) + std::fabs(v[pair + half]));
            EXPECT_NEAR(x[h * head_dim + i], x_exact[h * head_dim + i], bound) << head_dim << " " << pos;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, ElementwiseTest, ::testing::ValuesIn(test::TableNames()),
                         [](const auto& info) { return info.param; });

// Kernels are chosen by name, per session: "auto" is the best table this CPU runs (the NEON packed
// tables first on aarch64 CPUs with dotprod or i8mm), "ref" the reference, each supported table
// its own; anything else is refused.
TEST(KernelDispatch, NamesPickTheirTables) {
  const std::vector<int64_t> targets = SimdTargets();
  const std::vector<const KernelTable*> extra = NeonPackedTables();
  // AVX2_VNNI (where the CPU runs vpdpbusd) comes just before AVX2.
  const KernelTable* avx2_vnni = Avx2VnniKernels();
  const bool vnni_first = avx2_vnni != nullptr && !targets.empty() && targets.front() == HWY_AVX2;
  const KernelTable* best = !extra.empty()    ? extra.front()
                            : targets.empty() ? &RefKernels()
                            : vnni_first      ? avx2_vnni
                                              : SimdKernels(targets.front());
  EXPECT_EQ(&BestKernels(), best);
  EXPECT_EQ(KernelsNamed("auto"), best);
  EXPECT_EQ(KernelsNamed("ref"), &RefKernels());
  std::vector<std::string> expected_names = {"ref"};
  for (const KernelTable* table : extra) {
    EXPECT_EQ(KernelsNamed(table->name), table);
    expected_names.emplace_back(table->name);
  }
  for (int64_t t : targets) {
    const KernelTable* table = SimdKernels(t);
    ASSERT_NE(table, nullptr);
    if (t == HWY_AVX2 && avx2_vnni != nullptr) {
      // The AVX2 table but for its matmul (the packed kernels on vpdpbusd).
      EXPECT_STREQ(avx2_vnni->name, "AVX2_VNNI");
      EXPECT_EQ(KernelsNamed("AVX2_VNNI"), avx2_vnni);
      EXPECT_NE(avx2_vnni->matmul, table->matmul);
      EXPECT_EQ(avx2_vnni->packed_layout, table->packed_layout);
      EXPECT_EQ(avx2_vnni->rms_norm, table->rms_norm);
      expected_names.emplace_back("AVX2_VNNI");
    }
    EXPECT_STREQ(table->name, hwy::TargetName(t));
    EXPECT_EQ(KernelsNamed(hwy::TargetName(t)), table);
    expected_names.push_back(hwy::TargetName(t));
  }
  EXPECT_EQ(KernelNames(), expected_names);
  EXPECT_EQ(SimdKernels(0), nullptr);
  EXPECT_EQ(KernelsNamed("AVX9000"), nullptr);
  EXPECT_EQ(KernelsNamed("Ref"), nullptr) << "names are exact";
}

// The bandwidth probes' read loop reads every byte: its checksum is the regions' 32-bit words
// summed, for any number of streams, with or without prefetching (past the end too), with a tail.
TEST(BandwidthRead, EveryStreamIsReadWhole) {
  std::vector<uint32_t> words(4 * 1000 + 37);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i * 2654435761u);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(words.data());
  const size_t region_words = 1000;  // 4000 bytes: not a multiple of the vector loop's 256
  for (int streams : {1, 2, 4}) {
    const uint8_t* regions[4];
    uint32_t expected = 0;
    for (int k = 0; k < streams; ++k) {
      regions[k] = base + static_cast<size_t>(k) * region_words * 4;
      for (size_t j = 0; j < region_words; ++j) expected += words[k * region_words + j];
    }
    for (size_t prefetch : {size_t{0}, size_t{512}, size_t{4096}}) {
      EXPECT_EQ(ReadStreamsForBandwidth(regions, streams, region_words * 4, prefetch), expected) << streams << " " << prefetch;
    }
  }
  uint32_t all = 0;
  for (size_t j = 0; j < 1024; ++j) all += words[j];
  EXPECT_EQ(ReadForBandwidth(words.data(), 4096), all);
}

TEST(BandwidthBound, IsTheBestOfItsProbes) {
  const BandwidthBound b = MeasureReadBandwidthBound(1, size_t{16} << 20, 1);
  ASSERT_EQ(b.probes.size(), 12u);  // 1, 2, 4 streams x no prefetch, 512 B, 2 KiB, 4 KiB
  double best = 0;
  for (const BandwidthProbe& p : b.probes) {
    EXPECT_GT(p.gbs, 0);
    best = std::max(best, p.gbs);
  }
  EXPECT_EQ(b.gbs, best);
  EXPECT_EQ(b.best.gbs, best);
}

// Scratch: per thread and slot, grown to the largest request, 64-byte aligned, counted.
TEST(KernelScratch, GrowsPerThreadAndSlotAndCountsItsBytes) {
  KernelScratch scratch(2);
  EXPECT_EQ(scratch.Bytes(), 0u);
  float* a = scratch.Get<float>(0, KernelScratch::kRowDecode, 100);
  float* b = scratch.Get<float>(1, KernelScratch::kRowDecode, 100);
  int8_t* c = scratch.Get<int8_t>(0, KernelScratch::kActQ, 10);
  EXPECT_NE(a, b);
  EXPECT_NE(static_cast<void*>(a), static_cast<void*>(c));
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(c)}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  }
  EXPECT_EQ(scratch.Bytes(), 2 * 100 * sizeof(float) + 10);
  EXPECT_EQ(scratch.Get<float>(0, KernelScratch::kRowDecode, 50), a) << "a smaller request reuses the buffer";
  scratch.Get<float>(0, KernelScratch::kRowDecode, 1000);
  EXPECT_GE(scratch.Bytes(), 1000 * sizeof(float) + 100 * sizeof(float) + 10);
  scratch.EnsureThreads(4);
  EXPECT_EQ(scratch.n_threads(), 4);
  scratch.Get<float>(3, KernelScratch::kPanelQ, 8);
}

// Decode's prefetch distance is chosen by the CPU and the kernel table: none for the AVX-512 tables
// on AMD (its hardware prefetcher follows their packed weights), 2 KiB for every other table and
// CPU. CPUID's vendor, checked against what Linux read from it.
TEST(KernelChoice, DecodePrefetchFollowsTheCpuVendorAndTable) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line)) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  }
#if !defined(__x86_64__) && !defined(__i386__)
  GTEST_SKIP() << "not x86 (under qemu-user /proc/cpuinfo may be the host's)";
#endif
  if (vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo (not x86 Linux)";
  EXPECT_EQ(CpuIsAmd(), vendor == "AuthenticAMD") << vendor;
  for (const std::string& name : KernelNames()) {
    const KernelTable* table = KernelsNamed(name);
    ASSERT_NE(table, nullptr) << name;
    const bool zmm = name.rfind("AVX3", 0) == 0;
    EXPECT_EQ(DefaultDecodePrefetchBytes(*table), vendor == "AuthenticAMD" && zmm ? 0u : 2048u) << vendor << " " << name;
    // The options' "auto" resolves to the choice for the context's table; a number is kept.
    EXPECT_EQ(KernelContext(1, table).prefetch_bytes(), DefaultDecodePrefetchBytes(*table)) << name;
  }
  EXPECT_EQ(KernelContext(1, nullptr, KernelOptions{.prefetch_bytes = 4096}).prefetch_bytes(), 4096u);
}

}  // namespace
}  // namespace gemlet

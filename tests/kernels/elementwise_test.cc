// Every SIMD element-wise kernel against its reference twin, on odd sizes, for every compiled
// target. Tolerances are float rounding bounds of the two evaluation orders (kU = 2^-24).
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "base/half.h"
#include "kernel_test_util.h"

namespace gemlet {
namespace {

using test::kU;

class ElementwiseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    k_ = test::TableNamed(GetParam());
    ASSERT_NE(k_, nullptr);
    ref_ = &RefKernels();
  }
  const KernelTable* k_ = nullptr;
  const KernelTable* ref_ = nullptr;
};

TEST_P(ElementwiseTest, DotF32AndF16) {
  for (int64_t n : test::OddSizes()) {
    const auto a = test::RandomFloats(n, 1 + n), b = test::RandomFloats(n, 2 + n);
    std::vector<uint16_t> b16(n);
    for (int64_t i = 0; i < n; ++i) b16[i] = F32ToF16(b[i]);
    double abs_sum = 0, abs_sum16 = 0;
    for (int64_t i = 0; i < n; ++i) {
      abs_sum += std::fabs(static_cast<double>(a[i]) * b[i]);
      abs_sum16 += std::fabs(static_cast<double>(a[i]) * F16ToF32(b16[i]));
    }
    // Any summation order of n products errs by at most (n - 1) u sum|a b| (plus u per product);
    // two orders differ by at most twice that.
    EXPECT_NEAR(k_->dot_f32(a.data(), b.data(), n), ref_->dot_f32(a.data(), b.data(), n), 2 * (n + 1) * kU * abs_sum)
        << "n=" << n;
    EXPECT_NEAR(k_->dot_f16(a.data(), b16.data(), n), ref_->dot_f16(a.data(), b16.data(), n),
                2 * (n + 1) * kU * abs_sum16)
        << "n=" << n;
  }
}

TEST_P(ElementwiseTest, AxpyF32AndF16) {
  for (int64_t n : test::OddSizes()) {
    const auto x = test::RandomFloats(n, 3 + n), y0 = test::RandomFloats(n, 4 + n);
    std::vector<uint16_t> x16(n);
    for (int64_t i = 0; i < n; ++i) x16[i] = F32ToF16(x[i]);
    const float a = -0.73f;
    auto y = y0, y_ref = y0, y16 = y0, y16_ref = y0;
    k_->axpy_f32(a, x.data(), y.data(), n);
    ref_->axpy_f32(a, x.data(), y_ref.data(), n);
    k_->axpy_f16(a, x16.data(), y16.data(), n);
    ref_->axpy_f16(a, x16.data(), y16_ref.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // A fused multiply-add rounds once where mul + add round twice.
      const double bound = 2 * kU * (std::fabs(a * x[i]) + std::fabs(y0[i]) + std::fabs(y_ref[i]));
      EXPECT_NEAR(y[i], y_ref[i], bound) << "n=" << n << " i=" << i;
      const double bound16 = 2 * kU * (std::fabs(a * F16ToF32(x16[i])) + std::fabs(y0[i]) + std::fabs(y16_ref[i]));
      EXPECT_NEAR(y16[i], y16_ref[i], bound16) << "n=" << n << " i=" << i;
    }
  }
}

TEST_P(ElementwiseTest, RmsNormWithAndWithoutWeight) {
  for (int64_t n : test::OddSizes()) {
    const auto x = test::RandomFloats(n, 5 + n), w = test::RandomFloats(n, 6 + n);
    for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> out(n), out_ref(n);
      k_->rms_norm(x.data(), weight, n, 1e-6f, out.data());
      ref_->rms_norm(x.data(), weight, n, 1e-6f, out_ref.data());
      // The reference sums squares in double; float partial sums of positive terms err by at most
      // (n + 8) u relative, the square root halves that, and 1/sqrt and the products add a few u.
      const double rel = ((n + 8) / 2.0 + 6) * kU;
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], out_ref[i], rel * std::fabs(out_ref[i])) << "n=" << n;
    }
    // In place (out aliases x), as NormHeads does.
    auto inplace = x;
    std::vector<float> out_ref(n);
    k_->rms_norm(inplace.data(), nullptr, n, 1e-6f, inplace.data());
    ref_->rms_norm(x.data(), nullptr, n, 1e-6f, out_ref.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(inplace[i], out_ref[i], ((n + 8) / 2.0 + 6) * kU * std::fabs(out_ref[i]));
  }
}

TEST_P(ElementwiseTest, GeluTanhMul) {
  for (int64_t n : test::OddSizes()) {
    auto gate = test::RandomFloats(n, 7 + n, 3.0f);
    const auto up = test::RandomFloats(n, 8 + n);
    auto gate_ref = gate;
    const auto gate0 = gate;
    k_->gelu_tanh_mul(gate.data(), up.data(), n);
    ref_->gelu_tanh_mul(gate_ref.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // tanh within 4 ulp of std::tanh; the inner polynomial (|inner| ulps of tanh's argument, its
      // slope <= 1) and the outer products a few u each.
      const double x = gate0[i];
      const double inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      const double bound = std::fabs(0.5 * x * up[i]) * (8 + 4 * std::fabs(inner)) * kU + 4 * kU * std::fabs(gate_ref[i]);
      EXPECT_NEAR(gate[i], gate_ref[i], bound) << "n=" << n << " x=" << x;
    }
  }
  // The scalar GeluTanh is the reference's element function.
  EXPECT_FLOAT_EQ(GeluTanh(0.0f), 0.0f);
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
    auto x_ref = x;
    k_->softmax(x.data(), n);
    ref_->softmax(x_ref.data(), n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      // exp within 1 ulp of std::exp; the sum in another order (n u), the scaling 2 u.
      EXPECT_NEAR(x[i], x_ref[i], (n + 8) * kU * 2 * x_ref[i] + 1e-37) << "n=" << n << " i=" << i;
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
        auto x_ref = x;
        const auto x0 = x;
        k_->rope_rotate_half(x.data(), n_heads, head_dim, inv_freq.data(), pos);
        ref_->rope_rotate_half(x_ref.data(), n_heads, head_dim, inv_freq.data(), pos);
        const int half = head_dim / 2;
        for (int h = 0; h < n_heads; ++h) {
          for (int i = 0; i < head_dim; ++i) {
            const float* v = x0.data() + h * head_dim;
            const int pair = i % half;
            // Same angles and sin/cos; a*c - b*s with or without fusing differs by 2u(|a c| + |b s|).
            const double bound = 2 * kU * (std::fabs(v[pair]) + std::fabs(v[pair + half]));
            EXPECT_NEAR(x[h * head_dim + i], x_ref[h * head_dim + i], bound) << head_dim << " " << pos;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, ElementwiseTest, ::testing::ValuesIn(test::TableNames()),
                         [](const auto& info) { return info.param; });

TEST(KernelDispatch, ActiveIsTheBestSupportedTargetUnlessForced) {
  const char* env = std::getenv("GEMLET_KERNELS");
  const std::vector<int64_t> targets = SimdTargets();
  if (env != nullptr && std::string(env) == "ref") {
    EXPECT_STREQ(ActiveKernelsName(), "ref");
  } else if (env == nullptr && !targets.empty()) {
    EXPECT_EQ(&ActiveKernels(), SimdKernels(targets.front()));
  }
  for (int64_t t : targets) {
    const KernelTable* table = SimdKernels(t);
    ASSERT_NE(table, nullptr);
    EXPECT_STREQ(table->name, hwy::TargetName(t));
  }
  EXPECT_EQ(SimdKernels(0), nullptr);
}

}  // namespace
}  // namespace gemlet

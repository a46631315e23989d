// Reference (scalar) kernels: the specification every faster path is tested against.
#include <cmath>
#include <type_traits>

#include "base/half.h"
#include "kernels/kernel_table.h"
#include "tensor/quant_blocks.h"

namespace gemlet {

float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }
float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

namespace ref {
float DotF32(const float* a, const float* b, int64_t n);

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  ctx.pool().ParallelFor(static_cast<size_t>(w.n_out), [&](size_t begin, size_t end, int thread) {
    float* row = ctx.scratch().Get<float>(thread, KernelScratch::kRowDecode, static_cast<size_t>(w.n_in));
    for (size_t o = begin; o < end; ++o) {
      const float* wrow;
      if (w.type == DType::kF32) {
        wrow = reinterpret_cast<const float*>(w.Row(static_cast<int64_t>(o)));
      } else {
        DequantizeRow(w.type, w.Row(static_cast<int64_t>(o)), row, w.n_in);
        wrow = row;
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        y[t * w.n_out + static_cast<int64_t>(o)] = DotF32(wrow, x + t * w.n_in, w.n_in);
      }
    }
  });
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum_sq / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = w ? x[i] * inv * w[i] : x[i] * inv;
}

void GeluTanhMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = GeluTanh(gate[i]) * up[i];
}

void GeluTanhInPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = GeluTanh(x[i]);
}

void SiluInPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Silu(x[i]);
}

void SigmoidMul(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * Sigmoid(b[i]);
}

void LayerNorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i] - mean) * (x[i] - mean);
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum_sq / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - mean) * inv * w[i] + (b ? b[i] : 0.0f);
}

void RopeRotateHalf(float* x, int n_heads, int head_dim, const float* inv_freq, int64_t pos) {
  const int half = head_dim / 2;
  const float p = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float angle = p * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<size_t>(h) * head_dim;
      const float a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

float DotF32(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Value i of an attention row: f32, f16, or in Q8_0 or Q4_0 blocks of 32.
float RowValue(const float* row, int64_t i) { return row[i]; }
float RowValue(const uint16_t* row, int64_t i) { return F16ToF32(row[i]); }
float RowValue(const BlockQ8_0* row, int64_t i) {
  const BlockQ8_0& b = row[i / kBlock32];
  return static_cast<float>(b.qs[i % kBlock32]) * F16ToF32(b.d);
}
// Q4_0: value j of a block in the low nibble of byte j, value j + 16 in its high nibble, offset 8.
float RowValue(const BlockQ4_0* row, int64_t i) {
  const BlockQ4_0& b = row[i / kBlock32];
  const int j = static_cast<int>(i % kBlock32);
  const int level = (j < 16 ? b.qs[j] & 0x0F : b.qs[j - 16] >> 4) - 8;
  return static_cast<float>(level) * F16ToF32(b.d);
}

template <class T>
void DotRows(const float* q, size_t q_stride, int n_q, const T* rows, size_t stride, int64_t n_rows, int64_t n,
             float* out, size_t out_stride) {
  for (int a = 0; a < n_q; ++a) {
    for (int64_t j = 0; j < n_rows; ++j) {
      const T* r = rows + static_cast<size_t>(j) * stride;
      float sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += q[a * q_stride + i] * RowValue(r, i);
      out[a * out_stride + j] = sum;
    }
  }
}

template <class T>
void WeightedSum(const float* p, size_t p_stride, int n_p, const T* rows, size_t stride, int64_t n_rows, int64_t n,
                 float* y, size_t y_stride) {
  for (int a = 0; a < n_p; ++a) {
    for (int64_t j = 0; j < n_rows; ++j) {
      const T* r = rows + static_cast<size_t>(j) * stride;
      for (int64_t i = 0; i < n; ++i) y[a * y_stride + i] += p[a * p_stride + j] * RowValue(r, i);
    }
  }
}

float Softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
  return max + std::log(sum);
}

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

}  // namespace ref

// An embedding lookup is one row per token: the reference is fast enough and defines the values.
void GetRow(const WeightMatrix& w, int64_t r, float scale, float* dst) {
  DequantizeRow(w.type, w.Row(r), dst, w.n_in);
  if (scale != 1.0f) {
    for (int64_t i = 0; i < w.n_in; ++i) dst[i] *= scale;
  }
}

const KernelTable& RefKernels() {
  // The reference reads every matrix as stored: nothing to prepare.
  static const KernelTable table = {"ref",          ref::MatMul,  [](const WeightMatrix&, KernelContext&) {},
                                    [](DType) -> const PackedLayout* { return nullptr; },
                                    ref::RmsNorm,   ref::GeluTanhMul,
                                    ref::RopeRotateHalf,
                                    ref::DotRows<float>, ref::DotRows<uint16_t>, ref::DotRows<BlockQ8_0>, ref::DotRows<BlockQ4_0>,
                                    ref::WeightedSum<float>, ref::WeightedSum<uint16_t>, ref::WeightedSum<BlockQ8_0>, ref::WeightedSum<BlockQ4_0>,
                                    ref::Softmax, ref::SoftCap, ref::LayerNorm, ref::GeluTanhInPlace,
                                    nullptr,      ref::SiluInPlace, ref::SigmoidMul};
  return table;
}

}  // namespace gemlet

// Math kernels the model code calls: matmul over quantized weights, norms, activations, RoPE, softmax.
// Kernels know nothing of layers or sessions. Each function dispatches to the active KernelTable
// (kernel_table.h): Highway SIMD code for the best CPU target, or the scalar reference that defines
// the results (GEMLET_KERNELS=ref forces it; tests compare every SIMD kernel with it on odd sizes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace gemlet {

class PackedWeights;

// A weight matrix as GGUF stores it: n_out rows of n_in values each (GGUF ne = [n_in, n_out]),
// rows contiguous in `type`. Points into the mapped file; never owns data.
struct WeightMatrix {
  DType type = DType::kF32;
  const uint8_t* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;
  // Where the SIMD kernels keep these rows repacked for themselves, or null (kernels/packed_weights.h).
  // A view of part of a tensor (one expert of a stacked tensor) has a slot of its own, or none.
  PackedWeights* packed = nullptr;

  const uint8_t* Row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  explicit operator bool() const { return data != nullptr; }
};

// y[t, o] = sum_i w[o, i] * x[t, i] for t < n_tokens. x: [n_tokens, n_in], y: [n_tokens, n_out].
// Rows of w are split across the pool; each row is decoded once and reused for every token.
// F32/F16/BF16 weights compute in float. For quantized weights the SIMD kernels first quantize each
// row of x to 8 bits (per 32 values, or per 256 for the K types, as llama.cpp does) and use integer
// dot products: results differ from the reference by that rounding (bounded in the tests).
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Does now what the first MatMul on w would do first: pack w for the kernels in use when they have
// a packed layout for it and w has a slot (kernels/packed_weights.h). Otherwise nothing.
void PrepareMatMul(const WeightMatrix& w, ThreadPool& pool);

// Copies row `r` of w (e.g. a token embedding) into dst as floats, scaled.
void GetRow(const WeightMatrix& w, int64_t r, float scale, float* dst);

// out = x / sqrt(mean(x^2) + eps) * w  (w may be nullptr: no weight). out may alias x.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out);

// gate[i] = gelu_tanh(gate[i]) * up[i]  (GeGLU with PyTorch's tanh approximation).
void GeluTanhMul(float* gate, const float* up, int64_t n);
float GeluTanh(float x);

// Rotates each of n_heads vectors of head_dim in place, "rotate half" pairing (i, i + head_dim/2),
// angle_i = pos * inv_freq[i] computed in float as PyTorch does. inv_freq has head_dim/2 entries
// (0 means the pair is not rotated).
void RopeRotateHalf(float* x, int n_heads, int head_dim, const float* inv_freq, int64_t pos);

// Attention over n_rows rows of n values, `stride` elements apart (a run of the KV cache, or the
// batch's new keys/values), f32, IEEE half, or Q8_0 (stride then counts 32-value blocks, and n is a
// multiple of 32), for a group of queries sharing them (grouped-query attention: the heads of one KV
// head), each row read once for the group:
//   DotRows:     out[a * out_stride + j] = query a . row j       (scores; queries q_stride apart)
//   WeightedSum: y_a += sum_j p[a * p_stride + j] * row j        (outputs y_stride apart)
void DotRowsF32(const float* q, size_t q_stride, int n_q, const float* rows, size_t stride, int64_t n_rows, int64_t n,
                float* out, size_t out_stride);
void DotRowsF16(const float* q, size_t q_stride, int n_q, const uint16_t* rows, size_t stride, int64_t n_rows,
                int64_t n, float* out, size_t out_stride);
void DotRowsQ8_0(const float* q, size_t q_stride, int n_q, const BlockQ8_0* rows, size_t stride, int64_t n_rows,
                 int64_t n, float* out, size_t out_stride);
void WeightedSumF32(const float* p, size_t p_stride, int n_p, const float* rows, size_t stride, int64_t n_rows,
                    int64_t n, float* y, size_t y_stride);
void WeightedSumF16(const float* p, size_t p_stride, int n_p, const uint16_t* rows, size_t stride, int64_t n_rows,
                    int64_t n, float* y, size_t y_stride);
void WeightedSumQ8_0(const float* p, size_t p_stride, int n_p, const BlockQ8_0* rows, size_t stride, int64_t n_rows,
                     int64_t n, float* y, size_t y_stride);
float DotF32(const float* a, const float* b, int64_t n);  // one row of DotRowsF32
void AxpyF32(float a, const float* x, float* y, int64_t n);  // y += a * x: one row of WeightedSumF32

// In-place softmax (max-subtracted, float accumulation). Returns log(sum_i exp(x_i)) of the input,
// which is what it takes to merge softmaxes taken over parts of one row (attention split by keys).
float Softmax(float* x, int64_t n);

// x = cap * tanh(x / cap), in place.
void SoftCap(float* x, int64_t n, float cap);

// This machine's streaming read bandwidth in GB/s: a fresh buffer of `bytes` read by `threads`
// threads at once (one slice each), the median of `reps` runs after a warm-up run.
double MeasureReadBandwidthGBs(int threads, size_t bytes, int reps);

// Name of the kernels in use: "ref" or a Highway target ("AVX3_DL", "AVX2", "NEON", ...).
const char* ActiveKernelsName();

}  // namespace gemlet

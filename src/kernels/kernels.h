// Math kernels the model code calls: matmul over quantized weights, norms, activations, RoPE, softmax.
// Kernels know nothing of layers or sessions. A KernelTable holds one implementation of each: Highway
// SIMD code for one CPU target, or the scalar reference that defines the results (tests compare every
// SIMD kernel with it on odd sizes). Which table runs, tuned how, is the KernelContext's choice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel_context.h"
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

// Bounds on a tower matmul's input and output: y = clamp(W clamp(x, in_min, in_max), out_min,
// out_max) (HF's Gemma4ClippableLinear; llama.cpp's clamp_info_map). Infinite bounds clamp nothing.
struct TowerClamp {
  float in_min = -std::numeric_limits<float>::infinity(), in_max = std::numeric_limits<float>::infinity();
  float out_min = -std::numeric_limits<float>::infinity(), out_max = std::numeric_limits<float>::infinity();
  bool ClampsInput() const { return in_min != -std::numeric_limits<float>::infinity() || in_max != std::numeric_limits<float>::infinity(); }
  bool ClampsOutput() const {
    return out_min != -std::numeric_limits<float>::infinity() || out_max != std::numeric_limits<float>::infinity();
  }
};

// A kernel table's packed layout for one weight type (kernels/packed_weights.h): groups of 16 rows,
// each group_bytes(w) long.
struct PackedLayout {
  size_t (*group_bytes)(const WeightMatrix& w);  // 0: no packed layout for w
  // Writes groups [begin, end) of w to dst, group `begin` first.
  void (*pack)(const WeightMatrix& w, size_t begin, size_t end, uint8_t* dst);
};

// The kernels: one implementation of each (the scalar reference, or the Highway code compiled for one
// CPU target). Model code calls them through the table of its KernelContext.
struct KernelTable {
  const char* name;  // "ref", or the Highway target: "AVX3_DL", "AVX3", "AVX2", "NEON", "EMU128"

  // y[t, o] = sum_i w[o, i] * x[t, i] for t < n_tokens. x: [n_tokens, n_in], y: [n_tokens, n_out].
  // Rows of w are split across the context's pool; each row is decoded once and reused for every
  // token. F32/F16/BF16 weights compute in float. For quantized weights the SIMD kernels first
  // quantize each row of x to 8 bits (per 32 values, or per 256 for the K types, as llama.cpp does)
  // and use integer dot products: results differ from the reference by that rounding (bounded in
  // the tests).
  void (*matmul)(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx);
  // Does now what the first matmul on w would do first: pack w when this table has a packed layout
  // for it, w has a slot (kernels/packed_weights.h) and the tuning packs. Otherwise nothing.
  void (*prepare_matmul)(const WeightMatrix& w, KernelContext& ctx);
  // The layout this table packs weights of `type` into, or null (it reads them as stored).
  const PackedLayout* (*packed_layout)(DType type);

  // out = x / sqrt(mean(x^2) + eps) * w  (w may be nullptr: no weight). out may alias x.
  void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* out);
  // gate[i] = gelu_tanh(gate[i]) * up[i]  (GeGLU with PyTorch's tanh approximation).
  void (*gelu_tanh_mul)(float* gate, const float* up, int64_t n);
  // Rotates each of n_heads vectors of head_dim in place, "rotate half" pairing (i, i + head_dim/2),
  // angle_i = pos * inv_freq[i] computed in float as PyTorch does. inv_freq has head_dim/2 entries
  // (0 means the pair is not rotated).
  void (*rope_rotate_half)(float* x, int n_heads, int head_dim, const float* inv_freq, int64_t pos);

  // Attention over n_rows rows of n values, `stride` elements apart (a run of the KV cache, or the
  // batch's new keys/values), f32, IEEE half, Q8_0 or Q4_0 (stride then counts 32-value blocks, and
  // n is a multiple of 32), for a group of queries sharing them (grouped-query attention: the heads of
  // one KV head), each row read once for the group:
  //   dot_rows:     out[a * out_stride + j] = query a . row j       (scores; queries q_stride apart)
  //   weighted_sum: y_a += sum_j p[a * p_stride + j] * row j        (outputs y_stride apart)
  void (*dot_rows_f32)(const float* q, size_t q_stride, int n_q, const float* rows, size_t stride, int64_t n_rows,
                       int64_t n, float* out, size_t out_stride);
  void (*dot_rows_f16)(const float* q, size_t q_stride, int n_q, const uint16_t* rows, size_t stride, int64_t n_rows,
                       int64_t n, float* out, size_t out_stride);
  void (*dot_rows_q8_0)(const float* q, size_t q_stride, int n_q, const BlockQ8_0* rows, size_t stride,
                        int64_t n_rows, int64_t n, float* out, size_t out_stride);
  void (*dot_rows_q4_0)(const float* q, size_t q_stride, int n_q, const BlockQ4_0* rows, size_t stride,
                        int64_t n_rows, int64_t n, float* out, size_t out_stride);
  void (*weighted_sum_f32)(const float* p, size_t p_stride, int n_p, const float* rows, size_t stride, int64_t n_rows,
                           int64_t n, float* y, size_t y_stride);
  void (*weighted_sum_f16)(const float* p, size_t p_stride, int n_p, const uint16_t* rows, size_t stride,
                           int64_t n_rows, int64_t n, float* y, size_t y_stride);
  void (*weighted_sum_q8_0)(const float* p, size_t p_stride, int n_p, const BlockQ8_0* rows, size_t stride,
                            int64_t n_rows, int64_t n, float* y, size_t y_stride);
  void (*weighted_sum_q4_0)(const float* p, size_t p_stride, int n_p, const BlockQ4_0* rows, size_t stride,
                            int64_t n_rows, int64_t n, float* y, size_t y_stride);

  // In-place softmax (max-subtracted, float accumulation). Returns log(sum_i exp(x_i)) of the input,
  // which is what it takes to merge softmaxes taken over parts of one row (attention split by keys).
  float (*softmax)(float* x, int64_t n);
  // x = cap * tanh(x / cap), in place.
  void (*soft_cap)(float* x, int64_t n, float cap);
  // out = (x - mean(x)) / sqrt(var(x) + eps) * w + b (LayerNorm, biased variance; b may be nullptr).
  // out may alias x. The vision towers' norm (SigLIP).
  void (*layer_norm)(const float* x, const float* w, const float* b, int64_t n, float eps, float* out);
  // x = gelu_tanh(x), in place (PyTorch's tanh approximation, ungated: the towers' MLPs).
  void (*gelu_tanh)(float* x, int64_t n);
  // matmul for the towers (an image's patches, a clip's frames: many tokens, float matrices, no
  // decode step whose result a batch must reproduce), the clamps (null: none) done on the way in and
  // out; null: matmul, with the clamps apart (TowerMatMul).
  void (*tower_matmul)(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, const TowerClamp* clamp,
                       KernelContext& ctx) = nullptr;
  // x = x / (1 + exp(-x)), in place (SiLU as PyTorch writes it: the conformers' FFN and convolution).
  void (*silu)(float* x, int64_t n) = nullptr;
  // out = a * (1 / (1 + exp(-b))) (a GLU's gate: the conformers' light convolution). out may alias a.
  void (*sigmoid_mul)(const float* a, const float* b, float* out, int64_t n) = nullptr;
  // y[k] = W[k] x[k] for k < n, one token against each: the experts a token's router chose (one type
  // and shape). x: [n, n_in], or one row for all (one_input). One parallel loop over all n: an
  // expert alone is a short stream (1-2 MiB) whose threads' start and finish cost what reading it
  // does. Each y[k] is bit for bit matmul(W[k], x[k], 1). null: matmul per expert (MatMulExperts).
  void (*matmul_experts)(const WeightMatrix* w, int n, const float* x, bool one_input, float* y,
                         KernelContext& ctx) = nullptr;

  // One row of dot_rows_f32, and y += a * x (one row of weighted_sum_f32).
  float Dot(const float* a, const float* b, int64_t n) const {
    float out;
    dot_rows_f32(a, 0, 1, b, 0, 1, n, &out, 0);
    return out;
  }
  void Axpy(float a, const float* x, float* y, int64_t n) const { weighted_sum_f32(&a, 0, 1, x, 0, 1, n, y, 0); }
};

// Whether this is an AMD x86 CPU (CPUID's vendor string); DefaultDecodePrefetchBytes
// (kernel_context.h) asks it, with the table.
bool CpuIsAmd();
// Whether this is an x86 CPU with AVX-VNNI (the VEX-encoded 256-bit vpdpbusd: Alder Lake and later,
// Zen 5); SimdTables() then offers the AVX2_VNNI table.
bool CpuHasAvxVnni();

// The best table this CPU runs (the first of SimdTables(), else the reference).
const KernelTable& BestKernels();
// "auto" (BestKernels), "ref", or the name of a compiled target this CPU supports ("AVX2"); null
// for any other name.
const KernelTable* KernelsNamed(const std::string& name);
// The names KernelsNamed takes besides "auto": "ref", then the targets this CPU runs, best first.
std::vector<std::string> KernelNames();

// ctx.kernels().matmul and .prepare_matmul.
inline void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  ctx.kernels().matmul(w, x, n_tokens, y, ctx);
}
inline void PrepareMatMul(const WeightMatrix& w, KernelContext& ctx) { ctx.kernels().prepare_matmul(w, ctx); }
// ctx.kernels().matmul_experts, else matmul per expert. y: [n, n_out].
void MatMulExperts(const WeightMatrix* w, int n, const float* x, bool one_input, float* y, KernelContext& ctx);
// ctx.kernels().tower_matmul, else .matmul between the clamps: what the vision and audio towers
// multiply with.
void TowerMatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, const TowerClamp* clamp,
                 KernelContext& ctx);
inline void TowerMatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, KernelContext& ctx) {
  TowerMatMul(w, x, n_tokens, y, nullptr, ctx);
}

// Copies row `r` of w (e.g. a token embedding) into dst as floats, scaled.
void GetRow(const WeightMatrix& w, int64_t r, float scale, float* dst);

float GeluTanh(float x);
// The reference's element functions of silu and sigmoid_mul.
float Silu(float x);
float Sigmoid(float x);

// This machine's streaming read bandwidth in GB/s: a fresh buffer of `bytes` read by `threads`
// threads at once (one slice each), the median of `reps` runs after a warm-up run.
double MeasureReadBandwidthGBs(int threads, size_t bytes, int reps);

// The bound a decode's bandwidth is measured against: the best of several probes, so that no
// engine's reads can beat it. Each probe reads a fresh `bytes` buffer with `threads` threads, each
// thread its slice in 1, 2 or 4 lock-step streams, with no software prefetch or lines prefetched
// 512 B, 2 KiB or 4 KiB ahead; the best run of each probe (of `reps` after a warm-up) counts.
struct BandwidthProbe {
  int streams = 1;
  size_t prefetch_bytes = 0;
  double gbs = 0;  // its best run
};
struct BandwidthBound {
  double gbs = 0;        // the best probe's
  BandwidthProbe best;
  std::vector<BandwidthProbe> probes;
};
BandwidthBound MeasureReadBandwidthBound(int threads, size_t bytes, int reps);

}  // namespace gemlet

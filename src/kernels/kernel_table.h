// KernelTable: one implementation of every kernel in kernels.h (the scalar reference, or the Highway
// code compiled for one CPU target), and the choice of the table the public functions dispatch to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace gemlet {

struct KernelTable {
  const char* name;  // "ref", or the Highway target: "AVX3_DL", "AVX3", "AVX2", "NEON", "EMU128"
  void (*matmul)(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
  void (*prepare_matmul)(const WeightMatrix& w, ThreadPool& pool);
  void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* out);
  void (*gelu_tanh_mul)(float* gate, const float* up, int64_t n);
  void (*rope_rotate_half)(float* x, int n_heads, int head_dim, const float* inv_freq, int64_t pos);
  void (*dot_rows_f32)(const float* q, size_t q_stride, int n_q, const float* rows, size_t stride, int64_t n_rows,
                       int64_t n, float* out, size_t out_stride);
  void (*dot_rows_f16)(const float* q, size_t q_stride, int n_q, const uint16_t* rows, size_t stride, int64_t n_rows,
                       int64_t n, float* out, size_t out_stride);
  void (*dot_rows_q8_0)(const float* q, size_t q_stride, int n_q, const BlockQ8_0* rows, size_t stride,
                        int64_t n_rows, int64_t n, float* out, size_t out_stride);
  void (*weighted_sum_f32)(const float* p, size_t p_stride, int n_p, const float* rows, size_t stride, int64_t n_rows,
                           int64_t n, float* y, size_t y_stride);
  void (*weighted_sum_f16)(const float* p, size_t p_stride, int n_p, const uint16_t* rows, size_t stride,
                           int64_t n_rows, int64_t n, float* y, size_t y_stride);
  void (*weighted_sum_q8_0)(const float* p, size_t p_stride, int n_p, const BlockQ8_0* rows, size_t stride,
                            int64_t n_rows, int64_t n, float* y, size_t y_stride);
  float (*softmax)(float* x, int64_t n);
  void (*soft_cap)(float* x, int64_t n, float cap);
};

// The scalar reference kernels (kernels_ref.cc): the specification, and the fallback.
const KernelTable& RefKernels();

// The table the public functions use, chosen once: GEMLET_KERNELS=ref forces the reference,
// GEMLET_KERNELS=<target name> (e.g. AVX2) a compiled and supported Highway target; otherwise the
// best Highway target this CPU supports.
const KernelTable& ActiveKernels();

// Highway targets compiled into gemlet that this CPU can run, best first (hwy target bits).
std::vector<int64_t> SimdTargets();
// The table compiled for one of SimdTargets(); nullptr for any other target. Not thread-safe
// (it briefly redirects Highway's dispatch); for tests and start-up only.
const KernelTable* SimdKernels(int64_t target);

// Reads n bytes with the widest loads this CPU has, in several streams, and returns a checksum so
// that the reads cannot be optimised away: the loop memory bandwidth benchmarks time.
uint32_t ReadForBandwidth(const void* data, size_t n);

}  // namespace gemlet

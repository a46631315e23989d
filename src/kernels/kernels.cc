// The public kernel functions: each forwards to the KernelTable chosen once per process.
#include <hwy/targets.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/kernel_table.h"

namespace gemlet {

namespace {
const KernelTable& ChooseKernels() {
  const char* env = std::getenv("GEMLET_KERNELS");
  const std::vector<int64_t> targets = SimdTargets();
  if (env != nullptr && *env != '\0' && std::strcmp(env, "auto") != 0) {
    if (std::strcmp(env, "ref") == 0) return RefKernels();
    for (int64_t t : targets) {
      if (std::strcmp(env, hwy::TargetName(t)) == 0) return *SimdKernels(t);
    }
    std::fprintf(stderr, "gemlet: GEMLET_KERNELS=%s is not ref, auto or a supported target; using auto\n", env);
  }
  if (targets.empty()) return RefKernels();
  const KernelTable* best = SimdKernels(targets.front());
  return best != nullptr ? *best : RefKernels();
}
}  // namespace

const KernelTable& ActiveKernels() {
  static const KernelTable& table = ChooseKernels();
  return table;
}

const char* ActiveKernelsName() { return ActiveKernels().name; }

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  ActiveKernels().matmul(w, x, n_tokens, y, pool);
}
void PrepareMatMul(const WeightMatrix& w, ThreadPool& pool) { ActiveKernels().prepare_matmul(w, pool); }
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  ActiveKernels().rms_norm(x, w, n, eps, out);
}
void GeluTanhMul(float* gate, const float* up, int64_t n) { ActiveKernels().gelu_tanh_mul(gate, up, n); }
void RopeRotateHalf(float* x, int n_heads, int head_dim, const float* inv_freq, int64_t pos) {
  ActiveKernels().rope_rotate_half(x, n_heads, head_dim, inv_freq, pos);
}
void DotRowsF32(const float* q, size_t q_stride, int n_q, const float* rows, size_t stride, int64_t n_rows, int64_t n,
                float* out, size_t out_stride) {
  ActiveKernels().dot_rows_f32(q, q_stride, n_q, rows, stride, n_rows, n, out, out_stride);
}
void DotRowsF16(const float* q, size_t q_stride, int n_q, const uint16_t* rows, size_t stride, int64_t n_rows,
                int64_t n, float* out, size_t out_stride) {
  ActiveKernels().dot_rows_f16(q, q_stride, n_q, rows, stride, n_rows, n, out, out_stride);
}
void DotRowsQ8_0(const float* q, size_t q_stride, int n_q, const BlockQ8_0* rows, size_t stride, int64_t n_rows,
                 int64_t n, float* out, size_t out_stride) {
  ActiveKernels().dot_rows_q8_0(q, q_stride, n_q, rows, stride, n_rows, n, out, out_stride);
}
void WeightedSumF32(const float* p, size_t p_stride, int n_p, const float* rows, size_t stride, int64_t n_rows,
                    int64_t n, float* y, size_t y_stride) {
  ActiveKernels().weighted_sum_f32(p, p_stride, n_p, rows, stride, n_rows, n, y, y_stride);
}
void WeightedSumF16(const float* p, size_t p_stride, int n_p, const uint16_t* rows, size_t stride, int64_t n_rows,
                    int64_t n, float* y, size_t y_stride) {
  ActiveKernels().weighted_sum_f16(p, p_stride, n_p, rows, stride, n_rows, n, y, y_stride);
}
void WeightedSumQ8_0(const float* p, size_t p_stride, int n_p, const BlockQ8_0* rows, size_t stride, int64_t n_rows,
                     int64_t n, float* y, size_t y_stride) {
  ActiveKernels().weighted_sum_q8_0(p, p_stride, n_p, rows, stride, n_rows, n, y, y_stride);
}
float DotF32(const float* a, const float* b, int64_t n) {
  float out;
  ActiveKernels().dot_rows_f32(a, 0, 1, b, 0, 1, n, &out, 0);
  return out;
}
void AxpyF32(float a, const float* x, float* y, int64_t n) { ActiveKernels().weighted_sum_f32(&a, 0, 1, x, 0, 1, n, y, 0); }
float Softmax(float* x, int64_t n) { return ActiveKernels().softmax(x, n); }
void SoftCap(float* x, int64_t n, float cap) { ActiveKernels().soft_cap(x, n, cap); }

double MeasureReadBandwidthGBs(int threads, size_t bytes, int reps) {
  std::vector<uint8_t> buffer(bytes, 1);
  const size_t chunk = bytes / threads / 64 * 64;
  std::vector<double> runs;
  volatile uint32_t sink = 0;
  for (int r = 0; r <= reps; ++r) {  // run 0 warms up
    std::vector<uint32_t> sums(threads);
    std::vector<std::thread> workers;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] { sums[t] = ReadForBandwidth(buffer.data() + t * chunk, chunk); });
    }
    for (auto& w : workers) w.join();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (uint32_t s : sums) sink = sink + s;
    if (r > 0) runs.push_back(static_cast<double>(chunk) * threads / dt / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace gemlet

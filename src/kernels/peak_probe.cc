// The int8 multiply-accumulate peak of this CPU's cores for each instruction sequence the packed
// GEMMs are built on: a compute bound to hold prefill against, as the bandwidth probe bounds decode.
// Each thread runs 12 independent accumulator chains of the sequence over registers (no memory), so
// the figure is the issue rate the core sustains for it, not a latency.
#include "kernels/peak_probe.h"

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#endif

namespace gemlet {
namespace {

constexpr int64_t kIterations = 4'000'000;  // about 20-40 ms a thread on 2 GHz cores

// Twelve named accumulators (an array would live in memory, each step a load and a store), each
// its own dependency chain; the empty asm keeps the compiler from folding the constant products.
#define GEMLET_PEAK_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
// The twelve chains summed pairwise with `add`: the result the sink takes, so no chain is dead code.
#define GEMLET_PEAK_SUM(add)                                                                              \
  add(add(add(add(acc0, acc1), add(acc2, acc3)), add(add(acc4, acc5), add(acc6, acc7))), \
      add(add(acc8, acc9), add(acc10, acc11)))
#define GEMLET_PEAK_KEEP(c, r0) \
  __asm__ volatile("" : "+" c(r0##0), "+" c(r0##1), "+" c(r0##2), "+" c(r0##3), "+" c(r0##4), "+" c(r0##5), \
                   "+" c(r0##6), "+" c(r0##7), "+" c(r0##8), "+" c(r0##9), "+" c(r0##10), "+" c(r0##11))

#if defined(__x86_64__)
// The sink wraps (unsigned): the chains' sums overflow by design, and only their use matters.
__attribute__((target("avx2"))) inline void SinkLanes(__m256i sum, uint32_t* sink) {
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  for (uint32_t lane : lanes) *sink += lane;
}

// 64 products per vpdpbusd (zmm): what the AVX3_DL tables' GEMMs issue.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t ZmmVnni(int64_t n, uint32_t* sink) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  __m512i acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, acc8, acc9, acc10, acc11;
#define GEMLET_INIT(i) acc##i = _mm512_set1_epi32(i);
  GEMLET_PEAK_CHAINS(GEMLET_INIT)
#undef GEMLET_INIT
  for (int64_t k = 0; k < n; ++k) {
#define GEMLET_STEP(i) acc##i = _mm512_dpbusd_epi32(acc##i, a, b);
    GEMLET_PEAK_CHAINS(GEMLET_STEP)
#undef GEMLET_STEP
    GEMLET_PEAK_KEEP("v", acc);
  }
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, GEMLET_PEAK_SUM(_mm512_add_epi32));
  for (uint32_t lane : lanes) *sink += lane;
  return n * 12 * 64;
}

// 32 products per vpdpbusd (ymm): the AVX2_VNNI table's sequence (VEX where the CPU has AVX-VNNI,
// the EVEX encoding of the same instruction on an AVX-512 VNNI CPU).
__attribute__((target("avx2,avxvnni"))) int64_t YmmVnniVex(int64_t n, uint32_t* sink) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  __m256i acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, acc8, acc9, acc10, acc11;
#define GEMLET_INIT(i) acc##i = _mm256_set1_epi32(i);
  GEMLET_PEAK_CHAINS(GEMLET_INIT)
#undef GEMLET_INIT
  for (int64_t k = 0; k < n; ++k) {
#define GEMLET_STEP(i) acc##i = _mm256_dpbusd_avx_epi32(acc##i, a, b);
    GEMLET_PEAK_CHAINS(GEMLET_STEP)
#undef GEMLET_STEP
    GEMLET_PEAK_KEEP("x", acc);
  }
  SinkLanes(GEMLET_PEAK_SUM(_mm256_add_epi32), sink);
  return n * 12 * 32;
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) int64_t YmmVnniEvex(int64_t n, uint32_t* sink) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  __m256i acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, acc8, acc9, acc10, acc11;
#define GEMLET_INIT(i) acc##i = _mm256_set1_epi32(i);
  GEMLET_PEAK_CHAINS(GEMLET_INIT)
#undef GEMLET_INIT
  for (int64_t k = 0; k < n; ++k) {
#define GEMLET_STEP(i) acc##i = _mm256_dpbusd_epi32(acc##i, a, b);
    GEMLET_PEAK_CHAINS(GEMLET_STEP)
#undef GEMLET_STEP
    GEMLET_PEAK_KEEP("v", acc);
  }
  SinkLanes(GEMLET_PEAK_SUM(_mm256_add_epi32), sink);
  return n * 12 * 32;
}

// 32 products per vpmaddubsw + vpmaddwd + vpaddd (ymm): the AVX2 table's sequence without VNNI. Each
// chain multiplies its own weights, read from L1 as the kernels read theirs (one product shared by
// all chains would be computed once), through a pointer the compiler must reload each step.
__attribute__((target("avx2"))) int64_t YmmMaddubs(int64_t n, uint32_t* sink) {
  alignas(32) static const int8_t weights[12][32] = {{1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}};
  const __m256i b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  __m256i acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, acc8, acc9, acc10, acc11;
#define GEMLET_INIT(i) acc##i = _mm256_set1_epi32(i);
  GEMLET_PEAK_CHAINS(GEMLET_INIT)
#undef GEMLET_INIT
  const int8_t* w = &weights[0][0];
  for (int64_t k = 0; k < n; ++k) {
    __asm__ volatile("" : "+r"(w));
#define GEMLET_STEP(i)                                                                                       \
  acc##i = _mm256_add_epi32(                                                                                 \
      acc##i, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(w) + i), b), ones));
    GEMLET_PEAK_CHAINS(GEMLET_STEP)
#undef GEMLET_STEP
    GEMLET_PEAK_KEEP("x", acc);
  }
  SinkLanes(GEMLET_PEAK_SUM(_mm256_add_epi32), sink);
  return n * 12 * 32;
}
#endif

#if defined(__aarch64__)
// 16 products per sdot (128-bit): the NEON dotprod tables' sequence (this file is built with
// +dotprod on arm64, as matmul_neon.cc is; the probe runs it only where HWCAP says the CPU has it).
int64_t NeonSdot(int64_t n, uint32_t* sink) {
  const int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(-2);
  int32x4_t acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, acc8, acc9, acc10, acc11;
#define GEMLET_INIT(i) acc##i = vdupq_n_s32(i);
  GEMLET_PEAK_CHAINS(GEMLET_INIT)
#undef GEMLET_INIT
  for (int64_t k = 0; k < n; ++k) {
#define GEMLET_STEP(i) acc##i = vdotq_s32(acc##i, a, b);
    GEMLET_PEAK_CHAINS(GEMLET_STEP)
#undef GEMLET_STEP
    GEMLET_PEAK_KEEP("w", acc);
  }
  *sink += vaddvq_u32(vreinterpretq_u32_s32(GEMLET_PEAK_SUM(vaddq_s32)));
  return n * 12 * 16;
}
#endif

using Sequence = int64_t (*)(int64_t, uint32_t*);

// Every thread runs the sequence at once; the rate is the products of all of them over the slowest's
// time, the best of `reps` after a warm-up.
double MeasureGmacs(Sequence sequence, int threads, int reps) {
  double best = 0;
  for (int r = 0; r <= reps; ++r) {
    std::vector<std::thread> pool;
    std::vector<uint32_t> sinks(static_cast<size_t>(threads), 0);
    std::vector<int64_t> macs(static_cast<size_t>(threads), 0);
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { macs[static_cast<size_t>(t)] = sequence(kIterations, &sinks[static_cast<size_t>(t)]); });
    }
    for (std::thread& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t total = 0;
    for (int64_t m : macs) total += m;
    if (r > 0 && seconds > 0) best = std::max(best, static_cast<double>(total) / seconds / 1e9);
  }
  return best;
}

}  // namespace

std::vector<Int8Peak> MeasureInt8Peaks(int threads, int reps) {
  threads = std::max(1, threads);
  std::vector<Int8Peak> peaks;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2");
  const bool avx512_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl");
  const bool avx_vnni = __builtin_cpu_supports("avxvnni");
  if (avx512_vnni) peaks.push_back({"AVX3_DL", "zmm vpdpbusd", 64, MeasureGmacs(ZmmVnni, threads, reps)});
  if (avx_vnni) {
    peaks.push_back({"AVX2_VNNI", "ymm vpdpbusd (VEX)", 32, MeasureGmacs(YmmVnniVex, threads, reps)});
  } else if (avx512_vnni) {
    peaks.push_back({"AVX2_VNNI", "ymm vpdpbusd (EVEX)", 32, MeasureGmacs(YmmVnniEvex, threads, reps)});
  }
  if (avx2) peaks.push_back({"AVX2", "ymm vpmaddubsw+vpmaddwd+vpaddd", 32, MeasureGmacs(YmmMaddubs, threads, reps)});
#elif defined(__aarch64__)
  if ((getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0) {
    peaks.push_back({"NEON_DOTPROD", "sdot", 16, MeasureGmacs(NeonSdot, threads, reps)});
  }
#else
  (void)reps;
#endif
  return peaks;
}

}  // namespace gemlet

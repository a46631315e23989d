// What the AMX tile unit gives the prefill GEMM's inner loop on this host (bench/RESULTS.md, "Tried:
// AMX-INT8 prefill"): one 16-token x 16-row tile over n_in = 1536 (48 groups of 32 values), the
// sequence of amx_int8_gemm.patch's GroupSums (tile zero, loads, tdpbssd, stores, 4 groups at a
// time) alone (mode 0), with the per-group float work after it (1), the float work alone (2), and
// software-pipelined (3). Standalone: g++ -O2 -march=sapphirerapids amx_tile_probe.cc && ./a.out
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <chrono>
#include <unistd.h>
#include <sys/syscall.h>
#include <immintrin.h>
struct alignas(64) TileConfig { uint8_t palette = 1, start_row = 0; uint8_t reserved[14] = {}; uint16_t colsb[16] = {}; uint8_t rows[16] = {}; };
template <int G> void Cfg() { TileConfig c; for (int t=0;t<4;++t){c.colsb[t]=64;c.rows[t]=16;} for(int t=4;t<6;++t){c.colsb[t]=32/G;c.rows[t]=16;} for(int t=6;t<8;++t){c.colsb[t]=64;c.rows[t]=8/G;} asm volatile("ldtilecfg %0"::"m"(c)); }
template <int G>
inline void GroupSums(const int8_t* a, size_t a_stride, const uint8_t* b, int32_t* sums) {
  constexpr int kA = 32 / G, kB = 512 / G, kC = 1024;
  asm volatile(
      "tilezero %%tmm0\n\t" "tilezero %%tmm1\n\t" "tilezero %%tmm2\n\t" "tilezero %%tmm3\n\t"
      "tileloadd (%[a],%[as],1), %%tmm4\n\t" "tileloadd (%[b],%[bs],1), %%tmm6\n\t"
      "tileloadd %c[a1](%[a],%[as],1), %%tmm5\n\t" "tileloadd %c[b1](%[b],%[bs],1), %%tmm7\n\t"
      "tdpbssd %%tmm6, %%tmm4, %%tmm0\n\t" "tdpbssd %%tmm7, %%tmm5, %%tmm1\n\t"
      "tileloadd %c[a2](%[a],%[as],1), %%tmm4\n\t" "tileloadd %c[b2](%[b],%[bs],1), %%tmm6\n\t"
      "tileloadd %c[a3](%[a],%[as],1), %%tmm5\n\t" "tileloadd %c[b3](%[b],%[bs],1), %%tmm7\n\t"
      "tdpbssd %%tmm6, %%tmm4, %%tmm2\n\t" "tdpbssd %%tmm7, %%tmm5, %%tmm3\n\t"
      "tilestored %%tmm0, (%[c],%[cs],1)\n\t" "tilestored %%tmm1, %c[c1](%[c],%[cs],1)\n\t"
      "tilestored %%tmm2, %c[c2](%[c],%[cs],1)\n\t" "tilestored %%tmm3, %c[c3](%[c],%[cs],1)\n\t"
      : : [a] "r"(a), [as] "r"(a_stride), [b] "r"(b), [bs] "r"(size_t{64}), [c] "r"(sums), [cs] "r"(size_t{64}),
        [a1] "i"(kA), [a2] "i"(2 * kA), [a3] "i"(3 * kA), [b1] "i"(kB), [b2] "i"(2 * kB), [b3] "i"(3 * kB),
        [c1] "i"(kC), [c2] "i"(2 * kC), [c3] "i"(3 * kC) : "memory");
}
int main() {
  syscall(SYS_arch_prctl, 0x1023, 18);
  const int nb = 48; // n_in 1536
  static int8_t acts[16 * nb * 32] __attribute__((aligned(64)));
  static uint8_t panel[nb * 512] __attribute__((aligned(64)));
  static int32_t sums[4096] __attribute__((aligned(64)));
  memset(acts, 1, sizeof acts); memset(panel, 1, sizeof panel);
  Cfg<1>();
  for (int mode = 0; mode < 4; ++mode) {
    auto t0 = std::chrono::steady_clock::now();
    const int reps = 20000; volatile float sink = 0;
    for (int r = 0; r < reps; ++r) {
      __m512 acc[16]; for (int t=0;t<16;++t) acc[t]=_mm512_setzero_ps();
      if (mode == 3) {
        GroupSums<1>(acts, nb * 32, panel, sums);
        for (int u = 0; u < nb; u += 4) {
          const int r = u / 4;
          if (u + 4 < nb) GroupSums<1>(acts + (u + 4) * 32, nb * 32, panel + (u + 4) * 512, sums + ((r + 1) % 2) * 1024);
          for (int k = 0; k < 4; ++k) for (int t = 0; t < 16; ++t)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums + (r % 2) * 1024 + 256 * k + 16 * t)), _mm512_set1_ps(1.0f + t), acc[t]);
        }
      } else
      for (int u = 0; u < nb; u += 4) {
        if (mode != 2) GroupSums<1>(acts + u * 32, nb * 32, panel + u * 512, sums + ((u/4)%2)*1024);
        if (mode >= 1) for (int k = 0; k < 4; ++k) for (int t = 0; t < 16; ++t)
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums + ((u/4)%2)*1024 + 256*k + 16*t)), _mm512_set1_ps(1.0f + t), acc[t]);
      }
      float f=0; for(int t=0;t<16;++t) f+=_mm512_reduce_add_ps(acc[t]); sink = sink + f;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double macs = double(reps) * 16 * 16 * nb * 32;
    printf("mode %d: %.1f us per token tile, %.0f G MAC/s\n", mode, s / reps * 1e6, macs / s / 1e9);
  }
}

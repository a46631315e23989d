// Choosing a kernel table by name, this CPU's decode prefetch distance, and the memory bandwidth probe.
#include <hwy/targets.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/kernel_table.h"

namespace gemlet {

#if !defined(__aarch64__)
std::vector<const KernelTable*> NeonPackedTables() { return {}; }
#endif

std::vector<const KernelTable*> SimdTables() {
  std::vector<const KernelTable*> tables = NeonPackedTables();
  for (int64_t t : SimdTargets()) {
    const KernelTable* k = SimdKernels(t);
    if (k == nullptr) continue;
#if HWY_ARCH_X86
    // AVX2 with vpdpbusd before plain AVX2 (below AVX-512, which is faster where the CPU has it).
    if (t == HWY_AVX2) {
      if (const KernelTable* vnni = Avx2VnniKernels()) tables.push_back(vnni);
    }
#endif
    tables.push_back(k);
  }
  return tables;
}

void TowerMatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, const TowerClamp* clamp,
                 KernelContext& ctx) {
  const KernelTable& k = ctx.kernels();
  if (k.tower_matmul != nullptr) return k.tower_matmul(w, x, n_tokens, y, clamp, ctx);
  // The reference: clamp, multiply, clamp, each as written.
  std::vector<float> clamped;
  if (clamp != nullptr && clamp->ClampsInput()) {
    clamped.assign(x, x + n_tokens * w.n_in);
    for (float& v : clamped) v = std::clamp(v, clamp->in_min, clamp->in_max);
    x = clamped.data();
  }
  k.matmul(w, x, n_tokens, y, ctx);
  if (clamp != nullptr && clamp->ClampsOutput()) {
    for (int64_t i = 0; i < n_tokens * w.n_out; ++i) y[i] = std::clamp(y[i], clamp->out_min, clamp->out_max);
  }
}

void MatMulExperts(const WeightMatrix* w, int n, const float* x, bool one_input, float* y, KernelContext& ctx) {
  const KernelTable& k = ctx.kernels();
  if (k.matmul_experts != nullptr) return k.matmul_experts(w, n, x, one_input, y, ctx);
  for (int e = 0; e < n; ++e) {
    k.matmul(w[e], one_input ? x : x + e * w[e].n_in, 1, y + e * w[e].n_out, ctx);
  }
}

const KernelTable& BestKernels() {
  static const KernelTable& table = [] () -> const KernelTable& {
    const std::vector<const KernelTable*> tables = SimdTables();
    return tables.empty() ? RefKernels() : *tables.front();
  }();
  return table;
}

const KernelTable* KernelsNamed(const std::string& name) {
  if (name == "auto" || name.empty()) return &BestKernels();
  if (name == "ref") return &RefKernels();
  for (const KernelTable* k : SimdTables()) {
    if (name == k->name) return k;
  }
  return nullptr;
}

bool CpuIsAmd() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13];
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  vendor[12] = '\0';
  return std::strcmp(vendor, "AuthenticAMD") == 0;
#else
  return false;
#endif
}

bool CpuHasAvxVnni() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 4) & 1;  // CPUID.(EAX=7, ECX=1):EAX[4]
#else
  return false;
#endif
}

size_t DefaultDecodePrefetchBytes(const KernelTable& kernels) {
  // AMD Zen 4 with the AVX-512 packed GEMVs (session 20, bench/RESULTS.md): its hardware prefetcher
  // follows their linear streams of 64-byte loads, and the software prefetches only took line-fill
  // buffers from them: decode without them ran up to 19% faster (gemma2-2b, E2B). The AVX2 GEMVs
  // issue half the bytes per load, and there the prefetches pay on AMD too: on Zen 3 (session 32,
  // an AVX2-only EPYC) 2 KiB ahead lifted decode in 11 of 12 alternating pairs on four files, by
  // up to 29% (#43 saw 27-42% on Zen 4 forced to AVX2). On the Intel hosts 2 KiB ahead gave
  // gemma3-1b's decode +15-30% (sessions 3-5), and ARM cores are untested here: they keep it.
  const bool zmm_packed = std::strncmp(kernels.name, "AVX3", 4) == 0;
  return CpuIsAmd() && zmm_packed ? 0 : 2048;
}

std::vector<std::string> KernelNames() {
  std::vector<std::string> names = {"ref"};
  for (const KernelTable* k : SimdTables()) names.emplace_back(k->name);
  return names;
}

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

BandwidthBound MeasureReadBandwidthBound(int threads, size_t bytes, int reps) {
  threads = std::max(1, threads);
  std::vector<uint8_t> buffer(bytes, 1);
  BandwidthBound bound;
  volatile uint32_t sink = 0;
  for (int streams : {1, 2, 4}) {
    // Each thread's slice, cut into `streams` regions of equal length (whole cache lines).
    const size_t region = bytes / static_cast<size_t>(threads * streams) / 64 * 64;
    for (size_t prefetch : {size_t{0}, size_t{512}, size_t{2048}, size_t{4096}}) {
      BandwidthProbe probe{streams, prefetch, 0};
      for (int r = 0; r <= reps; ++r) {  // run 0 warms up
        std::vector<uint32_t> sums(static_cast<size_t>(threads));
        std::vector<std::thread> workers;
        const auto t0 = std::chrono::steady_clock::now();
        for (int t = 0; t < threads; ++t) {
          workers.emplace_back([&, t] {
            const uint8_t* regions[4];
            for (int k = 0; k < streams; ++k) regions[k] = buffer.data() + (static_cast<size_t>(t) * streams + k) * region;
            sums[static_cast<size_t>(t)] = ReadStreamsForBandwidth(regions, streams, region, prefetch);
          });
        }
        for (auto& w : workers) w.join();
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (uint32_t s : sums) sink = sink + s;
        if (r > 0) probe.gbs = std::max(probe.gbs, static_cast<double>(region) * streams * threads / dt / 1e9);
      }
      bound.probes.push_back(probe);
      if (probe.gbs > bound.gbs) {
        bound.gbs = probe.gbs;
        bound.best = probe;
      }
    }
  }
  return bound;
}

}  // namespace gemlet

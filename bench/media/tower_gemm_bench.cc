// tower_gemm_bench: the towers' matmul (TowerMatMul) alone on the audio conformer's shapes, F16
// matrices of random values, in GFLOP/s per wall second and per CPU second of the process (on a
// machine shared with other work, the CPU figure is the one the load moves least). Alternates the
// kernel tables named, `rounds` times; medians at the end.
//   tower_gemm_bench THREADS TOKENS ROUNDS [TABLES] [SHAPES: 1024x4096,4096x1024,...] [TYPE: F16|F32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/half.h"
#include "bench_timing.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

using gemlet::bench::CpuNow;
using gemlet::bench::Median;
using gemlet::bench::Now;

int main(int argc, char** argv) {
  using namespace gemlet;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s THREADS TOKENS ROUNDS [TABLES] [SHAPES] [F16|F32]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]), rounds = std::atoi(argv[3]);
  const int64_t tokens = std::atoll(argv[2]);
  const std::vector<std::string> tables = bench::SplitCommas(argc > 4 ? argv[4] : "auto");
  const std::vector<std::string> shapes = bench::SplitCommas(argc > 5 ? argv[5] : "1024x4096,4096x1024,1024x1024,1024x2048");
  const bool f32 = argc > 6 && std::string(argv[6]) == "F32";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Shape {
    int64_t n_in, n_out;
    std::vector<uint8_t> bytes;
    WeightMatrix w;
  };
  std::vector<Shape> ms;
  double flops = 0;
  for (const std::string& s : shapes) {
    Shape m;
    m.n_in = std::atoll(s.c_str());
    m.n_out = std::atoll(s.c_str() + s.find('x') + 1);
    const size_t n = static_cast<size_t>(m.n_in * m.n_out);
    m.bytes.resize(n * (f32 ? 4 : 2));
    for (size_t i = 0; i < n; ++i) {
      const float v = normal(rng) / std::sqrt(static_cast<float>(m.n_in));
      if (f32) {
        std::memcpy(m.bytes.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = F32ToF16(v);
        std::memcpy(m.bytes.data() + 2 * i, &h, 2);
      }
    }
    flops += 2.0 * static_cast<double>(n) * static_cast<double>(tokens);
    ms.push_back(std::move(m));
  }
  for (Shape& m : ms) {
    m.w.type = f32 ? DType::kF32 : DType::kF16;
    m.w.data = m.bytes.data();
    m.w.n_in = m.n_in;
    m.w.n_out = m.n_out;
    m.w.row_bytes = static_cast<size_t>(m.n_in) * (f32 ? 4 : 2);
  }
  int64_t max_in = 0, max_out = 0;
  for (const Shape& m : ms) max_in = std::max(max_in, m.n_in), max_out = std::max(max_out, m.n_out);
  std::vector<float> x(static_cast<size_t>(tokens * max_in)), y(static_cast<size_t>(tokens * max_out));
  for (float& v : x) v = normal(rng);
  std::vector<std::vector<double>> wall(tables.size()), cpu(tables.size());
  for (int round = -1; round < rounds; ++round) {
    for (size_t i = 0; i < tables.size(); ++i) {
      KernelContext ctx(threads, KernelsNamed(tables[i]));
      const double t0 = Now(), c0 = CpuNow();
      for (const Shape& m : ms) TowerMatMul(m.w, x.data(), tokens, y.data(), ctx);
      const double t1 = Now(), c1 = CpuNow();
      if (round < 0) continue;
      wall[i].push_back(flops / (t1 - t0) * 1e-9);
      cpu[i].push_back(flops / (c1 - c0) * 1e-9);
      std::printf("round %d %s: %.1f ms, %.1f GFLOP/s wall, %.1f GFLOP/s per CPU second\n", round, tables[i].c_str(),
                  (t1 - t0) * 1e3, wall[i].back(), cpu[i].back());
    }
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    std::printf("median %s: %.1f GFLOP/s wall, %.1f GFLOP/s per CPU second (%d threads, %lld tokens)\n",
                tables[i].c_str(), Median(wall[i]), Median(cpu[i]), threads, static_cast<long long>(tokens));
  }
  return 0;
}

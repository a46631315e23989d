// Kernel speed of every table (the reference and each compiled Highway target) at Gemma 3 1B shapes:
// GEMV (decode) in weight GB/s, from cache and from DRAM; GEMM (prefill) in GFLOP/s; element-wise
// kernels in ns per call; decode attention from DRAM (Gemma 3 12B's global layer at depth 4,096);
// ThreadPool dispatch overhead; this machine's memory read bandwidth.
//
//   gemlet_kernel_bench [-t THREADS] [--kernels ref,AVX2,...] [--types Q4_K,F16,...] [--tokens 128]
//                       [--reps 5] [--only gemv|gemm|elementwise|attention|pool|bandwidth] [--calls N] [--packed]
//                       [--prefetch BYTES] [--shapes 1536x6144,6144x1536]
//
// --shapes replaces the matmul shapes (n_in x n_out; default Gemma 3 1B's ffn_up and ffn_down), e.g.
// Gemma 4 E2B's 1536x6144 (its 256-value super-blocks divide 1536, not 1B's 1152).
// --packed gives every matrix a PackedWeights slot, as a loaded model's matrices have: kernels with
// a packed layout for the type repack it before the timed calls (kernels/packed_weights.h).
//
// Each figure is the median of --reps runs of at least 0.2 s each (alternate configurations and
// repeat: this machine is shared and noisy).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/half.h"
#include "kernels/kernel_table.h"
#include "kernels/packed_weights.h"
#include "tensor/dtype.h"

namespace gemlet {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// --calls N: call every kernel exactly N times (after one warm-up call) instead of timing runs, for
// instruction counts under callgrind.
int g_fixed_calls = 0;

// Median over `reps` runs of the mean time per call, each run calling fn until min_seconds pass.
double TimePerCall(const std::function<void()>& fn, int reps, double min_seconds = 0.2) {
  fn();  // warm up: page faults, scratch growth
  if (g_fixed_calls > 0) {
    const double t0 = Now();
    for (int i = 0; i < g_fixed_calls; ++i) fn();
    return (Now() - t0) / g_fixed_calls;
  }
  std::vector<double> runs;
  for (int r = 0; r < reps; ++r) {
    int calls = 0;
    const double t0 = Now();
    double t1;
    do {
      fn();
      ++calls;
      t1 = Now();
    } while (t1 - t0 < min_seconds);
    runs.push_back((t1 - t0) / calls);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// A weight matrix of realistic blocks: 64 random rows quantized with the reference quantizer, tiled.
std::vector<uint8_t> MakeWeights(DType type, int64_t n_in, int64_t n_out) {
  const size_t row_bytes = RowBytes(type, n_in);
  const int distinct = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(n_in));
  std::vector<uint8_t> rows(row_bytes * distinct);
  for (int r = 0; r < distinct; ++r) {
    for (float& v : row) v = normal(rng);
    QuantizeRow(type, row.data(), rows.data() + r * row_bytes, n_in);
  }
  std::vector<uint8_t> out(row_bytes * n_out);
  for (int64_t r = 0; r < n_out; ++r) std::memcpy(&out[r * row_bytes], &rows[(r % distinct) * row_bytes], row_bytes);
  return out;
}

WeightMatrix View(DType type, const uint8_t* data, int64_t n_in, int64_t n_out) {
  WeightMatrix w;
  w.type = type;
  w.data = data;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = RowBytes(type, n_in);
  return w;
}

struct Options {
  int threads = 2;
  int tokens = 128;
  int reps = 5;
  std::vector<std::string> kernels;
  std::vector<std::string> types = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};
  std::string only;
  bool packed = false;
  long prefetch = -1;  // --prefetch: decode's prefetch distance in bytes (-1: the default)
  struct Shape {
    std::string name;
    int64_t n_in, n_out;
  };
  std::vector<Shape> shapes = {{"ffn_up 1152x6912", 1152, 6912}, {"ffn_down 6912x1152", 6912, 1152}};
};

// "1536x6144" -> {name, 1536, 6144}; false when malformed.
bool ParseShape(const std::string& text, Options::Shape* shape) {
  long long n_in = 0, n_out = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lldx%lld%c", &n_in, &n_out, &tail) != 2 || n_in <= 0 || n_out <= 0) return false;
  *shape = {text, n_in, n_out};
  return true;
}

std::vector<const KernelTable*> Tables(const Options& o) {
  std::vector<const KernelTable*> all = {&RefKernels()};
  for (const KernelTable* t : SimdTables()) all.push_back(t);
  if (o.kernels.empty()) return all;
  std::vector<const KernelTable*> chosen;
  for (const std::string& name : o.kernels) {
    for (const KernelTable* t : all) {
      if (name == t->name) chosen.push_back(t);
    }
  }
  return chosen;
}

void BenchMatMul(const Options& o, bool gemm) {
  KernelOptions kernel_options;
  if (o.prefetch >= 0) kernel_options.prefetch_bytes = o.prefetch;
  KernelContext ctx(o.threads, nullptr, kernel_options);
  if (gemm) {
    std::printf("\nGEMM (prefill), %d tokens, %d threads: GFLOP/s (2 n_in n_out tokens / time), weights in cache\n",
                o.tokens, o.threads);
  } else {
    std::printf("\nGEMV (decode), %d threads: weight GB/s; hot = one matrix (cache), dram = cycling through >= 1 GiB\n",
                o.threads);
  }
  std::printf("%-6s %-20s %-8s %10s %10s %10s\n", "type", "shape", "kernels", "ms/call", gemm ? "GFLOP/s" : "hot GB/s",
              gemm ? "tok/s" : "dram GB/s");
  for (const std::string& type_name : o.types) {
    DType type;
    if (!ParseDTypeName(type_name, &type)) {
      std::fprintf(stderr, "unknown type %s\n", type_name.c_str());
      continue;
    }
    for (const Options::Shape& s : o.shapes) {
      const std::vector<uint8_t> weights = MakeWeights(type, s.n_in, s.n_out);
      const size_t bytes = weights.size();
      // Enough copies to go well past the last-level cache.
      const size_t copies = gemm ? 1 : g_fixed_calls > 0 ? 1 : std::max<size_t>(2, (size_t{1} << 30) / bytes + 1);
      std::vector<uint8_t> cold;
      if (!gemm) {
        cold.resize(bytes * copies);
        for (size_t c = 0; c < copies; ++c) std::memcpy(&cold[c * bytes], weights.data(), bytes);
      }
      for (const KernelTable* k : Tables(o)) {
        const bool is_ref = std::strcmp(k->name, "ref") == 0;
        const int n_tokens = gemm ? (is_ref ? std::min(o.tokens, 8) : o.tokens) : 1;
        std::vector<float> x(static_cast<size_t>(n_tokens * s.n_in)), y(static_cast<size_t>(n_tokens * s.n_out));
        std::mt19937 rng(3);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& v : x) v = normal(rng);
        WeightMatrix hot = View(type, weights.data(), s.n_in, s.n_out);
        PackedWeights hot_slot(nullptr);
        if (o.packed) hot.packed = &hot_slot;
        const double t_hot = TimePerCall([&] { k->matmul(hot, x.data(), n_tokens, y.data(), ctx); }, o.reps);
        if (gemm) {
          const double flops = 2.0 * static_cast<double>(s.n_in) * s.n_out * n_tokens;
          std::printf("%-6s %-20s %-8s %10.3f %10.2f %10.1f%s\n", type_name.c_str(), s.name.c_str(), k->name, t_hot * 1e3,
                      flops / t_hot / 1e9, n_tokens / t_hot, is_ref ? "  (ref: 8 tokens)" : "");
        } else {
          std::deque<PackedWeights> slots;
          auto cold_copy = [&](size_t c) {
            WeightMatrix w = View(type, cold.data() + c * bytes, s.n_in, s.n_out);
            if (o.packed) w.packed = &slots[c];
            return w;
          };
          if (o.packed) {  // pack every copy before timing
            for (size_t c = 0; c < copies; ++c) slots.emplace_back(nullptr);
            for (size_t c = 0; c < copies; ++c) k->matmul(cold_copy(c), x.data(), 1, y.data(), ctx);
          }
          size_t next = 0;
          const double t_cold = TimePerCall([&] { k->matmul(cold_copy(next++ % copies), x.data(), 1, y.data(), ctx); },
                                            o.reps);
          std::printf("%-6s %-20s %-8s %10.3f %10.2f %10.2f\n", type_name.c_str(), s.name.c_str(), k->name, t_cold * 1e3,
                      bytes / t_hot / 1e9, bytes / t_cold / 1e9);
        }
        std::fflush(stdout);
      }
    }
  }
}

void BenchElementwise(const Options& o) {
  std::printf("\nElement-wise kernels: ns per call (Gemma 3 1B sizes; attention: 64 f16 rows of 256)\n");
  std::printf("%-8s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n", "kernels", "rms1152", "gelu6912", "softmax512", "dot64x256",
              "wsum64x256", "dot/q x4", "wsum/q x4", "rope4x256", "softcap");
  std::vector<float> a(8192, 0.5f), b(8192, 0.25f), inv(128, 0.01f);
  std::vector<uint16_t> h(8192, F32ToF16(0.3f));
  for (const KernelTable* k : Tables(o)) {
    const double rms = TimePerCall([&] { k->rms_norm(a.data(), b.data(), 1152, 1e-6f, a.data()); }, o.reps, 0.05);
    const double gelu = TimePerCall([&] { k->gelu_tanh_mul(a.data(), b.data(), 6912); }, o.reps, 0.05);
    const double soft = TimePerCall([&] { k->softmax(a.data(), 512); }, o.reps, 0.05);
    // Attention against 64 cached f16 keys / values of one 256-wide head (rows 256 apart), for one
    // query and for a group of 4 sharing them (per query).
    const double dot = TimePerCall([&] { k->dot_rows_f16(a.data(), 256, 1, h.data(), 256, 64, 256, b.data(), 64); },
                                   o.reps, 0.05);
    const double axpy = TimePerCall(
        [&] { k->weighted_sum_f16(b.data(), 64, 1, h.data(), 256, 64, 256, a.data() + 4096, 256); }, o.reps, 0.05);
    const double dot4 = TimePerCall([&] { k->dot_rows_f16(a.data(), 256, 4, h.data(), 256, 64, 256, b.data(), 64); },
                                    o.reps, 0.05) / 4;
    const double axpy4 = TimePerCall(
        [&] { k->weighted_sum_f16(b.data(), 64, 4, h.data(), 256, 64, 256, a.data() + 4096, 256); }, o.reps, 0.05) / 4;
    const double rope = TimePerCall([&] { k->rope_rotate_half(a.data(), 4, 256, inv.data(), 1000); }, o.reps, 0.05);
    const double cap = TimePerCall([&] { k->soft_cap(b.data(), 4096, 30.0f); }, o.reps, 0.05);
    std::printf("%-8s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", k->name, rms * 1e9,
                gelu * 1e9, soft * 1e9, dot * 1e9, axpy * 1e9, dot4 * 1e9, axpy4 * 1e9, rope * 1e9, cap * 1e9);
  }
}

// A decode step's attention over one global layer of Gemma 3 12B at a depth of 4,096: 8 KV heads of
// 256 f16 values per position (a head's rows 4 KiB apart, as the cache lays them out), two query
// heads per KV head, keys and values from DRAM (a 64 MiB read evicts them before every call). One
// thread: the step's items are KV heads, split between the threads.
void BenchAttentionFromDram(const Options& o) {
  constexpr int kHeadDim = 256, kKvHeads = 8, kPositions = 4096, kGroup = 2;
  constexpr size_t kWidth = size_t{kKvHeads} * kHeadDim, kValues = kWidth * kPositions;
  std::printf("\nDecode attention from DRAM: %d positions x %d KV heads x %d f16, %d queries per KV head, 1 thread\n",
              kPositions, kKvHeads, kHeadDim, kGroup);
  std::printf("%-8s %12s %12s %12s %12s\n", "kernels", "dot ms", "dot GB/s", "wsum ms", "wsum GB/s");
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> keys(kValues), values(kValues);
  for (size_t i = 0; i < kValues; ++i) {
    keys[i] = F32ToF16(0.1f * normal(rng));
    values[i] = F32ToF16(normal(rng));
  }
  std::vector<float> q(size_t{kGroup} * kHeadDim), scores(size_t{kGroup} * kPositions), out(size_t{kGroup} * kHeadDim);
  for (float& x : q) x = normal(rng);
  std::vector<uint8_t> evict(size_t{64} << 20, 1);
  const double bytes = static_cast<double>(kValues) * sizeof(uint16_t);
  for (const KernelTable* k : Tables(o)) {
    std::vector<double> dot_s, wsum_s;
    for (int rep = 0; rep < std::max(1, o.reps); ++rep) {
      for (size_t i = 0; i < evict.size(); i += 64) evict[i] += 1;
      const double t0 = Now();
      for (int h = 0; h < kKvHeads; ++h) {
        k->dot_rows_f16(q.data(), kHeadDim, kGroup, keys.data() + h * kHeadDim, kWidth, kPositions, kHeadDim,
                        scores.data(), kPositions);
      }
      const double t1 = Now();
      for (float& s : scores) s = 1.0f / kPositions;
      for (size_t i = 0; i < evict.size(); i += 64) evict[i] += 1;
      const double t2 = Now();
      for (int h = 0; h < kKvHeads; ++h) {
        k->weighted_sum_f16(scores.data(), kPositions, kGroup, values.data() + h * kHeadDim, kWidth, kPositions,
                            kHeadDim, out.data(), kHeadDim);
      }
      dot_s.push_back(t1 - t0);
      wsum_s.push_back(Now() - t2);
    }
    std::sort(dot_s.begin(), dot_s.end());
    std::sort(wsum_s.begin(), wsum_s.end());
    const double dot = dot_s[dot_s.size() / 2], wsum = wsum_s[wsum_s.size() / 2];
    std::printf("%-8s %12.2f %12.2f %12.2f %12.2f\n", k->name, dot * 1e3, bytes / dot / 1e9, wsum * 1e3, bytes / wsum / 1e9);
  }
}

void BenchPool(const Options& o) {
  std::printf("\nThreadPool: us per ParallelFor (empty body and a 2x1152-float touch), %d threads\n", o.threads);
  ThreadPool pool(o.threads);
  std::vector<float> data(2304);
  const double empty = TimePerCall([&] { pool.ParallelFor(64, [](size_t, size_t, int) {}); }, o.reps);
  const double touch = TimePerCall(
      [&] {
        pool.ParallelFor(data.size(), [&](size_t begin, size_t end, int) {
          for (size_t i = begin; i < end; ++i) data[i] += 1.0f;
        });
      },
      o.reps);
  std::printf("empty %.2f us, touch %.2f us\n", empty * 1e6, touch * 1e6);
}

}  // namespace
}  // namespace gemlet

int main(int argc, char** argv) {
  using namespace gemlet;
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "-t") o.threads = std::atoi(next().c_str());
    else if (arg == "--tokens") o.tokens = std::atoi(next().c_str());
    else if (arg == "--reps") o.reps = std::atoi(next().c_str());
    else if (arg == "--kernels") o.kernels = Split(next());
    else if (arg == "--types") o.types = Split(next());
    else if (arg == "--only") o.only = next();
    else if (arg == "--calls") g_fixed_calls = std::atoi(next().c_str());
    else if (arg == "--packed") o.packed = true;
    else if (arg == "--prefetch") o.prefetch = std::atol(next().c_str());
    else if (arg == "--shapes") {
      o.shapes.clear();
      for (const std::string& text : Split(next())) {
        Options::Shape shape;
        if (!ParseShape(text, &shape)) {
          std::fprintf(stderr, "--shapes: '%s' is not N_INxN_OUT (e.g. 1536x6144)\n", text.c_str());
          return 2;
        }
        o.shapes.push_back(shape);
      }
    } else {
      std::fprintf(stderr, "usage: %s [-t N] [--kernels ref,AVX2] [--types Q4_K,F16] [--tokens N] [--reps N] "
                   "[--only gemv|gemm|elementwise|attention|pool|bandwidth] [--calls N] [--packed] [--prefetch BYTES] [--shapes 1536x6144,...]\n", argv[0]);
      return 2;
    }
  }
  std::printf("best kernels: %s\n", BestKernels().name);
  if (o.only.empty() || o.only == "bandwidth") {
    for (int t = 1; t <= o.threads; ++t) {
      std::printf("memory read bandwidth, %d thread%s, 1 GiB: %.2f GB/s\n", t, t > 1 ? "s" : "",
                  MeasureReadBandwidthGBs(t, size_t{1} << 30, o.reps));
    }
  }
  if (o.only.empty() || o.only == "pool") BenchPool(o);
  if (o.only.empty() || o.only == "elementwise") BenchElementwise(o);
  if (o.only.empty() || o.only == "attention") BenchAttentionFromDram(o);
  if (o.only.empty() || o.only == "gemv") BenchMatMul(o, false);
  if (o.only.empty() || o.only == "gemm") BenchMatMul(o, true);
  return 0;
}

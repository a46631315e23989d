// Batched decode: aggregate tokens/s of N sessions decoding together (runtime::EvaluateBatch, one
// forward per step for all N) against the same N sessions stepped one after another
// (Session::Evaluate), and how the matmul kernels scale with a few rows when the weights come from
// DRAM. A plain timing program (bench/batch/RESULTS.md).
//
//   gemlet_batch_bench -m MODEL.gguf [-t 2] [--n 1,2,4,8] [--steps 8] [--prompt 16] [-r 3]
//                      [--matmul [--rows 1,2,3,4,8] [--tensors ffn_gate,ffn_down,token_embd]]
//
// Decode: N sessions each prefilled with its own prompt, then --steps steps of one token each; every
// figure is the median over -r repetitions, the two ways alternating within a repetition and in
// turn going first (the machine is shared and noisy). The last column compares the first step's
// logits of the two ways (from the same caches). --matmul: for each named tensor, MatMul over every layer's copy in
// turn (the copies together outgrow the caches, as in decode) with R rows of activations; the time
// per pass, and against R passes of one row: what reading the weights once for R rows saves.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"
#include "runtime/batch.h"
#include "runtime/session.h"

namespace gemlet {
namespace {

using runtime::BatchOptions;
using runtime::BatchWorkspace;
using runtime::Session;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::vector<int> SplitInts(const std::string& s) {
  std::vector<int> out;
  for (size_t start = 0; start <= s.size();) {
    const size_t comma = s.find(',', start);
    const std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(std::atoi(part.c_str()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> SplitStrings(const std::string& s) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= s.size();) {
    const size_t comma = s.find(',', start);
    const std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

struct Options {
  std::string model;
  int threads = 2;
  std::vector<int> ns = {1, 2, 4, 8};
  int steps = 8;
  int prompt = 16;
  int reps = 3;
  bool matmul = false;
  std::vector<int> rows = {1, 2, 3, 4, 8};
  std::vector<std::string> tensors = {"attn_q", "ffn_gate", "ffn_down", "token_embd"};
};

// Aggregate decode tokens/s for N sessions, batched and one after another.
int BenchDecode(const Options& o, const std::shared_ptr<const runtime::Engine>& engine) {
  const int n_vocab = engine->config().n_vocab;
  std::printf("decode: %d threads, %d-token prompts, %d steps per measurement, median of %d\n", o.threads, o.prompt,
              o.steps, o.reps);
  std::printf("%4s %16s %16s %8s %22s\n", "N", "batched tok/s", "one-by-one tok/s", "speedup", "max |dlogit| 1st step");
  for (int n : o.ns) {
    SessionOptions so;
    so.n_threads = o.threads;
    so.n_ctx = o.prompt + 2 * o.steps * o.reps + 8;
    so.max_batch = std::max(o.prompt, 1);
    std::vector<std::unique_ptr<Session>> owned;
    std::vector<Session*> sessions;
    std::vector<int32_t> next(static_cast<size_t>(n));
    std::vector<float> row(static_cast<size_t>(n_vocab));
    for (int i = 0; i < n; ++i) {
      auto s = Session::Create(engine, so);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        return 1;
      }
      std::vector<int32_t> prompt = {2};
      for (int k = 1; k < o.prompt; ++k) prompt.push_back(4 + (k * 37 + i * 101) % std::min(n_vocab - 4, 4000));
      if (Status st = s.value()->Evaluate(prompt, row.data(), false); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      next[static_cast<size_t>(i)] = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      owned.push_back(std::move(s).value());
      sessions.push_back(owned.back().get());
    }
    auto ws = BatchWorkspace::Create(engine, BatchOptions::Like(*sessions[0], n));
    if (!ws.ok()) {
      std::fprintf(stderr, "%s\n", ws.message().c_str());
      return 1;
    }
    std::vector<float> logits(static_cast<size_t>(n) * n_vocab), alone_logits(logits.size());
    std::vector<std::span<const int32_t>> tokens;
    for (int i = 0; i < n; ++i) tokens.emplace_back(&next[static_cast<size_t>(i)], 1);
    // Greedy continuations, so that each step feeds the model something it produced.
    auto batched_step = [&]() -> bool {
      if (Status st = runtime::EvaluateBatch(sessions, tokens, *ws.value(), logits.data()); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return false;
      }
      for (int i = 0; i < n; ++i) {
        const float* r = logits.data() + static_cast<size_t>(i) * n_vocab;
        next[static_cast<size_t>(i)] = static_cast<int32_t>(std::max_element(r, r + n_vocab) - r);
      }
      return true;
    };
    auto alone_step = [&]() -> bool {
      for (int i = 0; i < n; ++i) {
        float* r = alone_logits.data() + static_cast<size_t>(i) * n_vocab;
        if (Status st = sessions[i]->Evaluate({next[static_cast<size_t>(i)]}, r, false); !st.ok()) {
          std::fprintf(stderr, "%s\n", st.message().c_str());
          return false;
        }
        next[static_cast<size_t>(i)] = static_cast<int32_t>(std::max_element(r, r + n_vocab) - r);
      }
      return true;
    };
    if (!batched_step() || !alone_step()) return 1;  // warm-up: packing, scratch growth, page faults
    std::vector<double> batched, alone;
    // The same first step both ways, from the same caches: how far the logits are apart.
    std::vector<float> first_batched;
    double max_diff = 0;
    for (int r = 0; r < o.reps; ++r) {
      // Each measurement ends where it began, so every repetition decodes at the same positions.
      std::vector<int> start(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) start[static_cast<size_t>(i)] = sessions[i]->n_past();
      const std::vector<int32_t> start_next = next;
      auto rewind = [&] {
        for (int i = 0; i < n; ++i) (void)sessions[i]->Truncate(start[static_cast<size_t>(i)]);
        next = start_next;
      };
      auto run_batched = [&]() -> bool {
        const double t0 = Now();
        for (int s = 0; s < o.steps; ++s) {
          if (!batched_step()) return false;
          if (r == 0 && s == 0) first_batched = logits;
        }
        batched.push_back(n * o.steps / (Now() - t0));
        rewind();
        return true;
      };
      auto run_alone = [&]() -> bool {
        const double t0 = Now();
        for (int s = 0; s < o.steps; ++s) {
          if (!alone_step()) return false;
          if (r == 0 && s == 0) {
            for (size_t k = 0; k < logits.size(); ++k) {
              max_diff = std::max(max_diff, static_cast<double>(std::fabs(first_batched[k] - alone_logits[k])));
            }
          }
        }
        alone.push_back(n * o.steps / (Now() - t0));
        rewind();
        return true;
      };
      // Batched first in even repetitions, one by one first in odd ones: neither always follows the other.
      if (r % 2 == 0 ? !run_batched() || !run_alone() : !run_alone() || !run_batched()) return 1;
    }
    const double b = Median(batched), a = Median(alone);
    std::printf("%4d %16.2f %16.2f %7.2fx %22.3g\n", n, b, a, b / a, max_diff);
    std::fflush(stdout);
  }
  return 0;
}

// MatMul of R rows over every layer's copy of a tensor, the weights from DRAM.
int BenchMatMul(const Options& o, const std::shared_ptr<const runtime::Engine>& engine) {
  const GgufFile& file = engine->model().gguf();
  KernelContext ctx(o.threads);
  std::printf("\nmatmul: %d threads, kernels %s, packed weights; ms per pass over every layer's copy, and the\n"
              "ratio to R passes of one row (1.00: R rows cost what R one-row calls cost; 1/R: what one costs)\n",
              o.threads, ctx.kernels().name);
  std::printf("%-12s %-6s %-14s %6s", "tensor", "type", "shape", "copies");
  for (int r : o.rows) std::printf("  %8s R=%-2d", "ms", r);
  std::printf("\n");
  for (const std::string& name : o.tensors) {
    std::vector<WeightMatrix> ws;
    std::deque<PackedWeights> slots;
    for (const GgufTensor& t : file.tensors()) {
      const std::string tn(t.name);
      const std::string suffix = "." + name + ".weight";
      const bool match = tn == name + ".weight" || (tn.rfind("blk.", 0) == 0 && tn.size() > suffix.size() &&
                                                    tn.compare(tn.size() - suffix.size(), suffix.size(), suffix) == 0);
      if (!match || t.n_dims != 2) continue;
      WeightMatrix w;
      w.type = t.type;
      w.data = t.data;
      w.n_in = t.ne[0];
      w.n_out = t.ne[1];
      w.row_bytes = RowBytes(t.type, t.ne[0]);
      slots.emplace_back(nullptr);
      w.packed = &slots.back();
      ws.push_back(w);
    }
    if (ws.empty()) continue;
    // All copies share one shape in the models measured; a family with per-layer sizes keeps the
    // first shape's copies only.
    const int64_t n_in = ws[0].n_in, n_out = ws[0].n_out;
    std::erase_if(ws, [&](const WeightMatrix& w) { return w.n_in != n_in || w.n_out != n_out; });
    const int max_rows = *std::max_element(o.rows.begin(), o.rows.end());
    std::vector<float> x(static_cast<size_t>(max_rows * n_in)), y(static_cast<size_t>(max_rows * n_out));
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    for (const WeightMatrix& w : ws) MatMul(w, x.data(), 1, y.data(), ctx);  // packs every copy
    char shape[32];
    std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(n_in), static_cast<long long>(n_out));
    std::printf("%-12s %-6s %-14s %6zu", name.c_str(), DTypeName(ws[0].type), shape, ws.size());
    double one = 0;
    for (int r : o.rows) {
      std::vector<double> runs;
      for (int rep = 0; rep < std::max(o.reps, 3); ++rep) {
        double elapsed = 0;
        int passes = 0;
        do {
          const double t0 = Now();
          for (const WeightMatrix& w : ws) MatMul(w, x.data(), r, y.data(), ctx);
          elapsed += Now() - t0;
          ++passes;
        } while (elapsed < 0.3);
        runs.push_back(elapsed / passes);
      }
      const double t = Median(runs);
      if (r == 1) one = t;
      std::printf("  %8.2f", t * 1e3);
      if (one > 0) std::printf(" %5.2f", t / (one * r));
      else std::printf("      ");
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s -m MODEL.gguf [-t THREADS] [--n 1,2,4,8] [--steps N] [--prompt N] [-r REPS]\n"
               "          [--matmul [--rows 1,2,4,8] [--tensors ffn_gate,token_embd]]\n",
               argv0);
  return 2;
}

}  // namespace
}  // namespace gemlet

int main(int argc, char** argv) {
  using namespace gemlet;
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "-m") o.model = next();
    else if (a == "-t") o.threads = std::atoi(next().c_str());
    else if (a == "--n") o.ns = SplitInts(next());
    else if (a == "--steps") o.steps = std::atoi(next().c_str());
    else if (a == "--prompt") o.prompt = std::atoi(next().c_str());
    else if (a == "-r") o.reps = std::atoi(next().c_str());
    else if (a == "--matmul") o.matmul = true;
    else if (a == "--rows") o.rows = SplitInts(next());
    else if (a == "--tensors") o.tensors = SplitStrings(next());
    else return Usage(argv[0]);
  }
  if (o.model.empty() || o.threads < 1 || o.steps < 1 || o.prompt < 1 || o.reps < 1 || o.ns.empty()) return Usage(argv[0]);
  auto engine = runtime::Engine::Load(o.model);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.message().c_str());
    return 1;
  }
  std::printf("model %s (%s)\n", o.model.c_str(), engine.value()->config().arch.c_str());
  return o.matmul ? BenchMatMul(o, engine.value()) : BenchDecode(o, engine.value());
}

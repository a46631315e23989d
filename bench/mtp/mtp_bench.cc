// What Gemma 4's own drafter (--spec mtp) costs beside its target, and the speed-up it gives as a
// function of how often its drafts are right (which random weights cannot say). At a context of
// --depth tokens, the median of --reps rounds that alternate every measurement (--fastest: the fastest):
//   decode     one token through the target (the step speculation replaces);
//   verify(k)  one forward of 1 + k rows as Generate verifies them (every row as decoding it alone);
//   draft      one drafter step (k drafts cost k of them).
// A step with k drafts then costs c(k) = (verify(k) + k * draft) / decode decode steps and yields
// 1 + a k tokens when a fraction a of drafts is kept: it pays from a = (c(k) - 1) / k on (docs/
// speculative.md's break-even). For chained drafts, where draft i counts only if every one before it
// was right, a per-token acceptance p gives (1 - p^(k+1)) / (1 - p) tokens: the table of speed-ups.
//
//   mtp_bench TARGET.gguf DRAFTER.gguf [--depth 512] [--threads 2] [--reps 15] [--kernels NAME] [--fastest]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "runtime/drafting.h"
#include "runtime/session.h"

namespace {

using gemlet::runtime::AssistantDrafter;
using gemlet::runtime::Engine;
using gemlet::runtime::Session;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool use_fastest = false;

// The median run (or the fastest with --fastest).
double Pick(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return use_fastest ? v.front() : v[v.size() / 2];
}

std::string CpuName() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "?";
  char line[512];
  std::string name = "?";
  while (std::fgets(line, sizeof line, f)) {
    std::string s(line);
    if (s.rfind("model name", 0) == 0) {
      name = s.substr(s.find(':') + 2);
      name.erase(name.find_last_not_of("\n ") + 1);
      break;
    }
  }
  std::fclose(f);
  return name;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "mtp_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mtp_bench TARGET.gguf DRAFTER.gguf [--depth N] [--threads N] [--reps N] [--kernels NAME] [--fastest]\n");
    return 2;
  }
  int depth = 512, threads = 2, reps = 15;
  std::string kernels = "auto";
  for (int i = 3; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--fastest") {
      use_fastest = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) return Fail("no value for " + flag);
    if (flag == "--depth") depth = std::atoi(argv[i + 1]);
    else if (flag == "--threads") threads = std::atoi(argv[i + 1]);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else if (flag == "--kernels") kernels = argv[i + 1];
    else return Fail("unknown flag " + flag);
  }
  const gemlet::KernelTable* table = gemlet::KernelsNamed(kernels);
  if (table == nullptr) return Fail("no kernels named " + kernels);
  auto target = Engine::Load(argv[1]);
  if (!target.ok()) return Fail(target.message());
  auto drafter = Engine::Load(argv[2]);
  if (!drafter.ok()) return Fail(drafter.message());
  constexpr int kMaxK = 7;  // Generate verifies at most 7 drafts (8 rows through the decode kernels)
  gemlet::SessionOptions so;
  so.n_ctx = depth + kMaxK + 2;
  so.n_threads = threads;
  so.rollback_tokens = kMaxK + 1;
  auto created = Session::Create(*target, so, table);
  if (!created.ok()) return Fail(created.message());
  Session& s = **created;
  auto mtp = AssistantDrafter::Create(*drafter, s);
  if (!mtp.ok()) return Fail(mtp.message());

  const int n_vocab = (*target)->config().n_vocab, d = (*target)->config().d_model;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(4, n_vocab - 1);
  std::vector<int32_t> context(static_cast<size_t>(depth));
  for (int32_t& t : context) t = id(rng);
  context[0] = 2;
  std::vector<float> logits(static_cast<size_t>(kMaxK + 1) * n_vocab), hidden(static_cast<size_t>(kMaxK + 1) * d);
  const double t_prefill = Now();
  if (auto st = s.Evaluate(context, logits.data(), false, hidden.data()); !st.ok()) return Fail(st.message());
  std::printf("# mtp_bench: %s + %s, depth %d, %d threads, kernels %s, %s of %d\n# CPU: %s\n# prefill of %d tokens: %.2f s\n\n",
              argv[1], argv[2], depth, threads, table->name, use_fastest ? "fastest" : "median", reps, CpuName().c_str(), depth,
              Now() - t_prefill);

  // Each timing starts from the same cache: the rows a step adds are taken back after it. Rounds
  // alternate every k and the drafter, so that a busy moment of a shared host spreads over all of them.
  std::vector<std::vector<double>> t(kMaxK + 1);
  std::vector<double> draft;
  std::vector<float> state(hidden.begin(), hidden.begin() + d);
  for (int r = 0; r < reps + 1; ++r) {  // the first warms the scratch for each row count
    for (int k = 0; k <= kMaxK; ++k) {
      std::vector<int32_t> step(static_cast<size_t>(k + 1));
      for (int32_t& x : step) x = id(rng);
      const double t0 = Now();
      const auto st = k == 0 ? s.Evaluate(step, logits.data(), false, hidden.data())
                             : s.EvaluateAsDecode(step, logits.data(), hidden.data());
      const double dt = Now() - t0;
      if (!st.ok()) return Fail(st.message());
      if (auto tr = s.Truncate(depth); !tr.ok()) return Fail(tr.message());
      if (r > 0) t[static_cast<size_t>(k)].push_back(dt * 1e3);
    }
    const double t0 = Now();
    const std::vector<int32_t> chain = gemlet::runtime::DraftFromAssistant(s, **mtp, id(rng), state.data(), 4);
    const double dt = Now() - t0;
    if (r > 0) draft.push_back(dt * 1e3 / static_cast<double>(chain.size()));
  }
  std::vector<double> verify_ms;
  for (const std::vector<double>& v : t) verify_ms.push_back(Pick(v));
  const double decode = verify_ms[0], draft_ms = Pick(draft), dc = draft_ms / decode;
  const gemlet::AssistantSizes& z = (*mtp)->assistant().sizes();
  std::printf("decode step: %.2f ms; drafter step: %.3f ms = %.3f decode steps (width %d, %s head)\n\n", decode, draft_ms, dc,
              z.width, z.n_centroids > 0 ? "ordered-embedding" : "full");
  std::printf("| k | verify ms | verify / decode | c(k) with k drafter steps | break-even kept fraction (c - 1) / k | "
              "ceiling (k + 1) / c |\n|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> cost(kMaxK + 1);
  for (int k = 1; k <= kMaxK; ++k) {
    cost[k] = verify_ms[k] / decode + k * dc;
    std::printf("| %d | %.2f | %.2f | %.2f | %.0f%% | %.2fx |\n", k, verify_ms[k], verify_ms[k] / decode, cost[k],
                100 * (cost[k] - 1) / k, (k + 1) / cost[k]);
  }
  std::printf("\nspeed-up over plain decoding at per-token acceptance p (chained drafts: (1 - p^(k+1)) / (1 - p) tokens "
              "per step), each k, and the best k:\n\n| p |");
  for (int k = 1; k <= kMaxK; ++k) std::printf(" k=%d |", k);
  std::printf(" best |\n|---:|");
  for (int k = 0; k <= kMaxK; ++k) std::printf("---:|");
  std::printf("\n");
  for (double p : {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}) {
    std::printf("| %.1f |", p);
    double best = 0;
    int best_k = 0;
    for (int k = 1; k <= kMaxK; ++k) {
      const double tokens = (1 - std::pow(p, k + 1)) / (1 - p);
      const double speedup = tokens / cost[k];
      if (speedup > best) best = speedup, best_k = k;
      std::printf(" %.2f |", speedup);
    }
    std::printf(" %.2fx (k=%d) |\n", best, best_k);
  }
  return 0;
}

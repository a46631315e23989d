// Dropping the oldest context, two ways, over the public API: shifting the KV cache over the dropped
// tokens (Session::Discard: kept rows moved, keys re-rotated, nothing evaluated) against evaluating
// the kept tokens again in a fresh session. For each: the time it takes, and the negative
// log-likelihood of a continuation scored after it (the kept tokens' cached states once attended to
// the dropped text, so the shift cannot equal the re-prefill: this says how much it matters), beside
// the NLL with nothing dropped.
//
//   gemlet_shift_bench -m MODEL.gguf --text FILE [--drop 256] [--keep 512] [--score 128] [-t 2] [-r 5]
//
// The text is tokenized and cut into [BOS] + drop + keep + score tokens; a text too short is repeated.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gemlet/gemlet.hpp"

namespace {

using gemlet::Session;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Mean NLL (nats) of `score` after what the session holds: `last` is the logits row predicting
// score[0]; the rest come from evaluating score with every row.
double ScoreNll(Session& s, const std::vector<float>& last, const std::vector<int32_t>& score, int n_vocab) {
  std::vector<float> rows(score.size() * static_cast<size_t>(n_vocab));
  if (!s.Evaluate(score, rows.data(), /*all_logits=*/true).ok()) return NAN;
  double total = 0;
  for (size_t i = 0; i < score.size(); ++i) {
    const float* row = i == 0 ? last.data() : rows.data() + (i - 1) * n_vocab;
    double max = row[0];
    for (int j = 1; j < n_vocab; ++j) max = std::max(max, static_cast<double>(row[j]));
    double sum = 0;
    for (int j = 0; j < n_vocab; ++j) sum += std::exp(row[j] - max);
    total += max + std::log(sum) - row[score[i]];
  }
  return total / static_cast<double>(score.size());
}

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s -m MODEL.gguf --text FILE [--drop N] [--keep N] [--score N] [-t THREADS] [-r REPS]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, text_path;
  int drop = 256, keep = 512, score = 128, threads = 2, reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = (a == "-m" || a == "--text" || a == "--drop" || a == "--keep" || a == "--score" || a == "-t" ||
                     a == "-r")
                        ? next()
                        : nullptr;
    if (v == nullptr) return Usage(argv[0]);
    if (a == "-m") model = v;
    else if (a == "--text") text_path = v;
    else if (a == "--drop") drop = std::atoi(v);
    else if (a == "--keep") keep = std::atoi(v);
    else if (a == "--score") score = std::atoi(v);
    else if (a == "-t") threads = std::atoi(v);
    else reps = std::atoi(v);
  }
  if (model.empty() || text_path.empty() || drop <= 0 || keep <= 0 || score <= 1 || threads <= 0 || reps <= 0) {
    return Usage(argv[0]);
  }
  std::ifstream in(text_path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in && !in.eof()) return std::fprintf(stderr, "cannot read %s\n", text_path.c_str()), 1;
  auto engine = gemlet::Engine::Load(model);
  if (!engine.ok()) return std::fprintf(stderr, "%s\n", engine.message().c_str()), 1;
  const int n_vocab = (*engine)->info().n_vocab;
  std::vector<int32_t> text = (*engine)->Tokenize(buf.str());
  if (text.empty()) return std::fprintf(stderr, "the text has no tokens\n"), 1;
  const size_t need = static_cast<size_t>(drop + keep + score);
  while (text.size() < need) text.insert(text.end(), text.begin(), text.begin() + std::min(text.size(), need - text.size()));
  const int32_t bos = (*engine)->bos_token();
  std::vector<int32_t> head;
  if (bos >= 0) head.push_back(bos);
  const std::vector<int32_t> dropped(text.begin(), text.begin() + drop), kept(text.begin() + drop, text.begin() + drop + keep),
      scored(text.begin() + drop + keep, text.begin() + static_cast<std::ptrdiff_t>(need));

  gemlet::SessionOptions so;
  so.n_ctx = static_cast<int>(head.size() + need);
  so.n_threads = threads;
  std::vector<double> shift_s, prefill_s, nll_shift, nll_prefill, nll_full;
  std::vector<float> last(static_cast<size_t>(n_vocab));
  int reevaluated = 0;
  for (int r = 0; r < reps; ++r) {
    // Nothing dropped: the continuation after the whole text.
    auto full = Session::Create(*engine, so);
    if (!full.ok()) return std::fprintf(stderr, "%s\n", full.message().c_str()), 1;
    std::vector<int32_t> all = head;
    all.insert(all.end(), dropped.begin(), dropped.end());
    all.insert(all.end(), kept.begin(), kept.end());
    if (!(*full)->Evaluate(all, last.data()).ok()) return 1;
    nll_full.push_back(ScoreNll(**full, last, scored, n_vocab));
    // Shift: the same text evaluated, then the dropped tokens cut out of the cache.
    auto shifted = Session::Create(*engine, so);
    if (!shifted.ok() || !(*shifted)->Evaluate(all).ok()) return 1;
    double t0 = Now();
    auto redone = (*shifted)->Discard(static_cast<int>(head.size()), drop);
    shift_s.push_back(Now() - t0);
    if (!redone.ok()) return std::fprintf(stderr, "%s\n", redone.message().c_str()), 1;
    reevaluated = *redone;
    // The row predicting the first scored token, from the shifted cache: take back the last kept
    // token (within the rollback room: nothing else is evaluated) and evaluate it again.
    if (!(*shifted)->Truncate((*shifted)->n_past() - 1).ok()) return 1;
    if (!(*shifted)->Evaluate(std::vector<int32_t>{kept.back()}, last.data()).ok()) return 1;
    nll_shift.push_back(ScoreNll(**shifted, last, scored, n_vocab));
    // Re-prefill: a fresh session evaluates the kept tokens.
    auto fresh = Session::Create(*engine, so);
    if (!fresh.ok()) return 1;
    std::vector<int32_t> kept_all = head;
    kept_all.insert(kept_all.end(), kept.begin(), kept.end());
    t0 = Now();
    if (!(*fresh)->Evaluate(kept_all, last.data()).ok()) return 1;
    prefill_s.push_back(Now() - t0);
    nll_prefill.push_back(ScoreNll(**fresh, last, scored, n_vocab));
  }
  std::printf("model %s, %d threads; %zu + %d dropped + %d kept + %d scored tokens (median of %d)\n", model.c_str(),
              threads, head.size(), drop, keep, score, reps);
  std::printf("  shift (Discard)        %8.2f ms   (%d tokens evaluated again)\n", Median(shift_s) * 1e3, reevaluated);
  std::printf("  re-prefill kept text   %8.2f ms   (%.1fx the shift)\n", Median(prefill_s) * 1e3,
              Median(prefill_s) / std::max(1e-9, Median(shift_s)));
  std::printf("  continuation NLL: nothing dropped %.4f, after the shift %.4f, after the re-prefill %.4f nats/token\n",
              Median(nll_full), Median(nll_shift), Median(nll_prefill));
  return 0;
}

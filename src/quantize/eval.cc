// Perplexity and reference comparison over a text, llama-perplexity's windowing, bounded memory:
// logits are produced a few rows at a time, compared, and dropped.
#include "quantize/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "runtime/session.h"

namespace gemlet {

using namespace gemlet::runtime;  // Session, Generate: the runtime inside the library

namespace {

// Rows of logits held per model at once ([kRows, n_vocab] floats: 64 MiB for a 262k vocabulary).
constexpr int kRows = 64;

struct Runner {
  std::shared_ptr<const runtime::Engine> engine;
  std::unique_ptr<Session> session;
  std::vector<float> logits;
};

Status StartSession(Runner& r, int n_ctx, int n_threads, DType kv_type) {
  SessionOptions so;
  so.n_ctx = n_ctx;
  so.n_threads = n_threads;
  so.kv_cache_type = static_cast<KvCacheType>(kv_type);  // the same values (runtime::KvDType)
  ASSIGN_OR_RETURN(r.session, Session::Create(r.engine, so));
  r.logits.resize(static_cast<size_t>(kRows) * static_cast<size_t>(r.engine->config().n_vocab));
  return Status::Ok();
}

double NllAt(const float* row, int n, int32_t target) { return LogSumExp(row, n) - static_cast<double>(row[target]); }

}  // namespace

double LogSumExp(const float* x, int n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
  return m + std::log(s);
}

RowComparison CompareRows(const float* ref, const float* got, int n) {
  RowComparison c;
  const double lr = LogSumExp(ref, n), lg = LogSumExp(got, n);
  int best_ref = 0, best_got = 0;
  for (int i = 0; i < n; ++i) {
    const double a = static_cast<double>(ref[i]) - lr, b = static_cast<double>(got[i]) - lg;
    c.kld += std::exp(a) * (a - b);
    const double d = std::fabs(static_cast<double>(ref[i]) - static_cast<double>(got[i]));
    c.max_abs_diff = std::max(c.max_abs_diff, d);
    c.sum_sq_diff += d * d;
    best_ref = ref[i] > ref[best_ref] ? i : best_ref;
    best_got = got[i] > got[best_got] ? i : best_got;
  }
  c.kld = std::max(c.kld, 0.0);  // rounding can leave -1e-17 for identical rows
  c.top1_same = best_ref == best_got;
  return c;
}

double Quantile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = std::clamp(p, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Result<EvalResult> EvaluateText(const EvalOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  Runner model;
  ASSIGN_OR_RETURN(model.engine, runtime::Engine::Load(o.model_path));
  // llama-perplexity tokenizes the whole text once, BOS first, special-token text left as text.
  EncodeOptions enc;
  enc.add_bos = true;
  enc.parse_special = false;
  const std::vector<int32_t> tokens = model.engine->tokenizer().Encode(o.text, enc);
  if (tokens.size() < 2) return Status::Error("the text has " + std::to_string(tokens.size()) + " token(s); at least 2 are needed");
  const int bos = model.engine->tokenizer().bos_id();
  const int V = model.engine->config().n_vocab;
  std::optional<Runner> ref;
  if (!o.ref_model_path.empty()) {
    Runner r;
    ASSIGN_OR_RETURN(r.engine, runtime::Engine::Load(o.ref_model_path));
    if (r.engine->config().n_vocab != V) {
      return Status::Error("the reference model has " + std::to_string(r.engine->config().n_vocab) +
                           " logits per token, the model " + std::to_string(V));
    }
    if (r.engine->tokenizer().Encode(o.text, enc) != tokens) {
      return Status::Error("the reference model's tokenizer splits the text differently");
    }
    ref = std::move(r);
  }

  const int n_ctx = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(o.n_ctx, 2)), tokens.size()));
  int n_chunks = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
  if (o.max_chunks > 0) n_chunks = std::min(n_chunks, o.max_chunks);
  const int first = o.score_all ? 0 : n_ctx / 2;  // row j predicts token j + 1; rows first .. n_ctx-2
  RETURN_IF_ERROR(StartSession(model, n_ctx, o.n_threads, o.kv_type).WithContext(o.model_path));
  if (ref) RETURN_IF_ERROR(StartSession(*ref, n_ctx, o.n_threads, o.ref_kv_type).WithContext(o.ref_model_path));

  EvalResult result;
  result.n_ctx = n_ctx;
  result.n_chunks = n_chunks;
  result.n_text_tokens = static_cast<int64_t>(tokens.size());
  result.has_ref = ref.has_value();
  double nll_sum = 0, nll_sq = 0, ref_nll_sum = 0, sq_diff = 0;
  int64_t top1 = 0;
  std::vector<double> klds;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int c = 0; c < n_chunks; ++c) {
    if (o.progress) o.progress(c, n_chunks);
    std::copy(tokens.begin() + static_cast<ptrdiff_t>(c) * n_ctx, tokens.begin() + static_cast<ptrdiff_t>(c + 1) * n_ctx,
              chunk.begin());
    if (bos >= 0) chunk[0] = bos;
    std::vector<Runner*> runners = {&model};
    if (ref) runners.push_back(&*ref);
    for (Runner* r : runners) {
      r->session->Reset();
      if (first > 0) {
        const std::vector<int32_t> prefix(chunk.begin(), chunk.begin() + first);
        RETURN_IF_ERROR(r->session->Evaluate(prefix, nullptr, false));
      }
    }
    for (int j0 = first; j0 < n_ctx - 1; j0 += kRows) {
      const int j1 = std::min(j0 + kRows, n_ctx - 1);
      const std::vector<int32_t> batch(chunk.begin() + j0, chunk.begin() + j1);
      for (Runner* r : runners) RETURN_IF_ERROR(r->session->Evaluate(batch, r->logits.data(), true));
      for (int j = j0; j < j1; ++j) {
        const size_t offset = static_cast<size_t>(j - j0) * static_cast<size_t>(V);
        const int32_t target = chunk[static_cast<size_t>(j) + 1];
        const double nll = NllAt(&model.logits[offset], V, target);
        nll_sum += nll;
        nll_sq += nll * nll;
        if (ref) {
          ref_nll_sum += NllAt(&ref->logits[offset], V, target);
          const RowComparison cmp = CompareRows(&ref->logits[offset], &model.logits[offset], V);
          klds.push_back(cmp.kld);
          top1 += cmp.top1_same ? 1 : 0;
          result.max_abs_dlogit = std::max(result.max_abs_dlogit, cmp.max_abs_diff);
          sq_diff += cmp.sum_sq_diff;
        }
        ++result.n_tokens;
      }
    }
  }
  if (result.n_tokens == 0) return Status::Error("nothing to score: use a larger --ctx or a longer text");
  const double n = static_cast<double>(result.n_tokens);
  result.nll_mean = nll_sum / n;
  result.ppl = std::exp(result.nll_mean);
  if (result.n_tokens > 1) {
    const double var = std::max(0.0, nll_sq / n - result.nll_mean * result.nll_mean);
    result.ppl_stderr = result.ppl * std::sqrt(var / (n - 1));
  }
  if (ref) {
    result.ref_ppl = std::exp(ref_nll_sum / n);
    double kld_sum = 0;
    for (double k : klds) kld_sum += k;
    result.kld_mean = kld_sum / n;
    result.kld_median = Quantile(klds, 0.5);
    result.kld_p99 = Quantile(klds, 0.99);
    result.kld_max = klds.back();  // sorted by Quantile
    result.top1_agree = static_cast<double>(top1) / n;
    result.rms_dlogit = std::sqrt(sq_diff / (n * static_cast<double>(V)));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace gemlet

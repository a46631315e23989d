// Quality of a (quantized) model on a text: perplexity like llama-perplexity, and against a reference
// model the KL divergence of the next-token distributions, top-1 agreement and the largest logit change.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/kv_cache.h"

namespace gemlet {

struct EvalOptions {
  std::string model_path;
  std::string ref_model_path;  // empty: perplexity only
  std::string text;            // the text itself, tokenized with the model's tokenizer
  // Tokens per window. The text is cut into non-overlapping windows of n_ctx tokens, each starting
  // with BOS (the window's first token is replaced by it, as llama-perplexity does). A text shorter
  // than one window is evaluated as a single window of all its tokens.
  int n_ctx = 512;
  // false (default): score the second half of each window, tokens n_ctx/2 + 1 .. n_ctx - 1, each
  // predicted with at least n_ctx/2 tokens of context (llama-perplexity's rule, so figures compare).
  // true: score every token after the BOS.
  bool score_all = false;
  int max_chunks = 0;  // 0: every window
  int n_threads = 0;   // 0: all hardware threads
  // The KV cache each side stores: with the model as its own reference, what a cheaper KV cache
  // costs in accuracy (KL divergence from the f16 cache's distributions).
  DType kv_type = DType::kF16;
  DType ref_kv_type = DType::kF16;
  std::function<void(int chunk, int n_chunks)> progress;
};

struct EvalResult {
  int n_ctx = 0;
  int n_chunks = 0;
  int64_t n_text_tokens = 0;  // the whole text, BOS included
  int64_t n_tokens = 0;       // tokens scored
  double nll_mean = 0;        // mean negative log-likelihood (nats)
  double ppl = 0;             // exp(nll_mean)
  double ppl_stderr = 0;      // ppl * stderr of the mean nll (delta method)
  // With a reference model, over the same scored tokens; KL(P_ref || P_model) per token, in nats.
  bool has_ref = false;
  double ref_ppl = 0;
  double kld_mean = 0, kld_median = 0, kld_p99 = 0, kld_max = 0;
  double top1_agree = 0;      // fraction of tokens whose argmax is the reference's
  double max_abs_dlogit = 0;  // over every scored row and vocabulary entry
  double rms_dlogit = 0;
  double seconds = 0;
};

Result<EvalResult> EvaluateText(const EvalOptions& options);

// ---- per-row helpers (exposed for tests) ----

// log(sum_i exp(x_i)), computed stably in double.
double LogSumExp(const float* x, int n);

struct RowComparison {
  double kld = 0;  // KL(softmax(ref) || softmax(got))
  bool top1_same = false;
  double max_abs_diff = 0;
  double sum_sq_diff = 0;
};
RowComparison CompareRows(const float* ref, const float* got, int n);

// The p-quantile (0..1) of values, linearly interpolated between order statistics; sorts `values`.
double Quantile(std::vector<double>& values, double p);

}  // namespace gemlet

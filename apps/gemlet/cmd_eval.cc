// `gemlet eval`: perplexity of a model on a text, and how far its predictions drift from a reference.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "command.h"
#include "flags.h"
#include "gemlet/tools.hpp"

namespace gemlet::cli {
namespace {

int RunEval(int argc, char** argv) {
  CLI::App app{"Perplexity over a text (llama-perplexity's windows: BOS first, the second half of each window\n"
               "scored) and, with --ref, the KL divergence / top-1 agreement / logit change against a reference model"};
  app.name("gemlet eval");
  std::string model, text_path, ref;
  int ctx = 512, threads = 0, chunks = 0;
  bool json = false, all = false;
  AddModelFileFlag(app, model, "the GGUF model to evaluate")->check(CLI::ExistingFile);
  app.add_option("--text", text_path, "a UTF-8 text file")->required()->check(CLI::ExistingFile);
  app.add_option("--ref", ref, "reference model (e.g. the F16 original) to compare next-token distributions with")
      ->check(CLI::ExistingFile);
  AddContextFlag(app, ctx)->description("tokens per window (default 512)")->check(CLI::Range(2, 1 << 20));
  app.add_option("--chunks", chunks, "evaluate at most this many windows (default: all)")->check(NonNegative());
  std::string kv_type = kDefaultKvType, ref_kv_type = kDefaultKvType;
  AddKvTypeFlag(app, kv_type, "the model's KV cache: f16, q8_0, q4_0 or f32 (with --ref the same file: what a "
                "cheaper cache costs)");
  AddKvTypeFlag(app, ref_kv_type, "the reference's KV cache (default f16)", "--ref-kv-type");
  app.add_flag("--all", all, "score every token of a window after its BOS, not only the second half");
  app.add_flag("--json", json, "print one JSON object instead of text");
  AddThreadsFlag(app, threads);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;

  std::ifstream in(text_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return Fail("cannot read '" + text_path + "'");

  tools::EvalOptions options;
  options.model_path = model;
  options.ref_model_path = ref;
  options.text = text.str();
  options.n_ctx = ctx;
  options.score_all = all;
  options.max_chunks = chunks;
  options.n_threads = threads;
  options.kv_type = kv_type;
  options.ref_kv_type = ref_kv_type;
  const bool bar = ::isatty(::fileno(stderr));
  if (bar) options.progress = [](int c, int n) { std::fprintf(stderr, "\rwindow %d/%d", c + 1, n); };
  auto result = tools::Eval(options);
  if (bar) std::fprintf(stderr, "\r%30s\r", "");
  if (!result.ok()) return Fail(result.status());
  const tools::EvalReport& r = *result;

  if (json) {
    nlohmann::json j;
    j["model"] = model;
    j["ref_model"] = ref.empty() ? nlohmann::json() : nlohmann::json(ref);
    j["n_ctx"] = r.n_ctx;
    j["n_chunks"] = r.n_chunks;
    j["n_text_tokens"] = r.n_text_tokens;
    j["n_tokens"] = r.n_tokens;
    j["scored"] = all ? "all" : "second_half";
    j["nll_mean"] = r.nll_mean;
    j["ppl"] = r.ppl;
    j["ppl_stderr"] = r.ppl_stderr;
    auto ref_value = [&](double v) { return r.has_ref ? nlohmann::json(v) : nlohmann::json(); };
    j["ref_ppl"] = ref_value(r.ref_ppl);
    j["kld_mean"] = ref_value(r.kld_mean);
    j["kld_median"] = ref_value(r.kld_median);
    j["kld_p99"] = ref_value(r.kld_p99);
    j["kld_max"] = ref_value(r.kld_max);
    j["top1_agree"] = ref_value(r.top1_agree);
    j["max_abs_dlogit"] = ref_value(r.max_abs_dlogit);
    j["rms_dlogit"] = ref_value(r.rms_dlogit);
    j["seconds"] = r.seconds;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s: %lld tokens scored in %d window(s) of %d (%s), %.1f s\n", model.c_str(),
              static_cast<long long>(r.n_tokens), r.n_chunks, r.n_ctx, all ? "all tokens" : "second halves", r.seconds);
  std::printf("  perplexity        %.4f +/- %.4f\n", r.ppl, r.ppl_stderr);
  if (r.has_ref) {
    std::printf("  reference ppl     %.4f  (%s)\n", r.ref_ppl, ref.c_str());
    std::printf("  KL divergence     mean %.6f  median %.6f  p99 %.6f  max %.6f\n", r.kld_mean, r.kld_median, r.kld_p99,
                r.kld_max);
    std::printf("  top-1 agreement   %.2f%%\n", 100.0 * r.top1_agree);
    std::printf("  |delta logit|     max %.4f  rms %.4f\n", r.max_abs_dlogit, r.rms_dlogit);
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("eval", "perplexity on a text, and KL divergence / top-1 agreement against a reference model", RunEval);

}  // namespace gemlet::cli

// `gemlet quantize`: re-encode a GGUF model's weights in one of llama-quantize's file types.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "command.h"
#include "flags.h"
#include "gemlet/tools.hpp"

namespace gemlet::cli {
namespace {

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// A one-line bar redrawn in place; only used when stderr is a terminal.
class ProgressBar {
 public:
  void Update(uint64_t done, uint64_t total) {
    const int percent = total ? static_cast<int>(done * 100 / total) : 100;
    if (percent == last_) return;
    last_ = percent;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r[%.*s%*s] %3d%%", filled, "########################################", kWidth - filled, "",
                 percent);
    std::fflush(stderr);
  }
  void Finish() {
    if (last_ >= 0) std::fprintf(stderr, "\r%*s\r", kWidth + 8, "");
  }

 private:
  static constexpr int kWidth = 40;
  int last_ = -1;
};

std::string ShapeText(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

int RunQuantize(int argc, char** argv) {
  std::string types_help = "file type:";
  for (const tools::FileTypeDescription& t : tools::FileTypes()) types_help += "\n  " + t.name + ": " + t.description;
  types_help += "\n  (Q3_K, Q4_K, Q5_K are aliases of the _M mixes)";

  CLI::App app{"Quantize a GGUF model (F32/F16/BF16 weights) with llama-quantize's per-tensor type mixes"};
  app.name("gemlet quantize");
  tools::QuantizeOptions options;
  bool verbose = false;
  app.add_option("input", options.input_path, "the GGUF model to quantize")->required()->check(CLI::ExistingFile);
  app.add_option("output", options.output_path, "the GGUF file to write")->required();
  app.add_option("type", options.type, types_help)->required();
  AddThreadsFlag(app, options.n_threads);
  app.add_flag("--pure", options.pure, "no mix: every quantizable tensor gets the base type (row-length fallbacks still apply)");
  app.add_flag("--allow-requantize", options.allow_requantize, "accept already-quantized tensors in the input");
  app.add_option("--token-embedding-type", options.token_embedding_type,
                 "type of token_embd and per_layer_token_embd (default: the mix's, Q6_K for most types)");
  app.add_option("--tensor-type", options.tensor_types,
                 "as llama-quantize: REGEX=TYPE gives the tensors whose names the regex matches that type, before "
                 "the mix's rules (e.g. 'blk\\.[0-3]\\.ffn_.*=Q8_0'; repeatable, the first match wins)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--override-kv", options.overrides,
                 "set a metadata key in the output, as llama-quantize: KEY=TYPE:VALUE, TYPE int, float, bool or "
                 "str (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--dry-run", options.dry_run, "print the type each tensor would get and the sizes, write nothing");
  app.add_flag("-v,--verbose", verbose, "print one line per tensor");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;

  const bool dry_run = options.dry_run;
  const std::string& output = options.output_path;
  if (verbose) {
    options.warn = [](const std::string& line) { std::fprintf(stderr, "gemlet: warning: %s\n", line.c_str()); };
  }
  ProgressBar bar;
  if (::isatty(::fileno(stderr)) && !dry_run) {
    options.progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
  }

  auto report = tools::Quantize(options);
  bar.Finish();
  if (!report.ok()) return Fail(report.status());
  const tools::QuantizeReport& r = *report;

  std::map<std::string, std::pair<int, uint64_t>> by_type;  // type -> (tensors, bytes)
  for (const tools::QuantizedTensor& t : r.tensors) {
    auto& entry = by_type[t.to];
    entry.first += 1;
    entry.second += t.bytes_out;
    if (verbose || dry_run) {
      std::printf("%-40s %-22s %5s -> %-5s %9.3f MiB%s\n", t.name.c_str(), ShapeText(t.shape).c_str(), t.from.c_str(),
                  t.to.c_str(), MiB(t.bytes_out), t.fallback ? "  (fallback)" : "");
    }
  }
  const double n = static_cast<double>(r.n_elements);
  std::printf("%s %s: %zu tensors, %.2f MiB (%.2f bpw) -> %.2f MiB (%.2f bpw)", dry_run ? "would write" : "wrote",
              output.c_str(), r.tensors.size(), MiB(r.bytes_in), n ? r.bytes_in * 8.0 / n : 0.0, MiB(r.bytes_out),
              n ? r.bytes_out * 8.0 / n : 0.0);
  if (!dry_run) std::printf(" in %.2f s (%.1f MiB/s of input)", r.seconds, r.seconds > 0 ? MiB(r.bytes_in) / r.seconds : 0.0);
  std::printf("\n  types:");
  for (const auto& [name, entry] : by_type) std::printf(" %s %d (%.2f MiB)", name.c_str(), entry.first, MiB(entry.second));
  std::printf("\n");
  if (r.n_fallback > 0) std::printf("  %d tensor(s) needed a fallback type for their row length\n", r.n_fallback);
  return 0;
}

}  // namespace

GEMLET_COMMAND("quantize", "quantize a GGUF model (Q8_0, Q4_K_M, ... with llama.cpp's per-tensor mixes)", RunQuantize);

}  // namespace gemlet::cli

// `gemlet synth`: a GGUF with a released Gemma's real shapes, metadata and vocabulary, random weights.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "command.h"
#include "flags.h"
#include "gemlet/tools.hpp"

namespace gemlet::cli {
namespace {

int WriteScripted(const std::string& script, const tools::SynthOptions& synth) {
  auto options = tools::ReadModelScript(script);
  if (!options.ok()) return Fail(options.status());
  options->tokenizer = synth.tokenizer;
  options->output_path = synth.output_path;
  auto report = tools::WriteScriptedModel(*options);
  if (!report.ok()) return Fail(report.status());
  std::string lengths;
  for (int32_t n : report->answer_tokens) lengths += (lengths.empty() ? "" : ", ") + std::to_string(n);
  std::printf("wrote %s: a scripted test model, vocab %d, %zu cues, %zu answers of %s tokens\n", synth.output_path.c_str(),
              report->n_vocab, report->n_cues, report->answer_tokens.size(), lengths.c_str());
  return 0;
}

int RunSynth(int argc, char** argv) {
  std::string presets_help = "model to imitate:";
  for (const tools::SynthPreset& p : tools::SynthPresets()) presets_help += "\n  " + p.name + ": " + p.description;

  CLI::App app{"Write a GGUF with the dimensions, metadata and vocabulary of a released Gemma and random weights\n"
               "(N(0,1)/sqrt(fan_in) matrices, norms near 1), generated row by row and quantized on the fly"};
  app.name("gemlet synth");
  tools::SynthOptions options;
  std::string script;
  auto* preset = app.add_option("--preset", options.preset, presets_help);
  app.add_option("--script", script,
                 "instead of a preset: a test model that plays back the answers of this JSON file, "
                 "{\"answers\": [...], \"cues\": [...]} (see docs/server.md), with --tokenizer's vocabulary")
      ->excludes(preset);
  app.add_option("--type", options.type, "F32, F16 (default), BF16, or a quantize type such as Q4_K_M");
  app.add_option("--tokenizer", options.tokenizer,
                 "tokenizer.json[.xz], a GGUF to copy tokenizer.* from, or 'none' for placeholder tokens "
                 "(required but for the tiny presets, which default to none; e.g. Gemma 3's tokenizer.json, or Gemma 4's "
                 "ggml-vocab-gemma-4.gguf for gemma4 presets)");
  app.add_option("--seed", options.seed, "random seed (the same seed gives the same weights at any thread count)");
  app.add_option("--layers", options.n_layers, "keep only the first N layers (KV-shared layers scale along)")->check(Positive());
  app.add_option("--distinct-rows", options.distinct_rows,
                 "encode only each tensor's first N rows and repeat them for the rest: the real shapes and types "
                 "of a 12-26 B model in minutes, for speed measurements only")
      ->check(Positive());
  AddThreadsFlag(app, options.n_threads);
  app.add_option("-o,--output", options.output_path, "the GGUF file to write")->required();
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (!script.empty()) return WriteScripted(script, options);
  if (options.preset.empty()) return UsageError("synth: --preset (or --script) is required");

  int last = -1;
  if (::isatty(::fileno(stderr))) {
    options.progress = [&last](uint64_t done, uint64_t total) {
      const int percent = total ? static_cast<int>(done * 100 / total) : 100;
      if (percent != last) std::fprintf(stderr, "\rgenerating %3d%%", percent);
      last = percent;
    };
  }
  auto report = tools::Synth(options);
  if (last >= 0) std::fprintf(stderr, "\r%20s\r", "");
  if (!report.ok()) return Fail(report.status());
  const tools::SynthReport& r = *report;
  std::printf("wrote %s: %s (%s), %zu tensors, %.1fM parameters, vocab %d, %.2f MiB in %.2f s\n",
              options.output_path.c_str(), options.preset.c_str(), r.arch.c_str(), r.n_tensors, static_cast<double>(r.n_elements) / 1e6, r.n_vocab,
              static_cast<double>(r.bytes) / (1024.0 * 1024.0), r.seconds);
  return 0;
}

}  // namespace

GEMLET_COMMAND("synth", "write a random-weight GGUF with a released Gemma's real shapes and vocabulary", RunSynth);

}  // namespace gemlet::cli

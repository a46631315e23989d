// `gemlet convert HF_DIR -o OUT.gguf [--outtype f32|f16|bf16] [--tokenizer FILE] [--mmproj-out MMPROJ.gguf]`: a HuggingFace Gemma
// checkpoint to GGUF; with --mmproj-out and no -o, only a multimodal checkpoint's towers.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "command.h"
#include "gemlet/tools.hpp"

namespace gemlet::cli {
namespace {

int RunConvert(int argc, char** argv) {
  CLI::App app{"Convert a HuggingFace Gemma checkpoint folder (config.json + safetensors) to GGUF, with\n"
               "llama.cpp's tensor names and metadata keys.",
               "gemlet convert"};
  tools::ConvertOptions options;
  app.add_option("hf_dir", options.hf_dir, "the checkpoint folder")->required();
  app.add_option("-o,--output", options.output_path,
                 "the GGUF file to write (may be left out with --mmproj-out: only the towers are written)");
  app.add_option("--outtype", options.outtype,
                 "f32, f16 or bf16 for the weight matrices (default: the checkpoint's own type); "
                 "norms and other small tensors stay f32");
  app.add_option("--weights", options.weights_path,
                 "a .safetensors file or model.safetensors.index.json to use instead of the folder's");
  app.add_option("--tokenizer", options.tokenizer_path,
                 "a tokenizer.json or SentencePiece tokenizer.model to take the vocabulary from (default: the "
                 "folder's tokenizer.json, else its tokenizer.model); tokenizer_config.json still comes from the folder");
  app.add_option("--name", options.model_name, "general.name (default: the folder's name)");
  app.add_option("--mmproj-out", options.mmproj_output_path,
                 "also write the vision and audio towers of a multimodal checkpoint to this llama.cpp mmproj GGUF "
                 "(Gemma3ForConditionalGeneration, Gemma4ForConditionalGeneration, Gemma 3n's audio)");
  app.add_option("--mmproj-type", options.mmproj_outtype,
                 "f32, f16, bf16 or q8_0 for the mmproj's matrices (default: --outtype's)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  bool progress_shown = false;
  if (tty) {
    options.progress = [&](size_t i, size_t n, const std::string& name) {
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", i + 1, n, name.c_str());
      std::fflush(stderr);
      progress_shown = true;
    };
  }
  options.warn = [&](const std::string& message) { std::fprintf(stderr, "gemlet: warning: %s\n", message.c_str()); };

  if (options.output_path.empty() && options.mmproj_output_path.empty()) {
    return UsageError("-o FILE is required (or --mmproj-out FILE alone for a multimodal checkpoint's towers)");
  }
  Result<tools::ConvertReport> result = tools::Convert(options);
  if (progress_shown) std::fprintf(stderr, "\r\033[K");
  if (!result.ok()) return Fail(result.status());
  if (tty) {
    if (!options.output_path.empty()) {
      std::fprintf(stderr, "wrote %s: %s, %zu tensors, %s\n", options.output_path.c_str(), result->arch.c_str(),
                   result->n_tensors, result->outtype.c_str());
    }
    if (!result->mmproj_projector.empty()) {
      std::fprintf(stderr, "wrote %s: %s projector, %zu tensors\n", options.mmproj_output_path.c_str(),
                   result->mmproj_projector.c_str(), result->mmproj_tensors);
    }
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("convert", "convert a HuggingFace Gemma checkpoint folder to GGUF", RunConvert);

}  // namespace gemlet::cli

// `gemlet convert-lora` (a PEFT folder to a GGUF adapter) and `gemlet lora merge` (adapters folded
// into a base model's weights).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "cli_common.h"
#include "command.h"
#include "flags.h"
#include "gemlet/tools.hpp"

namespace gemlet::cli {
namespace {

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int RunConvertLora(int argc, char** argv) {
  CLI::App app{"Convert a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) to a GGUF "
               "adapter in llama.cpp's format, for `--lora` in run, chat, serve and the tasks"};
  app.name("gemlet convert-lora");
  tools::ConvertLoraOptions o;
  app.add_option("peft_dir", o.peft_dir, "the PEFT adapter folder")->required();
  app.add_option("-o,--output", o.output_path, "the GGUF adapter to write")->required();
  app.add_option("--base", o.base,
                 "the base model: a GGUF file (its tensors' shapes are checked) or an HF folder with config.json")
      ->required();
  app.add_option("--outtype", o.outtype, "f32, f16, bf16 or q8_0 (q8_0 rows that are not a multiple of 32 long: f16)")
      ->capture_default_str();
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  auto r = tools::ConvertLora(o);
  if (!r.ok()) return Fail(r.status());
  std::printf("wrote %s: %s LoRA, %d projections, rank %d, alpha %g%s, %.2f MiB\n", o.output_path.c_str(),
              r->architecture.c_str(), r->pairs, r->rank, static_cast<double>(r->alpha),
              r->rslora ? " (rsLoRA: alpha * sqrt(r) written)" : "", MiB(r->bytes_out));
  return 0;
}

int RunLora(int argc, char** argv) {
  CLI::App app{"LoRA adapters: `gemlet lora merge BASE.gguf A.gguf[:SCALE]... -o MERGED.gguf` writes the base with "
               "the adapters folded into its weights (run, chat and serve apply them unmerged with --lora); "
               "`gemlet lora synth BASE.gguf -o A.gguf` writes a random adapter of its shapes"};
  app.name("gemlet lora");
  app.require_subcommand(1);
  CLI::App* merge = app.add_subcommand("merge", "fold adapters into a base model's weights");
  tools::MergeLoraOptions o;
  std::vector<std::string> specs;
  merge->add_option("base", o.base_path, "the base GGUF model")->required();
  merge->add_option("adapters", specs, "GGUF adapters, each FILE or FILE:SCALE, added in order")->required();
  merge->add_option("-o,--output", o.output_path, "the merged GGUF to write")->required();
  merge->add_option("--outtype", o.merged_type,
                    "the merged matrices' type: f32, f16 or bf16 (default: each one's own, quantized again)");
  AddThreadsFlag(*merge, o.n_threads);
  CLI::App* synth = app.add_subcommand("synth", "a random adapter of a base's shapes (for benchmarks)");
  tools::SynthLoraOptions so;
  synth->add_option("base", so.base_path, "the base GGUF model")->required();
  synth->add_option("-o,--output", so.output_path, "the GGUF adapter to write")->required();
  synth->add_option("--rank", so.rank, "rank")->capture_default_str()->check(Positive());
  synth->add_option("--alpha", so.alpha, "adapter.lora.alpha")->capture_default_str();
  synth->add_option("--type", so.type, "f32, f16, bf16 or q8_0")->capture_default_str();
  synth->add_option("--targets", so.targets, "projections (attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down; default all)")
      ->delimiter(',');
  synth->add_option("--seed", so.seed, "random seed")->capture_default_str();
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (synth->parsed()) {
    auto r = tools::SynthLora(so);
    if (!r.ok()) return Fail(r.status());
    std::printf("wrote %s: rank %d on %d projections, %.2f MiB\n", so.output_path.c_str(), so.rank, r->pairs, MiB(r->bytes_out));
    return 0;
  }
  for (const std::string& spec : specs) {
    Result<LoraSpec> use = ParseLoraSpec(spec);
    if (!use.ok()) return UsageError(use.message());
    o.adapters.emplace_back(use->path, use->scale);
  }
  auto r = tools::MergeLora(o);
  if (!r.ok()) return Fail(r.status());
  std::printf("wrote %s: %d matrices merged, %d copied, %.2f MiB in %.2f s\n", o.output_path.c_str(), r->tensors_merged,
              r->tensors_copied, MiB(r->bytes_out), r->seconds);
  return 0;
}

}  // namespace

GEMLET_COMMAND("convert-lora", "convert a PEFT LoRA adapter folder to a GGUF adapter", RunConvertLora);
GEMLET_COMMAND("lora", "LoRA adapters: merge them into a base model, or make a random one", RunLora);

}  // namespace gemlet::cli

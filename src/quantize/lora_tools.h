// LoRA tools: `gemlet lora merge` (a base GGUF with adapters folded into its weights, W' = W + sum
// s * B A, each merged matrix in its own type, quantized ones quantized again) and `gemlet lora
// synth` (a random adapter of the base's shapes, for benchmarks, as `gemlet synth` makes models).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace gemlet {

struct LoraMergeOptions {
  std::string base_path;
  std::string output_path;
  struct Use {
    std::string path;
    float scale = 1.0f;
  };
  std::vector<Use> adapters;  // added in this order
  // The merged matrices' type: none keeps each one's own (a quantized one is quantized again, so
  // the merge rounds as the base's quantization did); F32/F16/BF16 write them in that float type.
  std::optional<DType> merged_type;
  int n_threads = 0;  // 0: every hardware thread
};

struct LoraMergeReport {
  int tensors_merged = 0;   // base matrices that changed
  int tensors_copied = 0;   // the rest, byte for byte
  uint64_t bytes_out = 0;
  double seconds = 0;
};

// Checks every adapter against the base as loading it for a run would (architecture, names,
// shapes), then writes the merged file through a temporary name.
Result<LoraMergeReport> MergeLora(const LoraMergeOptions& options);

struct LoraSynthOptions {
  std::string base_path;
  std::string output_path;
  int rank = 16;
  float alpha = 32.0f;
  DType type = DType::kF16;  // F32, F16, BF16 or Q8_0 (Q8_0 where a row's length allows it, else F16)
  // Projections to adapt (LoraTargetName's names); empty: every attention and MLP projection.
  std::vector<std::string> targets;
  uint64_t seed = 1;
};

struct LoraSynthReport {
  int pairs = 0;
  uint64_t bytes_out = 0;
};

// A random adapter for the base: A ~ N(0, 1/n_in), B ~ N(0, 1/(400 r)), on every targeted
// projection of every layer the base has (a trained adapter's size, not its skill).
Result<LoraSynthReport> SynthLora(const LoraSynthOptions& options);

}  // namespace gemlet

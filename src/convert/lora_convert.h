// `gemlet convert-lora`: a PEFT LoRA folder (adapter_config.json + adapter_model.safetensors) to a
// GGUF adapter in llama.cpp's format (what its convert_lora_to_gguf.py writes), for Gemma bases.
#pragma once

#include <string>

#include "base/status.h"
#include "tensor/dtype.h"

namespace gemlet {

struct LoraConvertOptions {
  std::string peft_dir;
  std::string output_path;
  // The base the adapter was trained on: a GGUF model (its architecture, name and tensor shapes are
  // checked) or an HF folder with config.json (its architecture).
  std::string base;
  DType outtype = DType::kF32;  // F32, F16, BF16 or Q8_0 (Q8_0 where a row's length allows it, else F16)
};

struct LoraConvertReport {
  std::string architecture;
  int pairs = 0;       // adapted projections
  int rank = 0;        // the largest
  float alpha = 0;     // written as adapter.lora.alpha (0: none written, the scales are in B)
  bool rslora = false;
  uint64_t bytes_out = 0;
};

Result<LoraConvertReport> ConvertLora(const LoraConvertOptions& options);

}  // namespace gemlet

// ConvertHfToGguf: a HuggingFace Gemma checkpoint folder -> one GGUF file, streamed tensor by tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "tensor/dtype.h"

namespace gemlet {

struct ConvertOptions {
  std::string hf_dir;       // config.json + *.safetensors (+ tokenizer.json or tokenizer.model)
  std::string output_path;  // written through a temporary file: nothing appears here on failure
  // F32, F16 or BF16 for the large matrices (norms and other small tensors stay F32, as in llama.cpp).
  // Default: the checkpoint's own float type (f32 stays f32, bf16 stays bf16, f16 stays f16), so the
  // default conversion is lossless. (llama.cpp's "auto" differs only for f32 checkpoints: it picks f16.)
  std::optional<DType> outtype;
  // A .safetensors file or model.safetensors.index.json to read instead of the folder's own weights.
  std::string weights_path;
  // A tokenizer.json or SentencePiece tokenizer.model to use instead of the folder's own (whose
  // tokenizer.json is preferred, then tokenizer.model); hf_dir still supplies tokenizer_config.json.
  std::string tokenizer_path;
  std::string model_name;  // general.name; default: the folder's name
  // Called before each tensor is produced: (index, count, GGUF name).
  std::function<void(size_t, size_t, const std::string&)> progress;
  // One-line warnings (the CLI prints them to stderr).
  std::function<void(const std::string&)> warn;
};

struct ConvertResult {
  std::string arch;
  DType outtype = DType::kF32;
  size_t n_tensors = 0;
  bool placeholder_vocab = false;  // no tokenizer.json or tokenizer.model: the stand-in vocabulary was written
  std::string tokenizer_source;    // the file the vocabulary came from; empty with the placeholder
};

Result<ConvertResult> ConvertHfToGguf(const ConvertOptions& options);

// "f32", "f16", "bf16" (any case) -> the type; anything else is an error that lists the choices.
Result<DType> ParseOutType(const std::string& name);

// general.file_type for an output type (llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32).
uint32_t FileTypeOf(DType outtype);

}  // namespace gemlet

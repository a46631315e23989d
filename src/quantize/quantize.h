// QuantizeGguf: a GGUF model -> the same model in llama-quantize's per-tensor types, streamed tensor by
// tensor through the GGUF writer; plus the parallel row encoder that `synth` shares.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "quantize/quant_mix.h"

namespace gemlet {

// GGML_QNT_VERSION: the block layouts' version, written as general.quantization_version.
constexpr uint32_t kQuantizationVersion = 2;

// A metadata key set in the output, as llama-quantize's --override-kv KEY=TYPE:VALUE
// (TYPE: int, float, bool or str; e.g. general.description=str:A tiny demo model).
struct MetadataOverride {
  std::string key;
  GgufType type = GgufType::kString;
  std::string text;  // str
  int64_t i = 0;     // int
  double f = 0;      // float
  bool b = false;    // bool
};
Result<MetadataOverride> ParseMetadataOverride(const std::string& spec);

struct QuantizeOptions {
  std::string input_path;
  std::string output_path;  // written through a temporary file: nothing appears here on failure
  FileType ftype = FileType::kQ8_0;
  bool pure = false;              // no mix: every quantizable tensor gets the base type
  bool allow_requantize = false;  // accept already-quantized input tensors (quality suffers)
  bool dry_run = false;           // choose the types and report sizes, write nothing
  std::optional<DType> token_embedding_type;  // override for token_embd / per_layer_token_embd
  std::vector<std::pair<std::string, DType>> tensor_types;  // MixOptions::tensor_types (--tensor-type)
  std::vector<MetadataOverride> overrides;  // set after the input's metadata is copied
  int n_threads = 0;              // 0: all hardware threads
  // Elements converted so far and in all; called from the writing thread only.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // One line per fallback or other notable decision.
  std::function<void(const std::string&)> warn;
};

struct QuantizedTensor {
  std::string name;
  std::vector<int64_t> ne;
  DType from = DType::kF32;
  DType to = DType::kF32;
  size_t bytes_in = 0;
  size_t bytes_out = 0;
  bool fallback = false;
};

struct QuantizeReport {
  std::vector<QuantizedTensor> tensors;  // in the order written (llama-quantize's)
  uint64_t bytes_in = 0, bytes_out = 0, n_elements = 0;
  int n_fallback = 0;
  double seconds = 0;
};

Result<QuantizeReport> QuantizeGguf(const QuantizeOptions& options);

// The facts the mix rules need, from {arch}.block_count, .attention.head_count(_kv), .expert_count.
// Missing keys read as 0 (the rules then treat the model as one without GQA or experts).
Result<MixModel> MixModelFromGguf(const GgufFile& file);

// Fills `out` (ne0 floats) with row `row`; called concurrently from the pool's threads.
using RowSource = std::function<void(int64_t row, float* out)>;

// Converts n_rows rows of ne0 values to `type` on `pool` and pushes them into `sink` in order, a slab of
// a few MiB at a time (memory stays bounded whatever the tensor's size). `on_rows(k)` is called after
// each slab with the number of rows it held.
Status EncodeRows(DType type, int64_t ne0, int64_t n_rows, const RowSource& source, ThreadPool& pool, ByteSink& sink,
                  const std::function<void(int64_t)>& on_rows = nullptr);

}  // namespace gemlet

// Quantization mixes: the file types llama-quantize offers and its per-tensor type choices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace gemlet {

// llama.cpp's llama_ftype: the value written to general.file_type. Never renumber.
enum class FileType : uint32_t {
  kAllF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kBF16 = 32,
};

struct FileTypeInfo {
  FileType ftype;
  const char* name;         // as llama-quantize spells it: "Q4_K_M"
  DType base;               // the type most tensors get
  const char* description;  // one line for --help
};

// Every supported file type, in llama-quantize's listing order.
const std::vector<FileTypeInfo>& FileTypes();
const FileTypeInfo& GetFileTypeInfo(FileType ftype);
// "q4_k_m", "Q4_K_M", and llama-quantize's aliases Q3_K / Q4_K / Q5_K (= the _M mixes). False if unknown.
bool ParseFileType(std::string_view name, FileType* out);
// "Q2_K, Q3_K_S, ..." for error messages.
std::string FileTypeNames();

// What the mix rules read from the model.
struct MixModel {
  int n_layer = 0;    // {arch}.block_count: the ffn_down rules' layer count
  int n_head = 0;     // attention heads of layer 0 ...
  int n_head_kv = 0;  // ... and its KV heads: n_gqa(), which Q2_K's attn_v rule reads
  int n_expert = 0;   // {arch}.expert_count; 8 experts raise attn_v / attn_k / attn_output
  int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 0; }
};

struct MixTensor {
  std::string name;
  DType type = DType::kF32;  // as stored in the input
  std::vector<int64_t> ne;   // GGUF order: ne[0] is the row length
};

struct MixOptions {
  FileType ftype = FileType::kQ8_0;
  bool pure = false;  // every quantizable tensor gets the base type (shape fallbacks still apply)
  // llama-quantize's --token-embedding-type: the type of token_embd and per_layer_token_embd (Gemma
  // 3n/4's per-layer table is as large as the rest of an E2B model; llama.cpp's mix gives it Q6_K).
  std::optional<DType> token_embedding_type;
  // llama-quantize's --tensor-type: a tensor whose name a pattern matches (std::regex_search, the
  // first that matches) gets its type, before every other rule. Patterns must be valid ECMAScript.
  std::vector<std::pair<std::string, DType>> tensor_types;
};

struct MixDecision {
  DType type = DType::kF32;
  bool quantizable = false;  // llama.cpp would convert it at all (2-D+ weights that are not norms...)
  bool fallback = false;     // the row length did not fit the chosen block type
  std::string note;          // why a fallback happened, for the log
};

// llama-quantize's choice (llama_tensor_get_type) for every tensor, in the order given. The rules
// count attn_v / ffn_* tensors as they go, so they are applied in llama.cpp's own tensor order
// (LlamaTensorLess) whatever the order of `tensors`. IQ types and imatrix-only rules are left out.
std::vector<MixDecision> ChooseTensorTypes(const MixModel& model, const std::vector<MixTensor>& tensors,
                                           const MixOptions& options);

// The order in which llama-quantize reads and writes tensors: non-layer tensors by name first, then
// by layer number ("blk.N."), then by name.
bool LlamaTensorLess(std::string_view a, std::string_view b);

// llama.cpp's tensor_allows_quantization: 2-D or larger, named *weight, not a norm, router, AltUp,
// LAuReL or per_layer_model_proj tensor.
bool TensorAllowsQuantization(std::string_view name, const std::vector<int64_t>& ne);

// ggml_n_dims: the dimensions up to the last one larger than 1 (at least 1).
int EffectiveDims(const std::vector<int64_t>& ne);

}  // namespace gemlet

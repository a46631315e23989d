// Synthetic Gemma models: presets (HF config.json of released models) -> the converter's metadata,
// llama.cpp's tensor names and shapes, and random weights generated per row inside each producer.
#include "quantize/synth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/half.h"
#include "base/json_input.h"
#include "convert/gguf_metadata.h"
#include "convert/hf_config.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "quantize/quantize.h"
#include "runtime/session.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace gemlet {

namespace {

namespace fs = std::filesystem;

// Sources of the dimensions (no network here; from the published HF config.json files as we know them):
// * Gemma 2 2B/9B/27B: google/gemma-2-{2b,9b,27b} config.json (hidden, intermediate, layers, heads,
//   kv heads, head_dim, query_pre_attn_scalar 256/256/144, softcaps 50/30, sliding_window 4096, vocab 256000).
// * Gemma 3 1B: google/gemma-3-1b-pt config.json (gemma3_text, vocab 262144, sliding 512, no rope scaling).
// * Gemma 3 4B/12B/27B: text_config of google/gemma-3-{4b,12b,27b}-pt (vocab 262208, sliding 1024,
//   linear rope scaling 8 on global layers, query_pre_attn_scalar 256/256/168).
// * Gemma 4 E2B/E4B: shared/testdata/hf/ARCHITECTURES.md (35 layers / kv 1 / 20 KV-shared; 42 layers /
//   kv 2 / 18 KV-shared, double-wide MLP), and llama.cpp's gemma4 code, whose KV-sharing rule assumes the
//   last non-shared layers are [sliding, full]: that holds for E2B with a 4:1 pattern (period 5) and for
//   E4B with 5:1 (period 6). Head dims 256 / global 512, PLE 256, sliding 512, vocab 262144 as in
//   Gemma4TextConfig. The MLP widths (E2B 6144, E4B 10240) are our best recollection, not verified.
// * Gemma 4 26B-A4B: the metadata llama.cpp's converter wrote into shared/testdata/tokenizer/gemma4/
//   ggml-vocab-gemma-4.gguf (hidden 2816, ffn 2112, 30 layers, 16 heads, kv 8 / global 2 with K=V,
//   128 experts top-8 of width 704, sliding 1024, head dims 256 / 512).
constexpr char kGemma2_2B[] = R"({"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216,
  "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
  "vocab_size": 256000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 256,
  "sliding_window": 4096, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
constexpr char kGemma2_9B[] = R"({"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
  "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
  "vocab_size": 256000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 256,
  "sliding_window": 4096, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
constexpr char kGemma2_27B[] = R"({"model_type": "gemma2", "hidden_size": 4608, "intermediate_size": 36864,
  "num_hidden_layers": 46, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
  "vocab_size": 256000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 144,
  "sliding_window": 4096, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
constexpr char kGemma3_1B[] = R"({"model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912,
  "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
  "vocab_size": 262144, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "rope_local_base_freq": 10000.0, "rope_scaling": null, "query_pre_attn_scalar": 256, "sliding_window": 512,
  "sliding_window_pattern": 6, "attn_logit_softcapping": null, "final_logit_softcapping": null,
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
constexpr char kGemma3_4B[] = R"({"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
  "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
  "vocab_size": 262208, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
  "query_pre_attn_scalar": 256, "sliding_window": 1024, "sliding_window_pattern": 6,
  "attn_logit_softcapping": null, "final_logit_softcapping": null, "hidden_activation": "gelu_pytorch_tanh"})";
constexpr char kGemma3_12B[] = R"({"model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360,
  "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
  "vocab_size": 262208, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
  "query_pre_attn_scalar": 256, "sliding_window": 1024, "sliding_window_pattern": 6,
  "attn_logit_softcapping": null, "final_logit_softcapping": null, "hidden_activation": "gelu_pytorch_tanh"})";
constexpr char kGemma3_27B[] = R"({"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
  "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
  "vocab_size": 262208, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
  "query_pre_attn_scalar": 168, "sliding_window": 1024, "sliding_window_pattern": 6,
  "attn_logit_softcapping": null, "final_logit_softcapping": null, "hidden_activation": "gelu_pytorch_tanh"})";
constexpr char kGemma4_E2B[] = R"({"model_type": "gemma4_text", "hidden_size": 1536, "intermediate_size": 6144,
  "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
  "global_head_dim": 512, "hidden_size_per_layer_input": 256, "vocab_size": 262144,
  "vocab_size_per_layer_input": 262144, "num_kv_shared_layers": 20, "use_double_wide_mlp": true,
  "attention_k_eq_v": false, "enable_moe_block": false, "sliding_window": 512, "layer_pattern_period": 5,
  "final_logit_softcapping": 30.0, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06,
  "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
constexpr char kGemma4_E4B[] = R"({"model_type": "gemma4_text", "hidden_size": 2560, "intermediate_size": 10240,
  "num_hidden_layers": 42, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
  "global_head_dim": 512, "hidden_size_per_layer_input": 256, "vocab_size": 262144,
  "vocab_size_per_layer_input": 262144, "num_kv_shared_layers": 18, "use_double_wide_mlp": true,
  "attention_k_eq_v": false, "enable_moe_block": false, "sliding_window": 512, "layer_pattern_period": 6,
  "final_logit_softcapping": 30.0, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06,
  "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
constexpr char kGemma4_26B_A4B[] = R"({"model_type": "gemma4_text", "hidden_size": 2816, "intermediate_size": 2112,
  "num_hidden_layers": 30, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
  "global_head_dim": 512, "num_global_key_value_heads": 2, "attention_k_eq_v": true,
  "hidden_size_per_layer_input": 0, "vocab_size": 262144, "num_kv_shared_layers": 0, "use_double_wide_mlp": false,
  "enable_moe_block": true, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
  "sliding_window": 1024, "layer_pattern_period": 6, "final_logit_softcapping": 30.0,
  "max_position_embeddings": 262144, "rms_norm_eps": 1e-06,
  "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
// The unified 12B: hidden, layers, heads and K=V from the hub config as third-party code reports it
// (shared/testdata/hf/ARCHITECTURES.md); the FFN width is not reported there: Gemma 3 12B's 15360.
constexpr char kGemma4_12B[] = R"({"model_type": "gemma4_unified_text", "hidden_size": 3840, "intermediate_size": 15360,
  "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
  "global_head_dim": 512, "num_global_key_value_heads": 1, "attention_k_eq_v": true,
  "hidden_size_per_layer_input": 0, "vocab_size": 262144, "num_kv_shared_layers": 0, "use_double_wide_mlp": false,
  "enable_moe_block": false, "sliding_window": 1024, "layer_pattern_period": 6, "final_logit_softcapping": 30.0,
  "max_position_embeddings": 262144, "rms_norm_eps": 1e-06, "use_bidirectional_attention": "vision",
  "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
// Test-sized models whose matrices all have rows of 256 (so the K types apply) and a 512-token vocabulary.
constexpr char kTinyGemma3[] = R"({"model_type": "gemma3_text", "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128,
  "vocab_size": 512, "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 128, "sliding_window": 16,
  "sliding_window_pattern": 4, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";
constexpr char kTinyGemma4[] = R"({"model_type": "gemma4_text", "hidden_size": 256, "intermediate_size": 512,
  "num_hidden_layers": 6, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128,
  "global_head_dim": 256, "hidden_size_per_layer_input": 128, "vocab_size": 512, "vocab_size_per_layer_input": 512,
  "num_kv_shared_layers": 2, "use_double_wide_mlp": true, "attention_k_eq_v": false, "enable_moe_block": false,
  "sliding_window": 16, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
  "full_attention", "sliding_attention", "full_attention"], "final_logit_softcapping": 30.0,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
  "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true})";

// Gemma 4's drafters (Gemma4AssistantForCausalLM). E2B's: google/gemma-4-E2B-it-assistant's config.json as
// published (hidden 256, ffn 2048, 4 layers s,s,s,f, 4 heads over E2B's 1 KV head, head dims 256 / 512,
// the ordered embedding of 2048 centroids, 32 per step, backbone 1536). The tiny one drafts for
// tiny-gemma4 (its KV heads, head sizes and window); rows of 128: Q8_0 applies, the K types do not.
constexpr char kGemma4_E2B_Assistant[] = R"({"model_type": "gemma4_assistant", "backbone_hidden_size": 1536,
  "use_ordered_embeddings": true, "num_centroids": 2048, "centroid_intermediate_top_k": 32, "tie_word_embeddings": true,
  "text_config": {"model_type": "gemma4_text", "hidden_size": 256, "intermediate_size": 2048, "num_hidden_layers": 4,
  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512,
  "hidden_size_per_layer_input": 0, "vocab_size": 262144, "vocab_size_per_layer_input": 0, "num_kv_shared_layers": 4,
  "use_double_wide_mlp": false, "attention_k_eq_v": false, "enable_moe_block": false, "sliding_window": 512,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
  "final_logit_softcapping": null, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06,
  "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true}})";
constexpr char kTinyGemma4_Assistant[] = R"({"model_type": "gemma4_assistant", "backbone_hidden_size": 256,
  "use_ordered_embeddings": true, "num_centroids": 16, "centroid_intermediate_top_k": 4, "tie_word_embeddings": true,
  "text_config": {"model_type": "gemma4_text", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 4,
  "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128, "global_head_dim": 256,
  "hidden_size_per_layer_input": 0, "vocab_size": 512, "vocab_size_per_layer_input": 0, "num_kv_shared_layers": 4,
  "use_double_wide_mlp": false, "attention_k_eq_v": false, "enable_moe_block": false, "sliding_window": 16,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
  "final_logit_softcapping": null, "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
  "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true}})";

const std::vector<SynthPreset> kPresets = {
    {"gemma2-2b", "Gemma 2 2B: 26 layers, hidden 2304, vocab 256000", kGemma2_2B, false},
    {"gemma2-9b", "Gemma 2 9B: 42 layers, hidden 3584", kGemma2_9B, false},
    {"gemma2-27b", "Gemma 2 27B: 46 layers, hidden 4608", kGemma2_27B, false},
    {"gemma3-1b", "Gemma 3 1B: 26 layers, hidden 1152, vocab 262144", kGemma3_1B, false},
    {"gemma3-4b", "Gemma 3 4B (text): 34 layers, hidden 2560, vocab 262208", kGemma3_4B, false},
    {"gemma3-12b", "Gemma 3 12B (text): 48 layers, hidden 3840", kGemma3_12B, false},
    {"gemma3-27b", "Gemma 3 27B (text): 62 layers, hidden 5376", kGemma3_27B, false},
    {"gemma4-e2b", "Gemma 4 E2B: 35 layers, hidden 1536, PLE, 20 KV-shared layers", kGemma4_E2B, false},
    {"gemma4-e4b", "Gemma 4 E4B: 42 layers, hidden 2560, PLE, 18 KV-shared layers", kGemma4_E4B, false},
    {"gemma4-26b-a4b", "Gemma 4 26B-A4B: 30 layers, 128 experts top-8, K=V global layers", kGemma4_26B_A4B, false},
    {"gemma4-12b", "Gemma 4 12B (unified text decoder): 48 layers, hidden 3840, K=V global layers (FFN width assumed 15360)",
     kGemma4_12B, false},
    {"tiny-gemma3", "test model: Gemma 3 layout, 4 layers, hidden 256, 512 tokens", kTinyGemma3, true},
    {"tiny-gemma4", "test model: Gemma 4 layout with PLE and KV sharing, 6 layers, hidden 256", kTinyGemma4, true},
    {"gemma4-e2b-assistant", "Gemma 4 E2B's drafter (--spec mtp): 4 layers, hidden 256, ordered embedding",
     kGemma4_E2B_Assistant, false},
    {"tiny-gemma4-assistant", "test drafter for tiny-gemma4 (--spec mtp): 4 layers, hidden 128", kTinyGemma4_Assistant, true},
};

// ---- counter-based random numbers: the value of (seed, tensor, row, column) never depends on threads ----

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t HashName(const std::string& s) {  // FNV-1a: a tensor keeps its stream whatever else the file holds
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// SplitMix64 seeded from (seed, tensor, row); Box-Muller pairs for the normals.
class RowRng {
 public:
  RowRng(uint64_t seed, uint64_t tensor, uint64_t row)
      : state_(Mix64(Mix64(seed + 0x9e3779b97f4a7c15ULL) ^ tensor) ^ Mix64(row * 0xd1b54a32d192ed03ULL + 1)) {}
  double Uniform() {  // in (0, 1)
    state_ += 0x9e3779b97f4a7c15ULL;
    return (static_cast<double>(Mix64(state_) >> 11) + 0.5) * 0x1.0p-53;
  }
  void Normals(float* out, int64_t n, double mean, double std) {
    constexpr double kTwoPi = 6.283185307179586;
    for (int64_t i = 0; i < n; i += 2) {
      const double r = std::sqrt(-2.0 * std::log(Uniform()));
      const double t = kTwoPi * Uniform();
      out[i] = static_cast<float>(mean + std * r * std::cos(t));
      if (i + 1 < n) out[i + 1] = static_cast<float>(mean + std * r * std::sin(t));
    }
  }

 private:
  uint64_t state_;
};

// A ByteSink into memory.
class BufferSink : public ByteSink {
 public:
  Status Write(const void* data, size_t size) override {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
    return Status::Ok();
  }
  std::vector<uint8_t> bytes;
};

// `rows` rows of which only the first `distinct` are generated and encoded; row r >= distinct repeats
// row Mix64(salt + r) % distinct. Written a few MiB at a time.
Status WriteRepeatedRows(DType type, int64_t ne0, int64_t rows, int64_t distinct, const RowSource& source, ThreadPool& pool,
                         uint64_t salt, ByteSink& sink, const std::function<void(int64_t)>& on_rows) {
  BufferSink encoded;
  RETURN_IF_ERROR(EncodeRows(type, ne0, distinct, source, pool, encoded, on_rows));
  const size_t row_bytes = RowBytes(type, ne0);
  RETURN_IF_ERROR(sink.Write(encoded.bytes.data(), encoded.bytes.size()));
  constexpr size_t kSlabBytes = 4 << 20;
  std::vector<uint8_t> slab;
  slab.reserve(kSlabBytes + row_bytes);
  int64_t pending = 0;
  for (int64_t r = distinct; r < rows; ++r) {
    const uint64_t pick = Mix64(salt + static_cast<uint64_t>(r)) % static_cast<uint64_t>(distinct);
    const uint8_t* row = encoded.bytes.data() + pick * row_bytes;
    slab.insert(slab.end(), row, row + row_bytes);
    ++pending;
    if (slab.size() >= kSlabBytes || r + 1 == rows) {
      RETURN_IF_ERROR(sink.Write(slab.data(), slab.size()));
      slab.clear();
      if (on_rows) on_rows(pending);
      pending = 0;
    }
  }
  return Status::Ok();
}

// ---- the tensors of a config ----

struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order
  enum class Init { kNormal, kUniform, kValues } init = Init::kNormal;
  double a = 0, b = 0;       // normal: mean, std; uniform: [a, b)
  std::vector<float> values;  // kValues
  bool keep_f32 = false;      // what llama.cpp's converter keeps in F32 (1-D, norms, routers)
  bool int32 = false;         // an index table (kValues, whole numbers): stored as I32
};

bool EndsWith(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Scales: weights N(0,1)/sqrt(fan_in) so every projection keeps unit variance, norms near 1 (the
// stored value is the multiplier in every family's GGUF). The tied embedding is the exception: a
// token's logit includes the dot product of the final residual with the token's own embedding row,
// which is sqrt(hidden) x (the input's share of the residual) standard deviations above the rest. At
// N(0,1)/sqrt(hidden) every model would copy its input token, so the scaled input embedding gets a
// per-dimension std s = 1.5 sqrt(2 layers / hidden) (the 2L sub-layer outputs each add ~1): the copy
// bonus is then ~1.5 std. The final norm (4 / s) brings the logits to a std of about 4.
std::vector<SynthTensor> PlanSynthTensors(const HfConfig& c) {
  std::vector<SynthTensor> out;
  const bool g1 = c.family == GemmaFamily::kGemma, g4 = c.family == GemmaFamily::kGemma4;
  const bool qk_norm = c.family == GemmaFamily::kGemma3 || c.family == GemmaFamily::kGemma3n || g4;
  const int64_t H = c.hidden_size, L = c.num_layers, P = c.hidden_size_per_layer_input, V = c.vocab_size;
  auto add = [&](std::string name, std::vector<int64_t> ne, double mean, double std) -> SynthTensor& {
    SynthTensor t;
    t.name = std::move(name);
    t.ne = std::move(ne);
    t.a = mean;
    t.b = std;
    t.keep_f32 = t.ne.size() <= 1 || EndsWith(t.name, "_norm.weight") || !EndsWith(t.name, ".weight") ||
                 EndsWith(t.name, ".ffn_gate_inp.weight");
    out.push_back(std::move(t));
    return out.back();
  };
  auto linear = [&](std::string name, std::vector<int64_t> ne) { add(std::move(name), ne, 0.0, 1.0 / std::sqrt(static_cast<double>(ne[0]))); };
  auto norm = [&](std::string name, int64_t n) { add(std::move(name), {n}, 1.0, 0.1); };

  const double s_emb = std::clamp(1.5 * std::sqrt(2.0 * static_cast<double>(L) / static_cast<double>(H)), 0.05, 1.0);
  add("token_embd.weight", {H, V}, 0.0, s_emb / std::sqrt(static_cast<double>(H)));
  add("output_norm.weight", {H}, 4.0 / s_emb, 0.4 / s_emb);
  if (g4 && P > 0) {
    add("per_layer_token_embd.weight", {L * P, c.vocab_size_per_layer_input.value_or(V)}, 0.0, 1.0 / std::sqrt(static_cast<double>(P)));
    linear("per_layer_model_proj.weight", {H, L * P});
    norm("per_layer_proj_norm.weight", P);
  }
  if (c.assistant) {
    linear("nextn.pre_projection.weight", {2 * c.backbone_hidden_size, H});
    linear("nextn.post_projection.weight", {H, c.backbone_hidden_size});
    if (c.use_ordered_embeddings) {
      linear("masked_embd_centroids.weight", {H, c.num_centroids});
      // A permutation of the vocabulary, fixed by the preset (the seed does not move it).
      SynthTensor& t = add("masked_embd_ordering", {V}, 0, 0);
      t.init = SynthTensor::Init::kValues;
      t.int32 = true;
      std::vector<int32_t> order(static_cast<size_t>(V));
      std::iota(order.begin(), order.end(), 0);
      RowRng rng(0, HashName(t.name), 0);
      for (size_t i = order.size(); i > 1; --i) {
        std::swap(order[i - 1], order[static_cast<size_t>(rng.Uniform() * static_cast<double>(i))]);
      }
      t.values.assign(order.begin(), order.end());
    }
  }
  if (g4 && c.rope_full.type == "proportional") {
    // As the converter writes it: 1 for the rotated pairs, 1e30 freezes the others.
    const int64_t half = c.global_head_dim / 2;
    const auto n_rot = static_cast<int64_t>(static_cast<double>(c.global_head_dim) * c.rope_full.partial_rotary_factor / 2);
    SynthTensor& t = add("rope_freqs.weight", {half}, 0, 0);
    t.init = SynthTensor::Init::kValues;
    t.values.assign(static_cast<size_t>(half), 1e30f);
    std::fill(t.values.begin(), t.values.begin() + std::min(n_rot, half), 1.0f);
  }
  for (int64_t il = 0; il < L; ++il) {
    const size_t i = static_cast<size_t>(il);
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t hd = c.layer_head_dim[i], kv = c.layer_kv_heads[i], ff = c.layer_ffn[i], q = c.num_heads * hd;
    const bool shared = g4 && c.IsKvShared(il);
    const bool k_eq_v = g4 && c.attention_k_eq_v && !c.is_sliding[i];
    norm(p + "attn_norm.weight", H);
    linear(p + "attn_q.weight", {H, q});
    if (!shared) linear(p + "attn_k.weight", {H, kv * hd});
    if (!shared && !k_eq_v) linear(p + "attn_v.weight", {H, kv * hd});
    linear(p + "attn_output.weight", {q, H});
    if (qk_norm) {
      // Gemma 4 has no 1/sqrt(head_dim) attention scale (scaling 1.0): its q_norm carries it.
      const double qs = g4 ? 2.0 / std::sqrt(static_cast<double>(hd)) : 1.0;
      add(p + "attn_q_norm.weight", {hd}, qs, 0.1 * qs);
      if (!shared) norm(p + "attn_k_norm.weight", hd);
    }
    if (g1) {
      norm(p + "ffn_norm.weight", H);
    } else {
      norm(p + "post_attention_norm.weight", H);
      norm(p + "ffn_norm.weight", H);
      norm(p + "post_ffw_norm.weight", H);
    }
    linear(p + "ffn_gate.weight", {H, ff});
    linear(p + "ffn_up.weight", {H, ff});
    linear(p + "ffn_down.weight", {ff, H});
    if (g4 && P > 0) {
      linear(p + "inp_gate.weight", {H, P});
      linear(p + "proj.weight", {P, H});
      norm(p + "post_norm.weight", H);
    }
    if (g4) {
      SynthTensor& t = add(p + "layer_output_scale.weight", {1}, 0.5, 1.5);
      t.init = SynthTensor::Init::kUniform;
    }
    if (g4 && c.enable_moe) {
      const int64_t E = c.num_experts, I = c.moe_intermediate_size;
      linear(p + "ffn_gate_inp.weight", {H, E});
      norm(p + "ffn_gate_inp.scale", H);
      norm(p + "ffn_down_exps.scale", E);
      linear(p + "ffn_gate_up_exps.weight", {H, 2 * I, E});
      linear(p + "ffn_down_exps.weight", {I, H, E});
      norm(p + "pre_ffw_norm_2.weight", H);
      norm(p + "post_ffw_norm_1.weight", H);
      norm(p + "post_ffw_norm_2.weight", H);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const SynthTensor& x, const SynthTensor& y) { return LlamaTensorLess(x.name, y.name); });
  return out;
}

// ---- tokenizer ----

Status Decompress(const fs::path& xz, const fs::path& out) {
  const std::string a = xz.string(), b = out.string();
  if (a.find('\'') != std::string::npos || b.find('\'') != std::string::npos) {
    return Status::Error("cannot decompress '" + a + "': quotes in the path");
  }
  const std::string cmd = "xz -dc '" + a + "' > '" + b + "'";
  if (std::system(cmd.c_str()) != 0) return Status::Error("'" + cmd + "' failed (is xz installed?)");
  return Status::Ok();
}

// Removes a scratch folder when the synthesis ends, however it ends.
class ScratchDir {
 public:
  Status Create() {
    std::string tmpl = (fs::temp_directory_path() / "gemlet-synth-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Status::Error("cannot create a temporary folder");
    path_ = tmpl;
    return Status::Ok();
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A file given as X or X.xz: the plain path to read (decompressed into `scratch` when needed).
Result<fs::path> Materialize(const fs::path& path, const fs::path& scratch, const std::string& as) {
  std::error_code ec;
  if (path.extension() == ".xz") {
    if (!fs::is_regular_file(path, ec)) return Status::Error("tokenizer file '" + path.string() + "' not found");
    RETURN_IF_ERROR(Decompress(path, scratch / as));
    return scratch / as;
  }
  if (!fs::is_regular_file(path, ec)) return Status::Error("tokenizer file '" + path.string() + "' not found");
  return path;
}

// The tokenizer.* keys of a GGUF vocabulary (its tokens, merges, special ids, chat template).
Status CopyTokenizerKeys(const GgufFile& vocab, const std::string& name, GgufWriter& writer) {
  int copied = 0;
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.substr(0, 10) != "tokenizer.") continue;
    RETURN_IF_ERROR(writer.SetValue(std::string(key), value));
    ++copied;
  }
  if (copied == 0) return Status::Error("'" + name + "' has no tokenizer.* metadata");
  return Status::Ok();
}

Status AddTokenizer(const SynthOptions& o, const SynthPreset& preset, const HfConfig& c, const std::string& config_json,
                    GgufWriter& writer) {
  std::string spec = o.tokenizer;
  if (spec.empty() && preset.tiny) spec = "none";
  if (spec.empty()) {
    return Status::Error(std::string("preset '") + preset.name + "' imitates a released model's vocabulary: give a tokenizer (" +
                         (c.family == GemmaFamily::kGemma4 ? "Gemma 4's vocabulary, e.g. ggml-vocab-gemma-4.gguf[.xz]"
                                                           : "Gemma 3's tokenizer.json[.xz]") +
                         "), or 'none' for placeholder tokens");
  }
  if (spec == "none") {
    WritePlaceholderVocab(c, writer);
    return Status::Ok();
  }
  ScratchDir scratch;
  RETURN_IF_ERROR(scratch.Create());
  const fs::path path(spec);
  std::string stem = path.filename().string();
  if (EndsWith(stem, ".xz")) stem.resize(stem.size() - 3);

  if (EndsWith(stem, ".gguf")) {
    ASSIGN_OR_RETURN(fs::path plain, Materialize(path, scratch.path(), "vocab.gguf"));
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, GgufFile::Open(plain.string()));
    return CopyTokenizerKeys(*vocab, spec, writer);
  }

  // tokenizer.json: lay out an HF folder (tokenizer.json, tokenizer_config.json if one sits beside it,
  // and the preset's config.json, from which llama.cpp sizes the vocabulary) and convert it as
  // `gemlet convert` does.
  ASSIGN_OR_RETURN(fs::path json_path, Materialize(path, scratch.path(), "tokenizer.json"));
  std::error_code ec;
  if (json_path != scratch.path() / "tokenizer.json") fs::copy_file(json_path, scratch.path() / "tokenizer.json", ec);
  if (ec) return Status::Error("cannot copy '" + json_path.string() + "': " + ec.message());
  std::string config_name = path.filename().string();
  if (const size_t at = config_name.rfind("tokenizer.json"); at != std::string::npos) {
    config_name.replace(at, 14, "tokenizer_config.json");
    const fs::path sibling = path.parent_path() / config_name;
    if (fs::is_regular_file(sibling, ec)) {
      ASSIGN_OR_RETURN(fs::path tc, Materialize(sibling, scratch.path(), "tokenizer_config.json"));
      if (tc != scratch.path() / "tokenizer_config.json") fs::copy_file(tc, scratch.path() / "tokenizer_config.json", ec);
    }
  }
  std::ofstream(scratch.path() / "config.json") << config_json;
  return AddHfTokenizerMetadata(scratch.path().string(), c.arch, writer).WithContext("tokenizer '" + spec + "'");
}

}  // namespace

const std::vector<SynthPreset>& SynthPresets() { return kPresets; }

const SynthPreset* FindSynthPreset(const std::string& name) {
  for (const SynthPreset& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

Result<std::string> SynthConfigJson(const SynthPreset& preset, int n_layers) {
  nlohmann::json top = nlohmann::json::parse(preset.config_json);
  // A drafter's decoder is its text_config; everything below edits the decoder's keys.
  const bool assistant = top.contains("text_config");
  if (assistant && n_layers > 0) return Status::Error("--layers does not apply to a drafter preset");
  nlohmann::json& j = assistant ? top["text_config"] : top;
  const int64_t L = j["num_hidden_layers"].get<int64_t>();
  // Gemma 4 presets give their layer pattern as a period; the last layer is always global.
  if (j.contains("layer_pattern_period")) {
    const int64_t period = j["layer_pattern_period"].get<int64_t>();
    nlohmann::json types = nlohmann::json::array();
    for (int64_t i = 0; i < L; ++i) types.push_back((i + 1) % period == 0 || i == L - 1 ? "full_attention" : "sliding_attention");
    j["layer_types"] = types;
    j.erase("layer_pattern_period");
  }
  if (n_layers > 0 && n_layers != L) {
    if (n_layers > L) return Status::Error("--layers " + std::to_string(n_layers) + " exceeds the preset's " + std::to_string(L));
    j["num_hidden_layers"] = n_layers;
    if (j.contains("layer_types")) {
      nlohmann::json& types = j["layer_types"];
      types.erase(types.begin() + n_layers, types.end());
      if (j["model_type"] == "gemma4_text" || j["model_type"] == "gemma4_unified_text") {
        types[static_cast<size_t>(n_layers - 1)] = "full_attention";
      }
    }
    if (j.contains("num_kv_shared_layers")) {
      const int64_t shared = j["num_kv_shared_layers"].get<int64_t>() * n_layers / L;
      j["num_kv_shared_layers"] = std::min<int64_t>(shared, n_layers - 1);
    }
  }
  top["architectures"] = nlohmann::json::array({assistant                                 ? "Gemma4AssistantForCausalLM"
                                                : j["model_type"] == "gemma2"              ? "Gemma2ForCausalLM"
                                                : j["model_type"] == "gemma4_text"         ? "Gemma4ForCausalLM"
                                                : j["model_type"] == "gemma4_unified_text" ? "Gemma4UnifiedForCausalLM"
                                                                                           : "Gemma3ForCausalLM"});
  top["bos_token_id"] = 2;
  top["eos_token_id"] = 1;
  top["pad_token_id"] = 0;
  return top.dump(2);
}

Result<std::vector<std::pair<std::string, std::vector<int64_t>>>> SynthTensorShapes(const SynthPreset& preset, int n_layers) {
  ASSIGN_OR_RETURN(std::string config_json, SynthConfigJson(preset, n_layers));
  ASSIGN_OR_RETURN(HfConfig config, ParseHfConfig(config_json, std::string("preset ") + preset.name));
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const SynthTensor& t : PlanSynthTensors(config)) out.emplace_back(t.name, t.ne);
  return out;
}

Result<SynthReport> WriteSynthModel(const SynthOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const SynthPreset* preset = FindSynthPreset(o.preset);
  if (preset == nullptr) {
    std::string names;
    for (const SynthPreset& p : kPresets) names += (names.empty() ? "" : ", ") + std::string(p.name);
    return Status::Error("unknown preset '" + o.preset + "' (choose one of " + names + ")");
  }
  ASSIGN_OR_RETURN(std::string config_json, SynthConfigJson(*preset, o.n_layers));
  // A tiny preset given a real vocabulary (a GGUF's tokenizer.*) takes its size: a test model with
  // random weights that speaks the released tokenizer (structured output, byte-level tests).
  if (preset->tiny && !o.tokenizer.empty() && o.tokenizer != "none") {
    std::string stem = fs::path(o.tokenizer).filename().string();
    if (EndsWith(stem, ".xz")) stem.resize(stem.size() - 3);
    if (EndsWith(stem, ".gguf")) {
      ScratchDir scratch;
      RETURN_IF_ERROR(scratch.Create());
      ASSIGN_OR_RETURN(fs::path plain, Materialize(o.tokenizer, scratch.path(), "vocab.gguf"));
      ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, GgufFile::Open(plain.string()));
      const std::vector<std::string_view>* tokens = vocab->GetStringArray("tokenizer.ggml.tokens");
      if (tokens == nullptr) return Status::Error("'" + o.tokenizer + "' has no tokenizer.ggml.tokens");
      nlohmann::json top = nlohmann::json::parse(config_json);
      nlohmann::json& j = top.contains("text_config") ? top["text_config"] : top;
      j["vocab_size"] = tokens->size();
      if (j.contains("vocab_size_per_layer_input") && j["vocab_size_per_layer_input"] != 0) {
        j["vocab_size_per_layer_input"] = tokens->size();
      }
      config_json = top.dump();
    }
  }
  ASSIGN_OR_RETURN(HfConfig config, ParseHfConfig(config_json, std::string("preset ") + preset->name));

  GgufWriter writer;
  const std::string name = std::string("synth-") + preset->name + (o.n_layers > 0 ? "-" + std::to_string(config.num_layers) + "l" : "");
  WriteGeneralMetadata(config, name, static_cast<uint32_t>(o.ftype), writer);
  RETURN_IF_ERROR(WriteModelMetadata(config, writer));
  RETURN_IF_ERROR(AddTokenizer(o, *preset, config, config_json, writer));

  // Types: what `convert --outtype <float>` then `quantize` would give (2-D weights in F16 before a
  // quant type; the values are rounded through that type so both routes write the same bytes).
  const DType base = GetFileTypeInfo(o.ftype).base;
  const bool quantized = GetDTypeInfo(base).block_size > 1;
  const DType source_float = quantized ? DType::kF16 : base;
  std::vector<SynthTensor> tensors = PlanSynthTensors(config);
  std::vector<MixTensor> mix;
  for (const SynthTensor& t : tensors) mix.push_back({t.name, t.keep_f32 ? DType::kF32 : source_float, t.ne});
  MixModel model;
  model.n_layer = static_cast<int>(config.num_layers);
  model.n_head = static_cast<int>(config.num_heads);
  model.n_head_kv = static_cast<int>(config.layer_kv_heads[0]);
  model.n_expert = config.enable_moe ? static_cast<int>(config.num_experts) : 0;
  MixOptions mix_options;
  mix_options.ftype = o.ftype;
  const std::vector<MixDecision> decisions = ChooseTensorTypes(model, mix, mix_options);

  SynthReport report;
  report.arch = config.arch;
  report.n_vocab = static_cast<int>(config.vocab_size);
  uint64_t total = 0;
  for (const SynthTensor& t : tensors) total += static_cast<uint64_t>(std::accumulate(t.ne.begin(), t.ne.end(), int64_t{1}, std::multiplies<>()));

  const int n_threads = runtime::ResolveThreads(o.n_threads);
  auto pool = std::make_shared<ThreadPool>(n_threads);
  auto done = std::make_shared<uint64_t>(0);
  auto shared_tensors = std::make_shared<std::vector<SynthTensor>>(std::move(tensors));
  for (size_t i = 0; i < shared_tensors->size(); ++i) {
    const SynthTensor* t = &(*shared_tensors)[i];
    if (t->int32) {  // an index table, written as it is
      auto produce = [t](ByteSink& sink) -> Status {
        std::vector<int32_t> v(t->values.begin(), t->values.end());
        return sink.Write(v.data(), v.size() * sizeof(int32_t));
      };
      RETURN_IF_ERROR(writer.AddTensor(t->name, DType::kI32, t->ne, produce));
      report.bytes += t->values.size() * sizeof(int32_t);
      continue;
    }
    const DType type = decisions[i].type;
    const DType source = mix[i].type;
    const int64_t ne0 = t->ne[0];
    const int64_t rows = std::accumulate(t->ne.begin() + 1, t->ne.end(), int64_t{1}, std::multiplies<>());
    const uint64_t seed = o.seed, tensor_id = HashName(t->name);
    RowSource source_fn = [t, seed, tensor_id, source, ne0](int64_t r, float* out) {
      RowRng rng(seed, tensor_id, static_cast<uint64_t>(r));
      switch (t->init) {
        case SynthTensor::Init::kNormal: rng.Normals(out, ne0, t->a, t->b); break;
        case SynthTensor::Init::kUniform:
          for (int64_t k = 0; k < ne0; ++k) out[k] = static_cast<float>(t->a + (t->b - t->a) * rng.Uniform());
          break;
        case SynthTensor::Init::kValues: std::copy(t->values.begin(), t->values.end(), out); break;
      }
      if (source == DType::kF16) {
        for (int64_t k = 0; k < ne0; ++k) out[k] = F16ToF32(F32ToF16(out[k]));
      } else if (source == DType::kBF16) {
        for (int64_t k = 0; k < ne0; ++k) out[k] = Bf16ToF32(F32ToBf16(out[k]));
      }
    };
    auto produce = [type, ne0, rows, source_fn, pool, done, total, &o, shared_tensors, seed, tensor_id](ByteSink& sink) -> Status {
      auto on_rows = [&](int64_t k) {
        *done += static_cast<uint64_t>(k * ne0);
        if (o.progress) o.progress(*done, total);
      };
      if (o.distinct_rows <= 0 || rows <= o.distinct_rows) return EncodeRows(type, ne0, rows, source_fn, *pool, sink, on_rows);
      return WriteRepeatedRows(type, ne0, rows, o.distinct_rows, source_fn, *pool, Mix64(seed ^ tensor_id), sink, on_rows);
    };
    RETURN_IF_ERROR(writer.AddTensor(t->name, type, t->ne, produce));
    report.bytes += RowBytes(type, ne0) * static_cast<size_t>(rows);
  }
  RETURN_IF_ERROR(writer.Write(o.output_path));
  report.n_tensors = shared_tensors->size();
  report.n_elements = total;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

// ---- scripted test models (model/scripted.cc plays them back) ----

Result<ScriptedModelReport> WriteScriptedModel(const ScriptedModelOptions& o) {
  if (o.tokenizer.empty()) return Status::Error("a scripted model needs a GGUF vocabulary to copy (--tokenizer)");
  if (o.answers.empty()) return Status::Error("a scripted model needs at least one answer");
  ScratchDir scratch;
  RETURN_IF_ERROR(scratch.Create());
  ASSIGN_OR_RETURN(fs::path plain, Materialize(o.tokenizer, scratch.path(), "vocab.gguf"));
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, GgufFile::Open(plain.string()));
  ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::FromGguf(*vocab));

  std::vector<std::string> cues = o.cues;
  if (cues.empty()) {
    // The places a chat template hands the turn to the model: a model turn opens (Gemma 4 without
    // thinking: with its empty thought channel), or a tool's result closes.
    if (tokenizer.vocab().Find("<|turn>") >= 0) {
      cues = {"<|turn>model\n", "<|turn>model\n<|channel>thought\n<channel|>", "<tool_response|>"};
    } else {
      cues = {"<start_of_turn>model\n"};
    }
  }
  // Special tokens spelled in the text become those tokens: the script writes "<|tool_call>" as the model would.
  EncodeOptions encode;
  encode.parse_special = true;
  auto flatten = [&](const std::vector<std::string>& texts, const std::string& what, std::vector<int32_t>* tokens,
                     std::vector<int32_t>* lengths) -> Status {
    for (const std::string& text : texts) {
      const std::vector<int32_t> ids = tokenizer.Encode(text, encode);
      if (ids.empty()) return Status::Error("a scripted model's " + what + " is empty");
      tokens->insert(tokens->end(), ids.begin(), ids.end());
      lengths->push_back(static_cast<int32_t>(ids.size()));
    }
    return Status::Ok();
  };
  std::vector<int32_t> cue_tokens, cue_lengths, answer_tokens, answer_lengths;
  RETURN_IF_ERROR(flatten(cues, "cue", &cue_tokens, &cue_lengths));
  RETURN_IF_ERROR(flatten(o.answers, "answer", &answer_tokens, &answer_lengths));
  const int32_t end = tokenizer.eos_id();
  if (end < 0) return Status::Error("'" + o.tokenizer + "' names no end-of-sequence token");

  const std::string arch = "gemlet-scripted";
  GgufWriter writer;
  writer.SetString("general.architecture", arch);
  writer.SetString("general.name", o.name.empty() ? std::string("scripted") : o.name);
  writer.SetU32(arch + ".context_length", static_cast<uint32_t>(o.context_length));
  writer.SetI32Array(arch + ".cue_tokens", cue_tokens);
  writer.SetI32Array(arch + ".cue_lengths", cue_lengths);
  writer.SetI32Array(arch + ".answer_tokens", answer_tokens);
  writer.SetI32Array(arch + ".answer_lengths", answer_lengths);
  writer.SetU32(arch + ".end_token_id", static_cast<uint32_t>(end));
  RETURN_IF_ERROR(CopyTokenizerKeys(*vocab, o.tokenizer, writer));
  RETURN_IF_ERROR(writer.Write(o.output_path));
  ScriptedModelReport report;
  report.n_vocab = tokenizer.vocab_size();
  report.n_cues = cues.size();
  report.answer_tokens = answer_lengths;
  return report;
}

Result<ScriptedModelOptions> ReadModelScript(const std::string& json_path) {
  std::ifstream in(json_path, std::ios::binary);
  if (!in) return Status::Error("cannot read the script '" + json_path + "'");
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(text.str(), "script '" + json_path + "'"));
  const std::string where = "script '" + json_path + "': ";
  if (!j.is_object()) return Status::Error(where + "not a JSON object");
  ScriptedModelOptions o;
  auto strings = [&](const char* key, std::vector<std::string>* out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    const nlohmann::json& a = j[key];
    if (!a.is_array()) return Status::Error(where + "'" + key + "' must be an array of strings");
    for (const nlohmann::json& v : a) {
      if (!v.is_string()) return Status::Error(where + "'" + key + "' must be an array of strings");
      out->push_back(v.get<std::string>());
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(strings("answers", &o.answers));
  RETURN_IF_ERROR(strings("cues", &o.cues));
  if (o.answers.empty()) return Status::Error(where + "needs \"answers\": [\"...\", ...]");
  if (j.contains("context_length")) {
    if (!j["context_length"].is_number_integer() || j["context_length"].get<int64_t>() < 16 ||
        j["context_length"].get<int64_t>() > (1 << 24)) {
      return Status::Error(where + "'context_length' must be an integer in [16, 16777216]");
    }
    o.context_length = j["context_length"].get<int>();
  }
  if (j.contains("name")) {
    if (!j["name"].is_string()) return Status::Error(where + "'name' must be a string");
    o.name = j["name"].get<std::string>();
  }
  return o;
}

}  // namespace gemlet


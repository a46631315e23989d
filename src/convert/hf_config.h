// HfConfig: a HuggingFace Gemma config.json (any family, old hub or transformers 5.x keys) made plain.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gemlet {

enum class GemmaFamily { kGemma, kGemma2, kGemma3, kGemma3n, kGemma4 };

// One RoPE configuration (transformers' rope_parameters entry, or the old rope_theta/rope_scaling keys).
struct HfRope {
  std::string type = "default";  // default, linear, yarn, proportional, ...
  double theta = 10000.0;
  std::optional<double> factor;
  double partial_rotary_factor = 1.0;
  std::optional<int64_t> original_max_position_embeddings;  // yarn
  std::optional<double> extrapolation_factor, attention_factor, beta_fast, beta_slow;  // yarn
};

// Every field holds the value transformers would use: keys absent from config.json take the defaults of
// the family's config class (hub configs of Gemma 3 omit most keys), so the GGUF says what HF computes.
struct HfConfig {
  std::string model_type;  // of the text decoder: "gemma", "gemma2", "gemma3_text", "gemma4_unified_text", ...
  GemmaFamily family = GemmaFamily::kGemma;
  std::string arch;            // GGUF general.architecture: gemma, gemma2, gemma3, gemma3n, gemma4
  bool has_text_config = false;  // a multimodal wrapper: decoder weights under model.language_model.

  int64_t vocab_size = 0;
  // A multimodal wrapper's media tokens (image_token_id, boi_token_index, ...) with the pieces the
  // released vocabularies give those ids ("<start_of_image>", "<|image|>", ...).
  std::vector<std::pair<int64_t, std::string>> media_tokens;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // of sliding layers (all layers before Gemma 4)
  int64_t head_dim = 0;      // of sliding layers (all layers before Gemma 4)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool intermediate_size_is_list = false;  // config gave a per-layer list (Gemma 3n)

  std::optional<double> query_pre_attn_scalar;  // gemma2/gemma3: Q is scaled by its -1/2 power
  std::optional<double> attn_logit_softcapping;
  std::optional<double> final_logit_softcapping;

  int64_t sliding_window = 0;                  // 0: no sliding-window layers
  std::optional<int64_t> sliding_window_pattern;  // old hub key (gemma3: 6 = five sliding, one global)
  bool has_layer_types = false;                // config.json listed layer_types explicitly
  std::vector<bool> is_sliding;                // per layer (all false for Gemma 1)

  HfRope rope_full;                   // global layers (every layer before Gemma 3)
  std::optional<HfRope> rope_sliding;  // sliding layers, when they have their own

  // Gemma 3n / Gemma 4
  int64_t hidden_size_per_layer_input = 0;  // 0: no per-layer embeddings
  std::optional<int64_t> vocab_size_per_layer_input;
  int64_t num_kv_shared_layers = 0;  // the last N layers reuse earlier K/V and have no k/v weights
  // Gemma 3n
  int64_t altup_active_idx = 0;
  int64_t altup_num_inputs = 4;
  int64_t laurel_rank = 64;
  std::vector<double> activation_sparsity_pattern;  // per layer, target sparsity p in [0, 1)
  // Gemma 4
  int64_t global_head_dim = 0;
  bool attention_k_eq_v = false;  // global layers: V comes from k_proj (no v_proj)
  bool use_double_wide_mlp = false;
  bool enable_moe = false;
  int64_t num_experts = 0;
  int64_t top_k_experts = 0;
  int64_t moe_intermediate_size = 0;
  // Gemma 4's drafter (model_type gemma4_assistant, Gemma4AssistantForCausalLM; arch "gemma4-assistant"):
  // a Gemma 4 decoder (text_config) whose every layer reads the target's K/V, fed the target's token
  // embedding and final hidden state (backbone_hidden_size each) through pre_projection.
  bool assistant = false;
  int64_t backbone_hidden_size = 0;
  bool use_ordered_embeddings = false;  // E2B/E4B: logits only for the tokens of the top-k centroids
  int64_t num_centroids = 0;
  int64_t centroid_top_k = 0;           // centroid_intermediate_top_k

  // Per-layer sizes (index = layer), filled by the parser from the fields above and per_layer_config.
  std::vector<int64_t> layer_head_dim;
  std::vector<int64_t> layer_kv_heads;
  std::vector<int64_t> layer_ffn;

  bool IsKvShared(int64_t il) const { return il >= num_layers - num_kv_shared_layers; }
  // gemma, gemma2, gemma3 store RMSNorm weights as w with the norm computing x * (1 + w).
  bool NormAddsOne() const {
    return family == GemmaFamily::kGemma || family == GemmaFamily::kGemma2 || family == GemmaFamily::kGemma3;
  }
};

// Parses config.json text; `label` names the file in errors.
Result<HfConfig> ParseHfConfig(const std::string& json_text, const std::string& label);
// Reads `dir`/config.json.
Result<HfConfig> LoadHfConfig(const std::string& dir);

}  // namespace gemlet

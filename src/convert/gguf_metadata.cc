// Hyperparameter keys per Gemma family, following llama.cpp's conversion/base.py and conversion/gemma.py.
#include "convert/gguf_metadata.h"

#include <cmath>
#include <limits>
#include <vector>

namespace gemlet {

namespace {

uint32_t U32(int64_t v) { return static_cast<uint32_t>(v); }  // HfConfig keeps every size below 2^32

std::vector<int32_t> I32s(const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

bool Uniform(const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x != v.front()) return false;
  }
  return true;
}

// rope.scaling.* as TextModel.set_gguf_parameters writes them (linear and yarn; the rest have no key).
Status WriteRopeScaling(const std::string& a, const HfRope& rope, GgufWriter& w) {
  if (rope.type == "default" || rope.type == "proportional") return Status::Ok();
  if (rope.type == "linear") {
    if (rope.factor) {
      w.SetString(a + ".rope.scaling.type", "linear");
      w.SetF32(a + ".rope.scaling.factor", static_cast<float>(*rope.factor));
    }
    return Status::Ok();
  }
  if (rope.type == "yarn") {
    if (!rope.factor || !rope.original_max_position_embeddings) {
      return Status::Error("yarn RoPE scaling needs 'factor' and 'original_max_position_embeddings'");
    }
    w.SetString(a + ".rope.scaling.type", "yarn");
    w.SetF32(a + ".rope.scaling.factor", static_cast<float>(*rope.factor));
    w.SetU32(a + ".rope.scaling.original_context_length", U32(*rope.original_max_position_embeddings));
    if (rope.extrapolation_factor) w.SetF32(a + ".rope.scaling.yarn_ext_factor", static_cast<float>(*rope.extrapolation_factor));
    if (rope.attention_factor) w.SetF32(a + ".rope.scaling.yarn_attn_factor", static_cast<float>(*rope.attention_factor));
    if (rope.beta_fast) w.SetF32(a + ".rope.scaling.yarn_beta_fast", static_cast<float>(*rope.beta_fast));
    if (rope.beta_slow) w.SetF32(a + ".rope.scaling.yarn_beta_slow", static_cast<float>(*rope.beta_slow));
    return Status::Ok();
  }
  return Status::Error("unsupported rope_type '" + rope.type + "' (gemlet converts default, linear, yarn, proportional)");
}

// gemlet extensions for gemma2/gemma3: what llama.cpp would otherwise assume wrongly (see the header).
void WriteGemma23Extensions(const HfConfig& c, GgufWriter& w) {
  const std::string& a = c.arch;
  const bool gemma2 = c.family == GemmaFamily::kGemma2;
  // ref: llama.cpp models/gemma2.cpp, gemma3.cpp: 1/sqrt(n_embd/n_head) for the 27B sizes, else
  // 1/sqrt(key_length); transformers uses query_pre_attn_scalar^-1/2.
  const bool size_27b = (gemma2 && c.num_layers == 46) || (!gemma2 && c.num_layers == 62);
  const double assumed = size_27b ? static_cast<double>(c.hidden_size / c.num_heads) : static_cast<double>(c.head_dim);
  if (c.query_pre_attn_scalar && *c.query_pre_attn_scalar != assumed) {
    w.SetF32(a + ".attention.scale", static_cast<float>(1.0 / std::sqrt(*c.query_pre_attn_scalar)));
  }
  // llama.cpp's load_swa_pattern reads this array, else assumes layer il slides iff il % n < n - 1
  // (n = 2 gemma2, 6 gemma3); gemma3 has no sliding layers at all without attention.sliding_window.
  // The pattern is written whenever there are sliding layers, even when it matches that default, so
  // the file says what the config says (old configs with sliding_window_pattern N and transformers 5
  // configs with layer_types give identical files).
  if (!gemma2 && c.sliding_window <= 0) return;
  w.SetBoolArray(a + ".attention.sliding_window_pattern", c.is_sliding);
}

}  // namespace

double NormalQuantile(double p) {
  if (p <= 0.0) return -std::numeric_limits<double>::infinity();
  if (p >= 1.0) return std::numeric_limits<double>::infinity();
  // Solve in the lower tail, where Phi(x) = erfc(-x / sqrt 2) / 2 keeps full relative precision
  // (1 - p is exact for p >= 1/2), then mirror.
  const double q = p < 0.5 ? p : 1.0 - p;
  const double kPi = 3.14159265358979323846, kSqrt2 = 1.41421356237309504880;
  // Start: Winitzki's erfinv approximation (~2e-3 relative), with ln(1 - y^2) = ln(4q(1 - q)).
  const double kA = 0.147;
  const double ln = std::log(4.0 * q * (1.0 - q));
  const double t = 2.0 / (kPi * kA) + ln / 2.0;
  double x = -kSqrt2 * std::sqrt(std::sqrt(t * t - ln / kA) - t);
  for (int i = 0; i < 16; ++i) {
    const double cdf = 0.5 * std::erfc(-x / kSqrt2);
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
    const double step = (cdf - q) / pdf;
    x -= step;
    if (std::fabs(step) <= 1e-16 * std::fabs(x)) break;
  }
  return p < 0.5 ? x : -x;
}

Status WriteModelMetadata(const HfConfig& c, GgufWriter& w) {
  const std::string& a = c.arch;
  const bool g1 = c.family == GemmaFamily::kGemma, g2 = c.family == GemmaFamily::kGemma2;
  const bool g3 = c.family == GemmaFamily::kGemma3, g3n = c.family == GemmaFamily::kGemma3n;
  const bool g4 = c.family == GemmaFamily::kGemma4;

  if (g1 || g2) {
    // GemmaModel / Gemma2Model.set_gguf_parameters: a fixed list, no RoPE keys.
    w.SetU32(a + ".context_length", U32(c.max_position_embeddings));
    w.SetU32(a + ".embedding_length", U32(c.hidden_size));
    w.SetU32(a + ".block_count", U32(c.num_layers));
    if (c.intermediate_size_is_list) {
      w.SetI32Array(a + ".feed_forward_length", I32s(c.layer_ffn));
    } else {
      w.SetU32(a + ".feed_forward_length", U32(c.layer_ffn[0]));
    }
    w.SetU32(a + ".attention.head_count", U32(c.num_heads));
    w.SetU32(a + ".attention.head_count_kv", U32(c.num_kv_heads));
    w.SetF32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
    w.SetU32(a + ".attention.key_length", U32(c.head_dim));
    w.SetU32(a + ".attention.value_length", U32(c.head_dim));
    if (g2) {
      if (c.attn_logit_softcapping) w.SetF32(a + ".attn_logit_softcapping", static_cast<float>(*c.attn_logit_softcapping));
      if (c.final_logit_softcapping) w.SetF32(a + ".final_logit_softcapping", static_cast<float>(*c.final_logit_softcapping));
      w.SetU32(a + ".attention.sliding_window", U32(c.sliding_window));
      WriteGemma23Extensions(c, w);
    }
    // Extensions: llama.cpp assumes theta 1e4 and no scaling for these two families.
    if (c.rope_full.theta != 10000.0) w.SetF32(a + ".rope.freq_base", static_cast<float>(c.rope_full.theta));
    return WriteRopeScaling(a, c.rope_full, w);
  }

  // TextModel.set_gguf_parameters, then Gemma3Model's overrides.
  w.SetU32(a + ".block_count", U32(c.num_layers));
  w.SetU32(a + ".context_length", U32(c.max_position_embeddings));
  w.SetU32(a + ".embedding_length", U32(c.hidden_size));
  // Per-layer widths: Gemma 3n lists them; Gemma 4 doubles the KV-shared layers (use_double_wide_mlp).
  if (c.intermediate_size_is_list || (g4 && c.use_double_wide_mlp) || !Uniform(c.layer_ffn)) {
    w.SetI32Array(a + ".feed_forward_length", I32s(c.layer_ffn));
  } else {
    w.SetU32(a + ".feed_forward_length", U32(c.layer_ffn[0]));
  }
  w.SetU32(a + ".attention.head_count", U32(c.num_heads));
  // Gemma 4 global layers may have fewer kv heads (num_global_key_value_heads with K=V).
  if (Uniform(c.layer_kv_heads)) {
    w.SetU32(a + ".attention.head_count_kv", U32(c.layer_kv_heads[0]));
  } else {
    w.SetI32Array(a + ".attention.head_count_kv", I32s(c.layer_kv_heads));
  }
  RETURN_IF_ERROR(WriteRopeScaling(a, c.rope_full, w));
  w.SetF32(a + ".rope.freq_base", static_cast<float>(c.rope_full.theta));  // global layers
  if (c.rope_sliding) w.SetF32(a + ".rope.freq_base_swa", static_cast<float>(c.rope_sliding->theta));
  w.SetF32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  if (g4 && c.enable_moe) {
    w.SetU32(a + ".expert_count", U32(c.num_experts));
    w.SetU32(a + ".expert_used_count", U32(c.top_k_experts));
  }
  w.SetU32(a + ".attention.key_length", U32(g4 ? c.global_head_dim : c.head_dim));
  w.SetU32(a + ".attention.value_length", U32(g4 ? c.global_head_dim : c.head_dim));
  if (c.final_logit_softcapping && *c.final_logit_softcapping != 0.0) {
    w.SetF32(a + ".final_logit_softcapping", static_cast<float>(*c.final_logit_softcapping));
  }
  // llama.cpp's converter asserts this is unset for Gemma 3; transformers would apply it, so keep it.
  if (c.attn_logit_softcapping && *c.attn_logit_softcapping != 0.0) {
    w.SetF32(a + ".attn_logit_softcapping", static_cast<float>(*c.attn_logit_softcapping));
  }
  if (c.sliding_window > 0 && c.sliding_window_pattern.value_or(0) != 1) {
    w.SetU32(a + ".attention.sliding_window", U32(c.sliding_window));
  }

  if (g3) WriteGemma23Extensions(c, w);
  if (g3n) {
    w.SetU32(a + ".altup.active_idx", U32(c.altup_active_idx));
    w.SetU32(a + ".altup.num_inputs", U32(c.altup_num_inputs));
    w.SetU32(a + ".embedding_length_per_layer_input", U32(c.hidden_size_per_layer_input));
    w.SetU32(a + ".attention.shared_kv_layers", U32(c.num_kv_shared_layers));
    // Gaussian top-k sparsity: the cut-off is mean + std * Phi^-1(p) (-inf for p = 0, i.e. none).
    std::vector<float> scale;
    for (double p : c.activation_sparsity_pattern) scale.push_back(static_cast<float>(NormalQuantile(p)));
    w.SetF32Array(a + ".activation_sparsity_scale", scale);
    w.SetBoolArray(a + ".attention.sliding_window_pattern", c.is_sliding);
  }
  if (g4) {
    w.SetU32(a + ".attention.shared_kv_layers", U32(c.num_kv_shared_layers));
    w.SetU32(a + ".embedding_length_per_layer_input", U32(c.hidden_size_per_layer_input));
    w.SetBoolArray(a + ".attention.sliding_window_pattern", c.is_sliding);
    w.SetU32(a + ".attention.key_length_swa", U32(c.head_dim));
    w.SetU32(a + ".attention.value_length_swa", U32(c.head_dim));
    if (c.enable_moe) w.SetU32(a + ".expert_feed_forward_length", U32(c.moe_intermediate_size));
    // Global layers rotate the whole head (rope_freqs freezes the non-rotated pairs).
    const double prf_swa = c.rope_sliding ? c.rope_sliding->partial_rotary_factor : 1.0;
    w.SetU32(a + ".rope.dimension_count", U32(c.global_head_dim));
    w.SetU32(a + ".rope.dimension_count_swa", U32(static_cast<int64_t>(static_cast<double>(c.head_dim) * prf_swa)));
  }
  if (c.assistant) {
    // Gemma4AssistantModel.set_gguf_parameters: the target's hidden size, and every layer an MTP layer.
    w.SetU32(a + ".embedding_length_out", U32(c.backbone_hidden_size));
    w.SetU32(a + ".nextn_predict_layers", U32(c.num_layers));
    // gemlet's extension: llama.cpp's converter drops the ordered embedding; gemlet keeps it (its
    // centroids give the count) and needs how many centroids a step reads.
    if (c.use_ordered_embeddings) w.SetU32(a + ".centroid_intermediate_top_k", U32(c.centroid_top_k));
  }
  return Status::Ok();
}

void WriteGeneralMetadata(const HfConfig& c, const std::string& name, uint32_t file_type, GgufWriter& w) {
  w.SetString("general.architecture", c.arch);
  w.SetString("general.type", "model");
  w.SetString("general.name", name);
  w.SetU32("general.file_type", file_type);
  w.SetU32("general.quantization_version", 2);
}

void WritePlaceholderVocab(const HfConfig& c, GgufWriter& w) {
  const bool gemma4 = c.family == GemmaFamily::kGemma4;
  const int64_t n = c.vocab_size;
  std::vector<std::string> tokens;
  std::vector<float> scores(static_cast<size_t>(n), -1000.0f);
  std::vector<int32_t> types;
  static const char* kSpecial[] = {"<pad>", "<eos>", "<bos>", "<unk>"};
  for (int64_t i = 0; i < n; ++i) {
    tokens.push_back(i < 4 ? kSpecial[i] : "<t" + std::to_string(i) + ">");
    types.push_back(i < 4 ? 3 : 4);  // CONTROL, USER_DEFINED
  }
  // A multimodal checkpoint's media tokens keep their real pieces, so that prompts can place images
  // and audio as with a released vocabulary; the processors' "\n\n" is id 108 there (Gemma 3, 3n).
  for (const auto& [id, piece] : c.media_tokens) {
    if (id < 4 || id >= n) continue;
    tokens[static_cast<size_t>(id)] = piece;
    types[static_cast<size_t>(id)] = 3;
  }
  if (!c.media_tokens.empty() && !gemma4 && n > 108 && tokens[108] == "<t108>") {
    tokens[108] = "\n\n";
    types[108] = 1;  // NORMAL
  }
  // llama.cpp reads Gemma 4 vocabularies as BPE and refuses one without merges; this one never applies.
  w.SetString("tokenizer.ggml.model", gemma4 ? "gemma4" : "llama");
  if (!gemma4) w.SetString("tokenizer.ggml.pre", "default");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetF32Array("tokenizer.ggml.scores", scores);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  if (gemma4 && n > 5) w.SetStringArray("tokenizer.ggml.merges", {"<t4> <t5>"});
  w.SetU32("tokenizer.ggml.bos_token_id", 2);
  w.SetU32("tokenizer.ggml.eos_token_id", 1);
  w.SetU32("tokenizer.ggml.unknown_token_id", 3);
  w.SetU32("tokenizer.ggml.padding_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_eos_token", false);
  // llama.cpp's gemma converter hard-codes CodeGemma's <end_of_turn> id; the shared files carry it too.
  if (c.family == GemmaFamily::kGemma && n > 107) w.SetU32("tokenizer.ggml.eot_token_id", 107);
  w.SetBool("tokenizer.ggml.add_space_prefix", false);
}

}  // namespace gemlet

// config.json parsing for every Gemma family: text_config wrappers, old and new RoPE keys, HF defaults.
#include "convert/hf_config.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_input.h"

namespace gemlet {

namespace {

using Json = nlohmann::json;

// The defaults of transformers' config classes (5.17) for the keys a config.json may leave out.
struct FamilyDefaults {
  int64_t vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim;
  int64_t max_position_embeddings, sliding_window;
  double rope_theta, rope_local_theta;  // local 0: the family has a single RoPE
  std::optional<double> query_pre_attn_scalar, attn_softcap, final_softcap;
};

FamilyDefaults DefaultsFor(GemmaFamily family, bool unified) {
  switch (family) {
    case GemmaFamily::kGemma:  // GemmaConfig (7B)
      return {256000, 3072, 24576, 28, 16, 16, 256, 8192, 0, 10000.0, 0.0, std::nullopt, std::nullopt, std::nullopt};
    case GemmaFamily::kGemma2:  // Gemma2Config (2B)
      return {256000, 2304, 9216, 26, 8, 4, 256, 8192, 4096, 10000.0, 0.0, 256.0, 50.0, 30.0};
    case GemmaFamily::kGemma3:  // Gemma3TextConfig (1B-ish)
      return {262208, 2304, 9216, 26, 8, 4, 256, 131072, 4096, 1000000.0, 10000.0, 256.0, std::nullopt, std::nullopt};
    case GemmaFamily::kGemma3n:  // Gemma3nTextConfig (E2B-ish)
      return {262400, 2048, 16384, 35, 8, 2, 256, 32768, 512, 1000000.0, 10000.0, std::nullopt, std::nullopt, 30.0};
    case GemmaFamily::kGemma4:  // Gemma4TextConfig / Gemma4UnifiedTextConfig
      return {262144, 2304, 9216, 30, 8, 4, 256, unified ? 262144 : 131072, unified ? 1024 : 512,
              1000000.0, 10000.0, std::nullopt, std::nullopt, std::nullopt};
  }
  return {};
}

// Key lookup over a config whose text_config (if any) overrides the top level, as llama.cpp merges them.
class ConfigView {
 public:
  ConfigView(const Json& top, const Json* text, std::string label) : top_(top), text_(text), label_(std::move(label)) {}

  // Present at all, even as null (an explicit null switches a feature off; absence takes the default).
  bool Has(const std::string& key) const {
    return top_.contains(key) || (text_ != nullptr && text_->contains(key));
  }
  // nullptr when absent or JSON null (transformers writes null for "not set").
  const Json* Find(const std::string& key) const {
    if (text_ != nullptr) {
      auto it = text_->find(key);
      if (it != text_->end() && !it->is_null()) return &*it;
    }
    auto it = top_.find(key);
    if (it != top_.end() && !it->is_null()) return &*it;
    return nullptr;
  }

  Result<int64_t> Int(const std::string& key, int64_t fallback, int64_t min = 0) const {
    const Json* v = Find(key);
    if (v == nullptr) return fallback;
    return CheckInt(*v, key, min);
  }
  Result<std::optional<int64_t>> OptInt(const std::string& key, int64_t min = 0) const {
    const Json* v = Find(key);
    if (v == nullptr) return std::optional<int64_t>();
    ASSIGN_OR_RETURN(int64_t x, CheckInt(*v, key, min));
    return std::optional<int64_t>(x);
  }
  Result<std::optional<double>> OptFloat(const std::string& key) const {
    const Json* v = Find(key);
    if (v == nullptr) return std::optional<double>();
    if (!v->is_number()) return Bad(key, "a number", *v);
    return std::optional<double>(v->get<double>());
  }
  Result<bool> Bool(const std::string& key, bool fallback) const {
    const Json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Bad(key, "true or false", *v);
    return v->get<bool>();
  }

  Status Bad(const std::string& key, const std::string& want, const Json& got) const {
    std::string dumped = got.dump();
    if (dumped.size() > 60) dumped = dumped.substr(0, 57) + "...";
    return Status::Error(label_ + ": '" + key + "' must be " + want + ", got " + dumped);
  }
  Result<int64_t> CheckInt(const Json& v, const std::string& key, int64_t min) const {
    // Integral floats (2.0) appear in hand-edited configs; accept them, reject 2.5.
    if (v.is_number_integer()) {
      const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? -1 : v.get<int64_t>();
      if (x < min || x > static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) {
        return Bad(key, "an integer in [" + std::to_string(min) + ", 2^32)", v);
      }
      return x;
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d == static_cast<double>(static_cast<int64_t>(d)) && d >= static_cast<double>(min) && d < 4294967296.0) {
        return static_cast<int64_t>(d);
      }
    }
    return Bad(key, "an integer >= " + std::to_string(min), v);
  }
  const std::string& label() const { return label_; }

 private:
  const Json& top_;
  const Json* text_;
  std::string label_;
};

Result<GemmaFamily> FamilyOf(const std::string& model_type, const std::string& label) {
  if (model_type == "gemma") return GemmaFamily::kGemma;
  if (model_type == "gemma2") return GemmaFamily::kGemma2;
  if (model_type == "gemma3_text" || model_type == "gemma3") return GemmaFamily::kGemma3;
  if (model_type == "gemma3n_text" || model_type == "gemma3n") return GemmaFamily::kGemma3n;
  if (model_type == "gemma4_text" || model_type == "gemma4" || model_type == "gemma4_unified_text" ||
      model_type == "gemma4_unified") {
    return GemmaFamily::kGemma4;
  }
  return Status::Error(label + ": unsupported model_type '" + model_type +
                       "' (supported: gemma, gemma2, gemma3_text, gemma3, gemma3n_text, gemma3n, gemma4_text, gemma4, "
                       "gemma4_unified_text)");
}

const char* ArchOf(GemmaFamily family) {
  switch (family) {
    case GemmaFamily::kGemma: return "gemma";
    case GemmaFamily::kGemma2: return "gemma2";
    case GemmaFamily::kGemma3: return "gemma3";
    case GemmaFamily::kGemma3n: return "gemma3n";
    case GemmaFamily::kGemma4: return "gemma4";
  }
  return "?";
}

// One rope_parameters entry; `theta_fallback` covers entries without rope_theta.
Result<HfRope> ParseRope(const Json& j, double theta_fallback, const std::string& where, const ConfigView& view) {
  HfRope rope;
  rope.theta = theta_fallback;
  if (!j.is_object()) return view.Bad(where, "an object", j);
  auto num = [&](const char* key, std::optional<double>* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::Ok();
    if (!it->is_number()) return view.Bad(where + "." + key, "a number", *it);
    *out = it->get<double>();
    return Status::Ok();
  };
  std::optional<double> theta, prf, orig_ctx;
  RETURN_IF_ERROR(num("rope_theta", &theta));
  RETURN_IF_ERROR(num("factor", &rope.factor));
  RETURN_IF_ERROR(num("partial_rotary_factor", &prf));
  RETURN_IF_ERROR(num("original_max_position_embeddings", &orig_ctx));
  RETURN_IF_ERROR(num("extrapolation_factor", &rope.extrapolation_factor));
  RETURN_IF_ERROR(num("attention_factor", &rope.attention_factor));
  if (!rope.attention_factor) RETURN_IF_ERROR(num("attn_factor", &rope.attention_factor));
  RETURN_IF_ERROR(num("beta_fast", &rope.beta_fast));
  RETURN_IF_ERROR(num("beta_slow", &rope.beta_slow));
  if (theta) rope.theta = *theta;
  if (prf) rope.partial_rotary_factor = *prf;
  if (orig_ctx) rope.original_max_position_embeddings = static_cast<int64_t>(*orig_ctx);
  // transformers 5 writes rope_type; transformers 4 hub configs wrote "type".
  for (const char* key : {"rope_type", "type"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_string()) {
      rope.type = it->get<std::string>();
      break;
    }
  }
  if (!(rope.theta > 0)) return view.Bad(where + ".rope_theta", "positive", j);
  if (rope.partial_rotary_factor <= 0 || rope.partial_rotary_factor > 1) {
    return view.Bad(where + ".partial_rotary_factor", "in (0, 1]", j);
  }
  return rope;
}

// Finds a per-layer override in transformers 5's per_layer_config ({"5": {"head_dim": 512}}).
Result<std::optional<int64_t>> PerLayerInt(const Json* per_layer, int64_t il, const char* key, const ConfigView& view) {
  if (per_layer == nullptr) return std::optional<int64_t>();
  for (auto it = per_layer->begin(); it != per_layer->end(); ++it) {
    int64_t idx = -1;
    try {
      size_t used = 0;
      idx = std::stoll(it.key(), &used);
      if (used != it.key().size()) idx = -1;
    } catch (...) {
      idx = -1;
    }
    if (idx < 0) return view.Bad("per_layer_config", "keyed by layer index", *per_layer);
    if (idx != il || !it.value().is_object()) continue;
    auto v = it.value().find(key);
    if (v == it.value().end() || v->is_null()) return std::optional<int64_t>();
    ASSIGN_OR_RETURN(int64_t x, view.CheckInt(*v, std::string("per_layer_config.") + it.key() + "." + key, 1));
    return std::optional<int64_t>(x);
  }
  return std::optional<int64_t>();
}

// ParseHfConfig's steps, in order: each reads one part of config.json into c (earlier steps' fields
// are set), taking the family's class defaults for absent keys.
struct ConfigStep {
  const ConfigView& view;
  const FamilyDefaults& d;
  const std::string& label;
  bool unified;  // Gemma 4's unified (any-to-any) decoder
  HfConfig& c;
  int64_t n_layer() const { return c.num_layers; }
};

// The sizes every family has, and the feed-forward width: one number, or a per-layer list (Gemma 3n).
Status ReadSizes(const ConfigStep& s) {
  const ConfigView& view = s.view;
  const FamilyDefaults& d = s.d;
  const std::string& label = s.label;
  HfConfig& c = s.c;
  ASSIGN_OR_RETURN(c.vocab_size, view.Int("vocab_size", d.vocab_size, 1));
  ASSIGN_OR_RETURN(c.hidden_size, view.Int("hidden_size", d.hidden_size, 1));
  ASSIGN_OR_RETURN(c.num_layers, view.Int("num_hidden_layers", d.num_layers, 1));
  ASSIGN_OR_RETURN(c.num_heads, view.Int("num_attention_heads", d.num_heads, 1));
  ASSIGN_OR_RETURN(c.num_kv_heads, view.Int("num_key_value_heads", d.num_kv_heads, 1));
  ASSIGN_OR_RETURN(c.head_dim, view.Int("head_dim", d.head_dim, 1));
  ASSIGN_OR_RETURN(c.max_position_embeddings, view.Int("max_position_embeddings", d.max_position_embeddings, 1));
  ASSIGN_OR_RETURN(std::optional<double> eps, view.OptFloat("rms_norm_eps"));
  c.rms_norm_eps = eps.value_or(1e-6);
  if (!(c.rms_norm_eps > 0)) return Status::Error(label + ": 'rms_norm_eps' must be positive");
  const int64_t n_layer = c.num_layers;

  std::vector<int64_t> ffn(static_cast<size_t>(n_layer), d.intermediate_size);
  if (const Json* v = view.Find("intermediate_size")) {
    if (v->is_array()) {
      if (v->size() != static_cast<size_t>(n_layer)) {
        return view.Bad("intermediate_size", "a list of " + std::to_string(n_layer) + " values (one per layer)", *v);
      }
      for (size_t i = 0; i < v->size(); ++i) {
        ASSIGN_OR_RETURN(ffn[i], view.CheckInt((*v)[i], "intermediate_size", 1));
      }
      c.intermediate_size_is_list = true;
    } else {
      ASSIGN_OR_RETURN(int64_t x, view.CheckInt(*v, "intermediate_size", 1));
      ffn.assign(static_cast<size_t>(n_layer), x);
    }
  }

  c.layer_ffn = ffn;
  return Status::Ok();
}

Status ReadAttentionScaling(const ConfigStep& s) {
  const ConfigView& view = s.view;
  const FamilyDefaults& d = s.d;
  const std::string& label = s.label;
  HfConfig& c = s.c;
  // Attention scale and soft-capping (gemma2/gemma3 take query_pre_attn_scalar; the rest fix the scale).
  if (c.family == GemmaFamily::kGemma2 || c.family == GemmaFamily::kGemma3) {
    ASSIGN_OR_RETURN(c.query_pre_attn_scalar, view.OptFloat("query_pre_attn_scalar"));
    if (!c.query_pre_attn_scalar) c.query_pre_attn_scalar = d.query_pre_attn_scalar;
    if (!(*c.query_pre_attn_scalar > 0)) return Status::Error(label + ": 'query_pre_attn_scalar' must be positive");
  }
  const bool has_attn_cap_key = view.Has("attn_logit_softcapping");
  const bool has_final_cap_key = view.Has("final_logit_softcapping");
  ASSIGN_OR_RETURN(c.attn_logit_softcapping, view.OptFloat("attn_logit_softcapping"));
  ASSIGN_OR_RETURN(c.final_logit_softcapping, view.OptFloat("final_logit_softcapping"));
  // An explicit null means "off"; only a missing key takes the class default.
  if (!has_attn_cap_key) c.attn_logit_softcapping = d.attn_softcap;
  if (!has_final_cap_key) c.final_logit_softcapping = d.final_softcap;

  return Status::Ok();
}

// Which layers slide: layer_types when given, else the rule each config class uses to build it.
Status ReadLayerTypes(const ConfigStep& s) {
  const ConfigView& view = s.view;
  const FamilyDefaults& d = s.d;
  HfConfig& c = s.c;
  const int64_t n_layer = s.n_layer();
  // Sliding-window layers.
  if (c.family != GemmaFamily::kGemma) {
    const bool has_window_key = view.Has("sliding_window");
    ASSIGN_OR_RETURN(std::optional<int64_t> window, view.OptInt("sliding_window", 0));
    c.sliding_window = has_window_key ? window.value_or(0) : d.sliding_window;
  }
  ASSIGN_OR_RETURN(c.sliding_window_pattern, view.OptInt("sliding_window_pattern", 1));
  if (!c.sliding_window_pattern) {
    ASSIGN_OR_RETURN(c.sliding_window_pattern, view.OptInt("_sliding_window_pattern", 1));
  }
  c.is_sliding.assign(static_cast<size_t>(n_layer), false);
  if (const Json* lt = view.Find("layer_types")) {
    if (!lt->is_array() || lt->size() != static_cast<size_t>(n_layer)) {
      return view.Bad("layer_types", "a list of " + std::to_string(n_layer) + " layer types", *lt);
    }
    for (size_t i = 0; i < lt->size(); ++i) {
      const Json& t = (*lt)[i];
      if (t == "sliding_attention") {
        c.is_sliding[i] = true;
      } else if (t != "full_attention") {
        return view.Bad("layer_types[" + std::to_string(i) + "]", "\"sliding_attention\" or \"full_attention\"", t);
      }
    }
    c.has_layer_types = true;
  } else {
    // The rule each config class uses to build layer_types when the config has none.
    for (int64_t i = 0; i < n_layer; ++i) {
      bool sliding = false;
      switch (c.family) {
        case GemmaFamily::kGemma: sliding = false; break;
        case GemmaFamily::kGemma2: sliding = (i + 1) % 2 != 0; break;
        case GemmaFamily::kGemma3: sliding = (i + 1) % c.sliding_window_pattern.value_or(6) != 0; break;
        case GemmaFamily::kGemma3n: sliding = (i + 1) % 5 != 0; break;
        case GemmaFamily::kGemma4: sliding = (i + 1) % 6 != 0 && i != n_layer - 1; break;
      }
      c.is_sliding[static_cast<size_t>(i)] = sliding;
    }
  }

  return Status::Ok();
}

Status ReadRopes(const ConfigStep& s) {
  const ConfigView& view = s.view;
  const FamilyDefaults& d = s.d;
  HfConfig& c = s.c;
  // RoPE: transformers 5 rope_parameters (per layer type, or flat), else rope_scaling + rope_theta +
  // rope_local_base_freq (old hub form). Both end up in rope_full / rope_sliding.
  const Json* rp = view.Find("rope_parameters");
  if (rp == nullptr) rp = view.Find("rope_scaling");
  ASSIGN_OR_RETURN(std::optional<double> rope_theta, view.OptFloat("rope_theta"));
  ASSIGN_OR_RETURN(std::optional<double> local_theta, view.OptFloat("rope_local_base_freq"));
  if (rp != nullptr && !rp->is_object()) return view.Bad("rope_parameters", "an object", *rp);
  if (rp != nullptr && (rp->contains("full_attention") || rp->contains("sliding_attention"))) {
    if (auto it = rp->find("full_attention"); it != rp->end()) {
      ASSIGN_OR_RETURN(c.rope_full, ParseRope(*it, rope_theta.value_or(d.rope_theta), "rope_parameters.full_attention", view));
    } else {
      c.rope_full.theta = rope_theta.value_or(d.rope_theta);
    }
    if (auto it = rp->find("sliding_attention"); it != rp->end()) {
      ASSIGN_OR_RETURN(HfRope s, ParseRope(*it, local_theta.value_or(d.rope_local_theta), "rope_parameters.sliding_attention", view));
      c.rope_sliding = s;
    }
  } else {
    static const Json kEmpty = Json::object();
    ASSIGN_OR_RETURN(c.rope_full, ParseRope(rp ? *rp : kEmpty, rope_theta.value_or(d.rope_theta), "rope_parameters", view));
    if (rp == nullptr && c.family == GemmaFamily::kGemma4) {
      // Gemma4TextConfig's default: proportional RoPE over a quarter of the global head.
      c.rope_full.type = "proportional";
      c.rope_full.partial_rotary_factor = 0.25;
    }
    if (local_theta || d.rope_local_theta > 0) {
      HfRope s;
      s.theta = local_theta.value_or(d.rope_local_theta);
      c.rope_sliding = s;
    }
  }

  return Status::Ok();
}

Status ReadPerLayerInputs(const ConfigStep& s) {
  const ConfigView& view = s.view;
  const std::string& label = s.label;
  HfConfig& c = s.c;
  const bool unified = s.unified;
  const int64_t n_layer = s.n_layer();
  // Gemma 3n / Gemma 4 per-layer inputs and KV sharing.
  if (c.family == GemmaFamily::kGemma3n || c.family == GemmaFamily::kGemma4) {
    const int64_t ple_default = c.family == GemmaFamily::kGemma3n ? 256 : (unified ? 0 : 256);
    const bool has_ple_key = view.Has("hidden_size_per_layer_input");
    ASSIGN_OR_RETURN(std::optional<int64_t> ple, view.OptInt("hidden_size_per_layer_input", 0));
    c.hidden_size_per_layer_input = has_ple_key ? ple.value_or(0) : ple_default;
    ASSIGN_OR_RETURN(c.vocab_size_per_layer_input, view.OptInt("vocab_size_per_layer_input", 0));  // 0 without PLE (a drafter)
    ASSIGN_OR_RETURN(c.num_kv_shared_layers,
                     view.Int("num_kv_shared_layers", c.family == GemmaFamily::kGemma3n ? 15 : 0, 0));
    if (c.assistant) {
      // Gemma4AssistantConfig: every layer shares (0 means all); it validates exactly that.
      if (c.num_kv_shared_layers == 0) c.num_kv_shared_layers = n_layer;
      if (c.num_kv_shared_layers != n_layer) {
        return Status::Error(label + ": a Gemma 4 assistant shares the K/V of every layer, but 'num_kv_shared_layers' is " +
                             std::to_string(c.num_kv_shared_layers) + " of " + std::to_string(n_layer));
      }
    } else if (c.num_kv_shared_layers >= n_layer) {
      return Status::Error(label + ": 'num_kv_shared_layers' (" + std::to_string(c.num_kv_shared_layers) +
                           ") must be less than num_hidden_layers (" + std::to_string(n_layer) + ")");
    }
  }
  return Status::Ok();
}

Status ReadAltUpAndLaurel(const ConfigStep& s) {
  const ConfigView& view = s.view;
  const std::string& label = s.label;
  HfConfig& c = s.c;
  const int64_t n_layer = s.n_layer();
  if (c.family == GemmaFamily::kGemma3n) {
    ASSIGN_OR_RETURN(c.altup_active_idx, view.Int("altup_active_idx", 0, 0));
    ASSIGN_OR_RETURN(c.altup_num_inputs, view.Int("altup_num_inputs", 4, 1));
    ASSIGN_OR_RETURN(c.laurel_rank, view.Int("laurel_rank", 64, 1));
    if (c.altup_active_idx >= c.altup_num_inputs) return Status::Error(label + ": 'altup_active_idx' out of range");
    c.activation_sparsity_pattern.assign(static_cast<size_t>(n_layer), 0.0);
    if (const Json* sp = view.Find("activation_sparsity_pattern")) {
      if (sp->is_number()) {
        c.activation_sparsity_pattern.assign(static_cast<size_t>(n_layer), sp->get<double>());
      } else if (sp->is_array() && sp->size() == static_cast<size_t>(n_layer)) {
        for (size_t i = 0; i < sp->size(); ++i) {
          if (!(*sp)[i].is_number()) return view.Bad("activation_sparsity_pattern", "numbers", *sp);
          c.activation_sparsity_pattern[i] = (*sp)[i].get<double>();
        }
      } else {
        return view.Bad("activation_sparsity_pattern", "a list of " + std::to_string(n_layer) + " numbers", *sp);
      }
      for (double p : c.activation_sparsity_pattern) {
        if (!(p >= 0.0 && p < 1.0)) return view.Bad("activation_sparsity_pattern", "values in [0, 1)", *sp);
      }
    } else if (n_layer == 35) {
      // Gemma3nTextConfig's default: 0.95 on the first 10 of its 35 layers.
      for (size_t i = 0; i < 10; ++i) c.activation_sparsity_pattern[i] = 0.95;
    }
  }

  return Status::Ok();
}

Status ReadLayerHeads(const ConfigStep& s) {
  const ConfigView& view = s.view;
  const std::string& label = s.label;
  HfConfig& c = s.c;
  const int64_t n_layer = s.n_layer();
  // Per-layer head sizes. Gemma 4 global layers may have their own head_dim and kv heads
  // (global_head_dim / num_global_key_value_heads in hub configs, per_layer_config in transformers 5).
  c.layer_head_dim.assign(static_cast<size_t>(n_layer), c.head_dim);
  c.layer_kv_heads.assign(static_cast<size_t>(n_layer), c.num_kv_heads);
  c.global_head_dim = c.head_dim;
  if (c.family == GemmaFamily::kGemma4) {
    ASSIGN_OR_RETURN(c.attention_k_eq_v, view.Bool("attention_k_eq_v", false));
    ASSIGN_OR_RETURN(c.use_double_wide_mlp, view.Bool("use_double_wide_mlp", false));
    ASSIGN_OR_RETURN(c.enable_moe, view.Bool("enable_moe_block", false));
    const Json* per_layer = view.Find("per_layer_config");
    if (per_layer != nullptr && !per_layer->is_object()) return view.Bad("per_layer_config", "an object", *per_layer);
    ASSIGN_OR_RETURN(std::optional<int64_t> global_hd, view.OptInt("global_head_dim", 1));
    ASSIGN_OR_RETURN(std::optional<int64_t> global_kv, view.OptInt("num_global_key_value_heads", 1));
    // transformers applies num_global_key_value_heads only together with attention_k_eq_v.
    if (!c.attention_k_eq_v) global_kv.reset();
    for (int64_t il = 0; il < n_layer; ++il) {
      const size_t i = static_cast<size_t>(il);
      ASSIGN_OR_RETURN(std::optional<int64_t> hd, PerLayerInt(per_layer, il, "head_dim", view));
      ASSIGN_OR_RETURN(std::optional<int64_t> kv, PerLayerInt(per_layer, il, "num_key_value_heads", view));
      ASSIGN_OR_RETURN(std::optional<int64_t> ff, PerLayerInt(per_layer, il, "intermediate_size", view));
      if (!c.is_sliding[i]) {
        c.layer_head_dim[i] = hd.value_or(global_hd.value_or(per_layer != nullptr ? c.head_dim : 512));
        c.layer_kv_heads[i] = kv.value_or(global_kv.value_or(c.num_kv_heads));
      } else {
        c.layer_head_dim[i] = hd.value_or(c.head_dim);
        c.layer_kv_heads[i] = kv.value_or(c.num_kv_heads);
      }
      if (ff) c.layer_ffn[i] = *ff;
      // Double-wide MLP: KV-shared layers get twice the width (Gemma4TextMLP).
      if (c.use_double_wide_mlp && c.IsKvShared(il)) c.layer_ffn[i] *= 2;
    }
    // GGUF has one head size per layer type (key_length / key_length_swa).
    std::optional<int64_t> type_hd[2];
    for (int64_t il = 0; il < n_layer; ++il) {
      const size_t i = static_cast<size_t>(il);
      std::optional<int64_t>& ref = type_hd[c.is_sliding[i] ? 1 : 0];
      if (!ref) ref = c.layer_head_dim[i];
      if (c.layer_head_dim[i] != *ref) {
        return Status::Error(label + ": layer " + std::to_string(il) + " has head_dim " +
                             std::to_string(c.layer_head_dim[i]) + ", unlike other layers of its type");
      }
    }
    c.head_dim = type_hd[1].value_or(c.head_dim);
    c.global_head_dim = type_hd[0].value_or(global_hd.value_or(c.head_dim));
    if (c.enable_moe) {
      ASSIGN_OR_RETURN(c.num_experts, view.Int("num_experts", 0, 1));
      ASSIGN_OR_RETURN(c.top_k_experts, view.Int("top_k_experts", 0, 1));
      ASSIGN_OR_RETURN(std::optional<int64_t> moe_ff, view.OptInt("moe_intermediate_size", 1));
      if (!moe_ff) {
        ASSIGN_OR_RETURN(moe_ff, view.OptInt("expert_intermediate_size", 1));
      }
      if (c.num_experts == 0 || c.top_k_experts == 0 || !moe_ff) {
        return Status::Error(label + ": enable_moe_block needs num_experts, top_k_experts and moe_intermediate_size");
      }
      if (c.top_k_experts > c.num_experts) return Status::Error(label + ": 'top_k_experts' exceeds 'num_experts'");
      c.moe_intermediate_size = *moe_ff;
    }
  }
  return Status::Ok();
}

}  // namespace

// The wrapper's media token ids (its own keys: Gemma 3 says *_index, Gemma 3n and 4 *_id, Gemma 4's
// eoa *_index) named as in the family's real vocabulary.
std::vector<std::pair<int64_t, std::string>> MediaTokens(const Json& top, GemmaFamily family) {
  struct Key {
    const char* stem;
    const char* gemma3;  // Gemma 3 and 3n
    const char* gemma4;
  };
  static const Key kKeys[] = {
      {"boi_token", "<start_of_image>", "<|image>"},   {"eoi_token", "<end_of_image>", "<image|>"},
      {"image_token", "<image_soft_token>", "<|image|>"}, {"boa_token", "<start_of_audio>", "<|audio>"},
      {"eoa_token", "<end_of_audio>", "<audio|>"},     {"audio_token", "<audio_soft_token>", "<|audio|>"},
      {"video_token", nullptr, "<|video|>"},
  };
  std::vector<std::pair<int64_t, std::string>> out;
  if (family != GemmaFamily::kGemma3 && family != GemmaFamily::kGemma3n && family != GemmaFamily::kGemma4) return out;
  for (const Key& k : kKeys) {
    const char* piece = family == GemmaFamily::kGemma4 ? k.gemma4 : k.gemma3;
    if (piece == nullptr) continue;
    for (const char* suffix : {"_id", "_index"}) {
      auto it = top.find(std::string(k.stem) + suffix);
      if (it != top.end() && it->is_number_integer()) {
        out.emplace_back(it->get<int64_t>(), piece);
        break;
      }
    }
  }
  return out;
}

// Gemma4AssistantConfig's own keys (top level, beside text_config), with its defaults.
Status ReadAssistant(const Json& top, const std::string& label, HfConfig* c) {
  if (c->family != GemmaFamily::kGemma4 || c->model_type.find("unified") != std::string::npos) {
    return Status::Error(label + ": a gemma4_assistant's text_config must be gemma4_text, not " + c->model_type);
  }
  const ConfigView view(top, nullptr, label);
  c->assistant = true;
  c->arch = "gemma4-assistant";
  ASSIGN_OR_RETURN(c->backbone_hidden_size, view.Int("backbone_hidden_size", 1536, 1));
  ASSIGN_OR_RETURN(c->use_ordered_embeddings, view.Bool("use_ordered_embeddings", false));
  ASSIGN_OR_RETURN(c->num_centroids, view.Int("num_centroids", 2048, 1));
  ASSIGN_OR_RETURN(c->centroid_top_k, view.Int("centroid_intermediate_top_k", 32, 1));
  if (c->use_ordered_embeddings && c->centroid_top_k > c->num_centroids) {
    return Status::Error(label + ": 'centroid_intermediate_top_k' exceeds 'num_centroids'");
  }
  return Status::Ok();
}

Result<HfConfig> ParseHfConfig(const std::string& json_text, const std::string& label) {
  ASSIGN_OR_RETURN(Json top, ParseJson<Json>(json_text, label));
  if (!top.is_object()) return Status::Error(label + ": not a JSON object");

  HfConfig c;
  const Json* text = nullptr;
  auto text_it = top.find("text_config");
  if (text_it != top.end() && text_it->is_object()) {
    text = &*text_it;
    c.has_text_config = true;
  }
  ConfigView view(top, text, label);

  // The decoder's model_type: text_config's own, else the wrapper's.
  const Json* mt = nullptr;
  if (text != nullptr) {
    auto it = text->find("model_type");
    if (it != text->end() && it->is_string()) mt = &*it;
  }
  if (mt == nullptr) {
    auto it = top.find("model_type");
    if (it != top.end() && it->is_string()) mt = &*it;
  }
  if (mt == nullptr) return Status::Error(label + ": no 'model_type'");
  c.model_type = mt->get<std::string>();
  ASSIGN_OR_RETURN(c.family, FamilyOf(c.model_type, label));
  c.arch = ArchOf(c.family);
  if (auto it = top.find("model_type"); it != top.end() && it->is_string() && it->get<std::string>() != c.model_type) {
    const std::string wrapper = it->get<std::string>();
    if (wrapper == "gemma4_assistant") {
      RETURN_IF_ERROR(ReadAssistant(top, label, &c));
    } else if (wrapper.find("assistant") != std::string::npos) {
      return Status::Error(label + ": '" + wrapper + "' is not supported (Gemma 4's drafter is gemma4_assistant)");
    }
  }
  const bool unified = c.model_type.find("unified") != std::string::npos;
  const FamilyDefaults d = DefaultsFor(c.family, unified);

  c.media_tokens = MediaTokens(top, c.family);
  const ConfigStep step{view, d, label, unified, c};
  // Every family reads the same steps; those that do not apply to a family do nothing for it.
  for (Status (*read)(const ConfigStep&) : {ReadSizes, ReadAttentionScaling, ReadLayerTypes, ReadRopes,
                                            ReadPerLayerInputs, ReadAltUpAndLaurel, ReadLayerHeads}) {
    RETURN_IF_ERROR(read(step));
  }
  return c;
}

Result<HfConfig> LoadHfConfig(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::Error("'" + dir + "' is not a directory");
  const std::string path = (fs::path(dir) / "config.json").string();
  if (!fs::is_regular_file(path, ec)) return Status::Error("no config.json in '" + dir + "'");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ParseHfConfig(text.str(), path);
}

}  // namespace gemlet

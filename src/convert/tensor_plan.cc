// HF tensor names -> llama.cpp GGUF names (gguf-py tensor_mapping.py + conversion/gemma.py), with checks.
#include "convert/tensor_plan.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>

namespace gemlet {

namespace {

enum FamilyBit : unsigned {
  kG1 = 1u << 0,
  kG2 = 1u << 1,
  kG3 = 1u << 2,
  kG3n = 1u << 3,
  kG4 = 1u << 4,
  kAll = kG1 | kG2 | kG3 | kG3n | kG4,
  kAfterG1 = kG2 | kG3 | kG3n | kG4,
};

unsigned BitOf(GemmaFamily f) {
  switch (f) {
    case GemmaFamily::kGemma: return kG1;
    case GemmaFamily::kGemma2: return kG2;
    case GemmaFamily::kGemma3: return kG3;
    case GemmaFamily::kGemma3n: return kG3n;
    case GemmaFamily::kGemma4: return kG4;
  }
  return 0;
}

// Per-layer names, "model.layers.N." stripped. HF suffixes are listed without ".weight": llama.cpp
// appends it to the few parameters saved without one (layer_scalar, experts.*, altup scales).
struct LayerName {
  const char* hf;
  const char* gguf;
  unsigned families;
};
constexpr LayerName kLayerNames[] = {
    {"input_layernorm", "attn_norm.weight", kAll},
    {"self_attn.q_proj", "attn_q.weight", kAll},
    {"self_attn.k_proj", "attn_k.weight", kAll},
    {"self_attn.v_proj", "attn_v.weight", kAll},
    {"self_attn.o_proj", "attn_output.weight", kAll},
    {"self_attn.q_norm", "attn_q_norm.weight", kG3 | kG3n | kG4},
    {"self_attn.k_norm", "attn_k_norm.weight", kG3 | kG3n | kG4},
    {"mlp.gate_proj", "ffn_gate.weight", kAll},
    {"mlp.up_proj", "ffn_up.weight", kAll},
    {"mlp.down_proj", "ffn_down.weight", kAll},
    // Gemma 1's post_attention_layernorm is the pre-MLP norm; from Gemma 2 on it follows attention.
    {"post_attention_layernorm", "ffn_norm.weight", kG1},
    {"post_attention_layernorm", "post_attention_norm.weight", kAfterG1},
    {"pre_feedforward_layernorm", "ffn_norm.weight", kAfterG1},
    {"post_feedforward_layernorm", "post_ffw_norm.weight", kAfterG1},
    {"per_layer_input_gate", "inp_gate.weight", kG3n | kG4},
    {"per_layer_projection", "proj.weight", kG3n | kG4},
    {"post_per_layer_input_norm", "post_norm.weight", kG3n | kG4},
    {"altup.correct_output_scale", "altup_correct_scale.weight", kG3n},
    {"altup.correction_coefs", "altup_correct_coef.weight", kG3n},
    {"altup.prediction_coefs", "altup_predict_coef.weight", kG3n},
    {"altup.modality_router", "altup_router.weight", kG3n},
    {"altup.router_norm", "altup_router_norm.weight", kG3n},
    {"laurel.linear_left", "laurel_l.weight", kG3n},
    {"laurel.linear_right", "laurel_r.weight", kG3n},
    {"laurel.post_laurel_norm", "laurel_post_norm.weight", kG3n},
    {"layer_scalar", "layer_output_scale.weight", kG4},
    {"pre_feedforward_layernorm_2", "pre_ffw_norm_2.weight", kG4},
    {"post_feedforward_layernorm_1", "post_ffw_norm_1.weight", kG4},
    {"post_feedforward_layernorm_2", "post_ffw_norm_2.weight", kG4},
    {"router.proj", "ffn_gate_inp.weight", kG4},
    {"router.scale", "ffn_gate_inp.scale", kG4},
    {"router.per_expert_scale", "ffn_down_exps.scale", kG4},
    {"experts.gate_up_proj", "ffn_gate_up_exps.weight", kG4},
    {"experts.down_proj", "ffn_down_exps.weight", kG4},
};

struct ModelName {
  const char* hf;
  const char* gguf;
  unsigned families;
};
constexpr ModelName kModelNames[] = {
    {"model.embed_tokens", "token_embd.weight", kAll},
    {"model.norm", "output_norm.weight", kAll},
    {"lm_head", "output.weight", kG3 | kG3n | kG4},  // gemma/gemma2: dropped, the head is tied
    {"model.embed_tokens_per_layer", "per_layer_token_embd.weight", kG3n | kG4},
    {"model.per_layer_model_projection", "per_layer_model_proj.weight", kG3n | kG4},
    {"model.per_layer_projection_norm", "per_layer_proj_norm.weight", kG3n | kG4},
};

// Gemma 3n's AltUp projections come as N-1 separate [H, H] matrices; llama.cpp stacks them.
struct StackedName {
  const char* hf_prefix;
  const char* gguf;
};
constexpr StackedName kStackedNames[] = {
    {"model.altup_projections.", "altup_proj.weight"},
    {"model.altup_unembed_projections.", "altup_unembd_proj.weight"},
};

struct Route {
  std::string gguf;
  int stack_index = -1;  // >= 0: member of a stacked tensor
  bool drop = false;     // known, but llama.cpp does not write it
};

bool StartsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool EndsWith(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
std::string WithoutWeight(const std::string& s) { return EndsWith(s, ".weight") ? s.substr(0, s.size() - 7) : s; }

// Parses a decimal index at s[pos...] up to the next '.'; -1 if malformed.
int64_t ParseIndex(const std::string& s, size_t pos, size_t* end) {
  size_t dot = s.find('.', pos);
  if (dot == std::string::npos || dot == pos || dot - pos > 9) return -1;
  int64_t v = 0;
  for (size_t i = pos; i < dot; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  *end = dot + 1;
  return v;
}

// Gemma 4's drafter: its projections from and to the target's hidden size, and the ordered embedding
// (llama.cpp's names; its converter skips the ordered embedding, which gemlet keeps and uses).
constexpr std::pair<const char*, const char*> kAssistantNames[] = {
    {"pre_projection", "nextn.pre_projection.weight"},
    {"post_projection", "nextn.post_projection.weight"},
    {"masked_embedding.centroids", "masked_embd_centroids.weight"},
    {"masked_embedding.token_ordering", "masked_embd_ordering"},
};

std::optional<Route> RouteName(const HfConfig& c, const std::string& name) {
  const unsigned bit = BitOf(c.family);
  const std::string base = WithoutWeight(name);
  if (c.assistant) {
    if (base == "lm_head") return Route{"", -1, true};  // tied to model.embed_tokens
    for (const auto& [hf, gguf] : kAssistantNames) {
      if (base == hf) return Route{gguf};
    }
  }
  if (base == "lm_head" && (bit & (kG1 | kG2))) return Route{"", -1, true};
  for (const ModelName& m : kModelNames) {
    if ((m.families & bit) && base == m.hf) return Route{m.gguf};
  }
  if (bit & kG3n) {
    for (const StackedName& s : kStackedNames) {
      size_t end = 0;
      if (StartsWith(name, s.hf_prefix)) {
        const int64_t idx = ParseIndex(name, std::string(s.hf_prefix).size(), &end);
        if (idx >= 0 && name.substr(end) == "weight") return Route{s.gguf, static_cast<int>(idx)};
      }
    }
  }
  if (StartsWith(name, "model.layers.")) {
    size_t end = 0;
    const int64_t il = ParseIndex(name, 13, &end);
    if (il < 0) return std::nullopt;
    const std::string rest = WithoutWeight(name.substr(end));
    for (const LayerName& l : kLayerNames) {
      if ((l.families & bit) && rest == l.hf) return Route{"blk." + std::to_string(il) + "." + l.gguf};
    }
  }
  return std::nullopt;
}

// llama.cpp's type rule (conversion/base.py prepare_tensors): 1-D tensors, norms, routers, the AltUp
// coefficients and anything not named *.weight stay F32; the rest takes the output type.
bool KeepF32(const std::string& gguf, size_t n_dims) {
  if (n_dims <= 1 || EndsWith(gguf, "_norm.weight") || !EndsWith(gguf, ".weight")) return true;
  for (const char* s : {".ffn_gate_inp.weight", ".altup_correct_coef.weight", ".altup_predict_coef.weight"}) {
    if (EndsWith(gguf, s)) return true;
  }
  return false;
}

// What the config says each HF tensor must look like; -1 matches any size.
struct Expected {
  std::vector<int64_t> shape;
  bool required = true;
  bool found = false;
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

std::map<std::string, Expected> ExpectedTensors(const HfConfig& c) {
  std::map<std::string, Expected> m;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool required = true) {
    m[name] = Expected{std::move(shape), required, false};
  };
  const int64_t H = c.hidden_size, nh = c.num_heads, P = c.hidden_size_per_layer_input, L = c.num_layers;
  const bool g3n = c.family == GemmaFamily::kGemma3n, g4 = c.family == GemmaFamily::kGemma4;
  const bool qk_norm = c.family == GemmaFamily::kGemma3 || g3n || g4;
  const bool ple = (g3n || g4) && P > 0;

  add("model.embed_tokens.weight", {g3n ? -1 : c.vocab_size, H});
  add("model.norm.weight", {H});
  if (c.assistant) {
    add("pre_projection.weight", {H, 2 * c.backbone_hidden_size});
    add("post_projection.weight", {c.backbone_hidden_size, H});
    if (c.use_ordered_embeddings) {
      add("masked_embedding.centroids.weight", {c.num_centroids, H});
      add("masked_embedding.token_ordering", {c.vocab_size});
    }
  }
  if (ple) {
    add("model.embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input.value_or(-1), L * P});
    add("model.per_layer_model_projection.weight", {L * P, H});
    add("model.per_layer_projection_norm.weight", {P});
  }
  if (g3n) {
    for (int64_t i = 0; i + 1 < c.altup_num_inputs; ++i) {
      add("model.altup_projections." + std::to_string(i) + ".weight", {H, H});
      add("model.altup_unembed_projections." + std::to_string(i) + ".weight", {H, H});
    }
  }
  for (int64_t il = 0; il < L; ++il) {
    const size_t i = static_cast<size_t>(il);
    const std::string p = "model.layers." + std::to_string(il) + ".";
    const int64_t hd = c.layer_head_dim[i], kv = c.layer_kv_heads[i], ff = c.layer_ffn[i];
    const bool shared = (g3n || g4) && c.IsKvShared(il);  // K/V come from an earlier layer
    const bool k_eq_v = g4 && c.attention_k_eq_v && !c.is_sliding[i];  // V is computed with k_proj
    add(p + "input_layernorm.weight", {H});
    add(p + "self_attn.q_proj.weight", {nh * hd, H});
    add(p + "self_attn.k_proj.weight", {kv * hd, H}, !shared);
    add(p + "self_attn.v_proj.weight", {kv * hd, H}, !shared && !k_eq_v);
    add(p + "self_attn.o_proj.weight", {H, nh * hd});
    if (qk_norm) {
      add(p + "self_attn.q_norm.weight", {hd});
      add(p + "self_attn.k_norm.weight", {hd}, !shared);
    }
    add(p + "mlp.gate_proj.weight", {ff, H});
    add(p + "mlp.up_proj.weight", {ff, H});
    add(p + "mlp.down_proj.weight", {H, ff});
    add(p + "post_attention_layernorm.weight", {H});
    if (c.family != GemmaFamily::kGemma) {
      add(p + "pre_feedforward_layernorm.weight", {H});
      add(p + "post_feedforward_layernorm.weight", {H});
    }
    if (ple) {
      add(p + "per_layer_input_gate.weight", {P, H});
      add(p + "per_layer_projection.weight", {H, P});
      add(p + "post_per_layer_input_norm.weight", {H});
    }
    if (g3n) {
      const int64_t n = c.altup_num_inputs, r = c.laurel_rank;
      add(p + "altup.correct_output_scale", {H});
      add(p + "altup.correction_coefs.weight", {n, n});
      add(p + "altup.prediction_coefs.weight", {n * n, n});
      add(p + "altup.modality_router.weight", {n, H});
      add(p + "altup.router_norm.weight", {H});
      add(p + "laurel.linear_left.weight", {r, H});
      add(p + "laurel.linear_right.weight", {H, r});
      add(p + "laurel.post_laurel_norm.weight", {H});
    }
    if (g4) {
      add(p + "layer_scalar", {1}, /*required=*/false);  // absent means 1
      if (c.enable_moe) {
        const int64_t E = c.num_experts, I = c.moe_intermediate_size;
        add(p + "router.proj.weight", {E, H});
        add(p + "router.scale", {H});
        add(p + "router.per_expert_scale", {E});
        add(p + "experts.gate_up_proj", {E, 2 * I, H});
        add(p + "experts.down_proj", {E, H, I});
        add(p + "pre_feedforward_layernorm_2.weight", {H});
        add(p + "post_feedforward_layernorm_1.weight", {H});
        add(p + "post_feedforward_layernorm_2.weight", {H});
      }
    }
  }
  return m;
}

bool ShapeMatches(const std::vector<int64_t>& want, const std::vector<int64_t>& got) {
  if (want.size() != got.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] >= 0 && want[i] != got[i]) return false;
  }
  return true;
}

// The ordered embedding's token order ([vocab] int64 in the checkpoint): a permutation of the vocabulary
// in centroid-major order (Gemma4AssistantMaskedEmbedder reads it as [num_centroids, vocab / num_centroids]).
Result<PlannedTensor> PlanTokenOrdering(const HfConfig& c, const StTensor& t) {
  if ((t.dtype != StDType::kI64 && t.dtype != StDType::kI32) || t.shape.size() != 1) {
    return Status::Error("tensor '" + t.name + "' must be a 1-D I64 or I32 token order, is " + StDTypeName(t.dtype) + " " +
                         t.ShapeString());
  }
  if (c.num_centroids <= 0 || c.vocab_size % c.num_centroids != 0) {
    return Status::Error("tensor '" + t.name + "': the vocabulary (" + std::to_string(c.vocab_size) +
                         ") must split evenly into num_centroids (" + std::to_string(c.num_centroids) + ")");
  }
  PlannedTensor p;
  p.name = "masked_embd_ordering";
  p.ne = {t.shape[0]};
  p.keep_f32 = true;
  p.hf_name = t.name;
  std::vector<bool> seen(static_cast<size_t>(c.vocab_size), false);
  for (int64_t i = 0; i < t.shape[0]; ++i) {
    int64_t v = 0;
    if (t.dtype == StDType::kI64) {
      std::memcpy(&v, t.data + i * 8, 8);
    } else {
      int32_t v32 = 0;
      std::memcpy(&v32, t.data + i * 4, 4);
      v = v32;
    }
    if (v < 0 || v >= c.vocab_size || seen[static_cast<size_t>(v)]) {
      return Status::Error("tensor '" + t.name + "' is not a permutation of the vocabulary (entry " + std::to_string(i) +
                           " is " + std::to_string(v) + ")");
    }
    seen[static_cast<size_t>(v)] = true;
    p.generated_i32.push_back(static_cast<int32_t>(v));
  }
  return p;
}

}  // namespace

int64_t PlannedTensor::n_rows() const {
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  return rows;
}

std::string TextDecoderName(const std::string& name) {
  // Multimodal wrappers: transformers 5 puts the decoder under model.language_model., transformers 4
  // hub checkpoints of Gemma 3 under language_model.model. (and the head at language_model.lm_head).
  static const std::pair<const char*, const char*> kPrefixes[] = {
      {"model.language_model.", "model."},
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
      {"model.lm_head.", "lm_head."},
  };
  for (const auto& [from, to] : kPrefixes) {
    if (StartsWith(name, from)) return to + name.substr(std::string(from).size());
  }
  // Vision/audio towers, their embedders and projectors are for the mmproj file, not this one.
  for (const char* tower : {"vision", "audio", "multi_modal_projector", "multimodal_projector"}) {
    if (name.find(tower) != std::string::npos) return "";
  }
  return name;
}

Result<std::vector<PlannedTensor>> PlanTensors(const HfConfig& c, const SafetensorsCheckpoint& checkpoint) {
  std::map<std::string, Expected> expected = ExpectedTensors(c);
  std::vector<PlannedTensor> plan;
  std::map<std::string, size_t> by_gguf;  // gguf name -> index in plan

  // Proportional RoPE rotates only the first partial_rotary_factor of each global head; llama.cpp
  // expresses it as per-pair frequency factors, 1e30 freezing the rest (conversion/gemma.py).
  if (c.family == GemmaFamily::kGemma4 && c.rope_full.type == "proportional") {
    const int64_t half = c.global_head_dim / 2;
    const int64_t n_rot = static_cast<int64_t>(static_cast<double>(c.global_head_dim) * c.rope_full.partial_rotary_factor / 2);
    PlannedTensor t;
    t.name = "rope_freqs.weight";
    t.ne = {half};
    t.keep_f32 = true;
    t.generated.assign(static_cast<size_t>(half), 1e30f);
    for (int64_t i = 0; i < n_rot && i < half; ++i) t.generated[static_cast<size_t>(i)] = 1.0f;
    by_gguf[t.name] = plan.size();
    plan.push_back(std::move(t));
  }

  for (const StTensor* t : checkpoint.tensors()) {
    const std::string name = TextDecoderName(t->name);
    if (name.empty() || name.find("rotary_emb.") != std::string::npos) continue;  // towers; RoPE caches
    std::optional<Route> route = RouteName(c, name);
    if (!route) {
      return Status::Error("tensor '" + t->name + "' in " + *t->file + " is not part of a " + c.model_type +
                           " model (no GGUF name for it)");
    }
    if (route->drop) continue;
    auto exp = expected.find(name);
    if (exp != expected.end()) {
      if (!ShapeMatches(exp->second.shape, t->shape)) {
        return Status::Error("tensor '" + t->name + "' in " + *t->file + " has shape " + t->ShapeString() +
                             " but config.json implies " + ShapeString(exp->second.shape));
      }
      exp->second.found = true;
    }
    if (route->gguf == "masked_embd_ordering") {
      ASSIGN_OR_RETURN(PlannedTensor p, PlanTokenOrdering(c, *t));
      by_gguf.emplace(p.name, plan.size());
      plan.push_back(std::move(p));
      continue;
    }
    if (!StDTypeIsConvertible(t->dtype)) {
      return Status::Error("tensor '" + t->name + "' in " + *t->file + " is " + StDTypeName(t->dtype) +
                           "; only F32, F16 and BF16 weights can be converted");
    }
    if (t->shape.size() > 4 || (route->stack_index >= 0 && t->shape.size() > 3)) {
      return Status::Error("tensor '" + t->name + "' has " + std::to_string(t->shape.size()) + " dimensions; GGUF allows 4");
    }
    for (int64_t d : t->shape) {
      if (d == 0) return Status::Error("tensor '" + t->name + "' is empty (shape " + t->ShapeString() + ")");
    }

    std::vector<int64_t> ne(t->shape.rbegin(), t->shape.rend());
    if (ne.empty()) ne = {1};  // 0-d scalars become [1]

    auto it = by_gguf.find(route->gguf);
    if (route->stack_index >= 0) {
      // Member i of a stack [n, H, H] -> GGUF [H, H, n].
      const int64_t n = c.altup_num_inputs - 1;
      if (route->stack_index >= n) {
        return Status::Error("tensor '" + t->name + "': index beyond altup_num_inputs - 1 = " + std::to_string(n));
      }
      if (it == by_gguf.end()) {
        PlannedTensor p;
        p.name = route->gguf;
        p.ne = ne;
        p.ne.push_back(n);
        p.sources.assign(static_cast<size_t>(n), nullptr);
        p.hf_name = t->name;
        it = by_gguf.emplace(p.name, plan.size()).first;
        plan.push_back(std::move(p));
      }
      PlannedTensor& p = plan[it->second];
      if (p.sources[static_cast<size_t>(route->stack_index)] != nullptr) {
        return Status::Error("tensor '" + t->name + "' appears twice");
      }
      p.sources[static_cast<size_t>(route->stack_index)] = t;
      continue;
    }
    if (it != by_gguf.end()) {
      return Status::Error("tensors '" + plan[it->second].hf_name + "' and '" + t->name + "' both map to GGUF tensor '" +
                           route->gguf + "'");
    }
    PlannedTensor p;
    p.name = route->gguf;
    p.ne = ne;
    p.sources = {t};
    p.hf_name = t->name;
    // ref: transformers GemmaRMSNorm computes x * (1 + w); llama.cpp's converter stores 1 + w.
    p.add_one = c.NormAddsOne() && EndsWith(name, "norm.weight");
    // Gemma 3n: vision/audio token rows beyond the text vocab are zero-padded (conversion/gemma.py).
    if (c.family == GemmaFamily::kGemma3n && (p.name == "token_embd.weight" || p.name == "per_layer_token_embd.weight") &&
        ne.size() == 2 && ne[1] < c.vocab_size) {
      p.pad_rows = c.vocab_size - ne[1];
      p.ne[1] = c.vocab_size;
    }
    by_gguf.emplace(p.name, plan.size());
    plan.push_back(std::move(p));
  }

  for (const auto& [name, e] : expected) {
    if (e.required && !e.found) {
      const auto& files = checkpoint.files();
      const std::string where = files.size() == 1 ? files[0]->path() : std::to_string(files.size()) + " shards";
      return Status::Error("missing tensor '" + name + "'" +
                           (c.has_text_config ? " (model.language_model.* in a multimodal checkpoint)" : "") + " in " +
                           where + ", which config.json requires");
    }
  }
  for (PlannedTensor& p : plan) p.keep_f32 = p.keep_f32 || KeepF32(p.name, p.ne.size());
  return plan;
}

}  // namespace gemlet

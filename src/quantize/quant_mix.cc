// llama.cpp's quantization mixes, rule for rule (src/llama-quant.cpp: llama_tensor_get_type_impl,
// tensor_type_fallback, tensor_allows_quantization), for the non-IQ file types.
#include "quantize/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>

namespace gemlet {

namespace {

using F = FileType;

const std::vector<FileTypeInfo> kFileTypes = {
    {F::kQ4_0, "Q4_0", DType::kQ4_0, "4.5 bpw, 32-value blocks"},
    {F::kQ4_1, "Q4_1", DType::kQ4_1, "5.0 bpw, 32-value blocks with a minimum"},
    {F::kQ5_0, "Q5_0", DType::kQ5_0, "5.5 bpw, 32-value blocks"},
    {F::kQ5_1, "Q5_1", DType::kQ5_1, "6.0 bpw, 32-value blocks with a minimum"},
    {F::kQ2_K, "Q2_K", DType::kQ2_K, "K-quant mix around Q2_K (attn_v, ffn_down, attn_output higher)"},
    {F::kQ3_K_S, "Q3_K_S", DType::kQ3_K, "all Q3_K"},
    {F::kQ3_K_M, "Q3_K_M", DType::kQ3_K, "Q3_K with Q4_K/Q5_K attn_v, ffn_down, attn_output"},
    {F::kQ3_K_L, "Q3_K_L", DType::kQ3_K, "Q3_K with Q5_K attn_v, ffn_down, attn_output"},
    {F::kQ4_K_S, "Q4_K_S", DType::kQ4_K, "Q4_K with a few Q5_K attn_v / ffn_down"},
    {F::kQ4_K_M, "Q4_K_M", DType::kQ4_K, "Q4_K with Q6_K for half of attn_v and ffn_down"},
    {F::kQ5_K_S, "Q5_K_S", DType::kQ5_K, "all Q5_K"},
    {F::kQ5_K_M, "Q5_K_M", DType::kQ5_K, "Q5_K with Q6_K for half of attn_v and ffn_down"},
    {F::kQ6_K, "Q6_K", DType::kQ6_K, "all Q6_K"},
    {F::kQ8_0, "Q8_0", DType::kQ8_0, "8.5 bpw, nearly lossless"},
    {F::kF16, "F16", DType::kF16, "IEEE half"},
    {F::kBF16, "BF16", DType::kBF16, "bfloat16"},
    {F::kAllF32, "F32", DType::kF32, "float32"},
};

bool IsQuantized(DType t) { return GetDTypeInfo(t).block_size > 1; }
int BlockSize(DType t) { return GetDTypeInfo(t).block_size; }

// llama.cpp's tensor_category: broad roles found by substring, in this order.
enum class Category { kTokenEmbd, kAttnQ, kAttnV, kAttnK, kAttnQkv, kAttnKvB, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOutput, kOther };

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool IsTokenEmbd(std::string_view name) { return name == "token_embd.weight" || name == "per_layer_token_embd.weight"; }

Category CategoryOf(std::string_view name) {
  if (name == "output.weight") return Category::kOutput;
  if (IsTokenEmbd(name)) return Category::kTokenEmbd;
  if (Contains(name, "attn_qkv.weight")) return Category::kAttnQkv;
  if (Contains(name, "attn_kv_b.weight")) return Category::kAttnKvB;
  if (Contains(name, "attn_v.weight")) return Category::kAttnV;
  if (Contains(name, "attn_k.weight")) return Category::kAttnK;
  if (Contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (Contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Contains(name, "ffn_up")) return Category::kFfnUp;
  if (Contains(name, "ffn_gate")) return Category::kFfnGate;
  if (Contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool IsAttnVLike(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv || c == Category::kAttnKvB; }

// "blk.N." -> N, or -1 (sscanf("blk.%d.") in llama.cpp, which also accepts a sign).
int LayerOf(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  size_t i = 4;
  bool negative = false;
  if (i < name.size() && (name[i] == '-' || name[i] == '+')) negative = name[i++] == '-';
  const size_t digits = i;
  long v = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && v < 1000000000) v = v * 10 + (name[i++] - '0');
  if (i == digits) return -1;
  return static_cast<int>(negative ? -v : v);
}

// Half the layers get more bits: the first and last eighth and every third one between.
bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// quantize_state_impl: the running counters the rules consult.
struct MixState {
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn = 0, i_ffn_down = 0, i_ffn_gate = 0, i_ffn_up = 0;
  bool tied_embeddings = true;  // no output.weight: token_embd is also the LM head
};

DType RuleType(MixState& qs, const MixModel& m, DType new_type, const MixTensor& t, FileType ftype, Category category) {
  const int n_expert = std::max(1, m.n_expert);
  // With experts the layer comes from the name (llama.cpp: experts are not stored consecutively).
  auto layer_of = [&](int counter) {
    if (n_expert > 1) {
      const int il = LayerOf(t.name);
      if (il >= 0 && il < qs.n_ffn) return il;
    }
    return counter;
  };

  if (category == Category::kOutput || (qs.tied_embeddings && category == Category::kTokenEmbd)) {
    // Tied embeddings are quantized as the LM head, the most sensitive matrix of the model.
    if (t.ne[0] % BlockSize(new_type) != 0) {
      new_type = DType::kQ8_0;
    } else if (new_type != DType::kQ8_0) {
      new_type = DType::kQ6_K;
    }
  } else if (category == Category::kTokenEmbd) {
    // Untied embeddings keep the base type (the IQ-only rules are not implemented).
  } else if (IsAttnVLike(category)) {
    if (ftype == F::kQ2_K) {
      new_type = m.n_gqa() >= 4 ? DType::kQ4_K : DType::kQ3_K;
    } else if (ftype == F::kQ3_K_M) {
      new_type = qs.i_attention_wv < 2 ? DType::kQ5_K : DType::kQ4_K;
    } else if (ftype == F::kQ3_K_L) {
      new_type = DType::kQ5_K;
    } else if ((ftype == F::kQ4_K_M || ftype == F::kQ5_K_M) && UseMoreBits(qs.i_attention_wv, qs.n_attention_wv)) {
      new_type = DType::kQ6_K;
    } else if (ftype == F::kQ4_K_S && qs.i_attention_wv < 4) {
      new_type = DType::kQ5_K;
    }
    if (m.n_expert == 8) new_type = DType::kQ8_0;
    ++qs.i_attention_wv;
  } else if (category == Category::kAttnK) {
    if (m.n_expert == 8) new_type = DType::kQ8_0;
  } else if (category == Category::kFfnDown) {
    const int i_layer = layer_of(qs.i_ffn_down), n_layer = qs.n_ffn;
    if (ftype == F::kQ2_K) {
      new_type = DType::kQ3_K;
    } else if (ftype == F::kQ3_K_M) {
      new_type = i_layer < n_layer / 16 ? DType::kQ5_K : DType::kQ4_K;
    } else if (ftype == F::kQ3_K_L) {
      new_type = DType::kQ5_K;
    } else if (ftype == F::kQ4_K_M) {
      if (UseMoreBits(i_layer, n_layer)) new_type = DType::kQ6_K;
    } else if (ftype == F::kQ5_K_M && UseMoreBits(i_layer, n_layer)) {
      new_type = DType::kQ6_K;
    } else if (ftype == F::kQ4_K_S && i_layer < n_layer / 8) {
      new_type = DType::kQ5_K;
    }
    ++qs.i_ffn_down;
  } else if (category == Category::kAttnOutput) {
    if (m.n_expert == 8) {
      if (ftype == F::kQ2_K || ftype == F::kQ3_K_S || ftype == F::kQ3_K_M || ftype == F::kQ4_K_S || ftype == F::kQ4_K_M) {
        new_type = DType::kQ5_K;
      }
    } else if (ftype == F::kQ2_K) {
      new_type = DType::kQ3_K;
    } else if (ftype == F::kQ3_K_M) {
      new_type = DType::kQ4_K;
    } else if (ftype == F::kQ3_K_L) {
      new_type = DType::kQ5_K;
    }
  } else if (category == Category::kAttnQkv) {
    // Unreachable (kAttnQkv is attn_v-like above), kept as llama.cpp has it.
  } else if (category == Category::kFfnGate) {
    ++qs.i_ffn_gate;  // only the IQ3_XS rule reads it
  } else if (category == Category::kFfnUp) {
    ++qs.i_ffn_up;
  }
  return new_type;
}

// A block type the row length does not fit falls back to a 32-value type, then to F16.
DType Fallback(const MixTensor& t, DType target, MixDecision* d) {
  const int64_t ncols = t.ne[0];
  if (ncols % BlockSize(target) == 0) return target;
  DType type = target;
  switch (target) {
    case DType::kQ2_K:
    case DType::kQ3_K: type = DType::kQ4_0; break;
    case DType::kQ4_K: type = DType::kQ5_0; break;
    case DType::kQ5_K: type = DType::kQ5_1; break;
    case DType::kQ6_K: type = DType::kQ8_0; break;
    default: break;  // a 32-value type has nothing smaller: F16 below
  }
  if (ncols % BlockSize(type) != 0) type = DType::kF16;
  d->fallback = true;
  char buf[160];
  std::snprintf(buf, sizeof buf, "ncols %lld not divisible by %d (required for %s) -> falling back to %s",
                static_cast<long long>(ncols), BlockSize(target), DTypeName(target), DTypeName(type));
  d->note = buf;
  return type;
}

}  // namespace

const std::vector<FileTypeInfo>& FileTypes() { return kFileTypes; }

const FileTypeInfo& GetFileTypeInfo(FileType ftype) {
  for (const FileTypeInfo& info : kFileTypes) {
    if (info.ftype == ftype) return info;
  }
  return kFileTypes.back();  // unreachable for enumerators
}

bool ParseFileType(std::string_view name, FileType* out) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  // llama-quantize's aliases.
  if (upper == "Q3_K") upper = "Q3_K_M";
  if (upper == "Q4_K") upper = "Q4_K_M";
  if (upper == "Q5_K") upper = "Q5_K_M";
  for (const FileTypeInfo& info : kFileTypes) {
    if (upper == info.name) {
      *out = info.ftype;
      return true;
    }
  }
  return false;
}

std::string FileTypeNames() {
  std::string s;
  for (const FileTypeInfo& info : kFileTypes) s += (s.empty() ? "" : ", ") + std::string(info.name);
  return s;
}

int EffectiveDims(const std::vector<int64_t>& ne) {
  int n = 1;
  for (size_t i = 1; i < ne.size(); ++i) {
    if (ne[i] > 1) n = static_cast<int>(i) + 1;
  }
  return n;
}

bool LlamaTensorLess(std::string_view a, std::string_view b) {
  const int la = LayerOf(a), lb = LayerOf(b);
  if (la != lb) return la < lb;
  return a < b;
}

bool TensorAllowsQuantization(std::string_view name, const std::vector<int64_t>& ne) {
  if (EffectiveDims(ne) < 2) return false;
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  static constexpr std::string_view kNever[] = {
      "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight",
      // Small enough to keep as they are (Gemma 3n AltUp 4x4 coefficients, LAuReL rank 64).
      "altup", "laurel", "per_layer_model_proj",
      "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
      "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
      "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
      "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
      "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
      "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
      ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"};
  for (std::string_view part : kNever) {
    if (Contains(name, part)) return false;
  }
  // BERT position / token-type embeddings.
  return name != "position_embd.weight" && name != "token_types.weight";
}

std::vector<MixDecision> ChooseTensorTypes(const MixModel& model, const std::vector<MixTensor>& tensors,
                                           const MixOptions& options) {
  const DType base = GetFileTypeInfo(options.ftype).base;
  std::vector<MixDecision> out(tensors.size());

  MixState qs;
  qs.n_ffn = model.n_layer;
  for (const MixTensor& t : tensors) {
    const Category c = CategoryOf(t.name);
    if (IsAttnVLike(c)) ++qs.n_attention_wv;
    if (c == Category::kOutput) qs.tied_embeddings = false;
  }

  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return LlamaTensorLess(tensors[a].name, tensors[b].name); });

  for (size_t i : order) {
    const MixTensor& t = tensors[i];
    MixDecision& d = out[i];
    d.quantizable = TensorAllowsQuantization(t.name, t.ne);
    if (!d.quantizable) {
      d.type = t.type;
      continue;
    }
    if (options.token_embedding_type && IsTokenEmbd(t.name)) {
      d.type = Fallback(t, *options.token_embedding_type, &d);
      continue;
    }
    DType type = base;
    if (IsQuantized(base)) {
      if (!options.pure) type = RuleType(qs, model, type, t, options.ftype, CategoryOf(t.name));
      type = Fallback(t, type, &d);
    }
    d.type = type;
  }
  return out;
}

}  // namespace gemlet

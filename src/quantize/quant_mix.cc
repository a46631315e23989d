// llama-quantize's quantization mixes for the non-IQ file types: the same choices as its type
// selection (llama-quant.cpp), tensor for tensor, organized here by tensor role.
#include "quantize/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>
#include <regex>
#include <utility>

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

// The broad role of a tensor, from its name: the first entry below whose pattern matches wins
// (llama.cpp's tensor categories, tested in its order: attn_qkv before attn_v, for instance).
enum class Role { kHead, kTokenEmbd, kAttnQ, kAttnK, kValue, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOther };

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool IsTokenEmbd(std::string_view name) { return name == "token_embd.weight" || name == "per_layer_token_embd.weight"; }

// Value-like projections (attn_v, fused qkv, MLA's kv_b) share the attn_v rules and its counter.
constexpr std::pair<std::string_view, Role> kRolePatterns[] = {
    {"attn_qkv.weight", Role::kValue},        {"attn_kv_b.weight", Role::kValue},
    {"attn_v.weight", Role::kValue},          {"attn_k.weight", Role::kAttnK},
    {"attn_q.weight", Role::kAttnQ},          {"attn_output.weight", Role::kAttnOutput},
    {"ffn_up", Role::kFfnUp},                 {"ffn_gate", Role::kFfnGate},
    {"ffn_down", Role::kFfnDown},
};

Role RoleOf(std::string_view name) {
  if (name == "output.weight") return Role::kHead;
  if (IsTokenEmbd(name)) return Role::kTokenEmbd;
  for (const auto& [pattern, role] : kRolePatterns) {
    if (Contains(name, pattern)) return role;
  }
  return Role::kOther;
}

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

// The _M mixes spend their extra bits on half of the layers: the first and the last eighth of the
// stack (integer eighths: [0, n/8) and [7n/8, n)), and every third layer of the middle part,
// counting from its start, beginning with the third one.
bool LayerGetsMoreBits(int layer, int n_layers) {
  const int front_end = n_layers / 8;
  const int back_start = 7 * n_layers / 8;
  if (layer < front_end || layer >= back_start) return true;
  return (layer - front_end) % 3 == 2;
}

// What the rules remember while they walk the tensors in llama.cpp's order.
struct MixWalk {
  int values_total = 0;  // value-like projections in the model
  int values_seen = 0;   // ... already given a type
  int ffn_down_seen = 0;
  int n_layer = 0;
  bool tied_head = true;  // no output.weight: token_embd is also the LM head
};

// The LM head (or the tied embedding that serves as one) is the most sensitive matrix: Q6_K, unless
// the mix is Q8_0 already or the row does not fit 256-value blocks.
DType HeadType(DType base, int64_t row) {
  if (row % BlockSize(base) != 0) return DType::kQ8_0;
  return base == DType::kQ8_0 ? DType::kQ8_0 : DType::kQ6_K;
}

// Value projection number `index` of `total`.
DType ValueType(FileType ftype, const MixModel& m, int index, int total, DType base) {
  if (m.n_expert == 8) return DType::kQ8_0;  // 8-expert models: whatever the mix (it costs little)
  switch (ftype) {
    case F::kQ2_K: return m.n_gqa() >= 4 ? DType::kQ4_K : DType::kQ3_K;
    case F::kQ3_K_M: return index < 2 ? DType::kQ5_K : DType::kQ4_K;
    case F::kQ3_K_L: return DType::kQ5_K;
    case F::kQ4_K_M:
    case F::kQ5_K_M: return LayerGetsMoreBits(index, total) ? DType::kQ6_K : base;
    case F::kQ4_K_S: return index < 4 ? DType::kQ5_K : base;
    default: return base;
  }
}

DType FfnDownType(FileType ftype, int layer, int n_layer, DType base) {
  switch (ftype) {
    case F::kQ2_K: return DType::kQ3_K;
    case F::kQ3_K_M: return layer < n_layer / 16 ? DType::kQ5_K : DType::kQ4_K;
    case F::kQ3_K_L: return DType::kQ5_K;
    case F::kQ4_K_M:
    case F::kQ5_K_M: return LayerGetsMoreBits(layer, n_layer) ? DType::kQ6_K : base;
    case F::kQ4_K_S: return layer < n_layer / 8 ? DType::kQ5_K : base;
    default: return base;
  }
}

DType AttnOutputType(FileType ftype, int n_expert, DType base) {
  if (n_expert == 8) {
    const bool low_mix = ftype == F::kQ2_K || ftype == F::kQ3_K_S || ftype == F::kQ3_K_M || ftype == F::kQ4_K_S ||
                         ftype == F::kQ4_K_M;
    return low_mix ? DType::kQ5_K : base;
  }
  switch (ftype) {
    case F::kQ2_K: return DType::kQ3_K;
    case F::kQ3_K_M: return DType::kQ4_K;
    case F::kQ3_K_L: return DType::kQ5_K;
    default: return base;
  }
}

// The mix's type for one tensor before any shape fallback; advances the walk's counters.
DType MixType(MixWalk& walk, const MixModel& m, DType base, const MixTensor& t, FileType ftype) {
  const Role role = RoleOf(t.name);
  if (role == Role::kHead || (role == Role::kTokenEmbd && walk.tied_head)) return HeadType(base, t.ne[0]);
  switch (role) {
    case Role::kValue: {
      const DType type = ValueType(ftype, m, walk.values_seen, walk.values_total, base);
      ++walk.values_seen;
      return type;
    }
    case Role::kAttnK: return m.n_expert == 8 ? DType::kQ8_0 : base;
    case Role::kFfnDown: {
      // Expert tensors are not stored layer by layer, so with experts the layer comes from the name.
      int layer = walk.ffn_down_seen;
      if (m.n_expert > 1) {
        const int named = LayerOf(t.name);
        if (named >= 0 && named < walk.n_layer) layer = named;
      }
      ++walk.ffn_down_seen;
      return FfnDownType(ftype, layer, walk.n_layer, base);
    }
    case Role::kAttnOutput: return AttnOutputType(ftype, m.n_expert, base);
    default: return base;  // untied embeddings (the IQ-only rules are not implemented), the rest
  }
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

  MixWalk walk;
  walk.n_layer = model.n_layer;
  for (const MixTensor& t : tensors) {
    const Role role = RoleOf(t.name);
    if (role == Role::kValue) ++walk.values_total;
    if (role == Role::kHead) walk.tied_head = false;
  }

  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return LlamaTensorLess(tensors[a].name, tensors[b].name); });

  std::vector<std::pair<std::regex, DType>> patterns;
  for (const auto& [pattern, type] : options.tensor_types) patterns.emplace_back(std::regex(pattern), type);

  for (size_t i : order) {
    const MixTensor& t = tensors[i];
    MixDecision& d = out[i];
    d.quantizable = TensorAllowsQuantization(t.name, t.ne);
    if (!d.quantizable) {
      d.type = t.type;
      continue;
    }
    DType type = base;
    bool fit_row = IsQuantized(base);  // a quantized type must suit the row length
    if (options.token_embedding_type && IsTokenEmbd(t.name)) {
      type = *options.token_embedding_type;
      fit_row = true;
    } else if (IsQuantized(base) && !options.pure) {
      type = MixType(walk, model, base, t, options.ftype);
    }
    // After the mix's choice, as llama-quantize applies --tensor-type: the mix's per-layer counters
    // advance as they would without it, so the tensors no pattern names keep their types.
    auto match = std::find_if(patterns.begin(), patterns.end(),
                              [&](const auto& p) { return std::regex_search(t.name, p.first); });
    if (match != patterns.end()) {
      type = match->second;
      fit_row = true;
    }
    d.type = fit_row ? Fallback(t, type, &d) : type;
  }
  return out;
}

}  // namespace gemlet

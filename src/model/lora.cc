// LoRA adapters: loading and checking llama.cpp's GGUF adapter files, and adding their deltas.
#include "model/lora.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "model/decoder_blocks.h"
#include "model/model.h"

namespace gemlet {

namespace {

constexpr std::array<const char*, kLoraTargetCount> kTargetNames = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                                     "ffn_gate", "ffn_up", "ffn_down"};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "blk.<layer>.<target>.weight" -> (layer, target); false for anything else.
bool ParseTarget(const std::string& name, int n_layers, int* layer, LoraTarget* target) {
  int l = -1, used = 0;
  if (std::sscanf(name.c_str(), "blk.%d.%n", &l, &used) != 1 || used == 0 || l < 0 || l >= n_layers) return false;
  const std::string rest = name.substr(static_cast<size_t>(used));
  for (int t = 0; t < kLoraTargetCount; ++t) {
    if (rest == std::string(kTargetNames[static_cast<size_t>(t)]) + ".weight") {
      *layer = l;
      *target = static_cast<LoraTarget>(t);
      return true;
    }
  }
  return false;
}

// A string key's value, or "" when it is absent or not a string.
std::string StringOr(const GgufFile& f, std::string_view key) {
  auto v = f.GetString(key);
  return v.ok() ? v.value() : std::string();
}

// "google/gemma-3-1b-it" -> "gemma31bit": a model's name as files spell it in different ways.
std::string NormalizedName(std::string_view name) {
  if (const size_t slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Whether the adapter's base (general.base_model.0.name) is the model: one name holds the other
// (a quantized file's name adds to it) for one of the model's names. True when either side names none.
bool SameBaseName(const GgufFile& adapter, const GgufFile& model, std::string* wanted, std::string* got) {
  *wanted = StringOr(adapter, "general.base_model.0.name");
  const std::string want = NormalizedName(*wanted);
  if (want.empty()) return true;
  const std::vector<std::string> names = {
      StringOr(model, "general.name"), StringOr(model, "general.basename"),
      StringOr(model, "general.basename") + StringOr(model, "general.size_label") + StringOr(model, "general.finetune")};
  bool any = false;
  for (const std::string& n : names) {
    const std::string have = NormalizedName(n);
    if (have.empty()) continue;
    any = true;
    if (have.find(want) != std::string::npos || want.find(have) != std::string::npos) return true;
    if (got->empty()) *got = n;
  }
  return !any;
}

}  // namespace

const char* LoraTargetName(LoraTarget target) { return kTargetNames[static_cast<size_t>(target)]; }

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::Load(std::shared_ptr<const GgufFile> file, const Model& base,
                                                       std::string identity, bool any_base) {
  const GgufFile& f = *file;
  const std::string where = "LoRA adapter '" + f.path() + "'";
  const std::string type = StringOr(f, "general.type");
  if (type != "adapter") {
    return Status::Error(where + " is not an adapter: general.type is '" + type + "', expected 'adapter'");
  }
  const std::string adapter_type = StringOr(f, "adapter.type");
  if (adapter_type != "lora") {
    return Status::Error(where + ": adapter.type is '" + adapter_type + "'; gemlet reads LoRA adapters ('lora')");
  }
  if (f.Has("adapter.alora.invocation_tokens")) {
    return Status::Error(where + " is an activated LoRA (aLoRA), which gemlet does not run");
  }
  const std::string arch = StringOr(f, "general.architecture");
  const std::string base_arch = StringOr(base.gguf(), "general.architecture");
  if (arch != base_arch) {
    return Status::Error(where + " was made for architecture '" + arch + "', but the model is '" + base_arch + "'");
  }
  if (std::string wanted, got; !any_base && !SameBaseName(f, base.gguf(), &wanted, &got)) {
    return Status::Error(where + " was made for '" + wanted + "', but the model is '" + got +
                         "' (if they are the same weights, load it anyway: --lora-any-base)");
  }
  auto adapter = std::unique_ptr<LoraAdapter>(new LoraAdapter());
  ASSIGN_OR_RETURN(adapter->alpha_, f.GetF32Or("adapter.lora.alpha", 0.0f));
  adapter->identity_ = std::move(identity);
  adapter->packed_ = std::make_unique<PackedWeightStore>(f.mapping());

  // Pair up `<base>.lora_a` with `<base>.lora_b`.
  std::map<std::string, std::pair<const GgufTensor*, const GgufTensor*>> pairs;
  for (const GgufTensor& t : f.tensors()) {
    const std::string name(t.name);
    if (EndsWith(name, ".lora_a")) {
      pairs[name.substr(0, name.size() - 7)].first = &t;
    } else if (EndsWith(name, ".lora_b")) {
      pairs[name.substr(0, name.size() - 7)].second = &t;
    } else if (EndsWith(name, "_norm.weight")) {
      // mergekit-extract-lora also stores norms; llama.cpp skips them too, and so do we.
      continue;
    } else {
      return Status::Error(where + ": tensor '" + name + "' is neither a .lora_a nor a .lora_b");
    }
  }
  if (pairs.empty()) return Status::Error(where + " holds no LoRA tensors");

  const ModelConfig& c = base.config();
  adapter->index_.assign(static_cast<size_t>(c.n_layers), {-1, -1, -1, -1, -1, -1, -1});
  const WeightBinder binder(f, adapter->packed_.get());
  for (const auto& [name, ab] : pairs) {
    if (ab.first == nullptr || ab.second == nullptr) {
      return Status::Error(where + ": '" + name + "' has a " + (ab.first ? "lora_a" : "lora_b") + " but no " +
                           (ab.first ? "lora_b" : "lora_a"));
    }
    int layer = 0;
    LoraTarget target{};
    if (!ParseTarget(name, c.n_layers, &layer, &target)) {
      return Status::Error(where + " changes '" + name +
                           "'; gemlet applies adapters to the attention and MLP projections of the decoder layers "
                           "(attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down)");
    }
    const GgufTensor& a = *ab.first;
    const GgufTensor& b = *ab.second;
    const GgufTensor* w = base.gguf().FindTensor(name);
    if (w == nullptr) {
      // HF keeps k/v projections on KV-shared layers (Gemma 3n/4) that read another layer's cache:
      // an adapter on them changes nothing there, in transformers as here.
      const bool kv_shared = c.layers[static_cast<size_t>(layer)].kv_source >= 0;
      if (kv_shared && (target == LoraTarget::kK || target == LoraTarget::kV)) continue;
      return Status::Error(where + ": '" + name + "' is not in the base model (an adapter for another model?)");
    }
    if (a.n_dims > 2 || b.n_dims > 2 || a.ne[0] != w->ne[0] || b.ne[1] != w->ne[1] || a.ne[1] != b.ne[0]) {
      return Status::Error(where + ": '" + name + "' has lora_a " + a.ShapeString() + " and lora_b " +
                           b.ShapeString() + ", which do not fit the base tensor " + w->ShapeString() +
                           " (expected lora_a [" + std::to_string(w->ne[0]) + ", r] and lora_b [r, " +
                           std::to_string(w->ne[1]) + "]: an adapter for another model?)");
    }
    LoraPair pair;
    const int64_t rank = a.ne[1];
    ASSIGN_OR_RETURN(pair.a, binder.Matrix(name + ".lora_a", a.ne[0], rank));
    ASSIGN_OR_RETURN(pair.b, binder.Matrix(name + ".lora_b", rank, b.ne[1]));
    // llama.cpp: scale = alpha / rank when the file gives alpha, else 1 (get_scale in llama-adapter).
    pair.scale = adapter->alpha_ != 0.0f ? adapter->alpha_ / static_cast<float>(rank) : 1.0f;
    adapter->index_[static_cast<size_t>(layer)][static_cast<size_t>(target)] =
        static_cast<int>(adapter->pairs_.size());
    adapter->pairs_.push_back(pair);
    adapter->max_rank_ = std::max(adapter->max_rank_, static_cast<int>(rank));
    adapter->tensor_bytes_ += a.nbytes + b.nbytes;
  }
  adapter->file_ = std::move(file);
  return adapter;
}

void LoraAdapter::Prepare(KernelContext& ctx) const {
  for (const LoraPair& p : pairs_) {
    PrepareMatMul(p.a, ctx);
    PrepareMatMul(p.b, ctx);
  }
}

LoraStack::LoraStack(std::vector<LoraUse> uses) : uses_(std::move(uses)) {
  for (const LoraUse& u : uses_) {
    char scale[32];
    std::snprintf(scale, sizeof(scale), "%.9g", static_cast<double>(u.scale));
    key_ += (key_.empty() ? "" : ";") + u.adapter->identity() + "*" + scale;
    max_rank_ = std::max(max_rank_, u.adapter->max_rank());
  }
}

void ApplyLora(const ForwardStep& step, int layer, LoraTarget target, const float* x, int64_t n_in, float* y,
               int64_t n_out, Workspace& ws, KernelContext& ctx) {
  const std::span<const SequenceRows> seqs = step.seqs;
  for (size_t s = 0; s < seqs.size();) {
    const LoraStack* stack = seqs[s].lora;
    size_t e = s + 1;
    while (e < seqs.size() && seqs[e].lora == stack) ++e;
    if (stack != nullptr) {
      const int row0 = seqs[s].row0;
      const int rows = seqs[e - 1].row0 + seqs[e - 1].n - row0;
      for (const LoraUse& use : stack->uses()) {
        const LoraPair* p = use.adapter->Find(layer, target);
        if (p == nullptr || use.scale == 0.0f) continue;
        const size_t mid_floats = static_cast<size_t>(rows) * p->rank();
        const size_t out_floats = static_cast<size_t>(rows) * n_out;
        // Grown when a larger adapter or step first needs it, then reused: steady decoding allocates nothing.
        if (ws.lora_mid.size() < mid_floats) ws.lora_mid.resize(mid_floats);
        if (ws.lora_out.size() < out_floats) ws.lora_out.resize(out_floats);
        MatMul(p->a, x + static_cast<size_t>(row0) * n_in, rows, ws.lora_mid.data(), ctx);
        MatMul(p->b, ws.lora_mid.data(), rows, ws.lora_out.data(), ctx);
        const float scale = use.scale * p->scale;
        float* out = y + static_cast<size_t>(row0) * n_out;
        for (size_t k = 0; k < out_floats; ++k) out[k] += scale * ws.lora_out[k];
      }
    }
    s = e;
  }
}

}  // namespace gemlet

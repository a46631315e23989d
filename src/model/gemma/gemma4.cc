// Gemma 4 (general.architecture "gemma4"): direct-weight RMSNorm, q/k norms and a weightless v norm,
// attention scale 1, separate head size and KV heads on global layers, K=V on global layers of the
// large models, proportional RoPE on global layers, per-layer embeddings (E2B/E4B), KV sharing in
// the last layers, dense + routed-expert MoE (26B-A4B), per-layer output scale, final soft-cap.
// HF: Gemma4ForCausalLM (gemma4_text) and Gemma4UnifiedForCausalLM (gemma4_unified_text).
#include <algorithm>
#include <array>
#include <cmath>

#include "model/families.h"
#include "model/family_parts.h"

namespace gemlet {
namespace {

// The experts of one MoE layer: a [n_in, n_out, n_expert] GGUF tensor viewed as n_expert matrices.
struct ExpertMatrices {
  WeightMatrix first;      // expert 0
  size_t expert_bytes = 0;
  std::vector<PackedWeights*> packed;  // one slot per expert, or none
  WeightMatrix Expert(int e) const {
    WeightMatrix m = first;
    m.data += static_cast<size_t>(e) * expert_bytes;
    m.packed = packed.empty() ? nullptr : packed[static_cast<size_t>(e)];
    return m;
  }
};

Result<ExpertMatrices> BindExperts(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out, int n_expert,
                                   PackedWeightStore* store) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) return Status::Error("missing tensor '" + name + "'");
  if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_expert || t->ne[3] != 1) {
    return Status::Error("tensor '" + name + "' has shape " + t->ShapeString() + ", expected [" + std::to_string(n_in) +
                         ", " + std::to_string(n_out) + ", " + std::to_string(n_expert) + "]");
  }
  if (!GetDTypeInfo(t->type).can_compute) {
    return Status::Error("tensor '" + name + "' has type " + DTypeName(t->type) + ", which gemlet cannot compute yet");
  }
  ExpertMatrices m;
  m.first = {t->type, t->data, n_in, n_out, RowBytes(t->type, n_in)};
  m.expert_bytes = m.first.row_bytes * static_cast<size_t>(n_out);
  if (store != nullptr) {
    // Remembered like every other matrix: the packed-weight cache file holds all experts (a process
    // then maps them instead of packing each on its first token, into anonymous memory), and
    // PrepareWeights packs them ahead. Without either, an expert is packed when a token first
    // chooses it.
    for (int e = 0; e < n_expert; ++e) {
      WeightMatrix expert = m.first;
      expert.data += static_cast<size_t>(e) * m.expert_bytes;
      m.packed.push_back(store->NewSlotFor(expert));
    }
  }
  return m;
}

class Gemma4 final : public Model {
 public:
  using Model::Model;

  Status Load() {
    const GgufFile& f = *gguf_;
    const std::string arch = "gemma4";
    RopeKeys rope;
    RETURN_IF_ERROR(ReadCommonConfig(f, arch, &config_, &rope));
    if (!f.Has(arch + ".attention.sliding_window_pattern")) {
      return Status::Error("missing metadata key '" + arch + ".attention.sliding_window_pattern'");
    }
    RETURN_IF_ERROR(ReadSlidingPattern(f, arch, 0, &config_));
    ApplyRope(rope, /*scale_sliding_layers=*/false, &config_);
    config_.attn_scale = 1.0f;  // Gemma 4 relies on q/k norms instead of 1/sqrt(head_dim) (HF: scaling = 1.0)
    ASSIGN_OR_RETURN(config_.final_softcap, f.GetF32Or(arch + ".final_logit_softcapping", 0.0f));

    // Sliding layers have their own head size (256 vs 512 on the real models).
    ASSIGN_OR_RETURN(uint32_t hd_swa, f.GetU32Or(arch + ".attention.key_length_swa", config_.layers[0].head_dim));
    ASSIGN_OR_RETURN(uint32_t hdv_swa, f.GetU32Or(arch + ".attention.value_length_swa", hd_swa));
    for (LayerConfig& l : config_.layers) {
      if (l.sliding) {
        l.head_dim = static_cast<int>(hd_swa);
        l.head_dim_v = static_cast<int>(hdv_swa);
      }
      if (l.head_dim != l.head_dim_v) return Status::Error("Gemma 4 needs equal key and value head sizes");
    }
    for (const char* key : {".rope.dimension_count", ".rope.dimension_count_swa"}) {
      ASSIGN_OR_RETURN(uint32_t n_rot, f.GetU32Or(arch + key, 0));
      const bool swa = std::string(key).find("swa") != std::string::npos;
      const uint32_t hd = swa ? hd_swa : static_cast<uint32_t>(config_.layers.back().head_dim);
      for (const LayerConfig& l : config_.layers) {
        if (n_rot != 0 && l.sliding == swa && n_rot != static_cast<uint32_t>(l.head_dim)) {
          return Status::Error(arch + key + " = " + std::to_string(n_rot) + " (partial rotation) is not supported; head size is " +
                               std::to_string(hd));
        }
      }
    }

    // KV sharing: the last n_shared layers reuse the K/V of the last earlier layer of the same type
    // (HF's rule; llama.cpp's "n-2 / n-1" shortcut agrees on the real E2B/E4B layouts only).
    ASSIGN_OR_RETURN(uint32_t n_shared, f.GetU32Or(arch + ".attention.shared_kv_layers", 0));
    RETURN_IF_ERROR(AssignSharedKvSources(static_cast<int>(std::min<uint32_t>(n_shared, 1u << 20)), &config_));
    first_output_only_ = FirstOutputOnlyLayer(config_);

    ASSIGN_OR_RETURN(uint32_t ple, f.GetU32Or(arch + ".embedding_length_per_layer_input", 0));
    ASSIGN_OR_RETURN(uint32_t n_expert, f.GetU32Or(arch + ".expert_count", 0));
    ASSIGN_OR_RETURN(uint32_t n_used, f.GetU32Or(arch + ".expert_used_count", 0));
    n_expert_ = static_cast<int>(n_expert);
    n_expert_used_ = static_cast<int>(n_used);
    if (n_expert_ > 0 && (n_expert_used_ <= 0 || n_expert_used_ > n_expert_ || n_expert_used_ > kMaxExpertsUsed)) {
      return Status::Error(arch + ".expert_used_count must be between 1 and expert_count (and at most " +
                           std::to_string(kMaxExpertsUsed) + ")");
    }
    std::vector<uint32_t> expert_ffn(config_.n_layers, 0);
    if (n_expert_ > 0) {
      ASSIGN_OR_RETURN(expert_ffn, f.GetU32PerLayer(arch + ".expert_feed_forward_length", config_.n_layers));
    }

    const int d = config_.d_model;
    WeightBinder w(f, packed_.get());
    RETURN_IF_ERROR(BindOutputHead(w, config_, &head_));
    if (ple > 0) RETURN_IF_ERROR(ple_.Bind(w, f, config_, static_cast<int>(ple)));
    std::vector<float> rope_factors;
    if (w.Has("rope_freqs.weight")) {
      ASSIGN_OR_RETURN(rope_factors, w.Vector("rope_freqs.weight", config_.layers.back().head_dim / 2));
    }

    layers_.resize(config_.n_layers);
    for (int i = 0; i < config_.n_layers; ++i) {
      Layer& l = layers_[i];
      const LayerConfig& lc = config_.layers[i];
      RETURN_IF_ERROR(BindSandwichNorms(w, i, d, &l));
      RETURN_IF_ERROR(BindNormedAttention(w, config_, i, /*allow_k_eq_v=*/true, &l.attn));
      RETURN_IF_ERROR(BindMlp(w, config_, i, &l.mlp));
      if (w.Has(LayerTensor(i, "layer_output_scale.weight"))) {
        ASSIGN_OR_RETURN(auto scale, w.Vector(LayerTensor(i, "layer_output_scale.weight"), 1));
        l.output_scale = scale[0];
      }
      if (n_expert_ > 0 && w.Has(LayerTensor(i, "ffn_gate_inp.weight"))) {
        RETURN_IF_ERROR(BindMoe(w, i, static_cast<int>(expert_ffn[i]), &l.moe));
      }
      if (ple_.dim > 0) {
        ASSIGN_OR_RETURN(l.ple_gate, w.Matrix(LayerTensor(i, "inp_gate.weight"), d, ple_.dim));
        ASSIGN_OR_RETURN(l.ple_proj, w.Matrix(LayerTensor(i, "proj.weight"), ple_.dim, d));
        ASSIGN_OR_RETURN(l.ple_post_norm, w.Vector(LayerTensor(i, "post_norm.weight"), d));
      }
      l.inv_freq = RopeInvFreq(lc);
      // Proportional RoPE on global layers: llama.cpp divides by rope_freqs (1 rotates, 1e30 freezes);
      // HF zeroes the frequencies past partial_rotary_factor. Both leave those pairs unrotated.
      if (!lc.sliding && !rope_factors.empty()) {
        for (size_t k = 0; k < l.inv_freq.size(); ++k) l.inv_freq[k] /= rope_factors[k];
      }
    }
    for (int i = 0; i < config_.n_layers; ++i) max_moe_ffn_ = std::max(max_moe_ffn_, layers_[i].moe.ffn);
    return Status::Ok();
  }

  bool TakesEmbeddings() const override { return true; }
  // Gemma 4's drafter reads its token inputs from the target's table (HF: target_model_input_embeddings).
  const WeightMatrix* InputEmbedding() const override { return &head_.embedding; }

  size_t ExtraScratchFloats(int max_batch) const override {
    ScratchArena sizing(nullptr);
    Layout(max_batch, sizing);
    return sizing.used();
  }

 public:
  // Global layers rotate with proportional RoPE: their own frequencies, not the config's.
  const std::vector<float>& KeyRope(int layer) const override { return layers_[static_cast<size_t>(layer)].inv_freq; }

 protected:
  void RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const override;

 private:
  struct MoeWeights {
    int ffn = 0;                          // expert intermediate size; 0 = no MoE in this layer
    WeightMatrix router;                  // [n_expert, d_model]
    std::vector<float> router_scale;      // [d_model]
    std::vector<float> expert_scale;      // [n_expert]
    ExpertMatrices gate_up, down;         // per expert [2*ffn, d] and [d, ffn]
    std::vector<float> pre_norm, post_norm_dense, post_norm_moe;
  };
  struct Layer : SandwichNorms {
    AttentionWeights attn;  // v empty: K=V; k empty: KV shared from an earlier layer
    MlpWeights mlp;
    MoeWeights moe;
    WeightMatrix ple_gate, ple_proj;  // [ple, d], [d, ple]
    std::vector<float> ple_post_norm;
    float output_scale = 1.0f;
    std::vector<float> inv_freq;
  };

  Status BindMoe(const WeightBinder& w, int i, int ffn, MoeWeights* m) {
    const int d = config_.d_model;
    m->ffn = ffn;
    ASSIGN_OR_RETURN(m->router, w.Matrix(LayerTensor(i, "ffn_gate_inp.weight"), d, n_expert_));
    ASSIGN_OR_RETURN(m->router_scale, w.Vector(LayerTensor(i, "ffn_gate_inp.scale"), d));
    ASSIGN_OR_RETURN(m->expert_scale, w.Vector(LayerTensor(i, "ffn_down_exps.scale"), n_expert_));
    PackedWeightStore* store = packed_.get();
    ASSIGN_OR_RETURN(m->gate_up, BindExperts(*gguf_, LayerTensor(i, "ffn_gate_up_exps.weight"), d, 2 * ffn, n_expert_, store));
    ASSIGN_OR_RETURN(m->down, BindExperts(*gguf_, LayerTensor(i, "ffn_down_exps.weight"), ffn, d, n_expert_, store));
    ASSIGN_OR_RETURN(m->pre_norm, w.Vector(LayerTensor(i, "pre_ffw_norm_2.weight"), d));
    ASSIGN_OR_RETURN(m->post_norm_dense, w.Vector(LayerTensor(i, "post_ffw_norm_1.weight"), d));
    ASSIGN_OR_RETURN(m->post_norm_moe, w.Vector(LayerTensor(i, "post_ffw_norm_2.weight"), d));
    return Status::Ok();
  }

  // Views into Workspace::extra, laid out once per step; nothing is allocated while layers run.
  struct Scratch {
    float *per_layer, *ple_row, *ple_act, *ple_out;  // [B, n_layers, ple], [n_layers * ple], [B, ple], [B, d]
    float *residual, *moe_out;                       // [B, d] each
    float *probs, *order, *moe_x;                    // routing: [B, n_expert], one token's [n_expert], [B, d]
    // The step's MoE work, grouped by expert (indices and counts held as floats, as `order` does:
    // exact below 2^24): every token's normed input [B, d]; its experts and their weights [B, k];
    // each expert's row count, first pair and fill cursor [n_expert]; the (token, weight) pairs of
    // each expert in turn [B * k]; an expert's rows gathered [B, d], its gate|up [B, 2 ffn],
    // activations [B, ffn] and outputs [B, d] (k rows where k > B: one token's experts); each
    // token's weighted sum [B, d].
    float *moe_xn, *routes, *route_weights, *group_size, *group_start, *group_cursor, *group_tokens, *group_weights;
    float *gathered, *gate_up, *act, *expert_out, *acc;
  };
  Scratch Layout(int max_batch, ScratchArena& arena) const {
    const size_t d = config_.d_model, B = max_batch, e = n_expert_;
    const size_t ple = ple_.dim, width = ple * config_.n_layers;
    Scratch s{};  // the MoE views stay null in a model without experts
    s.per_layer = arena.Take(B * width);
    s.ple_row = arena.Take(width);
    s.ple_act = arena.Take(B * ple);
    s.ple_out = arena.Take(B * d);
    s.residual = arena.Take(B * d);
    s.moe_out = arena.Take(B * d);
    if (max_moe_ffn_ > 0) {
      const size_t k = n_expert_used_, ffn = max_moe_ffn_;
      s.probs = arena.Take(B * e);
      s.order = arena.Take(e);
      s.moe_x = arena.Take(B * d);
      s.moe_xn = arena.Take(B * d);
      s.routes = arena.Take(B * k);
      s.route_weights = arena.Take(B * k);
      s.group_size = arena.Take(e);
      s.group_start = arena.Take(e);
      s.group_cursor = arena.Take(e);
      s.group_tokens = arena.Take(B * k);
      s.group_weights = arena.Take(B * k);
      s.gathered = arena.Take(B * d);
      const size_t rows = std::max(B, k);  // an expert's tokens, or one token's k experts (decode)
      s.gate_up = arena.Take(rows * 2 * ffn);
      s.act = arena.Take(rows * ffn);
      s.expert_out = arena.Take(rows * d);
      s.acc = arena.Take(B * d);
    }
    return s;
  }

  void MoeBlock(const MoeWeights& m, int n, KernelContext& ctx, const Scratch& s) const;
  void OneTokenExperts(const MoeWeights& m, KernelContext& ctx, const Scratch& s) const;
  static constexpr int kMaxExpertsUsed = 32;  // expert_used_count at load (8 in the 26B-A4B)

  OutputHead head_;
  PerLayerEmbedding ple_;  // dim 0: no per-layer embeddings (26B, 31B, 12B)
  int n_expert_ = 0, n_expert_used_ = 0, max_moe_ffn_ = 0;

  int first_output_only_ = 0;  // FirstOutputOnlyLayer: the KV-shared tail (n_layers: none)
  std::vector<Layer> layers_;
};

// Routed experts (26B-A4B): router on rmsnorm(residual) * scale / sqrt(d), softmax, top-k,
// renormalised, times a per-expert scale; each chosen expert is a GeGLU MLP on pre_norm(residual).
// A step's tokens are grouped by expert, so each expert's weights are read once per step as one
// GEMM over the tokens that chose it (a prompt of 512 tokens reads each expert once, not once per
// token that chose it). A token's experts are summed in ascending expert id whatever the step
// holds, and the GEMM's rows do not depend on their neighbours (docs/determinism.md): a token's
// result is the same alone or in a batch.
void Gemma4::MoeBlock(const MoeWeights& m, int n, KernelContext& ctx, const Scratch& s) const {
  const int d = config_.d_model, k_used = n_expert_used_, ffn = m.ffn;
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  for (int t = 0; t < n; ++t) {
    float* x = s.moe_x + static_cast<size_t>(t) * d;
    ctx.kernels().rms_norm(s.residual + static_cast<size_t>(t) * d, nullptr, d, config_.norm_eps, x);
    for (int k = 0; k < d; ++k) x[k] *= m.router_scale[k] * inv_sqrt_d;
  }
  MatMul(m.router, s.moe_x, n, s.probs, ctx);
  std::fill(s.group_size, s.group_size + n_expert_, 0.0f);
  for (int t = 0; t < n; ++t) {
    const float* r = s.residual + static_cast<size_t>(t) * d;
    float* probs = s.probs + static_cast<size_t>(t) * n_expert_;
    ctx.kernels().softmax(probs, n_expert_);
    // Top-k by probability, ties to the lower expert id (as torch.topk on CPU).
    for (int e = 0; e < n_expert_; ++e) s.order[e] = static_cast<float>(e);
    std::partial_sort(s.order, s.order + k_used, s.order + n_expert_, [&](float a, float b) {
      const int ia = static_cast<int>(a), ib = static_cast<int>(b);
      return probs[ia] > probs[ib] || (probs[ia] == probs[ib] && ia < ib);
    });
    float total = 0;
    for (int k = 0; k < k_used; ++k) total += probs[static_cast<int>(s.order[k])];
    for (int k = 0; k < k_used; ++k) {
      const int e = static_cast<int>(s.order[k]);
      s.routes[static_cast<size_t>(t) * k_used + k] = static_cast<float>(e);
      s.route_weights[static_cast<size_t>(t) * k_used + k] = probs[e] / total * m.expert_scale[e];
      s.group_size[e] += 1.0f;
    }
    ctx.kernels().rms_norm(r, m.pre_norm.data(), d, config_.norm_eps, s.moe_xn + static_cast<size_t>(t) * d);
  }
  // Each expert's (token, weight) pairs, experts in ascending id, tokens in order within each.
  float next = 0;
  for (int e = 0; e < n_expert_; ++e) {
    s.group_start[e] = s.group_cursor[e] = next;
    next += s.group_size[e];
  }
  for (int t = 0; t < n; ++t) {
    for (int k = 0; k < k_used; ++k) {
      const size_t slot = static_cast<size_t>(t) * k_used + k;
      const auto pair = static_cast<size_t>(s.group_cursor[static_cast<size_t>(s.routes[slot])]++);
      s.group_tokens[pair] = static_cast<float>(t);
      s.group_weights[pair] = s.route_weights[slot];
    }
  }
  std::fill(s.acc, s.acc + static_cast<size_t>(n) * d, 0.0f);
  if (n == 1) return OneTokenExperts(m, ctx, s);
  for (int e = 0; e < n_expert_; ++e) {
    const auto rows = static_cast<int>(s.group_size[e]), first = static_cast<int>(s.group_start[e]);
    if (rows == 0) continue;
    for (int i = 0; i < rows; ++i) {
      const float* x = s.moe_xn + static_cast<size_t>(s.group_tokens[first + i]) * d;
      std::copy(x, x + d, s.gathered + static_cast<size_t>(i) * d);
    }
    MatMul(m.gate_up.Expert(e), s.gathered, rows, s.gate_up, ctx);
    for (int i = 0; i < rows; ++i) {  // first half gate, second half up
      float* gu = s.gate_up + static_cast<size_t>(i) * 2 * ffn;
      ctx.kernels().gelu_tanh_mul(gu, gu + ffn, ffn);
      std::copy(gu, gu + ffn, s.act + static_cast<size_t>(i) * ffn);
    }
    MatMul(m.down.Expert(e), s.act, rows, s.expert_out, ctx);
    for (int i = 0; i < rows; ++i) {
      const size_t t = static_cast<size_t>(s.group_tokens[first + i]);
      ctx.kernels().Axpy(s.group_weights[first + i], s.expert_out + static_cast<size_t>(i) * d, s.acc + t * d, d);
    }
  }
  for (int t = 0; t < n; ++t) {
    const size_t at = static_cast<size_t>(t) * d;
    ctx.kernels().rms_norm(s.acc + at, m.post_norm_moe.data(), d, config_.norm_eps, s.moe_out + at);
  }
}

// MoeBlock's experts for a step of one token (decode): the k chosen experts' gate|up matrices as one
// parallel loop and their down matrices as another (MatMulExperts), rather than two loops per
// expert, each too short to stream well. Each expert's product is the same as MoeBlock's loop
// computes, and the experts are summed in the same ascending order.
void Gemma4::OneTokenExperts(const MoeWeights& m, KernelContext& ctx, const Scratch& s) const {
  const int d = config_.d_model, ffn = m.ffn;
  std::array<WeightMatrix, kMaxExpertsUsed> gate_up, down;
  std::array<float, kMaxExpertsUsed> weight;
  int used = 0;
  for (int e = 0; e < n_expert_; ++e) {
    if (s.group_size[e] == 0) continue;
    gate_up[used] = m.gate_up.Expert(e);
    down[used] = m.down.Expert(e);
    weight[used] = s.group_weights[static_cast<size_t>(s.group_start[e])];
    ++used;
  }
  MatMulExperts(gate_up.data(), used, s.moe_xn, /*one_input=*/true, s.gate_up, ctx);
  for (int k = 0; k < used; ++k) {  // first half gate, second half up
    float* gu = s.gate_up + static_cast<size_t>(k) * 2 * ffn;
    ctx.kernels().gelu_tanh_mul(gu, gu + ffn, ffn);
    std::copy(gu, gu + ffn, s.act + static_cast<size_t>(k) * ffn);
  }
  MatMulExperts(down.data(), used, s.act, /*one_input=*/false, s.expert_out, ctx);
  for (int k = 0; k < used; ++k) ctx.kernels().Axpy(weight[k], s.expert_out + static_cast<size_t>(k) * d, s.acc, d);
  ctx.kernels().rms_norm(s.acc, m.post_norm_moe.data(), d, config_.norm_eps, s.moe_out);
}

void Gemma4::RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const {
  const ModelConfig& c = config_;
  const int d = c.d_model;
  const float eps = c.norm_eps;
  EmbedTokens(head_.embedding, step.tokens, step.n_rows, c.embed_scale, ws.x.data());
  ScratchArena arena(ws.extra.data());
  const Scratch s = Layout(ws.max_batch, arena);
  // An image's rows take the encoder's embeddings, unscaled. The per-layer inputs then see them
  // through the projection, while their table part reads the pad row: HF replaces the placeholder
  // ids by pad and projects the merged inputs_embeds (Gemma4Model.forward; matches hf-mm's logits).
  PlaceEmbeddings(step, d, ws.x.data());
  if (ple_.dim > 0) ple_.Compute(c, step.tokens, step.embeddings, step.n_rows, ws.x.data(), ctx, s.ple_row, s.per_layer);
  // The layers run on `rows`: the whole step, or from the output-only tail on, its output rows.
  ForwardStep rows = step;
  bool held_kv_committed = false;
  const bool narrow = TailCanNarrow(step);
  for (int i = 0; i < c.n_layers && !ws.StopRequested(); ++i) {
    if (i == first_output_only_ && narrow) {
      if (step.logits == nullptr) break;  // no logits wanted: nothing would read what the tail computes
      rows = NarrowToOutputRows(c, step, ws, {{s.per_layer, static_cast<size_t>(ple_.dim) * c.n_layers}});
      held_kv_committed = true;
    }
    const int n = rows.n_rows;
    const Layer& l = layers_[i];
    NormRows(ctx, ws.x.data(), l.attn_norm, n, d, eps, ws.xn.data());
    // An image attends both ways (use_bidirectional_attention = "vision") on sliding layers only;
    // global layers stay causal (HF 5.17: the two-way block on every layer puts hf-mm
    // gemma4_bidir_image's logits off by 11, on sliding layers only they match to 4e-5).
    ForwardStep layer_rows = rows;
    if (!c.layers[i].sliding) layer_rows.key_end = nullptr;
    NormedAttentionSublayer(c, i, l.attn, l.inv_freq, layer_rows, ws, ctx);
    NormRows(ctx, ws.tmp.data(), l.post_attn_norm, n, d, eps, ws.tmp.data());
    AddRows(ctx, ws.x.data(), ws.tmp.data(), n, d);

    NormRows(ctx, ws.x.data(), l.ffn_norm, n, d, eps, ws.xn.data());
    MlpSublayer(i, l.mlp, layer_rows, ws, ctx);
    if (l.moe.ffn > 0) {
      // Dense MLP and routed experts side by side, each with its own post-norm, both on the residual.
      NormRows(ctx, ws.tmp.data(), l.moe.post_norm_dense, n, d, eps, ws.tmp.data());
      std::copy(ws.x.begin(), ws.x.begin() + static_cast<size_t>(n) * d, s.residual);
      MoeBlock(l.moe, n, ctx, s);
      AddRows(ctx, ws.tmp.data(), s.moe_out, n, d);
    }
    NormRows(ctx, ws.tmp.data(), l.post_ffn_norm, n, d, eps, ws.tmp.data());
    AddRows(ctx, ws.x.data(), ws.tmp.data(), n, d);

    if (ple_.dim > 0) {
      // h += post_norm(proj(gelu(gate(h)) * per_layer_input[i]))
      MatMul(l.ple_gate, ws.x.data(), n, s.ple_act, ctx);
      ple_.GateWithInput(c, i, s.per_layer, n, ctx, s.ple_act);
      MatMul(l.ple_proj, s.ple_act, n, s.ple_out, ctx);
      NormRows(ctx, s.ple_out, l.ple_post_norm, n, d, eps, s.ple_out);
      AddRows(ctx, ws.x.data(), s.ple_out, n, d);
    }
    if (l.output_scale != 1.0f) {
      for (size_t k = 0; k < static_cast<size_t>(n) * d; ++k) ws.x[k] *= l.output_scale;
    }
  }
  if (!held_kv_committed) CommitHeldKv(step, ws);  // K/V that KV-shared layers read during this step
  if (!ws.StopRequested()) OutputLogits(c, head_, rows, ws, ctx);
}

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma4(std::shared_ptr<const GgufFile> gguf) {
  return LoadFamily<Gemma4>(std::move(gguf));
}

}  // namespace gemlet

// Gemma 3n (general.architecture "gemma3n"): the residual is several AltUp streams (predict -> run the
// block on the active stream -> correct), a LAuReL low-rank branch beside attention, per-layer
// embeddings fed into the non-active streams, KV sharing in the last layers, Gaussian top-k
// activation sparsity in the first MLPs, direct-weight RMSNorm, q/k norms and a weightless v norm,
// attention scale 1, final soft-cap. HF: Gemma3nForCausalLM (gemma3n_text), transformers 5.17.
#include <algorithm>
#include <cmath>

#include "model/families.h"
#include "model/family_parts.h"

namespace gemlet {
namespace {

constexpr int kMaxAltup = 16;  // AltUp streams (4 in every released model)

// A GGUF [n, n, count] tensor (llama.cpp stacks altup_projections.{0,1,2} this way) as count matrices.
Result<std::vector<WeightMatrix>> BindStacked(const GgufFile& f, const std::string& name, int64_t n, int count) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) return Status::Error("missing tensor '" + name + "'");
  if (t->ne[0] != n || t->ne[1] != n || t->ne[2] != count || t->ne[3] != 1) {
    return Status::Error("tensor '" + name + "' has shape " + t->ShapeString() + ", expected [" + std::to_string(n) +
                         ", " + std::to_string(n) + ", " + std::to_string(count) + "]");
  }
  if (!GetDTypeInfo(t->type).can_compute) {
    return Status::Error("tensor '" + name + "' has type " + DTypeName(t->type) + ", which gemlet cannot compute yet");
  }
  std::vector<WeightMatrix> out(static_cast<size_t>(count));
  const size_t row_bytes = RowBytes(t->type, n);
  for (int i = 0; i < count; ++i) {
    out[i] = {t->type, t->data + static_cast<size_t>(i) * row_bytes * static_cast<size_t>(n), n, n, row_bytes};
  }
  return out;
}

// sqrt(mean(x^2)) of one row, accumulated in double.
float RootMeanSquare(const float* x, int d) {
  double s = 0;
  for (int k = 0; k < d; ++k) s += static_cast<double>(x[k]) * x[k];
  return static_cast<float>(std::sqrt(s / d));
}

class Gemma3n final : public Model {
 public:
  using Model::Model;
  bool TakesEmbeddings() const override { return true; }

  Status Load() {
    const GgufFile& f = *gguf_;
    const std::string arch = "gemma3n";
    RopeKeys rope;
    RETURN_IF_ERROR(ReadCommonConfig(f, arch, &config_, &rope));
    // llama.cpp's default for files without the pattern: every 5th layer global (E2B/E4B layout).
    RETURN_IF_ERROR(ReadSlidingPattern(f, arch, /*default_period=*/5, &config_));
    ApplyRope(rope, /*scale_sliding_layers=*/false, &config_);
    config_.attn_scale = 1.0f;  // Gemma 3n relies on q/k norms instead of 1/sqrt(head_dim) (HF: scaling = 1.0)
    ASSIGN_OR_RETURN(config_.final_softcap, f.GetF32Or(arch + ".final_logit_softcapping", 0.0f));
    for (const LayerConfig& l : config_.layers) {
      if (l.head_dim != l.head_dim_v) return Status::Error("Gemma 3n needs equal key and value head sizes");
    }

    // Keys absent from a file get llama.cpp's hard-coded E2B/E4B values (it reads none of them).
    // KV sharing: the last n_shared layers reuse the K/V of the last earlier layer of the same type
    // (HF: kv_shared_layer_index; llama.cpp: "from layer 20 on").
    const uint32_t n_layers = static_cast<uint32_t>(config_.n_layers);
    ASSIGN_OR_RETURN(uint32_t n_shared,
                     f.GetU32Or(arch + ".attention.shared_kv_layers", n_layers > 20 ? n_layers - 20 : 0));
    if (n_shared >= n_layers) return Status::Error(arch + ".attention.shared_kv_layers is too large");
    RETURN_IF_ERROR(AssignSharedKvSources(static_cast<int>(n_shared), &config_));
    first_output_only_ = FirstOutputOnlyLayer(config_);

    ASSIGN_OR_RETURN(uint32_t n_altup, f.GetU32Or(arch + ".altup.num_inputs", 4));
    ASSIGN_OR_RETURN(uint32_t active, f.GetU32Or(arch + ".altup.active_idx", 0));
    if (n_altup < 2 || n_altup > kMaxAltup) return Status::Error(arch + ".altup.num_inputs = " + std::to_string(n_altup) + " is out of range");
    if (active >= n_altup) return Status::Error(arch + ".altup.active_idx must be below altup.num_inputs");
    n_altup_ = static_cast<int>(n_altup);
    active_ = static_cast<int>(active);
    ASSIGN_OR_RETURN(uint32_t ple, f.GetU32Or(arch + ".embedding_length_per_layer_input", 256));
    if (ple == 0 || ple > (1u << 16)) return Status::Error(arch + ".embedding_length_per_layer_input is out of range");
    // Φ⁻¹(p) per layer, -inf where p = 0: no sparsity (HF: activation_sparsity_pattern; llama.cpp:
    // Φ⁻¹(0.95) on layers < 10).
    std::vector<float> sparsity(config_.n_layers, -INFINITY);
    for (int i = 0; i < std::min(config_.n_layers, 10); ++i) sparsity[i] = 1.6448533535003662f;
    if (f.Has(arch + ".activation_sparsity_scale")) {
      ASSIGN_OR_RETURN(sparsity, f.GetF32Array(arch + ".activation_sparsity_scale"));
      if (static_cast<int>(sparsity.size()) != config_.n_layers) {
        return Status::Error(arch + ".activation_sparsity_scale has " + std::to_string(sparsity.size()) +
                             " entries, expected " + std::to_string(config_.n_layers));
      }
    }

    const int d = config_.d_model, n = n_altup_;
    WeightBinder w(f, packed_.get());
    RETURN_IF_ERROR(BindOutputHead(w, config_, &head_));
    ASSIGN_OR_RETURN(altup_proj_, BindStacked(f, "altup_proj.weight", d, n - 1));
    ASSIGN_OR_RETURN(altup_unembd_, BindStacked(f, "altup_unembd_proj.weight", d, n - 1));
    RETURN_IF_ERROR(ple_.Bind(w, f, config_, static_cast<int>(ple)));
    const GgufTensor* laurel = f.FindTensor(LayerTensor(0, "laurel_l.weight"));
    if (laurel == nullptr) return Status::Error("missing tensor '" + LayerTensor(0, "laurel_l.weight") + "'");
    laurel_rank_ = static_cast<int>(laurel->ne[1]);  // HF laurel_rank; llama.cpp hard-codes 64

    layers_.resize(config_.n_layers);
    for (int i = 0; i < config_.n_layers; ++i) {
      Layer& l = layers_[i];
      const LayerConfig& lc = config_.layers[i];
      RETURN_IF_ERROR(BindSandwichNorms(w, i, d, &l));
      RETURN_IF_ERROR(BindNormedAttention(w, config_, i, /*allow_k_eq_v=*/false, &l.attn));
      RETURN_IF_ERROR(BindMlp(w, config_, i, &l.mlp));
      l.sparsity_std_mul = sparsity[i];
      ASSIGN_OR_RETURN(l.router, w.Matrix(LayerTensor(i, "altup_router.weight"), d, n));
      ASSIGN_OR_RETURN(l.router_norm, w.Vector(LayerTensor(i, "altup_router_norm.weight"), d));
      ASSIGN_OR_RETURN(l.predict_coef, w.Matrix(LayerTensor(i, "altup_predict_coef.weight"), n, n * n));
      ASSIGN_OR_RETURN(l.correct_coef, w.Matrix(LayerTensor(i, "altup_correct_coef.weight"), n, n));
      ASSIGN_OR_RETURN(l.correct_scale, w.Vector(LayerTensor(i, "altup_correct_scale.weight"), d));
      ASSIGN_OR_RETURN(l.laurel_l, w.Matrix(LayerTensor(i, "laurel_l.weight"), d, laurel_rank_));
      ASSIGN_OR_RETURN(l.laurel_r, w.Matrix(LayerTensor(i, "laurel_r.weight"), laurel_rank_, d));
      ASSIGN_OR_RETURN(l.laurel_post_norm, w.Vector(LayerTensor(i, "laurel_post_norm.weight"), d));
      ASSIGN_OR_RETURN(l.ple_gate, w.Matrix(LayerTensor(i, "inp_gate.weight"), d, ple_.dim));
      ASSIGN_OR_RETURN(l.ple_proj, w.Matrix(LayerTensor(i, "proj.weight"), ple_.dim, d));
      ASSIGN_OR_RETURN(l.ple_post_norm, w.Vector(LayerTensor(i, "post_norm.weight"), d));
      l.inv_freq = RopeInvFreq(lc);
    }
    return Status::Ok();
  }

 size_t ExtraScratchFloats(int max_batch) const override {
    ScratchArena sizing(nullptr);
    Layout(max_batch, sizing);
    return sizing.used();
  }

 protected:
  void RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const override;

 private:
  struct Layer : SandwichNorms {
    AttentionWeights attn;  // k/v empty: KV shared from an earlier layer
    MlpWeights mlp;
    float sparsity_std_mul = -INFINITY;  // finite: Gaussian top-k on the gate (HF: _gaussian_topk)
    WeightMatrix router;                 // [n_altup, d]
    std::vector<float> router_norm;      // [d]
    WeightMatrix predict_coef;           // [n_altup^2, n_altup]
    WeightMatrix correct_coef;           // [n_altup, n_altup]
    std::vector<float> correct_scale;    // [d]
    WeightMatrix laurel_l, laurel_r;     // [rank, d], [d, rank]
    std::vector<float> laurel_post_norm;
    WeightMatrix ple_gate, ple_proj;     // [ple, d], [d, ple]
    std::vector<float> ple_post_norm;
    std::vector<float> inv_freq;
  };
  // Views into Workspace::extra, laid out once per step; nothing is allocated while layers run.
  struct Scratch {
    float* streams;     // [n_altup, B, d] AltUp streams
    float* per_layer;   // [B, n_layers, ple]
    float* table_row;   // [n_layers * ple] one row of the per-layer table
    float* modal;       // [B, n_altup] router outputs
    float* coefs;       // [B, n_altup^2]
    float* laurel_mid;  // [B, rank]
    float* laurel_out;  // [B, d]
    float* ple_act;     // [B, ple]
    float* ple_out;     // [B, d]; also the unembedded stream at the end
  };
  Scratch Layout(int max_batch, ScratchArena& arena) const {
    const size_t B = max_batch, d = config_.d_model, na = n_altup_, ple = ple_.dim;
    Scratch s;
    s.streams = arena.Take(na * B * d);
    s.per_layer = arena.Take(B * config_.n_layers * ple);
    s.table_row = arena.Take(config_.n_layers * ple);
    s.modal = arena.Take(B * na);
    s.coefs = arena.Take(B * na * na);
    s.laurel_mid = arena.Take(B * laurel_rank_);
    s.laurel_out = arena.Take(B * d);
    s.ple_act = arena.Take(B * ple);
    s.ple_out = arena.Take(B * d);
    return s;
  }

  void RouterModalities(const Layer& l, const float* x, int n, Workspace& ws, KernelContext& ctx, float* out) const;
  void Mlp(int layer, const Layer& l, const ForwardStep& rows, Workspace& ws, KernelContext& ctx) const;

  OutputHead head_;
  int n_altup_ = 0, active_ = 0, laurel_rank_ = 0;
  int first_output_only_ = 0;  // FirstOutputOnlyLayer: the KV-shared tail (n_layers: none)
  std::vector<WeightMatrix> altup_proj_, altup_unembd_;  // n_altup - 1 each, [d, d]
  PerLayerEmbedding ple_;
  std::vector<Layer> layers_;
};

// tanh(router(router_norm(x) / d)) per row: the per-token mixing weights of the streams
// (HF: Gemma3nTextAltUp.compute_router_modalities). out: [n, n_altup].
void Gemma3n::RouterModalities(const Layer& l, const float* x, int n, Workspace& ws, KernelContext& ctx,
                               float* out) const {
  const int d = config_.d_model;
  const float scale = 1.0f / static_cast<float>(d);
  NormRows(ctx, x, l.router_norm, n, d, config_.norm_eps, ws.xn.data());
  for (size_t k = 0; k < static_cast<size_t>(n) * d; ++k) ws.xn[k] *= scale;
  MatMul(l.router, ws.xn.data(), n, out, ctx);
  for (int k = 0; k < n * n_altup_; ++k) out[k] = std::tanh(out[k]);
}

// GeGLU MLP over ws.xn into ws.tmp, with Gaussian top-k sparsity on the gate of the first layers:
// gate = relu(gate - (mean + std * Φ⁻¹(p))) per token, population std (HF: _gaussian_topk,
// torch.std(unbiased=False); llama.cpp divides by n - 1).
void Gemma3n::Mlp(int layer, const Layer& l, const ForwardStep& rows, Workspace& ws, KernelContext& ctx) const {
  const int64_t ffn = l.mlp.gate.n_out;
  const int n = rows.n_rows;
  Project(l.mlp.gate, layer, LoraTarget::kGate, rows, ws.xn.data(), ws.gate.data(), ws, ctx);
  Project(l.mlp.up, layer, LoraTarget::kUp, rows, ws.xn.data(), ws.up.data(), ws, ctx);
  for (int t = 0; t < n; ++t) {
    float* g = ws.gate.data() + t * ffn;
    if (std::isfinite(l.sparsity_std_mul)) {
      double sum = 0, sq = 0;
      for (int64_t k = 0; k < ffn; ++k) sum += g[k];
      const double mean = sum / static_cast<double>(ffn);
      for (int64_t k = 0; k < ffn; ++k) sq += (g[k] - mean) * (g[k] - mean);
      const float std_dev = static_cast<float>(std::sqrt(sq / static_cast<double>(ffn)));
      const float cutoff = static_cast<float>(mean) + std_dev * l.sparsity_std_mul;
      for (int64_t k = 0; k < ffn; ++k) g[k] = std::max(g[k] - cutoff, 0.0f);
    }
    ctx.kernels().gelu_tanh_mul(g, ws.up.data() + t * ffn, ffn);
  }
  Project(l.mlp.down, layer, LoraTarget::kDown, rows, ws.gate.data(), ws.tmp.data(), ws, ctx);
}

void Gemma3n::RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const {
  const ModelConfig& c = config_;
  const int d = c.d_model, na = n_altup_;
  const size_t step_values = static_cast<size_t>(step.n_rows) * d;  // one stream's
  int n = step.n_rows;
  size_t nd = step_values;
  const float eps = c.norm_eps;
  ScratchArena arena(ws.extra.data());
  const Scratch s = Layout(ws.max_batch, arena);

  EmbedTokens(head_.embedding, step.tokens, n, c.embed_scale, ws.x.data());
  // Audio rows (the encoder's soft tokens, the audio embedder's hard tokens such as end-of-audio)
  // take their embeddings unscaled; the per-layer projection sees them, the table part reads row 0
  // for those ids (HF: Gemma3nModel.forward merges inputs_embeds before the text model projects it).
  PlaceEmbeddings(step, d, ws.x.data());
  ple_.Compute(c, step.tokens, step.embeddings, n, ws.x.data(), ctx, s.table_row, s.per_layer);

  // Stream 0 is the embedding; stream k > 0 is altup_proj[k-1](embedding) rescaled to the embedding's
  // RMS, with the new RMS floored at sqrt(1e-5) (HF: Gemma3nTextModel.forward).
  float* streams[kMaxAltup] = {};
  for (int a = 0; a < na; ++a) streams[a] = s.streams + static_cast<size_t>(a) * step_values;
  std::copy(ws.x.begin(), ws.x.begin() + nd, streams[0]);
  for (int k = 1; k < na; ++k) {
    float* sk = streams[k];
    MatMul(altup_proj_[k - 1], ws.x.data(), n, sk, ctx);
    for (int t = 0; t < n; ++t) {
      float* row = sk + static_cast<size_t>(t) * d;
      const float target = RootMeanSquare(ws.x.data() + static_cast<size_t>(t) * d, d);
      const float current = std::max(RootMeanSquare(row, d), std::sqrt(1e-5f));
      for (int j = 0; j < d; ++j) row[j] = row[j] * target / current;
    }
  }

  const float sqrt2 = std::sqrt(2.0f);
  float* act = streams[active_];
  // The layers run on `rows`: the whole step, or from the output-only tail on, its output rows.
  ForwardStep rows = step;
  bool held_kv_committed = false;
  const bool narrow = TailCanNarrow(step);
  for (int i = 0; i < c.n_layers && !ws.StopRequested(); ++i) {
    if (i == first_output_only_ && narrow) {
      if (step.logits == nullptr) break;  // no logits wanted: nothing would read what the tail computes
      const size_t ple_width = static_cast<size_t>(ple_.dim) * c.n_layers;
      for (int k = 0; k < na; ++k) GatherOutputRows(step, streams[k], d);
      rows = NarrowToOutputRows(c, step, ws, {{s.per_layer, ple_width}});
      held_kv_committed = true;
      n = rows.n_rows;
      nd = static_cast<size_t>(n) * d;
    }
    const Layer& l = layers_[i];

    // AltUp predict: stream_a += sum_b coef[a*na + b] * stream_b, coefs routed from the active stream.
    RouterModalities(l, act, n, ws, ctx, s.modal);
    MatMul(l.predict_coef, s.modal, n, s.coefs, ctx);
    for (int t = 0; t < n; ++t) {
      const float* cf = s.coefs + static_cast<size_t>(t) * na * na;
      for (size_t j = static_cast<size_t>(t) * d; j < static_cast<size_t>(t + 1) * d; ++j) {
        float in[kMaxAltup];
        for (int b = 0; b < na; ++b) in[b] = streams[b][j];
        for (int a = 0; a < na; ++a) {
          float acc = 0;
          for (int b = 0; b < na; ++b) acc += in[b] * cf[a * na + b];
          streams[a][j] = in[a] + acc;
        }
      }
    }

    // The block runs on the active prediction; LAuReL is x + norm(right(left(x))) on the same input.
    NormRows(ctx, act, l.attn_norm, n, d, eps, ws.xn.data());
    MatMul(l.laurel_l, ws.xn.data(), n, s.laurel_mid, ctx);
    MatMul(l.laurel_r, s.laurel_mid, n, s.laurel_out, ctx);
    NormRows(ctx, s.laurel_out, l.laurel_post_norm, n, d, eps, s.laurel_out);
    AddRows(ctx, s.laurel_out, ws.xn.data(), n, d);
    NormedAttentionSublayer(c, i, l.attn, l.inv_freq, rows, ws, ctx);
    NormRows(ctx, ws.tmp.data(), l.post_attn_norm, n, d, eps, ws.tmp.data());
    // (active + attn + laurel) / sqrt(2) (HF: attn_laurel)
    for (size_t k = 0; k < nd; ++k) ws.x[k] = (act[k] + ws.tmp[k] + s.laurel_out[k]) / sqrt2;

    NormRows(ctx, ws.x.data(), l.ffn_norm, n, d, eps, ws.xn.data());
    Mlp(i, l, rows, ws, ctx);
    NormRows(ctx, ws.tmp.data(), l.post_ffn_norm, n, d, eps, ws.tmp.data());
    AddRows(ctx, ws.x.data(), ws.tmp.data(), n, d);

    // AltUp correct: stream_a += (block output - active prediction) * (coef_a + 1), routed from the output.
    RouterModalities(l, ws.x.data(), n, ws, ctx, s.modal);
    MatMul(l.correct_coef, s.modal, n, s.coefs, ctx);
    for (int t = 0; t < n; ++t) {
      const float* cf = s.coefs + static_cast<size_t>(t) * na;
      for (size_t j = static_cast<size_t>(t) * d; j < static_cast<size_t>(t + 1) * d; ++j) {
        const float innovation = ws.x[j] - act[j];
        for (int a = 0; a < na; ++a) streams[a][j] += innovation * (cf[a] + 1.0f);
      }
    }

    // Per-layer input: post_norm(proj(gelu(gate(active * correct_scale)) * per_layer_input[i])),
    // added to streams 1.. (HF: corrected_predictions[1:] += first_prediction; altup_correct_scale).
    for (int t = 0; t < n; ++t) {
      const size_t off = static_cast<size_t>(t) * d;
      for (int j = 0; j < d; ++j) ws.xn[off + j] = act[off + j] * l.correct_scale[j];
    }
    MatMul(l.ple_gate, ws.xn.data(), n, s.ple_act, ctx);
    ple_.GateWithInput(c, i, s.per_layer, n, ctx, s.ple_act);
    MatMul(l.ple_proj, s.ple_act, n, s.ple_out, ctx);
    NormRows(ctx, s.ple_out, l.ple_post_norm, n, d, eps, s.ple_out);
    for (int k = 1; k < na; ++k) AddRows(ctx, streams[k], s.ple_out, n, d);
  }
  if (!held_kv_committed) CommitHeldKv(step, ws);  // K/V that KV-shared layers read during this step
  if (ws.StopRequested()) return;
  if (step.logits == nullptr) return;

  // Streams back to one: stream 0 plus altup_unembd_proj[k-1](stream k) rescaled to stream 0's RMS,
  // averaged (HF: Gemma3nTextModel.forward, torch.mean over the streams). Only the rows that get
  // logits, gathered to the front of every stream.
  int n_out = 0;
  for (int a = 0; a < na; ++a) n_out = GatherOutputRows(rows, streams[a], d);
  const size_t rd = static_cast<size_t>(n_out) * d;
  std::copy(streams[0], streams[0] + rd, ws.x.begin());
  for (int k = 1; k < na; ++k) {
    MatMul(altup_unembd_[k - 1], streams[k], n_out, s.ple_out, ctx);
    for (int t = 0; t < n_out; ++t) {
      const float* row = s.ple_out + static_cast<size_t>(t) * d;
      const float target = RootMeanSquare(streams[0] + static_cast<size_t>(t) * d, d);
      const float current = std::max(RootMeanSquare(row, d), std::sqrt(1e-5f));
      float* x = ws.x.data() + static_cast<size_t>(t) * d;
      for (int j = 0; j < d; ++j) x[j] += row[j] * target / current;
    }
  }
  const float inv_na = 1.0f / static_cast<float>(na);
  for (size_t k = 0; k < rd; ++k) ws.x[k] *= inv_na;
  OutputLogits(c, head_, ws, ctx, n_out, step.logits);
}

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma3n(std::shared_ptr<const GgufFile> gguf) {
  return LoadFamily<Gemma3n>(std::move(gguf));
}

}  // namespace gemlet

// Gemma 3n (general.architecture "gemma3n"): the residual is several AltUp streams (predict -> run the
// block on the active stream -> correct), a LAuReL low-rank branch beside attention, per-layer
// embeddings fed into the non-active streams, KV sharing in the last layers, Gaussian top-k
// activation sparsity in the first MLPs, direct-weight RMSNorm, q/k norms and a weightless v norm,
// attention scale 1, final soft-cap. HF: Gemma3nForCausalLM (gemma3n_text), transformers 5.17.
#include <algorithm>
#include <cmath>

#include "model/decoder_blocks.h"
#include "model/families.h"

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
    const int first_shared = config_.n_layers - static_cast<int>(n_shared);
    for (int i = first_shared; i < config_.n_layers; ++i) {
      LayerConfig& l = config_.layers[i];
      for (int j = first_shared - 1; j >= 0; --j) {
        if (config_.layers[j].sliding == l.sliding) {
          l.kv_source = j;
          break;
        }
      }
      if (l.kv_source < 0) return Status::Error("KV-shared layer " + std::to_string(i) + " has no earlier layer of its type");
      const LayerConfig& src = config_.layers[l.kv_source];
      if (src.n_kv_heads != l.n_kv_heads || src.head_dim != l.head_dim) {
        return Status::Error("KV-shared layer " + std::to_string(i) + " does not match the shape of layer " +
                             std::to_string(l.kv_source));
      }
    }

    ASSIGN_OR_RETURN(uint32_t n_altup, f.GetU32Or(arch + ".altup.num_inputs", 4));
    ASSIGN_OR_RETURN(uint32_t active, f.GetU32Or(arch + ".altup.active_idx", 0));
    if (n_altup < 2 || n_altup > kMaxAltup) return Status::Error(arch + ".altup.num_inputs = " + std::to_string(n_altup) + " is out of range");
    if (active >= n_altup) return Status::Error(arch + ".altup.active_idx must be below altup.num_inputs");
    n_altup_ = static_cast<int>(n_altup);
    active_ = static_cast<int>(active);
    ASSIGN_OR_RETURN(uint32_t ple, f.GetU32Or(arch + ".embedding_length_per_layer_input", 256));
    if (ple == 0 || ple > (1u << 16)) return Status::Error(arch + ".embedding_length_per_layer_input is out of range");
    ple_dim_ = static_cast<int>(ple);
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
    WeightBinder w(f);
    RETURN_IF_ERROR(BindOutputHead(w, config_, &head_));
    ASSIGN_OR_RETURN(altup_proj_, BindStacked(f, "altup_proj.weight", d, n - 1));
    ASSIGN_OR_RETURN(altup_unembd_, BindStacked(f, "altup_unembd_proj.weight", d, n - 1));
    const int width = ple_dim_ * config_.n_layers;
    const GgufTensor* table = f.FindTensor("per_layer_token_embd.weight");
    if (table == nullptr) return Status::Error("missing tensor 'per_layer_token_embd.weight'");
    // [n_vocab_ple, n_layers * ple]: stays in the map; only the rows of the tokens in flight are read.
    ASSIGN_OR_RETURN(ple_table_, w.Matrix("per_layer_token_embd.weight", width, std::max<int64_t>(table->ne[1], 1)));
    ASSIGN_OR_RETURN(ple_model_proj_, w.Matrix("per_layer_model_proj.weight", d, width));
    ASSIGN_OR_RETURN(ple_proj_norm_, w.Vector("per_layer_proj_norm.weight", ple_dim_));
    const GgufTensor* laurel = f.FindTensor(LayerTensor(0, "laurel_l.weight"));
    if (laurel == nullptr) return Status::Error("missing tensor '" + LayerTensor(0, "laurel_l.weight") + "'");
    laurel_rank_ = static_cast<int>(laurel->ne[1]);  // HF laurel_rank; llama.cpp hard-codes 64

    layers_.resize(config_.n_layers);
    for (int i = 0; i < config_.n_layers; ++i) {
      Layer& l = layers_[i];
      const LayerConfig& lc = config_.layers[i];
      ASSIGN_OR_RETURN(l.attn_norm, w.Vector(LayerTensor(i, "attn_norm.weight"), d));
      ASSIGN_OR_RETURN(l.post_attn_norm, w.Vector(LayerTensor(i, "post_attention_norm.weight"), d));
      ASSIGN_OR_RETURN(l.ffn_norm, w.Vector(LayerTensor(i, "ffn_norm.weight"), d));
      ASSIGN_OR_RETURN(l.post_ffn_norm, w.Vector(LayerTensor(i, "post_ffw_norm.weight"), d));
      ASSIGN_OR_RETURN(l.attn.q, w.Matrix(LayerTensor(i, "attn_q.weight"), d, lc.n_heads * lc.head_dim));
      ASSIGN_OR_RETURN(l.attn.o, w.Matrix(LayerTensor(i, "attn_output.weight"), lc.n_heads * lc.head_dim_v, d));
      ASSIGN_OR_RETURN(l.attn.q_norm, w.Vector(LayerTensor(i, "attn_q_norm.weight"), lc.head_dim));
      if (lc.kv_source < 0) {
        ASSIGN_OR_RETURN(l.attn.k, w.Matrix(LayerTensor(i, "attn_k.weight"), d, lc.n_kv_heads * lc.head_dim));
        ASSIGN_OR_RETURN(l.attn.v, w.Matrix(LayerTensor(i, "attn_v.weight"), d, lc.n_kv_heads * lc.head_dim_v));
        ASSIGN_OR_RETURN(l.attn.k_norm, w.Vector(LayerTensor(i, "attn_k_norm.weight"), lc.head_dim));
      }
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
      ASSIGN_OR_RETURN(l.ple_gate, w.Matrix(LayerTensor(i, "inp_gate.weight"), d, ple_dim_));
      ASSIGN_OR_RETURN(l.ple_proj, w.Matrix(LayerTensor(i, "proj.weight"), ple_dim_, d));
      ASSIGN_OR_RETURN(l.ple_post_norm, w.Vector(LayerTensor(i, "post_norm.weight"), d));
      l.inv_freq = RopeInvFreq(lc);
    }
    return Status::Ok();
  }

 protected:
  void ForwardChunk(const int32_t* tokens, int n, KvCache& cache, Workspace& ws, ThreadPool& pool, float* logits,
                    bool all_logits) const override;

 private:
  struct Layer {
    std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [d_model]
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
  // Per-chunk scratch, sized once before the layer loop.
  struct Scratch {
    std::vector<float> streams;     // [n_altup, n, d] AltUp streams
    std::vector<float> per_layer;   // [n, n_layers, ple]
    std::vector<float> table_row;   // [n_layers * ple] one row of the per-layer table
    std::vector<float> modal;       // [n, n_altup] router outputs
    std::vector<float> coefs;       // [n, n_altup^2]
    std::vector<float> laurel_mid;  // [n, rank]
    std::vector<float> laurel_out;  // [n, d]
    std::vector<float> ple_act;     // [n, ple]
    std::vector<float> ple_out;     // [n, d]; also the unembedded stream at the end
  };

  void PerLayerInputs(const int32_t* tokens, int n, Workspace& ws, ThreadPool& pool, float* row, float* out) const;
  void RouterModalities(const Layer& l, const float* x, int n, Workspace& ws, ThreadPool& pool, float* out) const;
  void Attention(int i, KvCache& cache, Workspace& ws, ThreadPool& pool, int n) const;
  void Mlp(const Layer& l, Workspace& ws, ThreadPool& pool, int n) const;

  OutputHead head_;
  int n_altup_ = 0, active_ = 0, ple_dim_ = 0, laurel_rank_ = 0;
  std::vector<WeightMatrix> altup_proj_, altup_unembd_;  // n_altup - 1 each, [d, d]
  WeightMatrix ple_table_, ple_model_proj_;
  std::vector<float> ple_proj_norm_;
  std::vector<Layer> layers_;
};

// Per-layer embeddings: (norm(proj(embedding) / sqrt(d)) + table[token] * sqrt(ple)) / sqrt(2),
// out: [n, n_layers, ple]. Reads only the table rows of these tokens (HF: get/project_per_layer_inputs).
void Gemma3n::PerLayerInputs(const int32_t* tokens, int n, Workspace& ws, ThreadPool& pool, float* row,
                             float* out) const {
  const int width = ple_dim_ * config_.n_layers;
  MatMul(ple_model_proj_, ws.x.data(), n, out, pool);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(config_.d_model));
  const float table_scale = std::sqrt(static_cast<float>(ple_dim_));
  const float mix = 1.0f / std::sqrt(2.0f);
  for (int t = 0; t < n; ++t) {
    float* o = out + static_cast<size_t>(t) * width;
    for (int k = 0; k < width; ++k) o[k] *= proj_scale;
    NormRows(o, ple_proj_norm_, config_.n_layers, ple_dim_, config_.norm_eps, o);
    // Ids past the per-layer vocabulary (audio/vision soft tokens) read row 0 (HF: Gemma3nModel).
    GetRow(ple_table_, tokens[t] < ple_table_.n_out ? tokens[t] : 0, table_scale, row);
    for (int k = 0; k < width; ++k) o[k] = (o[k] + row[k]) * mix;
  }
}

// tanh(router(router_norm(x) / d)) per row: the per-token mixing weights of the streams
// (HF: Gemma3nTextAltUp.compute_router_modalities). out: [n, n_altup].
void Gemma3n::RouterModalities(const Layer& l, const float* x, int n, Workspace& ws, ThreadPool& pool,
                               float* out) const {
  const int d = config_.d_model;
  const float scale = 1.0f / static_cast<float>(d);
  NormRows(x, l.router_norm, n, d, config_.norm_eps, ws.xn.data());
  for (size_t k = 0; k < static_cast<size_t>(n) * d; ++k) ws.xn[k] *= scale;
  MatMul(l.router, ws.xn.data(), n, out, pool);
  for (int k = 0; k < n * n_altup_; ++k) out[k] = std::tanh(out[k]);
}

void Gemma3n::Attention(int i, KvCache& cache, Workspace& ws, ThreadPool& pool, int n) const {
  const Layer& l = layers_[i];
  const LayerConfig& lc = config_.layers[i];
  const int64_t pos0 = cache.n_past();
  const float eps = config_.norm_eps;
  MatMul(l.attn.q, ws.xn.data(), n, ws.q.data(), pool);
  NormHeads(ws.q.data(), n, lc.n_heads, lc.head_dim, l.attn.q_norm, eps);
  RopeRows(ws.q.data(), n, lc.n_heads, lc.head_dim, l.inv_freq, pos0);
  AttendArgs a{&lc, i, lc.sliding ? config_.sliding_window : 0, ws.q.data(), ws.k.data(), ws.v.data(), n, pos0,
               config_.attn_scale, 0.0f, ws.attn.data()};
  if (lc.kv_source >= 0) {
    // A KV-shared layer reads the source layer's cache and the source's K/V of this very batch.
    const int slot = ws.hold_slot[lc.kv_source];
    a.cache_layer = lc.kv_source;
    a.k_new = ws.hold_k[slot].data();
    a.v_new = ws.hold_v[slot].data();
    Attend(a, cache, ws, pool);
  } else {
    const size_t kv_values = static_cast<size_t>(n) * lc.n_kv_heads * lc.head_dim;
    MatMul(l.attn.k, ws.xn.data(), n, ws.k.data(), pool);
    MatMul(l.attn.v, ws.xn.data(), n, ws.v.data(), pool);
    NormHeads(ws.k.data(), n, lc.n_kv_heads, lc.head_dim, l.attn.k_norm, eps);
    NormHeads(ws.v.data(), n, lc.n_kv_heads, lc.head_dim_v, {}, eps);  // v_norm has no weight (HF: with_scale=False)
    RopeRows(ws.k.data(), n, lc.n_kv_heads, lc.head_dim, l.inv_freq, pos0);
    Attend(a, cache, ws, pool);
    const int slot = ws.hold_slot[i];
    if (slot >= 0) {
      std::copy(ws.k.begin(), ws.k.begin() + kv_values, ws.hold_k[slot].begin());
      std::copy(ws.v.begin(), ws.v.begin() + kv_values, ws.hold_v[slot].begin());
    } else {
      CommitKv(cache, i, ws.k.data(), ws.v.data(), n, pos0);
    }
  }
  MatMul(l.attn.o, ws.attn.data(), n, ws.tmp.data(), pool);
}

// GeGLU MLP over ws.xn into ws.tmp, with Gaussian top-k sparsity on the gate of the first layers:
// gate = relu(gate - (mean + std * Φ⁻¹(p))) per token, population std (HF: _gaussian_topk,
// torch.std(unbiased=False); llama.cpp divides by n - 1).
void Gemma3n::Mlp(const Layer& l, Workspace& ws, ThreadPool& pool, int n) const {
  const int64_t ffn = l.mlp.gate.n_out;
  MatMul(l.mlp.gate, ws.xn.data(), n, ws.gate.data(), pool);
  MatMul(l.mlp.up, ws.xn.data(), n, ws.up.data(), pool);
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
    GeluTanhMul(g, ws.up.data() + t * ffn, ffn);
  }
  MatMul(l.mlp.down, ws.gate.data(), n, ws.tmp.data(), pool);
}

void Gemma3n::ForwardChunk(const int32_t* tokens, int n, KvCache& cache, Workspace& ws, ThreadPool& pool,
                           float* logits, bool all_logits) const {
  const ModelConfig& c = config_;
  const int d = c.d_model, na = n_altup_;
  const size_t nd = static_cast<size_t>(n) * d;
  const float eps = c.norm_eps;
  Scratch s;
  s.streams.resize(static_cast<size_t>(na) * nd);
  s.per_layer.resize(static_cast<size_t>(n) * c.n_layers * ple_dim_);
  s.modal.resize(static_cast<size_t>(n) * na);
  s.coefs.resize(static_cast<size_t>(n) * na * na);
  s.laurel_mid.resize(static_cast<size_t>(n) * laurel_rank_);
  s.laurel_out.resize(nd);
  s.ple_act.resize(static_cast<size_t>(n) * ple_dim_);
  s.ple_out.resize(nd);
  s.table_row.resize(static_cast<size_t>(c.n_layers) * ple_dim_);

  EmbedTokens(head_.embedding, tokens, n, c.embed_scale, ws.x.data());
  PerLayerInputs(tokens, n, ws, pool, s.table_row.data(), s.per_layer.data());

  // Stream 0 is the embedding; stream k > 0 is altup_proj[k-1](embedding) rescaled to the embedding's
  // RMS, with the new RMS floored at sqrt(1e-5) (HF: Gemma3nTextModel.forward).
  float* streams[kMaxAltup] = {};
  for (int a = 0; a < na; ++a) streams[a] = s.streams.data() + static_cast<size_t>(a) * nd;
  std::copy(ws.x.begin(), ws.x.begin() + nd, streams[0]);
  for (int k = 1; k < na; ++k) {
    float* sk = streams[k];
    MatMul(altup_proj_[k - 1], ws.x.data(), n, sk, pool);
    for (int t = 0; t < n; ++t) {
      float* row = sk + static_cast<size_t>(t) * d;
      const float target = RootMeanSquare(ws.x.data() + static_cast<size_t>(t) * d, d);
      const float current = std::max(RootMeanSquare(row, d), std::sqrt(1e-5f));
      for (int j = 0; j < d; ++j) row[j] = row[j] * target / current;
    }
  }

  const float sqrt2 = std::sqrt(2.0f);
  float* act = streams[active_];
  for (int i = 0; i < c.n_layers; ++i) {
    const Layer& l = layers_[i];

    // AltUp predict: stream_a += sum_b coef[a*na + b] * stream_b, coefs routed from the active stream.
    RouterModalities(l, act, n, ws, pool, s.modal.data());
    MatMul(l.predict_coef, s.modal.data(), n, s.coefs.data(), pool);
    for (int t = 0; t < n; ++t) {
      const float* cf = s.coefs.data() + static_cast<size_t>(t) * na * na;
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
    NormRows(act, l.attn_norm, n, d, eps, ws.xn.data());
    MatMul(l.laurel_l, ws.xn.data(), n, s.laurel_mid.data(), pool);
    MatMul(l.laurel_r, s.laurel_mid.data(), n, s.laurel_out.data(), pool);
    NormRows(s.laurel_out.data(), l.laurel_post_norm, n, d, eps, s.laurel_out.data());
    AddRows(s.laurel_out.data(), ws.xn.data(), n, d);
    Attention(i, cache, ws, pool, n);
    NormRows(ws.tmp.data(), l.post_attn_norm, n, d, eps, ws.tmp.data());
    // (active + attn + laurel) / sqrt(2) (HF: attn_laurel)
    for (size_t k = 0; k < nd; ++k) ws.x[k] = (act[k] + ws.tmp[k] + s.laurel_out[k]) / sqrt2;

    NormRows(ws.x.data(), l.ffn_norm, n, d, eps, ws.xn.data());
    Mlp(l, ws, pool, n);
    NormRows(ws.tmp.data(), l.post_ffn_norm, n, d, eps, ws.tmp.data());
    AddRows(ws.x.data(), ws.tmp.data(), n, d);

    // AltUp correct: stream_a += (block output - active prediction) * (coef_a + 1), routed from the output.
    RouterModalities(l, ws.x.data(), n, ws, pool, s.modal.data());
    MatMul(l.correct_coef, s.modal.data(), n, s.coefs.data(), pool);
    for (int t = 0; t < n; ++t) {
      const float* cf = s.coefs.data() + static_cast<size_t>(t) * na;
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
    MatMul(l.ple_gate, ws.xn.data(), n, s.ple_act.data(), pool);
    for (int t = 0; t < n; ++t) {
      const float* pin = s.per_layer.data() + (static_cast<size_t>(t) * c.n_layers + i) * ple_dim_;
      float* a = s.ple_act.data() + static_cast<size_t>(t) * ple_dim_;
      for (int k = 0; k < ple_dim_; ++k) a[k] = GeluTanh(a[k]) * pin[k];
    }
    MatMul(l.ple_proj, s.ple_act.data(), n, s.ple_out.data(), pool);
    NormRows(s.ple_out.data(), l.ple_post_norm, n, d, eps, s.ple_out.data());
    for (int k = 1; k < na; ++k) AddRows(streams[k], s.ple_out.data(), n, d);
  }
  // K/V that KV-shared layers read during this chunk go into the cache only now.
  for (int i = 0; i < c.n_layers; ++i) {
    const int slot = ws.hold_slot[i];
    if (slot >= 0) CommitKv(cache, i, ws.hold_k[slot].data(), ws.hold_v[slot].data(), n, cache.n_past());
  }
  if (logits == nullptr) return;

  // Streams back to one: stream 0 plus altup_unembd_proj[k-1](stream k) rescaled to stream 0's RMS,
  // averaged (HF: Gemma3nTextModel.forward, torch.mean over the streams). Only the rows that get logits.
  const int first = all_logits ? 0 : n - 1;
  const int rows = n - first;
  const size_t off = static_cast<size_t>(first) * d;
  std::copy(streams[0] + off, streams[0] + nd, ws.x.begin() + off);
  for (int k = 1; k < na; ++k) {
    MatMul(altup_unembd_[k - 1], streams[k] + off, rows, s.ple_out.data(), pool);
    for (int t = 0; t < rows; ++t) {
      const float* row = s.ple_out.data() + static_cast<size_t>(t) * d;
      const float target = RootMeanSquare(streams[0] + off + static_cast<size_t>(t) * d, d);
      const float current = std::max(RootMeanSquare(row, d), std::sqrt(1e-5f));
      float* x = ws.x.data() + off + static_cast<size_t>(t) * d;
      for (int j = 0; j < d; ++j) x[j] += row[j] * target / current;
    }
  }
  const float inv_na = 1.0f / static_cast<float>(na);
  for (size_t k = off; k < nd; ++k) ws.x[k] *= inv_na;
  OutputLogits(c, head_, ws, pool, n, logits, all_logits);
}

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma3n(std::shared_ptr<const GgufFile> gguf) {
  auto model = std::make_unique<Gemma3n>(std::move(gguf));
  RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace gemlet

// Gemma 4's drafter (general.architecture "gemma4-assistant"; HF Gemma4AssistantForCausalLM, llama.cpp's
// gemma4-assistant graph): a few Gemma 4 layers that own no K/V. A step projects [the target's embedding of
// a token * sqrt(width) ; a state of the target's width] down to its own width, runs its layers with
// queries only (each attends to the target's cached K/V of the last layer of its type), and gives logits
// (the tied head, or E2B/E4B's ordered embedding: only the tokens of the top-k centroids) and the next
// state (post_projection of the normed hidden state).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "model/assistant.h"
#include "model/families.h"
#include "model/family_parts.h"

namespace gemlet {
namespace {

constexpr char kArch[] = "gemma4-assistant";

// The last layer of this type that keeps its own K/V: what HF's shared_kv_states holds for the type
// (the layer KV-shared layers read; with no KV sharing, the type's last layer). -1: none.
int SourceLayer(const ModelConfig& c, bool sliding) {
  for (int i = c.n_layers - 1; i >= 0; --i) {
    if (c.layers[i].sliding == sliding && c.layers[i].kv_source < 0) return i;
  }
  return -1;
}

class Gemma4Assistant final : public Model, public Assistant {
 public:
  using Model::Model;

  Status Load() {
    const GgufFile& f = *gguf_;
    RopeKeys rope;
    RETURN_IF_ERROR(ReadCommonConfig(f, kArch, &config_, &rope));
    RETURN_IF_ERROR(ReadSlidingPattern(f, kArch, 0, &config_));
    ApplyRope(rope, /*scale_sliding_layers=*/false, &config_);
    config_.attn_scale = 1.0f;  // Gemma 4: q_norm instead of 1/sqrt(head_dim) (HF: scaling = 1.0)
    ASSIGN_OR_RETURN(uint32_t hd_swa, f.GetU32Or(std::string(kArch) + ".attention.key_length_swa", config_.layers[0].head_dim));
    for (LayerConfig& l : config_.layers) {
      if (l.sliding) l.head_dim = l.head_dim_v = static_cast<int>(hd_swa);
      if (l.head_dim != l.head_dim_v) return Status::Error("a Gemma 4 drafter needs equal key and value head sizes");
    }
    const std::string out_key = std::string(kArch) + ".embedding_length_out";
    if (!f.Has(out_key)) return Status::Error("missing metadata key '" + out_key + "' (the target's hidden size)");
    ASSIGN_OR_RETURN(uint32_t backbone, f.GetU32(out_key));
    if (backbone == 0 || backbone > (1u << 20)) return Status::Error(out_key + " = " + std::to_string(backbone) + " is out of range");

    const int d = config_.d_model;
    WeightBinder w(f, packed_.get());
    ASSIGN_OR_RETURN(pre_projection_, w.Matrix("nextn.pre_projection.weight", 2 * static_cast<int64_t>(backbone), d));
    ASSIGN_OR_RETURN(post_projection_, w.Matrix("nextn.post_projection.weight", d, backbone));
    ASSIGN_OR_RETURN(norm_, w.Vector("output_norm.weight", d));
    std::vector<float> rope_factors;
    if (w.Has("rope_freqs.weight")) {
      ASSIGN_OR_RETURN(rope_factors, w.Vector("rope_freqs.weight", config_.layers.back().head_dim / 2));
    }
    if (w.Has("masked_embd_centroids.weight")) {
      RETURN_IF_ERROR(BindOrderedEmbedding(w));
    } else {
      ASSIGN_OR_RETURN(head_, w.Matrix("token_embd.weight", d, config_.n_vocab));  // tied (llama.cpp: output)
    }

    layers_.resize(config_.n_layers);
    for (int i = 0; i < config_.n_layers; ++i) {
      Layer& l = layers_[i];
      const LayerConfig& lc = config_.layers[i];
      RETURN_IF_ERROR(BindSandwichNorms(w, i, d, &l));
      ASSIGN_OR_RETURN(l.q, w.Matrix(LayerTensor(i, "attn_q.weight"), d, lc.n_heads * lc.head_dim));
      ASSIGN_OR_RETURN(l.q_norm, w.Vector(LayerTensor(i, "attn_q_norm.weight"), lc.head_dim));
      ASSIGN_OR_RETURN(l.o, w.Matrix(LayerTensor(i, "attn_output.weight"), lc.n_heads * lc.head_dim, d));
      RETURN_IF_ERROR(BindMlp(w, config_, i, &l.mlp));
      if (w.Has(LayerTensor(i, "layer_output_scale.weight"))) {
        ASSIGN_OR_RETURN(auto scale, w.Vector(LayerTensor(i, "layer_output_scale.weight"), 1));
        l.output_scale = scale[0];
      }
      if (lc.n_kv_heads <= 0 || lc.n_heads % lc.n_kv_heads != 0) {
        return Status::Error("layer " + std::to_string(i) + ": " + std::to_string(lc.n_heads) + " query heads over " +
                             std::to_string(lc.n_kv_heads) + " KV heads");
      }
      l.inv_freq = RopeInvFreq(lc);
      // Proportional RoPE on global layers, as the target's (gemma4.cc): 1e30 freezes a pair.
      if (!lc.sliding && !rope_factors.empty()) {
        for (size_t k = 0; k < l.inv_freq.size(); ++k) l.inv_freq[k] /= rope_factors[k];
      }
    }

    AssistantSizes& z = sizes_;
    z.width = d;
    z.backbone_width = static_cast<int>(backbone);
    z.n_vocab = config_.n_vocab;
    z.max_query_width = config_.MaxQueryWidth();
    z.max_kv_width = config_.MaxKvWidth();
    z.max_ffn = config_.MaxFfnDim();
    z.max_head_dim = config_.MaxHeadDim();
    for (const LayerConfig& l : config_.layers) z.max_group = std::max(z.max_group, l.n_heads / l.n_kv_heads);
    z.n_centroids = n_centroids_;
    z.selected_tokens = top_k_ * tokens_per_centroid_;
    z.selected_row_bytes = head_.row_bytes;
    return Status::Ok();
  }

  const Assistant* AsAssistant() const override { return this; }
  const AssistantSizes& sizes() const override { return sizes_; }

  Status CheckTarget(const Model& target) const override {
    const ModelConfig& t = target.config();
    const std::string me = config_.name.empty() ? std::string("the drafter") : "the drafter '" + config_.name + "'";
    if (t.arch != "gemma4" || target.InputEmbedding() == nullptr) {
      return Status::Error(me + " drafts for Gemma 4 models; this model is " + t.arch);
    }
    if (t.d_model != sizes_.backbone_width) {
      return Status::Error(me + " was made for a model of hidden size " + std::to_string(sizes_.backbone_width) + " (" +
                           kArch + ".embedding_length_out); this model's is " + std::to_string(t.d_model));
    }
    if (t.n_vocab != config_.n_vocab) {
      return Status::Error(me + " has a vocabulary of " + std::to_string(config_.n_vocab) + " tokens; this model's has " +
                           std::to_string(t.n_vocab));
    }
    for (int i = 0; i < config_.n_layers; ++i) {
      const LayerConfig& l = config_.layers[i];
      const char* type = l.sliding ? "sliding-window" : "global";
      const int src = SourceLayer(t, l.sliding);
      if (src < 0) return Status::Error(me + " reads a " + std::string(type) + " layer's K/V; this model has none");
      const LayerConfig& s = t.layers[src];
      if (s.n_kv_heads != l.n_kv_heads || s.head_dim != l.head_dim || s.head_dim_v != l.head_dim_v) {
        return Status::Error(me + " reads " + std::to_string(l.n_kv_heads) + " KV heads of " + std::to_string(l.head_dim) +
                             " values from a " + type + " layer; this model's layer " + std::to_string(src) + " has " +
                             std::to_string(s.n_kv_heads) + " of " + std::to_string(s.head_dim));
      }
    }
    if (std::any_of(config_.layers.begin(), config_.layers.end(), [](const LayerConfig& l) { return l.sliding; }) &&
        t.sliding_window != config_.sliding_window) {
      return Status::Error(me + " attends over a sliding window of " + std::to_string(config_.sliding_window) +
                           " positions; this model's is " + std::to_string(t.sliding_window));
    }
    return Status::Ok();
  }

  void Step(const Model& target, const KvCache& cache, int32_t token, const float* state, int64_t pos,
            AssistantScratch& s, KernelContext& ctx) const override;

 protected:
  // CheckBatch refuses every step of a drafter (Model::CheckBatch): nothing reaches here.
  void RunStep(const ForwardStep&, Workspace&, KernelContext&) const override {}

 private:
  struct Layer : SandwichNorms {
    WeightMatrix q, o;  // no k/v: every layer reads the target's
    std::vector<float> q_norm;
    MlpWeights mlp;
    float output_scale = 1.0f;
    std::vector<float> inv_freq;
  };

  // E2B/E4B's ordered embedding (HF Gemma4AssistantMaskedEmbedder): centroids [n_centroids, width] and a
  // token order [vocab] read as [n_centroids, vocab / n_centroids]; the head's rows are only gathered.
  Status BindOrderedEmbedding(const WeightBinder& w) {
    const GgufFile& f = *gguf_;
    const GgufTensor* c = f.FindTensor("masked_embd_centroids.weight");
    if (c->n_dims != 2 || c->ne[0] != config_.d_model || c->ne[1] <= 0) {
      return Status::Error("tensor 'masked_embd_centroids.weight' has shape " + c->ShapeString() + ", expected [" +
                           std::to_string(config_.d_model) + ", n_centroids]");
    }
    n_centroids_ = static_cast<int>(c->ne[1]);
    if (config_.n_vocab % n_centroids_ != 0) {
      return Status::Error("the vocabulary (" + std::to_string(config_.n_vocab) + ") does not split into " +
                           std::to_string(n_centroids_) + " centroids");
    }
    tokens_per_centroid_ = config_.n_vocab / n_centroids_;
    ASSIGN_OR_RETURN(centroids_, w.Matrix("masked_embd_centroids.weight", config_.d_model, n_centroids_));
    const std::string k = std::string(kArch) + ".centroid_intermediate_top_k";
    if (!f.Has(k)) return Status::Error("missing metadata key '" + k + "' (an ordered embedding's centroids per step)");
    ASSIGN_OR_RETURN(uint32_t top_k, f.GetU32(k));
    if (top_k == 0 || top_k > static_cast<uint32_t>(n_centroids_)) {
      return Status::Error(k + " = " + std::to_string(top_k) + " is not in [1, " + std::to_string(n_centroids_) + "]");
    }
    top_k_ = static_cast<int>(top_k);
    const GgufTensor* o = f.FindTensor("masked_embd_ordering");
    if (o == nullptr) return Status::Error("missing tensor 'masked_embd_ordering' (the ordered embedding's token order)");
    if (o->type != DType::kI32 || o->n_dims != 1 || o->ne[0] != config_.n_vocab) {
      return Status::Error("tensor 'masked_embd_ordering' must be I32 [" + std::to_string(config_.n_vocab) + "], is " +
                           DTypeName(o->type) + " " + o->ShapeString());
    }
    ordering_.resize(static_cast<size_t>(config_.n_vocab));
    std::memcpy(ordering_.data(), o->data, ordering_.size() * sizeof(int32_t));
    for (int32_t id : ordering_) {
      if (id < 0 || id >= config_.n_vocab) return Status::Error("tensor 'masked_embd_ordering' holds token " + std::to_string(id));
    }
    // Only rows are read (gathered per step): no packed copy.
    ASSIGN_OR_RETURN(head_, w.Table("token_embd.weight", config_.d_model, config_.n_vocab));
    return Status::Ok();
  }

  void Attention(int i, const KvCache& cache, int src, int64_t pos, AssistantScratch& s, KernelContext& ctx) const;
  void Logits(const float* hn, AssistantScratch& s, KernelContext& ctx) const;

  AssistantSizes sizes_;
  WeightMatrix pre_projection_;   // [width, 2 * backbone]
  WeightMatrix post_projection_;  // [backbone, width]
  WeightMatrix head_;             // [n_vocab, width], tied to token_embd
  std::vector<float> norm_;
  WeightMatrix centroids_;        // [n_centroids, width]; empty: the full head
  std::vector<int32_t> ordering_;
  int n_centroids_ = 0, top_k_ = 0, tokens_per_centroid_ = 0;
  std::vector<Layer> layers_;
};

// One query at position pos over the target's keys before it. The kernel takes a step's own key as
// k_new, so the query attends as the target's row pos - 1 would, with that row's cached key and value
// as its own. Sliding layers see W + 1 keys, positions pos - 1 - W .. pos - 1 (one more than the
// target's own rows): HF builds the drafter's mask with create_bidirectional_sliding_window_mask
// (query index 0 over the shared K/V [0, pos)), whose overlay keeps |q - kv| <= W, then flips it
// along the keys (modeling_gemma4_assistant.py create_attention_masks; masking_utils.py
// sliding_window_bidirectional_overlay; tools/drafter_reference/README.md). The key before the
// window is there while the ring has spare room (SessionOptions::rollback_tokens >= 1, which
// drafting needs anyway); a ring without it holds W, and the query sees those.
void Gemma4Assistant::Attention(int i, const KvCache& cache, int src, int64_t pos, AssistantScratch& s,
                                KernelContext& ctx) const {
  const LayerConfig& l = config_.layers[i];
  cache.LoadKey(src, pos - 1, s.k_last.data());
  cache.LoadValue(src, pos - 1, s.v_last.data());
  const int64_t held = std::max<int64_t>(1, pos - cache.OldestHeld(src));
  const int window = l.sliding ? static_cast<int>(std::min<int64_t>(config_.sliding_window + 1, held)) : 0;
  AttendArgs a{l.n_heads, window, s.q.data(), s.k_last.data(), s.v_last.data(), 1,
               pos - 1, config_.attn_scale, 0.0f, s.attn.data()};
  Attend(a, cache.View(src), s.attention, ctx);
}

void Gemma4Assistant::Logits(const float* hn, AssistantScratch& s, KernelContext& ctx) const {
  if (n_centroids_ == 0) {
    MatMul(head_, hn, 1, s.logits.data(), ctx);
    return;
  }
  // The top-k centroids (ties to the lower index), their tokens' rows gathered into one matrix.
  MatMul(centroids_, hn, 1, s.centroid_logits.data(), ctx);
  const float* cl = s.centroid_logits.data();
  float* order = s.centroid_order.data();
  for (int c = 0; c < n_centroids_; ++c) order[c] = static_cast<float>(c);
  std::partial_sort(order, order + top_k_, order + n_centroids_, [cl](float a, float b) {
    const int ia = static_cast<int>(a), ib = static_cast<int>(b);
    return cl[ia] > cl[ib] || (cl[ia] == cl[ib] && ia < ib);
  });
  const size_t rb = head_.row_bytes;
  int n = 0;
  for (int k = 0; k < top_k_; ++k) {
    const int c = static_cast<int>(order[k]);
    for (int j = 0; j < tokens_per_centroid_; ++j, ++n) {
      const int32_t id = ordering_[static_cast<size_t>(c) * tokens_per_centroid_ + j];
      s.selected[static_cast<size_t>(n)] = id;
      std::memcpy(s.selected_rows.data() + static_cast<size_t>(n) * rb, head_.Row(id), rb);
    }
  }
  const WeightMatrix rows{head_.type, s.selected_rows.data(), head_.n_in, n, rb};
  MatMul(rows, hn, 1, s.selected_logits.data(), ctx);
  // Every other token gets the chosen ones' minimum less one (HF's mask_value).
  const float floor = *std::min_element(s.selected_logits.begin(), s.selected_logits.begin() + n) - 1.0f;
  std::fill(s.logits.begin(), s.logits.end(), floor);
  for (int k = 0; k < n; ++k) s.logits[static_cast<size_t>(s.selected[static_cast<size_t>(k)])] = s.selected_logits[static_cast<size_t>(k)];
}

void Gemma4Assistant::Step(const Model& target, const KvCache& cache, int32_t token, const float* state, int64_t pos,
                           AssistantScratch& s, KernelContext& ctx) const {
  const ModelConfig& c = config_;
  const int d = c.d_model, bw = sizes_.backbone_width;
  const float eps = c.norm_eps;
  // [target embedding * sqrt(backbone) ; state] (HF: target_model_input_embeddings is the scaled one).
  EmbedTokens(*target.InputEmbedding(), &token, 1, target.config().embed_scale, s.input.data());
  if (state != s.input.data() + bw) std::memmove(s.input.data() + bw, state, static_cast<size_t>(bw) * sizeof(float));
  MatMul(pre_projection_, s.input.data(), 1, s.x.data(), ctx);
  const int src_sliding = SourceLayer(target.config(), true), src_global = SourceLayer(target.config(), false);
  for (int i = 0; i < c.n_layers; ++i) {
    const Layer& l = layers_[i];
    const LayerConfig& lc = c.layers[i];
    ctx.kernels().rms_norm(s.x.data(), l.attn_norm.data(), d, eps, s.xn.data());
    MatMul(l.q, s.xn.data(), 1, s.q.data(), ctx);
    for (int h = 0; h < lc.n_heads; ++h) {
      float* qh = s.q.data() + static_cast<size_t>(h) * lc.head_dim;
      ctx.kernels().rms_norm(qh, l.q_norm.data(), lc.head_dim, eps, qh);
    }
    ctx.kernels().rope_rotate_half(s.q.data(), lc.n_heads, lc.head_dim, l.inv_freq.data(), pos);
    Attention(i, cache, lc.sliding ? src_sliding : src_global, pos, s, ctx);
    MatMul(l.o, s.attn.data(), 1, s.tmp.data(), ctx);
    ctx.kernels().rms_norm(s.tmp.data(), l.post_attn_norm.data(), d, eps, s.tmp.data());
    for (int k = 0; k < d; ++k) s.x[k] += s.tmp[k];
    ctx.kernels().rms_norm(s.x.data(), l.ffn_norm.data(), d, eps, s.xn.data());
    MatMul(l.mlp.gate, s.xn.data(), 1, s.gate.data(), ctx);
    MatMul(l.mlp.up, s.xn.data(), 1, s.up.data(), ctx);
    ctx.kernels().gelu_tanh_mul(s.gate.data(), s.up.data(), lc.ffn_dim);
    MatMul(l.mlp.down, s.gate.data(), 1, s.tmp.data(), ctx);
    ctx.kernels().rms_norm(s.tmp.data(), l.post_ffn_norm.data(), d, eps, s.tmp.data());
    for (int k = 0; k < d; ++k) s.x[k] = (s.x[k] + s.tmp[k]) * l.output_scale;  // HF: layer_scalar
  }
  ctx.kernels().rms_norm(s.x.data(), norm_.data(), d, eps, s.xn.data());
  Logits(s.xn.data(), s, ctx);
  MatMul(post_projection_, s.xn.data(), 1, s.state.data(), ctx);
}

}  // namespace

AssistantScratch::AssistantScratch(const Assistant& assistant, int n_ctx, int threads) : n_threads(std::max(threads, 1)) {
  const AssistantSizes& z = assistant.sizes();
  input.resize(2 * static_cast<size_t>(z.backbone_width));
  x.resize(z.width);
  xn.resize(z.width);
  tmp.resize(z.width);
  q.resize(z.max_query_width);
  attn.resize(z.max_query_width);
  k_last.resize(z.max_kv_width);
  v_last.resize(z.max_kv_width);
  gate.resize(z.max_ffn);
  up.resize(z.max_ffn);
  logits.resize(z.n_vocab);
  state.resize(z.backbone_width);
  centroid_logits.resize(z.n_centroids);
  centroid_order.resize(z.n_centroids);
  selected_logits.resize(z.selected_tokens);
  selected.resize(z.selected_tokens);
  selected_rows.resize(static_cast<size_t>(z.selected_tokens) * z.selected_row_bytes);
  const AttentionScratchSizes a = PlanAttentionScratch(z.max_group, z.max_head_dim, z.max_head_dim, 1, n_ctx);
  scores.resize(static_cast<size_t>(n_threads) * a.scores_per_thread);
  block_rows.resize(static_cast<size_t>(n_threads) * a.block_rows_per_thread);
  attn_parts.resize(a.split_parts);
  attn_lse.resize(a.split_lse);
  attention.max_batch = 1;
  attention.scores = scores.data();
  attention.scores_stride = a.scores_stride;
  attention.scores_per_thread = a.scores_per_thread;
  attention.block_rows = block_rows.data();
  attention.block_rows_per_thread = a.block_rows_per_thread;
  attention.split_parts = attn_parts.data();
  attention.split_lse = attn_lse.data();
}

size_t AssistantScratch::Bytes() const {
  const size_t floats = input.size() + x.size() + xn.size() + tmp.size() + q.size() + attn.size() + k_last.size() +
                        v_last.size() + gate.size() + up.size() + logits.size() + state.size() + centroid_logits.size() +
                        centroid_order.size() + selected_logits.size() + scores.size() + block_rows.size() +
                        attn_parts.size() + attn_lse.size();
  return floats * sizeof(float) + selected.size() * sizeof(int32_t) + selected_rows.size();
}

Result<std::unique_ptr<Model>> LoadGemma4Assistant(std::shared_ptr<const GgufFile> gguf) {
  return LoadFamily<Gemma4Assistant>(std::move(gguf));
}

}  // namespace gemlet

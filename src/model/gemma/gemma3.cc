// Gemma 3 (general.architecture "gemma3"): Gemma 2's sandwich norms plus per-head QK-norm, 5 local :
// 1 global layers with separate RoPE bases (1e4 local, 1e6 global), linear RoPE scaling on global
// layers only (4B/12B/27B), no attention soft-cap. HF: Gemma3ForCausalLM (gemma3_text).
#include "model/decoder_blocks.h"
#include "model/families.h"

namespace gemlet {
namespace {

class Gemma3 final : public Model {
 public:
  using Model::Model;

  Status Load() {
    const GgufFile& f = *gguf_;
    const std::string arch = "gemma3";
    RopeKeys rope;
    RETURN_IF_ERROR(ReadCommonConfig(f, arch, &config_, &rope));
    // llama.cpp: sliding layers exist only when the window key is present; every 6th layer is global
    // unless the file lists the pattern (gemlet's converter writes it).
    if (config_.sliding_window > 0) RETURN_IF_ERROR(ReadSlidingPattern(f, arch, /*default_period=*/6, &config_));
    ApplyRope(rope, /*scale_sliding_layers=*/false, &config_);
    RETURN_IF_ERROR(ReadAttentionScale(f, arch, /*n_layers_27b=*/62, &config_));
    ASSIGN_OR_RETURN(config_.attn_softcap, f.GetF32Or(arch + ".attn_logit_softcapping", 0.0f));
    ASSIGN_OR_RETURN(config_.final_softcap, f.GetF32Or(arch + ".final_logit_softcapping", 0.0f));

    WeightBinder w(f);
    ASSIGN_OR_RETURN(embedding_, w.Matrix("token_embd.weight", config_.d_model, config_.n_vocab));
    output_ = embedding_;
    if (w.Has("output.weight")) {
      ASSIGN_OR_RETURN(output_, w.Matrix("output.weight", config_.d_model, config_.n_vocab));
    }
    ASSIGN_OR_RETURN(output_norm_, w.Vector("output_norm.weight", config_.d_model));
    layers_.resize(config_.n_layers);
    for (int i = 0; i < config_.n_layers; ++i) {
      Layer& l = layers_[i];
      const int d = config_.d_model, hd = config_.layers[i].head_dim;
      // Norm weights, QK-norm included, arrive as (1 + w) from llama.cpp's converter.
      ASSIGN_OR_RETURN(l.attn_norm, w.Vector(LayerTensor(i, "attn_norm.weight"), d));
      ASSIGN_OR_RETURN(l.post_attn_norm, w.Vector(LayerTensor(i, "post_attention_norm.weight"), d));
      ASSIGN_OR_RETURN(l.ffn_norm, w.Vector(LayerTensor(i, "ffn_norm.weight"), d));
      ASSIGN_OR_RETURN(l.post_ffn_norm, w.Vector(LayerTensor(i, "post_ffw_norm.weight"), d));
      RETURN_IF_ERROR(BindAttention(w, config_, i, &l.attn));
      ASSIGN_OR_RETURN(l.attn.q_norm, w.Vector(LayerTensor(i, "attn_q_norm.weight"), hd));
      ASSIGN_OR_RETURN(l.attn.k_norm, w.Vector(LayerTensor(i, "attn_k_norm.weight"), hd));
      RETURN_IF_ERROR(BindMlp(w, config_, i, &l.mlp));
      l.inv_freq = RopeInvFreq(config_.layers[i]);
    }
    return Status::Ok();
  }

 protected:
  void ForwardChunk(const int32_t* tokens, int n, KvCache& cache, Workspace& ws, ThreadPool& pool, float* logits,
                    bool all_logits) const override {
    const ModelConfig& c = config_;
    EmbedTokens(embedding_, tokens, n, c.embed_scale, ws.x.data());
    for (int i = 0; i < c.n_layers; ++i) {
      const Layer& l = layers_[i];
      NormRows(ws.x.data(), l.attn_norm, n, c.d_model, c.norm_eps, ws.xn.data());
      AttentionSublayer(c, i, l.attn, l.inv_freq, cache, ws, pool, n);
      NormRows(ws.tmp.data(), l.post_attn_norm, n, c.d_model, c.norm_eps, ws.tmp.data());
      AddRows(ws.x.data(), ws.tmp.data(), n, c.d_model);
      NormRows(ws.x.data(), l.ffn_norm, n, c.d_model, c.norm_eps, ws.xn.data());
      MlpSublayer(l.mlp, ws, pool, n);
      NormRows(ws.tmp.data(), l.post_ffn_norm, n, c.d_model, c.norm_eps, ws.tmp.data());
      AddRows(ws.x.data(), ws.tmp.data(), n, c.d_model);
    }
    if (logits) OutputLogits(c, output_norm_, output_, ws, pool, n, logits, all_logits);
  }

 private:
  struct Layer {
    std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [d_model]
    AttentionWeights attn;  // with q_norm / k_norm [head_dim]
    MlpWeights mlp;
    std::vector<float> inv_freq;
  };
  WeightMatrix embedding_, output_;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma3(std::shared_ptr<const GgufFile> gguf) {
  auto model = std::make_unique<Gemma3>(std::move(gguf));
  RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace gemlet

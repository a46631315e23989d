// Gemma 1 (general.architecture "gemma"): pre-norm decoder with GeGLU, MQA (2B) or MHA (7B),
// one RoPE base, no soft-capping. HF: GemmaForCausalLM.
#include "model/families.h"
#include "model/family_parts.h"

namespace gemlet {
namespace {

class Gemma final : public Model {
 public:
  using Model::Model;

  Status Load() {
    const GgufFile& f = *gguf_;
    RopeKeys rope;
    RETURN_IF_ERROR(ReadCommonConfig(f, "gemma", &config_, &rope));
    ApplyRope(rope, /*scale_sliding_layers=*/true, &config_);
    RETURN_IF_ERROR(ReadAttentionScale(f, "gemma", /*n_layers_27b=*/-1, &config_));  // head_dim^-0.5

    WeightBinder w(f, packed_.get());
    RETURN_IF_ERROR(BindOutputHead(w, config_, &head_));
    layers_.resize(config_.n_layers);
    for (int i = 0; i < config_.n_layers; ++i) {
      Layer& l = layers_[i];
      // llama.cpp's converter stores Gemma's RMSNorm weight as (1 + w): every norm is a plain multiply.
      ASSIGN_OR_RETURN(l.attn_norm, w.Vector(LayerTensor(i, "attn_norm.weight"), config_.d_model));
      ASSIGN_OR_RETURN(l.ffn_norm, w.Vector(LayerTensor(i, "ffn_norm.weight"), config_.d_model));
      RETURN_IF_ERROR(BindAttention(w, config_, i, &l.attn));
      RETURN_IF_ERROR(BindMlp(w, config_, i, &l.mlp));
      l.inv_freq = RopeInvFreq(config_.layers[i]);
    }
    return Status::Ok();
  }

 protected:
  void RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const override {
    const ModelConfig& c = config_;
    const int n = step.n_rows;
    EmbedTokens(head_.embedding, step.tokens, n, c.embed_scale, ws.x.data());
    for (int i = 0; i < c.n_layers && !ws.StopRequested(); ++i) {
      const Layer& l = layers_[i];
      NormRows(ctx, ws.x.data(), l.attn_norm, n, c.d_model, c.norm_eps, ws.xn.data());
      AttentionSublayer(c, i, l.attn, l.inv_freq, step, ws, ctx);
      AddRows(ctx, ws.x.data(), ws.tmp.data(), n, c.d_model);
      NormRows(ctx, ws.x.data(), l.ffn_norm, n, c.d_model, c.norm_eps, ws.xn.data());
      MlpSublayer(i, l.mlp, step, ws, ctx);
      AddRows(ctx, ws.x.data(), ws.tmp.data(), n, c.d_model);
    }
    if (!ws.StopRequested()) OutputLogits(c, head_, step, ws, ctx);
  }

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;  // [d_model]
    AttentionWeights attn;
    MlpWeights mlp;
    std::vector<float> inv_freq;  // [head_dim / 2]
  };
  OutputHead head_;
  std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma(std::shared_ptr<const GgufFile> gguf) {
  return LoadFamily<Gemma>(std::move(gguf));
}

}  // namespace gemlet

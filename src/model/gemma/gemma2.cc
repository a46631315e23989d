// Gemma 2 (general.architecture "gemma2"): sandwich norms around attention and MLP, alternating
// sliding-window / global layers, attention and final logit soft-capping. HF: Gemma2ForCausalLM.
#include "model/families.h"
#include "model/family_parts.h"

namespace gemlet {
namespace {

class Gemma2 final : public Model {
 public:
  using Model::Model;

  Status Load() {
    const GgufFile& f = *gguf_;
    const std::string arch = "gemma2";
    RopeKeys rope;
    RETURN_IF_ERROR(ReadCommonConfig(f, arch, &config_, &rope));
    if (!f.Has(arch + ".attention.sliding_window")) config_.sliding_window = 4096;  // llama.cpp's Gemma 2 default
    RETURN_IF_ERROR(ReadSlidingPattern(f, arch, /*default_period=*/2, &config_));  // sliding, global, ...
    ApplyRope(rope, /*scale_sliding_layers=*/true, &config_);
    // HF scales queries by query_pre_attn_scalar^-0.5; files without our key get llama.cpp's rule.
    RETURN_IF_ERROR(ReadAttentionScale(f, arch, /*n_layers_27b=*/46, &config_));
    ASSIGN_OR_RETURN(config_.attn_softcap, f.GetF32Or(arch + ".attn_logit_softcapping", 50.0f));
    ASSIGN_OR_RETURN(config_.final_softcap, f.GetF32Or(arch + ".final_logit_softcapping", 30.0f));

    // Norm weights arrive as (1 + w) from llama.cpp's converter.
    return BindSandwichStack(WeightBinder(f, packed_.get()), config_, /*qk_norm=*/false, &stack_);
  }

 protected:
  void RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const override {
    const ModelConfig& c = config_;
    EmbedTokens(stack_.head.embedding, step.tokens, step.n_rows, c.embed_scale, ws.x.data());
    for (int i = 0; i < c.n_layers && !ws.StopRequested(); ++i) RunSandwichLayer(c, i, stack_.layers[i], step, ws, ctx);
    if (!ws.StopRequested()) OutputLogits(c, stack_.head, step, ws, ctx);
  }

 private:
  SandwichStack stack_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma2(std::shared_ptr<const GgufFile> gguf) {
  return LoadFamily<Gemma2>(std::move(gguf));
}

}  // namespace gemlet

// Gemma 3 (general.architecture "gemma3"): Gemma 2's sandwich norms plus per-head QK-norm, 5 local :
// 1 global layers with separate RoPE bases (1e4 local, 1e6 global), linear RoPE scaling on global
// layers only (4B/12B/27B), no attention soft-cap. HF: Gemma3ForCausalLM (gemma3_text).
#include "model/families.h"
#include "model/family_parts.h"

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

    // Norm weights, QK-norm included, arrive as (1 + w) from llama.cpp's converter.
    return BindSandwichStack(WeightBinder(f, packed_.get()), config_, /*qk_norm=*/true, &stack_);
  }

  bool TakesEmbeddings() const override { return true; }

 protected:
  void RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const override {
    const ModelConfig& c = config_;
    EmbedTokens(stack_.head.embedding, step.tokens, step.n_rows, c.embed_scale, ws.x.data());
    PlaceEmbeddings(step, c.d_model, ws.x.data());
    for (int i = 0; i < c.n_layers && !ws.StopRequested(); ++i) RunSandwichLayer(c, i, stack_.layers[i], step, ws, ctx);
    if (!ws.StopRequested()) OutputLogits(c, stack_.head, step, ws, ctx);
  }

 private:
  SandwichStack stack_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma3(std::shared_ptr<const GgufFile> gguf) {
  return LoadFamily<Gemma3>(std::move(gguf));
}

}  // namespace gemlet

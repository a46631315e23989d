// Parts that several family files bind the same way: the sandwich norms (Gemma 2 onward), the
// Gemma 2/3 layer stack, and the step that constructs and loads a family.
#pragma once

#include <memory>
#include <vector>

#include "model/decoder_blocks.h"

namespace gemlet {

// RMSNorm before and after both attention and MLP ("sandwich"), [d_model] each: Gemma 2 and 3 store
// them as (1 + w) (llama.cpp's converter), Gemma 3n and 4 as the weight itself; either way a plain
// multiply. A family's layer struct derives from it so its forward names them as before.
struct SandwichNorms {
  std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;
};
Status BindSandwichNorms(const WeightBinder& w, int layer, int d_model, SandwichNorms* out);

// Gemma 2 and 3 differ only in their config and in QK-norm: the same embedding/output head and a
// stack of SandwichLayers (RunSandwichLayer), bound in the same order.
struct SandwichStack {
  OutputHead head;
  std::vector<SandwichLayer> layers;
};
Status BindSandwichStack(const WeightBinder& w, const ModelConfig& c, bool qk_norm, SandwichStack* out);

// Every LoadGemma*: the family reads its config and binds its weights in Load().
template <class Family>
Result<std::unique_ptr<Model>> LoadFamily(std::shared_ptr<const GgufFile> gguf) {
  auto model = std::make_unique<Family>(std::move(gguf));
  RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace gemlet

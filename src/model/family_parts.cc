// The weight groups of family_parts.h, bound in the order the family files always bound them (the
// packed-weight slots, and so the packed cache, follow that order).
#include "model/family_parts.h"

namespace gemlet {

Status BindSandwichNorms(const WeightBinder& w, int layer, int d_model, SandwichNorms* out) {
  ASSIGN_OR_RETURN(out->attn_norm, w.Vector(LayerTensor(layer, "attn_norm.weight"), d_model));
  ASSIGN_OR_RETURN(out->post_attn_norm, w.Vector(LayerTensor(layer, "post_attention_norm.weight"), d_model));
  ASSIGN_OR_RETURN(out->ffn_norm, w.Vector(LayerTensor(layer, "ffn_norm.weight"), d_model));
  ASSIGN_OR_RETURN(out->post_ffn_norm, w.Vector(LayerTensor(layer, "post_ffw_norm.weight"), d_model));
  return Status::Ok();
}

Status BindSandwichStack(const WeightBinder& w, const ModelConfig& c, bool qk_norm, SandwichStack* out) {
  RETURN_IF_ERROR(BindOutputHead(w, c, &out->head));
  out->layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) RETURN_IF_ERROR(BindSandwichLayer(w, c, i, qk_norm, &out->layers[i]));
  return Status::Ok();
}

}  // namespace gemlet

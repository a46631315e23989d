// ReadVisionTowerConfig: the clip.* keys of an mmproj GGUF.
#include "encoders/mmproj.h"

namespace gemlet {

namespace {

Result<int> PositiveU32(const GgufFile& f, const char* key) {
  ASSIGN_OR_RETURN(uint32_t v, f.GetU32(key));
  if (v == 0 || v > (1u << 20)) return Status::Error(std::string("'") + key + "' is " + std::to_string(v) + ", out of range");
  return static_cast<int>(v);
}

Status ReadTriple(const GgufFile& f, const char* key, std::array<float, 3>* out) {
  if (!f.Has(key)) return Status::Ok();  // the default
  ASSIGN_OR_RETURN(std::vector<float> v, f.GetF32Array(key));
  if (v.size() != 3) return Status::Error(std::string("'") + key + "' must hold 3 numbers");
  for (size_t c = 0; c < 3; ++c) (*out)[c] = v[c];
  return Status::Ok();
}

}  // namespace

Result<VisionTowerConfig> ReadVisionTowerConfig(const GgufFile& f) {
  ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch != "clip") return Status::Error("not an mmproj file: general.architecture is '" + arch + "', not 'clip'");
  if (f.Has("clip.has_vision_encoder")) {
    ASSIGN_OR_RETURN(bool vision, f.GetBool("clip.has_vision_encoder"));
    if (!vision) return Status::Error("the mmproj file holds no vision tower (clip.has_vision_encoder is false)");
  }
  VisionTowerConfig c;
  // Gemma 3 writes the one key; Gemma 3n and 4 a key per modality.
  const char* key = f.Has("clip.projector_type") ? "clip.projector_type" : "clip.vision.projector_type";
  ASSIGN_OR_RETURN(c.projector_name, f.GetString(key));
  if (c.projector_name != "gemma3") {
    return Status::Error("the mmproj's vision projector '" + c.projector_name + "' is not one gemlet runs yet (gemma3)");
  }
  c.projector = VisionProjector::kGemma3;
  ASSIGN_OR_RETURN(c.image_size, PositiveU32(f, "clip.vision.image_size"));
  ASSIGN_OR_RETURN(c.patch_size, PositiveU32(f, "clip.vision.patch_size"));
  ASSIGN_OR_RETURN(c.hidden, PositiveU32(f, "clip.vision.embedding_length"));
  ASSIGN_OR_RETURN(c.ffn, PositiveU32(f, "clip.vision.feed_forward_length"));
  ASSIGN_OR_RETURN(c.n_layers, PositiveU32(f, "clip.vision.block_count"));
  ASSIGN_OR_RETURN(c.n_heads, PositiveU32(f, "clip.vision.attention.head_count"));
  ASSIGN_OR_RETURN(c.projection_dim, PositiveU32(f, "clip.vision.projection_dim"));
  if (f.Has("clip.vision.attention.layer_norm_epsilon")) {
    ASSIGN_OR_RETURN(c.eps, f.GetF32("clip.vision.attention.layer_norm_epsilon"));
  }
  RETURN_IF_ERROR(ReadTriple(f, "clip.vision.image_mean", &c.mean));
  RETURN_IF_ERROR(ReadTriple(f, "clip.vision.image_std", &c.std));
  // llama.cpp's default when the converter wrote none: 896 / 14 = 64 patches a side, pooled 4x4.
  ASSIGN_OR_RETURN(uint32_t pool, f.GetU32Or("clip.vision.projector.scale_factor", 4));
  c.pool = static_cast<int>(pool);
  if (c.image_size % c.patch_size != 0 || c.pool == 0 || c.patches_per_side() % c.pool != 0 ||
      c.hidden % c.n_heads != 0) {
    return Status::Error("inconsistent vision tower: image " + std::to_string(c.image_size) + ", patch " +
                         std::to_string(c.patch_size) + ", pooling " + std::to_string(c.pool) + ", hidden " +
                         std::to_string(c.hidden) + " over " + std::to_string(c.n_heads) + " heads");
  }
  return c;
}

}  // namespace gemlet

// VisionEncoder: opens an mmproj GGUF and hands each call to the tower its projector names
// (gemma3_vision.cc, gemma3n_vision.cc, gemma4_vision.cc).
#include "encoders/vision_encoder.h"

#include "encoders/vision_tower.h"

namespace gemlet {

struct VisionEncoder::Impl {
  std::unique_ptr<GgufFile> file;  // the tower's tensors are read in place from its map
  VisionTowerConfig c;
  std::unique_ptr<VisionTower> tower;
};

VisionEncoder::VisionEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VisionEncoder::~VisionEncoder() = default;

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->file, GgufFile::Open(path));
  auto config = ReadVisionTowerConfig(*impl->file);
  if (!config.ok()) return config.status().WithContext(path);
  impl->c = config.value();
  auto tower = impl->c.projector == VisionProjector::kGemma4    ? BindGemma4Tower(*impl->file, impl->c)
               : impl->c.projector == VisionProjector::kGemma3n ? BindGemma3nTower(*impl->file, impl->c)
                                                                : BindGemma3Tower(*impl->file, impl->c);
  if (!tower.ok()) return tower.status().WithContext(path);
  impl->tower = std::move(tower.value());
  return std::unique_ptr<VisionEncoder>(new VisionEncoder(std::move(impl)));
}

const VisionTowerConfig& VisionEncoder::config() const { return impl_->c; }

Status VisionEncoder::Encode(const float* pixels, float* embeddings, KernelContext& ctx,
                             std::vector<float>* tower_out) const {
  return impl_->tower->Encode(pixels, embeddings, ctx, tower_out);
}

Result<int> VisionEncoder::EncodePatches(const ImagePatches& patches, std::vector<float>* embeddings, KernelContext& ctx,
                                         std::vector<float>* tower_out) const {
  return impl_->tower->EncodePatches(patches, embeddings, ctx, tower_out);
}

Status VisionEncoder::EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const {
  return impl_->tower->EmbedHardToken(token, out, ctx);
}

}  // namespace gemlet

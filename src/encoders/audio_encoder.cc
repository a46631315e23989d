// AudioEncoder: opens an mmproj GGUF and hands each call to the tower its audio projector names
// (gemma4_audio.cc, gemma3n_audio.cc).
#include "encoders/audio_encoder.h"

#include "encoders/conformer.h"

namespace gemlet {

struct AudioEncoder::Impl {
  std::unique_ptr<GgufFile> file;  // the tower's tensors are read in place from its map
  AudioTowerConfig c;
  std::unique_ptr<AudioTower> tower;
};

AudioEncoder::AudioEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AudioEncoder::~AudioEncoder() = default;

Result<std::unique_ptr<AudioEncoder>> AudioEncoder::Open(const std::string& path, const AudioEncoderOptions& options) {
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->file, GgufFile::Open(path));
  auto config = ReadAudioTowerConfig(*impl->file);
  if (!config.ok()) return config.status().WithContext(path);
  impl->c = config.value();
  impl->c.attention_mask = options.attention_mask;
  auto tower = impl->c.projector == AudioProjector::kGemma3n ? BindGemma3nAudioTower(*impl->file, impl->c)
                                                            : BindGemma4AudioTower(*impl->file, impl->c);
  if (!tower.ok()) return tower.status().WithContext(path);
  impl->tower = std::move(tower.value());
  return std::unique_ptr<AudioEncoder>(new AudioEncoder(std::move(impl)));
}

const AudioTowerConfig& AudioEncoder::config() const { return impl_->c; }

Result<int> AudioEncoder::Encode(const float* features, const uint8_t* valid_mask, int n_frames,
                                 std::vector<float>* embeddings, KernelContext& ctx, std::vector<float>* tower_out) const {
  return impl_->tower->Encode(features, valid_mask, n_frames, embeddings, ctx, tower_out);
}

Status AudioEncoder::EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const {
  return impl_->tower->EmbedHardToken(token, out, ctx);
}

}  // namespace gemlet

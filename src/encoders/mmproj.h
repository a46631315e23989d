// An mmproj GGUF (llama.cpp's "clip" files, as its converter and `gemlet convert --mmproj-out`
// write them): which vision tower it holds and that tower's settings, read once from the clip.* keys.
#pragma once

#include <array>
#include <string>

#include "base/status.h"
#include "gguf/gguf_reader.h"

namespace gemlet {

enum class VisionProjector {
  kGemma3,  // SigLIP + average pooling + (1 + w) RMSNorm + projection ("gemma3")
};

struct VisionTowerConfig {
  VisionProjector projector = VisionProjector::kGemma3;
  std::string projector_name;  // clip.projector_type as written
  int image_size = 0;          // the square the processor resizes to
  int patch_size = 0;
  int hidden = 0;              // clip.vision.embedding_length
  int ffn = 0;
  int n_layers = 0;
  int n_heads = 0;
  int projection_dim = 0;      // the text model's hidden size
  float eps = 1e-6f;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> std{0.5f, 0.5f, 0.5f};
  int pool = 4;                // patches averaged per side into one soft token

  int patches_per_side() const { return image_size / patch_size; }
  int n_patches() const { return patches_per_side() * patches_per_side(); }
  int tokens_per_side() const { return patches_per_side() / pool; }
  int n_tokens() const { return tokens_per_side() * tokens_per_side(); }
};

// The vision tower's settings; an error names the key that is missing or wrong, or says which
// projector gemlet does not run yet.
Result<VisionTowerConfig> ReadVisionTowerConfig(const GgufFile& file);

}  // namespace gemlet

// An mmproj GGUF (llama.cpp's "clip" files, as its converter and `gemlet convert --mmproj-out`
// write them): which vision tower it holds and that tower's settings, read once from the clip.* keys.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "base/status.h"
#include "gguf/gguf_reader.h"

namespace gemlet {

enum class VisionProjector {
  kGemma3,  // SigLIP + average pooling + (1 + w) RMSNorm + projection ("gemma3")
  kGemma4,  // ViT with 2D RoPE over a variable patch grid + position pooling + embedder ("gemma4v")
};

struct VisionTowerConfig {
  VisionProjector projector = VisionProjector::kGemma3;
  std::string projector_name;  // clip.projector_type (clip.vision.projector_type) as written
  int image_size = 0;          // Gemma 3: the square the processor resizes to (Gemma 4: unused)
  int patch_size = 0;
  int hidden = 0;              // clip.vision.embedding_length
  int ffn = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;          // clip.vision.attention.head_count_kv, else n_heads
  int head_dim = 0;            // clip.vision.attention.head_dim, else hidden / n_heads
  int projection_dim = 0;      // the text model's hidden size
  float eps = 1e-6f;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> std{0.5f, 0.5f, 0.5f};
  // Patches averaged per side into one soft token (Gemma 4: by their positions, k x k).
  int pool = 4;
  float rope_theta = 100.0f;   // Gemma 4's 2D RoPE base
  int max_soft_tokens = 280;   // Gemma 4: the processor's budget per image (HF's default when absent)
  // Whether the text model attends both ways over an image's soft tokens: Gemma 3 always; Gemma 4
  // as clip.vision.text_bidirectional says, else as llama.cpp decides (TextBidirectional).
  std::optional<bool> text_bidirectional;

  // Gemma 3's fixed grid.
  int patches_per_side() const { return image_size / patch_size; }
  int n_patches() const { return patches_per_side() * patches_per_side(); }
  int tokens_per_side() const { return patches_per_side() / pool; }
  int n_tokens() const { return tokens_per_side() * tokens_per_side(); }
};

// Whether a text model of width text_width attends both ways over this tower's soft tokens: Gemma 3
// does; Gemma 4 does where its file says so, and without the key as llama.cpp assumes (every width
// but E2B's 1536 and E4B's 2560).
bool TextBidirectional(const VisionTowerConfig& config, int text_width);

// The vision tower's settings; an error names the key that is missing or wrong, or says which
// projector gemlet does not run yet.
Result<VisionTowerConfig> ReadVisionTowerConfig(const GgufFile& file);

}  // namespace gemlet

// An mmproj GGUF (llama.cpp's "clip" files, as its converter and `gemlet convert --mmproj-out`
// write them): which vision and audio towers it holds and their settings, read once from the clip.*
// keys.
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
  kGemma3n,  // MobileNet-V5 (timm mobilenetv5_300m_enc) + multi-scale fusion + hard/soft embedder ("gemma3nv")
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
  // Gemma 3n: the fixed soft tokens of every image, a square: image_size / patch_size, the fake patch
  // size llama.cpp's converter writes to make them (768 / 3 = 256 = 16 x 16, the fusion adapter's
  // output grid); and where the vision hard tokens (end-of-image first) start in the text vocabulary.
  int soft_tokens = 0;
  int soft_tokens_side = 0;
  int vocab_offset = 0;

  // Gemma 3's fixed grid.
  int patches_per_side() const { return image_size / patch_size; }
  int n_patches() const { return patches_per_side() * patches_per_side(); }
  int tokens_per_side() const { return patches_per_side() / pool; }
  int n_tokens() const { return tokens_per_side() * tokens_per_side(); }
};

// Which towers an mmproj file holds (its clip.has_*_encoder flags, and Gemma 3's single projector key);
// an error for a file that is not an mmproj.
struct MmprojTowers {
  bool vision = false;
  bool audio = false;
};
Result<MmprojTowers> ReadMmprojTowers(const std::string& path);

// Whether a text model of width text_width attends both ways over this tower's soft tokens: Gemma 3
// does; Gemma 4 does where its file says so, and without the key as llama.cpp assumes (every width
// but E2B's 1536 and E4B's 2560).
bool TextBidirectional(const VisionTowerConfig& config, int text_width);

// The vision tower's settings; an error names the key that is missing or wrong, or says which
// projector gemlet does not run yet.
Result<VisionTowerConfig> ReadVisionTowerConfig(const GgufFile& file);

enum class AudioProjector {
  kGemma3n,  // USM conformer: cumulative-group-norm subsampling, conformer, reduction, hard/soft embedder ("gemma3na")
  kGemma4,   // USM conformer: two conv subsamplings, chunked local attention, light conv, output_proj ("gemma4a")
};

// Which keys Gemma 4's local attention lets a query see. Not a property of the file: the two
// references disagree, and the caller picks (AudioEncoder::Open).
enum class AudioAttentionMask {
  // transformers 5.17's eager attention, which made the hf-mm goldens: it builds the blocked mask as
  // an additive float mask (0 = allowed, finfo.min = hidden) and then hides where logical_not(mask)
  // is true, i.e. where it meant to allow. A query sees the real and padding frames of its block's
  // context *outside* its causal window, never itself; with none, all context slots equally. The
  // goldens match this to 1.5e-6 and miss the window rule by 1.3.
  kHfEager,
  // The window the model describes: the real frames from context_left - 2 back up to the query
  // itself (llama.cpp's gemma4a graph; transformers' sdpa path, whose mask stays boolean).
  kLocalWindow,
};

struct AudioTowerConfig {
  AudioProjector projector = AudioProjector::kGemma4;
  std::string projector_name;  // clip.audio.projector_type as written
  int n_mels = 128;            // clip.audio.num_mel_bins: the features' width
  int hidden = 0;              // clip.audio.embedding_length
  int ffn = 0;
  int n_layers = 0;
  int n_heads = 0;
  int head_dim = 0;            // hidden / n_heads
  int projection_dim = 0;      // the text model's hidden size
  float eps = 1e-6f;
  // The conformer's local attention: queries in chunks of chunk_size, each seeing context_left - 1
  // frames back (itself included) and context_right ahead; logits soft-capped. llama.cpp hard-codes
  // these (12, 13, 0, 50); gemlet's converter writes them.
  int chunk_size = 12;
  int context_left = 13;
  int context_right = 0;
  float logit_cap = 50.0f;
  int conv_kernel = 5;          // the light convolution's causal depthwise kernel
  float residual_weight = 0.5f;  // the half-step FFNs' scale
  AudioAttentionMask attention_mask = AudioAttentionMask::kHfEager;  // the caller's choice, not the file's
  // Gemma 3n: the subsampling norms' eps; every reduction-th conformer frame is kept; the clip always
  // takes soft_token_count soft tokens, padded with the embedding of padding_token_id, an audio hard
  // token (ids from vocab_offset on index mm.a.embedding).
  float conv_norm_eps = 1e-3f;
  int reduction = 1;
  int soft_token_count = 0;  // 0: as many as the clip's valid frames (Gemma 4)
  int vocab_offset = 0;
  int padding_token_id = -1;

  // Frames after the two stride-2 subsamplings (HF: mask[::2][::2]).
  static int SubsampledFrames(int n_frames) { return ((n_frames - 1) / 2 + 1 - 1) / 2 + 1; }
};

// The audio tower's settings; an error names the key that is missing or wrong, or says which
// projector gemlet does not run yet.
Result<AudioTowerConfig> ReadAudioTowerConfig(const GgufFile& file);

}  // namespace gemlet

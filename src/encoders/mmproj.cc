// ReadVisionTowerConfig, ReadAudioTowerConfig: the clip.* keys of an mmproj GGUF.
#include "encoders/mmproj.h"

#include <algorithm>
#include <cmath>
#include <memory>

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
  // Gemma 3 writes the one key; Gemma 3n and 4 a key per modality (an audio-only file has neither).
  if (!f.Has("clip.projector_type") && !f.Has("clip.vision.projector_type")) {
    return Status::Error("the mmproj file holds no vision tower (no clip.vision.projector_type)");
  }
  const char* key = f.Has("clip.projector_type") ? "clip.projector_type" : "clip.vision.projector_type";
  ASSIGN_OR_RETURN(c.projector_name, f.GetString(key));
  if (c.projector_name == "gemma3") {
    c.projector = VisionProjector::kGemma3;
  } else if (c.projector_name == "gemma4v") {
    c.projector = VisionProjector::kGemma4;
  } else if (c.projector_name == "gemma3nv") {
    c.projector = VisionProjector::kGemma3n;
  } else {
    return Status::Error("the mmproj's vision projector '" + c.projector_name +
                         "' is not one gemlet runs yet (gemma3, gemma3nv, gemma4v)");
  }
  const bool gemma4 = c.projector == VisionProjector::kGemma4;
  ASSIGN_OR_RETURN(c.image_size, PositiveU32(f, "clip.vision.image_size"));
  ASSIGN_OR_RETURN(c.patch_size, PositiveU32(f, "clip.vision.patch_size"));
  ASSIGN_OR_RETURN(c.hidden, PositiveU32(f, "clip.vision.embedding_length"));
  ASSIGN_OR_RETURN(c.ffn, PositiveU32(f, "clip.vision.feed_forward_length"));
  ASSIGN_OR_RETURN(c.n_layers, PositiveU32(f, "clip.vision.block_count"));
  ASSIGN_OR_RETURN(c.n_heads, PositiveU32(f, "clip.vision.attention.head_count"));
  ASSIGN_OR_RETURN(c.projection_dim, PositiveU32(f, "clip.vision.projection_dim"));
  c.n_kv_heads = c.n_heads;
  c.head_dim = c.hidden / c.n_heads;
  // llama.cpp's loader takes both as optional; gemlet's converter writes them for Gemma 4.
  if (f.Has("clip.vision.attention.head_count_kv")) {
    ASSIGN_OR_RETURN(c.n_kv_heads, PositiveU32(f, "clip.vision.attention.head_count_kv"));
  }
  if (f.Has("clip.vision.attention.head_dim")) {
    ASSIGN_OR_RETURN(c.head_dim, PositiveU32(f, "clip.vision.attention.head_dim"));
  }
  if (f.Has("clip.vision.attention.layer_norm_epsilon")) {
    ASSIGN_OR_RETURN(c.eps, f.GetF32("clip.vision.attention.layer_norm_epsilon"));
  }
  RETURN_IF_ERROR(ReadTriple(f, "clip.vision.image_mean", &c.mean));
  RETURN_IF_ERROR(ReadTriple(f, "clip.vision.image_std", &c.std));
  // llama.cpp's defaults when the converter wrote none: Gemma 3 pools 896 / 14 = 64 patches a side
  // 4x4; Gemma 4 pools 3x3 with RoPE base 100.
  ASSIGN_OR_RETURN(uint32_t pool, f.GetU32Or("clip.vision.projector.scale_factor", gemma4 ? 3 : 4));
  c.pool = static_cast<int>(std::min<uint32_t>(pool, 1u << 10));
  ASSIGN_OR_RETURN(c.rope_theta, f.GetF32Or("clip.vision.rope.freq_base", 100.0f));
  ASSIGN_OR_RETURN(uint32_t budget, f.GetU32Or("clip.vision.max_soft_tokens", 280));
  c.max_soft_tokens = static_cast<int>(std::min<uint32_t>(budget, 1u << 20));
  const std::string shape = "patch " + std::to_string(c.patch_size) + ", pooling " + std::to_string(c.pool) + ", hidden " +
                            std::to_string(c.hidden) + " over " + std::to_string(c.n_heads) + " heads";
  if (c.pool == 0 || c.max_soft_tokens == 0) return Status::Error("inconsistent vision tower: " + shape);
  if (f.Has("clip.vision.text_bidirectional")) {
    ASSIGN_OR_RETURN(c.text_bidirectional, f.GetBool("clip.vision.text_bidirectional"));
  }
  if (c.projector == VisionProjector::kGemma3n) {
    // The block count, FFN width and heads are fake here (llama.cpp's converter writes 128 blocks):
    // the tower's shape comes from its tensors.
    c.soft_tokens = c.image_size / c.patch_size;
    c.soft_tokens_side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(c.soft_tokens))));
    // Absent from llama.cpp's files: the released models' first vision hard token (262144).
    ASSIGN_OR_RETURN(uint32_t offset, f.GetU32Or("clip.vision.vocab_offset", 262144));
    c.vocab_offset = static_cast<int>(std::min<uint32_t>(offset, 1u << 30));
    if (c.image_size % c.patch_size != 0 || c.soft_tokens_side * c.soft_tokens_side != c.soft_tokens) {
      return Status::Error("inconsistent Gemma 3n vision tower: image " + std::to_string(c.image_size) + " / patch " +
                           std::to_string(c.patch_size) + " is not a square number of soft tokens");
    }
    return c;
  }
  if (gemma4) {
    // Two halves per head, each rotated "rotate half"; query heads share KV heads evenly.
    if (c.head_dim % 4 != 0 || c.n_heads % c.n_kv_heads != 0 || !(c.rope_theta > 0.0f)) {
      return Status::Error("inconsistent vision tower: " + shape + ", head size " + std::to_string(c.head_dim) + ", " +
                           std::to_string(c.n_kv_heads) + " KV heads");
    }
    return c;
  }
  if (c.image_size % c.patch_size != 0 || c.patches_per_side() % c.pool != 0 || c.hidden % c.n_heads != 0 ||
      c.n_kv_heads != c.n_heads || c.head_dim * c.n_heads != c.hidden) {
    return Status::Error("inconsistent vision tower: image " + std::to_string(c.image_size) + ", " + shape);
  }
  return c;
}

Result<MmprojTowers> ReadMmprojTowers(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  ASSIGN_OR_RETURN(std::string arch, f->GetString("general.architecture"));
  if (arch != "clip") return Status::Error("not an mmproj file: general.architecture is '" + arch + "', not 'clip'");
  MmprojTowers t;
  // Gemma 3's files (llama.cpp's older layout) say clip.projector_type alone: a vision tower.
  ASSIGN_OR_RETURN(t.vision, f->GetBoolOr("clip.has_vision_encoder", f->Has("clip.projector_type")));
  ASSIGN_OR_RETURN(t.audio, f->GetBoolOr("clip.has_audio_encoder", false));
  return t;
}

bool TextBidirectional(const VisionTowerConfig& config, int text_width) {
  if (config.projector == VisionProjector::kGemma3) return true;
  // Gemma 3n's text model is causal over images too (HF builds no bidirectional block for it).
  if (config.projector == VisionProjector::kGemma3n) return false;
  if (config.text_bidirectional.has_value()) return *config.text_bidirectional;
  return text_width != 1536 && text_width != 2560;
}

Result<AudioTowerConfig> ReadAudioTowerConfig(const GgufFile& f) {
  ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch != "clip") return Status::Error("not an mmproj file: general.architecture is '" + arch + "', not 'clip'");
  ASSIGN_OR_RETURN(bool audio, f.GetBoolOr("clip.has_audio_encoder", false));
  if (!audio) return Status::Error("the mmproj file holds no audio tower (clip.has_audio_encoder is absent or false)");
  AudioTowerConfig c;
  ASSIGN_OR_RETURN(c.projector_name, f.GetString("clip.audio.projector_type"));
  if (c.projector_name == "gemma4a") {
    c.projector = AudioProjector::kGemma4;
  } else if (c.projector_name == "gemma3na") {
    c.projector = AudioProjector::kGemma3n;
  } else {
    return Status::Error("the mmproj's audio projector '" + c.projector_name +
                         "' is not one gemlet runs yet (gemma4a, gemma3na)");
  }
  ASSIGN_OR_RETURN(c.hidden, PositiveU32(f, "clip.audio.embedding_length"));
  ASSIGN_OR_RETURN(c.ffn, PositiveU32(f, "clip.audio.feed_forward_length"));
  ASSIGN_OR_RETURN(c.n_layers, PositiveU32(f, "clip.audio.block_count"));
  ASSIGN_OR_RETURN(c.n_heads, PositiveU32(f, "clip.audio.attention.head_count"));
  ASSIGN_OR_RETURN(c.projection_dim, PositiveU32(f, "clip.audio.projection_dim"));
  if (f.Has("clip.audio.num_mel_bins")) {
    ASSIGN_OR_RETURN(c.n_mels, PositiveU32(f, "clip.audio.num_mel_bins"));
  }
  // llama.cpp's converter writes 128 mel bins for every Gemma 4 (HF's audio config has no feature
  // size): the input projection after the two stride-2 convolutions says what the tower takes.
  const GgufTensor* in_proj = f.FindTensor("a.input_projection.weight");
  const GgufTensor* conv = f.FindTensor("a.conv1d.1.weight");
  if (c.projector == AudioProjector::kGemma4 && in_proj != nullptr && conv != nullptr && conv->n_dims == 4 &&
      conv->ne[3] > 0 && in_proj->ne[0] % conv->ne[3] == 0) {
    const int64_t freq = in_proj->ne[0] / conv->ne[3];
    if ((c.n_mels + 3) / 4 != freq && freq > 0 && freq <= (1 << 14)) c.n_mels = static_cast<int>(4 * freq);
  }
  // llama.cpp's loader ignores the eps it writes (a wrong value from its converter) and uses 1e-6;
  // gemlet's converter writes the checkpoint's own.
  ASSIGN_OR_RETURN(c.eps, f.GetF32Or("clip.audio.attention.layer_norm_epsilon", 1e-6f));
  // Absent from llama.cpp's files: its graph's constants, which are the released models' values.
  if (f.Has("clip.audio.chunk_size")) {
    ASSIGN_OR_RETURN(c.chunk_size, PositiveU32(f, "clip.audio.chunk_size"));
  }
  if (f.Has("clip.audio.attention.context_left")) {
    ASSIGN_OR_RETURN(c.context_left, PositiveU32(f, "clip.audio.attention.context_left"));
  }
  ASSIGN_OR_RETURN(uint32_t right, f.GetU32Or("clip.audio.attention.context_right", 0));
  c.context_right = static_cast<int>(std::min<uint32_t>(right, 1u << 16));
  ASSIGN_OR_RETURN(c.logit_cap, f.GetF32Or("clip.audio.attention.logit_softcapping", 50.0f));
  if (f.Has("clip.audio.conv_kernel_size")) {
    ASSIGN_OR_RETURN(c.conv_kernel, PositiveU32(f, "clip.audio.conv_kernel_size"));
  }
  ASSIGN_OR_RETURN(c.residual_weight, f.GetF32Or("clip.audio.residual_weight", 0.5f));
  if (c.projector == AudioProjector::kGemma3n) {
    // Absent from llama.cpp's gemma3na files (llama.cpp does not run them): HF's defaults.
    ASSIGN_OR_RETURN(c.conv_norm_eps, f.GetF32Or("clip.audio.conv_norm_epsilon", 1e-3f));
    ASSIGN_OR_RETURN(uint32_t reduction, f.GetU32Or("clip.audio.reduction_factor", 4));
    ASSIGN_OR_RETURN(uint32_t soft_tokens, f.GetU32Or("clip.audio.soft_token_count", 188));
    ASSIGN_OR_RETURN(uint32_t offset, f.GetU32Or("clip.audio.vocab_offset", 262272));
    ASSIGN_OR_RETURN(uint32_t padding, f.GetU32Or("clip.audio.padding_token_id", 262399));
    if (reduction == 0 || reduction > 1024 || soft_tokens == 0 || soft_tokens > (1u << 20) || padding < offset ||
        padding > (1u << 30)) {
      return Status::Error("inconsistent Gemma 3n audio keys: reduction " + std::to_string(reduction) + ", " +
                           std::to_string(soft_tokens) + " soft tokens, padding token " + std::to_string(padding) +
                           " before the audio vocabulary at " + std::to_string(offset));
    }
    c.reduction = static_cast<int>(reduction);
    c.soft_token_count = static_cast<int>(soft_tokens);
    c.vocab_offset = static_cast<int>(offset);
    c.padding_token_id = static_cast<int>(padding);
  }
  c.head_dim = c.hidden / c.n_heads;
  if (c.head_dim * c.n_heads != c.hidden || c.head_dim % 2 != 0 || c.context_left < 2 || c.chunk_size > (1 << 16) ||
      c.context_left > (1 << 16) || !(c.logit_cap > 0.0f) || !(c.eps > 0.0f)) {
    return Status::Error("inconsistent audio tower: hidden " + std::to_string(c.hidden) + " over " +
                         std::to_string(c.n_heads) + " heads, chunk " + std::to_string(c.chunk_size) + ", context " +
                         std::to_string(c.context_left) + "/" + std::to_string(c.context_right) + ", logit cap " +
                         std::to_string(c.logit_cap));
  }
  return c;
}

}  // namespace gemlet

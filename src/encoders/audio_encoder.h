// An audio tower and its embedder, read from an mmproj GGUF: a clip's log-mel features in, the
// embeddings of its soft tokens (the rows the text model takes in place of the audio placeholders)
// out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "encoders/mmproj.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernel_context.h"

namespace gemlet {

class AudioTower;

struct AudioEncoderOptions {
  // Gemma 4: the hf-mm goldens' rule (transformers' eager attention) or the model's own window
  // (llama.cpp); see AudioAttentionMask.
  AudioAttentionMask attention_mask = AudioAttentionMask::kHfEager;
};

class AudioEncoder {
 public:
  // Maps the file; its tensors are read in place. Checks every tensor's name, shape and type
  // before anything is computed. The file may hold a vision tower too (its v.* / mm.* tensors are
  // left alone).
  static Result<std::unique_ptr<AudioEncoder>> Open(const std::string& mmproj_path, const AudioEncoderOptions& options = {});
  ~AudioEncoder();

  const AudioTowerConfig& config() const;

  // features: [n_frames, n_mels] row-major, as media::ComputeLogMel makes them (HF's
  // input_features); valid_mask: [n_frames], 1 = a real frame (null: all real). Returns the number
  // of soft tokens: Gemma 4, the valid encoder frames (HF keeps only those); Gemma 3n, always
  // config().soft_token_count, the slots past the clip (and its padding frames) taking the padding
  // token's hard embedding. embeddings is resized to [count, projection_dim]. tower_out (optional):
  // the encoder's output before the embedder, every frame, padding included ([frames', output
  // width]; Gemma 4: after output_proj; Gemma 3n: after the reduction, padding frames zero). Threads
  // and kernels from ctx.
  Result<int> Encode(const float* features, const uint8_t* valid_mask, int n_frames, std::vector<float>* embeddings,
                     KernelContext& ctx, std::vector<float>* tower_out = nullptr) const;

  // Gemma 3n: the text model's input row for an audio hard token (ids from config().vocab_offset on,
  // e.g. end-of-audio), which HF takes from the audio embedder instead of the token table: out gets
  // projection_dim values. Gemma 4 has no such tokens: an error.
  Status EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const;

  struct Impl;

 private:
  explicit AudioEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemlet

// A vision tower and its projector, read from an mmproj GGUF: an image's pixels in, the embeddings
// of its soft tokens (the rows the text model takes in place of the image placeholders) out.
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

// Gemma 4's input: an image cut into patches as media::PreprocessGemma4 (HF's Gemma4ImageProcessor)
// makes them, padding rows included.
struct ImagePatches {
  const float* values = nullptr;       // [n_rows, 3 * p * p]: each patch (row, column, channel), in [0, 1]
  const int32_t* positions = nullptr;  // [n_rows, 2]: (x = column, y = row) of each patch; (-1, -1) = padding
  int n_rows = 0;                      // max_patches = max_soft_tokens * k^2, padding rows included
};

class VisionEncoder {
 public:
  // Maps the file; its tensors are read in place. Checks every tensor's name, shape and type
  // before anything is computed.
  static Result<std::unique_ptr<VisionEncoder>> Open(const std::string& mmproj_path);
  ~VisionEncoder();

  const VisionTowerConfig& config() const;

  // Gemma 3 and 3n. pixels: [3, S, S], channels first, normalised as the model's processor does (Gemma 3:
  // (v/255 - mean) / std; Gemma 3n: v/255). embeddings: [n_tokens, projection_dim] (Gemma 3n:
  // config().soft_tokens). tower_out (optional): the tower's output
  // before the projector, [n_patches, hidden]. Threads and kernels from ctx.
  Status Encode(const float* pixels, float* embeddings, KernelContext& ctx, std::vector<float>* tower_out = nullptr) const;

  // Gemma 4: the soft tokens of one image, as many as its real patches make (HF: (rows / k) x
  // (columns / k) of the patch grid, row-major); returns that count. embeddings: resized to
  // [count, projection_dim]. tower_out (optional): the vision model's output before the embedder,
  // [count, hidden] (pooled, x sqrt(hidden), standardized where the tower has it). The padding rows
  // take no part: HF masks them out of attention and pooling.
  Result<int> EncodePatches(const ImagePatches& patches, std::vector<float>* embeddings, KernelContext& ctx,
                            std::vector<float>* tower_out = nullptr) const;

  // Gemma 3n: the text model's input row for a vision hard token (ids from config().vocab_offset on:
  // end-of-image is the first), which HF takes from the vision embedder instead of the token table;
  // out gets projection_dim values. Other towers have no such tokens: an error.
  Status EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const;

  struct Impl;

 private:
  explicit VisionEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemlet

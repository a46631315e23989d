// A vision tower and its projector, read from an mmproj GGUF: an image's pixels in, the embeddings
// of its soft tokens (the rows the text model takes in place of the image placeholders) out.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "encoders/mmproj.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernel_context.h"

namespace gemlet {

class VisionEncoder {
 public:
  // Maps the file; its tensors are read in place. Checks every tensor's name, shape and type
  // before anything is computed.
  static Result<std::unique_ptr<VisionEncoder>> Open(const std::string& mmproj_path);
  ~VisionEncoder();

  const VisionTowerConfig& config() const;

  // pixels: [3, S, S], channels first, normalised as the model's processor does (Gemma 3: (v/255 -
  // mean) / std). embeddings: [n_tokens, projection_dim]. tower_out (optional): the tower's output
  // before the projector, [n_patches, hidden]. Threads and kernels from ctx.
  Status Encode(const float* pixels, float* embeddings, KernelContext& ctx, std::vector<float>* tower_out = nullptr) const;

  struct Impl;

 private:
  explicit VisionEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemlet

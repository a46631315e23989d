// Inside src/encoders: the pieces every tower file builds with — clipped linears (HF's
// Gemma4ClippableLinear, llama.cpp's clamp_info_map), row-wise RMSNorm and loops split across the
// context's threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "encoders/vision_tower.h"
#include "kernels/kernels.h"

namespace gemlet {

// clamp(W clamp(x, in_min, in_max), out_min, out_max); a linear without bounds keeps the infinite
// ones (llama.cpp: -FLT_MAX / FLT_MAX, the same here).
struct ClippedLinear {
  WeightMatrix w;
  TowerClamp clamp;
};

// name.weight ([n_out, n_in]) and the optional name.input_min ... name.output_max, each a 1-element
// tensor (llama.cpp's loader: a missing bound is open).
Status BindClippedLinear(const TowerTensors& t, const std::string& name, int64_t n_in, int64_t n_out, ClippedLinear* l);

// y = clamp(W clamp(x)) for n rows (the tower matmul clamps on its way in and out).
void Apply(const ClippedLinear& l, const float* x, int64_t n, float* y, KernelContext& ctx);

// Gemma 3n's multimodal embedder, the same for its vision and audio towers (HF's
// Gemma3nMultimodalEmbedder): n rows of hidden width through an RMSNorm (the soft tokens' weight or
// the hard tokens'), the projection and a weightless RMSNorm; a hard token (end of image, end of
// audio) is its table row through the hard path.
struct Gemma3nEmbedder {
  WeightMatrix table;       // [vocab, hidden]: the hard tokens' embeddings
  std::vector<float> hard_norm, soft_norm;
  WeightMatrix projection;  // [projection_dim, hidden]
  int64_t hidden = 0, projection_dim = 0, vocab_offset = 0;
  float eps = 1e-6f;
  std::string modality;  // "vision" / "audio", for errors

  // prefix "mm." (vision) or "mm.a." (audio): embedding, hard/soft norms, input projection.
  Status Bind(const TowerTensors& t, const GgufFile& file, const std::string& prefix);
  void Embed(const float* x, int64_t n, const std::vector<float>& norm, float* out, KernelContext& ctx) const;
  Status EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const;
};

// Calls fn(row) for rows [0, n), split across the pool.
template <class Fn>
void ForEachRow(KernelContext& ctx, int64_t n, const Fn& fn) {
  ctx.pool().ParallelFor(static_cast<size_t>(n), [&](size_t begin, size_t end, int) {
    for (size_t r = begin; r < end; ++r) fn(static_cast<int64_t>(r));
  });
}

// RMSNorm of n rows of width d (Gemma 3n / 4: x / sqrt(mean(x^2) + eps) * w, no 1 + w; w empty: no
// weight). out may alias x.
void NormRows(const float* x, int64_t n, int64_t d, const std::vector<float>& w, float eps, float* out, KernelContext& ctx);

}  // namespace gemlet

// The shared tower pieces: clipped linears and row-wise norms.
#include "encoders/tower_ops.h"

#include <algorithm>
#include <utility>

namespace gemlet {

Status BindClippedLinear(const TowerTensors& t, const std::string& name, int64_t n_in, int64_t n_out, ClippedLinear* l) {
  ASSIGN_OR_RETURN(l->w, t.Matrix(name + ".weight", n_in, n_out));
  for (auto [suffix, bound] : {std::pair{".input_min", &l->clamp.in_min}, std::pair{".input_max", &l->clamp.in_max},
                               std::pair{".output_min", &l->clamp.out_min}, std::pair{".output_max", &l->clamp.out_max}}) {
    if (!t.Has(name + suffix)) continue;
    ASSIGN_OR_RETURN(std::vector<float> v, t.Vector(name + suffix, 1));
    *bound = v[0];
  }
  return Status::Ok();
}

void Apply(const ClippedLinear& l, const float* x, int64_t n, float* y, KernelContext& ctx) {
  TowerMatMul(l.w, x, n, y, &l.clamp, ctx);
}

Status Gemma3nEmbedder::Bind(const TowerTensors& t, const GgufFile& file, const std::string& prefix) {
  const GgufTensor* rows = file.FindTensor(prefix + "embedding.weight");
  if (rows == nullptr) return Status::Error("mmproj: missing tensor '" + prefix + "embedding.weight'");
  ASSIGN_OR_RETURN(table, t.Matrix(prefix + "embedding.weight", hidden, rows->ne[1]));
  ASSIGN_OR_RETURN(hard_norm, t.Vector(prefix + "hard_emb_norm.weight", hidden));
  ASSIGN_OR_RETURN(soft_norm, t.Vector(prefix + "soft_emb_norm.weight", hidden));
  ASSIGN_OR_RETURN(projection, t.Matrix(prefix + "input_projection.weight", hidden, projection_dim));
  return Status::Ok();
}

void Gemma3nEmbedder::Embed(const float* x, int64_t n, const std::vector<float>& norm, float* out,
                            KernelContext& ctx) const {
  std::vector<float> normed(static_cast<size_t>(n * hidden));
  NormRows(x, n, hidden, norm, eps, normed.data(), ctx);
  TowerMatMul(projection, normed.data(), n, out, ctx);
  NormRows(out, n, projection_dim, {}, eps, out, ctx);
}

Status Gemma3nEmbedder::EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const {
  const int64_t row = static_cast<int64_t>(token) - vocab_offset;
  if (row < 0 || row >= table.n_out) {
    return Status::Error(modality + ": token " + std::to_string(token) + " is not one of the " +
                         std::to_string(table.n_out) + " " + modality + " hard tokens from id " +
                         std::to_string(vocab_offset));
  }
  std::vector<float> embedding(static_cast<size_t>(hidden));
  GetRow(table, row, 1.0f, embedding.data());
  Embed(embedding.data(), 1, hard_norm, out, ctx);
  return Status::Ok();
}

void NormRows(const float* x, int64_t n, int64_t d, const std::vector<float>& w, float eps, float* out, KernelContext& ctx) {
  ForEachRow(ctx, n, [&](int64_t r) { ctx.kernels().rms_norm(x + r * d, w.empty() ? nullptr : w.data(), d, eps, out + r * d); });
}

}  // namespace gemlet

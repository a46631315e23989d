// The shared tower pieces: clipped linears and row-wise norms.
#include "encoders/tower_ops.h"

#include <algorithm>
#include <utility>

namespace gemlet {

Status BindClippedLinear(const TowerTensors& t, const std::string& name, int64_t n_in, int64_t n_out, ClippedLinear* l) {
  ASSIGN_OR_RETURN(l->w, t.Matrix(name + ".weight", n_in, n_out));
  for (auto [suffix, bound] : {std::pair{".input_min", &l->in_min}, std::pair{".input_max", &l->in_max},
                               std::pair{".output_min", &l->out_min}, std::pair{".output_max", &l->out_max}}) {
    if (!t.Has(name + suffix)) continue;
    ASSIGN_OR_RETURN(std::vector<float> v, t.Vector(name + suffix, 1));
    *bound = v[0];
  }
  return Status::Ok();
}

void Apply(const ClippedLinear& l, const float* x, int64_t n, float* y, std::vector<float>& clamped, KernelContext& ctx) {
  const int64_t n_in = l.w.n_in, n_out = l.w.n_out;
  if (l.in_min != -kTowerInf || l.in_max != kTowerInf) {
    if (clamped.size() < static_cast<size_t>(n * n_in)) clamped.resize(static_cast<size_t>(n * n_in));
    float* c = clamped.data();
    ForEachRow(ctx, n, [&](int64_t t) {
      for (int64_t i = t * n_in; i < (t + 1) * n_in; ++i) c[i] = std::clamp(x[i], l.in_min, l.in_max);
    });
    x = c;
  }
  TowerMatMul(l.w, x, n, y, ctx);
  if (l.out_min != -kTowerInf || l.out_max != kTowerInf) {
    ForEachRow(ctx, n, [&](int64_t t) {
      for (int64_t i = t * n_out; i < (t + 1) * n_out; ++i) y[i] = std::clamp(y[i], l.out_min, l.out_max);
    });
  }
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

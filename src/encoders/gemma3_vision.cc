// Gemma 3's vision side: SigLIP (patch embedding, pre-norm encoder blocks with biased LayerNorms,
// full bidirectional attention and a GELU-tanh MLP, a final LayerNorm), then the projector (average
// pooling of the patch grid, (1 + w) RMSNorm, projection to the text model's width). Equations:
// transformers' SiglipVisionTransformer and Gemma3MultiModalProjector.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "encoders/vision_tower.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace gemlet {

namespace {

struct Linear {
  WeightMatrix w;
  std::vector<float> b;  // [n_out]
};

struct Norm {
  std::vector<float> w, b;
};

struct Block {
  Norm ln1, ln2;
  Linear q, k, v, o, up, down;
};

Result<Linear> LinearOf(const TowerTensors& t, const std::string& name, int64_t n_in, int64_t n_out) {
  Linear l;
  ASSIGN_OR_RETURN(l.w, t.Matrix(name + ".weight", n_in, n_out));
  ASSIGN_OR_RETURN(l.b, t.Vector(name + ".bias", n_out));
  return l;
}

Result<Norm> NormOf(const TowerTensors& t, const std::string& name, int64_t n) {
  Norm norm;
  ASSIGN_OR_RETURN(norm.w, t.Vector(name + ".weight", n));
  ASSIGN_OR_RETURN(norm.b, t.Vector(name + ".bias", n));
  return norm;
}

// y = W x + b for each of n rows.
void Apply(const Linear& l, const float* x, int64_t n, float* y, KernelContext& ctx) {
  TowerMatMul(l.w, x, n, y, ctx);
  const int64_t n_out = l.w.n_out;
  ctx.pool().ParallelFor(static_cast<size_t>(n), [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) {
      float* row = y + t * n_out;
      for (int64_t o = 0; o < n_out; ++o) row[o] += l.b[static_cast<size_t>(o)];
    }
  });
}

void LayerNormRows(const Norm& norm, const float* x, int64_t n, int64_t d, float eps, float* out, KernelContext& ctx) {
  ctx.pool().ParallelFor(static_cast<size_t>(n), [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) {
      ctx.kernels().layer_norm(x + t * d, norm.w.data(), norm.b.data(), d, eps, out + t * d);
    }
  });
}

class Gemma3Tower final : public VisionTower {
 public:
  explicit Gemma3Tower(const VisionTowerConfig& c) : c(c) {}
  Status Bind(const GgufFile& file);
  Status Encode(const float* pixels, float* embeddings, KernelContext& ctx, std::vector<float>* tower_out) const override;

 private:
  VisionTowerConfig c;
  WeightMatrix patch;          // [hidden, 3 * p * p]: a conv kernel [hidden, 3, p, p] read as rows
  std::vector<float> patch_bias;
  const GgufTensor* position = nullptr;  // [n_patches, hidden]
  std::vector<Block> blocks;
  Norm post_ln;
  std::vector<float> soft_norm;  // 1 + w, as stored
  const GgufTensor* projection = nullptr;  // [hidden, projection_dim]: x @ W, rows of projection_dim
};

Status Gemma3Tower::Bind(const GgufFile& file) {
  TowerTensors t(file);
  const int64_t d = c.hidden, p = c.patch_size, n = c.n_patches();
  ASSIGN_OR_RETURN(const GgufTensor* patch_t, t.Find("v.patch_embd.weight", {p, p, 3, d}));
  patch = TowerTensors::View(*patch_t, 3 * p * p, d);
  ASSIGN_OR_RETURN(patch_bias, t.Vector("v.patch_embd.bias", d));
  ASSIGN_OR_RETURN(position, t.Find("v.position_embd.weight", {d, n}));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string pre = "v.blk." + std::to_string(l) + ".";
    Block b;
    ASSIGN_OR_RETURN(b.ln1, NormOf(t, pre + "ln1", d));
    ASSIGN_OR_RETURN(b.ln2, NormOf(t, pre + "ln2", d));
    ASSIGN_OR_RETURN(b.q, LinearOf(t, pre + "attn_q", d, d));
    ASSIGN_OR_RETURN(b.k, LinearOf(t, pre + "attn_k", d, d));
    ASSIGN_OR_RETURN(b.v, LinearOf(t, pre + "attn_v", d, d));
    ASSIGN_OR_RETURN(b.o, LinearOf(t, pre + "attn_out", d, d));
    ASSIGN_OR_RETURN(b.up, LinearOf(t, pre + "ffn_up", d, c.ffn));
    ASSIGN_OR_RETURN(b.down, LinearOf(t, pre + "ffn_down", c.ffn, d));
    blocks.push_back(std::move(b));
  }
  ASSIGN_OR_RETURN(post_ln, NormOf(t, "v.post_ln", d));
  ASSIGN_OR_RETURN(soft_norm, t.Vector("mm.soft_emb_norm.weight", d));
  ASSIGN_OR_RETURN(projection, t.Find("mm.input_projection.weight", {c.projection_dim, d}));
  if (projection->type != DType::kF32 && projection->type != DType::kF16 && projection->type != DType::kQ8_0) {
    return Status::Error(std::string("mmproj: mm.input_projection.weight has type ") + DTypeName(projection->type) +
                         " (F32, F16 or Q8_0 are read)");
  }
  return Status::Ok();
}

Status Gemma3Tower::Encode(const float* pixels, float* embeddings, KernelContext& ctx, std::vector<float>* tower_out) const {
  const Gemma3Tower& m = *this;
  const int64_t n = c.n_patches(), d = c.hidden, p = c.patch_size, side = c.patches_per_side(), s = c.image_size;
  // Patches in row-major order, each as the conv kernel reads it: channel, row, column.
  std::vector<float> patches(static_cast<size_t>(n * 3 * p * p));
  for (int64_t py = 0; py < side; ++py) {
    for (int64_t px = 0; px < side; ++px) {
      float* dst = patches.data() + (py * side + px) * 3 * p * p;
      for (int64_t ch = 0; ch < 3; ++ch) {
        for (int64_t y = 0; y < p; ++y) {
          std::memcpy(dst + (ch * p + y) * p, pixels + (ch * s + py * p + y) * s + px * p, static_cast<size_t>(p) * sizeof(float));
        }
      }
    }
  }
  std::vector<float> x(static_cast<size_t>(n * d)), h(x.size()), q(x.size()), k(x.size()), v(x.size()), a(x.size());
  std::vector<float> ff(static_cast<size_t>(n * c.ffn)), pos(static_cast<size_t>(d));
  TowerMatMul(m.patch, patches.data(), n, x.data(), ctx);
  for (int64_t t = 0; t < n; ++t) {
    DequantizeRow(m.position->type, m.position->data + static_cast<size_t>(t) * RowBytes(m.position->type, d), pos.data(), d);
    for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(t * d + i)] += m.patch_bias[static_cast<size_t>(i)] + pos[static_cast<size_t>(i)];
  }
  for (const Block& b : m.blocks) {
    LayerNormRows(b.ln1, x.data(), n, d, c.eps, h.data(), ctx);
    Apply(b.q, h.data(), n, q.data(), ctx);
    Apply(b.k, h.data(), n, k.data(), ctx);
    Apply(b.v, h.data(), n, v.data(), ctx);
    // Every patch attends to every patch (no mask), scaled 1/sqrt(head_dim) (SiglipAttention).
    AttendAll({n, c.n_heads, c.n_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))}, q.data(), k.data(),
              v.data(), a.data(), ctx);
    Apply(b.o, a.data(), n, h.data(), ctx);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    LayerNormRows(b.ln2, x.data(), n, d, c.eps, h.data(), ctx);
    Apply(b.up, h.data(), n, ff.data(), ctx);
    ctx.kernels().gelu_tanh(ff.data(), static_cast<int64_t>(ff.size()));
    Apply(b.down, ff.data(), n, h.data(), ctx);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
  }
  LayerNormRows(m.post_ln, x.data(), n, d, c.eps, x.data(), ctx);
  if (tower_out != nullptr) *tower_out = x;

  // The projector: average each pool x pool square of patches (row-major over the pooled grid),
  // then RMSNorm with the stored (1 + w), then x @ W.
  const int64_t k_pool = c.pool, tokens_side = c.tokens_per_side(), n_tokens = c.n_tokens();
  std::vector<float> pooled(static_cast<size_t>(n_tokens * d), 0.0f);
  for (int64_t oy = 0; oy < tokens_side; ++oy) {
    for (int64_t ox = 0; ox < tokens_side; ++ox) {
      float* dst = pooled.data() + (oy * tokens_side + ox) * d;
      for (int64_t ky = 0; ky < k_pool; ++ky) {
        for (int64_t kx = 0; kx < k_pool; ++kx) {
          const float* src = x.data() + ((oy * k_pool + ky) * side + ox * k_pool + kx) * d;
          for (int64_t i = 0; i < d; ++i) dst[i] += src[i];
        }
      }
      const float inv = 1.0f / static_cast<float>(k_pool * k_pool);
      for (int64_t i = 0; i < d; ++i) dst[i] *= inv;
      ctx.kernels().rms_norm(dst, m.soft_norm.data(), d, c.eps, dst);
    }
  }
  const int64_t t_dim = c.projection_dim;
  const size_t row_bytes = RowBytes(m.projection->type, t_dim);
  std::fill(embeddings, embeddings + n_tokens * t_dim, 0.0f);
  ctx.pool().ParallelFor(static_cast<size_t>(n_tokens), [&](size_t begin, size_t end, int) {
    const KernelTable& kt = ctx.kernels();
    for (size_t t = begin; t < end; ++t) {
      const float* in = pooled.data() + t * d;
      float* out = embeddings + t * t_dim;
      switch (m.projection->type) {
        case DType::kF32:
          kt.weighted_sum_f32(in, 0, 1, reinterpret_cast<const float*>(m.projection->data), t_dim, d, t_dim, out, 0);
          break;
        case DType::kF16:
          kt.weighted_sum_f16(in, 0, 1, reinterpret_cast<const uint16_t*>(m.projection->data), t_dim, d, t_dim, out, 0);
          break;
        default:
          kt.weighted_sum_q8_0(in, 0, 1, reinterpret_cast<const BlockQ8_0*>(m.projection->data), row_bytes / sizeof(BlockQ8_0),
                               d, t_dim, out, 0);
          break;
      }
    }
  });
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<VisionTower>> BindGemma3Tower(const GgufFile& file, const VisionTowerConfig& c) {
  auto tower = std::make_unique<Gemma3Tower>(c);
  RETURN_IF_ERROR(tower->Bind(file));
  return std::unique_ptr<VisionTower>(std::move(tower));
}

}  // namespace gemlet

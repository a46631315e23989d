// Gemma 3n's vision side: MobileNet-V5 (timm's mobilenetv5_300m_enc) — a 3x3 stride-2 stem, stages of
// edge-residual, universal-inverted-residual and multi-query-attention blocks, every norm an RMSNorm
// over channels (RmsNorm2d, eps 1e-6), every activation tanh-GELU — then the multi-scale fusion
// adapter over the last two stages, then the embedder's soft path. Equations: timm's mobilenetv5.py,
// _efficientnet_blocks.py (EdgeResidual, UniversalInvertedResidual, MobileAttention) and
// attention2d.py (MultiQueryAttention2d); transformers' Gemma3nModel.get_image_features and
// Gemma3nMultimodalEmbedder. The block kinds and stages come from the tensor names
// (v.blk.{stage}.{index}.*), as llama.cpp's loader finds them.
//
// Activations are channels-last, [rows * columns, channels], so a 1x1 convolution is a matmul on the
// kernel table and a norm is a row norm.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "encoders/tower_ops.h"
#include "encoders/vision_tower.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace gemlet {

namespace {

// timm's RmsNorm2d default; the checkpoints carry no eps of their own for the tower.
constexpr float kNormEps = 1e-6f;

// A feature map: [h * w, c], row-major over the pixels.
struct Map {
  int64_t h = 0, w = 0, c = 0;
  std::vector<float> v;
  int64_t n() const { return h * w; }
};

// One axis of a convolution with timm's padding='same': stride 1 pads (k - 1) / 2 on both sides;
// stride 2 is Conv2dSame, TensorFlow's asymmetric SAME (the extra pixel after).
struct Axis {
  int64_t out = 0, pad = 0;
};
Axis Same(int64_t in, int64_t k, int64_t stride) {
  if (stride == 1) return {in, (k - 1) / 2};
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + k - in, 0);
  return {out, total / 2};
}

// A convolution over all input channels (the stem's, an edge-residual block's expansion): its kernel
// [out, in, k, k] as matrix rows of in * k * k values (channel, row, column).
struct FullConv {
  WeightMatrix w;
  int64_t k = 0;
  std::vector<float> bias;  // the stem's; empty elsewhere
};

// A depthwise convolution: the kernel [c, 1, k, k] re-laid [k * k, c], so a tap is a run of channels.
struct Depthwise {
  int64_t k = 0;
  std::vector<float> w;
};

struct Pointwise {
  WeightMatrix w;  // [out, in]: 1x1 convolution
  std::vector<float> norm;
};

enum class Kind { kEdge, kInverted, kAttention };

struct Block {
  Kind kind = Kind::kInverted;
  int64_t stride = 1, in_ch = 0, out_ch = 0;
  // Edge residual: full conv -> norm -> GELU -> 1x1 -> norm.
  FullConv exp;
  std::vector<float> exp_norm;
  Pointwise pwl;
  // Universal inverted residual: [depthwise -> norm] -> 1x1 -> norm -> GELU -> [depthwise -> norm ->
  // GELU] -> 1x1 -> norm -> x gamma.
  Depthwise dw_start, dw_mid;
  std::vector<float> dw_start_norm, dw_mid_norm;
  Pointwise pw_exp, pw_proj;
  std::vector<float> gamma;  // layer scale; empty: none
  // Multi-query attention: norm -> q (heads x key_dim), one shared k and v head, each from a
  // depthwise stride-2 downsampling + norm when the block has one -> output 1x1 -> x gamma.
  std::vector<float> attn_norm;
  WeightMatrix q, k, v, o;
  Depthwise k_down, v_down;
  std::vector<float> k_down_norm, v_down_norm;
  int heads = 0;
  int64_t key_dim = 0, value_dim = 0;
};

class Gemma3nVisionTower final : public VisionTower {
 public:
  explicit Gemma3nVisionTower(const VisionTowerConfig& c) : c_(c) {}
  Status Bind(const GgufFile& file);
  Status Encode(const float* pixels, float* embeddings, KernelContext& ctx, std::vector<float>* tower_out) const override;
  Status EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const override;

 private:
  Status BindBlock(const TowerTensors& t, const std::string& pre, int64_t in_ch, Block* b) const;
  Map Run(const Block& b, Map x, KernelContext& ctx) const;
  Map Fuse(const std::vector<const Map*>& features, KernelContext& ctx) const;

  VisionTowerConfig c_;
  FullConv stem_;
  std::vector<float> stem_norm_;
  std::vector<Block> blocks_;
  std::vector<int> stage_ends_;  // index of each stage's last block
  Pointwise fuse_exp_, fuse_proj_;
  std::vector<float> fuse_norm_;
  Gemma3nEmbedder embedder_;
};

Result<FullConv> FullConvOf(const TowerTensors& t, const std::string& name, int64_t in_ch) {
  const GgufTensor* raw = t.Raw(name);
  if (raw == nullptr) return Status::Error("mmproj: missing tensor '" + name + "'");
  FullConv conv;
  conv.k = raw->ne[0];
  ASSIGN_OR_RETURN(const GgufTensor* w, t.Find(name, {conv.k, conv.k, in_ch, raw->ne[3]}));
  conv.w = TowerTensors::View(*w, in_ch * conv.k * conv.k, raw->ne[3]);
  return conv;
}

Result<Depthwise> DepthwiseOf(const TowerTensors& t, const std::string& name, int64_t ch) {
  const GgufTensor* raw = t.Raw(name);
  if (raw == nullptr) return Status::Error("mmproj: missing tensor '" + name + "'");
  Depthwise d;
  d.k = raw->ne[0];
  ASSIGN_OR_RETURN(const GgufTensor* w, t.Find(name, {d.k, d.k, 1, ch}));
  if (w->type != DType::kF32 && w->type != DType::kF16 && w->type != DType::kBF16) {
    return Status::Error("mmproj: depthwise kernel '" + name + "' has type " + DTypeName(w->type) + " (F32, F16, BF16)");
  }
  std::vector<float> stored(static_cast<size_t>(ch * d.k * d.k));
  DequantizeRow(w->type, w->data, stored.data(), static_cast<int64_t>(stored.size()));
  const int64_t taps = d.k * d.k;
  d.w.resize(stored.size());
  for (int64_t c = 0; c < ch; ++c) {
    for (int64_t i = 0; i < taps; ++i) d.w[static_cast<size_t>(i * ch + c)] = stored[static_cast<size_t>(c * taps + i)];
  }
  return d;
}

// The 1x1 convolution name ([1, 1, in, out] in GGUF) reading in channels; its output width.
Result<WeightMatrix> PointwiseOf(const TowerTensors& t, const std::string& name, int64_t in_ch) {
  const GgufTensor* raw = t.Raw(name);
  if (raw == nullptr) return Status::Error("mmproj: missing tensor '" + name + "'");
  ASSIGN_OR_RETURN(const GgufTensor* w, t.Find(name, {1, 1, in_ch, raw->ne[3]}));
  return TowerTensors::View(*w, in_ch, raw->ne[3]);
}

Result<Pointwise> PointwiseNormOf(const TowerTensors& t, const std::string& conv, const std::string& norm, int64_t in_ch) {
  Pointwise p;
  ASSIGN_OR_RETURN(p.w, PointwiseOf(t, conv, in_ch));
  ASSIGN_OR_RETURN(p.norm, t.Vector(norm, p.w.n_out));
  return p;
}

// llama.cpp's converter stores the layer scale [1, c, 1, 1] (GGUF [1, 1, c]); a plain [c] is read too.
Result<std::vector<float>> GammaOf(const TowerTensors& t, const std::string& name, int64_t ch) {
  const GgufTensor* raw = t.Raw(name);
  if (raw == nullptr) return std::vector<float>{};
  if (raw->ne[0] == ch) return t.Vector(name, ch);
  ASSIGN_OR_RETURN(const GgufTensor* g, t.Find(name, {1, 1, ch}));
  std::vector<float> out(static_cast<size_t>(ch));
  DequantizeRow(g->type, g->data, out.data(), ch);
  return out;
}

Status Gemma3nVisionTower::BindBlock(const TowerTensors& t, const std::string& pre, int64_t in_ch, Block* b) const {
  b->in_ch = in_ch;
  if (t.Has(pre + "conv_exp.weight")) {
    b->kind = Kind::kEdge;
    ASSIGN_OR_RETURN(b->exp, FullConvOf(t, pre + "conv_exp.weight", in_ch));
    ASSIGN_OR_RETURN(b->exp_norm, t.Vector(pre + "bn1.weight", b->exp.w.n_out));
    ASSIGN_OR_RETURN(b->pwl, PointwiseNormOf(t, pre + "conv_pwl.weight", pre + "bn2.weight", b->exp.w.n_out));
    b->out_ch = b->pwl.w.n_out;
    return Status::Ok();
  }
  if (t.Has(pre + "attn.query.proj.weight")) {
    b->kind = Kind::kAttention;
    ASSIGN_OR_RETURN(b->attn_norm, t.Vector(pre + "norm.weight", in_ch));
    ASSIGN_OR_RETURN(b->q, PointwiseOf(t, pre + "attn.query.proj.weight", in_ch));
    ASSIGN_OR_RETURN(b->k, PointwiseOf(t, pre + "attn.key.proj.weight", in_ch));
    ASSIGN_OR_RETURN(b->v, PointwiseOf(t, pre + "attn.value.proj.weight", in_ch));
    b->key_dim = b->k.n_out;
    b->value_dim = b->v.n_out;
    if (b->q.n_out % b->key_dim != 0) {
      return Status::Error("mmproj: " + pre + "attn: query width " + std::to_string(b->q.n_out) +
                           " is not a whole number of " + std::to_string(b->key_dim) + "-wide heads");
    }
    // timm's builder gives keys and values one width ('d' of the arch string).
    if (b->value_dim != b->key_dim) {
      return Status::Error("mmproj: " + pre + "attn: keys of " + std::to_string(b->key_dim) + " and values of " +
                           std::to_string(b->value_dim) + " values (MobileNet-V5 makes them equal)");
    }
    b->heads = static_cast<int>(b->q.n_out / b->key_dim);
    ASSIGN_OR_RETURN(b->o, PointwiseOf(t, pre + "attn.output.proj.weight", b->heads * b->value_dim));
    b->out_ch = b->o.n_out;
    // MultiQueryAttention2d has the downsampling only when kv_stride > 1 (2 in every released
    // MobileNet-V5; the stride is not in the weights, and llama.cpp assumes 2 too).
    if (t.Has(pre + "attn.key.down_conv.weight")) {
      ASSIGN_OR_RETURN(b->k_down, DepthwiseOf(t, pre + "attn.key.down_conv.weight", in_ch));
      ASSIGN_OR_RETURN(b->k_down_norm, t.Vector(pre + "attn.key.norm.weight", in_ch));
      ASSIGN_OR_RETURN(b->v_down, DepthwiseOf(t, pre + "attn.value.down_conv.weight", in_ch));
      ASSIGN_OR_RETURN(b->v_down_norm, t.Vector(pre + "attn.value.norm.weight", in_ch));
    }
    ASSIGN_OR_RETURN(b->gamma, GammaOf(t, pre + "layer_scale.gamma", b->out_ch));
    return Status::Ok();
  }
  b->kind = Kind::kInverted;
  if (t.Has(pre + "dw_start.conv.weight")) {
    ASSIGN_OR_RETURN(b->dw_start, DepthwiseOf(t, pre + "dw_start.conv.weight", in_ch));
    ASSIGN_OR_RETURN(b->dw_start_norm, t.Vector(pre + "dw_start.bn.weight", in_ch));
  }
  ASSIGN_OR_RETURN(b->pw_exp, PointwiseNormOf(t, pre + "pw_exp.conv.weight", pre + "pw_exp.bn.weight", in_ch));
  const int64_t mid = b->pw_exp.w.n_out;
  if (t.Has(pre + "dw_mid.conv.weight")) {
    ASSIGN_OR_RETURN(b->dw_mid, DepthwiseOf(t, pre + "dw_mid.conv.weight", mid));
    ASSIGN_OR_RETURN(b->dw_mid_norm, t.Vector(pre + "dw_mid.bn.weight", mid));
  }
  ASSIGN_OR_RETURN(b->pw_proj, PointwiseNormOf(t, pre + "pw_proj.conv.weight", pre + "pw_proj.bn.weight", mid));
  b->out_ch = b->pw_proj.w.n_out;
  ASSIGN_OR_RETURN(b->gamma, GammaOf(t, pre + "layer_scale.gamma", b->out_ch));
  return Status::Ok();
}

Status Gemma3nVisionTower::Bind(const GgufFile& file) {
  TowerTensors t(file);
  ASSIGN_OR_RETURN(stem_, FullConvOf(t, "v.conv_stem.conv.weight", 3));
  const int64_t stem_ch = stem_.w.n_out;
  if (t.Has("v.conv_stem.conv.bias")) {
    // llama.cpp's converter stores it [1, c, 1, 1] like the layer scales.
    ASSIGN_OR_RETURN(stem_.bias, GammaOf(t, "v.conv_stem.conv.bias", stem_ch));
  }
  ASSIGN_OR_RETURN(stem_norm_, t.Vector("v.conv_stem.bn.weight", stem_ch));
  // Stages and blocks in order until a name is missing (llama.cpp's loader probes the same way).
  int64_t ch = stem_ch;
  for (int stage = 0;; ++stage) {
    int found = 0;
    for (int i = 0;; ++i) {
      const std::string pre = "v.blk." + std::to_string(stage) + "." + std::to_string(i) + ".";
      if (!t.Has(pre + "conv_exp.weight") && !t.Has(pre + "attn.query.proj.weight") && !t.Has(pre + "pw_exp.conv.weight")) {
        break;
      }
      Block b;
      RETURN_IF_ERROR(BindBlock(t, pre, ch, &b));
      // Every stage opens with a stride-2 block (mobilenetv5_300m_enc's arch: s2 first in each stage;
      // the builder keeps stride 1 for the rest).
      b.stride = i == 0 ? 2 : 1;
      if (b.stride == 2 && b.kind == Kind::kAttention) {
        return Status::Error("mmproj: " + pre + " opens a stage with attention, which MobileNet-V5 never strides");
      }
      ch = b.out_ch;
      blocks_.push_back(std::move(b));
      ++found;
    }
    if (found == 0) break;
    stage_ends_.push_back(static_cast<int>(blocks_.size()) - 1);
  }
  if (stage_ends_.empty()) return Status::Error("mmproj: no MobileNet-V5 blocks (v.blk.0.0.*)");
  // The adapter reads the last two features of [stem, stage 0, ...] (timm: msfa_indices (-2, -1)).
  int64_t fused_ch = ch;
  fused_ch += stage_ends_.size() >= 2 ? blocks_[static_cast<size_t>(stage_ends_[stage_ends_.size() - 2])].out_ch : stem_ch;
  ASSIGN_OR_RETURN(fuse_exp_, PointwiseNormOf(t, "v.msfa.ffn.pw_exp.conv.weight", "v.msfa.ffn.pw_exp.bn.weight", fused_ch));
  ASSIGN_OR_RETURN(fuse_proj_, PointwiseNormOf(t, "v.msfa.ffn.pw_proj.conv.weight", "v.msfa.ffn.pw_proj.bn.weight",
                                               fuse_exp_.w.n_out));
  if (fuse_proj_.w.n_out != c_.hidden) {
    return Status::Error("mmproj: the fusion adapter gives " + std::to_string(fuse_proj_.w.n_out) +
                         " channels, clip.vision.embedding_length says " + std::to_string(c_.hidden));
  }
  ASSIGN_OR_RETURN(fuse_norm_, t.Vector("v.msfa.norm.weight", c_.hidden));
  embedder_.hidden = c_.hidden;
  embedder_.projection_dim = c_.projection_dim;
  embedder_.vocab_offset = c_.vocab_offset;
  embedder_.eps = c_.eps;
  embedder_.modality = "vision";
  return embedder_.Bind(t, file, "mm.");
}

// y = conv(x) over all channels, as a matmul over im2col patches (channel, row, column), a block of
// output pixels at a time so the patches stay small.
Map Convolve(const FullConv& conv, const Map& x, int64_t stride, KernelContext& ctx) {
  const Axis ay = Same(x.h, conv.k, stride), ax = Same(x.w, conv.k, stride);
  Map y{ay.out, ax.out, conv.w.n_out, {}};
  y.v.resize(static_cast<size_t>(y.n() * y.c));
  const int64_t cols = x.c * conv.k * conv.k;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / cols);
  std::vector<float> patches(static_cast<size_t>(std::min(chunk, y.n()) * cols));
  for (int64_t p0 = 0; p0 < y.n(); p0 += chunk) {
    const int64_t np = std::min(chunk, y.n() - p0);
    ForEachRow(ctx, np, [&](int64_t r) {
      const int64_t oy = (p0 + r) / y.w, ox = (p0 + r) % y.w;
      float* dst = patches.data() + r * cols;
      for (int64_t c = 0; c < x.c; ++c) {
        for (int64_t ky = 0; ky < conv.k; ++ky) {
          const int64_t iy = oy * stride + ky - ay.pad;
          for (int64_t kx = 0; kx < conv.k; ++kx) {
            const int64_t ix = ox * stride + kx - ax.pad;
            const bool inside = iy >= 0 && iy < x.h && ix >= 0 && ix < x.w;
            *dst++ = inside ? x.v[static_cast<size_t>((iy * x.w + ix) * x.c + c)] : 0.0f;
          }
        }
      }
    });
    TowerMatMul(conv.w, patches.data(), np, y.v.data() + p0 * y.c, ctx);
  }
  if (!conv.bias.empty()) {
    ForEachRow(ctx, y.n(), [&](int64_t r) {
      float* row = y.v.data() + r * y.c;
      for (int64_t c = 0; c < y.c; ++c) row[c] += conv.bias[static_cast<size_t>(c)];
    });
  }
  return y;
}

Map DepthwiseConvolve(const Depthwise& d, const Map& x, int64_t stride, KernelContext& ctx) {
  const Axis ay = Same(x.h, d.k, stride), ax = Same(x.w, d.k, stride);
  Map y{ay.out, ax.out, x.c, {}};
  y.v.assign(static_cast<size_t>(y.n() * y.c), 0.0f);
  const int64_t ch = x.c;
  ForEachRow(ctx, y.n(), [&](int64_t r) {
    const int64_t oy = r / y.w, ox = r % y.w;
    float* out = y.v.data() + r * ch;
    for (int64_t ky = 0; ky < d.k; ++ky) {
      const int64_t iy = oy * stride + ky - ay.pad;
      if (iy < 0 || iy >= x.h) continue;
      for (int64_t kx = 0; kx < d.k; ++kx) {
        const int64_t ix = ox * stride + kx - ax.pad;
        if (ix < 0 || ix >= x.w) continue;
        const float* in = x.v.data() + (iy * x.w + ix) * ch;
        const float* w = d.w.data() + (ky * d.k + kx) * ch;
        for (int64_t c = 0; c < ch; ++c) out[c] += in[c] * w[c];
      }
    }
  });
  return y;
}

Map Pointwise1x1(const WeightMatrix& w, const Map& x, KernelContext& ctx) {
  Map y{x.h, x.w, w.n_out, {}};
  y.v.resize(static_cast<size_t>(y.n() * y.c));
  TowerMatMul(w, x.v.data(), x.n(), y.v.data(), ctx);
  return y;
}

void Norm(Map& x, const std::vector<float>& w, KernelContext& ctx) {
  NormRows(x.v.data(), x.n(), x.c, w, kNormEps, x.v.data(), ctx);
}

void Gelu(Map& x, KernelContext& ctx) {
  ForEachRow(ctx, x.n(), [&](int64_t r) { ctx.kernels().gelu_tanh(x.v.data() + r * x.c, x.c); });
}

// out = x * gamma (per channel) + shortcut, where the block keeps its shape (has_skip).
void Finish(const Block& b, Map& y, const Map& shortcut, KernelContext& ctx) {
  const bool skip = b.stride == 1 && b.in_ch == b.out_ch && y.h == shortcut.h && y.w == shortcut.w;
  if (b.gamma.empty() && !skip) return;
  ForEachRow(ctx, y.n(), [&](int64_t r) {
    float* row = y.v.data() + r * y.c;
    if (!b.gamma.empty()) {
      for (int64_t c = 0; c < y.c; ++c) row[c] *= b.gamma[static_cast<size_t>(c)];
    }
    if (skip) {
      const float* s = shortcut.v.data() + r * y.c;
      for (int64_t c = 0; c < y.c; ++c) row[c] += s[c];
    }
  });
}

Map Gemma3nVisionTower::Run(const Block& b, Map x, KernelContext& ctx) const {
  if (b.kind == Kind::kEdge) {
    Map y = Convolve(b.exp, x, b.stride, ctx);
    Norm(y, b.exp_norm, ctx);
    Gelu(y, ctx);
    y = Pointwise1x1(b.pwl.w, y, ctx);
    Norm(y, b.pwl.norm, ctx);
    Finish(b, y, x, ctx);
    return y;
  }
  if (b.kind == Kind::kInverted) {
    Map y;
    const Map* in = &x;
    if (b.dw_start.k > 0) {
      // dw_start strides only where the block has no middle depthwise (UniversalInvertedResidual).
      y = DepthwiseConvolve(b.dw_start, x, b.dw_mid.k > 0 ? 1 : b.stride, ctx);
      Norm(y, b.dw_start_norm, ctx);
      in = &y;
    }
    Map e = Pointwise1x1(b.pw_exp.w, *in, ctx);
    Norm(e, b.pw_exp.norm, ctx);
    Gelu(e, ctx);
    if (b.dw_mid.k > 0) {
      e = DepthwiseConvolve(b.dw_mid, e, b.stride, ctx);
      Norm(e, b.dw_mid_norm, ctx);
      Gelu(e, ctx);
    }
    y = Pointwise1x1(b.pw_proj.w, e, ctx);
    Norm(y, b.pw_proj.norm, ctx);
    Finish(b, y, x, ctx);
    return y;
  }
  Map h = x;
  Norm(h, b.attn_norm, ctx);
  Map q = Pointwise1x1(b.q, h, ctx);  // [n, heads * key_dim]: head-major channels
  Map k, v;
  if (b.k_down.k > 0) {
    Map kd = DepthwiseConvolve(b.k_down, h, 2, ctx);
    Norm(kd, b.k_down_norm, ctx);
    k = Pointwise1x1(b.k, kd, ctx);
    Map vd = DepthwiseConvolve(b.v_down, h, 2, ctx);
    Norm(vd, b.v_down_norm, ctx);
    v = Pointwise1x1(b.v, vd, ctx);
  } else {
    k = Pointwise1x1(b.k, h, ctx);
    v = Pointwise1x1(b.v, h, ctx);
  }
  // Multi-query: every head reads the one key/value head; scale key_dim^-1/2.
  Map a{x.h, x.w, b.heads * b.value_dim, {}};
  a.v.resize(static_cast<size_t>(a.n() * a.c));
  AttendAll({x.n(), b.heads, 1, static_cast<int>(b.key_dim), 1.0f / std::sqrt(static_cast<float>(b.key_dim)), k.n()},
            q.v.data(), k.v.data(), v.v.data(), a.v.data(), ctx);
  Map y = Pointwise1x1(b.o, a, ctx);
  Finish(b, y, x, ctx);
  return y;
}

// MobileNetV5MultiScaleFusionAdapter: features upsampled (nearest) to the first one's size, concatenated
// over channels, the FFN (1x1 -> norm -> GELU -> 1x1 -> norm), then down to the output grid (average
// pooling where the sizes divide, else bilinear) and the final norm.
Map Gemma3nVisionTower::Fuse(const std::vector<const Map*>& features, KernelContext& ctx) const {
  const int64_t hh = features[0]->h, hw = features[0]->w;
  Map cat{hh, hw, 0, {}};
  for (const Map* f : features) cat.c += f->c;
  cat.v.resize(static_cast<size_t>(cat.n() * cat.c));
  ForEachRow(ctx, cat.n(), [&](int64_t r) {
    const int64_t oy = r / hw, ox = r % hw;
    float* dst = cat.v.data() + r * cat.c;
    for (const Map* f : features) {
      // F.interpolate(mode="nearest"): source floor(dst * in / out).
      const int64_t iy = std::min(oy * f->h / hh, f->h - 1), ix = std::min(ox * f->w / hw, f->w - 1);
      std::memcpy(dst, f->v.data() + (iy * f->w + ix) * f->c, static_cast<size_t>(f->c) * sizeof(float));
      dst += f->c;
    }
  });
  Map e = Pointwise1x1(fuse_exp_.w, cat, ctx);
  Norm(e, fuse_exp_.norm, ctx);
  Gelu(e, ctx);
  Map y = Pointwise1x1(fuse_proj_.w, e, ctx);
  Norm(y, fuse_proj_.norm, ctx);
  const int64_t side = c_.soft_tokens_side, ch = y.c;
  if (y.h != side || y.w != side) {
    Map out{side, side, ch, {}};
    out.v.assign(static_cast<size_t>(out.n() * ch), 0.0f);
    if (y.h % side == 0 && y.w % side == 0) {
      const int64_t sy = y.h / side, sx = y.w / side;
      const float inv = 1.0f / static_cast<float>(sy * sx);
      ForEachRow(ctx, out.n(), [&](int64_t r) {
        float* dst = out.v.data() + r * ch;
        const int64_t oy = r / side, ox = r % side;
        for (int64_t dy = 0; dy < sy; ++dy) {
          for (int64_t dx = 0; dx < sx; ++dx) {
            const float* src = y.v.data() + ((oy * sy + dy) * y.w + ox * sx + dx) * ch;
            for (int64_t c = 0; c < ch; ++c) dst[c] += src[c];
          }
        }
        for (int64_t c = 0; c < ch; ++c) dst[c] *= inv;
      });
    } else {
      // F.interpolate(mode="bilinear", align_corners=False): source (dst + 0.5) * in / out - 0.5,
      // clamped at 0, its two neighbours weighted by distance.
      const auto taps = [](int64_t o, int64_t in, int64_t out_n, int64_t* i0, int64_t* i1, float* f) {
        const float s = std::max((static_cast<float>(o) + 0.5f) * static_cast<float>(in) / static_cast<float>(out_n) - 0.5f, 0.0f);
        *i0 = std::min(static_cast<int64_t>(s), in - 1);
        *i1 = std::min(*i0 + 1, in - 1);
        *f = s - static_cast<float>(*i0);
      };
      ForEachRow(ctx, out.n(), [&](int64_t r) {
        int64_t y0, y1, x0, x1;
        float fy, fx;
        taps(r / side, y.h, side, &y0, &y1, &fy);
        taps(r % side, y.w, side, &x0, &x1, &fx);
        float* dst = out.v.data() + r * ch;
        const float* p00 = y.v.data() + (y0 * y.w + x0) * ch;
        const float* p01 = y.v.data() + (y0 * y.w + x1) * ch;
        const float* p10 = y.v.data() + (y1 * y.w + x0) * ch;
        const float* p11 = y.v.data() + (y1 * y.w + x1) * ch;
        for (int64_t c = 0; c < ch; ++c) {
          dst[c] = (1 - fy) * ((1 - fx) * p00[c] + fx * p01[c]) + fy * ((1 - fx) * p10[c] + fx * p11[c]);
        }
      });
    }
    y = std::move(out);
  }
  Norm(y, fuse_norm_, ctx);
  return y;
}

Status Gemma3nVisionTower::EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const {
  return embedder_.EmbedHardToken(token, out, ctx);
}

Status Gemma3nVisionTower::Encode(const float* pixels, float* embeddings, KernelContext& ctx,
                                  std::vector<float>* tower_out) const {
  const int64_t s = c_.image_size;
  Map x{s, s, 3, {}};
  x.v.resize(static_cast<size_t>(s * s * 3));
  for (int64_t ch = 0; ch < 3; ++ch) {
    for (int64_t i = 0; i < s * s; ++i) x.v[static_cast<size_t>(i * 3 + ch)] = pixels[ch * s * s + i];
  }
  x = Convolve(stem_, x, 2, ctx);
  Norm(x, stem_norm_, ctx);
  Gelu(x, ctx);
  // The adapter's inputs: the last two of [stem, end of stage 0, end of stage 1, ...].
  const size_t n_stages = stage_ends_.size();
  Map stem_copy;
  if (n_stages < 2) stem_copy = x;
  Map kept;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    x = Run(blocks_[i], std::move(x), ctx);
    if (n_stages >= 2 && static_cast<int>(i) == stage_ends_[n_stages - 2]) kept = x;
  }
  const Map& first = n_stages >= 2 ? kept : stem_copy;
  Map fused = Fuse({&first, &x}, ctx);
  // [side * side, hidden], row-major over the grid: HF's reshape(B, C, side * side).permute(0, 2, 1).
  if (tower_out != nullptr) *tower_out = fused.v;
  // ref: Gemma3nModel.get_image_features scales by sqrt(vision hidden_size) before the embedder.
  const float scale = std::sqrt(static_cast<float>(c_.hidden));
  for (float& v : fused.v) v *= scale;
  embedder_.Embed(fused.v.data(), fused.n(), embedder_.soft_norm, embeddings, ctx);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<VisionTower>> BindGemma3nTower(const GgufFile& file, const VisionTowerConfig& c) {
  auto tower = std::make_unique<Gemma3nVisionTower>(c);
  RETURN_IF_ERROR(tower->Bind(file));
  return std::unique_ptr<VisionTower>(std::move(tower));
}

}  // namespace gemlet

// The subsampling convolutions and the USM conformer block of Gemma 3n's and Gemma 4's audio towers.
// Equations: transformers 5.17's Gemma4AudioLayer and Gemma3nAudioConformerBlock (the same block
// under other names).
#include "encoders/conformer.h"

#include <algorithm>
#include <cmath>

#include "tensor/dtype.h"

namespace gemlet {

Status AudioTower::EmbedHardToken(int32_t token, float*, KernelContext&) const {
  return Status::Error("audio: token " + std::to_string(token) +
                       " is not an audio hard token (this tower's model embeds no audio tokens itself)");
}

Status BindSubsamplingConv(const GgufFile& file, int index, int64_t in_ch, SubsamplingConv* conv) {
  TowerTensors t(file);
  const std::string name = "a.conv1d." + std::to_string(index);
  const GgufTensor* w = file.FindTensor(name + ".weight");
  if (w == nullptr) return Status::Error("mmproj: missing tensor '" + name + ".weight'");
  conv->in_ch = in_ch;
  conv->out_ch = w->ne[3];
  ASSIGN_OR_RETURN(const GgufTensor* checked, t.Find(name + ".weight", {3, 3, in_ch, conv->out_ch}));
  conv->w = TowerTensors::View(*checked, 9 * in_ch, conv->out_ch);
  ASSIGN_OR_RETURN(conv->norm, t.Vector(name + ".norm.weight", conv->out_ch));
  return Status::Ok();
}

void ConvolveStride2(const SubsamplingConv& l, const float* in, int64_t rows, int64_t cols, int first_row,
                     const uint8_t* keep, float* out, KernelContext& ctx,
                     const std::function<void(int64_t, int64_t)>& finish) {
  const int64_t out_rows = Halved(rows), out_cols = Halved(cols), width = 9 * l.in_ch;
  constexpr int64_t kBlockRows = 8;
  std::vector<float> patches(static_cast<size_t>(std::min(kBlockRows, out_rows) * out_cols * width));
  for (int64_t r0 = 0; r0 < out_rows; r0 += kBlockRows) {
    const int64_t n_rows = std::min(kBlockRows, out_rows - r0);
    ForEachRow(ctx, n_rows * out_cols, [&](int64_t i) {
      const int64_t r = r0 + i / out_cols, col = i % out_cols;
      float* patch = patches.data() + i * width;
      for (int64_t ky = 0; ky < 3; ++ky) {
        const int64_t y = 2 * r + first_row + ky;
        const bool row_in = y >= 0 && y < rows && (keep == nullptr || keep[y] != 0);
        for (int64_t kx = 0; kx < 3; ++kx) {
          const int64_t x = 2 * col - 1 + kx;
          const bool in_range = row_in && x >= 0 && x < cols;
          for (int64_t ch = 0; ch < l.in_ch; ++ch) {
            patch[ch * 9 + ky * 3 + kx] = in_range ? in[(y * cols + x) * l.in_ch + ch] : 0.0f;
          }
        }
      }
    });
    TowerMatMul(l.w, patches.data(), n_rows * out_cols, out + r0 * out_cols * l.out_ch, ctx);
    finish(r0, n_rows);
  }
}

Status Conformer::Bind(const TowerTensors& t, const AudioTowerConfig& c, const ConformerNames& names,
                       const LocalAttention& a) {
  c_ = c;
  a_ = a;
  const int64_t d = c.hidden, ffn = c.ffn, hd = c.head_dim;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string pre = "a.blk." + std::to_string(l) + ".";
    ConformerBlock b;
    const std::pair<std::string, std::vector<float>*> norms[] = {
        {"ffn_norm", &b.ffn_norm},       {"ffn_post_norm", &b.ffn_post_norm},   {"ffn_norm_1", &b.ffn_norm_1},
        {"ffn_post_norm_1", &b.ffn_post_norm_1}, {names.attn_pre_norm, &b.attn_pre_norm},
        {names.attn_post_norm, &b.attn_post_norm},
        // llama.cpp's table names the light conv's pre-norm conv_norm and its inner norm norm_conv.
        {"conv_norm", &b.conv_pre_norm}, {"norm_conv", &b.conv_norm},         {names.out_norm, &b.out_norm}};
    for (const auto& [name, out] : norms) {
      ASSIGN_OR_RETURN(*out, t.Vector(pre + name + ".weight", d));
    }
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "ffn_up", d, ffn, &b.ffn_up));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "ffn_down", ffn, d, &b.ffn_down));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "ffn_up_1", d, ffn, &b.ffn_up_1));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "ffn_down_1", ffn, d, &b.ffn_down_1));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_q", d, d, &b.q));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_k", d, d, &b.k));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_v", d, d, &b.v));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_out", d, d, &b.o));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "conv_pw1", d, 2 * d, &b.conv_pw1));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "conv_pw2", d, d, &b.conv_pw2));
    ASSIGN_OR_RETURN(b.k_rel, t.Matrix(pre + names.k_rel + ".weight", d, d));
    ASSIGN_OR_RETURN(b.per_dim_scale, t.Vector(pre + names.per_dim_scale, hd));
    if (!names.softplus_stored) {
      for (float& s : b.per_dim_scale) s = s > 20.0f ? s : std::log1p(std::exp(s));
    }
    // Gemma 4's converter drops the kernel's middle axis ([K, channels]); Gemma 3n's keeps it.
    const GgufTensor* raw = t.Raw(pre + "conv_dw.weight");
    const bool middle = raw != nullptr && raw->ne[1] == 1 && raw->ne[2] == d;
    ASSIGN_OR_RETURN(const GgufTensor* dw, middle ? t.Find(pre + "conv_dw.weight", {c.conv_kernel, 1, d})
                                                  : t.Find(pre + "conv_dw.weight", {c.conv_kernel, d}));
    b.conv_dw.resize(static_cast<size_t>(d * c.conv_kernel));
    for (int64_t ch = 0; ch < d; ++ch) {
      DequantizeRow(dw->type, dw->data + ch * RowBytes(dw->type, c.conv_kernel), b.conv_dw.data() + ch * c.conv_kernel,
                    c.conv_kernel);
    }
    blocks_.push_back(std::move(b));
  }
  // The sinusoids of the relative positions, [sin(p * inv_i) ..., cos(p * inv_i) ...] over the
  // hidden width with inv_i = 10000^(-i / (hidden / 2 - 1)), in float as HF builds its buffer.
  const int64_t half = d / 2;
  const float step = static_cast<float>(std::log(10000.0) / static_cast<double>(std::max<int64_t>(half - 1, 1)));
  timing_.resize(static_cast<size_t>(a.n_rel * d));
  for (int j = 0; j < a.n_rel; ++j) {
    const float position = static_cast<float>(a.rel_first - j);
    for (int64_t i = 0; i < half; ++i) {
      const float scaled = position * std::exp(static_cast<float>(i) * -step);
      timing_[static_cast<size_t>(j * d + i)] = std::sin(scaled);
      timing_[static_cast<size_t>(j * d + half + i)] = std::cos(scaled);
    }
  }
  return Status::Ok();
}

// x += residual_weight * post(down(silu(up(pre(x))))) (HF's feed_forward1/2, "half-step").
void Conformer::HalfStepFfn(const std::vector<float>& pre, const ClippedLinear& up, const ClippedLinear& down,
                            const std::vector<float>& post, float* x, int64_t n, Work& w, KernelContext& ctx) const {
  const int64_t d = c_.hidden, ffn = c_.ffn;
  float* h = w.h.data();
  float* u = w.u.data();
  NormRows(x, n, d, pre, c_.eps, h, ctx);
  Apply(up, h, n, u, ctx);
  ForEachRow(ctx, n, [&](int64_t t) { ctx.kernels().silu(u + t * ffn, ffn); });
  Apply(down, u, n, h, ctx);
  ForEachRow(ctx, n, [&](int64_t t) {
    float* row = h + t * d;
    ctx.kernels().rms_norm(row, post.data(), d, c_.eps, row);
    for (int64_t i = 0; i < d; ++i) x[t * d + i] += row[i] * c_.residual_weight;
  });
}

const std::vector<std::vector<float>>& Conformer::RelativeKeys(KernelContext& ctx) const {
  std::lock_guard<std::mutex> lock(rel_keys_->mutex);
  for (const auto& [table, keys] : rel_keys_->by_table) {
    if (table == &ctx.kernels()) return keys;
  }
  std::vector<std::vector<float>> keys;
  for (const ConformerBlock& b : blocks_) {
    keys.emplace_back(static_cast<size_t>(a_.n_rel * c_.hidden));
    TowerMatMul(b.k_rel, timing_.data(), a_.n_rel, keys.back().data(), ctx);
  }
  rel_keys_->by_table.emplace_back(&ctx.kernels(), std::move(keys));
  return rel_keys_->by_table.back().second;
}

// Chunked local self-attention (HF's Gemma4AudioAttention, Gemma3nAudioAttention): queries in blocks
// of `chunk`, each block's keys the frames from max_past before it to max_future after it; the
// window rule (or its inverse, kHfEager) picks which of them a query sees. The logit for a key is
// q.k plus q.r, r the relative position row of its distance (none beyond the table), soft-capped;
// queries scaled by d^-0.5 / ln 2 * softplus(per_dim_scale), keys by k_scale. A query that sees no
// key spreads evenly over all context slots (HF's softmax over equally masked logits), slots past
// the clip's ends counting as zeros.
void Conformer::Attention(const ConformerBlock& b, const std::vector<float>& rel_k, float* x, int64_t n,
                          const uint8_t* valid, Work& w, KernelContext& ctx) const {
  const int64_t d = c_.hidden, hd = c_.head_dim, heads = c_.n_heads, slots = a_.context();
  std::vector<float>& h = w.h;
  std::vector<float>& q = w.q;
  std::vector<float>& k = w.k;
  std::vector<float>& v = w.v;
  std::vector<float>& out = w.attn;
  NormRows(x, n, d, b.attn_pre_norm, c_.eps, h.data(), ctx);
  Apply(b.q, h.data(), n, q.data(), ctx);
  Apply(b.k, h.data(), n, k.data(), ctx);
  Apply(b.v, h.data(), n, v.data(), ctx);
  ForEachRow(ctx, n, [&](int64_t t) {
    float* qt = q.data() + t * d;
    for (int64_t i = 0; i < d; ++i) qt[i] = qt[i] * a_.q_scale * b.per_dim_scale[static_cast<size_t>(i % hd)];
    if (a_.k_scale != 1.0f) {
      float* kt = k.data() + t * d;
      for (int64_t i = 0; i < d; ++i) kt[i] *= a_.k_scale;
    }
  });
  std::vector<std::vector<float>> scores(static_cast<size_t>(ctx.n_threads()));
  std::vector<std::vector<int64_t>> keys(scores.size());
  ctx.pool().ParallelFor(static_cast<size_t>(n * heads), [&](size_t begin, size_t end, int thread) {
    const KernelTable& kt = ctx.kernels();
    std::vector<float>& s = scores[static_cast<size_t>(thread)];
    std::vector<int64_t>& at = keys[static_cast<size_t>(thread)];
    s.resize(static_cast<size_t>(slots));
    at.resize(static_cast<size_t>(slots));
    for (size_t item = begin; item < end; ++item) {
      const int64_t t = static_cast<int64_t>(item) / heads, head = static_cast<int64_t>(item) % heads;
      const int64_t first = t / a_.chunk * a_.chunk - a_.max_past;  // the block's first context slot
      const float* qt = q.data() + t * d + head * hd;
      float* o = out.data() + t * d + head * hd;
      std::fill(o, o + hd, 0.0f);
      int m = 0;
      for (int64_t key = std::max<int64_t>(first, 0); key < std::min(first + slots, n); ++key) {
        const bool allowed = valid[key] != 0 && a_.InWindow(t - key);
        if (allowed == a_.inverted_window) continue;
        float logit = kt.Dot(qt, k.data() + key * d + head * hd, hd);
        const int64_t j = a_.max_past - (t - key);
        if (j >= 0 && j < a_.n_rel) logit += kt.Dot(qt, rel_k.data() + j * d + head * hd, hd);
        s[static_cast<size_t>(m)] = logit;
        at[static_cast<size_t>(m++)] = key;
      }
      if (m == 0) {
        for (int64_t key = std::max<int64_t>(first, 0); key < std::min(first + slots, n); ++key) {
          kt.Axpy(1.0f / static_cast<float>(slots), v.data() + key * d + head * hd, o, hd);
        }
        continue;
      }
      kt.soft_cap(s.data(), m, a_.logit_cap);
      kt.softmax(s.data(), m);
      for (int i = 0; i < m; ++i) kt.Axpy(s[static_cast<size_t>(i)], v.data() + at[static_cast<size_t>(i)] * d + head * hd, o, hd);
    }
  });
  Apply(b.o, out.data(), n, h.data(), ctx);
  ForEachRow(ctx, n, [&](int64_t t) {
    float* row = h.data() + t * d;
    ctx.kernels().rms_norm(row, b.attn_post_norm.data(), d, c_.eps, row);
    for (int64_t i = 0; i < d; ++i) x[t * d + i] += row[i];
  });
}

// x += pw2(silu(norm(causal depthwise conv(glu(pw1(pre_norm(x))))))) (HF's Gemma4AudioLightConv1d:
// the GLU keeps the first half gated by the sigmoid of the second; the kernel sees only the
// kernel - 1 frames before each frame and the frame itself).
void Conformer::LightConv(const ConformerBlock& b, float* x, int64_t n, Work& w, KernelContext& ctx) const {
  const int64_t d = c_.hidden, taps = c_.conv_kernel;
  float* h = w.h.data();
  float* g = w.u.data();  // [n, 2 hidden]: the GLU's halves
  float* u = w.q.data();  // [n, hidden]: the GLU's output, then pw2's
  NormRows(x, n, d, b.conv_pre_norm, c_.eps, h, ctx);
  Apply(b.conv_pw1, h, n, g, ctx);
  ForEachRow(ctx, n, [&](int64_t t) { ctx.kernels().sigmoid_mul(g + t * 2 * d, g + t * 2 * d + d, u + t * d, d); });
  ForEachRow(ctx, n, [&](int64_t t) {
    float* out = h + t * d;
    for (int64_t ch = 0; ch < d; ++ch) {
      float sum = 0.0f;
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t src = t - (taps - 1) + tap;
        if (src >= 0) sum += b.conv_dw[static_cast<size_t>(ch * taps + tap)] * u[src * d + ch];
      }
      out[ch] = sum;
    }
    ctx.kernels().rms_norm(out, b.conv_norm.data(), d, c_.eps, out);
    ctx.kernels().silu(out, d);
  });
  Apply(b.conv_pw2, h, n, u, ctx);
  ForEachRow(ctx, n, [&](int64_t t) {
    for (int64_t i = 0; i < d; ++i) x[t * d + i] += u[t * d + i];
  });
}

void Conformer::Forward(float* x, int64_t n, const uint8_t* valid, KernelContext& ctx) const {
  const int64_t d = c_.hidden;
  const std::vector<std::vector<float>>& rel_keys = RelativeKeys(ctx);
  Work w;
  for (std::vector<float>* buffer : {&w.h, &w.q, &w.k, &w.v, &w.attn}) buffer->resize(static_cast<size_t>(n * d));
  w.u.resize(static_cast<size_t>(n * std::max<int64_t>(c_.ffn, 2 * d)));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const ConformerBlock& b = blocks_[i];
    HalfStepFfn(b.ffn_norm, b.ffn_up, b.ffn_down, b.ffn_post_norm, x, n, w, ctx);
    Attention(b, rel_keys[i], x, n, valid, w, ctx);
    if (a_.mask_conv_input) {
      for (int64_t t = 0; t < n; ++t) {
        if (valid[t] == 0) std::fill(x + t * d, x + (t + 1) * d, 0.0f);
      }
    }
    LightConv(b, x, n, w, ctx);
    HalfStepFfn(b.ffn_norm_1, b.ffn_up_1, b.ffn_down_1, b.ffn_post_norm_1, x, n, w, ctx);
    NormRows(x, n, d, b.out_norm, c_.eps, x, ctx);
  }
}

}  // namespace gemlet

// Gemma 4's vision side: a ViT over an image's real patches (learned x and y position tables, RMSNorm
// sandwiches, q/k norms with weights and a weightless v norm, 2D RoPE, attention scale 1, gated
// GELU-tanh MLP, clipped linears on the on-device models), its own k x k position pooling
// x sqrt(hidden), optional standardisation, then the embedder (weightless RMSNorm, projection).
// Equations: transformers 5.17's Gemma4VisionModel and Gemma4MultimodalEmbedder.
#include <algorithm>
#include <cmath>
#include <string>

#include "encoders/tower_ops.h"
#include "encoders/vision_tower.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace gemlet {

namespace {

struct Block {
  std::vector<float> ln1, attn_post_norm, ln2, ffn_post_norm;  // [hidden]
  std::vector<float> q_norm, k_norm;                           // [head_dim]
  ClippedLinear q, k, v, o, gate, up, down;
};

class Gemma4Tower final : public VisionTower {
 public:
  explicit Gemma4Tower(const VisionTowerConfig& c) : c_(c) {}
  Status Bind(const GgufFile& file);
  Result<int> EncodePatches(const ImagePatches& patches, std::vector<float>* embeddings, KernelContext& ctx,
                            std::vector<float>* tower_out) const override;

 private:
  void Embed(const ImagePatches& patches, const std::vector<int>& rows, float* x, KernelContext& ctx) const;
  void Layer(const Block& b, const int32_t* const* pos, int64_t n, float* x, KernelContext& ctx) const;
  Result<std::vector<float>> Pool(const ImagePatches& patches, const std::vector<int>& rows, const float* x) const;

  VisionTowerConfig c_;
  WeightMatrix patch_;                    // [hidden, 3 * p * p]: the conv kernel [hidden, 3, p, p] as rows
  const GgufTensor* position_ = nullptr;  // [2, table, hidden]: by x, then by y
  int64_t table_ = 0;                     // positions per table
  std::vector<Block> blocks_;
  std::vector<float> std_bias_, std_scale_;  // [hidden]; empty: no standardisation
  WeightMatrix projection_;                  // [projection_dim, hidden]
  std::vector<float> inv_freq_;              // [head_dim / 4]: the RoPE of each half-head
};

Status Gemma4Tower::Bind(const GgufFile& file) {
  TowerTensors t(file);
  const int64_t d = c_.hidden, p = c_.patch_size, hd = c_.head_dim;
  const int64_t q_width = c_.n_heads * hd, kv_width = c_.n_kv_heads * hd;
  ASSIGN_OR_RETURN(const GgufTensor* patch, t.Find("v.patch_embd.weight", {p, p, 3, d}));
  patch_ = TowerTensors::View(*patch, 3 * p * p, d);
  const GgufTensor* position = file.FindTensor("v.position_embd.weight");
  if (position == nullptr) return Status::Error("mmproj: missing tensor 'v.position_embd.weight'");
  table_ = position->ne[1];
  ASSIGN_OR_RETURN(position_, t.Find("v.position_embd.weight", {d, table_, 2}));
  for (int l = 0; l < c_.n_layers; ++l) {
    const std::string pre = "v.blk." + std::to_string(l) + ".";
    Block b;
    ASSIGN_OR_RETURN(b.ln1, t.Vector(pre + "ln1.weight", d));
    ASSIGN_OR_RETURN(b.attn_post_norm, t.Vector(pre + "attn_post_norm.weight", d));
    ASSIGN_OR_RETURN(b.ln2, t.Vector(pre + "ln2.weight", d));
    ASSIGN_OR_RETURN(b.ffn_post_norm, t.Vector(pre + "ffn_post_norm.weight", d));
    ASSIGN_OR_RETURN(b.q_norm, t.Vector(pre + "attn_q_norm.weight", hd));
    ASSIGN_OR_RETURN(b.k_norm, t.Vector(pre + "attn_k_norm.weight", hd));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_q", d, q_width, &b.q));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_k", d, kv_width, &b.k));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_v", d, kv_width, &b.v));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "attn_out", q_width, d, &b.o));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "ffn_gate", d, c_.ffn, &b.gate));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "ffn_up", d, c_.ffn, &b.up));
    RETURN_IF_ERROR(BindClippedLinear(t, pre + "ffn_down", c_.ffn, d, &b.down));
    blocks_.push_back(std::move(b));
  }
  // Standardisation where both vectors are present (llama.cpp's rule; HF's `standardize`).
  if (t.Has("v.std_bias") || t.Has("v.std_scale")) {
    ASSIGN_OR_RETURN(std_bias_, t.Vector("v.std_bias", d));
    ASSIGN_OR_RETURN(std_scale_, t.Vector("v.std_scale", d));
  }
  ASSIGN_OR_RETURN(projection_, t.Matrix("mm.input_projection.weight", d, c_.projection_dim));
  // HF's Gemma4VisionRotaryEmbedding: each half of a head rotates with its own coordinate over
  // head_dim / 2 channels, inv_freq = 1 / theta^(2j / (head_dim / 2)) in float.
  const int spatial = c_.head_dim / 2;
  inv_freq_.resize(static_cast<size_t>(spatial / 2));
  for (int j = 0; j < spatial / 2; ++j) {
    inv_freq_[static_cast<size_t>(j)] =
        1.0f / std::pow(c_.rope_theta, static_cast<float>(2 * j) / static_cast<float>(spatial));
  }
  return Status::Ok();
}

// x[i] = input_proj(2 (pixels - 0.5)) + table_x[px] + table_y[py] for the real patches `rows`
// (HF's Gemma4VisionPatchEmbedder: the model maps the processor's [0, 1] to [-1, 1] itself).
void Gemma4Tower::Embed(const ImagePatches& patches, const std::vector<int>& rows, float* x, KernelContext& ctx) const {
  const int64_t n = static_cast<int64_t>(rows.size()), d = c_.hidden, p = c_.patch_size, dim = 3 * p * p;
  std::vector<float> in(static_cast<size_t>(n * dim));
  // HF flattens a patch (row, column, channel); the stored kernel reads (channel, row, column).
  ForEachRow(ctx, n, [&](int64_t i) {
    const float* src = patches.values + static_cast<int64_t>(rows[static_cast<size_t>(i)]) * dim;
    float* dst = in.data() + i * dim;
    for (int64_t y = 0; y < p; ++y) {
      for (int64_t col = 0; col < p; ++col) {
        for (int64_t ch = 0; ch < 3; ++ch) dst[(ch * p + y) * p + col] = 2.0f * (src[(y * p + col) * 3 + ch] - 0.5f);
      }
    }
  });
  TowerMatMul(patch_, in.data(), n, x, ctx);
  const size_t row_bytes = RowBytes(position_->type, d);
  ForEachRow(ctx, n, [&](int64_t i) {
    const int32_t* pos = patches.positions + 2 * static_cast<int64_t>(rows[static_cast<size_t>(i)]);
    std::vector<float> by_x(static_cast<size_t>(d)), by_y(static_cast<size_t>(d));
    DequantizeRow(position_->type, position_->data + static_cast<size_t>(pos[0]) * row_bytes, by_x.data(), d);
    DequantizeRow(position_->type, position_->data + static_cast<size_t>(table_ + pos[1]) * row_bytes, by_y.data(), d);
    // HF sums the two table rows first, then adds them to the projection.
    for (int64_t k = 0; k < d; ++k) x[i * d + k] += by_x[static_cast<size_t>(k)] + by_y[static_cast<size_t>(k)];
  });
}

// One encoder layer over the n real patches (HF's Gemma4VisionEncoderLayer); pos[i]: (x, y) of row i.
void Gemma4Tower::Layer(const Block& b, const int32_t* const* pos, int64_t n, float* x, KernelContext& ctx) const {
  const int64_t d = c_.hidden, hd = c_.head_dim, ffn = c_.ffn;
  const int64_t q_width = c_.n_heads * hd, kv_width = c_.n_kv_heads * hd;
  const float eps = c_.eps;
  std::vector<float> h(static_cast<size_t>(n * d));
  std::vector<float> q(static_cast<size_t>(n * q_width)), k(static_cast<size_t>(n * kv_width)), v(k.size());
  std::vector<float> attn(q.size());
  NormRows(x, n, d, b.ln1, eps, h.data(), ctx);
  Apply(b.q, h.data(), n, q.data(), ctx);
  Apply(b.k, h.data(), n, k.data(), ctx);
  Apply(b.v, h.data(), n, v.data(), ctx);
  // Per head: q and k RMSNorm with weights, v without (HF v_norm, with_scale=False); then the 2D
  // RoPE, the first half of each head by the column, the second by the row.
  const int half = static_cast<int>(hd / 2);
  NormRows(q.data(), n * c_.n_heads, hd, b.q_norm, eps, q.data(), ctx);
  NormRows(k.data(), n * c_.n_kv_heads, hd, b.k_norm, eps, k.data(), ctx);
  NormRows(v.data(), n * c_.n_kv_heads, hd, {}, eps, v.data(), ctx);
  ForEachRow(ctx, n, [&](int64_t i) {
    const KernelTable& kt = ctx.kernels();
    for (const auto& [rows, heads] : {std::pair{q.data() + i * q_width, c_.n_heads}, std::pair{k.data() + i * kv_width, c_.n_kv_heads}}) {
      for (int hh = 0; hh < heads; ++hh) {
        kt.rope_rotate_half(rows + hh * hd, 1, half, inv_freq_.data(), pos[i][0]);
        kt.rope_rotate_half(rows + hh * hd + half, 1, half, inv_freq_.data(), pos[i][1]);
      }
    }
  });
  // Bidirectional over the real patches (HF masks only the padding ones), scale 1: the q/k norms
  // carry it (Gemma4VisionAttention.scaling).
  AttendAll({n, c_.n_heads, c_.n_kv_heads, c_.head_dim, 1.0f}, q.data(), k.data(), v.data(), attn.data(), ctx);
  Apply(b.o, attn.data(), n, h.data(), ctx);
  NormRows(h.data(), n, d, b.attn_post_norm, eps, h.data(), ctx);
  for (int64_t i = 0; i < n * d; ++i) x[i] += h[static_cast<size_t>(i)];

  std::vector<float> gate(static_cast<size_t>(n * ffn)), up(gate.size());
  NormRows(x, n, d, b.ln2, eps, h.data(), ctx);
  Apply(b.gate, h.data(), n, gate.data(), ctx);
  Apply(b.up, h.data(), n, up.data(), ctx);
  ForEachRow(ctx, n, [&](int64_t i) { ctx.kernels().gelu_tanh_mul(gate.data() + i * ffn, up.data() + i * ffn, ffn); });
  Apply(b.down, gate.data(), n, h.data(), ctx);
  NormRows(h.data(), n, d, b.ffn_post_norm, eps, h.data(), ctx);
  for (int64_t i = 0; i < n * d; ++i) x[i] += h[static_cast<size_t>(i)];
}

// HF's Gemma4VisionPooler + padding removal: output slot floor(x / k) + (max_x + 1) / k * floor(y / k)
// of n_rows / k^2 slots takes the mean of its patches (each weighted 1/k^2, padding counted at 0 as
// zeros), scaled by sqrt(hidden); the slots no patch fell in are dropped. k = 1 keeps the real rows.
Result<std::vector<float>> Gemma4Tower::Pool(const ImagePatches& patches, const std::vector<int>& rows,
                                             const float* x) const {
  const int64_t d = c_.hidden, k = c_.pool, n = static_cast<int64_t>(rows.size());
  const float root = static_cast<float>(std::sqrt(static_cast<double>(d)));
  std::vector<float> out;
  if (k == 1) {
    out.assign(x, x + n * d);
    for (float& value : out) value *= root;
    return out;
  }
  const int64_t slots = patches.n_rows / (k * k);
  int64_t max_x = 0;  // over every row, padding (clamped to 0) included, as HF takes it
  for (int r = 0; r < patches.n_rows; ++r) max_x = std::max<int64_t>(max_x, patches.positions[2 * r]);
  const int64_t per_row = (max_x + 1) / k;
  std::vector<float> sums(static_cast<size_t>(slots * d), 0.0f);
  std::vector<char> used(static_cast<size_t>(slots), 0);
  const float weight = 1.0f / static_cast<float>(k * k);
  const auto slot_of = [&](int64_t px, int64_t py) { return px / k + per_row * (py / k); };
  for (int64_t i = 0; i < n; ++i) {
    const int32_t* pos = patches.positions + 2 * static_cast<int64_t>(rows[static_cast<size_t>(i)]);
    const int64_t s = slot_of(pos[0], pos[1]);
    if (s >= slots) {
      return Status::Error("vision: patch (" + std::to_string(pos[0]) + ", " + std::to_string(pos[1]) +
                           ") pools into soft token " + std::to_string(s) + " of " + std::to_string(slots));
    }
    used[static_cast<size_t>(s)] = 1;
    for (int64_t j = 0; j < d; ++j) sums[static_cast<size_t>(s * d + j)] += weight * x[i * d + j];
  }
  // A padding row sits at (0, 0) in HF's one-hot: it marks slot 0 as used, adding zeros.
  if (static_cast<int64_t>(rows.size()) < patches.n_rows) used[0] = 1;
  for (int64_t s = 0; s < slots; ++s) {
    if (!used[static_cast<size_t>(s)]) continue;
    for (int64_t j = 0; j < d; ++j) out.push_back(sums[static_cast<size_t>(s * d + j)] * root);
  }
  return out;
}

Result<int> Gemma4Tower::EncodePatches(const ImagePatches& patches, std::vector<float>* embeddings, KernelContext& ctx,
                                       std::vector<float>* tower_out) const {
  const int64_t d = c_.hidden, k = c_.pool;
  if (patches.values == nullptr || patches.positions == nullptr || patches.n_rows < k * k) {
    return Status::Error("vision: " + std::to_string(patches.n_rows) + " patch rows, fewer than one " + std::to_string(k) +
                         "x" + std::to_string(k) + " soft token");
  }
  // The real patches; (-1, -1) marks padding (HF: padding_positions). Padding never reaches a real
  // patch's output (masked keys, zeroed before pooling), so it is left out of the computation.
  std::vector<int> rows;
  std::vector<const int32_t*> pos;
  for (int r = 0; r < patches.n_rows; ++r) {
    const int32_t* xy = patches.positions + 2 * static_cast<int64_t>(r);
    if (xy[0] == -1 && xy[1] == -1) continue;
    if (xy[0] < 0 || xy[1] < 0 || xy[0] >= table_ || xy[1] >= table_) {
      return Status::Error("vision: patch " + std::to_string(r) + " at (" + std::to_string(xy[0]) + ", " +
                           std::to_string(xy[1]) + ") is outside the " + std::to_string(table_) + "-entry position tables");
    }
    rows.push_back(r);
    pos.push_back(xy);
  }
  if (rows.empty()) return Status::Error("vision: the image has no patches, only padding");
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<float> x(static_cast<size_t>(n * d));
  Embed(patches, rows, x.data(), ctx);
  for (const Block& b : blocks_) Layer(b, pos.data(), n, x.data(), ctx);
  ASSIGN_OR_RETURN(std::vector<float> pooled, Pool(patches, rows, x.data()));
  const int64_t n_tokens = static_cast<int64_t>(pooled.size()) / d;
  if (!std_bias_.empty()) {
    for (int64_t i = 0; i < n_tokens * d; ++i) {
      pooled[static_cast<size_t>(i)] = (pooled[static_cast<size_t>(i)] - std_bias_[static_cast<size_t>(i % d)]) *
                                       std_scale_[static_cast<size_t>(i % d)];
    }
  }
  if (tower_out != nullptr) *tower_out = pooled;
  // The embedder: RMSNorm without a weight (vision eps), then the projection to the text width.
  NormRows(pooled.data(), n_tokens, d, {}, c_.eps, pooled.data(), ctx);
  embeddings->resize(static_cast<size_t>(n_tokens * c_.projection_dim));
  TowerMatMul(projection_, pooled.data(), n_tokens, embeddings->data(), ctx);
  return static_cast<int>(n_tokens);
}

}  // namespace

Result<std::unique_ptr<VisionTower>> BindGemma4Tower(const GgufFile& file, const VisionTowerConfig& c) {
  auto tower = std::make_unique<Gemma4Tower>(c);
  RETURN_IF_ERROR(tower->Bind(file));
  return std::unique_ptr<VisionTower>(std::move(tower));
}

}  // namespace gemlet

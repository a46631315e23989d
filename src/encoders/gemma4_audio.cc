// Gemma 4's audio side: a USM conformer over log-mel features — two 3x3 stride-2 convolutions
// (LayerNorm over channels, ReLU), the input projection, the conformer blocks (conformer.cc), the
// output projection — then the embedder (weightless RMSNorm, projection). Equations: transformers
// 5.17's Gemma4AudioModel and Gemma4MultimodalEmbedder; llama.cpp's gemma4a graph for the layout.
#include <algorithm>
#include <cmath>
#include <string>

#include "encoders/conformer.h"
#include "tensor/dtype.h"

namespace gemlet {

namespace {

class Gemma4AudioTower final : public AudioTower {
 public:
  explicit Gemma4AudioTower(const AudioTowerConfig& c) : c_(c) {}
  Status Bind(const GgufFile& file);
  Result<int> Encode(const float* features, const uint8_t* valid_mask, int n_frames, std::vector<float>* embeddings,
                     KernelContext& ctx, std::vector<float>* tower_out) const override;

 private:
  void Conv(const SubsamplingConv& l, const float* in, int64_t rows, int64_t cols, const uint8_t* keep, float* out,
            KernelContext& ctx) const;

  AudioTowerConfig c_;
  SubsamplingConv conv_[2];
  WeightMatrix input_proj_;  // [hidden, freq' * ch1]
  Conformer conformer_;
  int64_t out_dim_ = 0;
  WeightMatrix out_proj_;         // [out_dim, hidden]
  std::vector<float> out_bias_;   // [out_dim]
  std::vector<float> soft_norm_;  // [out_dim] or empty: llama.cpp's optional embedder norm weight
  WeightMatrix embed_;            // [projection_dim, out_dim]
};

Status Gemma4AudioTower::Bind(const GgufFile& file) {
  TowerTensors t(file);
  const int64_t d = c_.hidden;
  RETURN_IF_ERROR(BindSubsamplingConv(file, 0, 1, &conv_[0]));
  RETURN_IF_ERROR(BindSubsamplingConv(file, 1, conv_[0].out_ch, &conv_[1]));
  const int64_t freq = Halved(Halved(c_.n_mels));
  ASSIGN_OR_RETURN(input_proj_, t.Matrix("a.input_projection.weight", freq * conv_[1].out_ch, d));
  LocalAttention a;
  a.chunk = c_.chunk_size;
  a.max_past = c_.context_left - 1;
  a.max_future = c_.context_right;
  // HF's sliding_window_mask_function((context_left - 1, context_right)): distances 0 .. left - 2
  // behind (llama.cpp's mask: gq - gk < 12), right - 1 ahead; inverted for kHfEager.
  a.past_keys = c_.context_left - 1;
  a.future_keys = std::max(c_.context_right - 1, 0);
  // Gemma4AudioRelPositionalEncoding: positions context // 2 down to 0.
  a.rel_first = a.context() / 2;
  a.n_rel = a.context() / 2 + 1;
  a.q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.head_dim)) / std::log(2.0));
  a.k_scale = static_cast<float>(std::log1p(std::exp(1.0)) / std::log(2.0));
  a.logit_cap = c_.logit_cap;
  a.inverted_window = c_.attention_mask == AudioAttentionMask::kHfEager;
  RETURN_IF_ERROR(conformer_.Bind(t, c_, ConformerNames{}, a));
  const GgufTensor* out = file.FindTensor("a.pre_encode.out.weight");
  if (out == nullptr) return Status::Error("mmproj: missing tensor 'a.pre_encode.out.weight'");
  out_dim_ = out->ne[1];
  ASSIGN_OR_RETURN(out_proj_, t.Matrix("a.pre_encode.out.weight", d, out_dim_));
  ASSIGN_OR_RETURN(out_bias_, t.Vector("a.pre_encode.out.bias", out_dim_));
  if (t.Has("mm.a.soft_emb_norm.weight")) {
    ASSIGN_OR_RETURN(soft_norm_, t.Vector("mm.a.soft_emb_norm.weight", out_dim_));
  }
  ASSIGN_OR_RETURN(embed_, t.Matrix("mm.a.input_projection.weight", out_dim_, c_.projection_dim));
  return Status::Ok();
}

// One subsampling layer (HF's Gemma4AudioSubSampleConvProjectionLayer): padding rows read as zeros
// (HF multiplies the input by the mask first), the convolution padded by 1 all round, then LayerNorm
// over the channels (weight, no bias) and ReLU.
void Gemma4AudioTower::Conv(const SubsamplingConv& l, const float* in, int64_t rows, int64_t cols, const uint8_t* keep,
                            float* out, KernelContext& ctx) const {
  const int64_t out_cols = Halved(cols);
  ConvolveStride2(l, in, rows, cols, -1, keep, out, ctx, [&](int64_t r0, int64_t n_rows) {
    ForEachRow(ctx, n_rows * out_cols, [&](int64_t i) {
      float* v = out + (r0 * out_cols + i) * l.out_ch;
      ctx.kernels().layer_norm(v, l.norm.data(), nullptr, l.out_ch, c_.eps, v);
      for (int64_t ch = 0; ch < l.out_ch; ++ch) v[ch] = std::max(v[ch], 0.0f);
    });
  });
}

Result<int> Gemma4AudioTower::Encode(const float* features, const uint8_t* valid_mask, int n_frames,
                                     std::vector<float>* embeddings, KernelContext& ctx,
                                     std::vector<float>* tower_out) const {
  if (features == nullptr || n_frames <= 0) return Status::Error("audio: no feature frames to encode");
  const int64_t mels = c_.n_mels, d = c_.hidden;
  const std::vector<uint8_t> all_valid(valid_mask == nullptr ? static_cast<size_t>(n_frames) : 0, 1);
  const uint8_t* mask = valid_mask == nullptr ? all_valid.data() : valid_mask;
  // HF halves the mask with each convolution: mask[::2], then [::2] again.
  const int64_t t1 = Halved(n_frames), t2 = Halved(t1), f1 = Halved(mels), f2 = Halved(f1);
  std::vector<uint8_t> mask1(static_cast<size_t>(t1)), mask2(static_cast<size_t>(t2));
  for (int64_t i = 0; i < t1; ++i) mask1[static_cast<size_t>(i)] = mask[2 * i];
  for (int64_t i = 0; i < t2; ++i) mask2[static_cast<size_t>(i)] = mask1[static_cast<size_t>(2 * i)];

  std::vector<float> c0(static_cast<size_t>(t1 * f1 * conv_[0].out_ch)), c1(static_cast<size_t>(t2 * f2 * conv_[1].out_ch));
  Conv(conv_[0], features, n_frames, mels, mask, c0.data(), ctx);
  Conv(conv_[1], c0.data(), t1, f1, mask1.data(), c1.data(), ctx);
  // Each frame's [frequency, channel] values flattened, channel fastest (HF: permute(0, 2, 3, 1)).
  std::vector<float> x(static_cast<size_t>(t2 * d));
  TowerMatMul(input_proj_, c1.data(), t2, x.data(), ctx);
  conformer_.Forward(x.data(), t2, mask2.data(), ctx);

  std::vector<float> out(static_cast<size_t>(t2 * out_dim_));
  TowerMatMul(out_proj_, x.data(), t2, out.data(), ctx);
  for (int64_t i = 0; i < t2 * out_dim_; ++i) out[static_cast<size_t>(i)] += out_bias_[static_cast<size_t>(i % out_dim_)];
  if (tower_out != nullptr) *tower_out = out;
  // Only the real frames become soft tokens (HF: audio_features[audio_mask]).
  std::vector<float> kept;
  for (int64_t t = 0; t < t2; ++t) {
    if (mask2[static_cast<size_t>(t)] != 0) kept.insert(kept.end(), out.begin() + t * out_dim_, out.begin() + (t + 1) * out_dim_);
  }
  const int64_t count = static_cast<int64_t>(kept.size()) / out_dim_;
  if (count == 0) return Status::Error("audio: the clip has no valid frame after subsampling");
  // The embedder (audio eps), then the projection to the text width.
  NormRows(kept.data(), count, out_dim_, soft_norm_, c_.eps, kept.data(), ctx);
  embeddings->resize(static_cast<size_t>(count * c_.projection_dim));
  TowerMatMul(embed_, kept.data(), count, embeddings->data(), ctx);
  return static_cast<int>(count);
}

}  // namespace

Result<std::unique_ptr<AudioTower>> BindGemma4AudioTower(const GgufFile& file, const AudioTowerConfig& c) {
  auto tower = std::make_unique<Gemma4AudioTower>(c);
  RETURN_IF_ERROR(tower->Bind(file));
  return std::unique_ptr<AudioTower>(std::move(tower));
}

}  // namespace gemlet

// Gemma 3n's audio side: a USM conformer over log-mel features — two 3x3 stride-2 convolutions padded
// after the frames (cumulative group norm, ReLU), the input projection, the conformer blocks
// (conformer.cc), every reduction-th frame kept — then the embedder's soft path (RMSNorm, projection,
// weightless RMSNorm), the clip padded to its fixed soft-token count with the embedding of an audio
// hard token. Equations: transformers 5.17's Gemma3nAudioEncoder, Gemma3nMultimodalEmbedder and
// Gemma3nModel.get_audio_features / forward.
#include <algorithm>
#include <cmath>
#include <string>

#include "encoders/conformer.h"
#include "tensor/dtype.h"

namespace gemlet {

namespace {

class Gemma3nAudioTower final : public AudioTower {
 public:
  explicit Gemma3nAudioTower(const AudioTowerConfig& c) : c_(c) {}
  Status Bind(const GgufFile& file);
  Result<int> Encode(const float* features, const uint8_t* valid_mask, int n_frames, std::vector<float>* embeddings,
                     KernelContext& ctx, std::vector<float>* tower_out) const override;
  Status EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const override;

 private:
  void Conv(const SubsamplingConv& l, const float* in, int64_t rows, int64_t cols, float* out, KernelContext& ctx) const;

  AudioTowerConfig c_;
  SubsamplingConv conv_[2];
  WeightMatrix input_proj_;  // [hidden, freq' * ch1]
  Conformer conformer_;
  Gemma3nEmbedder embedder_;
};

Status Gemma3nAudioTower::Bind(const GgufFile& file) {
  TowerTensors t(file);
  const int64_t d = c_.hidden;
  RETURN_IF_ERROR(BindSubsamplingConv(file, 0, 1, &conv_[0]));
  RETURN_IF_ERROR(BindSubsamplingConv(file, 1, conv_[0].out_ch, &conv_[1]));
  // llama.cpp's converter files input_proj_linear under a.pre_encode.out.
  ASSIGN_OR_RETURN(input_proj_, t.Matrix("a.pre_encode.out.weight", Halved(Halved(c_.n_mels)) * conv_[1].out_ch, d));
  ConformerNames names;
  names.attn_pre_norm = "ln1";
  names.attn_post_norm = "ln2";
  names.out_norm = "layer_pre_norm";
  names.k_rel = "linear_pos";
  names.per_dim_scale = "per_dim_scale";
  names.softplus_stored = false;
  LocalAttention a;
  a.chunk = c_.chunk_size;
  a.max_past = std::max(c_.context_left - 1, 0);
  a.max_future = c_.context_right;
  // Gemma3nAudioAttention.local_causal_valid_mask: the key slots from the query's own back to
  // max_past behind it, and max_future ahead; the relative positions max_past down to -max_future.
  a.past_keys = a.max_past + 1;
  a.future_keys = a.max_future;
  a.rel_first = a.max_past;
  a.n_rel = a.max_past + a.max_future + 1;
  // HF's buffer: float(head_dim^-0.5) * (1 / softplus(0)) in float.
  a.q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.head_dim))) *
              (1.0f / static_cast<float>(std::log(2.0)));
  a.logit_cap = c_.logit_cap;
  a.mask_conv_input = true;
  RETURN_IF_ERROR(conformer_.Bind(t, c_, names, a));
  embedder_.hidden = d;
  embedder_.projection_dim = c_.projection_dim;
  embedder_.vocab_offset = c_.vocab_offset;
  embedder_.eps = c_.eps;
  embedder_.modality = "audio";
  RETURN_IF_ERROR(embedder_.Bind(t, file, "mm.a."));
  if (c_.padding_token_id - c_.vocab_offset >= embedder_.table.n_out) {
    return Status::Error("mmproj: audio padding token " + std::to_string(c_.padding_token_id) + " is past the " +
                         std::to_string(embedder_.table.n_out) + " audio embeddings from id " +
                         std::to_string(c_.vocab_offset));
  }
  return Status::Ok();
}

// One subsampling layer (HF's Gemma3nAudioSSCPConvBlock): the convolution padded by 0 before and 2
// after the frames, 1 either side of the frequencies (no mask: padding frames are convolved as they
// are), then Gemma3nAudioCumulativeGroupNorm — each frame normalised by the mean and variance of all
// values of the frames up to it (the variance summing each frame's squares about its own running
// mean), times the channel's weight — and ReLU.
void Gemma3nAudioTower::Conv(const SubsamplingConv& l, const float* in, int64_t rows, int64_t cols, float* out,
                             KernelContext& ctx) const {
  const int64_t width = Halved(cols) * l.out_ch;
  double sum = 0, squares = 0, count = 0;
  ConvolveStride2(l, in, rows, cols, 0, nullptr, out, ctx, [&](int64_t r0, int64_t n_rows) {
    for (int64_t r = r0; r < r0 + n_rows; ++r) {
      float* v = out + r * width;
      double frame = 0;
      for (int64_t i = 0; i < width; ++i) frame += v[i];
      sum += frame;
      count += static_cast<double>(width);
      const float mean = static_cast<float>(sum / count);
      double frame_squares = 0;
      for (int64_t i = 0; i < width; ++i) frame_squares += static_cast<double>(v[i] - mean) * (v[i] - mean);
      squares += frame_squares;
      const float inv = 1.0f / std::sqrt(static_cast<float>(squares / count) + c_.conv_norm_eps);
      for (int64_t i = 0; i < width; ++i) v[i] = std::max((v[i] - mean) * inv * l.norm[static_cast<size_t>(i % l.out_ch)], 0.0f);
    }
  });
}

Status Gemma3nAudioTower::EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const {
  return embedder_.EmbedHardToken(token, out, ctx);
}

Result<int> Gemma3nAudioTower::Encode(const float* features, const uint8_t* valid_mask, int n_frames,
                                      std::vector<float>* embeddings, KernelContext& ctx,
                                      std::vector<float>* tower_out) const {
  if (features == nullptr || n_frames <= 0) return Status::Error("audio: no feature frames to encode");
  const int64_t mels = c_.n_mels, d = c_.hidden, width = c_.projection_dim;
  const int64_t t1 = Halved(n_frames), t2 = Halved(t1), f1 = Halved(mels), f2 = Halved(f1);
  const int64_t n_reduced = (t2 + c_.reduction - 1) / c_.reduction;
  if (n_reduced > c_.soft_token_count) {
    return Status::Error("audio: " + std::to_string(n_frames) + " feature frames make " + std::to_string(n_reduced) +
                         " soft tokens, more than the model's " + std::to_string(c_.soft_token_count));
  }
  std::vector<float> c0(static_cast<size_t>(t1 * f1 * conv_[0].out_ch)), c1(static_cast<size_t>(t2 * f2 * conv_[1].out_ch));
  Conv(conv_[0], features, n_frames, mels, c0.data(), ctx);
  Conv(conv_[1], c0.data(), t1, f1, c1.data(), ctx);
  // Frame t of the conformer stands for feature frame 4t (HF gathers the mask there).
  std::vector<uint8_t> valid(static_cast<size_t>(t2));
  for (int64_t t = 0; t < t2; ++t) {
    valid[static_cast<size_t>(t)] = valid_mask == nullptr ? 1 : valid_mask[std::min<int64_t>(4 * t, n_frames - 1)];
  }
  std::vector<float> x(static_cast<size_t>(t2 * d));
  TowerMatMul(input_proj_, c1.data(), t2, x.data(), ctx);
  conformer_.Forward(x.data(), t2, valid.data(), ctx);

  // Every reduction-th frame; its padding frames zeroed (HF's masked_fill).
  std::vector<float> reduced(static_cast<size_t>(n_reduced * d), 0.0f);
  std::vector<uint8_t> kept(static_cast<size_t>(n_reduced));
  for (int64_t i = 0; i < n_reduced; ++i) {
    const int64_t t = i * c_.reduction;
    kept[static_cast<size_t>(i)] = valid[static_cast<size_t>(t)];
    if (kept[static_cast<size_t>(i)] != 0) std::copy(x.begin() + t * d, x.begin() + (t + 1) * d, reduced.begin() + i * d);
  }
  if (tower_out != nullptr) *tower_out = reduced;
  embeddings->assign(static_cast<size_t>(c_.soft_token_count * width), 0.0f);
  embedder_.Embed(reduced.data(), n_reduced, embedder_.soft_norm, embeddings->data(), ctx);
  // Padding frames and the slots past the clip take the padding token's hard embedding.
  std::vector<float> padding(static_cast<size_t>(width));
  RETURN_IF_ERROR(EmbedHardToken(c_.padding_token_id, padding.data(), ctx));
  for (int64_t i = 0; i < c_.soft_token_count; ++i) {
    if (i < n_reduced && kept[static_cast<size_t>(i)] != 0) continue;
    std::copy(padding.begin(), padding.end(), embeddings->begin() + i * width);
  }
  return c_.soft_token_count;
}

}  // namespace

Result<std::unique_ptr<AudioTower>> BindGemma3nAudioTower(const GgufFile& file, const AudioTowerConfig& c) {
  auto tower = std::make_unique<Gemma3nAudioTower>(c);
  RETURN_IF_ERROR(tower->Bind(file));
  return std::unique_ptr<AudioTower>(std::move(tower));
}

}  // namespace gemlet

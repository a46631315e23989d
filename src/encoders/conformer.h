// Inside src/encoders: what Gemma 3n's and Gemma 4's audio towers share — the subsampling
// convolutions, the USM conformer block (two half-step FFNs around chunked local self-attention with
// relative positions and a light causal convolution) — and the interface each audio tower file
// implements.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "encoders/mmproj.h"
#include "encoders/tower_ops.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"

namespace gemlet {

// One audio tower bound to its file's tensors (AudioEncoder::Encode's contract).
class AudioTower {
 public:
  virtual ~AudioTower() = default;
  virtual Result<int> Encode(const float* features, const uint8_t* valid_mask, int n_frames,
                             std::vector<float>* embeddings, KernelContext& ctx, std::vector<float>* tower_out) const = 0;
  virtual Status EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const;
};

Result<std::unique_ptr<AudioTower>> BindGemma3nAudioTower(const GgufFile& file, const AudioTowerConfig& c);
Result<std::unique_ptr<AudioTower>> BindGemma4AudioTower(const GgufFile& file, const AudioTowerConfig& c);

// What a 3x3 stride-2 convolution padded by 1 (or, Gemma 3n, by 2 after the frames) leaves of n rows.
inline int64_t Halved(int64_t n) { return (n - 1) / 2 + 1; }

// One of the two subsampling convolutions, a.conv1d.N: the kernel [out_ch, in_ch, 3, 3] as matrix
// rows, and its norm's weight.
struct SubsamplingConv {
  WeightMatrix w;           // [out_ch, in_ch * 9]
  std::vector<float> norm;  // [out_ch]
  int64_t in_ch = 0, out_ch = 0;
};
Status BindSubsamplingConv(const GgufFile& file, int index, int64_t in_ch, SubsamplingConv* conv);

// The convolution as a matmul over 3x3 patches, a block of output rows at a time. in: [rows, cols,
// in_ch] (time, frequency, channels); out: [Halved(rows), Halved(cols), out_ch]. Output row r reads
// input rows 2r + first_row .. 2r + first_row + 2 and column c columns 2c - 1 .. 2c + 1; rows past
// either end, and rows keep[] marks 0 (keep may be null), read as zeros. After each block of rows,
// finish(first output row, rows) runs (the norm and activation, while the block is in cache).
void ConvolveStride2(const SubsamplingConv& l, const float* in, int64_t rows, int64_t cols, int first_row,
                     const uint8_t* keep, float* out, KernelContext& ctx,
                     const std::function<void(int64_t, int64_t)>& finish);

// Where the two conformers differ in their local attention.
struct LocalAttention {
  int chunk = 12;           // queries per block
  int max_past = 12;        // HF's max_past_horizon (context_left - 1): keys a block reaches back
  int max_future = 0;       // context_right
  int past_keys = 12;       // keys at distances 0 .. past_keys - 1 behind a query are seen
  int future_keys = 0;      // and keys 1 .. future_keys ahead
  // The relative position table: row j holds the sinusoid of position rel_first - j and scores the
  // key at distance max_past - j behind the query (Transformer-XL's shift over the block context).
  int rel_first = 12;
  int n_rel = 13;
  float q_scale = 1.0f;     // head_dim^-0.5 / ln 2, before softplus(per_dim_scale)
  float k_scale = 1.0f;     // Gemma 4 scales the keys (softplus(1) / ln 2); Gemma 3n does not
  float logit_cap = 50.0f;
  bool mask_conv_input = false;  // Gemma 3n zeroes the padding frames before the light convolution
  // AudioAttentionMask::kHfEager: a query sees the context slots its window rule would hide
  // (padding frames included) instead of the ones it allows.
  bool inverted_window = false;

  // Whether the rule allows the key at distance `dist` behind the query (negative: ahead).
  bool InWindow(int64_t dist) const { return dist >= 0 ? dist < past_keys : -dist <= future_keys; }

  int context() const { return chunk + max_past + max_future; }
};

struct ConformerBlock {
  std::vector<float> ffn_norm, ffn_post_norm, ffn_norm_1, ffn_post_norm_1;  // [hidden]
  std::vector<float> attn_pre_norm, attn_post_norm, conv_pre_norm, conv_norm, out_norm;
  ClippedLinear ffn_up, ffn_down, ffn_up_1, ffn_down_1, q, k, v, o, conv_pw1, conv_pw2;
  WeightMatrix k_rel;                // [hidden, hidden]: the relative positions' key projection
  std::vector<float> per_dim_scale;  // [head_dim], already softplus'ed
  std::vector<float> conv_dw;        // [hidden, kernel]: causal depthwise taps, oldest first
};

// The GGUF names of one block's tensors where the two projectors' files differ.
struct ConformerNames {
  std::string attn_pre_norm = "attn_pre_norm", attn_post_norm = "attn_post_norm", out_norm = "ln2";
  std::string k_rel = "attn_k_rel", per_dim_scale = "per_dim_scale.weight";
  bool softplus_stored = true;  // per_dim_scale holds softplus(w) (Gemma 4's converter), else w
};

class Conformer {
 public:
  Status Bind(const TowerTensors& t, const AudioTowerConfig& c, const ConformerNames& names, const LocalAttention& a);

  // x: [n, hidden], in place through every block. valid: [n], 1 = a real frame (the window rule
  // hides padding frames as keys; the inverted rule does not).
  void Forward(float* x, int64_t n, const uint8_t* valid, KernelContext& ctx) const;

 private:
  // The blocks' activations, allocated once per Forward and reused by every block and sublayer.
  struct Work {
    std::vector<float> h, u, q, k, v, attn;  // [n, hidden] each, u [n, max(ffn, 2 hidden)]
  };
  void HalfStepFfn(const std::vector<float>& pre, const ClippedLinear& up, const ClippedLinear& down,
                   const std::vector<float>& post, float* x, int64_t n, Work& w, KernelContext& ctx) const;
  void Attention(const ConformerBlock& b, const std::vector<float>& rel_k, float* x, int64_t n, const uint8_t* valid,
                 Work& w, KernelContext& ctx) const;
  void LightConv(const ConformerBlock& b, float* x, int64_t n, Work& w, KernelContext& ctx) const;
  const std::vector<std::vector<float>>& RelativeKeys(KernelContext& ctx) const;

  AudioTowerConfig c_;
  LocalAttention a_;
  std::vector<ConformerBlock> blocks_;
  std::vector<float> timing_;  // [n_rel, hidden]: the sinusoids of the relative positions
  // Each block's relative positions' keys ([n_rel, hidden]; they do not depend on the clip), made
  // by the first Forward on a kernel table and kept for that table.
  struct RelativeKeyCache {
    std::mutex mutex;
    std::vector<std::pair<const KernelTable*, std::vector<std::vector<float>>>> by_table;
  };
  std::unique_ptr<RelativeKeyCache> rel_keys_ = std::make_unique<RelativeKeyCache>();
};

}  // namespace gemlet

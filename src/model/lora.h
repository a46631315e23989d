// LoRA adapters in llama.cpp's GGUF adapter format, applied unmerged on the (quantized) base:
// y = W x + sum over the sequence's adapters of scale * B (A x). The base stays mapped and packed as
// it is; an adapter is a few small matrices per projection, so switching adapters between requests
// is swapping a pointer, and two sequences with different adapters can share one forward step.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernel_context.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"

namespace gemlet {

class Model;
struct ForwardStep;
struct Workspace;

// The projections an adapter may change: the attention and MLP matrices of every decoder layer
// (what PEFT's target_modules name q_proj ... down_proj).
enum class LoraTarget : int { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraTargetCount = 7;
// "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down": the base tensor
// blk.N.<name>.weight the pair adds to.
const char* LoraTargetName(LoraTarget target);

// One adapted projection: delta(x) = scale * B (A x).
struct LoraPair {
  WeightMatrix a;      // [rank, n_in]  (GGUF ne = [n_in, rank], `<base tensor>.lora_a`)
  WeightMatrix b;      // [n_out, rank] (GGUF ne = [rank, n_out], `<base tensor>.lora_b`)
  float scale = 1.0f;  // alpha / rank, or 1 when the file has no alpha (llama.cpp's rule)
  int rank() const { return static_cast<int>(a.n_out); }
};

class LoraAdapter {
 public:
  // Checks the file against the base it will run on: general.type "adapter", adapter.type "lora",
  // the same general.architecture, every `.lora_a` with its `.lora_b`, each pair's base tensor
  // present with matching shapes, and only the projections gemlet adapts; and, where both files name
  // one, the same base model (general.base_model.0.name against the model's general.name/basename,
  // compared without case, punctuation or an "org/" prefix) unless any_base. identity: what tells
  // this adapter's content apart (the file's SHA-256), for the keys of cached K/V.
  static Result<std::unique_ptr<LoraAdapter>> Load(std::shared_ptr<const GgufFile> file, const Model& base,
                                                   std::string identity, bool any_base = false);

  // The pair for (layer, target), or null when the adapter leaves that projection alone.
  const LoraPair* Find(int layer, LoraTarget target) const {
    const int i = index_[static_cast<size_t>(layer)][static_cast<size_t>(target)];
    return i < 0 ? nullptr : &pairs_[static_cast<size_t>(i)];
  }
  std::span<const LoraPair> pairs() const { return pairs_; }
  float alpha() const { return alpha_; }  // 0: none in the file
  int max_rank() const { return max_rank_; }
  size_t tensor_bytes() const { return tensor_bytes_; }  // A and B as stored
  const std::string& identity() const { return identity_; }
  const GgufFile& file() const { return *file_; }
  // Packs A and B for the kernels now (as the first use would).
  void Prepare(KernelContext& ctx) const;

 private:
  LoraAdapter() = default;
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<PackedWeightStore> packed_;
  std::vector<std::array<int, kLoraTargetCount>> index_;  // [n_layers][target] -> pairs_ index or -1
  std::vector<LoraPair> pairs_;
  float alpha_ = 0.0f;
  int max_rank_ = 0;
  size_t tensor_bytes_ = 0;
  std::string identity_;
};

// An adapter and the user's scale for it (llama.cpp's --lora-scaled).
struct LoraUse {
  std::shared_ptr<const LoraAdapter> adapter;
  float scale = 1.0f;
};

// The adapters one sequence runs with, in order (their deltas are added in this order).
class LoraStack {
 public:
  LoraStack() = default;
  explicit LoraStack(std::vector<LoraUse> uses);
  bool empty() const { return uses_.empty(); }
  std::span<const LoraUse> uses() const { return uses_; }
  // What K/V computed under this stack depend on: each adapter's identity and scale, "" for the
  // base alone. Caches, saved sessions and prompt reuse compare it.
  const std::string& key() const { return key_; }
  int max_rank() const { return max_rank_; }

 private:
  std::vector<LoraUse> uses_;
  std::string key_;
  int max_rank_ = 0;
};

// For each sequence of the step that runs adapters on (layer, target): adds their deltas to its rows
// of y ([step.n_rows, n_out]) from its rows of x ([step.n_rows, n_in]). Consecutive sequences with the
// same stack go through the kernels together. The deltas go through the same matmul kernels as the
// base, so a row's result does not depend on the other rows of its step.
void ApplyLora(const ForwardStep& step, int layer, LoraTarget target, const float* x, int64_t n_in, float* y,
               int64_t n_out, Workspace& ws, KernelContext& ctx);

}  // namespace gemlet

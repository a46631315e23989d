// Gemma 4's own speculative drafter (general.architecture "gemma4-assistant"; HF Gemma4AssistantForCausalLM,
// llama.cpp's draft-mtp): what a drafter offers the runtime, and the scratch one draft step works in.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "kernels/attention.h"
#include "kernels/kernel_context.h"
#include "model/kv_cache.h"

namespace gemlet {

class Model;
class Assistant;

// What one draft step reads and writes, preallocated: a drafting loop allocates nothing.
struct AssistantScratch {
  // For drafting beside a target whose cache holds up to n_ctx positions, on up to n_threads threads.
  AssistantScratch(const Assistant& assistant, int n_ctx, int n_threads);

  std::vector<float> input;    // [2 * backbone width]: [target embedding * sqrt(width) ; state]
  std::vector<float> x, xn, tmp;            // [width]
  std::vector<float> q, attn;               // [max query width]
  std::vector<float> k_last, v_last;        // [max kv width]: the target's cached row before the step
  std::vector<float> gate, up;              // [max ffn]
  std::vector<float> logits;                // [n_vocab]
  std::vector<float> state;                 // [backbone width]: the next step's state (post_projection)
  // The ordered embedding: centroid scores, their order, and the chosen tokens' rows gathered.
  std::vector<float> centroid_logits, centroid_order, selected_logits;
  std::vector<int32_t> selected;
  std::vector<uint8_t> selected_rows;
  // The attention kernel's (kernels/attention.h).
  std::vector<float> scores, block_rows, attn_parts, attn_lse;
  AttentionScratch attention{};
  int n_threads = 1;

  size_t Bytes() const;
};

// The sizes a drafter's scratch is made for.
struct AssistantSizes {
  int width = 0;           // the drafter's own hidden size
  int backbone_width = 0;  // the target's hidden size (its embeddings and states)
  int n_vocab = 0;
  int max_query_width = 0, max_kv_width = 0, max_ffn = 0;
  int max_group = 1;       // query heads per KV head
  int max_head_dim = 0;
  int n_centroids = 0;     // 0: the full LM head; else the ordered embedding's
  int selected_tokens = 0;  // tokens a step scores with the ordered embedding
  size_t selected_row_bytes = 0;
};

// A drafter: given a token the target is about to evaluate at position pos (its K/V not cached yet),
// the target's final-normed hidden state of the position before (the row whose logits chose the token),
// and the target's cache holding positions [0, pos), one step gives logits for the token after and a
// state to chain the next step with (the next token at the same position: HF's
// SinglePositionMultiTokenCandidateGenerator, llama.cpp's draft-mtp over the shared KV).
class Assistant {
 public:
  virtual ~Assistant() = default;

  // Ok when this drafter can draft for `target`: a Gemma 4 whose hidden size is the drafter's backbone
  // width, the same vocabulary size and sliding window, and for each of the drafter's layer types a
  // layer keeping its own K/V of the heads and head size the drafter reads. The error names the first
  // difference.
  virtual Status CheckTarget(const Model& target) const = 0;
  virtual const AssistantSizes& sizes() const = 0;

  // One step: scratch.logits and scratch.state. `state` is the target's hidden state for the first
  // step, the previous step's scratch.state after (it may be scratch.state itself). pos >= 1.
  virtual void Step(const Model& target, const KvCache& cache, int32_t token, const float* state, int64_t pos,
                    AssistantScratch& scratch, KernelContext& ctx) const = 0;
};

}  // namespace gemlet

// Attention as a kernel: grouped-query scaled dot-product attention of a batch's queries against one
// layer's cached keys/values (a KvView) and the batch's own new keys/values. Knows rows, heads and
// positions; nothing of layers, models or sessions (the model's KvCache hands out the view).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/kernel_context.h"
#include "tensor/dtype.h"

namespace gemlet {

// One layer's cached keys and values as attention reads them. Each slot holds one position's key
// row and value row: n_kv_heads heads of head_dim_k (head_dim_v) values, head h at value h * head_dim,
// stored as `type` (F32, F16, Q8_0 or Q4_0; block types need head sizes that are multiples of 32).
// Position p lives in slot p % capacity: a sliding-window layer keeps a ring of its last `capacity`
// positions and wraps, a layer that keeps every position has one slot per position and never wraps.
// The view borrows the storage; it is valid until the cache is resized or freed.
struct KvView {
  DType type = DType::kF32;
  const uint8_t* k = nullptr;  // slot 0's key row; [capacity, n_kv_heads * head_dim_k]
  const uint8_t* v = nullptr;  // slot 0's value row; [capacity, n_kv_heads * head_dim_v]
  size_t k_row_bytes = 0;      // from one slot's key row to the next
  size_t v_row_bytes = 0;
  int capacity = 0;            // slots (positions held at once)
  int n_kv_heads = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;

  // The rows of position pos (which the layer must still hold).
  const uint8_t* KeyRow(int64_t pos) const { return k + static_cast<size_t>(pos % capacity) * k_row_bytes; }
  const uint8_t* ValueRow(int64_t pos) const { return v + static_cast<size_t>(pos % capacity) * v_row_bytes; }
};

// Scaled dot-product attention of n new queries at positions pos0.. against the view's positions
// before pos0 and the batch's own keys/values, causal and window-limited. Query head h reads KV head
// h / (n_heads / kv.n_kv_heads); head sizes are the view's.
struct AttendArgs {
  int n_heads;            // query heads
  int window;             // keys a query sees, itself included; 0: all before it (global)
  const float* q;         // [n, n_heads * head_dim_k], roped
  // The keys of positions pos0..pos0+n-1 (roped) and their values, rounded as the view's type stores
  // them (KvCache::RoundRows): then a token's output does not depend on how the batch was cut.
  const float* k_new;     // [n, n_kv_heads * head_dim_k]
  const float* v_new;     // [n, n_kv_heads * head_dim_v]
  int n;
  int64_t pos0;           // the first new position; the view holds the ones the queries see before it
  float scale;            // multiplies q.k
  float softcap;          // 0: none
  float* out;             // [n, n_heads * head_dim_v]
  // Rows that also see keys after their own position (an image's soft tokens attend to all of
  // their image: Gemma 3's token-type mask): row t sees positions before key_end[t] (> its own
  // position, at most pos0 + n) instead of before pos + 1. The window still bounds the keys behind
  // it, as in HF ((causal or same image) and sliding window). Null: every row causal.
  const int64_t* key_end = nullptr;  // [n]
};

// A prompt step attends in blocks of up to kAttnQueryBlock tokens: the query heads of one KV head
// for all the block's tokens read each key and value row once between them (see Attend).
constexpr int kAttnQueryBlock = 4;
// Tokens per block for batches of up to max_batch rows.
inline int AttnQueryBlock(int max_batch) { return std::clamp(max_batch, 1, kAttnQueryBlock); }

// Every row takes its softmax over ranges of its keys and merges them by their log-sum-exps: ranges
// of 256 keys (doubled until a row has at most 16), aligned to absolute positions. They depend on
// the row's own position and window alone, so a token's output is the same bits whether it is
// attended alone (a decode step, whose ranges the threads share), in a prompt block or beside other
// sequences (docs/determinism.md). A block of tokens spans one range more than a row at most.
constexpr int64_t kMinAttnRangeKeys = 256;
constexpr int kMaxAttnRangesPerRow = 16;
constexpr int kMaxAttnRanges = kMaxAttnRangesPerRow + 2;
// The keys per range of a row that sees n_keys keys.
inline int64_t AttnRangeKeys(int64_t n_keys) {
  int64_t keys = kMinAttnRangeKeys;
  while ((n_keys + keys - 1) / keys > kMaxAttnRangesPerRow) keys *= 2;
  return keys;
}
// Steps of at most this many (token, KV head) pairs share each pair's key ranges between threads.
constexpr int kMaxRangeSplitItems = 2;

// Floats of scratch Attend needs for batches of up to max_batch rows against up to n_ctx positions,
// for layers of at most max_group query heads per KV head and head sizes up to max_head_dim(_v).
struct AttentionScratchSizes {
  int scores_stride = 0;             // floats per score row: n_ctx + max_batch
  size_t scores_per_thread = 0;      // one score row per query head of a group and token of a block
  size_t block_rows_per_thread = 0;  // a block's gathered query rows, outputs, range parts and weights
  size_t split_parts = 0;            // a split decode step's per-range outputs
  size_t split_lse = 0;              // ... and their log-sum-exps
};
AttentionScratchSizes PlanAttentionScratch(int max_group, int max_head_dim, int max_head_dim_v, int max_batch,
                                           int n_ctx);

// The memory Attend works in, owned by the caller (a session's workspace, where a memory planner
// counts it) and sized by PlanAttentionScratch: per pool thread `scores_per_thread` floats of
// scores and `block_rows_per_thread` of block rows, and the split decode's parts and log-sum-exps.
struct AttentionScratch {
  int max_batch = 1;               // the batch the sizes were planned for (it sets the block size)
  float* scores = nullptr;         // [n_threads, scores_per_thread], rows scores_stride apart
  int scores_stride = 0;
  size_t scores_per_thread = 0;
  float* block_rows = nullptr;     // [n_threads, block_rows_per_thread]
  size_t block_rows_per_thread = 0;
  float* split_parts = nullptr;    // [kMaxRangeSplitItems * kMaxAttnRanges, max group, max head_dim_v]
  float* split_lse = nullptr;      // [kMaxRangeSplitItems * kMaxAttnRanges, max group]
};

void Attend(const AttendArgs& args, const KvView& kv, const AttentionScratch& scratch, KernelContext& ctx);

// Row t of args as a one-token step at pos0 + t (speculative verification: its output is that of
// decoding it alone, bit for bit), over a view that holds the batch's rows already: row t reads its
// own key from k_new and the earlier ones, the batch's included, from the view.
void AttendRowsAsDecode(const AttendArgs& args, const KvView& kv, const AttentionScratch& scratch,
                        KernelContext& ctx);

}  // namespace gemlet

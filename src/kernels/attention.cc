// Attend over a KV view: score, softmax and value-sum loops on the kernel table's row kernels, prompt
// steps in blocks of tokens, decode steps split by key ranges and merged by their log-sum-exps.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernels.h"
#include "tensor/quant_blocks.h"

namespace gemlet {

AttentionScratchSizes PlanAttentionScratch(int max_group, int max_head_dim, int max_head_dim_v, int max_batch,
                                           int n_ctx) {
  const int block = AttnQueryBlock(max_batch);
  const size_t rows = static_cast<size_t>(block) * max_group;
  AttentionScratchSizes s;
  s.scores_stride = n_ctx + max_batch;
  s.scores_per_thread = rows * static_cast<size_t>(n_ctx + max_batch);
  if (block > 1) s.block_rows_per_thread = rows * static_cast<size_t>(max_head_dim + max_head_dim_v);
  s.split_parts = static_cast<size_t>(kMaxAttnSplitItems) * max_group * max_head_dim_v;
  s.split_lse = static_cast<size_t>(kMaxAttnSplitItems) * max_group;
  return s;
}

namespace {
// Calls fn(first, count) over the runs of positions [begin, end) that lie contiguously in a cache
// layer of this capacity: a ring (sliding window) wraps once at most.
template <class Fn>
void ForEachCacheRun(int64_t begin, int64_t end, int capacity, Fn&& fn) {
  while (begin < end) {
    const int64_t count = std::min<int64_t>(end - begin, capacity - begin % capacity);
    fn(begin, count);
    begin += count;
  }
}

// A decode step splits each KV head's keys into ranges of this many: a range's fixed costs (a
// softmax per head, its share of the merge) stay small beside its rows, and the split depends on
// the context only, not on the thread count, so neither do the results.
constexpr int64_t kKeysPerSplit = 256;

// Scores of n_q query rows (q_stride apart) against the keys at positions [k_begin, k_end) of KV
// head kv_head: those before the batch come from the view (in runs), the rest from the batch.
// Query row r's scores go to scores + r * stride.
void ScoreKeys(const KernelTable& kernels, const AttendArgs& a, const KvView& kv, const float* q, size_t q_stride,
               int n_q, int kv_head, int64_t k_begin, int64_t k_end, float* scores, size_t stride) {
  const int hd = kv.head_dim_k;
  const size_t kv_width = static_cast<size_t>(kv.n_kv_heads) * hd, k_off = static_cast<size_t>(kv_head) * hd;
  const DType type = kv.type;
  const int64_t cached_end = std::min(k_end, a.pos0), batch_begin = std::max(k_begin, a.pos0);
  ForEachCacheRun(k_begin, cached_end, kv.capacity, [&](int64_t first, int64_t count) {
    const void* rows = kv.KeyRow(first);
    float* s = scores + (first - k_begin);
    if (type == DType::kF16) {
      kernels.dot_rows_f16(q, q_stride, n_q, static_cast<const uint16_t*>(rows) + k_off, kv_width, count, hd, s, stride);
    } else if (type == DType::kQ8_0) {  // strides and offsets in blocks of 32
      kernels.dot_rows_q8_0(q, q_stride, n_q, static_cast<const BlockQ8_0*>(rows) + k_off / kBlock32, kv_width / kBlock32,
                            count, hd, s, stride);
    } else if (type == DType::kQ4_0) {
      kernels.dot_rows_q4_0(q, q_stride, n_q, static_cast<const BlockQ4_0*>(rows) + k_off / kBlock32, kv_width / kBlock32,
                            count, hd, s, stride);
    } else {
      kernels.dot_rows_f32(q, q_stride, n_q, static_cast<const float*>(rows) + k_off, kv_width, count, hd, s, stride);
    }
  });
  if (batch_begin < k_end) {
    kernels.dot_rows_f32(q, q_stride, n_q, a.k_new + static_cast<size_t>(batch_begin - a.pos0) * kv_width + k_off,
                         kv_width, k_end - batch_begin, hd, scores + (batch_begin - k_begin), stride);
  }
}

// out row r (out_stride apart) += the values at positions [k_begin, k_end) of KV head kv_head
// weighted by p row r (stride apart), in the order of the positions.
void SumValues(const KernelTable& kernels, const AttendArgs& a, const KvView& kv, const float* p, size_t stride,
               int n_p, int kv_head, int64_t k_begin, int64_t k_end, float* out, size_t out_stride) {
  const int hdv = kv.head_dim_v;
  const size_t v_width = static_cast<size_t>(kv.n_kv_heads) * hdv, v_off = static_cast<size_t>(kv_head) * hdv;
  const DType type = kv.type;
  const int64_t cached_end = std::min(k_end, a.pos0), batch_begin = std::max(k_begin, a.pos0);
  ForEachCacheRun(k_begin, cached_end, kv.capacity, [&](int64_t first, int64_t count) {
    const void* rows = kv.ValueRow(first);
    const float* w = p + (first - k_begin);
    if (type == DType::kF16) {
      kernels.weighted_sum_f16(w, stride, n_p, static_cast<const uint16_t*>(rows) + v_off, v_width, count, hdv, out, out_stride);
    } else if (type == DType::kQ8_0) {
      kernels.weighted_sum_q8_0(w, stride, n_p, static_cast<const BlockQ8_0*>(rows) + v_off / kBlock32, v_width / kBlock32,
                                count, hdv, out, out_stride);
    } else if (type == DType::kQ4_0) {
      kernels.weighted_sum_q4_0(w, stride, n_p, static_cast<const BlockQ4_0*>(rows) + v_off / kBlock32, v_width / kBlock32,
                                count, hdv, out, out_stride);
    } else {
      kernels.weighted_sum_f32(w, stride, n_p, static_cast<const float*>(rows) + v_off, v_width, count, hdv, out, out_stride);
    }
  });
  if (batch_begin < k_end) {
    kernels.weighted_sum_f32(p + (batch_begin - k_begin), stride, n_p,
                             a.v_new + static_cast<size_t>(batch_begin - a.pos0) * v_width + v_off, v_width,
                             k_end - batch_begin, hdv, out, out_stride);
  }
}

// Scales (and soft-caps) a row of n scores and turns it into probabilities; returns the log-sum-exp.
float ScoresToProbabilities(const KernelTable& kernels, const AttendArgs& a, float* s, int64_t n) {
  for (int64_t k = 0; k < n; ++k) s[k] *= a.scale;
  // Gemma 2 soft-caps attention logits before the mask and softmax (HF: attn_logit_softcapping).
  if (a.softcap > 0) kernels.soft_cap(s, n, a.softcap);
  return kernels.softmax(s, n);
}

// The query heads of KV head kv_head for token t attend to the keys at positions [k_begin, k_end).
// Writes the heads' outputs, normalised over these keys alone, to out (head_dim_v apart), and their
// log-sum-exps to lse when it is not null. scores: one row of `stride` floats per head.
void AttendKeyRange(const KernelTable& kernels, const AttendArgs& a, const KvView& kv, int t, int kv_head,
                    int64_t k_begin, int64_t k_end, float* scores, size_t stride, float* out, float* lse) {
  const int hd = kv.head_dim_k, hdv = kv.head_dim_v, heads = a.n_heads / kv.n_kv_heads;
  const float* q = a.q + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * heads) * hd;
  ScoreKeys(kernels, a, kv, q, hd, heads, kv_head, k_begin, k_end, scores, stride);
  for (int r = 0; r < heads; ++r) {
    const float log_sum = ScoresToProbabilities(kernels, a, scores + r * stride, k_end - k_begin);
    if (lse != nullptr) lse[r] = log_sum;
  }
  std::fill(out, out + static_cast<size_t>(heads) * hdv, 0.0f);
  SumValues(kernels, a, kv, scores, stride, heads, kv_head, k_begin, k_end, out, hdv);
}

// Tokens [t0, t1) of a prompt step (at most AttnQueryBlock) and the query heads of KV head kv_head:
// their queries gathered into rows (token, head), scored against the keys that any of them sees,
// each row's own keys turned into probabilities and the others' set to 0, so one pass over the keys
// and values serves the whole block. A score is summed in the same order whatever the tile
// (DotRows), and a weight of 0 adds nothing to a value sum taken in key order: every output is bit
// for bit what AttendKeyRange gives the token alone.
void AttendQueryBlock(const KernelTable& kernels, const AttendArgs& a, const KvView& kv, int t0, int t1, int kv_head,
                      float* scores, size_t stride, float* rows) {
  const int hd = kv.head_dim_k, hdv = kv.head_dim_v, group = a.n_heads / kv.n_kv_heads;
  const int n_rows = (t1 - t0) * group;
  float* q_rows = rows;                                         // [n_rows, hd]
  float* out_rows = rows + static_cast<size_t>(n_rows) * hd;  // [n_rows, hdv]
  for (int t = t0; t < t1; ++t) {
    const float* q = a.q + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * group) * hd;
    std::copy(q, q + static_cast<size_t>(group) * hd, q_rows + static_cast<size_t>(t - t0) * group * hd);
  }
  auto first_key = [&](int t) { return a.window > 0 ? std::max<int64_t>(0, a.pos0 + t - a.window + 1) : int64_t{0}; };
  const int64_t k_begin = first_key(t0), k_end = a.pos0 + t1;
  const int64_t n_keys = k_end - k_begin;
  ScoreKeys(kernels, a, kv, q_rows, hd, n_rows, kv_head, k_begin, k_end, scores, stride);
  for (int t = t0; t < t1; ++t) {
    const int64_t lo = first_key(t) - k_begin, hi = a.pos0 + t + 1 - k_begin;  // this token's keys
    for (int r = 0; r < group; ++r) {
      float* s = scores + static_cast<size_t>((t - t0) * group + r) * stride;
      std::fill(s, s + lo, 0.0f);
      ScoresToProbabilities(kernels, a, s + lo, hi - lo);
      std::fill(s + hi, s + n_keys, 0.0f);
    }
  }
  std::fill(out_rows, out_rows + static_cast<size_t>(n_rows) * hdv, 0.0f);
  SumValues(kernels, a, kv, scores, stride, n_rows, kv_head, k_begin, k_end, out_rows, hdv);
  for (int t = t0; t < t1; ++t) {
    const float* o = out_rows + static_cast<size_t>(t - t0) * group * hdv;
    std::copy(o, o + static_cast<size_t>(group) * hdv,
              a.out + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * group) * hdv);
  }
}

// Range s of a head holds softmax-weighted values normalised by its own sum exp(lse_s): the whole
// softmax weighs it by exp(lse_s) / sum over ranges of exp(lse_r).
void MergeKeyRanges(const KernelTable& kernels, const AttendArgs& a, const KvView& kv, const AttentionScratch& scratch,
                    size_t token_items, size_t splits) {
  const int group = a.n_heads / kv.n_kv_heads, hdv = kv.head_dim_v;
  for (size_t token_item = 0; token_item < token_items; ++token_item) {
    const int t = static_cast<int>(token_item / kv.n_kv_heads), kv_head = static_cast<int>(token_item % kv.n_kv_heads);
    const size_t first = token_item * splits;
    for (int r = 0; r < group; ++r) {
      float max_lse = -std::numeric_limits<float>::infinity();
      for (size_t s = 0; s < splits; ++s) max_lse = std::max(max_lse, scratch.split_lse[(first + s) * group + r]);
      float total = 0;
      for (size_t s = 0; s < splits; ++s) total += std::exp(scratch.split_lse[(first + s) * group + r] - max_lse);
      float* out = a.out + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * group + r) * hdv;
      std::fill(out, out + hdv, 0.0f);
      for (size_t s = 0; s < splits; ++s) {
        const float weight = std::exp(scratch.split_lse[(first + s) * group + r] - max_lse) / total;
        if (weight > 0) kernels.Axpy(weight, scratch.split_parts + ((first + s) * group + r) * hdv, out, hdv);
      }
    }
  }
}
}  // namespace

void Attend(const AttendArgs& a, const KvView& kv, const AttentionScratch& scratch, KernelContext& ctx) {
  const int group = a.n_heads / kv.n_kv_heads, hdv = kv.head_dim_v;
  const size_t stride = static_cast<size_t>(scratch.scores_stride);
  // An item is one token's query heads of one KV head, over all its keys or a range of them: the
  // heads read each key and value row once between them. A decode step has too few (token, KV head)
  // pairs to keep the threads busy, so it splits their keys into ranges and merges the ranges'
  // softmaxes by their log-sum-exps afterwards; each row is still read once.
  const size_t token_items = static_cast<size_t>(a.n) * kv.n_kv_heads;
  const int64_t last_pos = a.pos0 + a.n - 1;
  const int64_t most_keys = a.window > 0 ? std::min<int64_t>(last_pos + 1, a.window) : last_pos + 1;
  const size_t max_items = kMaxAttnSplitItems;
  size_t splits = 1;
  if (token_items < max_items) {
    splits = std::clamp<size_t>(static_cast<size_t>((most_keys + kKeysPerSplit - 1) / kKeysPerSplit), 1,
                                max_items / token_items);
  }
  const int block = AttnQueryBlock(scratch.max_batch);
  if (splits == 1 && a.n > 1 && block > 1) {
    // A prompt step: items are blocks of tokens of one KV head, later ones (more keys) first.
    const size_t n_blocks = static_cast<size_t>((a.n + block - 1) / block), items = n_blocks * kv.n_kv_heads;
    ctx.pool().ParallelForDynamic(items, 1, [&](size_t begin, size_t end, int thread) {
      float* scores = scratch.scores + static_cast<size_t>(thread) * scratch.scores_per_thread;
      float* rows = scratch.block_rows + static_cast<size_t>(thread) * scratch.block_rows_per_thread;
      for (size_t item = begin; item < end; ++item) {
        const size_t b = n_blocks - 1 - item / kv.n_kv_heads;
        const int t0 = static_cast<int>(b) * block, t1 = std::min(a.n, t0 + block);
        AttendQueryBlock(ctx.kernels(), a, kv, t0, t1, static_cast<int>(item % kv.n_kv_heads), scores, stride, rows);
      }
    });
    return;
  }
  // Later queries attend to more keys (causal): chunks are handed out in turn, not split evenly.
  const size_t items = token_items * splits;
  const size_t grain = std::max<size_t>(1, items / (static_cast<size_t>(ctx.n_threads()) * 16));
  ctx.pool().ParallelForDynamic(items, grain, [&](size_t begin, size_t end, int thread) {
    float* scores = scratch.scores + static_cast<size_t>(thread) * scratch.scores_per_thread;
    for (size_t item = begin; item < end; ++item) {
      const size_t token_item = item / splits, split = item % splits;
      const int t = static_cast<int>(token_item / kv.n_kv_heads), kv_head = static_cast<int>(token_item % kv.n_kv_heads);
      const int64_t pos = a.pos0 + t;
      const int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
      if (splits == 1) {
        float* out = a.out + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * group) * hdv;
        AttendKeyRange(ctx.kernels(), a, kv, t, kv_head, lo, pos + 1, scores, stride, out, nullptr);
        continue;
      }
      const int64_t per_split = (pos + 1 - lo + static_cast<int64_t>(splits) - 1) / static_cast<int64_t>(splits);
      const int64_t k_begin = std::min(pos + 1, lo + static_cast<int64_t>(split) * per_split);
      const int64_t k_end = std::min(pos + 1, k_begin + per_split);
      float* lse = scratch.split_lse + item * group;
      if (k_begin == k_end) {  // an earlier token of the batch, with fewer keys than ranges
        std::fill(lse, lse + group, -std::numeric_limits<float>::infinity());
        continue;
      }
      AttendKeyRange(ctx.kernels(), a, kv, t, kv_head, k_begin, k_end, scores, stride,
                     scratch.split_parts + item * group * hdv, lse);
    }
  });
  if (splits == 1) return;
  MergeKeyRanges(ctx.kernels(), a, kv, scratch, token_items, splits);
}

void AttendRowsAsDecode(const AttendArgs& a, const KvView& kv, const AttentionScratch& scratch, KernelContext& ctx) {
  const size_t q_width = static_cast<size_t>(a.n_heads) * kv.head_dim_k;
  const size_t a_width = static_cast<size_t>(a.n_heads) * kv.head_dim_v;
  const size_t k_width = static_cast<size_t>(kv.n_kv_heads) * kv.head_dim_k;
  const size_t v_width = static_cast<size_t>(kv.n_kv_heads) * kv.head_dim_v;
  for (int t = 0; t < a.n; ++t) {
    AttendArgs row = a;
    row.q = a.q + t * q_width;
    row.k_new = a.k_new + t * k_width;
    row.v_new = a.v_new + t * v_width;
    row.n = 1;
    row.pos0 = a.pos0 + t;
    row.out = a.out + t * a_width;
    Attend(row, kv, scratch, ctx);
  }
}

}  // namespace gemlet

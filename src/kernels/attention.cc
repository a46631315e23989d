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
  // Gathered queries (blocks of 2 tokens or more), outputs, one range's parts, range weights.
  const size_t query_floats = block > 1 ? static_cast<size_t>(max_head_dim) : 0;
  s.block_rows_per_thread = rows * (query_floats + 2 * static_cast<size_t>(max_head_dim_v) + kMaxAttnRanges);
  s.split_parts = static_cast<size_t>(kMaxRangeSplitItems) * kMaxAttnRanges * max_group * max_head_dim_v;
  s.split_lse = static_cast<size_t>(kMaxRangeSplitItems) * kMaxAttnRanges * max_group;
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

// The keys of token t: positions [lo, hi), cut into ranges of `range` keys aligned to multiples of it.
struct RowKeys {
  int64_t lo, hi, range;
  int64_t first() const { return lo / range; }  // the first range's index
  int64_t last() const { return (hi - 1) / range; }
  int64_t begin(int64_t r) const { return std::max(lo, r * range); }  // range r's keys of this row
  int64_t end(int64_t r) const { return std::min(hi, (r + 1) * range); }
};
RowKeys KeysOf(const AttendArgs& a, int t) {
  const int64_t pos = a.pos0 + t;
  int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0, hi = pos + 1;
  if (a.key_end != nullptr) hi = std::max(hi, a.key_end[t]);
  return {lo, hi, AttnRangeKeys(hi - lo)};
}

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

// The weights that merge a row's ranges (log-sum-exps lse[0..n), -inf for a range without keys):
// range s holds values normalised by its own sum exp(lse_s), and the whole softmax weighs it by
// exp(lse_s) / sum_r exp(lse_r). Every path merges with these, in range order.
void MergeWeights(const float* lse, int n, float* weights) {
  float max_lse = -std::numeric_limits<float>::infinity();
  for (int s = 0; s < n; ++s) max_lse = std::max(max_lse, lse[s]);
  float total = 0;
  for (int s = 0; s < n; ++s) total += std::exp(lse[s] - max_lse);
  for (int s = 0; s < n; ++s) weights[s] = std::exp(lse[s] - max_lse) / total;
}

// out (zeroed here) = sum over ranges s of weights[s] * part(s), in range order; part(s) fills a
// buffer with range s's values.
template <class PartFn>
void MergeParts(const KernelTable& kernels, const float* weights, int n, int hdv, float* out, PartFn&& part) {
  std::fill(out, out + hdv, 0.0f);
  for (int s = 0; s < n; ++s) {
    if (weights[s] > 0) kernels.Axpy(weights[s], part(s), out, hdv);
  }
}

// Tokens [t0, t1) (at most AttnQueryBlock) and the query heads of KV head kv_head, one pass over
// their keys: queries gathered into rows (token, head) and scored against the keys that any of them
// sees; each row's keys turned into probabilities range by range and the others' set to 0; the
// values summed range by range for all rows at once. A score is summed in the same order whatever
// the tile (DotRows), a weight of 0 adds nothing to a value sum taken in key order, and the ranges
// merge as a decode step merges them: every output is bit for bit that of the token alone. Tokens
// whose ranges differ in size (a block across a doubling) go one at a time.
void AttendBlock(const KernelTable& kernels, const AttendArgs& a, const KvView& kv, int t0, int t1, int kv_head,
                 float* scores, size_t stride, float* rows) {
  for (int t = t0 + 1; t < t1; ++t) {
    if (KeysOf(a, t).range != KeysOf(a, t0).range) {
      for (int u = t0; u < t1; ++u) AttendBlock(kernels, a, kv, u, u + 1, kv_head, scores, stride, rows);
      return;
    }
  }
  const int hd = kv.head_dim_k, hdv = kv.head_dim_v, group = a.n_heads / kv.n_kv_heads;
  const int n_rows = (t1 - t0) * group;
  const float* q = a.q + (static_cast<size_t>(t0) * a.n_heads + static_cast<size_t>(kv_head) * group) * hd;
  if (t1 - t0 > 1) {  // the heads of one KV head are contiguous within a token, not across tokens
    float* q_rows = rows;
    for (int t = t0; t < t1; ++t) {
      const float* qt = a.q + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * group) * hd;
      std::copy(qt, qt + static_cast<size_t>(group) * hd, q_rows + static_cast<size_t>(t - t0) * group * hd);
    }
    q = q_rows;
    rows += static_cast<size_t>(n_rows) * hd;
  }
  float* out_rows = rows;                                          // [n_rows, hdv]
  float* part_rows = out_rows + static_cast<size_t>(n_rows) * hdv;  // [n_rows, hdv]
  float* weights = part_rows + static_cast<size_t>(n_rows) * hdv;   // [n_rows, kMaxAttnRanges]
  const RowKeys first = KeysOf(a, t0);
  const int64_t k_begin = first.lo;
  int64_t k_end = a.pos0 + t1;
  if (a.key_end != nullptr) {  // an earlier row may see further than the last one
    for (int t = t0; t < t1; ++t) k_end = std::max(k_end, KeysOf(a, t).hi);
  }
  const int64_t n_keys = k_end - k_begin;
  const int64_t range = first.range, r0 = k_begin / range;
  const int n_ranges = static_cast<int>((k_end - 1) / range - r0 + 1);
  ScoreKeys(kernels, a, kv, q, hd, n_rows, kv_head, k_begin, k_end, scores, stride);
  for (int t = t0; t < t1; ++t) {
    const RowKeys keys = KeysOf(a, t);
    for (int r = 0; r < group; ++r) {
      const int row = (t - t0) * group + r;
      float* s = scores + static_cast<size_t>(row) * stride;  // s[p - k_begin]: the score of position p
      std::fill(s, s + (keys.lo - k_begin), 0.0f);
      std::fill(s + (keys.hi - k_begin), s + n_keys, 0.0f);
      float lse[kMaxAttnRanges];
      for (int i = 0; i < n_ranges; ++i) {
        const int64_t b = keys.begin(r0 + i), e = keys.end(r0 + i);
        lse[i] = b < e ? ScoresToProbabilities(kernels, a, s + (b - k_begin), e - b)
                       : -std::numeric_limits<float>::infinity();
      }
      if (n_ranges > 1) MergeWeights(lse, n_ranges, weights + static_cast<size_t>(row) * kMaxAttnRanges);
    }
  }
  std::fill(out_rows, out_rows + static_cast<size_t>(n_rows) * hdv, 0.0f);
  if (n_ranges == 1) {
    SumValues(kernels, a, kv, scores, stride, n_rows, kv_head, k_begin, k_end, out_rows, hdv);
  } else {
    for (int i = 0; i < n_ranges; ++i) {
      const int64_t b = std::max(k_begin, (r0 + i) * range), e = std::min(k_end, (r0 + i + 1) * range);
      std::fill(part_rows, part_rows + static_cast<size_t>(n_rows) * hdv, 0.0f);
      SumValues(kernels, a, kv, scores + (b - k_begin), stride, n_rows, kv_head, b, e, part_rows, hdv);
      for (int row = 0; row < n_rows; ++row) {
        const float w = weights[static_cast<size_t>(row) * kMaxAttnRanges + i];
        const size_t offset = static_cast<size_t>(row) * hdv;
        if (w > 0) kernels.Axpy(w, part_rows + offset, out_rows + offset, hdv);
      }
    }
  }
  for (int t = t0; t < t1; ++t) {
    const float* o = out_rows + static_cast<size_t>(t - t0) * group * hdv;
    std::copy(o, o + static_cast<size_t>(group) * hdv,
              a.out + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * group) * hdv);
  }
}

// A step of few (token, KV head) pairs: each pair's key ranges are items of their own, shared
// between the threads, then merged in range order with the weights AttendBlock uses.
void AttendSplitRanges(const AttendArgs& a, const KvView& kv, const AttentionScratch& scratch, KernelContext& ctx,
                       int max_ranges) {
  const int group = a.n_heads / kv.n_kv_heads, hdv = kv.head_dim_v;
  const size_t stride = static_cast<size_t>(scratch.scores_stride);
  const size_t token_items = static_cast<size_t>(a.n) * kv.n_kv_heads, items = token_items * max_ranges;
  ctx.pool().ParallelForDynamic(items, 1, [&](size_t begin, size_t end, int thread) {
    float* scores = scratch.scores + static_cast<size_t>(thread) * scratch.scores_per_thread;
    for (size_t item = begin; item < end; ++item) {
      const size_t token_item = item / max_ranges;
      const int t = static_cast<int>(token_item / kv.n_kv_heads), kv_head = static_cast<int>(token_item % kv.n_kv_heads);
      const RowKeys keys = KeysOf(a, t);
      const int64_t r = keys.first() + static_cast<int64_t>(item % max_ranges);
      float* lse = scratch.split_lse + item * group;
      if (r > keys.last()) {  // this token has fewer ranges than the step's longest row
        std::fill(lse, lse + group, -std::numeric_limits<float>::infinity());
        continue;
      }
      AttendKeyRange(ctx.kernels(), a, kv, t, kv_head, keys.begin(r), keys.end(r), scores, stride,
                     scratch.split_parts + item * group * hdv, lse);
    }
  });
  for (size_t token_item = 0; token_item < token_items; ++token_item) {
    const int t = static_cast<int>(token_item / kv.n_kv_heads), kv_head = static_cast<int>(token_item % kv.n_kv_heads);
    const size_t first = token_item * max_ranges;
    for (int r = 0; r < group; ++r) {
      float lse[kMaxAttnRanges], weights[kMaxAttnRanges];
      for (int s = 0; s < max_ranges; ++s) lse[s] = scratch.split_lse[(first + s) * group + r];
      MergeWeights(lse, max_ranges, weights);
      float* out = a.out + (static_cast<size_t>(t) * a.n_heads + static_cast<size_t>(kv_head) * group + r) * hdv;
      MergeParts(ctx.kernels(), weights, max_ranges, hdv, out,
                 [&](int s) { return scratch.split_parts + ((first + s) * group + r) * hdv; });
    }
  }
}
}  // namespace

void Attend(const AttendArgs& a, const KvView& kv, const AttentionScratch& scratch, KernelContext& ctx) {
  const size_t stride = static_cast<size_t>(scratch.scores_stride);
  // An item is a block of tokens' query heads of one KV head: the heads read each key and value row
  // once between them. A step with too few items to keep the threads busy (a decode step) makes
  // items of each one's key ranges instead. Either way the results are the same bits.
  const size_t token_items = static_cast<size_t>(a.n) * kv.n_kv_heads;
  int max_ranges = 1;
  for (int t = 0; t < a.n; ++t) {
    const RowKeys keys = KeysOf(a, t);
    max_ranges = std::max(max_ranges, static_cast<int>(keys.last() - keys.first() + 1));
  }
  if (max_ranges > 1 && token_items <= static_cast<size_t>(kMaxRangeSplitItems) &&
      token_items < static_cast<size_t>(ctx.n_threads())) {
    AttendSplitRanges(a, kv, scratch, ctx, max_ranges);
    return;
  }
  const int block = AttnQueryBlock(scratch.max_batch);
  // Later blocks (more keys) first: the pool hands items out in turn.
  const size_t n_blocks = static_cast<size_t>((a.n + block - 1) / block), items = n_blocks * kv.n_kv_heads;
  ctx.pool().ParallelForDynamic(items, 1, [&](size_t begin, size_t end, int thread) {
    float* scores = scratch.scores + static_cast<size_t>(thread) * scratch.scores_per_thread;
    float* rows = scratch.block_rows + static_cast<size_t>(thread) * scratch.block_rows_per_thread;
    for (size_t item = begin; item < end; ++item) {
      const size_t b = n_blocks - 1 - item / kv.n_kv_heads;
      const int t0 = static_cast<int>(b) * block, t1 = std::min(a.n, t0 + block);
      AttendBlock(ctx.kernels(), a, kv, t0, t1, static_cast<int>(item % kv.n_kv_heads), scores, stride, rows);
    }
  });
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

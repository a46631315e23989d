// Attend (kernels/attention): grouped-query attention over a KV view and the batch's own keys,
// against a double-precision evaluation of the same formula. Decode steps at long context split
// their keys into ranges and merge the ranges' softmaxes; these cases reach that path, ring
// buffers that wrap, soft-capping, the f16, Q8_0 and Q4_0 rows, and rows attended as decode steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "common/test_util.h"
#include "kernels/attention.h"
#include "tensor/dtype.h"

namespace gemlet {
namespace {

struct AttentionCase {
  const char* name;
  int n_heads, n_kv_heads, head_dim, head_dim_v;
  int window;      // 0: global
  float softcap;   // 0: none
  int n_past;      // positions already in the cache
  int n;           // new tokens
  DType kv_type;
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

// Keys, values and queries of one case, and the reference output computed from them in double.
class AttentionFixture {
 public:
  // [two_way_begin, two_way_end): new tokens (indices into the batch) that attend to each other both
  // ways, as an image's soft tokens do (AttendArgs::key_end); none by default.
  explicit AttentionFixture(const AttentionCase& c, int two_way_begin = 0, int two_way_end = 0) : c_(c) {
    for (int t = 0; t < c.n; ++t) {
      const bool two_way = t >= two_way_begin && t < two_way_end;
      key_end_.push_back(c.n_past + (two_way ? two_way_end : t + 1));
    }
    n_ctx_ = c.n_past + c.n;
    std::mt19937 rng(1234 + c.n_heads * 7 + c.n_past);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // Values an f16 cache holds exactly, so that both cache types share one reference.
    auto draw = [&](size_t count, float scale) {
      std::vector<float> v(count);
      for (float& x : v) x = F16ToF32(F32ToF16(normal(rng) * scale));
      return v;
    };
    const size_t positions = static_cast<size_t>(n_ctx_);
    keys_ = draw(positions * c.n_kv_heads * c.head_dim, 1.0f);
    values_ = draw(positions * c.n_kv_heads * c.head_dim_v, 1.0f);
    // Large enough logits that the softmax is far from uniform and the soft-cap bites.
    queries_ = draw(static_cast<size_t>(c.n) * c.n_heads * c.head_dim, 3.0f);
    scale_ = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    // What attention sees: a Q8_0 or Q4_0 cache holds its rows rounded to blocks; the batch's rows
    // are exact.
    seen_keys_ = keys_;
    seen_values_ = values_;
    if (c.kv_type == DType::kQ8_0 || c.kv_type == DType::kQ4_0) {
      RoundCachedRows(&seen_keys_, static_cast<size_t>(c.n_kv_heads) * c.head_dim);
      RoundCachedRows(&seen_values_, static_cast<size_t>(c.n_kv_heads) * c.head_dim_v);
    }
  }

  void RoundCachedRows(std::vector<float>* rows, size_t width) const {
    std::vector<uint8_t> stored(RowBytes(c_.kv_type, static_cast<int64_t>(width)));
    for (int pos = 0; pos < c_.n_past; ++pos) {
      float* row = rows->data() + pos * width;
      QuantizeRow(c_.kv_type, row, stored.data(), static_cast<int64_t>(width));
      DequantizeRow(c_.kv_type, stored.data(), row, static_cast<int64_t>(width));
    }
  }

  bool two_way() const {
    for (int t = 0; t < c_.n; ++t) {
      if (key_end_[static_cast<size_t>(t)] != c_.n_past + t + 1) return true;
    }
    return false;
  }

  std::vector<double> Reference() const {
    const int group = c_.n_heads / c_.n_kv_heads;
    std::vector<double> out(static_cast<size_t>(c_.n) * c_.n_heads * c_.head_dim_v, 0.0);
    for (int t = 0; t < c_.n; ++t) {
      const int64_t pos = c_.n_past + t;
      const int64_t lo = c_.window > 0 ? std::max<int64_t>(0, pos - c_.window + 1) : 0;
      const int64_t hi = key_end_[static_cast<size_t>(t)];  // pos + 1 unless two-way
      for (int h = 0; h < c_.n_heads; ++h) {
        const int kv = h / group;
        const float* q = &queries_[(static_cast<size_t>(t) * c_.n_heads + h) * c_.head_dim];
        std::vector<double> logits;
        for (int64_t j = lo; j < hi; ++j) {
          const float* k = &seen_keys_[(static_cast<size_t>(j) * c_.n_kv_heads + kv) * c_.head_dim];
          double dot = 0;
          for (int i = 0; i < c_.head_dim; ++i) dot += static_cast<double>(q[i]) * k[i];
          double logit = dot * scale_;
          if (c_.softcap > 0) logit = c_.softcap * std::tanh(logit / c_.softcap);
          logits.push_back(logit);
        }
        double max = logits[0], sum = 0;
        for (double l : logits) max = std::max(max, l);
        for (double& l : logits) sum += (l = std::exp(l - max));
        double* o = &out[(static_cast<size_t>(t) * c_.n_heads + h) * c_.head_dim_v];
        for (int64_t j = lo; j < hi; ++j) {
          const float* v = &seen_values_[(static_cast<size_t>(j) * c_.n_kv_heads + kv) * c_.head_dim_v];
          const double p = logits[j - lo] / sum;
          for (int i = 0; i < c_.head_dim_v; ++i) o[i] += p * v[i];
        }
      }
    }
    return out;
  }

  // Attend with this many threads: the view holds the first n_past positions (a ring keeps only
  // its window of them), the batch brings the last n. batch_rows: the batch the scratch is planned
  // for (by default n; 1 takes a prompt's tokens one at a time instead of in blocks).
  // rows_as_decode: the view holds the batch's rows too (a ring with room for them beyond its
  // window) and AttendRowsAsDecode attends each row as a one-token step.
  std::vector<float> Attend(int n_threads, int batch_rows = 0, bool rows_as_decode = false) const {
    const int held = rows_as_decode ? n_ctx_ : c_.n_past;
    const int spare = rows_as_decode ? c_.n : 0;  // as KvCache's ring_spare
    Cache cache = MakeCache(c_.window > 0 ? std::min(c_.window + spare, n_ctx_) : n_ctx_);
    for (int pos = 0; pos < held; ++pos) Store(cache, pos);
    const Scratch scratch = MakeScratch(n_threads, batch_rows > 0 ? batch_rows : c_.n);
    KernelContext ctx(n_threads);
    std::vector<float> out(static_cast<size_t>(c_.n) * c_.n_heads * c_.head_dim_v, -1.0f);
    AttendArgs a{c_.n_heads, c_.window, queries_.data(), &keys_[c_.n_past * kw()], &values_[c_.n_past * vw()],
                 c_.n, c_.n_past, scale_, c_.softcap, out.data()};
    if (two_way()) a.key_end = key_end_.data();
    if (rows_as_decode) {
      AttendRowsAsDecode(a, cache.view, scratch.view, ctx);
    } else {
      gemlet::Attend(a, cache.view, scratch.view, ctx);
    }
    return out;
  }

  // The case's n tokens in chunks of these sizes, as a model runs them: each chunk attends over a
  // view holding the positions before it (a ring only its last `capacity`) and brings its own keys
  // and values rounded as the cache will store them (KvCache::RoundRows).
  std::vector<float> AttendInChunks(int n_threads, const std::vector<int>& chunks) const {
    Cache cache = MakeCache(c_.window > 0 ? std::min(c_.window, n_ctx_) : n_ctx_);
    for (int pos = 0; pos < c_.n_past; ++pos) Store(cache, pos);
    const Scratch scratch = MakeScratch(n_threads, *std::max_element(chunks.begin(), chunks.end()));
    KernelContext ctx(n_threads);
    const size_t q_width = static_cast<size_t>(c_.n_heads) * c_.head_dim, a_width = static_cast<size_t>(c_.n_heads) * c_.head_dim_v;
    std::vector<float> out(static_cast<size_t>(c_.n) * a_width, -1.0f);
    int t0 = 0;
    for (int chunk : chunks) {
      const int pos0 = c_.n_past + t0;
      std::vector<float> k(keys_.begin() + pos0 * kw(), keys_.begin() + (pos0 + chunk) * kw());
      std::vector<float> v(values_.begin() + pos0 * vw(), values_.begin() + (pos0 + chunk) * vw());
      RoundRows(&k, kw());
      RoundRows(&v, vw());
      const AttendArgs a{c_.n_heads, c_.window, &queries_[t0 * q_width], k.data(), v.data(), chunk, pos0, scale_,
                         c_.softcap, &out[t0 * a_width]};
      gemlet::Attend(a, cache.view, scratch.view, ctx);
      for (int pos = pos0; pos < pos0 + chunk; ++pos) Store(cache, pos);
      t0 += chunk;
    }
    return out;
  }

 private:
  size_t kw() const { return static_cast<size_t>(c_.n_kv_heads) * c_.head_dim; }
  size_t vw() const { return static_cast<size_t>(c_.n_kv_heads) * c_.head_dim_v; }

  // A KV view of `capacity` slots over the rows it owns.
  struct Cache {
    KvView view;
    std::vector<uint8_t> k_rows, v_rows;
  };
  Cache MakeCache(int capacity) const {
    Cache c;
    c.view.type = c_.kv_type;
    c.view.k_row_bytes = RowBytes(c_.kv_type, static_cast<int64_t>(kw()));
    c.view.v_row_bytes = RowBytes(c_.kv_type, static_cast<int64_t>(vw()));
    c.view.capacity = capacity;
    c.view.n_kv_heads = c_.n_kv_heads;
    c.view.head_dim_k = c_.head_dim;
    c.view.head_dim_v = c_.head_dim_v;
    c.k_rows.resize(c.view.k_row_bytes * capacity);
    c.v_rows.resize(c.view.v_row_bytes * capacity);
    c.view.k = c.k_rows.data();
    c.view.v = c.v_rows.data();
    return c;
  }
  // Position pos's rows into their slot (a ring's later positions overwrite the earlier ones).
  void Store(Cache& c, int pos) const {
    const size_t slot = static_cast<size_t>(pos % c.view.capacity);
    QuantizeRow(c_.kv_type, &keys_[pos * kw()], c.k_rows.data() + slot * c.view.k_row_bytes, static_cast<int64_t>(kw()));
    QuantizeRow(c_.kv_type, &values_[pos * vw()], c.v_rows.data() + slot * c.view.v_row_bytes, static_cast<int64_t>(vw()));
  }

  // Attend's scratch for batches of up to max_batch rows, as PlanAttentionScratch sizes it.
  struct Scratch {
    std::vector<float> scores, block_rows, parts, lse;
    AttentionScratch view;
  };
  Scratch MakeScratch(int n_threads, int max_batch) const {
    const AttentionScratchSizes sizes =
        PlanAttentionScratch(c_.n_heads / c_.n_kv_heads, c_.head_dim, c_.head_dim_v, max_batch, n_ctx_);
    const size_t threads = static_cast<size_t>(n_threads);
    Scratch s;
    s.scores.resize(threads * sizes.scores_per_thread);
    s.block_rows.resize(threads * sizes.block_rows_per_thread);
    s.parts.resize(sizes.split_parts);
    s.lse.resize(sizes.split_lse);
    s.view = {max_batch, s.scores.data(), sizes.scores_stride, sizes.scores_per_thread, s.block_rows.data(),
              sizes.block_rows_per_thread, s.parts.data(), s.lse.data()};
    return s;
  }

  void RoundRows(std::vector<float>* rows, size_t width) const {
    std::vector<uint8_t> stored(RowBytes(c_.kv_type, static_cast<int64_t>(width)));
    for (size_t r = 0; r < rows->size() / width; ++r) {
      QuantizeRow(c_.kv_type, rows->data() + r * width, stored.data(), static_cast<int64_t>(width));
      DequantizeRow(c_.kv_type, stored.data(), rows->data() + r * width, static_cast<int64_t>(width));
    }
  }

  AttentionCase c_;
  int n_ctx_ = 0;
  std::vector<float> keys_, values_, queries_;  // keys_/values_: every position, cached and new
  std::vector<int64_t> key_end_;                // [n]: where each new token's keys end
  std::vector<float> seen_keys_, seen_values_;  // the same as the cache returns them
  float scale_ = 1.0f;
};

double WorstError(const std::vector<float>& out, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = test::Worse(worst, std::fabs(out[i] - ref[i]));
  return worst;
}

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesDoublePrecisionReference) {
  AttentionFixture f(GetParam());
  const std::vector<double> ref = f.Reference();
  for (int threads : {1, 2, 3}) {
    const std::vector<float> out = f.Attend(threads);
    ASSERT_EQ(out.size(), ref.size());
    // Outputs are convex combinations of values of magnitude ~1 over up to a few thousand keys.
    EXPECT_LT(WorstError(out, ref), 2e-5) << "threads=" << threads;
  }
}

// An image's soft tokens inside a prompt attend to every token of their image, the later ones
// included; the window still bounds the keys behind (AttendArgs::key_end). Rows around the block
// stay causal. In blocks and alone (one thread: a decode-sized step splits its ranges instead).
TEST(AttentionTwoWay, ImageRowsSeeTheirWholeImage) {
  const AttentionCase cases[] = {
      {"global_after_past", 4, 2, 32, 32, 0, 0.0f, 20, 40, DType::kF32},
      {"window_shorter_than_image", 4, 1, 32, 32, 8, 0.0f, 5, 30, DType::kF16},
      {"q8_0_cache_softcap", 8, 2, 64, 64, 0, 50.0f, 300, 24, DType::kQ8_0},
  };
  for (const AttentionCase& c : cases) {
    AttentionFixture f(c, 3, c.n - 5);
    ASSERT_TRUE(f.two_way());
    const std::vector<double> ref = f.Reference();
    for (int threads : {1, 2, 3}) {
      for (int batch_rows : {0, 1}) {
        EXPECT_LT(WorstError(f.Attend(threads, batch_rows), ref), 2e-5) << c.name << " threads=" << threads;
      }
    }
    // The two-way rows differ from causal ones: the test can tell.
    EXPECT_GT(WorstError(f.Attend(2), AttentionFixture(c).Reference()), 1e-2) << c.name;
  }
}

// The key ranges depend on the positions only, and every path merges them in the same order, so
// the results are identical whatever the thread count, not just close.
TEST_P(AttentionTest, ResultDoesNotDependOnThreadCount) {
  AttentionFixture f(GetParam());
  const std::vector<float> one = f.Attend(1);
  for (int threads : {2, 3, 4}) {
    const std::vector<float> many = f.Attend(threads);
    ASSERT_EQ(many.size(), one.size());
    EXPECT_EQ(std::memcmp(many.data(), one.data(), one.size() * sizeof(float)), 0) << "threads=" << threads;
  }
}

// A prompt step attends in blocks of tokens (one pass over the keys for the block's queries): each
// token's outputs are bit for bit those of attending it alone.
TEST_P(AttentionTest, PromptBlocksMatchTokensAttendedAloneBitForBit) {
  AttentionFixture f(GetParam());
  for (int threads : {1, 2}) {
    const std::vector<float> blocks = f.Attend(threads), alone = f.Attend(threads, /*batch_rows=*/1);
    ASSERT_EQ(blocks.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      ASSERT_EQ(std::memcmp(&blocks[i], &alone[i], sizeof(float)), 0) << "value " << i << ": " << blocks[i] << " vs " << alone[i];
    }
  }
}

// A token's output is a function of its own position and the keys and values it sees: the same
// bits whether the tokens come one at a time (decode steps, whose key ranges the threads share), in
// one prompt chunk or in chunks of any sizes, on any number of threads (docs/determinism.md).
TEST_P(AttentionTest, EveryChunkingGivesTheSameBits) {
  const AttentionCase& c = GetParam();
  AttentionFixture f(c);
  const std::vector<float> alone = f.AttendInChunks(1, std::vector<int>(c.n, 1));
  std::mt19937 rng(7 + c.n);
  std::vector<std::vector<int>> chunkings = {{c.n}};
  for (int draw = 0; draw < 3; ++draw) {
    std::vector<int> chunks;
    for (int left = c.n; left > 0;) {
      const int size = std::min(left, 1 + static_cast<int>(rng() % 9));
      chunks.push_back(size);
      left -= size;
    }
    chunkings.push_back(chunks);
  }
  for (const std::vector<int>& chunks : chunkings) {
    for (int threads : {1, 2, 3}) {
      const std::vector<float> out = f.AttendInChunks(threads, chunks);
      ASSERT_EQ(out.size(), alone.size());
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(std::memcmp(&out[i], &alone[i], sizeof(float)), 0)
            << "value " << i << ": " << out[i] << " vs " << alone[i] << ", " << chunks.size() << " chunks, threads=" << threads;
      }
    }
  }
}

// Speculative verification: the batch's rows already in the view (a ring with room for them), each
// row attended as a one-token step at its position, the same for any thread count. The earlier rows
// of the batch are then read as the cache stores them, so the reference holds for the caches that
// store them exactly (f32, and f16 for these f16-exact values).
TEST_P(AttentionTest, RowsAsDecodeMatchReference) {
  const AttentionCase& c = GetParam();
  AttentionFixture f(c);
  const std::vector<float> one = f.Attend(1, 0, /*rows_as_decode=*/true);
  const std::vector<float> two = f.Attend(2, 0, /*rows_as_decode=*/true);
  ASSERT_EQ(two.size(), one.size());
  EXPECT_EQ(std::memcmp(two.data(), one.data(), one.size() * sizeof(float)), 0);
  if (c.kv_type == DType::kQ8_0 || c.kv_type == DType::kQ4_0) return;  // the batch's rows are rounded in the view
  const std::vector<double> ref = f.Reference();
  ASSERT_EQ(one.size(), ref.size());
  EXPECT_LT(WorstError(one, ref), 2e-5);
}

const AttentionCase kCases[] = {
    // Gemma 4 E2B's global layers: 8 query heads on one KV head of 512; a decode step at 1200
    // tokens splits its keys into 5 ranges.
    {"decode_one_kv_head_long_context", 8, 1, 512, 512, 0, 0.0f, 1200, 1, DType::kF16},
    {"decode_one_kv_head_long_context_f32", 8, 1, 64, 64, 0, 0.0f, 1200, 1, DType::kF32},
    // A ring of 300 that has wrapped three times; two ranges, one of them across the wrap.
    {"decode_sliding_window_ring", 4, 1, 32, 32, 300, 0.0f, 1000, 1, DType::kF32},
    // Gemma 2: four KV heads of two query heads, soft-capped logits; three ranges each.
    {"decode_softcap_four_kv_heads", 8, 4, 48, 48, 0, 50.0f, 700, 1, DType::kF16},
    // A short batch after a long past: split too, each token with its own ranges.
    {"small_batch_long_context", 4, 1, 40, 24, 0, 0.0f, 900, 3, DType::kF32},
    // A prompt: many (token, KV head) items, no split, keys from the cache and from the batch.
    {"prefill_after_past", 4, 2, 32, 32, 0, 0.0f, 50, 37, DType::kF16},
    {"prefill_sliding_window", 4, 2, 32, 32, 16, 30.0f, 20, 37, DType::kF32},
    // A first prompt: blocks of tokens from the first position, the window moving inside a block,
    // one KV head for all query heads (Gemma 3 1B) and a last block of one token.
    {"prompt_from_start_window", 4, 1, 32, 32, 6, 0.0f, 0, 33, DType::kF16},
    {"prompt_from_start_global", 8, 2, 16, 24, 0, 20.0f, 0, 30, DType::kF32},
    // The compact cache: Q8_0 rows, decode split into ranges, a ring, and a prompt after a past.
    {"decode_q8_0_cache_long_context", 8, 1, 256, 256, 0, 0.0f, 1100, 1, DType::kQ8_0},
    {"decode_q8_0_cache_ring_softcap", 4, 2, 64, 32, 300, 50.0f, 1000, 1, DType::kQ8_0},
    {"prefill_q8_0_cache_after_past", 4, 2, 32, 64, 0, 0.0f, 50, 37, DType::kQ8_0},
    // The smallest cache: Q4_0 rows, the same three shapes.
    {"decode_q4_0_cache_long_context", 8, 1, 256, 256, 0, 0.0f, 1100, 1, DType::kQ4_0},
    {"decode_q4_0_cache_ring_softcap", 4, 2, 64, 32, 300, 50.0f, 1000, 1, DType::kQ4_0},
    {"prefill_q4_0_cache_after_past", 4, 2, 32, 64, 0, 0.0f, 50, 37, DType::kQ4_0},
    // A prompt whose rows cross 4096 keys, where ranges double to 512 keys: a block's tokens may
    // cut their keys differently; and a window that slides through the ranges of a long prompt.
    {"prompt_across_range_doubling", 4, 1, 32, 32, 0, 0.0f, 4085, 24, DType::kF16},
    {"prompt_sliding_window_long", 4, 2, 32, 32, 700, 0.0f, 1000, 30, DType::kQ8_0},
    // Short context: a single range, the first token alone.
    {"decode_short_context", 8, 1, 64, 64, 0, 0.0f, 5, 1, DType::kF32},
    {"first_token", 2, 1, 16, 16, 0, 0.0f, 0, 1, DType::kF32},
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gemlet

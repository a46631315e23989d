// Attend (decoder_blocks): grouped-query attention over the KV cache and the batch's own keys,
// against a double-precision evaluation of the same formula. Decode steps at long context split
// their keys into ranges and merge the ranges' softmaxes; these cases reach that path, ring
// buffers that wrap, soft-capping, and the f16 and Q8_0 caches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "common/test_util.h"
#include "tensor/quant_blocks.h"
#include "model/decoder_blocks.h"
#include "model/model.h"

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
  explicit AttentionFixture(const AttentionCase& c) : c_(c) {
    layer_.sliding = c.window > 0;
    layer_.n_heads = c.n_heads;
    layer_.n_kv_heads = c.n_kv_heads;
    layer_.head_dim = c.head_dim;
    layer_.head_dim_v = c.head_dim_v;
    layer_.ffn_dim = 8;
    config_.n_layers = 1;
    config_.d_model = 8;
    config_.sliding_window = c.window;
    config_.layers = {layer_};
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
      RoundCachedRows(c.kv_type, &seen_keys_, static_cast<size_t>(c.n_kv_heads) * c.head_dim);
      RoundCachedRows(c.kv_type, &seen_values_, static_cast<size_t>(c.n_kv_heads) * c.head_dim_v);
    }
  }

  void RoundCachedRows(DType type, std::vector<float>* rows, size_t width) const {
    std::vector<BlockQ8_0> q8(width / kBlock32);
    std::vector<BlockQ4_0> q4(width / kBlock32);
    for (int pos = 0; pos < c_.n_past; ++pos) {
      float* row = rows->data() + pos * width;
      if (type == DType::kQ8_0) {
        QuantizeRowQ8_0(row, q8.data(), static_cast<int64_t>(width));
        DequantizeRowQ8_0(q8.data(), row, static_cast<int64_t>(width));
      } else {
        QuantizeRowQ4_0(row, q4.data(), static_cast<int64_t>(width));
        DequantizeRowQ4_0(q4.data(), row, static_cast<int64_t>(width));
      }
    }
  }

  std::vector<double> Reference() const {
    const int group = c_.n_heads / c_.n_kv_heads;
    std::vector<double> out(static_cast<size_t>(c_.n) * c_.n_heads * c_.head_dim_v, 0.0);
    for (int t = 0; t < c_.n; ++t) {
      const int64_t pos = c_.n_past + t;
      const int64_t lo = c_.window > 0 ? std::max<int64_t>(0, pos - c_.window + 1) : 0;
      for (int h = 0; h < c_.n_heads; ++h) {
        const int kv = h / group;
        const float* q = &queries_[(static_cast<size_t>(t) * c_.n_heads + h) * c_.head_dim];
        std::vector<double> logits;
        for (int64_t j = lo; j <= pos; ++j) {
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
        for (int64_t j = lo; j <= pos; ++j) {
          const float* v = &seen_values_[(static_cast<size_t>(j) * c_.n_kv_heads + kv) * c_.head_dim_v];
          const double p = logits[j - lo] / sum;
          for (int i = 0; i < c_.head_dim_v; ++i) o[i] += p * v[i];
        }
      }
    }
    return out;
  }

  // gemlet's Attend with this many threads: the cache holds the first n_past positions (a ring
  // keeps only its window of them), the batch brings the last n. workspace_rows: the workspace's
  // batch (by default n; 1 takes the prompt's tokens one at a time instead of in blocks).
  std::vector<float> Attend(int n_threads, int workspace_rows = 0) const {
    KvLayerSpec spec{c_.n_kv_heads, c_.head_dim, c_.head_dim_v, c_.window, -1};
    auto made = KvCache::Create({spec}, n_ctx_, c_.kv_type);
    EXPECT_TRUE(made.ok()) << made.message();
    KvCache& cache = *made.value();
    const size_t kw = static_cast<size_t>(c_.n_kv_heads) * c_.head_dim, vw = static_cast<size_t>(c_.n_kv_heads) * c_.head_dim_v;
    for (int pos = 0; pos < c_.n_past; ++pos) cache.Store(0, pos, &keys_[pos * kw], &values_[pos * vw]);
    cache.Advance(c_.n_past);
    Workspace ws(config_, workspace_rows > 0 ? workspace_rows : c_.n, n_ctx_, n_threads);
    KernelContext ctx(n_threads);
    std::vector<float> out(static_cast<size_t>(c_.n) * c_.n_heads * c_.head_dim_v, -1.0f);
    AttendArgs a{&layer_, 0, c_.window, queries_.data(), &keys_[c_.n_past * kw], &values_[c_.n_past * vw], c_.n,
                 c_.n_past, scale_, c_.softcap, out.data()};
    gemlet::Attend(a, cache, ws, ctx);
    return out;
  }

 private:
  AttentionCase c_;
  LayerConfig layer_;
  ModelConfig config_;
  int n_ctx_ = 0;
  std::vector<float> keys_, values_, queries_;  // keys_/values_: every position, cached and new
  std::vector<float> seen_keys_, seen_values_;  // the same as the cache returns them
  float scale_ = 1.0f;
};

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesDoublePrecisionReference) {
  AttentionFixture f(GetParam());
  const std::vector<double> ref = f.Reference();
  for (int threads : {1, 2, 3}) {
    const std::vector<float> out = f.Attend(threads);
    ASSERT_EQ(out.size(), ref.size());
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = test::Worse(worst, std::fabs(out[i] - ref[i]));
    // Outputs are convex combinations of values of magnitude ~1 over up to a few thousand keys.
    EXPECT_LT(worst, 2e-5) << "threads=" << threads;
  }
}

// The work is divided the same way whatever the thread count (the key ranges of a decode step
// depend on the context only), so the results are identical, not just close.
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
    const std::vector<float> blocks = f.Attend(threads), alone = f.Attend(threads, /*workspace_rows=*/1);
    ASSERT_EQ(blocks.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      ASSERT_EQ(std::memcmp(&blocks[i], &alone[i], sizeof(float)), 0) << "value " << i << ": " << blocks[i] << " vs " << alone[i];
    }
  }
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
    // Short context: a single range, the first token alone.
    {"decode_short_context", 8, 1, 64, 64, 0, 0.0f, 5, 1, DType::kF32},
    {"first_token", 2, 1, 16, 16, 0, 0.0f, 0, 1, DType::kF32},
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gemlet

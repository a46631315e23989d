// KV cache: memory planning, ring-buffer addressing for sliding layers, shared layers, full context.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "model/kv_cache.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace gemlet {
namespace {

TEST(KvCacheTest, PlanCountsWindowNotContextForSlidingLayers) {
  std::vector<KvLayerSpec> layers = {{2, 64, 64, 16, -1}, {2, 64, 64, 0, -1}, {2, 64, 64, 16, 0}};
  const size_t per_pos = 2 * (64 + 64) * sizeof(float);
  EXPECT_EQ(KvCache::PlanBytes(layers, 1000, DType::kF32), per_pos * (16 + 1000));
  EXPECT_EQ(KvCache::PlanBytes(layers, 1000, DType::kF16), per_pos / 2 * (16 + 1000));
  EXPECT_EQ(KvCache::PlanBytes(layers, 8, DType::kF32), per_pos * (8 + 8));  // window capped by n_ctx
  auto cache = KvCache::Create(layers, 1000, DType::kF32);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache.value()->bytes(), KvCache::PlanBytes(layers, 1000, DType::kF32));
  EXPECT_EQ(cache.value()->capacity(2), 0);
}

TEST(KvCacheTest, SlidingLayerIsARing) {
  std::vector<KvLayerSpec> layers = {{1, 2, 2, 4, -1}};
  auto made = KvCache::Create(layers, 100, DType::kF32);
  ASSERT_TRUE(made.ok());
  KvCache& cache = *made.value();
  for (int pos = 0; pos < 10; ++pos) {
    const float k[2] = {static_cast<float>(pos), 0.5f}, v[2] = {-static_cast<float>(pos), 1.5f};
    cache.Store(0, pos, k, v);
  }
  // Positions 6..9 are held; 6 and 2 share a slot, so 6 overwrote 2.
  for (int pos = 6; pos < 10; ++pos) {
    EXPECT_EQ(static_cast<const float*>(cache.KeyRow(0, pos))[0], static_cast<float>(pos));
    EXPECT_EQ(static_cast<const float*>(cache.ValueRow(0, pos))[0], -static_cast<float>(pos));
  }
  EXPECT_EQ(static_cast<const float*>(cache.KeyRow(0, 2))[0], 6.0f);
}

// The attention kernel reads a layer through KvCache::View: the same rows KeyRow/ValueRow address,
// a ring's slots included, in the cache's type as a DType.
TEST(KvCacheTest, ViewAddressesTheCachedRows) {
  const std::vector<KvLayerSpec> layers = {{2, 32, 64, 0, -1}, {1, 32, 32, 4, -1}, {1, 32, 32, 4, 1}};
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    auto made = KvCache::Create(layers, 20, type, /*ring_spare=*/2);
    ASSERT_TRUE(made.ok()) << made.message();
    const KvCache& cache = *made.value();
    for (int layer = 0; layer < 2; ++layer) {
      const KvView view = cache.View(layer);
      EXPECT_EQ(view.type, type);  // the cache's element type is a DType, as the view's
      EXPECT_EQ(view.capacity, cache.capacity(layer));
      EXPECT_EQ(view.n_kv_heads, layers[layer].n_kv_heads);
      EXPECT_EQ(view.head_dim_k, layers[layer].head_dim_k);
      EXPECT_EQ(view.head_dim_v, layers[layer].head_dim_v);
      EXPECT_EQ(view.k_row_bytes, cache.KeyRowBytes(layer));
      EXPECT_EQ(view.v_row_bytes, cache.ValueRowBytes(layer));
      for (int pos = 0; pos < 20; ++pos) {  // the ring (capacity 6) wraps three times
        EXPECT_EQ(view.KeyRow(pos), cache.KeyRow(layer, pos)) << KvTypeName(type) << " layer " << layer << " pos " << pos;
        EXPECT_EQ(view.ValueRow(pos), cache.ValueRow(layer, pos)) << KvTypeName(type) << " layer " << layer << " pos " << pos;
      }
    }
  }
}

// A prompt chunk attends to its rows rounded by RoundRows before they are stored: the rounding must
// be what Store keeps, and storing a rounded row must keep the same bytes as storing the original,
// or the chunk would have attended to other values than decoding later reads.
TEST(KvCacheTest, RoundRowsIsWhatStoreKeeps) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int n_kv_heads = 2, head_dim = 64, head_dim_v = 32, n = 40;
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    auto made = KvCache::Create({{n_kv_heads, head_dim, head_dim_v, 0, -1}}, 2 * n, type);
    ASSERT_TRUE(made.ok());
    KvCache& cache = *made.value();
    std::vector<float> k(static_cast<size_t>(n) * n_kv_heads * head_dim), v(static_cast<size_t>(n) * n_kv_heads * head_dim_v);
    for (float& x : k) x = normal(rng) * (rng() % 7 == 0 ? 30.0f : 1.0f);
    for (float& x : v) x = normal(rng);
    std::vector<float> k_round = k, v_round = v;
    cache.RoundRows(0, k_round.data(), v_round.data(), n);
    const size_t kw = static_cast<size_t>(n_kv_heads) * head_dim, vw = static_cast<size_t>(n_kv_heads) * head_dim_v;
    std::vector<float> loaded(kw);
    for (int t = 0; t < n; ++t) {
      cache.Store(0, t, &k[t * kw], &v[t * vw]);           // the originals at t
      cache.Store(0, n + t, &k_round[t * kw], &v_round[t * vw]);  // the rounded rows at n + t
      EXPECT_EQ(std::memcmp(cache.KeyRow(0, t), cache.KeyRow(0, n + t), cache.KeyRowBytes(0)), 0) << DTypeName(type) << " t=" << t;
      EXPECT_EQ(std::memcmp(cache.ValueRow(0, t), cache.ValueRow(0, n + t), cache.ValueRowBytes(0)), 0) << DTypeName(type);
      cache.LoadKey(0, t, loaded.data());
      EXPECT_EQ(std::memcmp(loaded.data(), &k_round[t * kw], kw * sizeof(float)), 0) << DTypeName(type) << " t=" << t;
    }
    if (type == DType::kF32) EXPECT_EQ(k_round, k);
    else EXPECT_NE(k_round, k);
  }
}

TEST(KvCacheTest, F16StorageRoundsToHalf) {
  auto made = KvCache::Create({{1, 2, 2, 0, -1}}, 4, DType::kF16);
  ASSERT_TRUE(made.ok());
  const float k[2] = {1.0f / 3.0f, 65504.0f}, v[2] = {-2.0f, 1e-8f};
  made.value()->Store(0, 1, k, v);
  const uint16_t* k16 = static_cast<const uint16_t*>(made.value()->KeyRow(0, 1));
  const uint16_t* v16 = static_cast<const uint16_t*>(made.value()->ValueRow(0, 1));
  EXPECT_EQ(k16[0], 0x3555);  // 1/3 in half precision
  EXPECT_EQ(k16[1], 0x7bff);  // largest finite half
  EXPECT_EQ(v16[0], 0xc000);
  EXPECT_EQ(v16[1], 0x0000);  // underflows to zero
}

TEST(KvCacheTest, Q8_0StorageIsGgufBlocks) {
  // Two KV heads of 32 keys and 64 values: 2 and 4 blocks of 34 bytes per row, half of f16 plus scales.
  const std::vector<KvLayerSpec> layers = {{2, 32, 64, 0, -1}};
  EXPECT_EQ(KvCache::RowBytes(DType::kQ8_0, 64), 2 * sizeof(BlockQ8_0));
  EXPECT_EQ(KvCache::PlanBytes(layers, 10, DType::kQ8_0), 10 * (2 + 4) * sizeof(BlockQ8_0));
  auto made = KvCache::Create(layers, 10, DType::kQ8_0);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(made.value()->bytes(), KvCache::PlanBytes(layers, 10, DType::kQ8_0));
  std::vector<float> k(64), v(128);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i) - 20.0f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 7);
  made.value()->Store(0, 3, k.data(), v.data());
  const auto* kb = static_cast<const BlockQ8_0*>(made.value()->KeyRow(0, 3));
  const auto* vb = static_cast<const BlockQ8_0*>(made.value()->ValueRow(0, 3));
  // Block 0 of the keys holds -20..11: the extreme, -20, lands on level -127. Values are off by at
  // most half a step plus the f16 rounding of the scale (127 levels x 2^-11 of it).
  EXPECT_EQ(kb[0].qs[0], -127);
  EXPECT_NEAR(F16ToF32(kb[0].d), 20.0f / 127, 1e-5f);
  std::vector<float> back(128);
  DequantizeRowQ8_0(kb, back.data(), 64);
  for (size_t i = 0; i < k.size(); ++i) EXPECT_NEAR(back[i], k[i], 0.5f * 43.0f / 127 + 0.02f) << i;
  DequantizeRowQ8_0(vb, back.data(), 128);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], 0.5f * 0.06f / 127 + 1e-4f) << i;
}

// Lowering precision under memory pressure: every held row of every layer (a wrapped ring, a global
// layer, a shared layer) becomes exactly the q8_0 blocks of its f16 values, at the same positions,
// with the positions and ring state unchanged; a q8_0 cache holds half of f16's bytes and a little.
TEST(KvCacheTest, ConvertedToQ8_0HoldsEveryRowAsItsBlocks) {
  const std::vector<KvLayerSpec> layers = {{2, 32, 32, 8, -1}, {1, 64, 32, 0, -1}, {2, 32, 32, 8, 0}};
  auto made = KvCache::Create(layers, 40, DType::kF16, /*ring_spare=*/4);
  ASSERT_TRUE(made.ok());
  KvCache& f16 = *made.value();
  std::vector<float> k(64), v(64);
  for (int pos = 0; pos < 25; ++pos) {
    for (int layer = 0; layer < 2; ++layer) {
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(pos + layer));
        v[i] = 0.1f * static_cast<float>((i * 7 + static_cast<size_t>(pos)) % 13) - 0.6f;
      }
      f16.Store(layer, pos, k.data(), v.data());
    }
  }
  f16.Advance(25);
  auto converted = f16.ConvertedTo(DType::kQ8_0);
  ASSERT_TRUE(converted.ok()) << converted.message();
  const KvCache& q8 = *converted.value();
  EXPECT_EQ(q8.type(), DType::kQ8_0);
  EXPECT_EQ(q8.n_past(), 25);
  EXPECT_EQ(q8.RollbackRoom(), f16.RollbackRoom());
  EXPECT_LT(q8.bytes(), f16.bytes() * 6 / 10);
  int rows = 0;
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(q8.OldestHeld(layer), f16.OldestHeld(layer));
    const int64_t nk = static_cast<int64_t>(layers[static_cast<size_t>(layer)].n_kv_heads) * layers[static_cast<size_t>(layer)].head_dim_k;
    for (int pos = f16.OldestHeld(layer); pos < 25; ++pos, ++rows) {
      std::vector<float> floats(static_cast<size_t>(nk));
      const uint16_t* h = static_cast<const uint16_t*>(f16.KeyRow(layer, pos));
      for (int64_t i = 0; i < nk; ++i) floats[static_cast<size_t>(i)] = F16ToF32(h[i]);
      std::vector<BlockQ8_0> want(static_cast<size_t>(nk / 32));
      QuantizeRowQ8_0(floats.data(), want.data(), nk);
      ASSERT_EQ(std::memcmp(want.data(), q8.KeyRow(layer, pos), want.size() * sizeof(BlockQ8_0)), 0)
          << "layer " << layer << " position " << pos;
    }
  }
  EXPECT_EQ(rows, (25 - 13) + 25) << "the ring holds its last 12 positions, the global layer all";
  // A head size q8_0 cannot hold is refused, and the cache is left as it was.
  auto odd = KvCache::Create({{1, 16, 16, 0, -1}}, 8, DType::kF16);
  ASSERT_TRUE(odd.ok());
  EXPECT_FALSE(odd.value()->ConvertedTo(DType::kQ8_0).ok());
}

TEST(KvCacheTest, Q8_0NeedsHeadsOfWholeBlocks) {
  auto made = KvCache::Create({{2, 16, 16, 0, -1}}, 10, DType::kQ8_0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.message().find("multiples of 32"), std::string::npos) << made.message();
  // A layer that shares another's cache stores nothing, so its shape does not matter.
  EXPECT_TRUE(KvCache::Create({{1, 32, 32, 0, -1}, {2, 16, 16, 0, 0}}, 10, DType::kQ8_0).ok());
}

TEST(KvCacheTest, FullContextIsAnErrorNotACrash) {
  auto made = KvCache::Create({{1, 2, 2, 0, -1}}, 10, DType::kF32);
  ASSERT_TRUE(made.ok());
  KvCache& cache = *made.value();
  EXPECT_TRUE(cache.CheckRoom(10).ok());
  cache.Advance(8);
  Status s = cache.CheckRoom(3);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("context is full"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("n_ctx = 10"), std::string::npos) << s.message();
  cache.Clear();
  EXPECT_TRUE(cache.CheckRoom(10).ok());
}

TEST(KvCacheTest, RejectsBadShapes) {
  EXPECT_FALSE(KvCache::Create({{1, 2, 2, 0, -1}}, 0, DType::kF32).ok());
  EXPECT_FALSE(KvCache::Create({{1, 2, 2, 0, 1}, {1, 2, 2, 0, -1}}, 4, DType::kF32).ok());  // shares forward
}

}  // namespace
// The cache reserves its whole context but commits pages only as rows are written, and gives the
// pages past what it holds back on a reset or truncation: a 4096-token context that holds 100
// tokens costs about 100 rows.
TEST(KvCacheTest, PagesAreCommittedAsTheContextGrowsAndGivenBack) {
  const std::vector<KvLayerSpec> layers = {{4, 128, 128, 0, -1}, {4, 128, 128, 64, -1}};  // global, ring of 64
  auto made = KvCache::Create(layers, 4096, DType::kF16);
  ASSERT_TRUE(made.ok());
  KvCache& c = *made.value();
  const size_t row = 4 * 128 * 2;  // one position's K (or V) in one layer
  EXPECT_EQ(c.bytes(), 2 * row * (4096 + 64));
  EXPECT_LT(c.ResidentBytes(), size_t{64} << 10) << "reserved, not committed";
  std::vector<float> k(4 * 128, 0.5f), v(4 * 128, -0.5f);
  for (int p = 0; p < 100; ++p) {
    c.Store(0, p, k.data(), v.data());
    c.Store(1, p, k.data(), v.data());
  }
  c.Advance(100);
  const size_t held = c.ResidentBytes();
  EXPECT_GE(held, 2 * row * 100) << "the rows written are resident";
  EXPECT_LE(held, 2 * row * (100 + 64) + (size_t{64} << 10)) << "and little else";
  c.SetPast(10);
  c.ReleaseUnused();
  EXPECT_LE(c.ResidentBytes(), 2 * row * (10 + 64) + (size_t{64} << 10)) << "a truncation gives pages back";
  std::vector<float> back(4 * 128);
  DequantizeRow(DType::kF16, c.KeyRow(0, 9), back.data(), 4 * 128);
  EXPECT_EQ(back[0], 0.5f) << "the rows kept are intact";
  c.Clear();
  EXPECT_LT(c.ResidentBytes(), size_t{64} << 10) << "a reset gives back every page";
}

}  // namespace gemlet

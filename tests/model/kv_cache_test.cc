// KV cache: memory planning, ring-buffer addressing for sliding layers, shared layers, full context.
#include <gtest/gtest.h>

#include "base/half.h"
#include "model/kv_cache.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace gemlet {
namespace {

TEST(KvCacheTest, PlanCountsWindowNotContextForSlidingLayers) {
  std::vector<KvLayerSpec> layers = {{2, 64, 64, 16, -1}, {2, 64, 64, 0, -1}, {2, 64, 64, 16, 0}};
  const size_t per_pos = 2 * (64 + 64) * sizeof(float);
  EXPECT_EQ(KvCache::PlanBytes(layers, 1000, KvType::kF32), per_pos * (16 + 1000));
  EXPECT_EQ(KvCache::PlanBytes(layers, 1000, KvType::kF16), per_pos / 2 * (16 + 1000));
  EXPECT_EQ(KvCache::PlanBytes(layers, 8, KvType::kF32), per_pos * (8 + 8));  // window capped by n_ctx
  auto cache = KvCache::Create(layers, 1000, KvType::kF32);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache.value()->bytes(), KvCache::PlanBytes(layers, 1000, KvType::kF32));
  EXPECT_EQ(cache.value()->capacity(2), 0);
}

TEST(KvCacheTest, SlidingLayerIsARing) {
  std::vector<KvLayerSpec> layers = {{1, 2, 2, 4, -1}};
  auto made = KvCache::Create(layers, 100, KvType::kF32);
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

TEST(KvCacheTest, F16StorageRoundsToHalf) {
  auto made = KvCache::Create({{1, 2, 2, 0, -1}}, 4, KvType::kF16);
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
  EXPECT_EQ(KvCache::RowBytes(KvType::kQ8_0, 64), 2 * sizeof(BlockQ8_0));
  EXPECT_EQ(KvCache::PlanBytes(layers, 10, KvType::kQ8_0), 10 * (2 + 4) * sizeof(BlockQ8_0));
  auto made = KvCache::Create(layers, 10, KvType::kQ8_0);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(made.value()->bytes(), KvCache::PlanBytes(layers, 10, KvType::kQ8_0));
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

TEST(KvCacheTest, Q8_0NeedsHeadsOfWholeBlocks) {
  auto made = KvCache::Create({{2, 16, 16, 0, -1}}, 10, KvType::kQ8_0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.message().find("multiples of 32"), std::string::npos) << made.message();
  // A layer that shares another's cache stores nothing, so its shape does not matter.
  EXPECT_TRUE(KvCache::Create({{1, 32, 32, 0, -1}, {2, 16, 16, 0, 0}}, 10, KvType::kQ8_0).ok());
}

TEST(KvCacheTest, FullContextIsAnErrorNotACrash) {
  auto made = KvCache::Create({{1, 2, 2, 0, -1}}, 10, KvType::kF32);
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
  EXPECT_FALSE(KvCache::Create({{1, 2, 2, 0, -1}}, 0, KvType::kF32).ok());
  EXPECT_FALSE(KvCache::Create({{1, 2, 2, 0, 1}, {1, 2, 2, 0, -1}}, 4, KvType::kF32).ok());  // shares forward
}

}  // namespace
// The cache reserves its whole context but commits pages only as rows are written, and gives the
// pages past what it holds back on a reset or truncation: a 4096-token context that holds 100
// tokens costs about 100 rows.
TEST(KvCacheTest, PagesAreCommittedAsTheContextGrowsAndGivenBack) {
  const std::vector<KvLayerSpec> layers = {{4, 128, 128, 0, -1}, {4, 128, 128, 64, -1}};  // global, ring of 64
  auto made = KvCache::Create(layers, 4096, KvType::kF16);
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

// KV cache: memory planning, ring-buffer addressing for sliding layers, shared layers, full context.
#include <gtest/gtest.h>

#include "model/kv_cache.h"

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
}  // namespace gemlet

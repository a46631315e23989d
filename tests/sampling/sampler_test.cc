// Sampler: greedy, truncation rules, penalties, and seeded reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "sampling/sampler.h"

namespace gemlet {
namespace {

SamplingOptions Greedy() {
  SamplingOptions p;
  p.temperature = 0;
  return p;
}

TEST(SamplerTest, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler s(Greedy(), 5);
  const float logits[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(s.Sample(logits), 1);
}

// Plain greedy is an argmax straight over the logits; with a bias or a penalty it goes through the
// candidate list. Both must pick the same token: the first of the highest, NaN and infinities included.
TEST(SamplerTest, GreedyArgmaxMatchesTheCandidatePath) {
  Pcg32 rng(7);
  const int n = 1001;
  std::vector<float> logits(n);
  SamplingOptions via_list = Greedy();
  via_list.logit_bias = {{n - 1, 0.0f}};  // adds nothing, but takes the candidate path
  for (int trial = 0; trial < 200; ++trial) {
    for (float& l : logits) l = static_cast<float>(static_cast<int>(rng.Next() % 16)) - 8.0f;  // many ties
    if (trial % 5 == 1) logits[rng.Next() % n] = NAN;
    if (trial % 5 == 2) logits[0] = NAN;
    if (trial % 5 == 3) logits[rng.Next() % n] = INFINITY;
    if (trial % 5 == 4) logits.assign(n, -INFINITY);
    EXPECT_EQ(Sampler(Greedy(), n).Sample(logits.data()), Sampler(via_list, n).Sample(logits.data())) << trial;
  }
}

TEST(SamplerTest, LogitBiasShiftsAndBans) {
  const float logits[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
  SamplingOptions p = Greedy();
  p.logit_bias = {{4, 0.5f}};  // 1.9 + 0.5 beats 2.0
  EXPECT_EQ(Sampler(p, 5).Sample(logits), 4);
  p.logit_bias = {{1, -100.0f}, {4, -100.0f}, {3, -100.0f}};  // banned, whatever their logits
  EXPECT_EQ(Sampler(p, 5).Sample(logits), 0);
  p.logit_bias = {{99, 50.0f}, {-3, 50.0f}};  // outside the vocabulary: ignored
  EXPECT_EQ(Sampler(p, 5).Sample(logits), 1);
  // Sampled, a banned token is never drawn.
  SamplingOptions hot;
  hot.temperature = 2.0f;
  hot.top_k = 0;
  hot.top_p = 1.0f;
  hot.logit_bias = {{1, -100.0f}, {3, -100.0f}};
  Sampler s(hot, 5);
  for (int i = 0; i < 500; ++i) {
    const int t = s.Sample(logits);
    EXPECT_TRUE(t != 1 && t != 3) << t;
  }
  // Even a row with every token banned draws one (uniformly), rather than NaN.
  hot.logit_bias = {{0, -100.0f}, {1, -100.0f}, {2, -100.0f}, {3, -100.0f}, {4, -100.0f}};
  Sampler all(hot, 5);
  const int t = all.Sample(logits);
  EXPECT_TRUE(t >= 0 && t < 5);
  hot.logit_bias = {{0, 101.0f}};
  EXPECT_FALSE(ValidateSampling(hot).empty());
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDiffers) {
  SamplingOptions p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 0.7f);
  auto draw = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p, 50);
    std::vector<int> out;
    for (int i = 0; i < 40; ++i) out.push_back(s.Sample(logits.data()));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(SamplerTest, DrawsFollowTheSoftmaxAtTemperature) {
  SamplingOptions p;
  p.temperature = 2.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.seed = 123;
  const float logits[3] = {0.0f, std::log(2.0f) * 2.0f, std::log(4.0f) * 2.0f};  // at T=2: 1 : 2 : 4
  Sampler s(p, 3);
  std::map<int, int> counts;
  const int n = 70000;
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits)];
  EXPECT_NEAR(counts[0] / double(n), 1.0 / 7, 0.01);
  EXPECT_NEAR(counts[1] / double(n), 2.0 / 7, 0.01);
  EXPECT_NEAR(counts[2] / double(n), 4.0 / 7, 0.01);
}

TEST(SamplerTest, TopKTopPAndMinPCutTheTail) {
  const float logits[4] = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto seen = [&](SamplingOptions p) {
    p.temperature = 1.0f;
    Sampler s(p, 4);
    std::set<int> ids;
    for (int i = 0; i < 3000; ++i) ids.insert(s.Sample(logits));
    return ids;
  };
  SamplingOptions k2;
  k2.top_k = 2;
  k2.top_p = 1.0f;
  EXPECT_EQ(seen(k2), (std::set<int>{0, 1}));
  SamplingOptions p80;
  p80.top_k = 0;
  p80.top_p = 0.79f;  // 0.5 + 0.3 reaches it
  EXPECT_EQ(seen(p80), (std::set<int>{0, 1}));
  SamplingOptions p81;
  p81.top_k = 0;
  p81.top_p = 0.81f;
  EXPECT_EQ(seen(p81), (std::set<int>{0, 1, 2}));
  SamplingOptions minp;
  minp.top_k = 0;
  minp.top_p = 1.0f;
  minp.min_p = 0.25f;  // keeps p >= 0.125
  EXPECT_EQ(seen(minp), (std::set<int>{0, 1, 2}));
}

TEST(SamplerTest, PenaltiesFollowTheirDefinitions) {
  // Token 0 leads by 0.5; once it has been seen, each penalty must be able to flip the choice.
  const float logits[2] = {1.5f, 1.0f};
  SamplingOptions rep = Greedy();
  rep.repeat_penalty = 1.6f;  // 1.5 / 1.6 < 1.0
  Sampler a(rep, 2);
  EXPECT_EQ(a.Sample(logits), 0);
  a.Accept(0);
  EXPECT_EQ(a.Sample(logits), 1);

  SamplingOptions freq = Greedy();
  freq.frequency_penalty = 0.3f;  // one occurrence: 1.2 > 1.0; two: 0.9 < 1.0
  Sampler b(freq, 2);
  b.Accept(0);
  EXPECT_EQ(b.Sample(logits), 0);
  b.Accept(0);
  EXPECT_EQ(b.Sample(logits), 1);

  SamplingOptions presence = Greedy();
  presence.presence_penalty = 0.6f;
  presence.repeat_last_n = 2;  // the window forgets older tokens
  Sampler c(presence, 2);
  c.Accept(0);
  EXPECT_EQ(c.Sample(logits), 1);
  c.Accept(1);
  c.Accept(1);  // token 0 has left the 2-token window
  EXPECT_EQ(c.Sample(logits), 0);
}

TEST(SamplerTest, ValidateRejectsNonsense) {
  SamplingOptions p;
  EXPECT_EQ(ValidateSampling(p), "");
  p.top_p = 0;
  EXPECT_NE(ValidateSampling(p), "");
  p = SamplingOptions();
  p.temperature = -1;
  EXPECT_NE(ValidateSampling(p), "");
  p = SamplingOptions();
  p.repeat_penalty = 0;
  EXPECT_NE(ValidateSampling(p), "");
}

}  // namespace
}  // namespace gemlet

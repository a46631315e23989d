// The comparison helpers of test_util.h: a NaN, an infinity on one side, or a reference file of the
// wrong length must fail a comparison, never pass it silently.
#include "common/test_util.h"

#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <vector>

namespace gemlet {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(MaxAbsDiff, NaNOnEitherSideIsInfinitelyFar) {
  const std::vector<float> ref = {1.0f, 2.0f, 3.0f};
  std::vector<float> got = ref;
  EXPECT_EQ(test::MaxAbsDiff(ref, got), 0.0f);
  got[1] = kNaN;
  EXPECT_EQ(test::MaxAbsDiff(ref, got), INFINITY);
  EXPECT_EQ(test::MaxAbsDiff(got, ref), INFINITY);
  // What the golden tests write: this must fail.
  EXPECT_NONFATAL_FAILURE(EXPECT_LE(test::MaxAbsDiff(ref, got), 1e-3f), "MaxAbsDiff");
}

TEST(MaxAbsDiff, OneSidedInfinityFailsAndEqualInfinitiesMatch) {
  const std::vector<float> ref = {-INFINITY, 1.0f};
  EXPECT_EQ(test::MaxAbsDiff(ref, ref), 0.0f);  // e.g. a masked logit on both sides
  EXPECT_EQ(test::MaxAbsDiff(ref, std::vector<float>{0.0f, 1.0f}), INFINITY);
}

TEST(MaxAbsDiff, VectorsOfDifferentSizesAreInfinitelyFar) {
  EXPECT_EQ(test::MaxAbsDiff(std::vector<float>{1, 2, 3}, std::vector<float>{1, 2}), INFINITY);
}

TEST(Worse, ANaNErrorIsNotSwallowedByARunningMaximum) {
  float worst = 0.5f;
  worst = test::Worse(worst, kNaN);
  worst = test::Worse(worst, 0.1f);
  EXPECT_EQ(worst, INFINITY);
  EXPECT_EQ(test::Worse(0.5, 0.25), 0.5);
  EXPECT_EQ(test::Worse(0.5, 0.75), 0.75);
}

TEST(ArgMax, ARowWithANaNHasNoArgMax) {
  const std::vector<float> row = {kNaN, 3.0f, 1.0f};
  EXPECT_EQ(test::ArgMax(row.data(), 3), -1);
  const std::vector<float> late = {0.0f, 3.0f, kNaN};
  EXPECT_EQ(test::ArgMax(late.data(), 3), -1);
  const std::vector<float> fine = {0.0f, 3.0f, 1.0f};
  EXPECT_EQ(test::ArgMax(fine.data(), 3), 1);
}

TEST(ReadF32Exactly, ShortLongAndMissingFilesFail) {
  test::TempDir tmp;
  const std::string path = tmp.File("x.f32");
  const std::vector<float> values = {1, 2, 3, 4};
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()), sizeof(float) * values.size());
  }
  std::vector<float> read;
  EXPECT_TRUE(test::ReadF32Exactly(path, 4, &read));
  EXPECT_EQ(read, values);
  EXPECT_FALSE(test::ReadF32Exactly(path, 5, &read));  // short
  EXPECT_FALSE(test::ReadF32Exactly(path, 3, &read));  // long
  EXPECT_FALSE(test::ReadF32Exactly(tmp.File("missing.f32"), 4, &read));
}

}  // namespace
}  // namespace gemlet

// f16 and bf16 conversions (base/half.h) against slow references built from first principles:
// every half exhaustively, and round-to-nearest-even on random, tie, subnormal and overflow floats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "base/half.h"
#include "tensor_test_util.h"

namespace gemlet {
namespace {

using ::gemlet::testing::Bits;

// The value of f16 bits from the definition: (-1)^s * 2^(e-15) * 1.m, 2^-14 * 0.m for e == 0, and
// infinity for e == 31 (NaN is never asked for).
double F16Value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  if (e == 31 && m == 0) return (h & 0x8000) ? -HUGE_VAL : HUGE_VAL;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// Nearest f16 by search over the ordered non-negative encodings, ties to the even encoding. The
// encoding 0x7c00 (infinity) is ranked as 65536, the next step after 65504, so that rounding past
// the largest finite value follows the IEEE rule.
uint16_t SlowF32ToF16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7e00;
  const double a = std::fabs(static_cast<double>(f));
  auto value = [](uint32_t h) { return h == 0x7c00 ? 65536.0 : F16Value(static_cast<uint16_t>(h)); };
  if (a >= 65536.0) return sign | 0x7c00;
  uint32_t lo = 0, hi = 0x7c00;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double below = a - value(lo), above = value(hi) - a;
  const uint32_t h = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | h);
}

// Nearest bf16: the two candidates around the truncation, ties to the even encoding; infinity ranks
// as 2^128, the step after the largest finite bf16.
uint16_t SlowF32ToBf16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const uint32_t abs_bits = Bits(f) & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) return static_cast<uint16_t>(sign | (abs_bits >> 16));  // inf (NaN checked apart)
  const uint32_t lo = abs_bits >> 16, hi = lo + 1;
  auto value = [](uint32_t b) { return b == 0x7f80 ? std::ldexp(1.0, 128) : static_cast<double>(Bf16ToF32(static_cast<uint16_t>(b))); };
  const double a = BitsToFloat(abs_bits);
  const double below = a - value(lo), above = value(hi) - a;
  const uint32_t b = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | b);
}

bool IsF16Nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(F16Bf16, EveryF16RoundTrips) {
  int nans = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = F16ToF32(h);
    if (IsF16Nan(h)) {
      ++nans;
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      const uint16_t back = F32ToF16(f);
      ASSERT_TRUE(IsF16Nan(back)) << std::hex << i;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), F16Value(h)) << std::hex << i;  // covers infinities too
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;
    ASSERT_EQ(F32ToF16(f), h) << std::hex << i;
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST(F16Bf16, F32ToF16EdgeCases) {
  EXPECT_EQ(F32ToF16(0.0f), 0x0000);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65519.996f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);   // the tie between 65504 and "65536" goes to even: infinity
  EXPECT_EQ(F32ToF16(-1e9f), 0xfc00);
  EXPECT_EQ(F32ToF16(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(F32ToF16(0x1p-25f), 0x0000);   // tie with zero: even
  EXPECT_EQ(F32ToF16(0x1.8p-24f), 0x0002); // 1.5 ulp: tie, to even 2
  EXPECT_EQ(F32ToF16(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(F32ToF16(0x1.ff8p-15f), 0x03ff); // the largest subnormal
  EXPECT_EQ(F32ToF16(0x1.ffcp-15f), 0x0400); // tie above it: up to the even smallest normal
  EXPECT_EQ(F32ToF16(0x1.ffap-15f), 0x03ff);
  EXPECT_EQ(F32ToF16(1.0f + 0x1p-11f), 0x3c00);  // tie, stays even
  EXPECT_EQ(F32ToF16(1.0f + 0x1.8p-10f), 0x3c02);  // tie at 1.5 ulp, up to even
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(IsF16Nan(F32ToF16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(F16Bf16, F32ToF16MatchesSlowReference) {
  std::mt19937 rng(1234);
  std::vector<float> inputs;
  for (int i = 0; i < 300000; ++i) {
    const uint32_t r = rng();
    inputs.push_back(BitsToFloat(r));  // any float: mostly overflow or underflow, NaNs too
    // A float in or near f16 range: exponent 2^-30 .. 2^17, random mantissa and sign.
    const uint32_t exponent = 127 - 30 + rng() % 48;
    inputs.push_back(BitsToFloat((r & 0x807fffffu) | (exponent << 23)));
  }
  for (int i = 0; i < 65536; ++i) {  // exact midpoints between neighbouring halves: the ties
    const uint16_t h = static_cast<uint16_t>(i);
    if ((h & 0x7fff) >= 0x7bff) continue;
    const double mid = (F16Value(h) + F16Value(static_cast<uint16_t>(h + 1))) / 2;
    inputs.push_back(static_cast<float>(mid));
    inputs.push_back(std::nextafter(static_cast<float>(mid), 0.0f));
    inputs.push_back(std::nextafter(static_cast<float>(mid), static_cast<float>(2 * mid)));
  }
  int checked = 0;
  for (float f : inputs) {
    const uint16_t got = F32ToF16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(IsF16Nan(got));
      continue;
    }
    ASSERT_EQ(got, SlowF32ToF16(f)) << "input " << f << " bits 0x" << std::hex << Bits(f);
    ++checked;
  }
  EXPECT_GT(checked, 700000);
}

TEST(F16Bf16, Bf16) {
  // Every bf16 survives bf16 -> f32 -> bf16 (NaN stays NaN).
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const float f = Bf16ToF32(b);
    ASSERT_EQ(Bits(f), static_cast<uint32_t>(b) << 16);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(f)))) << std::hex << i;
    } else {
      ASSERT_EQ(F32ToBf16(f), b) << std::hex << i;
    }
  }
  EXPECT_EQ(F32ToBf16(1.0f + 0x1p-8f), 0x3f80);          // tie, stays even
  EXPECT_EQ(F32ToBf16(1.0f + 0x1.8p-7f), 0x3f82);        // tie, up to even
  EXPECT_EQ(F32ToBf16(BitsToFloat(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to infinity
  // A signalling NaN whose payload sits in the low 16 bits must not become infinity.
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(BitsToFloat(0x7f800001u)))));
  std::mt19937 rng(99);
  for (int i = 0; i < 500000; ++i) {
    const float f = BitsToFloat(rng());
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(f))));
      continue;
    }
    ASSERT_EQ(F32ToBf16(f), SlowF32ToBf16(f)) << "bits 0x" << std::hex << Bits(f);
  }
}

}  // namespace
}  // namespace gemlet

// Helpers for the kernel tests: every table under test (the reference and each compiled Highway
// target this CPU runs), seeded random data, and float rounding bounds.
#pragma once

#include <gtest/gtest.h>

#include <cfloat>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"

namespace gemlet::test {

// Unit roundoff of float: every correctly rounded operation errs by at most u times its result.
inline constexpr double kU = FLT_EPSILON / 2;

// "ref" first, then every SIMD table this CPU runs (the NEON packed ones on aarch64, each compiled
// Highway target): all are tested, not only the best one.
inline std::vector<const KernelTable*> TablesUnderTest() {
  std::vector<const KernelTable*> tables = {&RefKernels()};
  for (const KernelTable* t : SimdTables()) tables.push_back(t);
  return tables;
}

inline std::vector<std::string> TableNames() {
  std::vector<std::string> names;
  for (const KernelTable* t : TablesUnderTest()) names.push_back(t->name);
  return names;
}

inline const KernelTable* TableNamed(const std::string& name) {
  for (const KernelTable* t : TablesUnderTest()) {
    if (name == t->name) return t;
  }
  return nullptr;
}

// Gaussian values with a few large outliers, like activations.
inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    x = normal(rng);
    if (uniform(rng) < 0.01f) x *= 10.0f;
  }
  return v;
}

// Sizes that leave every kind of tail: below, at and past vector and block widths.
inline const std::vector<int64_t>& OddSizes() {
  static const std::vector<int64_t> sizes = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1000, 1027};
  return sizes;
}

}  // namespace gemlet::test

// The int8 peak probe (kernels/peak_probe.h): one entry for each packed-GEMM table this CPU runs
// that is built on one instruction sequence, each with a positive rate.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/kernel_table.h"
#include "kernels/peak_probe.h"

namespace gemlet {
namespace {

TEST(PeakProbe, EveryIntegerTableThisCpuRunsHasARate) {
  std::set<std::string> probed;
  for (const Int8Peak& p : MeasureInt8Peaks(1, 1)) {
    EXPECT_GT(p.gmacs, 0.0) << p.kernels;
    EXPECT_GT(p.macs_per_step, 0) << p.kernels;
    EXPECT_FALSE(p.sequence.empty()) << p.kernels;
    probed.insert(p.kernels);
  }
  for (const KernelTable* t : SimdTables()) {
    const std::string name = t->name;
    if (name == "AVX3_DL" || name == "AVX2" || name == "AVX2_VNNI" || name == "NEON_DOTPROD") {
      EXPECT_EQ(probed.count(name), 1u) << name << " runs here but has no peak";
    }
  }
}

}  // namespace
}  // namespace gemlet

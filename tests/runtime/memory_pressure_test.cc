// Memory pressure: PSI files as Linux writes them, the levels apps are told, and the ladder's order.
#include "runtime/memory_pressure.h"

#include <gtest/gtest.h>

#include <fstream>

namespace gemlet::runtime {
namespace {

TEST(MemoryPressureTest, ParsesPsiAsTheKernelWritesIt) {
  auto psi = ParsePsiMemory(
      "some avg10=12.50 avg60=3.10 avg300=0.80 total=123456\n"
      "full avg10=2.25 avg60=0.90 avg300=0.10 total=4567\n");
  ASSERT_TRUE(psi.ok()) << psi.message();
  EXPECT_DOUBLE_EQ(psi->some_avg10, 12.5);
  EXPECT_DOUBLE_EQ(psi->full_avg10, 2.25);
  EXPECT_EQ(ClassifyPsi(*psi), PressureLevel::kModerate);
  EXPECT_EQ(ClassifyPsi({0, 0}), PressureLevel::kNone);
  EXPECT_EQ(ClassifyPsi({4.99, 0}), PressureLevel::kNone);
  EXPECT_EQ(ClassifyPsi({30, 0}), PressureLevel::kCritical);
  EXPECT_EQ(ClassifyPsi({6, 5}), PressureLevel::kCritical);
  // Only a "some" line (older kernels' memory files may lack "full").
  auto some = ParsePsiMemory("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(ClassifyPsi(*some), PressureLevel::kNone);
  EXPECT_FALSE(ParsePsiMemory("").ok());
  EXPECT_FALSE(ParsePsiMemory("some avg60=1.0\n").ok());
  EXPECT_FALSE(ParsePsiMemory("some avg10=abc\n").ok());
  auto missing = ReadPsiMemory("/nonexistent/pressure/memory");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/nonexistent/pressure/memory"), std::string::npos);
}

TEST(MemoryPressureTest, AppLevelsMapToModerateAndCritical) {
  EXPECT_EQ(FromTrimLevel(0), PressureLevel::kNone);
  for (int moderate : {5, 20, 40, 60}) EXPECT_EQ(FromTrimLevel(moderate), PressureLevel::kModerate) << moderate;
  for (int critical : {10, 15, 80}) EXPECT_EQ(FromTrimLevel(critical), PressureLevel::kCritical) << critical;
}

using Steps = std::vector<PressureStep>;

TEST(MemoryPressureTest, TheLadderClimbsInOrderOnceAnEpisode) {
  PressureLadder ladder;
  double t = 1000;
  EXPECT_EQ(ladder.Next(PressureLevel::kNone, t), Steps{});
  // Moderate: scratch at once, old turns only when it lasts three checks in a row.
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{PressureStep::kReleaseScratch});
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{PressureStep::kDropOldTurns});
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{});
  // Critical after that: the precision, twice (q8_0, then q4_0); then nothing is left to give.
  EXPECT_EQ(ladder.Next(PressureLevel::kCritical, t += 1), Steps{PressureStep::kLowerKvPrecision});
  EXPECT_EQ(ladder.Next(PressureLevel::kCritical, t += 1), Steps{PressureStep::kLowerKvPrecision});
  EXPECT_EQ(ladder.Next(PressureLevel::kCritical, t += 1), Steps{});
  // Calm for less than kCalmSeconds: the same episode, nothing again.
  EXPECT_EQ(ladder.Next(PressureLevel::kNone, t += 5), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kCritical, t += 1), Steps{});
  // Calm for longer: a new episode; critical takes scratch and old turns at once.
  EXPECT_EQ(ladder.Next(PressureLevel::kNone, t += PressureLadder::kCalmSeconds), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kCritical, t += 1), (Steps{PressureStep::kReleaseScratch, PressureStep::kDropOldTurns}));
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{});
  // An app's second warning with a calm check between: the next step, not the first again.
  EXPECT_EQ(ladder.Next(PressureLevel::kNone, t += 2), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kCritical, t += 1), Steps{PressureStep::kLowerKvPrecision});
}

// Moderate checks must come in a row: one calm check between them starts the count again.
TEST(MemoryPressureTest, ModeratePressureMustLastToDropTurns) {
  PressureLadder ladder;
  double t = 0;
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{PressureStep::kReleaseScratch});
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kNone, t += 1), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{});
  EXPECT_EQ(ladder.Next(PressureLevel::kModerate, t += 1), Steps{PressureStep::kDropOldTurns});
}

}  // namespace
}  // namespace gemlet::runtime

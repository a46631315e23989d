// Memory pressure: how hard the system is pressed (Linux PSI, or the level an app is told by its
// OS), and the ladder of what a conversation gives back, cheapest first.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace gemlet::runtime {

enum class PressureLevel { kNone = 0, kModerate = 1, kCritical = 2 };
const char* PressureLevelName(PressureLevel level);

// /proc/pressure/memory: the share of the last 10 s in which some (or all non-idle) tasks were
// stalled waiting for memory, in percent.
struct PsiMemory {
  double some_avg10 = 0;
  double full_avg10 = 0;
};
// Parses the file's text ("some avg10=1.23 avg60=... total=...\nfull avg10=..."); an error names
// what is missing.
Result<PsiMemory> ParsePsiMemory(const std::string& text);
Result<PsiMemory> ReadPsiMemory(const std::string& path);

// Moderate from 5% of time with some task stalled; critical from 30% (some) or 5% (full: every
// task stalled at once, the kernel reclaiming in earnest). A loaded phone or a laptop that swaps
// sits well above these; an idle system reads 0.
PressureLevel ClassifyPsi(const PsiMemory& psi);
// Android's onTrimMemory levels (iOS's memory warning is 15, running-critical): RUNNING_MODERATE,
// UI_HIDDEN, BACKGROUND and MODERATE are moderate; RUNNING_LOW, RUNNING_CRITICAL and COMPLETE are
// critical (the app is about to be killed, or will be first).
PressureLevel FromTrimLevel(int trim_level);

// What to give back, in order: the kernels' scratch and the KV pages no position uses (free, they
// regrow on demand); the oldest turns' KV (through the conversation's own dropping); a lower KV
// precision for what follows (q8_0: half of f16's bytes, at a small cost in accuracy).
enum class PressureStep { kReleaseScratch, kDropOldTurns, kLowerKvPrecision };
const char* PressureStepName(PressureStep step);

// One conversation's climb up the ladder during an episode of pressure: each rung once per episode.
// Moderate pressure releases scratch, and drops old turns only when it persists (three checks in a
// row); critical pressure takes both at once, and each critical check after that lowers the KV
// precision one step (f16 -> q8_0 -> q4_0). An episode ends after kCalmSeconds without pressure: an app's warnings come one at a
// time with calm checks between them, and two within that time are one episode.
class PressureLadder {
 public:
  static constexpr double kCalmSeconds = 30;
  // now: seconds on a monotonic clock.
  std::vector<PressureStep> Next(PressureLevel level, double now);
  int steps_taken() const { return taken_; }

 private:
  int taken_ = 0;  // steps of the ladder taken in this episode
  int moderate_checks_ = 0;
  double last_pressed_ = 0;
};

}  // namespace gemlet::runtime

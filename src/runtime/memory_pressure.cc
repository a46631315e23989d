// PSI parsing, level mapping and the pressure ladder.
#include "runtime/memory_pressure.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

namespace gemlet::runtime {

const char* PressureLevelName(PressureLevel level) {
  switch (level) {
    case PressureLevel::kModerate: return "moderate";
    case PressureLevel::kCritical: return "critical";
    default: return "none";
  }
}

const char* PressureStepName(PressureStep step) {
  switch (step) {
    case PressureStep::kReleaseScratch: return "released scratch";
    case PressureStep::kDropOldTurns: return "dropped old turns";
    default: return "lowered KV precision";
  }
}

Result<PsiMemory> ParsePsiMemory(const std::string& text) {
  PsiMemory psi;
  bool some = false, full = false;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const bool is_some = line.rfind("some ", 0) == 0, is_full = line.rfind("full ", 0) == 0;
    if (!is_some && !is_full) continue;
    const size_t at = line.find("avg10=");
    if (at == std::string::npos) return Status::Error("PSI line without avg10: '" + line + "'");
    char* end = nullptr;
    const double v = std::strtod(line.c_str() + at + 6, &end);
    if (end == line.c_str() + at + 6 || v < 0) return Status::Error("PSI avg10 is not a number: '" + line + "'");
    (is_some ? psi.some_avg10 : psi.full_avg10) = v;
    (is_some ? some : full) = true;
  }
  if (!some) return Status::Error("not a PSI file: no 'some avg10=' line");
  (void)full;  // kernels before 5.13 have no "full" line for memory in some configurations
  return psi;
}

Result<PsiMemory> ReadPsiMemory(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  Result<PsiMemory> psi = ParsePsiMemory(text.str());
  if (!psi.ok()) return Status::Error("'" + path + "': " + psi.message());
  return psi;
}

PressureLevel ClassifyPsi(const PsiMemory& psi) {
  if (psi.some_avg10 >= 30 || psi.full_avg10 >= 5) return PressureLevel::kCritical;
  if (psi.some_avg10 >= 5) return PressureLevel::kModerate;
  return PressureLevel::kNone;
}

PressureLevel FromTrimLevel(int level) {
  switch (level) {
    case 5: case 20: case 40: case 60: return PressureLevel::kModerate;  // RUNNING_MODERATE, UI_HIDDEN, BACKGROUND, MODERATE
    case 10: case 15: case 80: return PressureLevel::kCritical;          // RUNNING_LOW, RUNNING_CRITICAL, COMPLETE
    default: return PressureLevel::kNone;
  }
}

std::vector<PressureStep> PressureLadder::Next(PressureLevel level, double now) {
  std::vector<PressureStep> steps;
  if (level == PressureLevel::kNone) {
    moderate_checks_ = 0;
    if (now - last_pressed_ >= kCalmSeconds) taken_ = 0;
    return steps;
  }
  last_pressed_ = now;
  // The rungs: scratch, old turns, then the KV precision twice (f16 -> q8_0 -> q4_0).
  static constexpr PressureStep kRungs[] = {PressureStep::kReleaseScratch, PressureStep::kDropOldTurns,
                                            PressureStep::kLowerKvPrecision, PressureStep::kLowerKvPrecision};
  constexpr int kTop = static_cast<int>(std::size(kRungs));
  int reach = taken_;
  if (level == PressureLevel::kModerate) {
    ++moderate_checks_;
    reach = std::max(reach, moderate_checks_ >= 3 ? 2 : 1);
  } else {
    reach = taken_ < 2 ? 2 : std::min(taken_ + 1, kTop);  // at once to old turns; each further check one rung
  }
  for (int s = taken_; s < reach; ++s) steps.push_back(kRungs[s]);
  taken_ = reach;
  return steps;
}

}  // namespace gemlet::runtime

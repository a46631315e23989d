// The memory governor's steps (memory_governor.h), carried out on a conversation.
#include "runtime/memory_governor.h"

#include <algorithm>

#include "runtime/session.h"

namespace gemlet::runtime {

const char* MemoryActionName(MemoryAction action) {
  switch (action) {
    case MemoryAction::kReleasedScratch: return "released scratch";
    case MemoryAction::kDroppedOldTurns: return "dropped old turns";
    case MemoryAction::kLoweredKvPrecision: return "lowered KV precision";
  }
  return "?";
}

namespace {

// One rung: false when there was nothing to give back on it.
bool TakeStep(ChatSession& chat, PressureStep step, MemoryActionEvent* e) {
  Session& s = chat.session();
  if (step == PressureStep::kReleaseScratch) {
    e->action = MemoryAction::kReleasedScratch;
    e->bytes_released = s.ReleaseIdleMemory();
    e->detail = "scratch and unused KV pages";
    return true;
  }
  if (step == PressureStep::kDropOldTurns) {
    e->action = MemoryAction::kDroppedOldTurns;
    const size_t before = s.cache().ResidentBytes();
    Result<DroppedTurns> d = chat.ShedOldTurns(s.n_past() / 2);
    if (!d.ok() || d->messages == 0) return false;  // too short to shed anything
    const size_t after = s.cache().ResidentBytes();
    e->bytes_released = before > after ? before - after : 0;
    e->detail = std::to_string(d->messages) + " messages, " + std::to_string(d->tokens) + " tokens";
    return true;
  }
  e->action = MemoryAction::kLoweredKvPrecision;
  const KvCacheType from = s.options().kv_cache_type;
  if (from == KvCacheType::kQ4_0) return false;  // the lowest already
  const KvCacheType to = from == KvCacheType::kQ8_0 ? KvCacheType::kQ4_0 : KvCacheType::kQ8_0;
  const size_t before = s.cache().bytes();
  if (!s.ConvertKv(to).ok()) return false;  // head sizes blocks of 32 cannot hold
  e->bytes_released = before - std::min(before, s.cache().bytes());
  e->detail = std::string("KV ") + KvTypeName(KvDType(from)) + " -> " + KvTypeName(KvDType(to));
  return true;
}

}  // namespace

std::vector<MemoryActionEvent> ShedMemory(ChatSession& chat, PressureLadder& ladder, PressureLevel level, double now) {
  std::vector<MemoryActionEvent> events;
  for (PressureStep step : ladder.Next(level, now)) {
    MemoryActionEvent e;
    e.critical = level == PressureLevel::kCritical;
    if (TakeStep(chat, step, &e)) events.push_back(std::move(e));
  }
  return events;
}

PressureLevel PsiPressureLevel(const std::string& path, std::atomic<bool>* unreadable, std::string* note) {
  if (path.empty() || unreadable->load()) return PressureLevel::kNone;
  Result<PsiMemory> psi = ReadPsiMemory(path);
  if (!psi.ok()) {
    if (!unreadable->exchange(true)) *note = "memory pressure not watched: " + psi.message();
    return PressureLevel::kNone;
  }
  return ClassifyPsi(psi.value());
}

std::string DescribeMemoryAction(const MemoryActionEvent& e) {
  const uint64_t b = e.bytes_released;
  return std::string("memory pressure (") + (e.critical ? "critical" : "moderate") + "): " + MemoryActionName(e.action) +
         " (" + e.detail + "), gave back " +
         (b >= (1u << 20) ? std::to_string((b + (1 << 19)) >> 20) + " MiB" : std::to_string((b + 512) >> 10) + " KiB");
}

}  // namespace gemlet::runtime

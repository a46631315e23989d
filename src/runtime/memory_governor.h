// The memory governor: under pressure, a conversation climbs the ladder of memory_pressure.h and
// gives memory back (scratch and unused KV pages, its oldest turns, a lower KV precision); each
// step taken is reported as the public MemoryActionEvent.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "gemlet/types.hpp"
#include "runtime/chat.h"
#include "runtime/memory_pressure.h"

namespace gemlet::runtime {

// The ladder's next steps for `level` at time `now` (seconds, monotonic), carried out on `chat`
// between its turns. A step that finds nothing to give (too few turns to shed, the lowest KV type
// already, head sizes that blocks of 32 cannot hold) is skipped and not reported.
std::vector<MemoryActionEvent> ShedMemory(ChatSession& chat, PressureLadder& ladder, PressureLevel level, double now);

// The pressure Linux PSI shows now at `path`: none for "" or once the file proved unreadable.
// The first failure sets *unreadable and fills *note (the caller logs it once).
PressureLevel PsiPressureLevel(const std::string& path, std::atomic<bool>* unreadable, std::string* note);

// "released scratch", "dropped old turns", "lowered KV precision".
const char* MemoryActionName(MemoryAction action);
// One line for the log: "memory pressure (critical): dropped old turns (4 messages, 312 tokens),
// gave back 12 MiB".
std::string DescribeMemoryAction(const MemoryActionEvent& event);

}  // namespace gemlet::runtime

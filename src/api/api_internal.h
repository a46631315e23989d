// What the public API's objects hold (Engine::Impl) and the library's log sink: shared by the C++
// facade (gemlet.cc) and the C API (gemlet_c.cc), never seen by users.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "gemlet/gemlet.hpp"
#include "runtime/session.h"

namespace gemlet {

struct Engine::Impl {
  std::shared_ptr<const runtime::Engine> runtime;
  EngineOptions options;
  ModelInfo info;
  std::atomic<int> thread_limit{0};
  std::atomic<ThermalState> thermal{ThermalState::kNominal};
  std::atomic<MemoryPressure> pressure{MemoryPressure::kNone};
  std::atomic<bool> background{false};
};

namespace api {
// Sends a message to the app's log callback (SetLogCallback), else warnings and errors to stderr.
void Log(int level, const std::string& message);
}  // namespace api

}  // namespace gemlet

// What the public API's objects hold (Engine::Impl, Session::Impl) and the library's log sink:
// shared by the C++ facade (gemlet.cc, session.cc, conversation.cc, batch_decoder.cc) and the C API
// (gemlet_c.cc), never seen by users.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "runtime/drafting.h"
#include "runtime/generate.h"
#include "runtime/json_constraint.h"
#include "sampling/token_trie.h"
#include "runtime/session.h"

namespace gemlet {

class AudioEncoder;   // encoders/audio_encoder.h
class LoraAdapter;    // model/lora.h
class LoraStack;

struct Adapter::Impl {
  std::shared_ptr<const runtime::Engine> engine;  // the model it was checked against
  std::shared_ptr<const LoraAdapter> lora;
  std::string path;
  std::string name;
};
class VisionEncoder;  // encoders/vision_encoder.h

struct Engine::Impl {
  std::shared_ptr<const runtime::Engine> runtime;
  EngineOptions options;
  ModelInfo info;
  std::atomic<int> thread_limit{0};

  // The kernels sessions run (SetKernelOptions): the options, and the table they name.
  struct Kernels {
    KernelOptions options;
    const KernelTable* table = nullptr;
  };
  mutable std::mutex kernels_mutex;
  Kernels kernels;
  Kernels CurrentKernels() const {
    std::lock_guard<std::mutex> lock(kernels_mutex);
    return kernels;
  }
  // Before each call of a session or conversation: the engine's thread limit (the thermal
  // governor's knob) and kernels.
  void Apply(runtime::Session& session, int own_threads) const {
    const int limit = thread_limit.load();
    session.SetThreads(limit > 0 ? std::min(limit, own_threads) : own_threads);
    session.SetThermal(thermal_monitor);  // throttles below that while the device is hot
    session.ResetThermalStats();
    const Kernels k = CurrentKernels();
    session.SetKernels(*k.table, k.options);
  }

  // Every live conversation (they add and remove themselves): OnBackground saves those with a
  // state path, OnMemoryWarning has the idle ones give back memory.
  std::mutex conversations_mutex;
  std::vector<Conversation::Impl*> conversations;
  // Linux PSI (EngineOptions::memory_pressure_path) could not be read: said once, not read again.
  mutable std::atomic<bool> psi_unreadable{false};

  // Structured output's view of the vocabulary (16 MiB for 262k tokens): built on first use.
  runtime::TokenVocabularyCache token_vocabulary;
  // What constrains a request's sampling (response_format, tool_choice); null for free text.
  Result<std::unique_ptr<runtime::TokenConstraint>> Constraint(const GenerateOptions& options, int n_ctx) {
    return runtime::MakeOutputConstraint(*runtime, options, n_ctx, token_vocabulary);
  }

  std::atomic<ThermalState> thermal{ThermalState::kNominal};
  std::shared_ptr<runtime::ThermalMonitor> thermal_monitor;  // the thermal governor (runtime/thermal.h)
  std::atomic<MemoryPressure> pressure{MemoryPressure::kNone};
  std::atomic<bool> background{false};

  // EngineOptions::mmproj_path's towers (null: none), shared so that this header needs only their
  // names.
  std::shared_ptr<const VisionEncoder> vision;
  std::shared_ptr<const AudioEncoder> audio;
};

// A draft model's session beside a target's (SessionOptions::draft_model): the draft engine and its
// cache, sized as the target's; or, for Gemma 4's own drafter (a gemma4-assistant file), the drafter
// over the target's cache.
struct DraftSession {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<runtime::Session> session;
  std::unique_ptr<runtime::AssistantDrafter> assistant;
};

struct Session::Impl {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<runtime::Session> session;
  DraftSession draft;  // empty without SessionOptions::draft_model
  std::atomic<bool> cancel{false};
  int own_threads = 1;
  DType kv_type = DType::kF16;
  std::vector<AdapterUse> adapters;  // SetAdapters' list, as given

  // Before each call: the engine's threads and kernels, and a fresh cancel flag (a Cancel() meant
  // for an earlier call must not stop this one).
  void BeginCall() {
    engine->impl().Apply(*session, own_threads);
    if (draft.session) draft.engine->impl().Apply(*draft.session, own_threads);
    cancel.store(false);
  }
};

namespace api {
// options.draft_model's session for a target session `target` (none without one): refused when its
// vocabulary is not the target engine's, token for token.
Result<DraftSession> MakeDraftSession(const Engine& engine, const SessionOptions& options, const runtime::Session& target);
// kInvalidArgument with Validate's message when the options are not valid.
Status CheckGenerateOptions(const GenerateOptions& o);
Status CheckSessionOptions(const SessionOptions& o);
// A session's threads default to its engine's (which default to every hardware thread).
SessionOptions WithEngineThreads(SessionOptions o, int engine_threads);
// A runtime session on `engine` with its current kernels.
Result<std::unique_ptr<runtime::Session>> CreateRuntimeSession(const Engine& engine, const SessionOptions& o);
// The kernels these options name (validated: Validate(KernelOptions) first).
Engine::Impl::Kernels ResolveKernels(const KernelOptions& o);
// Opens options.mmproj_path's towers into impl (nothing without one): refused when they do not fit
// the model (another family, another width). Sets info's capabilities.
Status LoadTowers(Engine::Impl& impl);
// The runtime's stack for a list of adapters (null for none): refused for an adapter of another
// engine or a non-finite scale.
Result<std::shared_ptr<const LoraStack>> MakeLoraStack(const Engine& engine, std::span<const AdapterUse> adapters);
// Sends a message to the app's log callback (SetLogCallback), else warnings and errors to stderr.
void Log(int level, const std::string& message);
}  // namespace api

}  // namespace gemlet

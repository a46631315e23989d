// What the public API's objects hold (Engine::Impl) and the library's log sink: shared by the C++
// facade (gemlet.cc) and the C API (gemlet_c.cc), never seen by users.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "runtime/generate.h"
#include "sampling/token_trie.h"
#include "runtime/session.h"

namespace gemlet {

struct Engine::Impl {
  std::shared_ptr<const runtime::Engine> runtime;
  EngineOptions options;
  ModelInfo info;
  std::atomic<int> thread_limit{0};

  // The kernels sessions run (SetKernelOptions): the options as given, and resolved.
  struct Kernels {
    KernelOptions options;
    const KernelTable* table = nullptr;
    KernelTuning tuning;
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
    session.SetKernels(*k.table, k.tuning);
  }

  // Every live conversation (they add and remove themselves): OnBackground saves those with a
  // state path, OnMemoryWarning has the idle ones give back memory.
  std::mutex conversations_mutex;
  std::vector<Conversation::Impl*> conversations;
  // Linux PSI (EngineOptions::memory_pressure_path) could not be read: said once, not read again.
  mutable std::atomic<bool> psi_unreadable{false};

  // Structured output's view of the vocabulary (16 MiB for 262k tokens): built on first use.
  std::mutex token_vocabulary_mutex;
  std::shared_ptr<const TokenVocabulary> token_vocabulary;

  std::atomic<ThermalState> thermal{ThermalState::kNominal};
  std::shared_ptr<runtime::ThermalMonitor> thermal_monitor;  // the thermal governor (runtime/thermal.h)
  std::atomic<MemoryPressure> pressure{MemoryPressure::kNone};
  std::atomic<bool> background{false};
};

// A draft model's session beside a target's (SessionOptions::draft_model): the draft engine and its
// cache, sized as the target's.
struct DraftSession {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<runtime::Session> session;
};

struct Session::Impl {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<runtime::Session> session;
  DraftSession draft;  // empty without SessionOptions::draft_model
  std::atomic<bool> cancel{false};
  int own_threads = 1;
  KvType kv_type = KvType::kF16;

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
// Public options and results to and from the runtime's (gemlet.cc).
SamplingParams ToRuntime(const SamplingOptions& s);
runtime::GenerateOptions ToRuntime(const GenerateOptions& o, const std::atomic<bool>* cancel);
Status CheckGenerateOptions(const GenerateOptions& o);
runtime::TextSink ToSink(const StreamCallback& on_text);
// options.response_format's constraint (nullptr for free text), for a session of n_ctx tokens.
Result<std::unique_ptr<runtime::TokenConstraint>> MakeConstraint(Engine::Impl& engine, const GenerateOptions& options,
                                                                 int n_ctx);
// Prefix reuse (Session::Complete, BatchDecoder): keeps the longest prefix of `prompt` the cache
// holds, less the prompt's last token (its logits pick the first answer token), and forgets the
// rest. Returns how many tokens were kept.
Result<size_t> KeepCachedPrefix(runtime::Session& session, std::span<const int32_t> prompt);
// `cached`: prompt tokens reused from the cache (added to the stats' prompt tokens).
Reply ToReply(const runtime::GenerateResult& r, int cached, const runtime::Session& session);

inline KvType ToKvType(KvCacheType type) {
  switch (type) {
    case KvCacheType::kF32: return KvType::kF32;
    case KvCacheType::kQ8_0: return KvType::kQ8_0;
    case KvCacheType::kQ4_0: return KvType::kQ4_0;
    default: return KvType::kF16;
  }
}
// Sends a message to the app's log callback (SetLogCallback), else warnings and errors to stderr.
void Log(int level, const std::string& message);
}  // namespace api

}  // namespace gemlet

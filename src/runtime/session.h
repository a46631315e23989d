// Engine (immutable weights, shareable across sessions) and Session (KV cache, workspace, threads).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gemlet/types.hpp"
#include "kernels/kernel_context.h"
#include "kernels/packed_cache.h"
#include "model/assistant.h"
#include "model/kv_cache.h"
#include "model/lora.h"
#include "model/model.h"
#include "runtime/chat_format.h"
#include "runtime/thermal.h"
#include "tokenizer/tokenizer.h"

namespace gemlet::runtime {

class BatchWorkspace;  // runtime/batch.h

// Separates the model identity from the adapters' key in a saved state's identity field.
inline constexpr const char* kLoraIdentityTag = "|lora:";

// The immutable half: mapped weights, tokenizer and chat format. Shared by any number of sessions.
class Engine {
 public:
  static Result<std::shared_ptr<const Engine>> Load(const std::string& path);
  // A GGUF stored inside another file: `length` bytes from `offset` of fd (not kept).
  static Result<std::shared_ptr<const Engine>> LoadRange(int fd, uint64_t offset, uint64_t length);
  const Model& model() const { return *model_; }
  const ModelConfig& config() const { return model_->config(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  ChatStyle chat_style() const { return chat_style_; }
  // Token ids that end a model turn: EOS, <end_of_turn> / <turn|> where the vocabulary has them.
  const std::vector<int32_t>& end_of_generation() const { return end_of_generation_; }
  bool IsEndOfGeneration(int32_t id) const;
  // Wall time of Load, and of its first part: mapping the file, validating it and binding the
  // weights (the rest builds the tokenizer's tables).
  double load_seconds() const { return load_seconds_; }
  double model_map_seconds() const { return model_map_seconds_; }

  // The model file's identity for caches keyed by it: its size, modification time, inode, and a
  // hash of its first and last MiB (read once at load: never the gigabytes between).
  const std::string& identity() const { return identity_; }
  // Maps the packed-weight cache for these kernels from cache_dir (building it first when missing
  // or stale: kernels/packed_cache.h). Slots packed already keep their copies. Thread-safe against
  // evaluations (a matrix packs once, whoever gets to it first), but meant for start-up.
  Result<PackedCacheOutcome> UsePackedCache(const std::string& cache_dir, const KernelTable& kernels,
                                            int n_threads) const;

 private:
  Engine() = default;
  static Result<std::shared_ptr<const Engine>> FromModel(std::unique_ptr<Model> model, const std::string& path,
                                                         std::chrono::steady_clock::time_point start,
                                                         std::string identity, std::string origin);
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatStyle chat_style_ = ChatStyle::kGemma;
  std::vector<int32_t> end_of_generation_;
  double load_seconds_ = 0;
  double model_map_seconds_ = 0;
  std::string identity_;
  std::string origin_;  // the model file's path (empty for a range of a descriptor)
};

// Sessions take the public SessionOptions (gemlet/types.hpp) as they are; its draft_model and
// progress are the facade's (runtime sessions know no public Engine).

// The defaults, each resolved here and nowhere else: threads (0: every hardware thread), the
// context (0: the model's training context, capped at 4096) and the KV cache's element type.
int ResolveThreads(int n_threads);
int ResolveContext(const ModelConfig& config, int n_ctx);
// The public KvCacheType's values are the DType's (static_asserts in session.cc).
DType KvDType(KvCacheType type);

class Session {
 public:
  // One forward step over several sessions (runtime/batch.h) appends to each as Evaluate would.
  friend Status EvaluateBatch(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens,
                              BatchWorkspace& ws, float* logits, const std::atomic<bool>* stop);

  // kernels: null for BestKernels(); the facade sets the engine's before every call (SetKernels).
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const Engine> engine, const SessionOptions& options,
                                                 const KernelTable* kernels = nullptr, const KernelOptions& kernel_options = {});
  // The KV bytes a session with these options will allocate (report before creating). They need
  // the model only (its layers), not an engine: a planner may ask before the tokenizer is built.
  static size_t PlanKvBytes(const Model& model, const SessionOptions& options);
  // The workspace such a session allocates (its kernels' scratch grows on top, with use).
  static size_t PlanActivationBytes(const Model& model, const SessionOptions& options);
  // options with the defaults filled in (n_ctx, threads, batch), as Create uses them.
  static SessionOptions Resolved(const Model& model, const SessionOptions& options);
  // What the session was created with, resolved (and its KV type now: ConvertKv changes it);
  // without the facade's progress and draft_model.
  const SessionOptions& options() const { return options_; }

  // Evaluates tokens after those already in the cache. logits receives [n, n_vocab] rows when
  // all_logits, else the last row only; it may be nullptr to only fill the cache.
  // hidden, when given, receives the final-normed hidden state of each row that gets logits,
  // [those rows, d_model] (what Gemma 4's drafter reads: model/assistant.h); hidden without logits
  // is refused (kInvalidArgument).
  Status Evaluate(const std::vector<int32_t>& tokens, float* logits, bool all_logits, float* hidden = nullptr);
  // The same with images or audio among the tokens: each span's rows take its media's embeddings
  // (positions count from tokens' first; CheckMediaSpans). A span is evaluated whole, in one chunk.
  Status Evaluate(const std::vector<int32_t>& tokens, std::span<const MediaSpan> media, float* logits, bool all_logits,
                  float* hidden = nullptr);
  // Evaluate with every position's logits, each as decoding that token alone would give them, bit
  // for bit (Workspace::rows_as_decode): speculative verification. At most 8 tokens (the rows the
  // matmuls run through the decode kernels) and rollback_room().
  Status EvaluateAsDecode(const std::vector<int32_t>& tokens, float* logits, float* hidden = nullptr);
  // One step of Gemma 4's drafter (Assistant::Step) over this session's cache, on its kernels and
  // threads: `token` at position n_past() (>= 1), not evaluated here.
  void DraftStep(const Assistant& drafter, int32_t token, const float* state, AssistantScratch& scratch) {
    drafter.Step(engine_->model(), *cache_, token, state, cache_->n_past(), scratch, *ctx_);
  }

  // Called after each chunk of a long evaluation with (tokens done, total): progress displays.
  void SetProgress(std::function<void(int, int)> progress) { progress_ = std::move(progress); }
  // A flag another thread may set to stop an evaluation between layers (nullptr: none). A stopped
  // Evaluate returns kCancelled and keeps the chunks it finished; the session stays usable.
  void SetStopFlag(const std::atomic<bool>* stop) { stop_ = stop; }

  // Forgets every token from position n on (from the start of the media span n falls in: media is
  // kept whole or not at all). Within rollback_room() of the end nothing is evaluated again; further back, sliding-window layers whose ring has overwritten positions needed before n
  // are refilled by re-evaluating the history up to n.
  Status Truncate(int n);
  // Removes tokens [begin, begin + count) from the cache (a conversation dropping its oldest turns):
  // the later ones move down and their keys are re-rotated to their new positions, nothing is
  // evaluated (KvCache::Discard). When the rings cannot keep up (the kept tail is shorter than a
  // ring, or a stopped evaluation left them stale), the kept history is evaluated again instead.
  // Returns the tokens evaluated again: 0 when the cache was shifted in place. Media inside the
  // range goes with it; a range that cuts a media span in two is refused.
  Result<int> Discard(int begin, int count);
  // Suspend and resume: writes the tokens and the KV rows the cache holds (only those: not the
  // whole preallocated cache), with `extra` (the caller's own state, e.g. a conversation's
  // messages), to a versioned file with a checksum, bound to the model file's identity; written
  // under a temporary name and renamed. LoadState maps it back with nothing evaluated and returns
  // `extra`. A truncated, corrupted, other-model or other-layout file is refused with one line and
  // leaves the session as it was. The cache type and layer layout must match; n_ctx may differ as
  // long as the saved tokens fit.
  Status SaveState(const std::string& path, const std::string& extra) const;
  Result<std::string> LoadState(const std::string& path);
  // Tokens at the end that Truncate takes back without re-evaluating (at least rollback_tokens).
  int rollback_room() const { return cache_->RollbackRoom(); }

  // Runs later evaluations with these LoRA adapters (null or empty: the base alone). The cache's
  // K/V were computed under the adapters before: when the new stack's key differs (another adapter,
  // order or scale) the session is Reset, since keeping them would mix two models' K/V. Returns
  // whether it was. Not during an evaluation.
  bool SetAdapters(std::shared_ptr<const LoraStack> stack);
  const LoraStack* adapters() const { return lora_.get(); }
  // The key the cache's K/V are computed under ("" for the base): what prompt reuse across
  // sessions must match besides the tokens.
  const std::string& adapters_key() const;
  int ring_spare() const { return ring_spare_; }  // SessionOptions::rollback_tokens

  const Engine& engine() const { return *engine_; }
  const std::shared_ptr<const Engine>& shared_engine() const { return engine_; }
  int n_past() const { return cache_->n_past(); }
  int n_ctx() const { return cache_->n_ctx(); }
  const KvCache& cache() const { return *cache_; }
  const std::vector<int32_t>& history() const { return history_; }  // the tokens held in the cache
  // The images and audio among them, positions absolute, in order.
  const std::vector<MediaSpan>& media() const { return media_; }
  void Reset() {
    cache_->Clear();
    history_.clear();
    media_.clear();
    rings_stale_ = false;
  }
  int n_threads() const { return ctx_->n_threads(); }
  // Runs later evaluations on n threads (1 up to the count the session was created with: its
  // workspace is sized for that many). Not during an evaluation.
  void SetThreads(int n);
  // The engine's thermal governor (nullptr: none). While it throttles, evaluations run on fewer
  // threads, in shorter prefill chunks, and sleep between steps to keep its duty (thermal.h).
  void SetThermal(const std::shared_ptr<ThermalMonitor>& monitor) { thermal_ = monitor; }
  // What the governor did to this session's evaluations since the last ResetThermalStats.
  const GenerationStats::Thermal& thermal_stats() const { return thermal_stats_; }
  void ResetThermalStats() { thermal_stats_ = {}; }
  // Runs later evaluations with these kernels, tuned so. Not during an evaluation.
  void SetKernels(const KernelTable& kernels, const KernelOptions& options) { ctx_->SetKernels(kernels, options); }
  const KernelTable& kernels() const { return ctx_->kernels(); }
  const KernelOptions& kernel_options() const { return ctx_->options(); }
  // Under memory pressure, between evaluations: frees the kernels' scratch (regrown by the next
  // call) and gives back the KV pages past n_past. Returns the bytes given back.
  size_t ReleaseIdleMemory();
  // Stores the KV cache as `type` from now on, the held rows converted (q8_0: half of f16's
  // bytes). The next logits change by that rounding. Not during an evaluation.
  Status ConvertKv(KvCacheType type);

  // Tokens evaluated by this session so far (prompt and generated), for stats and tests.
  int64_t tokens_evaluated() const { return tokens_evaluated_; }
  // The workspace (preallocated) and the kernels' scratch (grown to the largest call so far): what
  // memory reports count as the session's activations.
  size_t activation_bytes() const { return workspace_->Bytes() + ctx_->scratch().Bytes(); }

 private:
  Session() = default;
  std::vector<int32_t> history_;
  std::vector<MediaSpan> media_;
  int64_t tokens_evaluated_ = 0;
  // Where a cut at n lands when media must stay whole: the start of the span n falls inside, else n.
  int CutBefore(int n) const;
  // Re-evaluates positions [0, n) and drops everything after: the rings' slots for them may hold
  // later positions.
  Status RefillRings(int n);

  // Evaluate under the thermal governor: one chunk at a time, each planned and paced.
  Status ForwardThrottled(const std::vector<int32_t>& tokens, float* logits, bool all_logits);
  // Sleeps `seconds` in short slices, returning early when a stop is requested.
  void Pace(double seconds);

  std::shared_ptr<ThermalMonitor> thermal_;
  ThrottlePlanner planner_;
  GenerationStats::Thermal thermal_stats_;
  int base_threads_ = 1;  // SetThreads' count: what the governor throttles down from
  std::function<void(int, int)> progress_;
  const std::atomic<bool>* stop_ = nullptr;
  bool rings_stale_ = false;  // a stopped evaluation may have overwritten ring slots
  bool keep_guard_ = false;   // EvaluateAsDecode's own Evaluate: the draft guard it set stays
  int max_threads_ = 1;  // the workspace's thread count
  int ring_spare_ = 0;
  SessionOptions options_;
  // The engine's identity, and the adapters' key when there are any: what a saved state is bound to.
  std::string StateIdentity() const;
  std::shared_ptr<const LoraStack> lora_;
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Workspace> workspace_;
  std::unique_ptr<KernelContext> ctx_;
};

}  // namespace gemlet::runtime

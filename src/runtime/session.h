// Engine (immutable weights, shareable across sessions) and Session (KV cache, workspace, threads).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace gemlet {

class Engine {
 public:
  static Result<std::shared_ptr<const Engine>> Load(const std::string& path);
  const Model& model() const { return *model_; }
  const ModelConfig& config() const { return model_->config(); }

 private:
  explicit Engine(std::unique_ptr<Model> model) : model_(std::move(model)) {}
  std::unique_ptr<Model> model_;
};

struct SessionOptions {
  int n_ctx = 0;          // 0: the model's training context, capped at 4096
  int n_threads = 0;      // 0: all hardware threads
  int max_batch = 512;    // prompt tokens evaluated per forward chunk
  KvType kv_type = KvType::kF16;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const Engine> engine, const SessionOptions& options);
  // The KV bytes a session with these options will allocate (report before creating).
  static size_t PlanKvBytes(const Engine& engine, const SessionOptions& options);

  // Evaluates tokens after those already in the cache. logits receives [n, n_vocab] rows when
  // all_logits, else the last row only; it may be nullptr to only fill the cache.
  Status Evaluate(const std::vector<int32_t>& tokens, float* logits, bool all_logits);

  const Engine& engine() const { return *engine_; }
  int n_past() const { return cache_->n_past(); }
  int n_ctx() const { return cache_->n_ctx(); }
  const KvCache& cache() const { return *cache_; }
  void Reset() { cache_->Clear(); }
  int n_threads() const { return pool_->size(); }

 private:
  Session() = default;
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Workspace> workspace_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace gemlet

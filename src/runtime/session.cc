// Engine loading and the Session's evaluation entry point.
#include "runtime/session.h"

#include <algorithm>
#include <thread>

namespace gemlet {

Result<std::shared_ptr<const Engine>> Engine::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFile(path));
  return std::shared_ptr<const Engine>(new Engine(std::move(model)));
}

namespace {
SessionOptions Resolve(const Engine& engine, SessionOptions o) {
  if (o.n_ctx <= 0) o.n_ctx = std::min(engine.config().n_ctx_train > 0 ? engine.config().n_ctx_train : 4096, 4096);
  if (o.n_threads <= 0) o.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.max_batch = std::clamp(o.max_batch, 1, o.n_ctx);
  return o;
}
}  // namespace

size_t Session::PlanKvBytes(const Engine& engine, const SessionOptions& options) {
  const SessionOptions o = Resolve(engine, options);
  return KvCache::PlanBytes(engine.model().KvLayout(), o.n_ctx, o.kv_type);
}

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Engine> engine, const SessionOptions& options) {
  const SessionOptions o = Resolve(*engine, options);
  std::unique_ptr<Session> s(new Session());
  ASSIGN_OR_RETURN(s->cache_, KvCache::Create(engine->model().KvLayout(), o.n_ctx, o.kv_type));
  s->workspace_ = std::make_unique<Workspace>(engine->config(), o.max_batch, o.n_ctx, o.n_threads,
                                                engine->model().ExtraScratchFloats(o.max_batch));
  s->pool_ = std::make_unique<ThreadPool>(o.n_threads);
  s->engine_ = std::move(engine);
  return s;
}

Status Session::Evaluate(const std::vector<int32_t>& tokens, float* logits, bool all_logits) {
  return engine_->model().Forward(tokens.data(), static_cast<int>(tokens.size()), *cache_, *workspace_, *pool_, logits,
                                  all_logits);
}

}  // namespace gemlet

// Batched evaluation of several sessions in one forward step.
#include "runtime/batch.h"

#include <algorithm>
#include <string>

namespace gemlet::runtime {

BatchOptions BatchOptions::Like(const Session& session, int max_rows) {
  BatchOptions o;
  o.max_rows = max_rows;
  o.n_ctx = session.n_ctx();
  o.n_threads = session.n_threads();
  o.kernels = &session.kernels();
  o.kernel_options = session.kernel_options();
  return o;
}

namespace {
// n_ctx and threads as a session resolves them; max_rows at least 1.
BatchOptions Resolve(const Model& model, BatchOptions o) {
  o.n_ctx = ResolveContext(model.config(), o.n_ctx);
  o.n_threads = ResolveThreads(o.n_threads);
  o.max_rows = std::max(1, o.max_rows);
  return o;
}
}  // namespace

size_t BatchWorkspace::PlanBytes(const Model& model, const BatchOptions& options) {
  const BatchOptions o = Resolve(model, options);
  return Workspace::PlanBytes(model.config(), o.max_rows, o.n_ctx, o.n_threads, model.ExtraScratchFloats(o.max_rows));
}

Result<std::unique_ptr<BatchWorkspace>> BatchWorkspace::Create(std::shared_ptr<const Engine> engine,
                                                               const BatchOptions& options) {
  if (!engine) return Status::Error("a batch workspace needs an engine");
  const Model& model = engine->model();
  const BatchOptions o = Resolve(model, options);
  std::unique_ptr<BatchWorkspace> ws(new BatchWorkspace());
  ws->workspace_ = std::make_unique<Workspace>(model.config(), o.max_rows, o.n_ctx, o.n_threads,
                                               model.ExtraScratchFloats(o.max_rows));
  ws->ctx_ = std::make_unique<KernelContext>(o.n_threads, o.kernels, o.kernel_options);
  ws->chunks_.resize(static_cast<size_t>(o.max_rows));
  ws->engine_ = std::move(engine);
  return ws;
}

Status EvaluateBatch(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens,
                     BatchWorkspace& ws, float* logits, const std::atomic<bool>* stop) {
  if (sessions.size() != tokens.size()) {
    return Status::Error(std::to_string(sessions.size()) + " sessions but " + std::to_string(tokens.size()) +
                         " token lists");
  }
  if (sessions.empty()) return Status::Error("nothing to evaluate: no sessions");
  if (sessions.size() > ws.chunks_.size()) {
    return Status::Error(std::to_string(sessions.size()) + " sessions in one step exceed the batch workspace's " +
                         std::to_string(ws.chunks_.size()) + " rows");
  }
  const Model& model = ws.engine().model();
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Session* s = sessions[i];
    if (s == nullptr) return Status::Error("session " + std::to_string(i) + " is null");
    if (&s->engine().model() != &model) {
      return Status::Error("session " + std::to_string(i) + " runs another model than the batch workspace's");
    }
    for (size_t j = 0; j < i; ++j) {
      if (sessions[j] == s) {
        return Status::Error("sessions " + std::to_string(j) + " and " + std::to_string(i) + " are the same session");
      }
    }
    s->cache_->DropGuard();  // drafts an earlier verification kept stand
    ws.chunks_[i] = {tokens[i].data(), static_cast<int>(tokens[i].size()), s->cache_.get()};
  }
  const std::span<const SequenceChunk> chunks(ws.chunks_.data(), sessions.size());
  RETURN_IF_ERROR(model.CheckBatch(chunks, *ws.workspace_));

  // What Evaluate does first: a session whose last evaluation was stopped refills its rings (on its
  // own workspace; this changes none of what it holds).
  for (Session* s : sessions) {
    if (s->rings_stale_) RETURN_IF_ERROR(s->RefillRings(s->cache_->n_past()));
  }
  ws.workspace_->stop = stop;
  const Status status = model.ForwardBatch(chunks, *ws.workspace_, *ws.ctx_, logits);
  ws.workspace_->stop = nullptr;
  for (size_t i = 0; i < sessions.size(); ++i) {
    Session& s = *sessions[i];
    if (status.ok()) {
      s.history_.insert(s.history_.end(), tokens[i].begin(), tokens[i].end());
      s.tokens_evaluated_ += static_cast<int64_t>(tokens[i].size());
    } else if (status.code() == StatusCode::kCancelled) {
      // Nothing advanced, but the step may have written over ring slots of positions still held.
      s.rings_stale_ = s.cache_->RollbackRoom() < s.cache_->n_ctx();
    }
  }
  return status;
}

}  // namespace gemlet::runtime

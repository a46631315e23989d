// Batched evaluation: one forward step over several sessions' tokens, so that a server decoding N
// conversations reads every weight once per step instead of N times (Model::ForwardBatch).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/kernel_context.h"
#include "model/model.h"
#include "runtime/session.h"

namespace gemlet::runtime {

struct BatchOptions {
  int max_rows = 16;   // tokens of all sessions together in one EvaluateBatch call
  int n_ctx = 0;       // the longest context of the sessions it serves (0: as SessionOptions resolves it)
  int n_threads = 0;   // 0: all hardware threads
  const KernelTable* kernels = nullptr;  // null: BestKernels()
  KernelOptions kernel_options{};

  // A session's threads, kernels and their options and context, with room for max_rows tokens per step.
  static BatchOptions Like(const Session& session, int max_rows);
};

// What EvaluateBatch computes with: activations for max_rows rows whose caches hold up to n_ctx
// positions, and its own threads and kernels (the sessions' are not used during a batch). The
// caller makes one and reuses it for every step: a step allocates nothing.
class BatchWorkspace {
 public:
  static Result<std::unique_ptr<BatchWorkspace>> Create(std::shared_ptr<const Engine> engine,
                                                        const BatchOptions& options);
  // The bytes Create allocates (its kernels' scratch grows on top, with use).
  static size_t PlanBytes(const Model& model, const BatchOptions& options);

  const Engine& engine() const { return *engine_; }
  int max_rows() const { return workspace_->max_batch; }
  int n_ctx() const { return workspace_->n_ctx; }
  int n_threads() const { return ctx_->n_threads(); }
  // The workspace and the kernels' scratch so far: what a memory report counts.
  size_t Bytes() const { return workspace_->Bytes() + ctx_->scratch().Bytes(); }

 private:
  BatchWorkspace() = default;
  friend Status EvaluateBatch(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens,
                              BatchWorkspace& ws, float* logits, const std::atomic<bool>* stop);

  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<Workspace> workspace_;
  std::unique_ptr<KernelContext> ctx_;
  std::vector<SequenceChunk> chunks_;  // [max_rows]: a session has at least one token
};

// Evaluates tokens[i] after what sessions[i] holds, for every i, in one forward step: each session's
// cache and history get its tokens exactly as sessions[i]->Evaluate(tokens[i]) would give them, and
// logits (may be null) receives [sessions.size(), n_vocab]: each session's last row.
//   * The sessions must be distinct, of ws's engine, with contexts of at most ws.n_ctx(); every
//     tokens[i] must be non-empty, in the vocabulary and fit its session's context; all of them
//     together at most ws.max_rows() (nothing is split: a long prompt goes through
//     Session::Evaluate, or in pieces over several steps). A request that breaks any of these is
//     refused before anything is evaluated and changes no session.
//   * stop: one flag for the whole step (the sessions' own SetStopFlag flags are not read). When it
//     is set the step ends between layers with kCancelled and no session advances: each keeps what
//     it held, as after a stopped Evaluate (its rings are refilled before its next evaluation).
//   * The sessions' thermal governors and progress callbacks are not used: the step runs on ws's
//     threads, unthrottled. No session may be evaluated elsewhere meanwhile.
Status EvaluateBatch(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens,
                     BatchWorkspace& ws, float* logits, const std::atomic<bool>* stop = nullptr);

}  // namespace gemlet::runtime

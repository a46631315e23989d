// The public Session (gemlet.hpp) over a runtime session, the options' checks every object shares,
// and the memory-budget entry points over runtime/budget.h.
#include "gemlet/gemlet.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "api/api_internal.h"
#include "model/lora.h"
#include "runtime/budget.h"
#include "runtime/drafting.h"
#include "runtime/memory_report.h"
#include "runtime/media_prompt.h"
#include "runtime/prefix_reuse.h"

namespace gemlet {

// ---- Session ----

namespace api {

// A session's threads default to its engine's (which default to every hardware thread).
SessionOptions WithEngineThreads(SessionOptions o, int engine_threads) {
  if (o.n_threads <= 0) o.n_threads = engine_threads;
  return o;
}

// A runtime session on `engine` with its current kernels.
Result<std::unique_ptr<runtime::Session>> CreateRuntimeSession(const Engine& engine, const SessionOptions& o) {
  const Engine::Impl::Kernels k = engine.impl().CurrentKernels();
  return runtime::Session::Create(engine.impl().runtime, WithEngineThreads(o, engine.options().n_threads), k.table,
                                  k.options);
}

Status CheckSessionOptions(const SessionOptions& o) {
  if (o.n_ctx < 0) return Status::Error(StatusCode::kInvalidArgument, "n_ctx must be >= 0");
  if (o.n_threads < 0) return Status::Error(StatusCode::kInvalidArgument, "n_threads must be >= 0");
  if (o.max_batch <= 0) return Status::Error(StatusCode::kInvalidArgument, "max_batch must be > 0");
  if (o.rollback_tokens < 0) return Status::Error(StatusCode::kInvalidArgument, "rollback_tokens must be >= 0");
  return Status::Ok();
}

Result<DraftSession> MakeDraftSession(const Engine& engine, const SessionOptions& options, const runtime::Session& target) {
  DraftSession d;
  if (!options.draft_model) return d;
  const Engine& draft = *options.draft_model;
  if (draft.impl().runtime->model().AsAssistant() != nullptr) {
    // Gemma 4's drafter: the target's vocabulary by construction (its head scores the target's ids).
    ASSIGN_OR_RETURN(d.assistant, runtime::AssistantDrafter::Create(draft.impl().runtime, target));
    d.engine = options.draft_model;
    return d;
  }
  RETURN_IF_ERROR(runtime::CheckDraftVocabulary(*engine.impl().runtime, *draft.impl().runtime));
  SessionOptions o = options;
  o.n_ctx = target.n_ctx();
  o.n_threads = target.n_threads();
  ASSIGN_OR_RETURN(d.session, CreateRuntimeSession(draft, o));
  d.engine = options.draft_model;
  return d;
}

Status CheckGenerateOptions(const GenerateOptions& o) {
  if (std::string err = Validate(o); !err.empty()) return Status::Error(StatusCode::kInvalidArgument, err);
  return Status::Ok();
}

}  // namespace api

using api::CheckGenerateOptions;
using api::CheckSessionOptions;
using api::CreateRuntimeSession;
using api::WithEngineThreads;

std::string Validate(const GenerateOptions& o) {
  if (std::string err = ValidateSampling(o.sampling); !err.empty()) return err;
  for (const std::string& s : o.stop) {
    if (s.empty()) return "stop strings must not be empty";
  }
  if (o.max_draft < 0 || o.max_draft > 64) return "max_draft must be in [0, 64]";
  return std::string();
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<Engine> engine, const SessionOptions& options) {
  if (!engine) return Status::Error(StatusCode::kInvalidArgument, "no engine");
  RETURN_IF_ERROR(CheckSessionOptions(options));
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->session, CreateRuntimeSession(*engine, options));
  ASSIGN_OR_RETURN(impl->draft, api::MakeDraftSession(*engine, options, *impl->session));
  impl->own_threads = impl->session->n_threads();
  if (options.progress) impl->session->SetProgress(options.progress);
  ASSIGN_OR_RETURN(std::shared_ptr<const LoraStack> lora, api::MakeLoraStack(*engine, options.adapters));
  impl->session->SetAdapters(std::move(lora));
  impl->adapters = options.adapters;
  impl->engine = std::move(engine);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

namespace {

// What the public overloads share: tokens with media among them (none for a text prompt).
Status EvaluateOn(Session::Impl& impl, std::span<const int32_t> tokens, std::span<const MediaSpan> media,
                  float* logits, bool all_logits) {
  impl.BeginCall();
  impl.session->SetStopFlag(&impl.cancel);
  Status s = impl.session->Evaluate(std::vector<int32_t>(tokens.begin(), tokens.end()), media, logits, all_logits);
  impl.session->SetStopFlag(nullptr);
  return s;
}

Result<Reply> GenerateOn(Session::Impl& impl, std::span<const int32_t> prompt, std::span<const MediaSpan> media,
                         const GenerateOptions& options, const StreamCallback& on_text) {
  RETURN_IF_ERROR(CheckGenerateOptions(options));
  impl.BeginCall();
  Sampler sampler(options.sampling, impl.engine->info().n_vocab);
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::TokenConstraint> constraint,
                   impl.engine->impl().Constraint(options, impl.session->n_ctx()));
  runtime::GenerationControls controls;
  controls.cancel = &impl.cancel;
  controls.constraint = constraint.get();
  controls.draft_session = impl.draft.session.get();
  controls.assistant = impl.draft.assistant.get();
  ASSIGN_OR_RETURN(runtime::Generation g, runtime::Generate(*impl.session, sampler,
                                                            std::vector<int32_t>(prompt.begin(), prompt.end()),
                                                            options, controls, on_text, media));
  // The last sampled token is not in the cache yet: evaluate it so that the cache holds the whole
  // exchange and a following Generate continues from it.
  const StopReason stop = g.reply.stats.stop;
  if (!g.pending.empty() && stop != StopReason::kContextFull && stop != StopReason::kCancelled) {
    RETURN_IF_ERROR(impl.session->Evaluate(g.pending, nullptr, false));
  }
  runtime::AddSessionStats(*impl.session, &g.reply.stats);
  return std::move(g.reply);
}

Result<Reply> CompleteOn(Session::Impl& impl, std::span<const int32_t> prompt, std::span<const MediaSpan> media,
                         const GenerateOptions& options, const StreamCallback& on_text) {
  RETURN_IF_ERROR(CheckGenerateOptions(options));
  if (prompt.empty()) return Status::Error(StatusCode::kInvalidArgument, "the prompt is empty");
  RETURN_IF_ERROR(runtime::CheckMediaSpans(impl.session->engine(), media, static_cast<int>(prompt.size())));
  impl.BeginCall();
  size_t replayed = 0;
  ASSIGN_OR_RETURN(const size_t common, runtime::KeepCachedPrefix(*impl.session, prompt, media, &replayed));
  // The media the cache does not hold yet, its positions from the first token evaluated.
  std::vector<MediaSpan> rest;
  for (const MediaSpan& span : media) {
    if (static_cast<size_t>(span.position) >= common) rest.push_back({span.position - static_cast<int>(common), span.media});
  }
  ASSIGN_OR_RETURN(Reply reply, GenerateOn(impl, prompt.subspan(common), rest, options, on_text));
  reply.stats.prompt_tokens += static_cast<int>(common);
  reply.stats.cached_tokens = static_cast<int>(common - replayed);
  return reply;
}

}  // namespace

Status Session::Evaluate(std::span<const int32_t> tokens, float* logits, bool all_logits) {
  return EvaluateOn(*impl_, tokens, {}, logits, all_logits);
}

Status Session::Evaluate(const Prompt& prompt, float* logits, bool all_logits) {
  return EvaluateOn(*impl_, prompt.tokens, prompt.media, logits, all_logits);
}

Result<Reply> Session::Generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                const StreamCallback& on_text) {
  return GenerateOn(*impl_, prompt, {}, options, on_text);
}

Result<Reply> Session::Generate(const Prompt& prompt, const GenerateOptions& options, const StreamCallback& on_text) {
  return GenerateOn(*impl_, prompt.tokens, prompt.media, options, on_text);
}

Result<Reply> Session::Complete(std::span<const int32_t> prompt, const GenerateOptions& options,
                                const StreamCallback& on_text) {
  return CompleteOn(*impl_, prompt, {}, options, on_text);
}

Result<Reply> Session::Complete(const Prompt& prompt, const GenerateOptions& options, const StreamCallback& on_text) {
  return CompleteOn(*impl_, prompt.tokens, prompt.media, options, on_text);
}

Status Session::Truncate(int n) { return impl_->session->Truncate(n); }
Status Session::SaveState(const std::string& path) const { return impl_->session->SaveState(path, std::string()); }
Status Session::LoadState(const std::string& path) { return impl_->session->LoadState(path).status(); }
Result<int> Session::Discard(int begin, int count) {
  impl_->BeginCall();
  return impl_->session->Discard(begin, count);
}
void Session::Reset() { impl_->session->Reset(); }
void Session::Cancel() { impl_->cancel.store(true); }
int Session::n_past() const { return impl_->session->n_past(); }
int Session::rollback_room() const { return impl_->session->rollback_room(); }
int Session::n_ctx() const { return impl_->session->n_ctx(); }
const std::vector<int32_t>& Session::tokens() const { return impl_->session->history(); }
const std::vector<MediaSpan>& Session::media() const { return impl_->session->media(); }
MemoryStats Session::memory() const { return runtime::SessionMemory(*impl_->session); }
MemoryPlan Session::memory_plan() const { return runtime::SessionMemoryPlan(*impl_->session); }

const Engine& Session::engine() const { return *impl_->engine; }

// ---- memory budget ----

SessionCost PlanSession(const Engine& engine, const SessionOptions& options) {
  const runtime::Engine& rt = *engine.impl().runtime;
  const Engine::Impl::Kernels k = engine.impl().CurrentKernels();
  SessionCost c = runtime::SessionCostOn(rt.model(), WithEngineThreads(options, engine.options().n_threads),
                                         runtime::PackedInMemoryBytes(rt.model(), *k.table, k.options));
  c.baseline_bytes = runtime::AnonBytes();
  // What is packed in memory already is part of the baseline: count it once.
  c.baseline_bytes -= std::min<uint64_t>(c.baseline_bytes, rt.model().packed_store().PackedBytesInMemory());
  return c;
}

uint64_t DefaultMemoryBudget() { return runtime::DefaultMemoryBudget(); }
uint64_t ParseByteSize(std::string_view text) { return runtime::ParseByteSize(text); }

Result<SessionOptions> FitToBudget(const Engine& engine, uint64_t budget, SessionOptions wanted, std::string* note,
                                   uint64_t* floor_bytes) {
  const Model& model = engine.impl().runtime->model();
  wanted.n_ctx = runtime::ResolveContext(model.config(), wanted.n_ctx);
  return runtime::FitToBudget([&](const SessionOptions& o) { return PlanSession(engine, o); }, model, budget, wanted,
                              note, floor_bytes);
}

Result<SessionOptions> FitFileToBudget(const std::string& path, const EngineOptions& engine_options, uint64_t budget,
                                       SessionOptions wanted, std::string* note, uint64_t* floor_bytes) {
  if (std::string err = Validate(engine_options.kernels); !err.empty()) {
    return Status::Error(StatusCode::kInvalidArgument, err);
  }
  // The process with the model's own structures (its metadata and tensor table, which the engine
  // keeps too), plus what loading adds beside the weights' clean pages: the tokenizer.
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFile(path));
  const uint64_t baseline =
      runtime::AnonBytes() + runtime::kTokenizerBytesPerPiece * static_cast<uint64_t>(model->config().n_vocab);
  const Engine::Impl::Kernels k = api::ResolveKernels(engine_options.kernels);
  // With a cache folder the packed weights are written to a file and mapped: clean pages.
  const uint64_t packed = engine_options.cache_dir.empty() ? runtime::PackedInMemoryBytes(*model, *k.table, k.options) : 0;
  auto cost = [&](const SessionOptions& o) {
    SessionCost c = runtime::SessionCostOn(*model, WithEngineThreads(o, engine_options.n_threads), packed);
    c.baseline_bytes = baseline;
    return c;
  };
  wanted.n_ctx = runtime::ResolveContext(model->config(), wanted.n_ctx);
  return runtime::FitToBudget(cost, *model, budget, wanted, note, floor_bytes);
}

}  // namespace gemlet

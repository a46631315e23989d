// BatchDecoder: several sessions' generations stepped together, one forward per step for all of
// them (runtime::EvaluateBatch: the weights are read once per step), each request sampled by its
// own runtime::Generator.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "api/api_internal.h"
#include "runtime/batch.h"
#include "runtime/generate.h"
#include "runtime/media_prompt.h"
#include "runtime/prefix_reuse.h"
#include "sampling/sampler.h"

namespace gemlet {

using api::CheckGenerateOptions;

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

struct BatchDecoder::Impl {
  struct Request {
    int id = 0;
    Session* session = nullptr;
    runtime::Session* rt = nullptr;
    std::vector<int32_t> prompt;  // what the cache did not hold: evaluated in chunks
    size_t evaluated = 0;         // of prompt
    // Images and clips in `prompt` (positions from its start) and where the last one ends: tokens
    // up to there are evaluated on the request's own session, which keeps each image's rows in one
    // chunk, before the rest joins the batched steps.
    std::vector<MediaSpan> media;
    size_t media_end = 0;
    int kept = 0;                 // prompt tokens the cache held (before `prompt`)
    int cached = 0;               // ... of which reused as they were (not evaluated again for the rings)
    StreamCallback on_text;
    GenerateOptions options;
    runtime::GenerationControls controls;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<runtime::TokenConstraint> constraint;  // response_format; null: free text
    std::unique_ptr<runtime::Generator> generator;  // once the prompt is in the cache
    int32_t next_token = -1;      // sampled, to be evaluated in the next step
    std::atomic<bool> cancel{false};
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

    bool prefilling() const { return generator == nullptr; }
  };

  std::shared_ptr<Engine> engine;
  BatchOptions options;
  mutable std::mutex mutex;  // guards the list against Cancel from other threads
  std::vector<std::unique_ptr<Request>> requests;
  int next_id = 1;
  int last_step_tokens = 0;
  std::vector<float> logits;  // [max_requests, n_vocab]
  std::vector<float> media_logits;  // [n_vocab]: a prompt that ends with an image's markup
  // The step's activations (rows: every decoding request's token and the prompt chunks), made at
  // the first step from a session's threads and kernels, again when a longer context joins.
  std::unique_ptr<runtime::BatchWorkspace> workspace;
  int step_rows() const { return options.prefill_chunk + options.max_requests; }

  Finished Finish(Request& r, Result<Reply> reply) { return Finished{r.id, std::move(reply)}; }

  // The reply with the request's share of the stats: the prefix reused from the cache, the session's.
  Finished Reply(Request& r, gemlet::Reply reply) {
    reply.stats.prompt_tokens += r.kept;
    reply.stats.cached_tokens = r.cached;
    runtime::AddSessionStats(*r.rt, &reply.stats);
    return Finish(r, std::move(reply));
  }

  Finished Complete(Request& r) { return Reply(r, std::move(r.generator->Finish().reply)); }

  // Defined below the class; hidden, as the pimpl's internals must not join libgemlet.so's exports
  // (BatchDecoder is exported, and its nested types' members would be too).
  [[gnu::visibility("hidden")]] Result<int> Submit(Session& session, std::span<const int32_t> prompt,
                                                   std::span<const MediaSpan> media, const GenerateOptions& options,
                                                   StreamCallback on_text);

  // The request's prompt up to the end of its last image or clip, on its own session (an image's
  // rows in one chunk); with `logits` (the prompt ends there) the last row's.
  Status EvaluateMedia(Request& r, float* logits) {
    std::vector<int32_t> head(r.prompt.begin() + static_cast<ptrdiff_t>(r.evaluated),
                              r.prompt.begin() + static_cast<ptrdiff_t>(r.media_end));
    std::vector<MediaSpan> spans;
    for (const MediaSpan& m : r.media) {
      if (static_cast<size_t>(m.position) >= r.evaluated) spans.push_back({m.position - static_cast<int>(r.evaluated), m.media});
    }
    r.rt->SetStopFlag(&r.cancel);
    Status s = r.rt->Evaluate(head, spans, logits, false);
    r.rt->SetStopFlag(nullptr);
    if (s.ok()) r.evaluated = r.media_end;
    return s;
  }

  // The prompt is in the cache: sampling starts from the last row's logits. False when it ended there.
  bool StartGenerating(Request& r, const float* logits) {
    r.generator = std::make_unique<runtime::Generator>(*r.rt, *r.sampler, r.options, r.controls, r.on_text,
                                                       static_cast<int>(r.prompt.size()), Seconds(r.start));
    r.next_token = r.generator->Next(logits);
    return r.next_token >= 0;
  }

  // A request cancelled before its prompt was in: nothing generated.
  Finished CancelledInPrompt(Request& r) {
    gemlet::Reply reply;
    reply.stats.prompt_tokens = static_cast<int>(r.prompt.size());
    reply.stats.stop = StopReason::kCancelled;
    reply.stats.ttft_seconds = Seconds(r.start);
    return Reply(r, std::move(reply));
  }
};

BatchDecoder::BatchDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BatchDecoder::~BatchDecoder() = default;

Result<std::unique_ptr<BatchDecoder>> BatchDecoder::Create(std::shared_ptr<Engine> engine, const BatchOptions& options) {
  if (!engine) return Status::Error(StatusCode::kInvalidArgument, "no engine");
  if (options.max_requests < 1 || options.max_requests > 256) {
    return Status::Error(StatusCode::kInvalidArgument, "max_requests must be in [1, 256]");
  }
  if (options.prefill_chunk < 1) return Status::Error(StatusCode::kInvalidArgument, "prefill_chunk must be > 0");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->logits.resize(static_cast<size_t>(options.max_requests) * engine->info().n_vocab);
  impl->engine = std::move(engine);
  return std::unique_ptr<BatchDecoder>(new BatchDecoder(std::move(impl)));
}

Result<int> BatchDecoder::Submit(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options,
                                 StreamCallback on_text) {
  return impl_->Submit(session, prompt, {}, options, std::move(on_text));
}

Result<int> BatchDecoder::Submit(Session& session, const Prompt& prompt, const GenerateOptions& options,
                                 StreamCallback on_text) {
  return impl_->Submit(session, prompt.tokens, prompt.media, options, std::move(on_text));
}

Result<int> BatchDecoder::Impl::Submit(Session& session, std::span<const int32_t> prompt, std::span<const MediaSpan> media,
                                       const GenerateOptions& options, StreamCallback on_text) {
  Impl& d = *this;
  RETURN_IF_ERROR(CheckGenerateOptions(options));
  if (prompt.empty()) return Status::Error(StatusCode::kInvalidArgument, "the prompt is empty");
  if (&session.engine() != d.engine.get()) {
    return Status::Error(StatusCode::kInvalidArgument, "the session belongs to another engine");
  }
  if (static_cast<int64_t>(prompt.size()) > session.n_ctx()) {
    return Status::Error(StatusCode::kInvalidArgument, "the prompt has " + std::to_string(prompt.size()) +
                                                           " tokens, more than the context's " +
                                                           std::to_string(session.n_ctx()));
  }
  Session::Impl& s = session.impl();
  RETURN_IF_ERROR(runtime::CheckMediaSpans(s.session->engine(), media, static_cast<int>(prompt.size())));
  // Before anything changes: a schema outside the supported subset is the request's error.
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::TokenConstraint> constraint,
                   d.engine->impl().Constraint(options, session.n_ctx()));
  std::lock_guard<std::mutex> lock(d.mutex);
  if (static_cast<int>(d.requests.size()) >= d.options.max_requests) {
    return Status::Error(StatusCode::kInvalidArgument, "the batch is full (BatchOptions::max_requests)");
  }
  for (const auto& r : d.requests) {
    if (r->session == &session) return Status::Error(StatusCode::kInvalidArgument, "the session runs another request");
  }
  auto r = std::make_unique<Impl::Request>();
  r->id = d.next_id++;
  r->session = &session;
  r->rt = s.session.get();
  s.BeginCall();
  size_t replayed = 0;
  ASSIGN_OR_RETURN(const size_t common, runtime::KeepCachedPrefix(*r->rt, prompt, media, &replayed));
  r->kept = static_cast<int>(common);
  r->cached = static_cast<int>(common - replayed);
  r->prompt.assign(prompt.begin() + static_cast<ptrdiff_t>(common), prompt.end());
  // The media the cache does not hold yet, its positions from the first token evaluated.
  for (const MediaSpan& span : media) {
    if (static_cast<size_t>(span.position) < common) continue;
    r->media.push_back({span.position - static_cast<int>(common), span.media});
    r->media_end = static_cast<size_t>(r->media.back().position + span.media->n_tokens);
  }
  r->on_text = std::move(on_text);
  r->options = options;
  r->constraint = std::move(constraint);
  r->controls.cancel = &r->cancel;
  r->controls.constraint = r->constraint.get();
  r->sampler = std::make_unique<Sampler>(r->options.sampling, d.engine->info().n_vocab);
  const int id = r->id;
  d.requests.push_back(std::move(r));
  return id;
}

std::vector<BatchDecoder::Finished> BatchDecoder::Step() {
  Impl& d = *impl_;
  std::vector<Finished> finished;
  std::vector<Impl::Request*> running;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    for (auto& r : d.requests) running.push_back(r.get());
  }
  const int n_vocab = d.engine->info().n_vocab;
  std::vector<bool> done(running.size(), false);
  const auto end_cancelled = [&](size_t i) {
    Impl::Request& r = *running[i];
    if (r.prefilling()) {
      finished.push_back(d.CancelledInPrompt(r));
    } else {
      r.generator->Stop(StopReason::kCancelled);
      finished.push_back(d.Complete(r));
    }
    done[i] = true;
  };

  // This step's rows: a token for every decoding request, then prompt chunks in arrival order in
  // what is left (a long prompt takes several steps; the others keep decoding meanwhile).
  // A prompt with images or clips first evaluates up to the end of the last one on its own
  // session (its image rows in one chunk), one such request per step so that the others keep
  // decoding; the rest of its prompt then joins the batched rows.
  for (size_t i = 0; i < running.size(); ++i) {
    Impl::Request& r = *running[i];
    if (!r.prefilling() || r.evaluated >= r.media_end || r.cancel.load()) continue;
    const bool whole = r.media_end == r.prompt.size();
    d.media_logits.resize(whole ? static_cast<size_t>(n_vocab) : 0);
    const Status s = d.EvaluateMedia(r, whole ? d.media_logits.data() : nullptr);
    if (s.code() == StatusCode::kCancelled) {
      end_cancelled(i);
    } else if (!s.ok()) {
      finished.push_back(d.Finish(r, s));
      done[i] = true;
    } else if (whole && !d.StartGenerating(r, d.media_logits.data())) {
      finished.push_back(d.Complete(r));
      done[i] = true;
    }
    break;
  }

  std::vector<size_t> in_step;
  std::vector<std::vector<int32_t>> tokens(running.size());
  int budget = d.step_rows();
  for (size_t i = 0; i < running.size(); ++i) {
    Impl::Request& r = *running[i];
    if (done[i]) continue;
    if (r.cancel.load()) {
      end_cancelled(i);
    } else if (!r.prefilling()) {
      tokens[i] = {r.next_token};
      in_step.push_back(i);
      --budget;
    }
  }
  for (size_t i = 0; i < running.size() && budget > 0; ++i) {
    Impl::Request& r = *running[i];
    if (done[i] || !r.prefilling() || r.evaluated < r.media_end) continue;
    const size_t n = std::min({r.prompt.size() - r.evaluated, static_cast<size_t>(d.options.prefill_chunk),
                               static_cast<size_t>(budget)});
    tokens[i].assign(r.prompt.begin() + static_cast<ptrdiff_t>(r.evaluated),
                     r.prompt.begin() + static_cast<ptrdiff_t>(r.evaluated + n));
    in_step.push_back(i);
    budget -= static_cast<int>(n);
  }
  d.last_step_tokens = d.step_rows() - budget;

  // One forward for all of them. Should it fail (a session that cannot take its tokens), each is
  // evaluated on its own instead, so that the error is its request's alone.
  std::vector<Status> status(running.size(), Status::Ok());
  if (!in_step.empty()) {
    std::vector<runtime::Session*> sessions;
    std::vector<std::span<const int32_t>> spans;
    int n_ctx = 0;
    for (size_t i : in_step) {
      sessions.push_back(running[i]->rt);
      spans.emplace_back(tokens[i]);
      n_ctx = std::max(n_ctx, running[i]->rt->n_ctx());
    }
    Status batched = Status::Error("no workspace");
    if (!d.workspace || d.workspace->n_ctx() < n_ctx) {
      runtime::BatchOptions bo = runtime::BatchOptions::Like(*running[in_step[0]]->rt, d.step_rows());
      bo.n_ctx = n_ctx;
      Result<std::unique_ptr<runtime::BatchWorkspace>> ws = runtime::BatchWorkspace::Create(d.engine->impl().runtime, bo);
      if (ws.ok()) d.workspace = std::move(ws).value();
    }
    // Logits come in step order: row k is in_step[k]'s.
    if (d.workspace) batched = runtime::EvaluateBatch(sessions, spans, *d.workspace, d.logits.data());
    if (!batched.ok()) {
      for (size_t k = 0; k < in_step.size(); ++k) {
        Impl::Request& r = *running[in_step[k]];
        r.rt->SetStopFlag(&r.cancel);
        status[in_step[k]] = r.rt->Evaluate(tokens[in_step[k]], d.logits.data() + k * static_cast<size_t>(n_vocab), false);
        r.rt->SetStopFlag(nullptr);
      }
    }
  }

  for (size_t k = 0; k < in_step.size(); ++k) {
    const size_t i = in_step[k];
    Impl::Request& r = *running[i];
    float* logits = d.logits.data() + k * static_cast<size_t>(n_vocab);
    if (status[i].code() == StatusCode::kCancelled) {
      end_cancelled(i);
      continue;
    }
    if (!status[i].ok()) {
      finished.push_back(d.Finish(r, status[i]));
      done[i] = true;
      continue;
    }
    bool more = true;
    if (r.prefilling()) {
      r.evaluated += tokens[i].size();
      if (r.evaluated < r.prompt.size()) continue;
      more = d.StartGenerating(r, logits);
    } else {
      r.next_token = r.generator->Next(logits);
      more = r.next_token >= 0;
    }
    if (!more) {
      finished.push_back(d.Complete(r));
      done[i] = true;
    }
  }
  std::lock_guard<std::mutex> lock(d.mutex);
  for (size_t i = 0; i < running.size(); ++i) {
    if (!done[i]) continue;
    auto it = std::find_if(d.requests.begin(), d.requests.end(), [&](const auto& r) { return r.get() == running[i]; });
    d.requests.erase(it);
  }
  return finished;
}

void BatchDecoder::Cancel(int id) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& r : impl_->requests) {
    if (r->id == id) r->cancel.store(true);
  }
}

int BatchDecoder::running() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return static_cast<int>(impl_->requests.size());
}

int BatchDecoder::last_step_tokens() const { return impl_->last_step_tokens; }

}  // namespace gemlet

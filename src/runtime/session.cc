// Engine loading and the Session's evaluation entry point.
#include "runtime/session.h"

#include "runtime/media_prompt.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace gemlet::runtime {

namespace {
// size, mtime, inode and device of the file, and a hash of the first and last MiB of the range.
std::string FileIdentity(int fd, uint64_t offset, uint64_t length) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::string();
  if (length == 0) length = static_cast<uint64_t>(st.st_size) - offset;
  constexpr uint64_t kEnd = 1 << 20;
  std::vector<uint8_t> buf(static_cast<size_t>(std::min(kEnd, length)));
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t at : {offset, offset + length - buf.size()}) {
    const ssize_t got = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(at));
    if (got > 0) h = Fnv1a64(buf.data(), static_cast<size_t>(got), h);
  }
  char out[160];
  std::snprintf(out, sizeof out, "size=%llu mtime=%lld.%09ld ino=%llu dev=%llu offset=%llu ends=%016llx",
                static_cast<unsigned long long>(length), static_cast<long long>(st.st_mtim.tv_sec),
                static_cast<long>(st.st_mtim.tv_nsec), static_cast<unsigned long long>(st.st_ino),
                static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(offset),
                static_cast<unsigned long long>(h));
  return out;
}
}  // namespace

Result<std::shared_ptr<const Engine>> Engine::Load(const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFile(path));
  std::string identity;
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    identity = FileIdentity(fd, 0, 0);
    ::close(fd);
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return FromModel(std::move(model), path, start, std::move(identity), ec ? path : absolute.lexically_normal().string());
}

Result<std::shared_ptr<const Engine>> Engine::LoadRange(int fd, uint64_t offset, uint64_t length) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelRange(fd, offset, length));
  return FromModel(std::move(model), "fd " + std::to_string(fd), start, FileIdentity(fd, offset, length), std::string());
}

Result<PackedCacheOutcome> Engine::UsePackedCache(const std::string& cache_dir, const KernelTable& kernels,
                                                  int n_threads) const {
  if (identity_.empty()) return Status::Error("the model file's identity is unknown");
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec) return Status::Error("cannot create " + cache_dir + ": " + ec.message());
  const std::string key = identity_ + " kernels=" + kernels.name;
  char name[64];
  std::snprintf(name, sizeof name, "/%016llx.gpack", static_cast<unsigned long long>(Fnv1a64(key.data(), key.size())));
  ThreadPool pool(std::max(1, n_threads));
  return gemlet::UsePackedCache(model_->packed_store(), kernels, cache_dir + name, identity_, pool, origin_);
}

Result<std::shared_ptr<const Engine>> Engine::FromModel(std::unique_ptr<Model> model, const std::string& path,
                                                        std::chrono::steady_clock::time_point start,
                                                        std::string identity, std::string origin) {
  std::shared_ptr<Engine> engine(new Engine());
  engine->model_ = std::move(model);
  engine->identity_ = std::move(identity);
  engine->origin_ = std::move(origin);
  engine->model_map_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const GgufFile& gguf = engine->model_->gguf();
  auto tokenizer = Tokenizer::FromGguf(gguf);
  if (!tokenizer.ok()) return tokenizer.status().WithContext("'" + path + "': reading the tokenizer");
  engine->tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  std::string chat_template;
  if (gguf.Has("tokenizer.chat_template")) {
    ASSIGN_OR_RETURN(chat_template, gguf.GetString("tokenizer.chat_template"));
  }
  engine->chat_style_ = ChooseChatStyle(engine->config().arch, chat_template);
  const Tokenizer& tok = *engine->tokenizer_;
  auto add_eog = [&](int32_t id) {
    if (id >= 0 && id < tok.vocab_size() &&
        std::find(engine->end_of_generation_.begin(), engine->end_of_generation_.end(), id) == engine->end_of_generation_.end()) {
      engine->end_of_generation_.push_back(id);
    }
  };
  add_eog(tok.eos_id());
  add_eog(tok.eot_id());
  for (const std::string& marker : TurnEndMarkers(engine->chat_style_)) add_eog(tok.vocab().Find(marker));
  if (tok.vocab_size() != engine->config().n_vocab) {
    // Models may pad the embedding beyond the vocabulary; the reverse would index past the table.
    if (tok.vocab_size() > engine->config().n_vocab) {
      return Status::Error("'" + path + "': the tokenizer has " + std::to_string(tok.vocab_size()) +
                           " tokens but the embedding only " + std::to_string(engine->config().n_vocab));
    }
  }
  engine->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::shared_ptr<const Engine>(std::move(engine));
}

bool Engine::IsEndOfGeneration(int32_t id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
}

int ResolveThreads(int n_threads) {
  return n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int ResolveContext(const ModelConfig& config, int n_ctx) {
  return n_ctx > 0 ? n_ctx : std::min(config.n_ctx_train > 0 ? config.n_ctx_train : 4096, 4096);
}

static_assert(static_cast<DType>(KvCacheType::kF32) == DType::kF32 && static_cast<DType>(KvCacheType::kF16) == DType::kF16 &&
              static_cast<DType>(KvCacheType::kQ8_0) == DType::kQ8_0 && static_cast<DType>(KvCacheType::kQ4_0) == DType::kQ4_0);
DType KvDType(KvCacheType type) { return static_cast<DType>(type); }

namespace {
SessionOptions Resolve(const ModelConfig& config, SessionOptions o) {
  o.n_ctx = ResolveContext(config, o.n_ctx);
  o.n_threads = ResolveThreads(o.n_threads);
  o.max_batch = std::clamp(o.max_batch, 1, o.n_ctx);
  o.rollback_tokens = std::max(0, o.rollback_tokens);
  return o;
}
SessionOptions Resolve(const Engine& engine, const SessionOptions& o) { return Resolve(engine.config(), o); }
}  // namespace

SessionOptions Session::Resolved(const Model& model, const SessionOptions& options) { return Resolve(model.config(), options); }

size_t Session::PlanActivationBytes(const Model& model, const SessionOptions& options) {
  const SessionOptions o = Resolve(model.config(), options);
  return Workspace::PlanBytes(model.config(), o.max_batch, o.n_ctx, o.n_threads, model.ExtraScratchFloats(o.max_batch));
}

size_t Session::PlanKvBytes(const Model& model, const SessionOptions& options) {
  const SessionOptions o = Resolve(model.config(), options);
  return KvCache::PlanBytes(model.KvLayout(), o.n_ctx, KvDType(o.kv_cache_type), o.rollback_tokens);
}

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Engine> engine, const SessionOptions& options,
                                                 const KernelTable* kernels, const KernelOptions& kernel_options) {
  if (engine->model().AsAssistant() != nullptr) {
    return Status::Error(StatusCode::kInvalidArgument, "'" + engine->model().gguf().path() +
                                                           "' is a Gemma 4 drafter (gemma4-assistant): it drafts for a Gemma 4 model "
                                                           "(SessionOptions::draft_model, --spec mtp --draft-model) and runs no session of its own");
  }
  const SessionOptions o = Resolve(*engine, options);
  std::unique_ptr<Session> s(new Session());
  ASSIGN_OR_RETURN(s->cache_, KvCache::Create(engine->model().KvLayout(), o.n_ctx, KvDType(o.kv_cache_type), o.rollback_tokens));
  s->workspace_ = std::make_unique<Workspace>(engine->config(), o.max_batch, o.n_ctx, o.n_threads,
                                                engine->model().ExtraScratchFloats(o.max_batch));
  s->ctx_ = std::make_unique<KernelContext>(o.n_threads, kernels, kernel_options);
  s->max_threads_ = o.n_threads;
  s->base_threads_ = o.n_threads;
  s->ring_spare_ = o.rollback_tokens;
  s->options_ = o;
  s->options_.progress = nullptr;
  s->options_.draft_model = nullptr;
  s->engine_ = std::move(engine);
  return s;
}

Status Session::Evaluate(const std::vector<int32_t>& tokens, float* logits, bool all_logits, float* hidden) {
  return Evaluate(tokens, {}, logits, all_logits, hidden);
}

Status Session::Evaluate(const std::vector<int32_t>& tokens, std::span<const MediaSpan> media, float* logits,
                         bool all_logits, float* hidden) {
  RETURN_IF_ERROR(CheckMediaSpans(*engine_, media, static_cast<int>(tokens.size())));
  // The hidden rows are those that get logits: asked for alone they would silently stay unwritten.
  if (hidden != nullptr && logits == nullptr) {
    return Status::Error(StatusCode::kInvalidArgument, "Evaluate writes hidden states only with logits");
  }
  if (!keep_guard_) cache_->DropGuard();  // the drafts of an earlier verification are kept now
  if (rings_stale_) RETURN_IF_ERROR(RefillRings(cache_->n_past()));
  const int before = cache_->n_past();
  // Media rows take their embeddings; a two-way span's rows see every key of the span.
  std::vector<const float*> rows;
  std::vector<int64_t> key_end;
  if (!media.empty()) {
    rows.assign(tokens.size(), nullptr);
    key_end.resize(tokens.size());
    for (size_t r = 0; r < tokens.size(); ++r) key_end[r] = before + static_cast<int64_t>(r) + 1;
    for (const MediaSpan& span : media) {
      const EncodedMedia& m = *span.media;
      for (int j = 0; j < m.n_tokens; ++j) {
        const size_t r = static_cast<size_t>(span.position + j);
        rows[r] = m.embeddings.data() + static_cast<size_t>(j) * static_cast<size_t>(m.n_embd);
        if (m.two_way) key_end[r] = before + span.position + m.n_tokens;
      }
    }
  }
  workspace_->stop = stop_;
  workspace_->output_hidden = hidden;
  // The thermal governor's chunks do not know media spans: a prompt with media runs unthrottled
  // (its image is one chunk anyway).
  Status s = thermal_ && thermal_->active() && !tokens.empty() && media.empty()
                 ? ForwardThrottled(tokens, logits, all_logits)
                 : engine_->model().Forward(tokens.data(), static_cast<int>(tokens.size()),
                                            rows.empty() ? nullptr : rows.data(),
                                            key_end.empty() ? nullptr : key_end.data(), *cache_, *workspace_, *ctx_,
                                            logits, all_logits, &progress_);
  workspace_->stop = nullptr;
  workspace_->output_hidden = nullptr;
  // The chunks evaluated before a stop stay in the cache; the stopped one may have written over
  // ring slots of positions still held, so the rings are refilled before the next evaluation.
  const int done = cache_->n_past() - before;
  history_.insert(history_.end(), tokens.begin(), tokens.begin() + done);
  for (const MediaSpan& span : media) {
    if (span.position + span.media->n_tokens <= done) media_.push_back({before + span.position, span.media});
  }
  tokens_evaluated_ += done;
  if (s.code() == StatusCode::kCancelled) rings_stale_ = cache_->RollbackRoom() < cache_->n_ctx();
  return s;
}

Status Session::EvaluateAsDecode(const std::vector<int32_t>& tokens, float* logits, float* hidden) {
  if (tokens.size() > 8 || static_cast<int>(tokens.size()) > cache_->RollbackRoom()) {
    return Status::Error(StatusCode::kInvalidArgument, "EvaluateAsDecode takes at most 8 tokens and the rollback room");
  }
  if (rings_stale_) RETURN_IF_ERROR(RefillRings(cache_->n_past()));
  // The first token is the generation's own (plain decoding writes it too); the rest are drafts,
  // whose ring slots are kept so that taking them back leaves no trace (KvCache::GuardWrites).
  const int n_past = cache_->n_past();
  workspace_->rows_as_decode = true;
  keep_guard_ = true;
  cache_->GuardWrites(n_past + 1, n_past + static_cast<int>(tokens.size()));
  Status s = Evaluate(tokens, logits, true, hidden);
  keep_guard_ = false;
  workspace_->rows_as_decode = false;
  return s;
}

Status Session::RefillRings(int n) {
  rings_stale_ = false;
  // Everything before n is evaluated again. Replaying only the last window is not enough: its first
  // positions attend to ring slots that later positions have overwritten, and the error flows up
  // through the layers (measured: 0.1 in the logits on the demo model). Rings with spare room beyond
  // the window will make this cheap (rollback of a few tokens without any replay).
  const int from = 0;
  std::vector<int32_t> replay(history_.begin() + from, history_.begin() + n);
  std::vector<MediaSpan> media;
  for (const MediaSpan& span : media_) {
    if (span.position + span.media->n_tokens <= n) media.push_back({span.position - from, span.media});
  }
  cache_->SetPast(from);
  cache_->ReleaseUnused();  // what the replay does not write again goes back (dropped turns, a deep rollback)
  history_.resize(static_cast<size_t>(from));
  media_.clear();
  if (replay.empty()) return Status::Ok();
  return Evaluate(replay, media, nullptr, false);
}

int Session::CutBefore(int n) const {
  for (const MediaSpan& span : media_) {
    if (span.position < n && n < span.position + span.media->n_tokens) return span.position;
  }
  return n;
}

Result<int> Session::Discard(int begin, int count) {
  const int held = cache_->n_past();
  if (begin < 0 || count < 0 || static_cast<int64_t>(begin) + count > held) {
    return Status::Error("cannot drop tokens [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                         ") of " + std::to_string(held));
  }
  if (count == 0) return 0;
  if (CutBefore(begin) != begin || CutBefore(begin + count) != begin + count) {
    return Status::Error("cannot drop tokens [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                         "): the range cuts an image or audio clip in two");
  }
  // Media inside the range goes; media after it moves down with its tokens.
  std::vector<MediaSpan> kept_media;
  for (const MediaSpan& span : media_) {
    if (span.position < begin) kept_media.push_back(span);
    else if (span.position >= begin + count) kept_media.push_back({span.position - count, span.media});
  }
  if (!rings_stale_ && cache_->CanDiscard(begin, count)) {
    const Model& model = engine_->model();
    RETURN_IF_ERROR(cache_->Discard(begin, count, [&model](int layer) -> const std::vector<float>& {
      return model.KeyRope(layer);
    }));
    history_.erase(history_.begin() + begin, history_.begin() + begin + count);
    media_ = std::move(kept_media);
    return 0;
  }
  history_.erase(history_.begin() + begin, history_.begin() + begin + count);
  media_ = std::move(kept_media);
  const int kept = static_cast<int>(history_.size());
  const int64_t before = tokens_evaluated_;
  RETURN_IF_ERROR(RefillRings(kept));
  return static_cast<int>(tokens_evaluated_ - before);
}

bool Session::SetAdapters(std::shared_ptr<const LoraStack> stack) {
  if (stack != nullptr && stack->empty()) stack = nullptr;
  const bool changed = (stack ? stack->key() : std::string()) != adapters_key();
  lora_ = std::move(stack);
  cache_->set_lora(lora_.get());
  if (changed && (cache_->n_past() > 0 || !history_.empty())) {
    Reset();
    return true;
  }
  return false;
}

const std::string& Session::adapters_key() const {
  static const std::string kNone;
  return lora_ ? lora_->key() : kNone;
}

std::string Session::StateIdentity() const {
  return lora_ ? engine_->identity() + kLoraIdentityTag + lora_->key() : engine_->identity();
}

void Session::SetThreads(int n) {
  base_threads_ = std::clamp(n, 1, max_threads_);
  ctx_->SetThreads(base_threads_);
}

Status Session::Truncate(int n) {
  const int held = cache_->n_past();
  if (n < 0 || n > held) return Status::Error("cannot truncate to " + std::to_string(n) + " of " + std::to_string(held) + " tokens");
  n = CutBefore(n);
  if (n == held) return Status::Ok();
  while (!media_.empty() && media_.back().position + media_.back().media->n_tokens > n) media_.pop_back();
  // Drafts of the last EvaluateAsDecode taken back: their slots are put back as they were.
  if (cache_->Guards(n) && !rings_stale_) {
    cache_->TakeBack(n);
    cache_->ReleaseUnused();
    history_.resize(static_cast<size_t>(n));
    return Status::Ok();
  }
  // A ring of C slots still holds position p < n only if no position >= n wrote over it: the
  // window before n survives when at most C - W + 1 positions are dropped (the rollback room).
  const bool refill = rings_stale_ || (n > 0 && !cache_->TruncateKeepsRings(n));
  if (!refill) {
    cache_->SetPast(n);
    cache_->ReleaseUnused();
    history_.resize(static_cast<size_t>(n));
    return Status::Ok();
  }
  return RefillRings(n);
}

size_t Session::ReleaseIdleMemory() {
  const size_t scratch = ctx_->scratch().Bytes();
  const size_t kv_before = cache_->ResidentBytes();
  ctx_->scratch().Release();
  cache_->ReleaseUnused();
  const size_t kv_after = cache_->ResidentBytes();
  return scratch + (kv_before > kv_after ? kv_before - kv_after : 0);
}

Status Session::ConvertKv(KvCacheType type) {
  if (KvDType(type) == cache_->type()) return Status::Ok();
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> converted, cache_->ConvertedTo(KvDType(type)));
  cache_ = std::move(converted);  // the old storage is unmapped here
  options_.kv_cache_type = type;
  return Status::Ok();
}

Status Session::ForwardThrottled(const std::vector<int32_t>& tokens, float* logits, bool all_logits) {
  const Model& model = engine_->model();
  const int n_tokens = static_cast<int>(tokens.size());
  const int n_vocab = engine_->config().n_vocab;
  // What Forward refuses, refused before the first chunk: a bad request evaluates nothing.
  for (int32_t id : tokens) {
    if (id < 0 || id >= n_vocab) {
      return Status::Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                           std::to_string(n_vocab - 1) + ")");
    }
  }
  RETURN_IF_ERROR(cache_->CheckRoom(n_tokens));
  float* const hidden = workspace_->output_hidden;  // placed per chunk as the logits are
  const size_t d_model = static_cast<size_t>(engine_->config().d_model);
  for (int done = 0; done < n_tokens;) {
    const ThermalMonitor::Reading r = thermal_->Poll();
    const Throttle t = planner_.Plan(r.work_fraction, r.throttled, base_threads_, workspace_->max_batch);
    // A change of thread count rebuilds the pool; the planner's hysteresis keeps that rare.
    if (t.threads != ctx_->n_threads()) ctx_->SetThreads(t.threads);
    const int n = std::min(n_tokens - done, t.prefill_chunk);
    float* out = all_logits ? (logits == nullptr ? nullptr : logits + static_cast<size_t>(done) * static_cast<size_t>(n_vocab))
                            : (done + n == n_tokens ? logits : nullptr);
    workspace_->output_hidden = hidden == nullptr ? nullptr
                                : all_logits       ? hidden + static_cast<size_t>(done) * d_model
                                : done + n == n_tokens ? hidden
                                                       : nullptr;
    const auto start = std::chrono::steady_clock::now();
    const Status forward = model.Forward(tokens.data() + done, n, *cache_, *workspace_, *ctx_, out, all_logits, nullptr);
    workspace_->output_hidden = hidden;
    RETURN_IF_ERROR(forward);
    const double busy = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done += n;
    if (progress_) progress_(done, n_tokens);
    if (!t.throttled) continue;
    GenerationStats::Thermal& st = thermal_stats_;
    st.min_threads = st.throttled_steps == 0 ? t.threads : std::min(st.min_threads, t.threads);
    st.min_prefill_chunk = st.throttled_steps == 0 ? t.prefill_chunk : std::min(st.min_prefill_chunk, t.prefill_chunk);
    st.min_duty = std::min(st.min_duty, t.duty);
    ++st.throttled_steps;
    // The duty: evaluating `busy` seconds of every busy / duty, the rest asleep.
    if (t.duty > 0 && t.duty < 1) {
      const double rest = busy * (1.0 / t.duty - 1.0);
      Pace(rest);
      st.paced_seconds += rest;
    }
  }
  return Status::Ok();
}

void Session::Pace(double seconds) {
  // Slices of at most 20 ms: a Cancel() from another thread is heard within one.
  constexpr double kSlice = 0.02;
  for (double left = seconds; left > 0; left -= kSlice) {
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) return;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(left, kSlice)));
  }
}

}  // namespace gemlet::runtime

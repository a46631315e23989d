// The slot scheduler: admits queued jobs into free slots (the one whose cache shares the longest
// prefix with the prompt, else the least recently used), steps every running job in one batched
// forward, and hands the streamed text and the replies back to the HTTP threads.
#include "server/scheduler.h"

#include <algorithm>
#include <climits>

namespace gemlet::server {

bool Job::Take(std::vector<Chunk>* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait_for(lock, timeout, [this] { return finished || !chunks.empty(); });
  for (Chunk& c : chunks) out->push_back(std::move(c));
  chunks.clear();
  return finished;
}

SchedulerStats& operator+=(SchedulerStats& total, const SchedulerStats& retired) {
  total.requests_total += retired.requests_total;
  total.requests_cancelled += retired.requests_cancelled;
  total.requests_rejected += retired.requests_rejected;
  total.prompt_tokens_total += retired.prompt_tokens_total;
  total.cached_tokens_total += retired.cached_tokens_total;
  total.generated_tokens_total += retired.generated_tokens_total;
  total.steps_total += retired.steps_total;
  total.step_tokens_total += retired.step_tokens_total;
  total.busy_seconds += retired.busy_seconds;
  return total;
}

Scheduler::Scheduler(std::shared_ptr<Engine> engine, int parallel, const SessionOptions& slot, int queue_size)
    : engine_(std::move(engine)), parallel_(parallel), slot_options_(slot), queue_size_(queue_size) {}

Scheduler::~Scheduler() { Stop(); }

Status Scheduler::Start() {
  BatchOptions bo;
  bo.max_requests = parallel_;
  // Long prompts take turns with the others' decoding: a new request's prefill delays the running
  // ones by at most one chunk per step.
  bo.prefill_chunk = std::min(256, std::max(1, slot_options_.max_batch));
  Result<std::unique_ptr<BatchDecoder>> batch = BatchDecoder::Create(engine_, bo);
  if (!batch.ok()) return batch.status();
  batch_ = std::move(batch).value();
  for (int i = 0; i < parallel_; ++i) {
    Result<std::unique_ptr<Session>> s = Session::Create(engine_, slot_options_);
    if (!s.ok()) return s.status();
    slot_ctx_ = s.value()->n_ctx();
    slots_.push_back(Slot{std::move(s).value(), nullptr, 0, 0});
  }
  stats_.slots = parallel_;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

bool Scheduler::Enqueue(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    const int busy = stats_.slots_busy;
    if (busy >= parallel_ && static_cast<int>(queue_.size()) >= queue_size_) {
      ++stats_.requests_rejected;
      return false;
    }
    queue_.push_back(job);
    stats_.queued = static_cast<int>(queue_.size());
  }
  wake_.notify_one();
  return true;
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

namespace {

// How much of `prompt` a session's cache holds: the common tokens, up to the first image that is
// not the same image on both sides (by content hash: enough to choose a slot; the session's prefix
// reuse compares the embeddings themselves).
// The same adapters, in the same order, at the same scales: what a slot's K/V can be reused under.
bool SameAdapters(const std::vector<AdapterUse>& a, const std::vector<AdapterUse>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].adapter != b[i].adapter || a[i].scale != b[i].scale) return false;
  }
  return true;
}

size_t CommonPrefix(const Session& session, const Prompt& prompt) {
  const std::vector<int32_t>& held = session.tokens();
  size_t common = 0;
  while (common < held.size() && common < prompt.tokens.size() && held[common] == prompt.tokens[common]) ++common;
  const std::vector<MediaSpan>& held_media = session.media();
  for (size_t k = 0; k < std::max(held_media.size(), prompt.media.size()); ++k) {
    const MediaSpan* a = k < held_media.size() ? &held_media[k] : nullptr;
    const MediaSpan* b = k < prompt.media.size() ? &prompt.media[k] : nullptr;
    const size_t first = static_cast<size_t>(std::min(a ? a->position : INT32_MAX, b ? b->position : INT32_MAX));
    if (first >= common) break;
    if (!a || !b || a->position != b->position ||
        (a->media != b->media && a->media->content_hash != b->media->content_hash)) {
      return first;
    }
  }
  return common;
}

}  // namespace

int Scheduler::PickSlot(const Job& job) const {
  int best = -1;
  size_t best_common = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.job) continue;
    // K/V computed under other adapters are no prefix of this request's: that slot starts over.
    const size_t common = SameAdapters(s.session->adapters(), job.adapters) ? CommonPrefix(*s.session, job.prompt) : 0;
    if (best < 0 || common > best_common || (common == best_common && s.last_used < slots_[best].last_used)) {
      best = static_cast<int>(i);
      best_common = common;
    }
  }
  return best;
}

void Scheduler::Finish(Slot& slot, Result<Reply> reply) {
  std::shared_ptr<Job> job = std::move(slot.job);
  slot.job = nullptr;
  slot.request = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --stats_.slots_busy;
    ++stats_.requests_total;
    if (reply.ok()) {
      const GenerationStats& st = reply.value().stats;
      stats_.prompt_tokens_total += static_cast<uint64_t>(st.prompt_tokens - st.cached_tokens);
      stats_.cached_tokens_total += static_cast<uint64_t>(st.cached_tokens);
      stats_.generated_tokens_total += static_cast<uint64_t>(st.generated_tokens);
      if (st.stop == StopReason::kCancelled) ++stats_.requests_cancelled;
    }
  }
  std::lock_guard<std::mutex> lock(job->mutex);
  job->reply = std::move(reply);
  job->finished = true;
  job->changed.notify_all();
}

// Called with mutex_ held: moves queued jobs into free slots.
void Scheduler::Admit(std::unique_lock<std::mutex>& lock) {
  while (!queue_.empty() && stats_.slots_busy < parallel_) {
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    stats_.queued = static_cast<int>(queue_.size());
    if (job->cancelled.load()) {
      lock.unlock();
      {
        std::lock_guard<std::mutex> job_lock(job->mutex);
        job->reply = Status::Error(StatusCode::kCancelled, "cancelled while queued");
        job->finished = true;
        job->changed.notify_all();
      }
      lock.lock();
      continue;
    }
    const int index = PickSlot(*job);
    Slot& slot = slots_[static_cast<size_t>(index)];
    Job* raw = job.get();
    auto on_text = [raw](ChunkKind kind, std::string_view text) {
      if (!raw->stream) return !raw->cancelled.load();
      {
        std::lock_guard<std::mutex> job_lock(raw->mutex);
        raw->chunks.push_back({kind, std::string(text)});
      }
      raw->changed.notify_all();
      return !raw->cancelled.load();
    };
    Status adapters = slot.session->SetAdapters(job->adapters);
    Result<int> id = adapters.ok() ? batch_->Submit(*slot.session, job->prompt, job->options, on_text) : Result<int>(adapters);
    if (!id.ok()) {
      lock.unlock();
      {
        std::lock_guard<std::mutex> job_lock(job->mutex);
        job->reply = id.status();
        job->finished = true;
        job->changed.notify_all();
      }
      lock.lock();
      continue;
    }
    job->slot = index;
    slot.job = std::move(job);
    slot.request = id.value();
    slot.last_used = ++use_counter_;
    ++stats_.slots_busy;
  }
}

void Scheduler::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || stats_.slots_busy > 0 || !queue_.empty(); });
      if (stopping_) {
        for (auto& job : queue_) job->cancelled.store(true);
        for (Slot& s : slots_) {
          if (s.job) s.job->cancelled.store(true);
        }
      }
      Admit(lock);
      if (stopping_ && stats_.slots_busy == 0) break;
    }
    for (Slot& s : slots_) {
      if (s.job && s.job->cancelled.load()) batch_->Cancel(s.request);
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<BatchDecoder::Finished> finished = batch_->Step();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.steps_total;
      stats_.step_tokens_total += static_cast<uint64_t>(batch_->last_step_tokens());
      stats_.busy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    for (BatchDecoder::Finished& f : finished) {
      for (Slot& s : slots_) {
        if (s.job && s.request == f.id) Finish(s, std::move(f.reply));
      }
    }
  }
  // Stopping: answer what was still queued.
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(queue_);
  }
  for (auto& job : left) {
    std::lock_guard<std::mutex> job_lock(job->mutex);
    job->reply = Status::Error(StatusCode::kCancelled, "the server is stopping");
    job->finished = true;
    job->changed.notify_all();
  }
}

}  // namespace gemlet::server

// The server's slots: `parallel` sessions, each holding one conversation's KV cache between
// requests, stepped together by one BatchDecoder on one thread. HTTP threads hand in jobs and read
// their streamed text back; a full queue refuses new jobs at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gemlet/gemlet.hpp"

namespace gemlet::server {

// One request's generation, shared by the HTTP thread that answers it and the scheduler.
struct Job {
  Prompt prompt;  // tokens, and the images among them
  GenerateOptions options;
  std::vector<AdapterUse> adapters;  // the LoRA adapters it runs (none: the base)
  // False: the answer goes out whole, so its text is not queued as chunks and its HTTP thread is
  // not woken for each token (only when the job finishes, or its wait times out).
  bool stream = true;

  // Set by the HTTP side (client gone, server stopping): the scheduler cancels the generation,
  // and its slot is free for the next job at the following step.
  std::atomic<bool> cancelled{false};

  // Filled by the scheduler; read under `mutex` (`changed` is notified on each change).
  std::mutex mutex;
  std::condition_variable changed;
  struct Chunk {
    ChunkKind kind;
    std::string text;
  };
  std::deque<Chunk> chunks;  // streamed pieces not yet taken by the HTTP thread
  bool finished = false;
  Result<Reply> reply = Status::Error("not finished");
  int slot = -1;

  // Waits until there are chunks or the job finished, at most `timeout`; moves the chunks out.
  // Returns true when the job finished (its chunks all taken).
  bool Take(std::vector<Chunk>* out, std::chrono::milliseconds timeout);
};

struct SchedulerStats {
  int slots = 0;
  int slots_busy = 0;
  int queued = 0;
  uint64_t requests_total = 0;       // finished, including failed and cancelled
  uint64_t requests_cancelled = 0;
  uint64_t requests_rejected = 0;    // refused because the queue was full
  uint64_t prompt_tokens_total = 0;  // evaluated (cached prefix tokens excluded)
  uint64_t cached_tokens_total = 0;
  uint64_t generated_tokens_total = 0;
  uint64_t steps_total = 0;
  uint64_t step_tokens_total = 0;    // tokens evaluated by the steps' forwards
  double busy_seconds = 0;           // time spent stepping
};

// Counters of a scheduler that was retired (the model unloaded when idle) added to a live one's,
// so that /metrics counts never go back.
SchedulerStats& operator+=(SchedulerStats& total, const SchedulerStats& retired);

class Scheduler {
 public:
  Scheduler(std::shared_ptr<Engine> engine, int parallel, const SessionOptions& slot, int queue_size);
  ~Scheduler();
  Status Start();
  // Hands a job in; false when the queue is full (the caller answers 503). Its prompt must fit a
  // slot's context (checked by the caller: it knows the context size, slot_ctx()).
  bool Enqueue(const std::shared_ptr<Job>& job);
  // Cancels every job, running and queued, and joins the thread.
  void Stop();
  int slot_ctx() const { return slot_ctx_; }
  SchedulerStats stats() const;

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::shared_ptr<Job> job;  // null: free
    int request = 0;           // BatchDecoder id
    uint64_t last_used = 0;
  };
  void Loop();
  void Admit(std::unique_lock<std::mutex>& lock);
  int PickSlot(const Job& job) const;
  void Finish(Slot& slot, Result<Reply> reply);

  std::shared_ptr<Engine> engine_;
  const int parallel_;
  SessionOptions slot_options_;
  const int queue_size_;
  int slot_ctx_ = 0;
  std::unique_ptr<BatchDecoder> batch_;
  std::vector<Slot> slots_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  uint64_t use_counter_ = 0;
  SchedulerStats stats_;
  std::thread thread_;
};

}  // namespace gemlet::server

// ThreadPool: persistent worker threads for data-parallel loops (no thread creation per op).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gemlet {

class ThreadPool {
 public:
  // n_threads counts the calling thread: a pool of 1 runs everything inline. spin: threads poll
  // briefly for the next job before they sleep (see Wait); off, every hand-off sleeps (A/B
  // measurements, and machines shared with other busy processes).
  explicit ThreadPool(int n_threads, bool spin = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  bool spin() const { return spin_.load(std::memory_order_relaxed); }
  void SetSpin(bool spin) { spin_.store(spin, std::memory_order_relaxed); }

  // Calls fn(begin, end, thread_index) on disjoint chunks covering [0, n); returns when all are done.
  // Chunks are contiguous and balanced so that each thread streams its own slice of a weight matrix.
  // Not reentrant: fn must not call ParallelFor on the same pool.
  void ParallelFor(size_t n, const std::function<void(size_t, size_t, int)>& fn);

  // Like ParallelFor, but threads take chunks of `grain` items in turn until none are left: for
  // work whose cost varies by item (causal attention) or that a time-sliced thread would hold up
  // (prefill GEMM panels). Chunks are not contiguous per thread; a pool of 1 makes one call.
  void ParallelForDynamic(size_t n, size_t grain, const std::function<void(size_t, size_t, int)>& fn);

  // ParallelForDynamic in about kStreamChunksPerThread contiguous chunks per thread: for loops that
  // stream memory (the decode GEMV over a weight matrix). Each chunk is still a long linear read for
  // the prefetcher, but a thread slowed down (time-sliced by the host, or a phone's little core)
  // no longer holds up the others at the end of every matrix, as equal halves did.
  static constexpr size_t kStreamChunksPerThread = 8;
  void ParallelForStreaming(size_t n, const std::function<void(size_t, size_t, int)>& fn) {
    const size_t chunks = kStreamChunksPerThread * static_cast<size_t>(n_threads_);
    ParallelForDynamic(n, (n + chunks - 1) / chunks, fn);
  }

 private:
  void WorkerLoop(int index);
  // Runs this thread's share of the current job.
  void RunShare(int index);
  // Spins (while spinning pays) then sleeps until `done()`; `sleepers` counts threads asleep on cv.
  template <class Done>
  void Wait(Done done, std::atomic<int>& sleepers, std::condition_variable& cv);
  // After a job: whether the workers picked it up quickly enough for spinning to be worth its CPU.
  // Only a job published to spinning workers is evidence: right after a pause in spinning the
  // workers are asleep and slow to start whatever the machine's load (judging by that job kept
  // spinning off for good once it was paused).
  void UpdateSpinPolicy(int64_t publish_ns, bool workers_spinning);

  int n_threads_;
  std::atomic<bool> spin_;
  std::vector<std::thread> workers_;

  // A decode step issues hundreds of small loops: waking sleeping threads through a mutex and a
  // condition variable for each costs more than the loop. So a new job is published by bumping
  // generation_; workers spin on it for a short while after each job before they sleep, and the
  // caller spins on pending_. The mutex and condition variables serve only threads that did sleep.
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_size_ = 0;
  size_t job_grain_ = 0;  // 0: one contiguous chunk per thread; else dynamic chunks of this size
  std::atomic<size_t> next_item_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  // Spinning pays only while every thread has a core to itself. On a machine loaded with other
  // work a spinning thread waits for its next time slice, while a sleeping one is woken with
  // priority; so when a spun-on job is picked up slowly, spinning stops for a while (then is tried
  // again). spin_pause_ counts the jobs left before the next try.
  std::atomic<int> spin_pause_{0};
  int slow_score_ = 0;  // recent slow starts (UpdateSpinPolicy; caller thread only)
  std::atomic<int64_t> last_start_ns_{0};  // latest time a worker started the current job
  std::atomic<int> workers_asleep_{0};
  std::atomic<int> caller_asleep_{0};
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
};

}  // namespace gemlet

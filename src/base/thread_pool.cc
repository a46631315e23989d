// ThreadPool implementation: one job at a time, split into one contiguous chunk per thread (or
// taken in chunks from a shared counter); threads spin briefly between jobs and sleep when none comes.
#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace gemlet {

namespace {
void ChunkBounds(size_t n, int parts, int index, size_t* begin, size_t* end) {
  const size_t base = n / parts, extra = n % parts;
  const size_t i = static_cast<size_t>(index);
  *begin = i * base + (i < extra ? i : extra);
  *end = *begin + base + (i < extra ? 1 : 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a thread polls before it sleeps: longer than the serial work between two loops of a
// decode step (norms, RoPE, a small matmul's tail), far shorter than a pause between requests.
constexpr auto kSpinTime = std::chrono::microseconds(50);
constexpr auto kPreemptedGap = std::chrono::microseconds(20);
// A spun-on job that a worker starts later than this after it was published means the threads are
// being time-sliced: stop spinning for kSpinBackoffJobs jobs.
constexpr int64_t kSlowStartNs = 20000;
constexpr int kSpinBackoffJobs = 500;
// A slow start adds kSlowStartWeight to a score that each quick start lowers by one; spinning
// pauses when the score reaches kSlowStartLimit (3 slow starts within ~20 jobs).
constexpr int kSlowStartWeight = 10, kSlowStartLimit = 21;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

ThreadPool::ThreadPool(int n_threads, bool spin) : n_threads_(n_threads < 1 ? 1 : n_threads), spin_(spin) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

// The sleeping side registers in `sleepers` before it re-checks `done` under the mutex; the waking
// side changes the state before it reads `sleepers` (all sequentially consistent), so either the
// sleeper sees the new state or the waker sees the sleeper and notifies under the mutex.
template <class Done>
void ThreadPool::Wait(Done done, std::atomic<int>& sleepers, std::condition_variable& cv) {
  // Spinning only pays while this thread keeps its core: a gap between two polls means the OS is
  // sharing the core with other work, and then a sleeping thread (woken with priority) is served
  // sooner than a preempted spinning one.
  if (spin_.load(std::memory_order_relaxed) && spin_pause_.load(std::memory_order_relaxed) == 0) {
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    for (unsigned i = 1;; ++i) {
      if (done()) return;
      CpuRelax();
      if (i % 16 == 0) {
        const auto now = std::chrono::steady_clock::now();
        if (now - start > kSpinTime || now - last > kPreemptedGap) break;
        last = now;
      }
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  sleepers.fetch_add(1);
  cv.wait(lock, done);
  sleepers.fetch_sub(1);
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t, size_t, int)>& fn) {
  ParallelForDynamic(n, 0, fn);
}

void ThreadPool::ParallelForDynamic(size_t n, size_t grain, const std::function<void(size_t, size_t, int)>& fn) {
  if (n == 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_size_ = n;
  job_grain_ = grain;
  next_item_.store(0, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1);
  const int64_t publish_ns = NowNs();
  last_start_ns_.store(publish_ns, std::memory_order_relaxed);
  generation_.fetch_add(1);  // publishes job_, job_size_, job_grain_ and next_item_
  // Whether the workers were spinning when the job came: only then does a slow start say that the
  // machine is time-slicing them (a sleeping worker is always slow to start).
  const bool workers_spinning = workers_asleep_.load() == 0;
  if (!workers_spinning) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
    }
    work_ready_.notify_all();
  }
  RunShare(0);
  Wait([this] { return pending_.load() == 0; }, caller_asleep_, work_done_);
  job_ = nullptr;
  UpdateSpinPolicy(publish_ns, workers_spinning);
}

void ThreadPool::RunShare(int index) {
  const auto& job = *job_;
  const size_t n = job_size_, grain = job_grain_;
  if (grain == 0) {
    size_t begin, end;
    ChunkBounds(n, n_threads_, index, &begin, &end);
    if (begin < end) job(begin, end, index);
    return;
  }
  for (size_t begin = next_item_.fetch_add(grain); begin < n; begin = next_item_.fetch_add(grain)) {
    job(begin, std::min(n, begin + grain), index);
  }
}

void ThreadPool::UpdateSpinPolicy(int64_t publish_ns, bool workers_spinning) {
  const int pause = spin_pause_.load(std::memory_order_relaxed);
  if (pause > 0) {
    spin_pause_.store(pause - 1, std::memory_order_relaxed);
  } else if (workers_spinning) {
    // One late start is a preemption this VM sees now and then; several close together mean the
    // cores are shared with other work.
    const bool slow = last_start_ns_.load(std::memory_order_relaxed) - publish_ns > kSlowStartNs;
    const int score = std::max(0, slow_score_ + (slow ? kSlowStartWeight : -1));
    slow_score_ = score >= kSlowStartLimit ? 0 : score;
    if (score >= kSlowStartLimit) spin_pause_.store(kSpinBackoffJobs, std::memory_order_relaxed);
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    Wait([&] { return stopping_.load() || generation_.load() != seen; }, workers_asleep_, work_ready_);
    if (stopping_.load()) return;
    // The caller waits for every worker before it publishes the next job, so this is seen + 1.
    seen = generation_.load();
    // Keep the latest start time (all workers race to write; the maximum is what matters).
    const int64_t start_ns = NowNs();
    int64_t prev = last_start_ns_.load(std::memory_order_relaxed);
    while (prev < start_ns && !last_start_ns_.compare_exchange_weak(prev, start_ns, std::memory_order_relaxed)) {
    }
    RunShare(index);
    if (pending_.fetch_sub(1) == 1 && caller_asleep_.load() > 0) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
      }
      work_done_.notify_one();
    }
  }
}

}  // namespace gemlet

// ThreadPool implementation: one job at a time, split into one contiguous chunk per thread.
#include "base/thread_pool.h"

namespace gemlet {

namespace {
void ChunkBounds(size_t n, int parts, int index, size_t* begin, size_t* end) {
  const size_t base = n / parts, extra = n % parts;
  const size_t i = static_cast<size_t>(index);
  *begin = i * base + (i < extra ? i : extra);
  *end = *begin + base + (i < extra ? 1 : 0);
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t, size_t, int)>& fn) {
  if (n == 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  size_t begin, end;
  ChunkBounds(n, n_threads_, 0, &begin, &end);
  if (begin < end) fn(begin, end, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t, int)>* job;
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      n = job_size_;
    }
    size_t begin, end;
    ChunkBounds(n, n_threads_, index, &begin, &end);
    if (begin < end) (*job)(begin, end, index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace gemlet

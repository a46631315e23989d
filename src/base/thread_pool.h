// ThreadPool: persistent worker threads for data-parallel loops (no thread creation per op).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gemlet {

class ThreadPool {
 public:
  // n_threads counts the calling thread: a pool of 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint chunks covering [0, n); returns when all are done.
  // Chunks are contiguous and balanced so that each thread streams its own slice of a weight matrix.
  void ParallelFor(size_t n, const std::function<void(size_t, size_t, int)>& fn);

 private:
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_size_ = 0;
  unsigned long generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace gemlet

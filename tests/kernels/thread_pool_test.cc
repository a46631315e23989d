// ThreadPool: every index visited exactly once, by contiguous balanced chunks (or dynamic ones),
// across the spinning fast path (back-to-back loops) and the sleeping path (pauses longer than the
// spin time).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace gemlet {
namespace {

void CheckCoverage(ThreadPool& pool, size_t n) {
  std::vector<std::atomic<int>> hits(n);
  std::atomic<int> calls{0};
  pool.ParallelFor(n, [&](size_t begin, size_t end, int thread) {
    EXPECT_LT(begin, end);
    EXPECT_GE(thread, 0);
    EXPECT_LT(thread, pool.size());
    calls.fetch_add(1);
    for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  EXPECT_LE(calls.load(), pool.size());
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t n : {1, 2, 3, 4, 5, 7, 64, 1000, 4099}) CheckCoverage(pool, n);
    ThreadPool sleeping(threads, /*spin=*/false);  // every hand-off through the condition variables
    EXPECT_FALSE(sleeping.spin());
    for (size_t n : {1, 2, 3, 64, 1000}) CheckCoverage(sleeping, n);
    sleeping.SetSpin(true);
    for (size_t n : {5, 4099}) CheckCoverage(sleeping, n);
  }
}

TEST(ThreadPool, ChunksAreContiguousAndBalanced) {
  ThreadPool pool(3);
  std::vector<std::pair<size_t, size_t>> chunks(3, {0, 0});
  pool.ParallelFor(10, [&](size_t begin, size_t end, int thread) { chunks[thread] = {begin, end}; });
  EXPECT_EQ(chunks[0], std::make_pair(size_t{0}, size_t{4}));
  EXPECT_EQ(chunks[1], std::make_pair(size_t{4}, size_t{7}));
  EXPECT_EQ(chunks[2], std::make_pair(size_t{7}, size_t{10}));
}

TEST(ThreadPool, DynamicChunksCoverEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t n : {1, 2, 7, 64, 1000, 4099}) {
      for (size_t grain : {1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelForDynamic(n, grain, [&](size_t begin, size_t end, int thread) {
          EXPECT_LT(begin, end);
          if (pool.size() > 1) {  // a pool of 1 runs it as one call
            EXPECT_LE(end - begin, grain);
          }
          EXPECT_GE(thread, 0);
          EXPECT_LT(thread, pool.size());
          for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " grain=" << grain << " i=" << i;
      }
    }
  }
}

TEST(ThreadPool, DynamicChunksGoToWhicheverThreadIsFree) {
  // Thread 1 stalls on its first chunk: the caller takes every other chunk meanwhile.
  ThreadPool pool(2);
  std::vector<int> owner(8, -1);
  std::atomic<bool> stalled{false};
  pool.ParallelForDynamic(8, 1, [&](size_t begin, size_t, int thread) {
    if (thread == 1 && !stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    owner[begin] = thread;
  });
  int by_caller = 0;
  for (int o : owner) by_caller += o == 0;
  EXPECT_GE(by_caller, 6);
}

TEST(ThreadPool, StreamingChunksAreContiguousAndCoverEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const size_t chunks = ThreadPool::kStreamChunksPerThread * static_cast<size_t>(threads);
    for (size_t n : {1, 5, 16, 100, 640, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<size_t> calls{0};
      pool.ParallelForStreaming(n, [&](size_t begin, size_t end, int) {
        EXPECT_LT(begin, end);
        calls.fetch_add(1);
        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      // No more chunks than asked for (each a contiguous range), and a pool of 1 makes one call.
      EXPECT_LE(calls.load(), threads == 1 ? 1 : chunks) << "n=" << n;
    }
  }
}

TEST(ThreadPool, ManyBackToBackLoops) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  for (int i = 0; i < 20000; ++i) {
    pool.ParallelFor(3, [&](size_t begin, size_t end, int) { sum.fetch_add(static_cast<long>(end - begin)); });
  }
  EXPECT_EQ(sum.load(), 60000);
}

TEST(ThreadPool, WakesSleepingWorkersAndCaller) {
  ThreadPool pool(2);
  for (int i = 0; i < 20; ++i) {
    // Idle long enough for the workers to go to sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CheckCoverage(pool, 17);
    // A worker slower than the caller's spin time puts the caller to sleep.
    std::atomic<int> done{0};
    pool.ParallelFor(2, [&](size_t, size_t, int thread) {
      if (thread == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      done.fetch_add(1);
    });
    EXPECT_EQ(done.load(), 2);
  }
}

TEST(ThreadPool, DestroysWhileWorkersSpinOrSleep) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(4);
    CheckCoverage(pool, 100);
    if (i % 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace
}  // namespace gemlet

// KernelContext: what the kernels compute with — the threads, the kernel table, how it is tuned, and
// the scratch memory the kernels need beyond their inputs and outputs. A session owns one; nothing
// about how kernels run is process-wide, so two engines in one process may run different tables and
// a governor may change them between two evaluations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "base/thread_pool.h"

#include "gemlet/types.hpp"

namespace gemlet {

struct KernelTable;

// How far ahead decode prefetches weights with this table on this CPU (KernelOptions::kPrefetchAuto
// resolved): 0 for the AVX-512 tables on AMD, 2048 otherwise (kernels.cc says why).
size_t DefaultDecodePrefetchBytes(const KernelTable& kernels);

// The knobs of the fast paths are the public KernelOptions (gemlet/types.hpp; each measured in
// bench/RESULTS.md). A context runs the table it is given: the options' kernels name is the caller's
// to resolve (KernelsNamed).

// Grow-only buffers, one set per pool thread: a kernel asks for thread t's buffer `slot` of at
// least n elements and gets memory that stays valid until the next request for that slot. Nothing
// is allocated in steady state; Bytes() is what a memory report counts.
class KernelScratch {
 public:
  enum Slot {
    kRowDecode,      // the reference matmul's decoded weight row (per thread)
    kActivations,    // quantized activations of a matmul (caller thread)
    kActPairSums,    // Q4_K packed decode: pair sums of the activation blocks (caller thread)
    kActQ,           // VNNI activations: values, scales, sums, zero points (caller thread)
    kActD,
    kActSum,
    kActZero,
    kPanelQ,         // VNNI GEMM: one decoded panel of weights (per thread)
    kPanelScale,
    kPanelOffset,
    kActPairQ,         // NEON i8mm GEMM: activations two tokens per register (caller thread)
    kActPairD,
    kActPairSum,
    kPanelPairQ,       // NEON i8mm GEMM: the panel re-laid for smmla, its scales and offsets per
    kPanelPairScale,   // row pair (per thread)
    kPanelPairOffset,
    kTowerActT,        // the towers' GEMM: the activations transposed by chunks (caller thread)
    kTowerRowsF32,     // a tile of weight rows in float, one block of k (per thread)
    kTowerAcc,         // and a task's sums between blocks of k (per thread)
    kSlotCount
  };

  explicit KernelScratch(int n_threads) : threads_(static_cast<size_t>(n_threads < 1 ? 1 : n_threads)) {}

  template <class T>
  T* Get(int thread, Slot slot, size_t n) {
    return static_cast<T*>(threads_[static_cast<size_t>(thread)][slot].Reserve(n * sizeof(T)));
  }
  size_t Bytes() const;
  // Frees every buffer (memory pressure between calls); the next call grows them again.
  void Release();
  int n_threads() const { return static_cast<int>(threads_.size()); }
  void EnsureThreads(int n) {
    if (n > n_threads()) threads_.resize(static_cast<size_t>(n));
  }

 private:
  // 64-byte aligned, so that any vector load the kernels use is legal on it.
  class Buffer {
   public:
    void* Reserve(size_t bytes);
    size_t capacity() const { return capacity_; }
    void Release() {
      data_.reset();
      capacity_ = 0;
    }

   private:
    struct Free {
      void operator()(void* p) const { ::operator delete(p, std::align_val_t(64)); }
    };
    std::unique_ptr<void, Free> data_;
    size_t capacity_ = 0;
  };
  std::vector<std::array<Buffer, kSlotCount>> threads_;
};

class KernelContext {
 public:
  // kernels: null for the best table this CPU runs (BestKernels()).
  explicit KernelContext(int n_threads, const KernelTable* kernels = nullptr, const KernelOptions& options = {});

  ThreadPool& pool() { return *pool_; }
  int n_threads() const { return pool_->size(); }
  const KernelTable& kernels() const { return *kernels_; }
  // The options in force, prefetch_bytes resolved (never kPrefetchAuto).
  const KernelOptions& options() const { return options_; }
  size_t prefetch_bytes() const { return static_cast<size_t>(options_.prefetch_bytes); }
  KernelScratch& scratch() { return *scratch_; }

  // Between evaluations only (never while a kernel runs on this context).
  void SetKernels(const KernelTable& kernels, const KernelOptions& options);
  // Runs later work on n threads; the scratch keeps the buffers it has (grown for the most threads).
  void SetThreads(int n);

 private:
  const KernelTable* kernels_;
  KernelOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KernelScratch> scratch_;
};

}  // namespace gemlet

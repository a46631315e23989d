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

namespace gemlet {

struct KernelTable;

// How far ahead decode prefetches weights on this CPU (KernelTuning's default, and the engine's
// when its options leave it to the CPU): 0 on AMD, 2048 elsewhere (kernels.cc).
size_t DefaultDecodePrefetchBytes();

// Knobs of the fast paths (each measured in bench/RESULTS.md); the defaults are what runs fastest.
struct KernelTuning {
  // How far ahead of the rows being computed decode prefetches weights, in bytes (0: off).
  size_t prefetch_bytes = DefaultDecodePrefetchBytes();
  // Repack weights on first use into the layout the kernels stream fastest (off: read as stored).
  bool pack_weights = true;
  // Prefill through the VNNI panel GEMM where the table has it (off: the per-row tiles).
  bool vnni_gemm = true;
  // Pool threads poll briefly for the next loop of a step before they sleep.
  bool spin_wait = true;
};

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
  explicit KernelContext(int n_threads, const KernelTable* kernels = nullptr, const KernelTuning& tuning = {});

  ThreadPool& pool() { return *pool_; }
  int n_threads() const { return pool_->size(); }
  const KernelTable& kernels() const { return *kernels_; }
  const KernelTuning& tuning() const { return tuning_; }
  KernelScratch& scratch() { return *scratch_; }

  // Between evaluations only (never while a kernel runs on this context).
  void SetKernels(const KernelTable& kernels, const KernelTuning& tuning);
  // Runs later work on n threads; the scratch keeps the buffers it has (grown for the most threads).
  void SetThreads(int n);

 private:
  const KernelTable* kernels_;
  KernelTuning tuning_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KernelScratch> scratch_;
};

}  // namespace gemlet

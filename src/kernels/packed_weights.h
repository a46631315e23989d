// PackedWeights: a weight matrix rearranged once for the SIMD kernels of the CPU in use, 16 rows
// interleaved so that one vector holds the same 4 values of 16 rows (kernels/packed-inl.h gives
// the layouts). Decode then produces 16 outputs per vector with each row's block scales loaded as
// one vector, instead of summing lanes per row and per block.
//
// A WeightMatrix may point to a PackedWeights slot (its owner, e.g. the Model, keeps the slot).
// The slot is filled the first time a kernel that has a packed layout for the matrix runs it, so
// loading a model stays a map and a few checks, and tensors that are never multiplied (an
// embedding only looked up row by row) are never packed. When the rows come from a read-only file
// mapping, their pages are then dropped from the process: the weights are resident once, packed.
// Rows read later through `data` (embedding lookups, the reference kernels) fault back in from the
// page cache.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

#include "base/mapped_file.h"
#include "base/thread_pool.h"

namespace gemlet {

struct WeightMatrix;

class PackedWeights {
 public:
  // A kernel's packed layout: groups of kGroupRows rows, each group_bytes(w) long.
  static constexpr int64_t kGroupRows = 16;
  struct Layout {
    size_t (*group_bytes)(const WeightMatrix& w);  // 0: no packed layout for w
    // Writes groups [begin, end) of w to dst + group * group_bytes(w).
    void (*pack)(const WeightMatrix& w, size_t begin, size_t end, uint8_t* dst);
  };

  // source: the mapping the rows live in when they may be released once packed; null to keep them.
  explicit PackedWeights(const MappedFile* source) : source_(source) {}
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  // The packed bytes of w in `layout`, packing them on the first call (thread-safe: later callers
  // wait for it); null when the layout does not take w, memory ran out, or the slot was filled
  // for another layout (a test running several kernel tables over one matrix).
  const uint8_t* Get(const WeightMatrix& w, const Layout& layout, ThreadPool& pool);

  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  // GEMLET_PACK=0 turns packing off (A/B measurements): every kernel reads the rows as stored.
  static bool Enabled();

 private:
  const MappedFile* source_;
  std::once_flag once_;
  const Layout* layout_ = nullptr;
  uint8_t* data_ = nullptr;
  std::atomic<size_t> bytes_{0};
};

// The slots of one model: stable addresses, created while binding, freed with the model.
class PackedWeightStore {
 public:
  explicit PackedWeightStore(const MappedFile* source) : source_(source) {}
  PackedWeights* NewSlot() { return &slots_.emplace_back(source_); }
  // Bytes of packed weights made so far.
  size_t PackedBytes() const;

 private:
  const MappedFile* source_;
  std::deque<PackedWeights> slots_;
};

}  // namespace gemlet

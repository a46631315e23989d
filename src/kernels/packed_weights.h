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
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"

namespace gemlet {

class PackedWeightStore;

class PackedWeights {
 public:
  // A kernel's packed layout: groups of kGroupRows rows, each group_bytes(w) long.
  static constexpr int64_t kGroupRows = 16;
  using Layout = PackedLayout;

  // source: the mapping the rows live in when they may be released once packed; null to keep them.
  // store: the model's slots (to release packed neighbours again), or null.
  explicit PackedWeights(const MappedFile* source, PackedWeightStore* store = nullptr) : source_(source), store_(store) {}
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  // The packed bytes of w in `layout`, packing them on the first call (thread-safe: later callers
  // wait for it); null when the layout does not take w, memory ran out, or the slot was filled
  // for another layout (a test running several kernel tables over one matrix).
  const uint8_t* Get(const WeightMatrix& w, const Layout& layout, ThreadPool& pool);

  size_t bytes() const { return bytes_.load(std::memory_order_acquire); }
  // Takes `data` (bytes in `layout`, owned by someone else: a mapped cache file) as this slot's
  // packed copy, unless the slot was packed already. Returns whether it took it.
  bool Adopt(const uint8_t* data, size_t bytes, const Layout& layout);
  // The packed bytes if the slot holds them (for writing a cache file), else null.
  const uint8_t* data() const { return bytes() > 0 ? data_ : nullptr; }
  const Layout* layout() const { return bytes() > 0 ? layout_ : nullptr; }
  bool in_memory() const { return bytes() > 0 && owned_; }

  // For rows still read as stored once the matrix is packed (a tied embedding's lookups): drops
  // [begin, begin + size) of w's rows from the process again, as the packing did. A page fault
  // maps up to 2 MiB around what it reads, so without this every lookup would bring back a large
  // piece of a matrix that is already resident packed. Does nothing before packing.
  void ReleaseAfterRead(const WeightMatrix& w, const uint8_t* begin, size_t size) const;

 private:
  const MappedFile* source_;
  PackedWeightStore* store_;
  std::once_flag once_;
  const Layout* layout_ = nullptr;
  const uint8_t* data_ = nullptr;
  bool owned_ = false;  // data_ is our anonymous mapping (else a cache file's pages)
  std::atomic<size_t> bytes_{0};
};

// The slots of one model: stable addresses, created while binding, freed with the model.
class PackedWeightStore {
 public:
  explicit PackedWeightStore(const MappedFile* source) : source_(source) {}
  // A slot for w, remembered so that all such matrices can be packed ahead of use (Prepare) and
  // kept in the packed-weight cache file (kernels/packed_cache.h).
  PackedWeights* NewSlotFor(const WeightMatrix& w) {
    WeightMatrix& m = matrices_.emplace_back(w);
    m.packed = &slots_.emplace_back(source_, this);
    return m.packed;
  }
  // Packs the remembered matrices now, in the order they were bound (PrepareMatMul), and reads in
  // those mapped from a cache file, until done or until *stop is set.
  void Prepare(KernelContext& ctx, const std::atomic<bool>* stop) const;
  // Bytes of packed weights made so far, and of those the ones in anonymous memory (not mapped from
  // a cache file).
  size_t PackedBytes() const;
  size_t PackedBytesInMemory() const;
  // The remembered matrices (those Prepare packs), each with its slot.
  const std::vector<WeightMatrix>& matrices() const { return matrices_; }
  const MappedFile* source() const { return source_; }
  // Keeps a mapped cache file alive while slots point into it (kernels/packed_cache.h).
  void KeepMapping(std::unique_ptr<MappedFile> mapping) { mappings_.push_back(std::move(mapping)); }

  // Called once [begin, begin + size) of the mapping is packed: releases it, and again the packed
  // ranges near it. Reading a matrix to pack it faults in up to 2 MiB around each read, which maps
  // the edges of neighbours packed (and released) before it back into the process.
  void ReleasePacked(const uint8_t* begin, size_t size);
  // After a read of [begin, begin + size) of the mapping: releases the packed ranges within reach
  // of the large folios that read faulted in.
  void ReleasePackedNear(const uint8_t* begin, size_t size);

 private:
  const MappedFile* source_;
  std::deque<PackedWeights> slots_;
  std::vector<WeightMatrix> matrices_;
  std::vector<std::unique_ptr<MappedFile>> mappings_;  // slots adopted from them never free their pages
  std::mutex mutex_;
  std::vector<std::pair<const uint8_t*, size_t>> packed_ranges_;
};

}  // namespace gemlet

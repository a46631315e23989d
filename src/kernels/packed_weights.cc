// PackedWeights: packing on first use, and releasing the stored rows' pages afterwards.
#include "kernels/packed_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/kernels.h"

namespace gemlet {

const uint8_t* PackedWeights::Get(const WeightMatrix& w, const Layout& layout, ThreadPool& pool) {
  std::call_once(once_, [&] {
    const size_t group_bytes = layout.group_bytes(w);
    if (group_bytes == 0) return;
    const size_t n_groups = static_cast<size_t>(w.n_out / kGroupRows), bytes = n_groups * group_bytes;
    // Anonymous pages of their own (2 MiB pages where the kernel allows): 64-byte aligned, and
    // returned to the system whole when the model goes.
    void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return;  // no memory to spare: the kernels read the rows as stored
    ::madvise(mem, bytes, MADV_HUGEPAGE);
    auto* dst = static_cast<uint8_t*>(mem);
    // Slabs of about 8 MiB: the stored rows of a slab are released as soon as it is packed, so the
    // packed copy and the file pages overlap by one slab (an output head is 0.3-0.6 GB).
    const size_t slab = std::max<size_t>(1, (size_t{8} << 20) / group_bytes);
    const size_t stored_group_bytes = static_cast<size_t>(kGroupRows) * w.row_bytes;
    for (size_t g0 = 0; g0 < n_groups; g0 += slab) {
      const size_t g1 = std::min(n_groups, g0 + slab);
      pool.ParallelForDynamic(g1 - g0, 1, [&](size_t begin, size_t end, int) {
        layout.pack(w, g0 + begin, g0 + end, dst + (g0 + begin) * group_bytes);
      });
      if (source_ != nullptr) {
        const uint8_t* rows = w.data + g0 * stored_group_bytes;
        source_->ReleasePagesAfterRead(rows, (g1 - g0) * stored_group_bytes, rows, (g1 - g0) * stored_group_bytes);
      }
    }
    if (store_ != nullptr) store_->ReleasePacked(w.data, n_groups * stored_group_bytes);
    data_ = dst;
    owned_ = true;
    layout_ = &layout;
    bytes_.store(bytes, std::memory_order_release);
  });
  return layout_ == &layout ? data_ : nullptr;
}

bool PackedWeights::Adopt(const uint8_t* data, size_t bytes, const Layout& layout) {
  bool taken = false;
  std::call_once(once_, [&] {
    data_ = data;
    owned_ = false;
    layout_ = &layout;
    bytes_.store(bytes, std::memory_order_release);
    taken = true;
  });
  return taken;
}

void PackedWeights::ReleaseAfterRead(const WeightMatrix& w, const uint8_t* begin, size_t size) const {
  if (source_ == nullptr || bytes() == 0) return;
  if (store_ != nullptr) store_->ReleasePackedNear(begin, size);
  else source_->ReleasePagesAfterRead(begin, size, w.data, static_cast<size_t>(w.n_out) * w.row_bytes);
}

PackedWeights::~PackedWeights() {
  if (data_ != nullptr && owned_) ::munmap(const_cast<uint8_t*>(data_), bytes());
}

void PackedWeightStore::ReleasePacked(const uint8_t* begin, size_t size) {
  if (source_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    packed_ranges_.emplace_back(begin, size);
  }
  ReleasePackedNear(begin, size);
}

void PackedWeightStore::ReleasePackedNear(const uint8_t* begin, size_t size) {
  if (source_ == nullptr) return;
  constexpr size_t kNear = size_t{2} << 20;  // the largest folio a fault maps
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(begin), hi = lo + size;
  const uintptr_t near_lo = lo > kNear ? lo - kNear : 0, near_hi = hi + kNear;
  for (const auto& [b, n] : packed_ranges_) {
    const uintptr_t r_lo = std::max(near_lo, reinterpret_cast<uintptr_t>(b));
    const uintptr_t r_hi = std::min(near_hi, reinterpret_cast<uintptr_t>(b) + n);
    if (r_lo < r_hi) source_->ReleasePagesAfterRead(reinterpret_cast<const uint8_t*>(r_lo), r_hi - r_lo, b, n);
  }
}

namespace {

// Reads one byte of every page of [p, p + n): what the kernels will read is then resident and mapped
// into the process. Asked for first as a whole (MADV_WILLNEED), so that the disk reads ahead in
// large requests instead of one fault at a time.
void PageIn(const uint8_t* p, size_t n) {
  constexpr size_t kPage = 4096;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
  ::madvise(reinterpret_cast<void*>(begin), reinterpret_cast<uintptr_t>(p) + n - begin, MADV_WILLNEED);
  uint8_t sum = 0;
  for (size_t i = 0; i < n; i += kPage) sum ^= static_cast<const volatile uint8_t*>(p)[i];
  if (n > 0) sum ^= static_cast<const volatile uint8_t*>(p)[n - 1];
  (void)sum;  // volatile: the reads themselves are the point
}

}  // namespace

void PackedWeightStore::Prepare(KernelContext& ctx, const std::atomic<bool>* stop) const {
  for (const WeightMatrix& w : matrices_) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return;
    PrepareMatMul(w, ctx);
    // Mapped from a packed-weight cache file, the packed bytes are still on disk or in the page
    // cache only: read in now, the first evaluation (a chat's first answer, a MoE token's first
    // choice of an expert) does not wait on the disk.
    if (w.packed->data() != nullptr && !w.packed->in_memory()) PageIn(w.packed->data(), w.packed->bytes());
  }
}

size_t PackedWeightStore::PackedBytes() const {
  size_t total = 0;
  for (const PackedWeights& s : slots_) total += s.bytes();
  return total;
}

size_t PackedWeightStore::PackedBytesInMemory() const {
  size_t total = 0;
  for (const PackedWeights& s : slots_) total += s.in_memory() ? s.bytes() : 0;
  return total;
}

}  // namespace gemlet

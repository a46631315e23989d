// PackedWeights: packing on first use, and releasing the stored rows' pages afterwards.
#include "kernels/packed_weights.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "kernels/kernels.h"

namespace gemlet {

bool PackedWeights::Enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("GEMLET_PACK");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return enabled;
}

const uint8_t* PackedWeights::Get(const WeightMatrix& w, const Layout& layout, ThreadPool& pool) {
  std::call_once(once_, [&] {
    const size_t bytes = Enabled() ? layout.bytes(w) : 0;
    if (bytes == 0) return;
    // Anonymous pages of their own (2 MiB pages where the kernel allows): 64-byte aligned, and
    // returned to the system whole when the model goes.
    void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return;  // no memory to spare: the kernels read the rows as stored
    ::madvise(mem, bytes, MADV_HUGEPAGE);
    layout.pack(w, static_cast<uint8_t*>(mem), pool);
    data_ = static_cast<uint8_t*>(mem);
    bytes_.store(bytes, std::memory_order_relaxed);
    layout_ = &layout;
    if (source_ != nullptr) {
      const size_t stored = static_cast<size_t>(w.n_out) * w.row_bytes;
      source_->ReleasePagesAfterRead(w.data, stored, w.data, stored);
    }
  });
  return layout_ == &layout ? data_ : nullptr;
}

PackedWeights::~PackedWeights() {
  if (data_ != nullptr) ::munmap(data_, bytes());
}

size_t PackedWeightStore::PackedBytes() const {
  size_t total = 0;
  for (const PackedWeights& s : slots_) total += s.bytes();
  return total;
}

}  // namespace gemlet

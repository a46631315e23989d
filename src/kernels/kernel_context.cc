// KernelContext and its scratch.
#include "kernels/kernel_context.h"

#include <algorithm>

#include "kernels/kernel_table.h"

namespace gemlet {

void* KernelScratch::Buffer::Reserve(size_t bytes) {
  if (bytes > capacity_) {
    // Grown by half again at least, so that a slowly growing batch size reallocates rarely.
    const size_t grown = std::max(bytes, capacity_ + capacity_ / 2);
    data_.reset(::operator new(grown, std::align_val_t(64)));
    capacity_ = grown;
  }
  return data_.get();
}

size_t KernelScratch::Bytes() const {
  size_t total = 0;
  for (const auto& slots : threads_) {
    for (const Buffer& b : slots) total += b.capacity();
  }
  return total;
}

void KernelScratch::Release() {
  for (auto& slots : threads_) {
    for (Buffer& b : slots) b.Release();
  }
}

namespace {
KernelOptions WithPrefetchResolved(KernelOptions o, const KernelTable& kernels) {
  if (o.prefetch_bytes == KernelOptions::kPrefetchAuto) o.prefetch_bytes = static_cast<int>(DefaultDecodePrefetchBytes(kernels));
  return o;
}
}  // namespace

KernelContext::KernelContext(int n_threads, const KernelTable* kernels, const KernelOptions& options)
    : kernels_(kernels != nullptr ? kernels : &BestKernels()),
      options_(WithPrefetchResolved(options, *kernels_)),
      pool_(std::make_unique<ThreadPool>(n_threads, options.spin_wait)),
      scratch_(std::make_unique<KernelScratch>(n_threads)) {}

void KernelContext::SetKernels(const KernelTable& kernels, const KernelOptions& options) {
  kernels_ = &kernels;
  options_ = WithPrefetchResolved(options, kernels);
  pool_->SetSpin(options.spin_wait);
}

void KernelContext::SetThreads(int n) {
  n = std::max(1, n);
  if (n == pool_->size()) return;
  pool_ = std::make_unique<ThreadPool>(n, options_.spin_wait);
  scratch_->EnsureThreads(n);
}

}  // namespace gemlet

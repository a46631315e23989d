// The drivers every packed layout shares (kernels/packed_weights.h): a matrix packs in groups of
// PackedWeights::kGroupRows rows when its rows are whole groups of whole blocks, and group g is
// T::Pack of its rows. T gives kBlockValues, kBlockBytes (one block of a group) and Pack. Used by
// the AVX-512 layouts (packed-inl.h) and the ARM ones (matmul_neon.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/packed_weights.h"

namespace gemlet::packing {

template <class T>
size_t GroupBytes(const WeightMatrix& w) {
  if (w.n_out % PackedWeights::kGroupRows != 0 || w.n_in % T::kBlockValues != 0) return 0;
  return static_cast<size_t>(w.n_in / T::kBlockValues) * T::kBlockBytes;
}

template <class T>
void Pack(const WeightMatrix& w, size_t begin, size_t end, uint8_t* dst) {
  const size_t group_bytes = GroupBytes<T>(w);
  for (size_t g = begin; g < end; ++g) {
    T::Pack(w.Row(static_cast<int64_t>(g) * PackedWeights::kGroupRows), w.row_bytes, w.n_in / T::kBlockValues,
            dst + (g - begin) * group_bytes);
  }
}

template <class T>
const PackedLayout& LayoutOf() {
  static const PackedLayout layout{&GroupBytes<T>, &Pack<T>};
  return layout;
}

}  // namespace gemlet::packing

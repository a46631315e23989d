// The reference dot product of a stored row with float activations.
#include "tensor/dot.h"

#include <algorithm>
#include <cstdint>

#include "tensor/quant_blocks.h"

namespace gemlet {

float DotRowRef(DType wtype, const void* w_row, const float* x, int64_t n) {
  const DTypeInfo& info = GetDTypeInfo(wtype);
  // A whole number of blocks per step; 1-value types (F32, F16, BF16) go kBlockK at a time.
  const int64_t step = info.block_size == 1 ? kBlockK : info.block_size;
  const int64_t step_bytes = step / info.block_size * info.block_bytes;
  const uint8_t* w = static_cast<const uint8_t*>(w_row);
  float buf[kBlockK];
  float sum = 0.0f;
  for (int64_t i = 0; i < n; i += step, w += step_bytes) {
    const int64_t count = std::min(step, n - i);
    DequantizeRow(wtype, w, buf, count);
    for (int64_t j = 0; j < count; ++j) sum += buf[j] * x[i + j];
  }
  return sum;
}

}  // namespace gemlet

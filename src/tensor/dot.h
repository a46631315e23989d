// DotRowRef: the scalar reference dot product of one stored (possibly quantized) row with floats.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace gemlet {

// sum_i w[i] * x[i] over n values, where w is one row of `wtype` (n a multiple of its block size).
// Dequantizes block by block into a stack buffer and accumulates in float, in index order, with no
// allocation: the definition that SIMD matvec kernels are tested against.
float DotRowRef(DType wtype, const void* w_row, const float* x, int64_t n);

}  // namespace gemlet

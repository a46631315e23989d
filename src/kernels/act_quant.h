// Activation rows quantized to 8 bits for the integer matmul paths (the SIMD kernels' side of
// llama.cpp's Q8_0/Q8_1 and Q8_K "vec_dot_type"), with scalar definitions for the tests.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/quant_blocks.h"

namespace gemlet {

// 32 activations: x ~= d * qs[i], qs in -127..127; s = d * sum(qs) serves weights with an offset
// (Q4_0's -8, Q4_1's min): sum_i (a q_i + b) x_i = a d sum(q_i qs_i) + b s. Like ggml's Q8_1 but
// with float scales, which keeps the only rounding the 8-bit one.
struct BlockQ8x32 {
  float d;
  float s;
  int8_t qs[kBlock32];
};
static_assert(sizeof(BlockQ8x32) == 40);

// 256 activations use gemlet's BlockQ8_K (tensor/quant_blocks.h): d float, qs in -127..127, and
// bsums[g] = sum of qs over group g of 16 (for the K types' per-group offsets and mins).

// The scalar definition both quantizers follow: d = max|x| / 127, q = round-half-even(x / d) (the
// SIMD code multiplies by 127 / max|x| instead, which may move a value by one step at a tie; the
// tests bound what that changes). All-zero blocks get d = 0 and q = 0.
inline float ActScale(float amax) { return amax / 127.0f; }

}  // namespace gemlet

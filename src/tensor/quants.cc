// Reference (scalar) quantize / dequantize of one row: dispatch, F16/BF16, and the 32-value types.
// The K types live in quants_k.cc. Dequantization is bit-exact with ggml; the 32-value quantizers
// give llama.cpp's reference bytes, so the arithmetic that picks a level is kept in its order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/half.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_math.h"

namespace gemlet {

namespace {

constexpr int kHalf = kBlock32 / 2;

// C's float -> integer conversion (truncation toward zero) of a value expected in [0, max], defined
// for every input: NaN gives 0, anything past max gives max.
inline int TruncLevel(float v, int max) {
  if (!(v > 0.0f)) return 0;
  if (v >= static_cast<float>(max)) return max;
  return static_cast<int>(v);
}

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);  // GGUF is little-endian, as is every host gemlet runs on
  return v;
}

// The 32-value quantizers, llama.cpp's reference rounding: one scale per block taken from its range
// (stored as f16), levels from the unrounded float reciprocal by truncating x / d + offset + 0.5.

// Symmetric blocks (Q4_0, Q5_0): x ~= d * (q - half), q in 0..2 half - 1, the signed extreme on
// q = 0 (d = extreme / -half). Returns d.
float SymmetricLevels(const float* x, int half, uint8_t* q) {
  const float d = SignedAbsMax(x, kBlock32) / -static_cast<float>(half);
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  const float center = static_cast<float>(half) + 0.5f;  // the zero level, plus the rounding half
  for (int j = 0; j < kBlock32; ++j) q[j] = static_cast<uint8_t>(TruncLevel(x[j] * inv + center, 2 * half - 1));
  return d;
}

// Blocks with a minimum (Q4_1, Q5_1): x ~= d * q + lo, q in 0..top spanning the block's range.
// Returns d, *lo the minimum.
float RangeLevels(const float* x, int top, uint8_t* q, float* lo) {
  float low = std::numeric_limits<float>::max();
  float high = -std::numeric_limits<float>::max();
  for (int j = 0; j < kBlock32; ++j) {
    low = std::min(low, x[j]);
    high = std::max(high, x[j]);
  }
  const float d = (high - low) / static_cast<float>(top);
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock32; ++j) q[j] = static_cast<uint8_t>(TruncLevel((x[j] - low) * inv + 0.5f, top));
  *lo = low;
  return d;
}

// Value j and j + 16 share byte j: low and high nibble.
void PackNibbles32(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kHalf; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + kHalf] & 0xF) << 4));
}

// Bit 4 of the level of value j is bit j of the 32-bit word (Q5_0, Q5_1).
void PackFifthBits32(const uint8_t* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kBlock32; ++j) bits |= static_cast<uint32_t>(q[j] >> 4) << j;
  std::memcpy(qh, &bits, sizeof bits);
}

}  // namespace

// ---- dequantization: each product below is exact in float, so only `+ m` rounds ----

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, y += kBlock32) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kHalf; ++j) {
      // (q - 8) * d keeps the sign of zero: q == 8 with d < 0 gives -0.0, as ggml does.
      y[j] = static_cast<float>((x[b].qs[j] & 0xF) - 8) * d;
      y[j + kHalf] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeRowQ4_1(const BlockQ4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, y += kBlock32) {
    const float d = F16ToF32(x[b].d);
    const float m = F16ToF32(x[b].m);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(x[b].qs[j] & 0xF) * d + m;
      y[j + kHalf] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, y += kBlock32) {
    const float d = F16ToF32(x[b].d);
    const uint32_t qh = LoadU32(x[b].qh);
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = (x[b].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int q1 = (x[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
      y[j] = static_cast<float>(q0 - 16) * d;
      y[j + kHalf] = static_cast<float>(q1 - 16) * d;
    }
  }
}

void DequantizeRowQ5_1(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, y += kBlock32) {
    const float d = F16ToF32(x[b].d);
    const float m = F16ToF32(x[b].m);
    const uint32_t qh = LoadU32(x[b].qh);
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = (x[b].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int q1 = (x[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
      y[j] = static_cast<float>(q0) * d + m;
      y[j + kHalf] = static_cast<float>(q1) * d + m;
    }
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, y += kBlock32) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kBlock32; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

// ---- quantization ----

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    uint8_t q[kBlock32];
    y[b].d = F32ToF16(SymmetricLevels(x, 8, q));
    PackNibbles32(q, y[b].qs);
  }
}

void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    uint8_t q[kBlock32];
    float lo;
    y[b].d = F32ToF16(RangeLevels(x, 15, q, &lo));
    y[b].m = F32ToF16(lo);
    PackNibbles32(q, y[b].qs);
  }
}

void QuantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    uint8_t q[kBlock32];
    y[b].d = F32ToF16(SymmetricLevels(x, 16, q));
    PackNibbles32(q, y[b].qs);
    PackFifthBits32(q, y[b].qh);
  }
}

void QuantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    uint8_t q[kBlock32];
    float lo;
    y[b].d = F32ToF16(RangeLevels(x, 31, q, &lo));
    y[b].m = F32ToF16(lo);
    PackNibbles32(q, y[b].qs);
    PackFifthBits32(q, y[b].qh);
  }
}

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    float amax = 0.0f;
    for (int j = 0; j < kBlock32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < kBlock32; ++j) {
      const float q = std::round(x[j] * id);  // half away from zero, as roundf
      y[b].qs[j] = static_cast<int8_t>(std::fmin(127.0f, std::fmax(-127.0f, q)));
    }
  }
}

// ---- row dispatch ----

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(s[i]);
      return;
    }
    case DType::kQ4_0: return DequantizeRowQ4_0(static_cast<const BlockQ4_0*>(src), dst, n);
    case DType::kQ4_1: return DequantizeRowQ4_1(static_cast<const BlockQ4_1*>(src), dst, n);
    case DType::kQ5_0: return DequantizeRowQ5_0(static_cast<const BlockQ5_0*>(src), dst, n);
    case DType::kQ5_1: return DequantizeRowQ5_1(static_cast<const BlockQ5_1*>(src), dst, n);
    case DType::kQ8_0: return DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(src), dst, n);
    case DType::kQ2_K: return DequantizeRowQ2_K(static_cast<const BlockQ2_K*>(src), dst, n);
    case DType::kQ3_K: return DequantizeRowQ3_K(static_cast<const BlockQ3_K*>(src), dst, n);
    case DType::kQ4_K: return DequantizeRowQ4_K(static_cast<const BlockQ4_K*>(src), dst, n);
    case DType::kQ5_K: return DequantizeRowQ5_K(static_cast<const BlockQ5_K*>(src), dst, n);
    case DType::kQ6_K: return DequantizeRowQ6_K(static_cast<const BlockQ6_K*>(src), dst, n);
    case DType::kQ8_K: return DequantizeRowQ8_K(static_cast<const BlockQ8_K*>(src), dst, n);
    default:
      std::abort();  // callers check DTypeInfo::can_compute first
  }
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToF16(src[i]);
      return;
    }
    case DType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToBf16(src[i]);
      return;
    }
    case DType::kQ4_0: return QuantizeRowQ4_0(src, static_cast<BlockQ4_0*>(dst), n);
    case DType::kQ4_1: return QuantizeRowQ4_1(src, static_cast<BlockQ4_1*>(dst), n);
    case DType::kQ5_0: return QuantizeRowQ5_0(src, static_cast<BlockQ5_0*>(dst), n);
    case DType::kQ5_1: return QuantizeRowQ5_1(src, static_cast<BlockQ5_1*>(dst), n);
    case DType::kQ8_0: return QuantizeRowQ8_0(src, static_cast<BlockQ8_0*>(dst), n);
    case DType::kQ2_K: return QuantizeRowQ2_K(src, static_cast<BlockQ2_K*>(dst), n);
    case DType::kQ3_K: return QuantizeRowQ3_K(src, static_cast<BlockQ3_K*>(dst), n);
    case DType::kQ4_K: return QuantizeRowQ4_K(src, static_cast<BlockQ4_K*>(dst), n);
    case DType::kQ5_K: return QuantizeRowQ5_K(src, static_cast<BlockQ5_K*>(dst), n);
    case DType::kQ6_K: return QuantizeRowQ6_K(src, static_cast<BlockQ6_K*>(dst), n);
    case DType::kQ8_K: return QuantizeRowQ8_K(src, static_cast<BlockQ8_K*>(dst), n);
    default:
      std::abort();
  }
}

}  // namespace gemlet

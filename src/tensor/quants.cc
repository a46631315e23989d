// Reference (scalar) quantize / dequantize of one row: dispatch, F16/BF16, and the 32-value types.
// The K types live in quants_k.cc. Dequantization is bit-exact with ggml; the 32-value quantizers
// give llama.cpp's reference bytes, so their arithmetic follows its order step by step.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/half.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

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

// The signed value of largest magnitude (the first one on ties); llama.cpp's symmetric types map it
// to the most negative level, which has one more step than the positive side.
inline float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

inline void MinMax(const float* x, int n, float* min, float* max) {
  *min = std::numeric_limits<float>::max();
  *max = -std::numeric_limits<float>::max();
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
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

// ---- quantization, llama.cpp's reference rounding: scale from the (signed) extreme, f16 scale
// stored but the unrounded float one used for the levels ----

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    const float d = SignedAbsMax(x, kBlock32) / -8.0f;  // the extreme lands on level 0, i.e. -8
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = TruncLevel(x[j] * id + 8.5f, 15);
      const int q1 = TruncLevel(x[j + kHalf] * id + 8.5f, 15);
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    float min, max;
    MinMax(x, kBlock32, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    y[b].m = F32ToF16(min);
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = TruncLevel((x[j] - min) * id + 0.5f, 15);
      const int q1 = TruncLevel((x[j + kHalf] - min) * id + 0.5f, 15);
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    const float d = SignedAbsMax(x, kBlock32) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = TruncLevel(x[j] * id + 16.5f, 31);
      const int q1 = TruncLevel(x[j + kHalf] * id + 16.5f, 31);
      y[b].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
    }
    std::memcpy(y[b].qh, &qh, sizeof qh);
  }
}

void QuantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    float min, max;
    MinMax(x, kBlock32, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    y[b].m = F32ToF16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = TruncLevel((x[j] - min) * id + 0.5f, 31);
      const int q1 = TruncLevel((x[j + kHalf] - min) * id + 0.5f, 31);
      y[b].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
    }
    std::memcpy(y[b].qh, &qh, sizeof qh);
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

// IEEE half (f16) and bfloat16 <-> float conversions, exact and branch-light.
#pragma once

#include <cstdint>
#include <cstring>

namespace gemlet {

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Exact for every f16 value, subnormals, infinities and NaN included.
inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);
    // Subnormal: value = mantissa * 2^-24, exactly representable in f32.
    float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -value : value;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Round to nearest even, as numpy's float16 cast and ggml do.
inline uint16_t F32ToF16(float f) {
  const uint32_t x = FloatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero in f16
    // Let the FPU do the rounding: adding 0.5 aligns the f16 subnormal grid to f32's ulp.
    float shifted = BitsToFloat(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (FloatToBits(shifted) - 0x3f000000u));
  }
  const uint32_t mantissa_odd = (abs >> 13) & 1u;
  uint32_t rounded = abs + 0xc8000fffu + mantissa_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float Bf16ToF32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// Round to nearest even; NaN stays a quiet NaN.
inline uint16_t F32ToBf16(float f) {
  uint32_t x = FloatToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace gemlet

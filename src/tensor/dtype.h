// The GGML tensor types: ids as stored in GGUF, block geometry, and row-level conversion entry points.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gemlet {

// Values are the ggml type ids written in GGUF tensor infos; they must never change.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  const char* name;   // as llama.cpp prints it: "Q4_K", "F16"
  int block_size;     // values per block
  int block_bytes;    // bytes per block
  bool can_compute;   // gemlet can dequantize it (and so run a model that uses it)
};

// nullptr for an id no GGUF writer has ever used.
const DTypeInfo* FindDTypeInfo(uint32_t id);
const DTypeInfo& GetDTypeInfo(DType type);  // type must be a known enumerator
const char* DTypeName(DType type);
// Parses "Q4_K", "q8_0", "f16", "bf16"...; returns false when the name is unknown.
bool ParseDTypeName(const std::string& name, DType* out);

// Bytes of a row of n values (n must be a multiple of the block size).
inline size_t RowBytes(DType type, int64_t n) {
  const DTypeInfo& info = GetDTypeInfo(type);
  return static_cast<size_t>(n / info.block_size) * static_cast<size_t>(info.block_bytes);
}

// Reference (scalar) conversions over one row of n values; n is a multiple of the block size.
// Dequantization is bit-exact with ggml's own to_float for every type with can_compute.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);
// Writes n values in `type`; the inverse of DequantizeRow up to the format's rounding.
// Implemented for F32, F16, BF16 and every block type with can_compute.
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

}  // namespace gemlet

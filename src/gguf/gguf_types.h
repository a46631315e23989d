// GGUF on-disk value types and the in-memory view of a metadata value (zero-copy into the map).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gemlet {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr int kGgufMaxDims = 4;
// Deepest array nesting read or written; real files use at most 2, hostile ones could recurse forever.
constexpr int kGgufMaxArrayDepth = 8;
// ggml's GGML_MAX_NAME is 64 including the terminating NUL: longer tensor names break llama.cpp.
constexpr size_t kGgufMaxTensorName = 63;

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* GgufTypeName(GgufType type);
// Bytes of one scalar on disk; 0 for string and array.
size_t GgufScalarSize(GgufType type);

// One metadata value. Strings and numeric arrays point into the mapped file; nothing is copied.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  // Scalars, widened: integers keep their sign in i64/u64, floats in f64, bool in u64.
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double f64 = 0;
  std::string_view str;  // kString

  // kArray
  GgufType elem_type = GgufType::kUint8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;             // numeric elements, little-endian, packed
  std::vector<std::string_view> strings;    // string elements
  std::vector<GgufValue> arrays;            // nested array elements

  bool IsInteger() const;
  bool IsFloat() const { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }
  bool IsNumericArray() const { return type == GgufType::kArray && GgufScalarSize(elem_type) > 0; }

  // Element i of a numeric array, widened (i < count).
  int64_t IntAt(uint64_t i) const;
  double FloatAt(uint64_t i) const;

  // Human-readable rendering for `gemlet inspect`; long arrays are abbreviated.
  std::string ToString(size_t max_elems = 8) const;
};

}  // namespace gemlet

// GgufWriter: builds a GGUF v3 file; tensor data is streamed from callbacks, never held all at once.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_types.h"
#include "tensor/dtype.h"

namespace gemlet {

// Receives the bytes of one tensor in order; the total must equal the tensor's byte size.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status Write(const void* data, size_t size) = 0;
};

class GgufWriter {
 public:
  GgufWriter();

  // Metadata, in insertion order. Adding a key twice replaces its value in place.
  // "general.alignment" (u32, a power of two) sets the data alignment; it is written only when it
  // differs from the default 32, and a bad value makes Write() fail.
  void SetU32(const std::string& key, uint32_t v);
  void SetI32(const std::string& key, int32_t v);
  void SetU64(const std::string& key, uint64_t v);
  void SetI64(const std::string& key, int64_t v);
  void SetF32(const std::string& key, float v);
  void SetF64(const std::string& key, double v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, const std::string& v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetF32Array(const std::string& key, const std::vector<float>& v);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& v);
  void SetU32Array(const std::string& key, const std::vector<uint32_t>& v);
  void SetBoolArray(const std::string& key, const std::vector<bool>& v);
  // Any value, as GgufFile returns it: every scalar type, arrays of any type, nested arrays. This is
  // how metadata is copied from one file to another. Unsigned integers and bool are taken from
  // `u64`, signed ones from `i64`, floats from `f64`. The value is serialized at once, so it may
  // point into a file that is closed afterwards. Fails on a value that is not self-consistent.
  Status SetValue(const std::string& key, const GgufValue& value);
  bool HasKey(const std::string& key) const;

  // Declares a tensor; `ne` is in GGUF order (ne[0] = row length). `produce` is called during
  // Write() and must push exactly RowBytes(type, ne[0]) * rows bytes into the sink.
  using Producer = std::function<Status(ByteSink&)>;
  Status AddTensor(const std::string& name, DType type, const std::vector<int64_t>& ne, Producer produce);
  // Convenience for data already in memory (copied into the file at Write time, not before).
  Status AddTensorData(const std::string& name, DType type, const std::vector<int64_t>& ne, const void* data);

  // Writes to `path` through a temporary file renamed at the end, so a failure never leaves a
  // half-written file under the final name.
  Status Write(const std::string& path);

 private:
  struct KeyValue {
    std::string key;
    GgufType type;
    std::vector<uint8_t> payload;  // the value exactly as serialized after its type tag
  };
  struct TensorEntry {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    size_t nbytes;
    Producer produce;
  };
  class FileSink;

  void SetRaw(const std::string& key, GgufType type, std::vector<uint8_t> payload);
  Status WriteTo(const std::string& tmp_path, uint32_t alignment);
  Result<uint32_t> Alignment() const;

  std::vector<KeyValue> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorEntry> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace gemlet

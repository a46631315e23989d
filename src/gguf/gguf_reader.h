// GgufFile: a validated, memory-mapped GGUF (v2/v3) file: metadata, tensor directory, tensor data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "gguf/gguf_types.h"
#include "tensor/dtype.h"

namespace gemlet {

struct GgufTensor {
  std::string_view name;
  DType type = DType::kF32;
  int n_dims = 0;
  int64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;                      // relative to the start of the data section
  const uint8_t* data = nullptr;            // points into the map
  size_t nbytes = 0;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string ShapeString() const;  // "[2048, 256000]"
};

class GgufFile {
 public:
  // Maps and validates the whole header and directory: every count, length, type, dimension and
  // offset is checked against the file size before use. Errors name the file and the bad field.
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // A GGUF stored inside another file: `length` bytes from `offset` of fd (MappedFile::OpenRange).
  static Result<std::unique_ptr<GgufFile>> OpenRange(int fd, uint64_t offset, uint64_t length);
  // Parses a GGUF held in memory (tests, fuzzing); `bytes` must outlive the GgufFile.
  static Result<std::unique_ptr<GgufFile>> Parse(const uint8_t* bytes, size_t size, std::string label);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  size_t file_size() const { return size_; }
  const std::string& path() const { return label_; }
  const MappedFile* mapping() const { return file_.get(); }

  // ---- metadata ----
  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Typed getters: an error names the key and what was wrong (missing, wrong type, out of range).
  Result<uint32_t> GetU32(std::string_view key) const;
  Result<float> GetF32(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string> GetString(std::string_view key) const;
  // Optional variants: the default when absent, an error only when present but malformed.
  Result<uint32_t> GetU32Or(std::string_view key, uint32_t fallback) const;
  Result<float> GetF32Or(std::string_view key, float fallback) const;
  Result<bool> GetBoolOr(std::string_view key, bool fallback) const;
  // A key that may be a scalar or a per-layer array (llama.cpp writes either): n_layers values.
  Result<std::vector<uint32_t>> GetU32PerLayer(std::string_view key, uint32_t n_layers) const;
  Result<std::vector<float>> GetF32Array(std::string_view key) const;
  Result<std::vector<int32_t>> GetI32Array(std::string_view key) const;
  Result<std::vector<bool>> GetBoolArray(std::string_view key) const;
  const std::vector<std::string_view>* GetStringArray(std::string_view key) const;

  // ---- tensors ----
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status ParseAll();

  std::unique_ptr<MappedFile> file_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  std::string label_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace gemlet

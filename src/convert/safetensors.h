// Safetensors checkpoints: validated, memory-mapped tensor files, single or sharded via an index.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"

namespace gemlet {

// The element types a safetensors header may name. Only F32, F16 and BF16 can be converted; the
// others are still recognised so that their byte ranges are validated and a clear error names them.
enum class StDType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool, kF8E4M3, kF8E5M2 };

const char* StDTypeName(StDType type);
size_t StDTypeSize(StDType type);
bool StDTypeIsConvertible(StDType type);  // F32, F16, BF16

struct StTensor {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;   // as in the header: shape[0] is the outermost (slowest) dimension
  const uint8_t* data = nullptr;  // into the map; not necessarily aligned
  size_t nbytes = 0;
  const std::string* file = nullptr;  // path of the file that holds it, for error messages

  int64_t n_elements() const;
  // Rows of the last dimension: n_elements / shape.back() (1 for a 0-d scalar).
  int64_t n_rows() const;
  int64_t row_length() const { return shape.empty() ? 1 : shape.back(); }
  std::string ShapeString() const;  // "[512, 64]"
  // Converts row `r` (of row_length() values) to f32. dtype must be convertible.
  void ReadRowF32(int64_t r, float* out) const;
};

// One .safetensors file. The header is checked in full before anything is used: its length, the
// JSON, every dtype, shape and data_offsets range (inside the file, matching the shape, no overlap).
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses a file held in memory (tests); `bytes` must outlive the object.
  static Result<std::unique_ptr<SafetensorsFile>> Parse(const uint8_t* bytes, size_t size, std::string label);

  const std::string& path() const { return label_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }  // sorted by name
  const StTensor* Find(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  Status ParseAll();

  std::unique_ptr<MappedFile> file_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  std::string label_;
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t> index_;
};

// All tensors of a checkpoint, possibly spread over shards.
class SafetensorsCheckpoint {
 public:
  // Opens `path`: a .safetensors file, or a model.safetensors.index.json whose weight_map names the
  // shards (every listed tensor must be in the shard the index names).
  static Result<std::unique_ptr<SafetensorsCheckpoint>> Open(const std::string& path);
  // The weights of a HuggingFace folder: model.safetensors.index.json if present, else
  // model.safetensors, else model-NNNNN-of-NNNNN.safetensors shards.
  static Result<std::unique_ptr<SafetensorsCheckpoint>> OpenDir(const std::string& dir);

  // Every tensor of every shard, sorted by name.
  const std::vector<const StTensor*>& tensors() const { return tensors_; }
  const StTensor* Find(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  SafetensorsCheckpoint() = default;
  Status AddFile(std::unique_ptr<SafetensorsFile> file);
  void Finish();

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StTensor*> by_name_;
  std::vector<const StTensor*> tensors_;
};

}  // namespace gemlet

// Safetensors parsing: every header field is checked against the file before a byte of data is used.
#include "convert/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/half.h"
#include "base/json_input.h"

namespace gemlet {

namespace {

// The safetensors spec caps the header at 100 MB; anything larger is a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct DTypeEntry {
  const char* name;
  StDType type;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {"F32", StDType::kF32, 4},     {"F16", StDType::kF16, 2},         {"BF16", StDType::kBF16, 2},
    {"F64", StDType::kF64, 8},     {"I64", StDType::kI64, 8},         {"I32", StDType::kI32, 4},
    {"I16", StDType::kI16, 2},     {"I8", StDType::kI8, 1},           {"U8", StDType::kU8, 1},
    {"BOOL", StDType::kBool, 1},   {"F8_E4M3", StDType::kF8E4M3, 1}, {"F8_E5M2", StDType::kF8E5M2, 1},
};

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

const char* StDTypeName(StDType type) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.type == type) return e.name;
  }
  return "?";
}

size_t StDTypeSize(StDType type) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.type == type) return e.size;
  }
  return 0;
}

bool StDTypeIsConvertible(StDType type) {
  return type == StDType::kF32 || type == StDType::kF16 || type == StDType::kBF16;
}

// ---------------------------------------------------------------------------------------------
int64_t StTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t StTensor::n_rows() const {
  const int64_t len = row_length();
  return len == 0 ? 0 : n_elements() / len;
}

std::string StTensor::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void StTensor::ReadRowF32(int64_t r, float* out) const {
  const int64_t n = row_length();
  const size_t elem = StDTypeSize(dtype);
  const uint8_t* src = data + static_cast<size_t>(r) * static_cast<size_t>(n) * elem;
  switch (dtype) {
    case StDType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));  // the map may be unaligned
      break;
    case StDType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = F16ToF32(h);
      }
      break;
    case StDType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = Bf16ToF32(h);
      }
      break;
    default:
      std::fill(out, out + n, 0.0f);  // callers check StDTypeIsConvertible first
      break;
  }
}

// ---------------------------------------------------------------------------------------------
Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->bytes_ = mapped->data();
  f->size_ = mapped->size();
  f->label_ = path;
  f->file_ = std::move(mapped);
  RETURN_IF_ERROR(f->ParseAll().WithContext(path));
  return f;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(const uint8_t* bytes, size_t size, std::string label) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->bytes_ = bytes;
  f->size_ = size;
  f->label_ = std::move(label);
  RETURN_IF_ERROR(f->ParseAll().WithContext(f->label_));
  return f;
}

const StTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsFile::ParseAll() {
  if (size_ < 8) {
    return Status::Error("not a safetensors file: " + std::to_string(size_) + " bytes, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes_, 8);
  if (header_len > kMaxHeaderBytes) {
    return Status::Error("header length " + std::to_string(header_len) + " exceeds the 100 MB limit (corrupt file?)");
  }
  if (header_len > size_ - 8) {
    return Status::Error("header length " + std::to_string(header_len) + " runs past the end of the file (" +
                         std::to_string(size_) + " bytes): truncated file?");
  }
  const char* text = reinterpret_cast<const char*>(bytes_ + 8);
  ASSIGN_OR_RETURN(nlohmann::json header,
                   ParseJson(std::string_view(text, header_len), "the header", {.max_bytes = kJsonLargeBytes}));
  if (!header.is_object()) return Status::Error("the header is not a JSON object");

  const uint8_t* data = bytes_ + 8 + header_len;
  const uint64_t data_size = size_ - 8 - header_len;
  struct Range {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Range> ranges;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;  // free-form strings; nothing we need
    const std::string what = "tensor " + Quoted(name);
    const nlohmann::json& entry = it.value();
    if (!entry.is_object()) return Status::Error(what + ": header entry is not an object");
    auto dtype_it = entry.find("dtype");
    auto shape_it = entry.find("shape");
    auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) return Status::Error(what + ": missing or non-string 'dtype'");
    if (shape_it == entry.end() || !shape_it->is_array()) return Status::Error(what + ": missing or non-array 'shape'");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return Status::Error(what + ": 'data_offsets' must be an array [begin, end]");
    }

    StTensor t;
    t.name = name;
    t.file = &label_;
    const std::string dtype_name = dtype_it->get<std::string>();
    const DTypeEntry* dtype = nullptr;
    for (const DTypeEntry& e : kDTypes) {
      if (dtype_name == e.name) dtype = &e;
    }
    if (dtype == nullptr) return Status::Error(what + ": unknown dtype " + Quoted(dtype_name));
    t.dtype = dtype->type;

    uint64_t n_elements = 1;
    for (const nlohmann::json& d : *shape_it) {
      if (!d.is_number_unsigned()) {  // nlohmann parses every non-negative integer as unsigned
        return Status::Error(what + ": shape entries must be non-negative integers, got " + d.dump());
      }
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (v != 0 && n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / v)) {
        return Status::Error(what + ": shape " + shape_it->dump() + " overflows");
      }
      n_elements *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const nlohmann::json& b = (*offsets_it)[0];
    const nlohmann::json& e = (*offsets_it)[1];
    if (!b.is_number_unsigned() || !e.is_number_unsigned()) {
      return Status::Error(what + ": data_offsets must be non-negative integers, got " + offsets_it->dump());
    }
    const uint64_t begin = b.get<uint64_t>();
    const uint64_t end = e.get<uint64_t>();
    if (begin > end) return Status::Error(what + ": data_offsets " + offsets_it->dump() + " end before they begin");
    if (end > data_size) {
      return Status::Error(what + ": data_offsets " + offsets_it->dump() + " run past the end of the data (" +
                           std::to_string(data_size) + " bytes): truncated file?");
    }
    if (n_elements > std::numeric_limits<uint64_t>::max() / dtype->size || end - begin != n_elements * dtype->size) {
      return Status::Error(what + ": data_offsets " + offsets_it->dump() + " hold " + std::to_string(end - begin) +
                           " bytes but shape " + shape_it->dump() + " of " + dtype->name + " needs " +
                           std::to_string(n_elements * dtype->size));
    }
    t.data = data + begin;
    t.nbytes = static_cast<size_t>(end - begin);
    ranges.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }

  // Overlapping tensors mean a corrupt header; empty tensors occupy nothing and cannot overlap.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  const Range* prev = nullptr;
  for (const Range& r : ranges) {
    if (r.begin == r.end) continue;
    if (prev != nullptr && r.begin < prev->end) {
      return Status::Error("tensors " + Quoted(tensors_[prev->tensor].name) + " and " + Quoted(tensors_[r.tensor].name) +
                           " overlap in the data section");
    }
    prev = &r;
  }

  std::sort(tensors_.begin(), tensors_.end(), [](const StTensor& a, const StTensor& b) { return a.name < b.name; });
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
Status SafetensorsCheckpoint::AddFile(std::unique_ptr<SafetensorsFile> file) {
  for (const StTensor& t : file->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted) {
      return Status::Error("tensor " + Quoted(t.name) + " appears in both " + Quoted(*it->second->file) + " and " +
                           Quoted(file->path()));
    }
  }
  files_.push_back(std::move(file));
  return Status::Ok();
}

void SafetensorsCheckpoint::Finish() {
  tensors_.clear();
  for (const auto& [name, t] : by_name_) tensors_.push_back(t);
}

const StTensor* SafetensorsCheckpoint::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::Open(const std::string& path) {
  namespace fs = std::filesystem;
  std::unique_ptr<SafetensorsCheckpoint> ckpt(new SafetensorsCheckpoint());
  const bool is_index = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (!is_index) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
    RETURN_IF_ERROR(ckpt->AddFile(std::move(file)));
    ckpt->Finish();
    return ckpt;
  }

  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(nlohmann::json index, ParseJson(text.str(), path));
  if (!index.is_object()) return Status::Error(path + ": not a JSON object");
  auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object()) return Status::Error(path + ": no 'weight_map' object");

  // Shards in sorted order, each opened once.
  std::map<std::string, std::vector<std::string>> shards;  // shard file -> tensors the index puts there
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    if (!it.value().is_string()) return Status::Error(path + ": weight_map entry " + Quoted(it.key()) + " is not a string");
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "..") {
      return Status::Error(path + ": weight_map names shard " + Quoted(shard) + ", which is not a plain file name");
    }
    shards[shard].push_back(it.key());
  }
  if (shards.empty()) return Status::Error(path + ": weight_map is empty");
  const fs::path dir = fs::path(path).parent_path();
  for (const auto& [shard, names] : shards) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((dir / shard).string()));
    for (const std::string& name : names) {
      if (file->Find(name) == nullptr) {
        return Status::Error(path + ": tensor " + Quoted(name) + " is listed in shard " + Quoted(shard) +
                             " but that file does not contain it");
      }
    }
    RETURN_IF_ERROR(ckpt->AddFile(std::move(file)));
  }
  ckpt->Finish();
  return ckpt;
}

Result<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::OpenDir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path base(dir);
  std::error_code ec;
  if (fs::is_regular_file(base / "model.safetensors.index.json", ec)) {
    return Open((base / "model.safetensors.index.json").string());
  }
  if (fs::is_regular_file(base / "model.safetensors", ec)) return Open((base / "model.safetensors").string());

  // Shards without an index: model-00001-of-00003.safetensors ...
  std::vector<std::string> shards;
  for (const fs::directory_entry& e : fs::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
        name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0) {
      shards.push_back(e.path().string());
    }
  }
  if (shards.empty()) {
    return Status::Error("no weights in '" + dir + "': expected model.safetensors or model.safetensors.index.json");
  }
  std::sort(shards.begin(), shards.end());
  std::unique_ptr<SafetensorsCheckpoint> ckpt(new SafetensorsCheckpoint());
  for (const std::string& shard : shards) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(shard));
    RETURN_IF_ERROR(ckpt->AddFile(std::move(file)));
  }
  ckpt->Finish();
  return ckpt;
}

}  // namespace gemlet

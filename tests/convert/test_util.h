// Helpers for the converter tests: scratch folders, and building safetensors files byte by byte.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gemlet::testing {

inline const std::string kHfDir = std::string(GEMLET_TESTDATA_DIR) + "/hf";
inline const std::string kGgufDir = std::string(GEMLET_TESTDATA_DIR) + "/gguf";

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("gemlet_convert_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// One tensor for SafetensorsBytes: raw little-endian data in `dtype` ("F32", "BF16", ...).
struct RawTensor {
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline RawTensor F32Tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  RawTensor t;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// u64 length, header text, then every tensor's bytes in map order.
inline std::vector<uint8_t> Assemble(const std::string& header, const std::map<std::string, RawTensor>& tensors) {
  size_t total = 8 + header.size();
  for (const auto& [name, t] : tensors) total += t.bytes.size();
  std::vector<uint8_t> out(total);
  const uint64_t len = header.size();
  std::memcpy(out.data(), &len, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  size_t at = 8 + header.size();
  for (const auto& [name, t] : tensors) {
    if (!t.bytes.empty()) std::memcpy(out.data() + at, t.bytes.data(), t.bytes.size());
    at += t.bytes.size();
  }
  return out;
}

// A well-formed safetensors file: u64 header length, JSON header (padded with spaces to 8 bytes),
// then the tensors back to back in name order.
inline std::vector<uint8_t> SafetensorsBytes(const std::map<std::string, RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  return Assemble(text, tensors);
}

// The same with a header given as text (for malformed headers).
inline std::vector<uint8_t> SafetensorsBytes(const std::string& header_text, size_t data_bytes) {
  std::map<std::string, RawTensor> zeros;
  zeros[""].bytes.assign(data_bytes, 0);
  return Assemble(header_text, zeros);
}

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace gemlet::testing

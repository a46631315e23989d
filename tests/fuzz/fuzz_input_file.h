// For fuzz targets whose reader takes a path: the input written to a file of this process's own
// (one per target and process, rewritten for each input).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace gemlet::fuzz {

// The path holding the input, or "" when it could not be written.
inline std::string WriteInputFile(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return "";
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok ? path : "";
}

inline std::string InputFilePath(const char* name) { return "/tmp/gemlet-fuzz-" + std::string(name) + "-" + std::to_string(::getpid()); }

// A target's input file, removed when the process ends (the corpus replay runs in make test: a
// file left per run piles up in /tmp). Hold it in a function-local static.
class InputFile {
 public:
  explicit InputFile(std::string path) : path_(std::move(path)) {}
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gemlet::fuzz

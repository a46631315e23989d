// For fuzz targets whose reader takes a path: the input written to a file of this process's own
// (one per target and process, rewritten for each input).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gemlet::fuzz {

// The path holding the input, or "" when it could not be written.
inline std::string WriteInputFile(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return "";
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok ? path : "";
}

inline std::string InputFilePath(const char* name) { return "/tmp/gemlet-fuzz-" + std::string(name) + "-" + std::to_string(::getpid()); }

}  // namespace gemlet::fuzz

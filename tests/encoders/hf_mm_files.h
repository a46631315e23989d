// The encoder tests' access to shared/testdata/hf-mm: the raw golden files, a checkpoint converted
// to an mmproj once per test binary, and the comparisons.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "convert/mmproj.h"
#include "convert/safetensors.h"

namespace gemlet::hfmm {

// shared/testdata/hf-mm's folder of the model, or the repository's own golden of the same format
// (tests/data/hf-mm: gemma3n_image_audio, made by tools/mm_reference/mm3n_goldens.py).
inline std::string HfMmDir(const std::string& model) {
  const std::string own = std::string(GEMLET_SOURCE_DIR) + "/tests/data/hf-mm/" + model;
  if (std::filesystem::exists(own)) return own;
  return std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/" + model;
}

// A raw little-endian file of T (the goldens' .f32 / .i32).
template <class T>
std::vector<T> ReadRaw(const std::string& path) {
  return test::ReadRawFile<T>(path);
}
inline std::vector<float> ReadF32(const std::string& path) { return ReadRaw<float>(path); }

inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return worst;
}

// Files the tests wrote, removed when the binary exits.
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const std::string& p : paths) std::filesystem::remove(p);
  }
};

inline std::string TempPath(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / ("gemlet-" + stem + "-" + std::to_string(::getpid()) + ".gguf")).string();
}

// The model's mmproj as `gemlet convert --mmproj-out` writes it, once per test binary and type.
inline std::string Mmproj(const std::string& model, DType type) {
  static TempFiles written_files;
  const std::string path = TempPath(model + "-mmproj-" + DTypeName(type));
  if (std::filesystem::exists(path)) return path;
  auto checkpoint = SafetensorsCheckpoint::OpenDir(HfMmDir(model));
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.message();
  if (!checkpoint.ok()) return path;
  MmprojOptions o;
  o.hf_dir = HfMmDir(model);
  o.output_path = path;
  o.outtype = type;
  o.model_name = model;
  auto written = WriteMmproj(o, *checkpoint.value());
  EXPECT_TRUE(written.ok()) << written.message();
  written_files.paths.push_back(path);
  return path;
}

}  // namespace gemlet::hfmm

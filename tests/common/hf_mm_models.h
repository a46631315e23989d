// The hf-mm checkpoints (shared/testdata/hf-mm) as gemlet runs them: a text GGUF and its mmproj,
// written by tools::Convert (f32) once per test binary and removed when it exits. Include
// "gemlet/tools.hpp"'s library (gemlet_tools) in the test's link.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "gemlet/tools.hpp"

namespace gemlet::test {

struct HfMmModel {
  std::string model, mmproj;
};

// The checkpoint's folder: the repository's own golden of the same format (tests/data/hf-mm:
// gemma3n_image_audio) where the test knows the source tree (GEMLET_SOURCE_DIR), else shared/testdata's.
inline std::string HfMmFolder(const std::string& name) {
#if defined(GEMLET_SOURCE_DIR)
  const std::string own = std::string(GEMLET_SOURCE_DIR) + "/tests/data/hf-mm/" + name;
  if (std::filesystem::exists(own)) return own;
#endif
  return std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/" + name;
}

inline const HfMmModel& ConvertHfMm(const std::string& name) {
  struct Written {
    std::map<std::string, HfMmModel> models;
    ~Written() {
      for (const auto& [name, m] : models) {
        std::filesystem::remove(m.model);
        std::filesystem::remove(m.mmproj);
      }
    }
  };
  static Written written;
  if (auto it = written.models.find(name); it != written.models.end()) return it->second;
  const std::string stem = (std::filesystem::temp_directory_path() /
                            ("gemlet-hfmm-" + name + "-" + std::to_string(::getpid()))).string();
  HfMmModel m{stem + ".gguf", stem + ".mmproj.gguf"};
  tools::ConvertOptions o;
  o.hf_dir = HfMmFolder(name);
  o.output_path = m.model;
  o.mmproj_output_path = m.mmproj;
  o.outtype = "f32";
  auto report = tools::Convert(o);
  EXPECT_TRUE(report.ok()) << report.message();
  return written.models.emplace(name, m).first->second;
}

}  // namespace gemlet::test

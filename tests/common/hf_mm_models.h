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
  o.hf_dir = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/" + name;
  o.output_path = m.model;
  o.mmproj_output_path = m.mmproj;
  o.outtype = "f32";
  auto report = tools::Convert(o);
  EXPECT_TRUE(report.ok()) << report.message();
  return written.models.emplace(name, m).first->second;
}

}  // namespace gemlet::test

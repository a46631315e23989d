// Every family's test models for tests that run them all: the reference GGUFs and HF folders of
// shared/testdata (converted on first use), quantized copies, and the demo model. Files made here
// live in a directory as long as the process. Needs gemlet_convert and gemlet_quantize linked.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "convert/convert.h"
#include "quantize/quantize.h"

namespace gemlet::family_models {

// The models: name -> how to get the file. Converted and quantized ones are made once per process.
struct ModelCase {
  std::string name;
  std::string gguf;       // a file to load as it is, or
  std::string hf;         // an HF folder to convert, or
  std::string quantize;   // another case to quantize...
  FileType ftype = FileType::kQ8_0;  // ... to this type
};

inline const std::vector<ModelCase>& Cases() {
  static const std::vector<ModelCase> cases = [] {
    const std::string gguf = test::TestdataDir() + "/gguf/", hf = test::TestdataDir() + "/hf/";
    std::vector<ModelCase> c;
    c.push_back({"gemma1_2b_like_mqa", gguf + "gemma1_2b_like_mqa.gguf", "", ""});
    c.push_back({"gemma2_gqa_softcap", "", hf + "gemma2_gqa_softcap", ""});
    c.push_back({"gemma3_1b_like", "", hf + "gemma3_1b_like", ""});
    c.push_back({"gemma3_4b_like_rope_linear8", "", hf + "gemma3_4b_like_rope_linear8", ""});
    c.push_back({"gemma3n_e2b_like", gguf + "gemma3n_e2b_like.gguf", "", ""});
    c.push_back({"gemma4_e2b_like", gguf + "gemma4_e2b_like.gguf", "", ""});
    c.push_back({"gemma4_moe_kv_eq_v", gguf + "gemma4_moe_kv_eq_v.gguf", "", ""});
    c.push_back({"gemma4_unified_12b_like", "", hf + "gemma4_unified_12b_like", ""});
    c.push_back({"gemma3_1b_like_q8_0", "", "", "gemma3_1b_like", FileType::kQ8_0});
    c.push_back({"gemma3n_e2b_like_q8_0", "", "", "gemma3n_e2b_like", FileType::kQ8_0});
    c.push_back({"gemma4_e2b_like_q4_0", "", "", "gemma4_e2b_like", FileType::kQ4_0});
    c.push_back({"gemma4_moe_kv_eq_v_q8_0", "", "", "gemma4_moe_kv_eq_v", FileType::kQ8_0});
    c.push_back({"demo_q4_k_m", GEMLET_DEMO_MODEL, "", ""});  // its Q4_K and Q6_K matrices
    return c;
  }();
  return cases;
}

inline const ModelCase& CaseNamed(const std::string& name) {
  for (const ModelCase& c : Cases()) {
    if (c.name == name) return c;
  }
  static const ModelCase none;
  return none;
}

// The case's file: as it is, or made (converted, quantized) into a directory that lives as long as
// the process. Tests run on one thread.
inline std::string ModelPath(const std::string& name) {
  static test::TempDir dir;
  static std::map<std::string, std::string> made;
  const ModelCase& c = CaseNamed(name);
  if (!c.gguf.empty()) return c.gguf;
  if (auto it = made.find(name); it != made.end()) return it->second;
  const std::string out = dir.File(name + ".gguf");
  if (!c.hf.empty()) {
    ConvertOptions o;
    o.hf_dir = c.hf;
    o.output_path = out;
    auto r = ConvertHfToGguf(o);
    EXPECT_TRUE(r.ok()) << r.message();
  } else {
    const std::string input = ModelPath(c.quantize);
    QuantizeOptions q;
    q.input_path = input;
    q.output_path = out;
    q.ftype = c.ftype;
    q.pure = true;
    q.n_threads = 2;
    auto r = QuantizeGguf(q);
    EXPECT_TRUE(r.ok()) << r.message();
  }
  made[name] = out;
  return out;
}

}  // namespace gemlet::family_models

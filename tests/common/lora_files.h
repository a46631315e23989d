// LoRA test files: random adapters in llama.cpp's GGUF layout for a GGUF base, PEFT folders
// (adapter_config.json + adapter_model.safetensors with PEFT's key names) for an HF checkpoint, and
// that checkpoint with the adapter merged by PEFT's documented rule W + scaling * B A (scaling =
// alpha / r, or alpha / sqrt(r) with rsLoRA), for checking conversions end to end.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/safetensors.h"
#include "convert/test_util.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/lora.h"
#include "tensor/dtype.h"

namespace gemlet::test {

struct AdapterSpec {
  int rank = 4;
  float alpha = 8.0f;  // 0: none written (scale 1)
  uint32_t seed = 7;
  std::vector<LoraTarget> targets = {LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,   LoraTarget::kO,
                                     LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};
  DType type = DType::kF32;
  std::string arch;  // "": the base's
  std::string base_name;  // general.base_model.0.name; "": none written
};

// A random adapter for `base` in llama.cpp's layout: A ~ N(0,1)/sqrt(n_in), B ~ N(0,1)/(20 sqrt(r)),
// on every targeted projection the base has.
inline void WriteGgufAdapter(const GgufFile& base, const std::string& path, const AdapterSpec& spec) {
  GgufWriter w;
  const std::string arch = spec.arch.empty() ? base.GetString("general.architecture").value() : spec.arch;
  w.SetString("general.architecture", arch);
  w.SetString("general.type", "adapter");
  w.SetString("adapter.type", "lora");
  if (spec.alpha != 0.0f) w.SetF32("adapter.lora.alpha", spec.alpha);
  if (!spec.base_name.empty()) {
    w.SetU32("general.base_model.count", 1);
    w.SetString("general.base_model.0.name", spec.base_name);
  }
  std::mt19937 rng(spec.seed);
  std::normal_distribution<float> normal;
  std::deque<std::vector<uint8_t>> kept;  // AddTensorData copies at Write: the bytes must live until then
  const uint32_t n_layers = base.GetU32(arch + ".block_count").value();
  for (uint32_t l = 0; l < n_layers; ++l) {
    for (LoraTarget t : spec.targets) {
      const std::string name = "blk." + std::to_string(l) + "." + LoraTargetName(t) + ".weight";
      const GgufTensor* wt = base.FindTensor(name);
      if (wt == nullptr) continue;
      const int64_t n_in = wt->ne[0], n_out = wt->ne[1], r = spec.rank;
      std::vector<float> a(static_cast<size_t>(r * n_in)), b(static_cast<size_t>(n_out * r));
      for (float& v : a) v = normal(rng) / std::sqrt(static_cast<float>(n_in));
      for (float& v : b) v = normal(rng) * 0.05f / std::sqrt(static_cast<float>(r));
      auto put = [&](const std::string& tname, const std::vector<float>& values, int64_t row, int64_t rows) {
        DType type = spec.type;
        if (type == DType::kQ8_0 && row % 32 != 0) type = DType::kF16;
        std::vector<uint8_t>& bytes = kept.emplace_back(RowBytes(type, row) * static_cast<size_t>(rows));
        for (int64_t i = 0; i < rows; ++i) {
          QuantizeRow(type, values.data() + i * row, bytes.data() + static_cast<size_t>(i) * RowBytes(type, row), row);
        }
        ASSERT_TRUE(w.AddTensorData(tname, type, {row, rows}, bytes.data()).ok());
      };
      put(name + ".lora_a", a, n_in, r);
      put(name + ".lora_b", b, r, n_out);
    }
  }
  ASSERT_TRUE(w.Write(path).ok());
}

// A safetensors file as raw tensors (name -> dtype, shape, bytes), read with the library's reader
// and written with the converter tests' (convert/test_util.h).
using RawTensors = std::map<std::string, gemlet::testing::RawTensor>;

inline RawTensors ReadSafetensors(const std::string& path) {
  RawTensors out;
  auto file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return out;
  for (const StTensor& t : file.value()->tensors()) {
    out[t.name] = {StDTypeName(t.dtype), t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
  }
  return out;
}

inline void WriteSafetensors(const std::string& path, const RawTensors& tensors) {
  const std::vector<uint8_t> bytes = gemlet::testing::SafetensorsBytes(tensors);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<float> F32Values(const gemlet::testing::RawTensor& t) {
  std::vector<float> f(t.bytes.size() / 4);
  std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
  return f;
}

struct PeftSpec {
  int rank = 4;
  double alpha = 8.0;
  bool rslora = false;
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  uint32_t seed = 5;
};

// PEFT's folder for the HF checkpoint hf_dir (F32 weights), at peft_dir; and, at merged_dir, that
// checkpoint with the adapter merged (config.json and tokenizer files copied). Returns the modules adapted.
inline int WritePeftAndMerged(const std::string& hf_dir, const PeftSpec& spec, const std::string& peft_dir,
                              const std::string& merged_dir) {
  namespace fs = std::filesystem;
  RawTensors model = ReadSafetensors(hf_dir + "/model.safetensors");
  RawTensors peft;
  std::mt19937 rng(spec.seed);
  std::normal_distribution<float> normal;
  const double scaling = spec.alpha / (spec.rslora ? std::sqrt(static_cast<double>(spec.rank)) : spec.rank);
  int modules = 0;
  for (auto& [name, w] : model) {
    // "<module>.weight" of a decoder layer's targeted projection.
    if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0 || name.find(".layers.") == std::string::npos) continue;
    const std::string module = name.substr(0, name.size() - 7);
    const std::string leaf = module.substr(module.rfind('.') + 1);
    bool targeted = false;
    for (const std::string& t : spec.targets) targeted = targeted || leaf == t;
    if (!targeted || w.dtype != "F32" || w.shape.size() != 2) continue;
    const int64_t n_out = w.shape[0], n_in = w.shape[1], r = spec.rank;
    std::vector<float> a(static_cast<size_t>(r * n_in)), b(static_cast<size_t>(n_out * r));
    for (float& v : a) v = normal(rng) / std::sqrt(static_cast<float>(n_in));
    for (float& v : b) v = normal(rng) * 0.05f / std::sqrt(static_cast<float>(r));
    peft["base_model.model." + module + ".lora_A.weight"] = gemlet::testing::F32Tensor({r, n_in}, a);
    peft["base_model.model." + module + ".lora_B.weight"] = gemlet::testing::F32Tensor({n_out, r}, b);
    // W += scaling * B A, in double as a reference should.
    std::vector<float> wf = F32Values(w);
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t i = 0; i < n_in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < r; ++k) s += static_cast<double>(b[o * r + k]) * a[k * n_in + i];
        wf[o * n_in + i] = static_cast<float>(wf[o * n_in + i] + scaling * s);
      }
    }
    w = gemlet::testing::F32Tensor(w.shape, wf);
    ++modules;
  }
  fs::create_directories(peft_dir);
  fs::create_directories(merged_dir);
  WriteSafetensors(peft_dir + "/adapter_model.safetensors", peft);
  nlohmann::json config = {{"peft_type", "LORA"},       {"task_type", "CAUSAL_LM"}, {"r", spec.rank},
                           {"lora_alpha", spec.alpha}, {"lora_dropout", 0.0},      {"use_rslora", spec.rslora},
                           {"target_modules", spec.targets}, {"bias", "none"},     {"fan_in_fan_out", false},
                           {"base_model_name_or_path", fs::path(hf_dir).filename().string()}};
  std::ofstream(peft_dir + "/adapter_config.json") << config.dump(2);
  WriteSafetensors(merged_dir + "/model.safetensors", model);
  for (const auto& entry : fs::directory_iterator(hf_dir)) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".json") || file.rfind("tokenizer", 0) == 0) {
      fs::copy_file(entry.path(), merged_dir + "/" + file, fs::copy_options::overwrite_existing);
    }
  }
  return modules;
}

}  // namespace gemlet::test

// Checks the quant codecs against llama.cpp's own files in shared/testdata/quant: bit-exact
// dequantization of every tensor, byte-identical 32-value quantizers, K-quant accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "tensor/dtype.h"
#include "tensor_test_util.h"

namespace gemlet {
namespace {

using ::gemlet::testing::Bits;
using ::gemlet::testing::QuantDataPath;
using ::gemlet::testing::ReadFileBytes;
using ::gemlet::testing::Sha256Hex;
using nlohmann::json;

const json& Index() {
  static const json index = [] {
    const std::vector<uint8_t> bytes = ReadFileBytes(QuantDataPath("index.json"));
    return bytes.empty() ? json() : json::parse(bytes.begin(), bytes.end());
  }();
  return index;
}

// source.f32 as floats, and each source tensor's first float by name.
struct Source {
  std::vector<float> values;
  std::map<std::string, size_t> start;
};
const Source& GetSource() {
  static const Source source = [] {
    Source s;
    const std::vector<uint8_t> bytes = ReadFileBytes(QuantDataPath("source.f32"));
    s.values.resize(bytes.size() / sizeof(float));
    std::memcpy(s.values.data(), bytes.data(), s.values.size() * sizeof(float));
    for (const json& t : Index()["source"]["tensors"]) {
      s.start[t["name"].get<std::string>()] = t["raw_offset_bytes"].get<size_t>() / sizeof(float);
    }
    return s;
  }();
  return source;
}

bool Is32ValueType(DType t) {
  return t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ5_0 || t == DType::kQ5_1 || t == DType::kQ8_0;
}

const char* const kTypes[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};

TEST(QuantTestdata, IndexAndSourceAreReadable) {
  ASSERT_TRUE(Index().is_object()) << "cannot read " << QuantDataPath("index.json");
  for (const char* type : kTypes) {
    ASSERT_TRUE(Index()["types"].contains(type)) << type;
    EXPECT_EQ(Index()["types"][type]["tensors"].size(), 5u) << type;
  }
  // source.f32 is the concatenation of source_f32.gguf's tensors.
  auto file = GgufFile::Open(QuantDataPath("source_f32.gguf"));
  ASSERT_TRUE(file.ok()) << file.message();
  size_t total = 0;
  for (const json& t : Index()["source"]["tensors"]) {
    const GgufTensor* tensor = (*file)->FindTensor(t["name"].get<std::string>());
    ASSERT_NE(tensor, nullptr) << t["name"];
    ASSERT_EQ(tensor->type, DType::kF32);
    ASSERT_EQ(tensor->n_elements(), t["n_elements"].get<int64_t>());
    EXPECT_EQ((*file)->data_offset() + tensor->offset, t["gguf_data_offset"].get<uint64_t>());
    const size_t start = GetSource().start.at(t["name"].get<std::string>());
    ASSERT_LE(start + tensor->n_elements(), GetSource().values.size());
    EXPECT_EQ(std::memcmp(tensor->data, &GetSource().values[start], tensor->nbytes), 0) << t["name"];
    total += static_cast<size_t>(tensor->n_elements());
  }
  EXPECT_EQ(total, GetSource().values.size());
}

// The K files keep llama-quantize's fallback for the 1152-wide tensor: the GGUF must be read with
// each tensor's own type, not the file's.
TEST(QuantTestdata, KFilesHoldFallbackTypes) {
  const std::map<std::string, DType> fallback = {{"Q2_K", DType::kQ4_0}, {"Q3_K", DType::kQ4_0},
                                                 {"Q4_K", DType::kQ5_0}, {"Q5_K", DType::kQ5_1},
                                                 {"Q6_K", DType::kQ8_0}};
  for (const auto& [name, type] : fallback) {
    auto file = GgufFile::Open(QuantDataPath(name + ".gguf"));
    ASSERT_TRUE(file.ok()) << file.message();
    const GgufTensor* up = (*file)->FindTensor("blk.0.ffn_up.weight");
    ASSERT_NE(up, nullptr);
    EXPECT_EQ(up->type, type) << name << " holds " << DTypeName(up->type);
    const GgufTensor* gate = (*file)->FindTensor("blk.0.ffn_gate.weight");
    ASSERT_NE(gate, nullptr);
    EXPECT_STREQ(DTypeName(gate->type), name.c_str());
  }
}

class QuantFileTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Index().is_object());
    entry_ = &Index()["types"][GetParam()];
    auto file = GgufFile::Open(QuantDataPath(GetParam() + std::string(".gguf")));
    ASSERT_TRUE(file.ok()) << file.message();
    file_ = std::move(file).value();
  }
  const json& tensors() const { return (*entry_)["tensors"]; }
  const GgufTensor& Tensor(const json& t) const {
    const GgufTensor* tensor = file_->FindTensor(t["name"].get<std::string>());
    EXPECT_NE(tensor, nullptr) << t["name"];
    return *tensor;
  }

  const json* entry_ = nullptr;
  std::unique_ptr<GgufFile> file_;
};

TEST_P(QuantFileTest, RawBytesMatchIndex) {
  ASSERT_EQ(file_->tensors().size(), tensors().size());
  for (const json& t : tensors()) {
    const GgufTensor& tensor = Tensor(t);
    SCOPED_TRACE(t["name"].get<std::string>());
    EXPECT_EQ(static_cast<uint32_t>(tensor.type), t["ggml_type_id"].get<uint32_t>());
    EXPECT_STREQ(DTypeName(tensor.type), t["ggml_type"].get<std::string>().c_str());
    EXPECT_EQ(GetDTypeInfo(tensor.type).block_size, t["block_size"].get<int>());
    EXPECT_EQ(GetDTypeInfo(tensor.type).block_bytes, t["type_size"].get<int>());
    EXPECT_EQ(tensor.ne[0], t["ne"][0].get<int64_t>());
    EXPECT_EQ(tensor.ne[1], t["ne"][1].get<int64_t>());
    EXPECT_EQ(tensor.n_elements(), t["n_elements"].get<int64_t>());
    EXPECT_EQ(tensor.nbytes, t["nbytes"].get<size_t>());
    EXPECT_EQ(RowBytes(tensor.type, tensor.ne[0]) * static_cast<size_t>(tensor.n_rows()), tensor.nbytes);
    EXPECT_EQ(file_->data_offset() + tensor.offset, t["gguf_data_offset"].get<uint64_t>());
    EXPECT_EQ(Sha256Hex(tensor.data, tensor.nbytes), t["sha256_raw"].get<std::string>());
  }
}

TEST_P(QuantFileTest, DequantizesBitExact) {
  const std::vector<uint8_t> expected_bytes = ReadFileBytes(QuantDataPath((*entry_)["expected"].get<std::string>()));
  ASSERT_EQ(expected_bytes.size(), (*entry_)["expected_bytes"].get<size_t>());
  int exact_tensors = 0;
  for (const json& t : tensors()) {
    const GgufTensor& tensor = Tensor(t);
    SCOPED_TRACE(t["name"].get<std::string>() + " (" + DTypeName(tensor.type) + ")");
    ASSERT_TRUE(GetDTypeInfo(tensor.type).can_compute);
    const size_t offset = t["expected_offset_bytes"].get<size_t>();
    const size_t n = static_cast<size_t>(tensor.n_elements());
    ASSERT_LE(offset + n * 4, expected_bytes.size());
    ASSERT_EQ(Sha256Hex(&expected_bytes[offset], n * 4), t["sha256_expected"].get<std::string>());

    std::vector<float> got(n);
    const size_t row_bytes = RowBytes(tensor.type, tensor.ne[0]);
    for (int64_t r = 0; r < tensor.n_rows(); ++r) {
      DequantizeRow(tensor.type, tensor.data + r * row_bytes, &got[r * tensor.ne[0]], tensor.ne[0]);
    }
    size_t mismatches = 0, negative_zeros = 0;
    for (size_t i = 0; i < n; ++i) {
      uint32_t want;
      std::memcpy(&want, &expected_bytes[offset + 4 * i], 4);
      if (want == 0x80000000u) ++negative_zeros;
      if (Bits(got[i]) != want) {
        if (mismatches++ < 5) {
          ADD_FAILURE() << "value " << i << ": got 0x" << std::hex << Bits(got[i]) << " want 0x" << want;
        }
      }
    }
    EXPECT_EQ(mismatches, 0u);
    if (mismatches == 0) ++exact_tensors;
    std::printf("  %s %-22s %-5s bit-exact: %s (%zu values, %zu of them -0.0)\n", GetParam(),
                t["name"].get<std::string>().c_str(), DTypeName(tensor.type), mismatches == 0 ? "yes" : "NO", n,
                negative_zeros);
  }
  EXPECT_EQ(exact_tensors, 5);
}

// Our quantizers on source.f32: the 32-value types must give llama-quantize's bytes exactly
// (fallback tensors in the K files included); the K types must be at least as accurate.
TEST_P(QuantFileTest, QuantizerMatchesLlamaCpp) {
  const Source& source = GetSource();
  for (const json& t : tensors()) {
    const GgufTensor& tensor = Tensor(t);
    const std::string name = t["name"].get<std::string>();
    SCOPED_TRACE(name + " (" + DTypeName(tensor.type) + ")");
    const int64_t cols = tensor.ne[0];
    const float* src = &source.values[source.start.at(name)];
    const size_t row_bytes = RowBytes(tensor.type, cols);
    std::vector<uint8_t> ours(row_bytes * static_cast<size_t>(tensor.n_rows()));
    for (int64_t r = 0; r < tensor.n_rows(); ++r) {
      QuantizeRow(tensor.type, src + r * cols, &ours[r * row_bytes], cols);
    }
    const int block_bytes = GetDTypeInfo(tensor.type).block_bytes;
    size_t same_blocks = 0;
    const size_t n_blocks = ours.size() / block_bytes;
    for (size_t b = 0; b < n_blocks; ++b) {
      same_blocks += std::memcmp(&ours[b * block_bytes], tensor.data + b * block_bytes, block_bytes) == 0;
    }

    // Error against the source, as index.json measures llama.cpp's.
    std::vector<float> deq(static_cast<size_t>(tensor.n_elements()));
    for (int64_t r = 0; r < tensor.n_rows(); ++r) {
      DequantizeRow(tensor.type, &ours[r * row_bytes], &deq[r * cols], cols);
    }
    double sum_sq = 0.0, max_abs = 0.0;
    for (size_t i = 0; i < deq.size(); ++i) {
      const double e = static_cast<double>(deq[i]) - src[i];
      sum_sq += e * e;
      max_abs = test::Worse(max_abs, std::fabs(e));
    }
    const double rmse = std::sqrt(sum_sq / static_cast<double>(deq.size()));
    const double llama_rmse = t["rmse_vs_source"].get<double>();
    const double llama_max = t["max_abs_err_vs_source"].get<double>();
    std::printf("  %s %-22s %-5s same blocks %4zu/%-4zu rmse %.6g (llama.cpp %.6g, ratio %.4f) max %.6g (llama.cpp %.6g)\n",
                GetParam(), name.c_str(), DTypeName(tensor.type), same_blocks, n_blocks, rmse, llama_rmse,
                rmse / llama_rmse, max_abs, llama_max);
    if (Is32ValueType(tensor.type)) {
      EXPECT_EQ(same_blocks, n_blocks);
    } else {
      // The requirement: at least as accurate as llama.cpp (2% slack for float noise).
      EXPECT_LE(rmse, llama_rmse * 1.02);
      // Today the K search reproduces llama-quantize's bytes too. This pins the reference; a
      // deliberate improvement of the search may drop it and keep the RMSE check above.
      EXPECT_EQ(same_blocks, n_blocks);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantFileTest, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace gemlet

// Safetensors reader: well-formed files, every kind of malformed header, sharded checkpoints.
#include "convert/safetensors.h"

#include <gtest/gtest.h>

#include "base/half.h"
#include "convert/test_util.h"

namespace gemlet {
namespace {

using testing::F32Tensor;
using testing::RawTensor;
using testing::SafetensorsBytes;
using testing::ScratchDir;
using testing::WriteBytes;

Result<std::unique_ptr<SafetensorsFile>> ParseBytes(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::Parse(bytes.data(), bytes.size(), "test.safetensors");
}

// The error of parsing `header` with `data_bytes` of data; empty if it parsed.
std::string HeaderError(const std::string& header, size_t data_bytes) {
  const std::vector<uint8_t> bytes = SafetensorsBytes(header, data_bytes);
  auto f = ParseBytes(bytes);
  return f.ok() ? "" : f.message();
}

TEST(Safetensors, ReadsTensorsOfEveryConvertibleType) {
  std::map<std::string, RawTensor> tensors;
  tensors["a.weight"] = F32Tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  RawTensor bf;
  bf.dtype = "BF16";
  bf.shape = {3};
  for (float v : {1.5f, -2.0f, 0.25f}) {
    const uint16_t b = F32ToBf16(v);
    bf.bytes.push_back(static_cast<uint8_t>(b & 0xff));
    bf.bytes.push_back(static_cast<uint8_t>(b >> 8));
  }
  tensors["b"] = bf;
  RawTensor h;
  h.dtype = "F16";
  h.shape = {1, 2};
  for (float v : {0.5f, 65504.0f}) {
    const uint16_t b = F32ToF16(v);
    h.bytes.push_back(static_cast<uint8_t>(b & 0xff));
    h.bytes.push_back(static_cast<uint8_t>(b >> 8));
  }
  tensors["c"] = h;
  tensors["scalar"] = F32Tensor({}, {7.0f});
  const std::vector<uint8_t> bytes = SafetensorsBytes(tensors);
  auto f = ParseBytes(bytes);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ((*f)->tensors().size(), 4u);

  const StTensor* a = (*f)->Find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ShapeString(), "[2, 3]");
  EXPECT_EQ(a->n_rows(), 2);
  float row[3];
  a->ReadRowF32(1, row);
  EXPECT_EQ(row[0], 4.0f);
  EXPECT_EQ(row[2], 6.0f);

  (*f)->Find("b")->ReadRowF32(0, row);
  EXPECT_EQ(row[0], 1.5f);
  EXPECT_EQ(row[1], -2.0f);
  EXPECT_EQ(row[2], 0.25f);
  (*f)->Find("c")->ReadRowF32(0, row);
  EXPECT_EQ(row[0], 0.5f);
  EXPECT_EQ(row[1], 65504.0f);

  const StTensor* s = (*f)->Find("scalar");
  EXPECT_EQ(s->n_elements(), 1);
  EXPECT_EQ(s->n_rows(), 1);
  s->ReadRowF32(0, row);
  EXPECT_EQ(row[0], 7.0f);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
}

TEST(Safetensors, RejectsTruncatedFiles) {
  std::map<std::string, RawTensor> tensors;
  tensors["w"] = F32Tensor({4, 4}, std::vector<float>(16, 1.0f));
  const std::vector<uint8_t> good = SafetensorsBytes(tensors);

  std::vector<uint8_t> cut(good.begin(), good.end() - 4);  // last tensor short by 4 bytes
  auto f = ParseBytes(cut);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("'w'"), std::string::npos) << f.message();
  EXPECT_NE(f.message().find("truncated"), std::string::npos) << f.message();

  std::vector<uint8_t> header_cut(good.begin(), good.begin() + 20);  // inside the JSON
  f = ParseBytes(header_cut);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("past the end"), std::string::npos) << f.message();

  std::vector<uint8_t> tiny(good.begin(), good.begin() + 5);
  f = ParseBytes(tiny);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("too short"), std::string::npos) << f.message();
  EXPECT_NE(f.message().find("test.safetensors"), std::string::npos) << f.message();

  std::vector<uint8_t> huge = good;
  const uint64_t absurd = uint64_t{1} << 40;
  std::memcpy(huge.data(), &absurd, 8);
  f = ParseBytes(huge);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("100 MB"), std::string::npos) << f.message();
}

TEST(Safetensors, RejectsBadHeaderJson) {
  EXPECT_NE(HeaderError("{\"w\": {\"dtype\": \"F32\", ", 0).find("not valid JSON"), std::string::npos);
  EXPECT_NE(HeaderError("[1, 2, 3]", 0).find("not a JSON object"), std::string::npos);
  EXPECT_NE(HeaderError(R"({"w": 3})", 0).find("'w'"), std::string::npos);
  EXPECT_NE(HeaderError(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4).find("dtype"), std::string::npos);
  EXPECT_NE(HeaderError(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4).find("shape"), std::string::npos);
  EXPECT_NE(HeaderError(R"({"w": {"dtype": "F32", "shape": [1]}})", 4).find("data_offsets"), std::string::npos);
  EXPECT_NE(HeaderError(R"({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}})", 4).find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(HeaderError(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4).find("non-negative"),
            std::string::npos);
  EXPECT_NE(HeaderError(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4).find("non-negative"),
            std::string::npos);
}

TEST(Safetensors, RejectsBadOffsets) {
  // Past the end of the data.
  std::string e = HeaderError(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4);
  EXPECT_NE(e.find("run past the end"), std::string::npos) << e;
  // Size does not match the shape.
  e = HeaderError(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 8);
  EXPECT_NE(e.find("needs 8"), std::string::npos) << e;
  // Reversed.
  e = HeaderError(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 8);
  EXPECT_NE(e.find("end before"), std::string::npos) << e;
  // Overlapping tensors.
  e = HeaderError(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                  12);
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
  EXPECT_NE(e.find("'a'"), std::string::npos) << e;
  // Negative offsets, a shape that overflows.
  e = HeaderError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 8);
  EXPECT_NE(e.find("non-negative"), std::string::npos) << e;
  e = HeaderError(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 8);
  EXPECT_NE(e.find("overflows"), std::string::npos) << e;
  // Adjacent tensors and empty ones are fine.
  e = HeaderError(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                      "b": {"dtype": "BF16", "shape": [2], "data_offsets": [4, 8]}})",
                  8);
  EXPECT_EQ(e, "");
}

TEST(Safetensors, OpensShardsThroughTheIndex) {
  ScratchDir dir;
  std::map<std::string, RawTensor> one, two;
  one["x"] = F32Tensor({2}, {1, 2});
  two["y"] = F32Tensor({1}, {3});
  WriteBytes(dir / "model-00001-of-00002.safetensors", SafetensorsBytes(one));
  WriteBytes(dir / "model-00002-of-00002.safetensors", SafetensorsBytes(two));

  // Without an index, the numbered shards are found by name.
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir.str());
  ASSERT_TRUE(ckpt.ok()) << ckpt.message();
  EXPECT_EQ((*ckpt)->tensors().size(), 2u);

  testing::WriteText(dir / "model.safetensors.index.json",
                     R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors",
                                                         "y": "model-00002-of-00002.safetensors"}})");
  ckpt = SafetensorsCheckpoint::OpenDir(dir.str());
  ASSERT_TRUE(ckpt.ok()) << ckpt.message();
  ASSERT_NE((*ckpt)->Find("y"), nullptr);
  float v = 0;
  (*ckpt)->Find("y")->ReadRowF32(0, &v);
  EXPECT_EQ(v, 3.0f);
  EXPECT_EQ((*ckpt)->files().size(), 2u);

  // The index names a tensor its shard does not hold.
  testing::WriteText(dir / "model.safetensors.index.json",
                     R"({"weight_map": {"x": "model-00002-of-00002.safetensors"}})");
  ckpt = SafetensorsCheckpoint::OpenDir(dir.str());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.message().find("'x'"), std::string::npos) << ckpt.message();

  // A missing shard, and a path that leaves the folder.
  testing::WriteText(dir / "model.safetensors.index.json", R"({"weight_map": {"x": "model-00009-of-00009.safetensors"}})");
  ckpt = SafetensorsCheckpoint::OpenDir(dir.str());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.message().find("model-00009-of-00009.safetensors"), std::string::npos) << ckpt.message();
  testing::WriteText(dir / "model.safetensors.index.json", R"({"weight_map": {"x": "../etc/passwd"}})");
  EXPECT_FALSE(SafetensorsCheckpoint::OpenDir(dir.str()).ok());

  // The same tensor in two shards.
  std::map<std::string, RawTensor> dup;
  dup["x"] = F32Tensor({1}, {9});
  WriteBytes(dir / "model-00002-of-00002.safetensors", SafetensorsBytes(dup));
  std::filesystem::remove(dir / "model.safetensors.index.json");
  ckpt = SafetensorsCheckpoint::OpenDir(dir.str());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.message().find("appears in both"), std::string::npos) << ckpt.message();
}

TEST(Safetensors, EmptyFolderHasNoWeights) {
  ScratchDir dir;
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir.str());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.message().find("model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace gemlet

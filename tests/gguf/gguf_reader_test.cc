// GgufFile on real llama.cpp files, a hand-built v2 file, and one specific error per kind of bad field.
#include "gguf/gguf_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "gguf_test_util.h"

namespace gemlet {
namespace {

using testing::Builder;
using testing::ParseError;
using testing::ParseExact;
using testing::ReadBytes;

const std::string kGgufDir = std::string(GEMLET_TESTDATA_DIR) + "/gguf/";
const std::string kQuantDir = std::string(GEMLET_TESTDATA_DIR) + "/quant/";

std::unique_ptr<GgufFile> OpenOrDie(const std::string& path) {
  auto f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.message();
  return f.ok() ? std::move(f).value() : nullptr;
}

// Real files: tensors lie inside the data section, in order, aligned and without overlap.
void ExpectSaneLayout(const GgufFile& f) {
  std::vector<const GgufTensor*> sorted;
  for (const GgufTensor& t : f.tensors()) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  uint64_t end = 0;
  for (const GgufTensor* t : sorted) {
    EXPECT_GE(t->offset, end) << t->name << " overlaps the previous tensor";
    EXPECT_EQ(t->offset % f.alignment(), 0u) << t->name;
    EXPECT_LE(f.data_offset() + t->offset + t->nbytes, f.file_size()) << t->name;
    end = t->offset + t->nbytes;
  }
}

// Expected values read off the files with an independent Python parser and `gemlet inspect`.
struct RealFile {
  const char* file;
  const char* arch;
  size_t n_kv;
  size_t n_tensors;
  size_t data_offset;
  size_t file_size;
  uint32_t block_count;
  uint32_t embedding_length;
  const char* first_tensor;
  const char* first_shape;
  const char* last_tensor;
  uint64_t last_offset;
  uint64_t parameters;
};

const RealFile kRealFiles[] = {
    {"gemma1_2b_like_mqa.gguf", "gemma", 28, 38, 14624, 2509600, 4, 128, "token_embd.weight", "[128, 512]",
     "output_norm.weight", 2494464, 623744},
    {"gemma3n_e2b_like.gguf", "gemma3n", 37, 145, 21728, 1682080, 6, 64, "altup_proj.weight", "[64, 64, 3]",
     "per_layer_proj_norm.weight", 1660288, 415088},
    {"gemma4_e2b_like.gguf", "gemma4", 38, 102, 18944, 1904896, 6, 64, "rope_freqs.weight", "[32]",
     "per_layer_proj_norm.weight", 1885888, 471446},
    {"gemma4_moe_kv_eq_v.gguf", "gemma4", 41, 133, 21120, 2041216, 6, 64, "rope_freqs.weight", "[32]",
     "output_norm.weight", 2019840, 504958},
};

class RealGguf : public ::testing::TestWithParam<RealFile> {};

TEST_P(RealGguf, LoadsWithKnownKeysAndTensors) {
  const RealFile& e = GetParam();
  auto f = OpenOrDie(kGgufDir + e.file);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->metadata().size(), e.n_kv);
  EXPECT_EQ(f->tensors().size(), e.n_tensors);
  EXPECT_EQ(f->data_offset(), e.data_offset);
  EXPECT_EQ(f->file_size(), e.file_size);
  EXPECT_EQ(*f->GetString("general.architecture"), e.arch);
  EXPECT_EQ(*f->GetU32(std::string(e.arch) + ".block_count"), e.block_count);
  EXPECT_EQ(*f->GetU32(std::string(e.arch) + ".embedding_length"), e.embedding_length);
  EXPECT_EQ(*f->GetU32("general.file_type"), 0u);  // all F32
  EXPECT_EQ(f->tensors().front().name, e.first_tensor);
  EXPECT_EQ(f->tensors().front().ShapeString(), e.first_shape);
  EXPECT_EQ(f->tensors().front().offset, 0u);
  EXPECT_EQ(f->tensors().back().name, e.last_tensor);
  EXPECT_EQ(f->tensors().back().offset, e.last_offset);
  uint64_t params = 0;
  for (const GgufTensor& t : f->tensors()) {
    EXPECT_EQ(t.type, DType::kF32) << t.name;
    EXPECT_EQ(t.nbytes, static_cast<size_t>(t.n_elements()) * 4) << t.name;
    EXPECT_EQ(f->FindTensor(t.name), &t);
    params += static_cast<uint64_t>(t.n_elements());
  }
  EXPECT_EQ(params, e.parameters);
  // The last tensor ends exactly at the end of the file.
  EXPECT_EQ(f->data_offset() + f->tensors().back().offset + f->tensors().back().nbytes, f->file_size());
  ExpectSaneLayout(*f);

  // The shared tokenizer: 512 pieces, 0-3 control, scores -1000.
  const auto* tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[2], "<bos>");
  EXPECT_EQ((*tokens)[511], "<t511>");
  EXPECT_EQ(f->GetF32Array("tokenizer.ggml.scores")->at(100), -1000.0f);
  EXPECT_EQ(f->GetI32Array("tokenizer.ggml.token_type")->at(3), 3);
  EXPECT_EQ(*f->GetU32("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
}

INSTANTIATE_TEST_SUITE_P(Files, RealGguf, ::testing::ValuesIn(kRealFiles),
                         [](const auto& info) {
                           std::string name = info.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

TEST(RealGgufKeys, FamilySpecificValues) {
  auto g1 = OpenOrDie(kGgufDir + "gemma1_2b_like_mqa.gguf");
  ASSERT_NE(g1, nullptr);
  EXPECT_EQ(*g1->GetU32("gemma.attention.head_count_kv"), 1u);
  EXPECT_EQ(*g1->GetU32("tokenizer.ggml.eot_token_id"), 107u);
  EXPECT_FLOAT_EQ(*g1->GetF32("gemma.attention.layer_norm_rms_epsilon"), 1e-6f);

  auto g3n = OpenOrDie(kGgufDir + "gemma3n_e2b_like.gguf");
  ASSERT_NE(g3n, nullptr);
  EXPECT_EQ(*g3n->GetU32("gemma3n.altup.num_inputs"), 4u);
  auto sparsity = g3n->GetF32Array("gemma3n.activation_sparsity_scale");
  ASSERT_TRUE(sparsity.ok());
  ASSERT_EQ(sparsity->size(), 6u);
  EXPECT_TRUE(std::isinf((*sparsity)[2]) && (*sparsity)[2] < 0);  // p = 0 gives -inf
  EXPECT_EQ(*g3n->GetBoolArray("gemma3n.attention.sliding_window_pattern"),
            (std::vector<bool>{true, true, false, true, true, false}));
  EXPECT_EQ(g3n->FindTensor("altup_proj.weight")->n_dims, 3);

  auto g4 = OpenOrDie(kGgufDir + "gemma4_e2b_like.gguf");
  ASSERT_NE(g4, nullptr);
  EXPECT_EQ(*g4->GetU32PerLayer("gemma4.feed_forward_length", 6),
            (std::vector<uint32_t>{128, 128, 128, 128, 256, 256}));
  EXPECT_EQ(*g4->GetU32PerLayer("gemma4.attention.head_count_kv", 6), std::vector<uint32_t>(6, 2));
  ASSERT_NE(g4->GetStringArray("tokenizer.ggml.merges"), nullptr);
  EXPECT_EQ(g4->GetStringArray("tokenizer.ggml.merges")->at(0), "<t4> <t5>");

  auto moe = OpenOrDie(kGgufDir + "gemma4_moe_kv_eq_v.gguf");
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(*moe->GetU32PerLayer("gemma4.attention.head_count_kv", 6), (std::vector<uint32_t>{2, 2, 1, 2, 2, 1}));
  EXPECT_EQ(*moe->GetU32("gemma4.expert_count"), 4u);
  EXPECT_FALSE(moe->GetU32PerLayer("gemma4.attention.head_count_kv", 5).ok());
}

nlohmann::json QuantIndex() {
  std::ifstream in(kQuantDir + "index.json");
  return nlohmann::json::parse(in);
}

// Every tensor of every quant file sits exactly where llama.cpp's index says, with its real type.
TEST(QuantGguf, TensorsMatchTheIndex) {
  const nlohmann::json index = QuantIndex();
  int checked = 0;
  for (const auto& [type_name, entry] : index["types"].items()) {
    auto f = OpenOrDie(kQuantDir + entry["file"].get<std::string>());
    ASSERT_NE(f, nullptr) << type_name;
    EXPECT_EQ(*f->GetString("general.architecture"), "llama");
    EXPECT_EQ(*f->GetU32("llama.block_count"), 1u);
    EXPECT_EQ(f->metadata().size(), 11u);
    ASSERT_EQ(f->tensors().size(), entry["tensors"].size()) << type_name;
    for (const auto& te : entry["tensors"]) {
      const std::string name = te["name"];
      const GgufTensor* t = f->FindTensor(name);
      ASSERT_NE(t, nullptr) << type_name << " " << name;
      EXPECT_EQ(static_cast<uint32_t>(t->type), te["ggml_type_id"].get<uint32_t>()) << type_name << " " << name;
      EXPECT_STREQ(DTypeName(t->type), te["ggml_type"].get<std::string>().c_str());
      ASSERT_EQ(t->n_dims, 2);
      EXPECT_EQ(t->ne[0], te["ne"][0].get<int64_t>());
      EXPECT_EQ(t->ne[1], te["ne"][1].get<int64_t>());
      EXPECT_EQ(f->data_offset() + t->offset, te["gguf_data_offset"].get<uint64_t>()) << type_name << " " << name;
      EXPECT_EQ(t->nbytes, te["nbytes"].get<size_t>()) << type_name << " " << name;
      ++checked;
    }
    ExpectSaneLayout(*f);
  }
  EXPECT_EQ(checked, 50);
  // The README's fallback: inside Q4_K.gguf the 1152-wide tensor is Q5_0.
  auto q4k = OpenOrDie(kQuantDir + "Q4_K.gguf");
  EXPECT_EQ(q4k->FindTensor("blk.0.ffn_up.weight")->type, DType::kQ5_0);
  EXPECT_EQ(q4k->FindTensor("blk.0.attn_q.weight")->type, DType::kQ4_K);
}

TEST(QuantGguf, SourceTensorBytesMatchTheRawFloats) {
  const nlohmann::json index = QuantIndex();
  auto f = OpenOrDie(kQuantDir + "source_f32.gguf");
  ASSERT_NE(f, nullptr);
  const std::vector<uint8_t> raw = ReadBytes(kQuantDir + "source.f32");
  ASSERT_EQ(raw.size(), 108544u);
  ASSERT_EQ(f->tensors().size(), 5u);
  for (const auto& te : index["source"]["tensors"]) {
    const GgufTensor* t = f->FindTensor(te["name"].get<std::string>());
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, DType::kF32);
    EXPECT_EQ(f->data_offset() + t->offset, te["gguf_data_offset"].get<uint64_t>());
    const size_t n = te["n_elements"].get<size_t>() * 4;
    ASSERT_EQ(t->nbytes, n);
    EXPECT_EQ(std::memcmp(t->data, raw.data() + te["raw_offset_bytes"].get<size_t>(), n), 0) << t->name;
  }
}

// ---------------------------------------------------------------------------------------------
TEST(GgufV2, AHandBuiltVersion2FileLoads) {
  const float values[8] = {1, -2, 3.5f, 0, 1e-3f, -1e30f, 7, 8};
  Builder b;
  b.Header(/*n_tensors=*/2, /*n_kv=*/3, /*version=*/2)
      .KvStr("general.architecture", "gemma")
      .KvU32("gemma.block_count", 2)
      .Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(2).Str("<pad>").Str("<eos>")
      .Tensor("w", {4, 2}, /*F32*/ 0, 0)
      .Tensor("v", {2}, /*F32*/ 0, 32)
      .AlignTo(32)
      .Raw(values, sizeof values)
      .Raw(values, 8);
  auto p = ParseExact(b.bytes());
  ASSERT_TRUE(p.file.ok()) << p.file.message();
  const GgufFile& f = **p.file;
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(*f.GetString("general.architecture"), "gemma");
  EXPECT_EQ(*f.GetU32("gemma.block_count"), 2u);
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens")->at(1), "<eos>");
  const GgufTensor* w = f.FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ShapeString(), "[4, 2]");
  EXPECT_EQ(std::memcmp(w->data, values, sizeof values), 0);
  EXPECT_EQ(std::memcmp(f.FindTensor("v")->data, values, 8), 0);
}

// ---------------------------------------------------------------------------------------------
// Each bad field gets its own error, and the message says which.
void ExpectError(const Builder& b, const std::string& want) {
  const std::string err = ParseError(b.bytes());
  EXPECT_NE(err.find(want), std::string::npos) << "wanted '" << want << "' in: " << (err.empty() ? "(parsed)" : err);
  EXPECT_NE(err.find("'test.gguf' is not a valid GGUF file"), std::string::npos) << err;
}

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

TEST(GgufErrors, Header) {
  ExpectError(Builder(), "too small for a GGUF header (0 bytes)");
  ExpectError(Builder().U32(0x46554746).U32(3).U64(0).U64(0), "bad magic");
  ExpectError(Builder().Header(0, 0, 1), "version 1 is obsolete");
  ExpectError(Builder().Header(0, 0, 4), "unsupported GGUF version 4");
  ExpectError(Builder().U32(0x46554747).U32(3).U64(0), "truncated file: header counts");
  ExpectError(Builder().Header(1ULL << 63, 0).Zeros(64), "claims 9223372036854775808 tensors, more than the file can hold");
  ExpectError(Builder().Header(0, kU64Max).Zeros(64), "claims 18446744073709551615 metadata entries");
  ExpectError(Builder().Header(0, 1ULL << 40).Zeros(64), "metadata entries, more than the file can hold");
}

TEST(GgufErrors, Strings) {
  ExpectError(Builder().Header(0, 1).U64(kU64Max).Zeros(16),
              "key of metadata entry 0 claims 18446744073709551615 bytes but only 16 remain");
  ExpectError(Builder().Header(0, 1).Str("k").U32(8).U64(kU64Max).Zeros(4), "key 'k' claims 18446744073709551615 bytes");
  ExpectError(Builder().Header(0, 1).Str("k").U32(9).U32(8).U64(2).Str("a").U64(1ULL << 62),
              "key 'k'[1] claims 4611686018427387904 bytes");
  ExpectError(Builder().Header(1, 0).U64(kU64Max).Zeros(40), "name of tensor 0 claims 18446744073709551615 bytes");
}

TEST(GgufErrors, Values) {
  ExpectError(Builder().Header(0, 1).Str("k").U32(13).U32(0), "key 'k' has unknown value type 13");
  ExpectError(Builder().Header(0, 1).Str("k").U32(kU64Max & 0xffffffff).U32(0), "has unknown value type 4294967295");
  ExpectError(Builder().Header(0, 1).Str("k").U32(9).U32(99).U64(0), "key 'k': unknown array element type 99");
  ExpectError(Builder().Header(0, 1).Str("b").U32(7).U8(2).Zeros(8), "bool value of key 'b' is 2");
  ExpectError(Builder().Header(0, 1).Str("b").U32(9).U32(7).U64(3).U8(1).U8(2).U8(0), "key 'b': bool element 1 is not 0 or 1");
  ExpectError(Builder().Header(0, 2).KvU32("k", 1).KvStr("k", "again"), "duplicate metadata key 'k'");
  // Names from the file are escaped and cut in messages, which stay on one line.
  const std::string ugly = "a\nb'\x1b" + std::string(300, 'z');
  const std::string err = ParseError(Builder().Header(0, 2).KvU32(ugly, 1).KvU32(ugly, 2).bytes());
  EXPECT_NE(err.find("duplicate metadata key 'a\\nb\\'\\x1bzzz"), std::string::npos) << err;
  EXPECT_NE(err.find("zzz...'"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_LT(err.size(), 250u);
  ExpectError(Builder().Header(0, 1).Str("k").U32(4).U8(1), "truncated file: value of key 'k'");
}

TEST(GgufErrors, ArrayCounts) {
  ExpectError(Builder().Header(0, 1).Str("k").U32(9).U32(5).U64(1ULL << 61).Zeros(64),
              "key 'k': array of 2305843009213693952 i32 does not fit in the 64 bytes left");
  ExpectError(Builder().Header(0, 1).Str("k").U32(9).U32(10).U64(kU64Max).Zeros(64), "array of 18446744073709551615 u64 does not fit");
  ExpectError(Builder().Header(0, 1).Str("k").U32(9).U32(8).U64(kU64Max).Zeros(64),
              "array of 18446744073709551615 str cannot fit in the 64 bytes left");
  ExpectError(Builder().Header(0, 1).Str("k").U32(9).U32(9).U64(1ULL << 60).Zeros(64),
              "array of 1152921504606846976 arr cannot fit");
}

TEST(GgufErrors, DeeplyNestedArraysStopWithoutRecursingFurther) {
  for (int depth : {9, 1000, 100000}) {
    Builder b;
    b.Header(0, 1).Str("deep").U32(9);
    for (int i = 1; i < depth; ++i) b.U32(9).U64(1);
    b.U32(5).U64(0);
    ExpectError(b, "key 'deep'[0][0][0][0][0][0][0][0]: arrays nested deeper than 8 levels");
  }
}

TEST(GgufErrors, Alignment) {
  auto with_alignment = [](Builder b) { return b.Tensor("t", {8}, 0, 0).AlignTo(64).Zeros(64); };
  ExpectError(with_alignment(Builder().Header(1, 1).KvU32("general.alignment", 0)), "general.alignment 0 is not a power of two");
  ExpectError(with_alignment(Builder().Header(1, 1).KvU32("general.alignment", 3)), "general.alignment 3 is not a power of two");
  ExpectError(with_alignment(Builder().Header(1, 1).Str("general.alignment").U32(5).U32(32)), "general.alignment must be u32");
  ExpectError(Builder().Header(1, 0).Tensor("t", {8}, 0, 4).AlignTo(32).Zeros(64), "tensor 't' data offset 4 is not aligned to 32");
  // A large power of two is legal: the data section then starts far beyond this small file.
  ExpectError(Builder().Header(1, 1).KvU32("general.alignment", 1u << 31).Tensor("t", {8}, 0, 0).Zeros(64),
              "the data section would start at byte 2147483648 but the file has");
}

TEST(GgufErrors, TensorShapes) {
  ExpectError(Builder().Header(1, 0).Str("t").U32(5).Zeros(80), "tensor 't' has 5 dimensions (1 to 4 allowed)");
  ExpectError(Builder().Header(1, 0).Str("t").U32(0).Zeros(80), "tensor 't' has 0 dimensions");
  ExpectError(Builder().Header(1, 0).Tensor("t", {4, 0}, 0, 0).Zeros(64), "tensor 't' has invalid dimension 1 = 0");
  ExpectError(Builder().Header(1, 0).Tensor("t", {1ULL << 63}, 0, 0).Zeros(64),
              "tensor 't' has invalid dimension 0 = 9223372036854775808");
  ExpectError(Builder().Header(1, 0).Tensor("t", {1ULL << 32, 1ULL << 32}, 0, 0).Zeros(64),
              "tensor 't' has an absurd element count (shape overflows)");
  ExpectError(Builder().Header(1, 0).Tensor("t", {2, 2, 2, 1ULL << 61}, 0, 0).Zeros(64), "shape overflows");
  // 3 * 2^61 F64 values fit in int64 but their bytes do not fit in 64 bits.
  ExpectError(Builder().Header(1, 0).Tensor("t", {1ULL << 61, 3}, 28, 0).Zeros(64), "tensor 't' is absurdly large");
  ExpectError(Builder().Header(1, 0).Tensor("t", {1ULL << 40}, 0, 0).AlignTo(32).Zeros(64), "runs past the end of the file");
  ExpectError(Builder().Header(1, 0).Tensor("t", {33}, 8, 0).AlignTo(32).Zeros(64),
              "tensor 't' of type Q8_0 has a row of 33 values, not a multiple of its block size 32");
  ExpectError(Builder().Header(1, 0).Str("t").U32(2).U64(4).Zeros(3), "truncated file: shape of tensor 't'");
}

TEST(GgufErrors, TensorTypesAndPlacement) {
  ExpectError(Builder().Header(1, 0).Tensor("t", {4}, 4, 0).AlignTo(32).Zeros(64), "tensor 't' has unknown tensor type id 4");
  ExpectError(Builder().Header(1, 0).Tensor("t", {4}, 1000, 0).AlignTo(32).Zeros(64), "unknown tensor type id 1000");
  ExpectError(Builder().Header(1, 0).Tensor("t", {4}, 0, 1024).AlignTo(32).Zeros(64),
              "tensor 't' (16 bytes at data offset 1024) runs past the end of the file");
  ExpectError(Builder().Header(1, 0).Tensor("t", {4}, 0, kU64Max - 31).AlignTo(32).Zeros(64), "runs past the end of the file");
  ExpectError(Builder().Header(1, 0).Tensor("t", {16}, 0, 0).AlignTo(32).Zeros(63), "(64 bytes at data offset 0) runs past");
  ExpectError(Builder().Header(2, 0).Tensor("t", {4}, 0, 0).Tensor("t", {4}, 0, 32).AlignTo(32).Zeros(64),
              "duplicate tensor name 't'");
  // The directory ends mid-way to the alignment and the file stops there.
  ExpectError(Builder().Header(1, 0).Tensor("t", {4}, 0, 0), "truncated file: the data section would start at byte");
  ExpectError(Builder().Header(1, 0).Str("t").U32(1).U64(4).U32(0), "truncated file: type/offset of tensor 't'");
}

TEST(GgufErrors, OpenNamesTheFile) {
  auto missing = GgufFile::Open("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot open '/nonexistent/model.gguf'"), std::string::npos);
  auto dir = GgufFile::Open(GEMLET_TESTDATA_DIR);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.message().find("is not a regular file"), std::string::npos);
  auto readme = GgufFile::Open(kGgufDir + "README.md");
  ASSERT_FALSE(readme.ok());
  EXPECT_NE(readme.message().find("README.md' is not a valid GGUF file: bad magic"), std::string::npos);
}

TEST(GgufGetters, ErrorsNameTheKey) {
  Builder b;
  b.Header(0, 6)
      .Str("neg").U32(5).U32(static_cast<uint32_t>(-3))
      .KvStr("s", "text")
      .KvU32("u", 7)
      .Str("big").U32(10).U64(1ULL << 40)
      .Str("layers").U32(9).U32(4).U64(2).U32(1).U32(2)
      .Str("f").U32(6).Put<float>(0.5f);
  auto p = ParseExact(b.bytes());
  ASSERT_TRUE(p.file.ok()) << p.file.message();
  const GgufFile& f = **p.file;
  EXPECT_NE(f.GetU32("missing").message().find("missing metadata key 'missing'"), std::string::npos);
  EXPECT_NE(f.GetU32("neg").message().find("'neg' = -3 is out of range"), std::string::npos);
  EXPECT_NE(f.GetU32("big").message().find("'big' = 1099511627776 is out of range"), std::string::npos);
  EXPECT_NE(f.GetU32("s").message().find("'s' has type str, expected an integer"), std::string::npos);
  EXPECT_NE(f.GetString("u").message().find("'u' has type u32, expected a string"), std::string::npos);
  EXPECT_NE(f.GetBool("u").message().find("expected bool"), std::string::npos);
  EXPECT_EQ(*f.GetU32Or("absent", 9), 9u);
  EXPECT_FALSE(f.GetU32Or("s", 9).ok());
  EXPECT_EQ(*f.GetF32("u"), 7.0f);
  EXPECT_EQ(*f.GetF32("f"), 0.5f);
  EXPECT_EQ(*f.GetU32PerLayer("u", 3), (std::vector<uint32_t>{7, 7, 7}));
  EXPECT_EQ(*f.GetU32PerLayer("layers", 2), (std::vector<uint32_t>{1, 2}));
  EXPECT_NE(f.GetU32PerLayer("layers", 3).message().find("'layers' has 2 entries, expected one per layer (3)"),
            std::string::npos);
  EXPECT_EQ(f.GetStringArray("s"), nullptr);
}

TEST(GgufValueText, EscapesAndAbbreviates) {
  const uint8_t u64_bytes[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0};
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kUint64;
  v.count = 2;
  v.raw = u64_bytes;
  EXPECT_EQ(v.ToString(), "[18446744073709551615, 1]");
  EXPECT_EQ(v.ToString(1), "[18446744073709551615, ... (2 u64)]");
  EXPECT_EQ(v.ToString(0), "[... (2 u64)]");
  GgufValue s;
  s.type = GgufType::kString;
  s.str = "a\nb\x1b[31m\"q\"";
  EXPECT_EQ(s.ToString(), "\"a\\nb\\x1b[31m\\\"q\\\"\"");
  // Cutting a long string never splits a UTF-8 character.
  std::string zh;
  for (int i = 0; i < 100; ++i) zh += "模";
  s.str = zh;
  const std::string shown = s.ToString();
  std::string want(1, '"');  // built by append: GCC 12 warns falsely (-Wrestrict) on "\"" + std::string
  want.append(zh, 0, 198).append("...\"");
  EXPECT_EQ(shown, want);
  GgufValue f;
  f.type = GgufType::kArray;
  f.elem_type = GgufType::kFloat32;
  const float floats[3] = {NAN, 1e30f, -1e30f};
  f.raw = reinterpret_cast<const uint8_t*>(floats);
  f.count = 3;
  EXPECT_EQ(f.IntAt(0), 0);  // no undefined float->int cast
  EXPECT_EQ(f.IntAt(1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(f.IntAt(2), std::numeric_limits<int64_t>::min());
}

}  // namespace
}  // namespace gemlet

// HF -> GGUF conversion against the files llama.cpp's own converter wrote, key by key and tensor by tensor.
#include "convert/convert.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <set>

#include "base/half.h"
#include "common/spm_proto.h"
#include "convert/gguf_metadata.h"
#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "convert/test_util.h"
#include "gguf/gguf_reader.h"

namespace gemlet {
namespace {

namespace fs = std::filesystem;
using testing::kGgufDir;
using testing::kHfDir;
using testing::ScratchDir;

// The folders llama.cpp converted; the other four it cannot (or cannot faithfully) represent.
const char* kReferenceModels[] = {"gemma1_2b_like_mqa", "gemma3n_e2b_like", "gemma4_e2b_like", "gemma4_moe_kv_eq_v"};

std::unique_ptr<GgufFile> Convert(const ConvertOptions& options) {
  Result<ConvertResult> r = ConvertHfToGguf(options);
  EXPECT_TRUE(r.ok()) << r.message();
  if (!r.ok()) return nullptr;
  auto file = GgufFile::Open(options.output_path);
  EXPECT_TRUE(file.ok()) << file.message();
  return file.ok() ? std::move(file).value() : nullptr;
}

std::unique_ptr<GgufFile> Convert(const std::string& hf_dir, const std::string& out, std::optional<DType> type = {}) {
  ConvertOptions o;
  o.hf_dir = hf_dir;
  o.output_path = out;
  o.outtype = type;
  return Convert(o);
}

// Same type, same value; numeric arrays compared byte for byte (so -inf and every float bit counts).
::testing::AssertionResult SameValue(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return ::testing::AssertionFailure() << "type " << GgufTypeName(a.type) << " vs " << GgufTypeName(b.type);
  switch (a.type) {
    case GgufType::kString:
      if (a.str != b.str) return ::testing::AssertionFailure() << "'" << a.str << "' vs '" << b.str << "'";
      return ::testing::AssertionSuccess();
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      if (a.f64 != b.f64) return ::testing::AssertionFailure() << a.f64 << " vs " << b.f64;
      return ::testing::AssertionSuccess();
    case GgufType::kArray:
      if (a.elem_type != b.elem_type || a.count != b.count) {
        return ::testing::AssertionFailure() << "array " << a.ToString() << " vs " << b.ToString();
      }
      if (a.elem_type == GgufType::kString) {
        if (a.strings != b.strings) return ::testing::AssertionFailure() << a.ToString() << " vs " << b.ToString();
      } else if (GgufScalarSize(a.elem_type) > 0) {
        if (std::memcmp(a.raw, b.raw, a.count * GgufScalarSize(a.elem_type)) != 0) {
          return ::testing::AssertionFailure() << a.ToString() << " vs " << b.ToString();
        }
      }
      return ::testing::AssertionSuccess();
    default:
      if (a.u64 != b.u64 || a.i64 != b.i64) return ::testing::AssertionFailure() << a.ToString() << " vs " << b.ToString();
      return ::testing::AssertionSuccess();
  }
}

// general.* keys other than these are informational (name, size label, ...).
bool Compared(std::string_view key) {
  return key.substr(0, 8) != "general." || key == "general.architecture" || key == "general.file_type" ||
         key == "general.type" || key == "general.quantization_version";
}

std::vector<float> TensorF32(const GgufTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  DequantizeRow(t.type, t.data, out.data(), t.n_elements());
  return out;
}

std::vector<float> SourceF32(const StTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < t.n_rows(); ++r) t.ReadRowF32(r, out.data() + r * t.row_length());
  return out;
}

class ReferenceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceTest, MatchesLlamaCppKeyByKeyAndTensorByTensor) {
  const std::string model = GetParam();
  ScratchDir dir;
  auto ours = Convert(kHfDir + "/" + model, dir / "out.gguf");
  ASSERT_NE(ours, nullptr);
  auto theirs_or = GgufFile::Open(kGgufDir + "/" + model + ".gguf");
  ASSERT_TRUE(theirs_or.ok()) << theirs_or.message();
  const GgufFile& theirs = **theirs_or;

  // Every compared key of theirs is in ours with the same type and value, and vice versa. Tokenizer keys
  // are compared too: without a tokenizer.json we write the same stand-in vocabulary.
  size_t compared = 0;
  for (const auto& [key, value] : theirs.metadata()) {
    if (!Compared(key)) continue;
    const GgufValue* mine = ours->Find(key);
    ASSERT_NE(mine, nullptr) << "missing key " << key;
    EXPECT_TRUE(SameValue(*mine, value)) << key;
    ++compared;
  }
  for (const auto& [key, value] : ours->metadata()) {
    if (Compared(key)) {
      EXPECT_TRUE(theirs.Has(key)) << "extra key " << key;
    }
  }
  EXPECT_GT(compared, 20u);

  ASSERT_EQ(ours->tensors().size(), theirs.tensors().size());
  for (const GgufTensor& want : theirs.tensors()) {
    const GgufTensor* got = ours->FindTensor(want.name);
    ASSERT_NE(got, nullptr) << "missing tensor " << want.name;
    EXPECT_EQ(got->ShapeString(), want.ShapeString()) << want.name;
    EXPECT_EQ(got->type, DType::kF32) << want.name;
    ASSERT_EQ(got->nbytes, want.nbytes) << want.name;
    EXPECT_EQ(std::memcmp(got->data, want.data, want.nbytes), 0) << "values differ: " << want.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Convert, ReferenceTest, ::testing::ValuesIn(kReferenceModels));

TEST(Convert, EveryTestFolderConverts) {
  // Tensor counts: per layer + model-level (token_embd, output_norm, rope_freqs, PLE, AltUp).
  const std::map<std::string, std::pair<std::string, size_t>> expected = {
      {"gemma1_2b_like_mqa", {"gemma", 4 * 9 + 2}},
      {"gemma2_gqa_softcap", {"gemma2", 6 * 11 + 2}},
      {"gemma3_1b_like", {"gemma3", 6 * 13 + 2}},
      {"gemma3_4b_like_rope_linear8", {"gemma3", 6 * 13 + 2}},
      {"gemma3n_e2b_like", {"gemma3n", 145}},
      {"gemma4_e2b_like", {"gemma4", 102}},
      {"gemma4_moe_kv_eq_v", {"gemma4", 133}},
      // K=V: global layers 1 and 3 have no attn_v; no PLE, no MoE.
      {"gemma4_unified_12b_like", {"gemma4", 2 * 14 + 2 * 13 + 3}},
  };
  size_t seen = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(kHfDir)) {
    if (!e.is_directory()) continue;
    const std::string model = e.path().filename().string();
    SCOPED_TRACE(model);
    ScratchDir dir;
    auto out = Convert(e.path().string(), dir / "out.gguf");
    ASSERT_NE(out, nullptr);
    auto it = expected.find(model);
    ASSERT_NE(it, expected.end()) << "a new test folder: add its expectations here";
    EXPECT_EQ(*out->GetString("general.architecture"), it->second.first);
    EXPECT_EQ(out->tensors().size(), it->second.second);
    ++seen;

    // Spot-check values against the checkpoint: the embedding as is, norms as 1 + w where Gemma wants it.
    auto st = SafetensorsFile::Open(e.path().string() + "/model.safetensors");
    ASSERT_TRUE(st.ok()) << st.message();
    const GgufTensor* embd = out->FindTensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(TensorF32(*embd), SourceF32(*(*st)->Find("model.embed_tokens.weight")));
    const std::vector<float> w = SourceF32(*(*st)->Find("model.layers.0.input_layernorm.weight"));
    const std::vector<float> got = TensorF32(*out->FindTensor("blk.0.attn_norm.weight"));
    const bool adds_one = it->second.first == "gemma" || it->second.first == "gemma2" || it->second.first == "gemma3";
    ASSERT_EQ(got.size(), w.size());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(got[i], adds_one ? w[i] + 1.0f : w[i]) << i;
  }
  EXPECT_EQ(seen, expected.size());
}

// gemlet's extension keys carry what llama.cpp's converter drops for these configs (category C).
TEST(Convert, ExtensionKeysForCategoryCModels) {
  ScratchDir dir;
  auto g2 = Convert(kHfDir + "/gemma2_gqa_softcap", dir / "g2.gguf");
  ASSERT_NE(g2, nullptr);
  EXPECT_EQ(*g2->GetF32("gemma2.attention.scale"), static_cast<float>(1.0 / std::sqrt(24.0)));
  EXPECT_EQ(*g2->GetBoolArray("gemma2.attention.sliding_window_pattern"),
            (std::vector<bool>{true, false, true, false, true, false}));
  EXPECT_EQ(*g2->GetF32("gemma2.attn_logit_softcapping"), 50.0f);
  EXPECT_EQ(*g2->GetF32("gemma2.final_logit_softcapping"), 30.0f);
  EXPECT_EQ(*g2->GetU32("gemma2.attention.sliding_window"), 8u);
  EXPECT_FALSE(g2->Has("gemma2.rope.freq_base"));  // 1e4 is llama.cpp's default

  auto g3 = Convert(kHfDir + "/gemma3_4b_like_rope_linear8", dir / "g3.gguf");
  ASSERT_NE(g3, nullptr);
  EXPECT_EQ(*g3->GetF32("gemma3.attention.scale"), static_cast<float>(1.0 / std::sqrt(20.0)));
  EXPECT_EQ(*g3->GetString("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(*g3->GetF32("gemma3.rope.scaling.factor"), 8.0f);
  EXPECT_EQ(*g3->GetF32("gemma3.rope.freq_base"), 1e6f);
  EXPECT_EQ(*g3->GetF32("gemma3.rope.freq_base_swa"), 1e4f);
  EXPECT_EQ(*g3->GetBoolArray("gemma3.attention.sliding_window_pattern"),
            (std::vector<bool>{true, true, true, true, true, false}));

  auto g1b = Convert(kHfDir + "/gemma3_1b_like", dir / "g1b.gguf");
  ASSERT_NE(g1b, nullptr);
  EXPECT_FALSE(g1b->Has("gemma3.attention.scale"));  // query_pre_attn_scalar == head_dim
  EXPECT_FALSE(g1b->Has("gemma3.rope.scaling.type"));
  EXPECT_EQ(*g1b->GetBoolArray("gemma3.attention.sliding_window_pattern"),
            (std::vector<bool>{true, true, false, true, true, false}));
  EXPECT_EQ(*g1b->GetU32("gemma3.attention.sliding_window"), 8u);
}

// The transformers 4 hub form (rope_theta, rope_local_base_freq, rope_scaling) means the same as
// transformers 5's rope_parameters; so does a multimodal text_config wrapper.
TEST(Convert, OldHubConfigKeysGiveTheSameMetadata) {
  nlohmann::json config = nlohmann::json::parse(testing::ReadText(kHfDir + "/gemma3_4b_like_rope_linear8/config.json"));
  config.erase("rope_parameters");
  config["rope_theta"] = 1000000.0;
  config["rope_local_base_freq"] = 10000.0;
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 8.0}};
  config.erase("layer_types");  // old configs give the pattern as a number
  config.erase("_sliding_window_pattern");
  config["sliding_window_pattern"] = 6;
  ScratchDir dir;
  fs::create_directories(dir / "old");
  testing::WriteText(dir / "old/config.json", config.dump(2));
  fs::create_symlink(kHfDir + "/gemma3_4b_like_rope_linear8/model.safetensors", dir / "old/model.safetensors");

  // Wrapped: {"model_type": "gemma3", "text_config": {...}} and the same old keys.
  nlohmann::json wrapped = {{"model_type", "gemma3"}, {"architectures", {"Gemma3ForConditionalGeneration"}}};
  nlohmann::json text = config;
  text["model_type"] = "gemma3_text";
  wrapped["text_config"] = text;
  fs::create_directories(dir / "wrapped");
  testing::WriteText(dir / "wrapped/config.json", wrapped.dump(2));
  fs::create_symlink(kHfDir + "/gemma3_4b_like_rope_linear8/model.safetensors", dir / "wrapped/model.safetensors");

  auto fresh = Convert(kHfDir + "/gemma3_4b_like_rope_linear8", dir / "new.gguf");
  ASSERT_NE(fresh, nullptr);
  for (const char* variant : {"old", "wrapped"}) {
    SCOPED_TRACE(variant);
    auto old = Convert(dir / variant, dir / (std::string(variant) + ".gguf"));
    ASSERT_NE(old, nullptr);
    size_t n = 0;
    for (const auto& [key, value] : fresh->metadata()) {
      if (key.substr(0, 8) == "general." || key.substr(0, 10) == "tokenizer.") continue;
      const GgufValue* v = old->Find(key);
      ASSERT_NE(v, nullptr) << key;
      EXPECT_TRUE(SameValue(*v, value)) << key;
      ++n;
    }
    for (const auto& [key, value] : old->metadata()) EXPECT_TRUE(fresh->Has(key)) << "extra key " << key;
    EXPECT_EQ(n, 16u);
  }

  // Gemma 2 hub form: rope_theta on its own, no layer_types (alternating by default).
  nlohmann::json g2 = nlohmann::json::parse(testing::ReadText(kHfDir + "/gemma2_gqa_softcap/config.json"));
  g2.erase("rope_parameters");
  g2.erase("layer_types");
  g2["rope_theta"] = 10000.0;
  fs::create_directories(dir / "g2");
  testing::WriteText(dir / "g2/config.json", g2.dump());
  auto c = ParseHfConfig(g2.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->is_sliding, (std::vector<bool>{true, false, true, false, true, false}));
  EXPECT_EQ(c->rope_full.theta, 10000.0);
  EXPECT_FALSE(c->has_layer_types);
}

TEST(Convert, MultimodalCheckpointNamesAndTowersAreHandled) {
  // The decoder under model.language_model., plus a vision tower that must be skipped.
  auto src = SafetensorsFile::Open(kHfDir + "/gemma3_1b_like/model.safetensors");
  ASSERT_TRUE(src.ok()) << src.message();
  std::map<std::string, testing::RawTensor> tensors;
  for (const StTensor& t : (*src)->tensors()) {
    testing::RawTensor raw;
    raw.shape = t.shape;
    raw.bytes.assign(t.data, t.data + t.nbytes);
    tensors["model.language_model." + t.name.substr(6)] = raw;
  }
  tensors["model.vision_tower.vision_model.embeddings.patch_embedding.weight"] = testing::F32Tensor({2, 2}, {1, 2, 3, 4});
  tensors["model.multi_modal_projector.mm_input_projection_weight"] = testing::F32Tensor({2}, {1, 2});
  ScratchDir dir;
  testing::WriteBytes(dir / "model.safetensors", testing::SafetensorsBytes(tensors));
  nlohmann::json text = nlohmann::json::parse(testing::ReadText(kHfDir + "/gemma3_1b_like/config.json"));
  nlohmann::json config = {{"model_type", "gemma3"}, {"text_config", text}, {"vision_config", {{"hidden_size", 2}}}};
  testing::WriteText(dir / "config.json", config.dump());

  auto plain = Convert(kHfDir + "/gemma3_1b_like", dir / "plain.gguf");
  auto wrapped = Convert(dir.str(), dir / "wrapped.gguf");
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(wrapped, nullptr);
  ASSERT_EQ(wrapped->tensors().size(), plain->tensors().size());
  for (const GgufTensor& t : plain->tensors()) {
    const GgufTensor* w = wrapped->FindTensor(t.name);
    ASSERT_NE(w, nullptr) << t.name;
    ASSERT_EQ(w->nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(w->data, t.data, t.nbytes), 0) << t.name;
  }
}

TEST(Convert, ShardedCheckpointEqualsSingleFile) {
  auto src = SafetensorsFile::Open(kHfDir + "/gemma1_2b_like_mqa/model.safetensors");
  ASSERT_TRUE(src.ok()) << src.message();
  std::map<std::string, testing::RawTensor> shard[2];
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (const StTensor& t : (*src)->tensors()) {
    testing::RawTensor raw;
    raw.shape = t.shape;
    raw.bytes.assign(t.data, t.data + t.nbytes);
    const int s = (i++) % 2;
    shard[s][t.name] = raw;
    index["weight_map"][t.name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  ScratchDir dir;
  testing::WriteBytes(dir / "model-00001-of-00002.safetensors", testing::SafetensorsBytes(shard[0]));
  testing::WriteBytes(dir / "model-00002-of-00002.safetensors", testing::SafetensorsBytes(shard[1]));
  testing::WriteText(dir / "model.safetensors.index.json", index.dump());
  fs::copy_file(kHfDir + "/gemma1_2b_like_mqa/config.json", dir / "config.json");

  auto out = Convert(dir.str(), dir / "out.gguf");
  ASSERT_NE(out, nullptr);
  auto ref = GgufFile::Open(kGgufDir + "/gemma1_2b_like_mqa.gguf");
  ASSERT_TRUE(ref.ok());
  ASSERT_EQ(out->tensors().size(), (*ref)->tensors().size());
  for (const GgufTensor& t : (*ref)->tensors()) {
    const GgufTensor* o = out->FindTensor(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << t.name;
  }
}

// f16/bf16 output: each matrix is the f32 reference rounded; norms and 1-D tensors stay f32.
TEST(Convert, HalfOutputTypesRoundTheF32Values) {
  for (DType type : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(type));
    for (const char* model : kReferenceModels) {
      SCOPED_TRACE(model);
      ScratchDir dir;
      auto out = Convert(kHfDir + "/" + model, dir / "out.gguf", type);
      ASSERT_NE(out, nullptr);
      auto ref = GgufFile::Open(kGgufDir + "/" + std::string(model) + ".gguf");
      ASSERT_TRUE(ref.ok());
      EXPECT_EQ(*out->GetU32("general.file_type"), FileTypeOf(type));
      size_t half = 0;
      for (const GgufTensor& want : (*ref)->tensors()) {
        const GgufTensor* got = out->FindTensor(want.name);
        ASSERT_NE(got, nullptr) << want.name;
        const std::string name(want.name);
        const bool small = want.n_dims == 1 || name.ends_with("_norm.weight") || !name.ends_with(".weight") ||
                           name.ends_with("ffn_gate_inp.weight") || name.ends_with("altup_correct_coef.weight") ||
                           name.ends_with("altup_predict_coef.weight");
        ASSERT_EQ(got->type, small ? DType::kF32 : type) << name;
        const float* f = reinterpret_cast<const float*>(want.data);
        const uint16_t* h = reinterpret_cast<const uint16_t*>(got->data);
        if (small) {
          EXPECT_EQ(std::memcmp(got->data, want.data, want.nbytes), 0) << name;
          continue;
        }
        ++half;
        for (int64_t i = 0; i < want.n_elements(); ++i) {
          const uint16_t expect = type == DType::kF16 ? F32ToF16(f[i]) : F32ToBf16(f[i]);
          ASSERT_EQ(h[i], expect) << name << " element " << i;
        }
      }
      EXPECT_GT(half, 10u);
    }
  }
}

TEST(Convert, Bf16CheckpointKeepsBf16ByDefault) {
  ScratchDir dir;
  ConvertOptions o;
  o.hf_dir = kHfDir + "/gemma3_1b_like";
  o.weights_path = kHfDir + "/gemma3_1b_like/model.bf16.safetensors";
  o.output_path = dir / "bf16.gguf";
  auto out = Convert(o);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(*out->GetU32("general.file_type"), 32u);
  auto src = SafetensorsFile::Open(o.weights_path);
  ASSERT_TRUE(src.ok());

  const GgufTensor* q = out->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::kBF16);
  const StTensor* q_src = (*src)->Find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(q->nbytes, q_src->nbytes);
  EXPECT_EQ(std::memcmp(q->data, q_src->data, q->nbytes), 0);  // bf16 bits pass through unchanged

  // Norms: upcast to f32, then 1 + w in f32.
  const GgufTensor* norm = out->FindTensor("blk.0.attn_q_norm.weight");
  EXPECT_EQ(norm->type, DType::kF32);
  const std::vector<float> w = SourceF32(*(*src)->Find("model.layers.0.self_attn.q_norm.weight"));
  const std::vector<float> got = TensorF32(*norm);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(got[i], w[i] + 1.0f);

  // --outtype f32 from bf16: exact upcast.
  o.output_path = dir / "f32.gguf";
  o.outtype = DType::kF32;
  auto f32 = Convert(o);
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(*f32->GetU32("general.file_type"), 0u);
  EXPECT_EQ(TensorF32(*f32->FindTensor("token_embd.weight")), SourceF32(*(*src)->Find("model.embed_tokens.weight")));
}

// With a tokenizer.json the vocabulary comes from it (src/tokenizer), not the placeholder.
TEST(Convert, UsesTokenizerJsonWhenPresent) {
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  const char* special[] = {"<pad>", "<eos>", "<bos>", "<unk>"};
  for (int i = 0; i < 512; ++i) {
    const std::string piece = i < 4 ? special[i] : "tok" + std::to_string(i);
    vocab[piece] = i;
    if (i < 4) added.push_back({{"id", i}, {"content", piece}, {"special", true}, {"normalized", false}});
  }
  const nlohmann::json tokenizer = {
      {"added_tokens", added},
      {"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  ScratchDir dir;
  fs::create_directories(dir / "m");
  fs::copy_file(kHfDir + "/gemma1_2b_like_mqa/config.json", dir / "m/config.json");
  fs::create_symlink(kHfDir + "/gemma1_2b_like_mqa/model.safetensors", dir / "m/model.safetensors");
  testing::WriteText(dir / "m/tokenizer.json", tokenizer.dump());
  ConvertOptions o;
  o.hf_dir = dir / "m";
  o.output_path = dir / "out.gguf";
  Result<ConvertResult> r = ConvertHfToGguf(o);
#if defined(GEMLET_CONVERT_HAS_HF_TOKENIZER)
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->placeholder_vocab);
  auto file = GgufFile::Open(o.output_path);
  ASSERT_TRUE(file.ok()) << file.message();
  const auto* tokens = (*file)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[7], "tok7");
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ((*file)->tensors().size(), 38u);
#else
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("tokenizer.json"), std::string::npos) << r.message();
#endif
}

// Without tokenizer.json, a SentencePiece tokenizer.model gives the vocabulary; --tokenizer picks a file.
TEST(Convert, UsesTokenizerModelWithoutTokenizerJson) {
  std::vector<std::string> normal = {"\xE2\x96\x81"};
  for (char c = 'a'; c <= 'z'; ++c) normal.push_back(std::string(1, c));
  gemlet::test::SpmTestModel spm = gemlet::test::GemmaLikeSpmModel(normal);
  ScratchDir dir;
  fs::create_directories(dir / "m");
  fs::copy_file(kHfDir + "/gemma1_2b_like_mqa/config.json", dir / "m/config.json");
  fs::create_symlink(kHfDir + "/gemma1_2b_like_mqa/model.safetensors", dir / "m/model.safetensors");
  testing::WriteText(dir / "m/tokenizer.model", gemlet::test::SpmModelBytes(spm));
  ConvertOptions o;
  o.hf_dir = dir / "m";
  o.output_path = dir / "out.gguf";
  Result<ConvertResult> r = ConvertHfToGguf(o);
#if defined(GEMLET_CONVERT_HAS_HF_TOKENIZER)
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->placeholder_vocab);
  EXPECT_EQ(r->tokenizer_source, dir / "m/tokenizer.model");
  auto file = GgufFile::Open(o.output_path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.pre"), "default");
  const auto* tokens = (*file)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);  // config.json's vocab_size; the rest [PADn]
  EXPECT_EQ((*tokens)[4], "<start_of_turn>");
  EXPECT_EQ((*tokens)[264], "a");
  EXPECT_EQ((*tokens)[511], "[PAD511]");
  auto types = (*file)->GetI32Array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ((*types)[0], 3);
  EXPECT_EQ((*types)[3], 2);
  EXPECT_EQ((*types)[4], 4);
  EXPECT_EQ((*types)[7], 6);
  EXPECT_EQ((*types)[264], 1);
  EXPECT_EQ((*types)[511], 5);
  auto scores = (*file)->GetF32Array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ((*scores)[264], -1.0f);
  EXPECT_EQ((*scores)[511], -10000.0f);
  EXPECT_EQ(*(*file)->GetU32("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_EQ(*(*file)->GetU32("tokenizer.ggml.unknown_token_id"), 3u);  // from the trainer_spec
  EXPECT_EQ(*(*file)->GetU32("tokenizer.ggml.eot_token_id"), 107u);    // Gemma 1, as llama.cpp
  EXPECT_EQ(*(*file)->GetBool("tokenizer.ggml.add_space_prefix"), false);
  EXPECT_EQ((*file)->tensors().size(), 38u);

  // A tokenizer.json beside it wins unless --tokenizer names the model.
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 512; ++i) vocab["tok" + std::to_string(i)] = i;
  testing::WriteText(dir / "m/tokenizer.json",
                     nlohmann::json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}}.dump());
  auto first_piece = [&](const std::string& tokenizer) -> std::string {
    fs::remove(o.output_path);
    o.tokenizer_path = tokenizer;
    Result<ConvertResult> c = ConvertHfToGguf(o);
    EXPECT_TRUE(c.ok()) << c.message();
    auto f = GgufFile::Open(o.output_path);
    if (!c.ok() || !f.ok()) return "";
    return std::string((*(*f)->GetStringArray("tokenizer.ggml.tokens"))[4]);
  };
  EXPECT_EQ(first_piece(""), "tok4");
  EXPECT_EQ(first_piece(dir / "m/tokenizer.model"), "<start_of_turn>");
  EXPECT_EQ(first_piece(dir / "m/tokenizer.json"), "tok4");

  // A corrupt or unsupported model is refused, by name, and nothing is written.
  fs::remove(o.output_path);
  testing::WriteText(dir / "cut.model", gemlet::test::SpmModelBytes(spm).substr(0, 700));
  o.tokenizer_path = dir / "cut.model";
  r = ConvertHfToGguf(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cut.model: not a valid SentencePiece model"), std::string::npos) << r.message();
  EXPECT_FALSE(fs::exists(o.output_path));
  spm.model_type = 1;
  testing::WriteText(dir / "unigram.model", gemlet::test::SpmModelBytes(spm));
  o.tokenizer_path = dir / "unigram.model";
  r = ConvertHfToGguf(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("unigram"), std::string::npos) << r.message();
  EXPECT_FALSE(fs::exists(o.output_path));
#else
  ASSERT_FALSE(r.ok());
#endif
}

TEST(Convert, NormalQuantileIsExactInF32) {
  EXPECT_EQ(static_cast<float>(NormalQuantile(0.95)), 1.6448535919189453f);
  EXPECT_EQ(NormalQuantile(0.0), -INFINITY);
  EXPECT_NEAR(NormalQuantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(NormalQuantile(0.975), 1.9599639845400536, 1e-13);
  EXPECT_NEAR(NormalQuantile(0.95), 1.6448536269514715, 1e-14);
  EXPECT_NEAR(NormalQuantile(1e-9), -5.9978070150076865, 1e-12);
  EXPECT_NEAR(NormalQuantile(0.999999), 4.753424308817089, 1e-12);
}

// ---- bad input: a clear error, and nothing under the output name -------------------------------

class BadInputTest : public ::testing::Test {
 protected:
  // Copies a test folder's config and weights into a scratch folder to be damaged.
  std::string CopyModel(const std::string& model) {
    const std::string d = dir_ / model;
    fs::create_directories(d);
    fs::copy_file(kHfDir + "/" + model + "/config.json", d + "/config.json");
    fs::copy_file(kHfDir + "/" + model + "/model.safetensors", d + "/model.safetensors");
    return d;
  }
  // Converts and expects an error containing `needle`, with no output file left behind.
  void ExpectError(const std::string& hf_dir, const std::string& needle) {
    ConvertOptions o;
    o.hf_dir = hf_dir;
    o.output_path = dir_ / "out.gguf";
    Result<ConvertResult> r = ConvertHfToGguf(o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
    EXPECT_FALSE(fs::exists(o.output_path));
    EXPECT_FALSE(fs::exists(o.output_path + ".tmp"));
  }
  ScratchDir dir_;
};

TEST_F(BadInputTest, MissingFolderOrConfig) {
  ExpectError(dir_ / "nope", "is not a directory");
  fs::create_directories(dir_ / "empty");
  ExpectError(dir_ / "empty", "no config.json");
}

TEST_F(BadInputTest, UnsupportedModelType) {
  const std::string d = CopyModel("gemma1_2b_like_mqa");
  testing::WriteText(d + "/config.json", R"({"model_type": "llama", "hidden_size": 8})");
  ExpectError(d, "unsupported model_type 'llama'");
  testing::WriteText(d + "/config.json", R"({"hidden_size": 8})");
  ExpectError(d, "no 'model_type'");
  testing::WriteText(d + "/config.json", R"({"model_type": "gemma", )");
  ExpectError(d, "not valid JSON");
  testing::WriteText(d + "/config.json", R"({"model_type": "gemma", "hidden_size": "big"})");
  ExpectError(d, "'hidden_size' must be");
}

TEST_F(BadInputTest, MissingTensor) {
  const std::string d = CopyModel("gemma1_2b_like_mqa");
  auto src = SafetensorsFile::Open(kHfDir + "/gemma1_2b_like_mqa/model.safetensors");
  ASSERT_TRUE(src.ok());
  std::map<std::string, testing::RawTensor> tensors;
  for (const StTensor& t : (*src)->tensors()) {
    testing::RawTensor raw;
    raw.shape = t.shape;
    raw.bytes.assign(t.data, t.data + t.nbytes);
    tensors[t.name] = raw;
  }
  const testing::RawTensor up = tensors["model.layers.2.mlp.up_proj.weight"];
  tensors.erase("model.layers.2.mlp.up_proj.weight");
  testing::WriteBytes(d + "/model.safetensors", testing::SafetensorsBytes(tensors));
  ExpectError(d, "missing tensor 'model.layers.2.mlp.up_proj.weight'");

  // An unknown tensor in the decoder.
  tensors["model.layers.2.mlp.up_proj.weight"] = up;
  tensors["model.layers.0.mystery.weight"] = testing::F32Tensor({1}, {0});
  testing::WriteBytes(d + "/model.safetensors", testing::SafetensorsBytes(tensors));
  ExpectError(d, "model.layers.0.mystery.weight");
}

TEST_F(BadInputTest, ShapeMismatch) {
  const std::string d = CopyModel("gemma2_gqa_softcap");
  nlohmann::json config = nlohmann::json::parse(testing::ReadText(d + "/config.json"));
  config["intermediate_size"] = 96;
  testing::WriteText(d + "/config.json", config.dump());
  ExpectError(d, "has shape [64, 128] but config.json implies [64, 96]");
}

TEST_F(BadInputTest, TruncatedWeights) {
  const std::string d = CopyModel("gemma4_e2b_like");
  fs::resize_file(d + "/model.safetensors", fs::file_size(d + "/model.safetensors") - 100);
  ExpectError(d, "truncated");
  fs::resize_file(d + "/model.safetensors", 3);
  ExpectError(d, "model.safetensors");
  fs::remove(d + "/model.safetensors");
  ExpectError(d, "no weights");
}

TEST_F(BadInputTest, BadOutType) {
  EXPECT_TRUE(ParseOutType("BF16").ok());
  Result<DType> t = ParseOutType("q4_0");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("f32, f16 or bf16"), std::string::npos);
  ConvertOptions o;
  o.hf_dir = kHfDir + "/gemma1_2b_like_mqa";
  o.output_path = dir_ / "out.gguf";
  o.outtype = DType::kQ8_0;
  Result<ConvertResult> r = ConvertHfToGguf(o);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(o.output_path));
}

// ---- the CLI ------------------------------------------------------------------------------

struct CliRun {
  int code;
  std::string err;
};

CliRun RunCli(const std::string& args, const ScratchDir& dir) {
  const std::string err_path = dir / "stderr.txt";
  const std::string cmd = std::string(GEMLET_BINARY_DIR) + "/apps/gemlet/gemlet convert " + args + " 2>" + err_path;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, testing::ReadText(err_path)};
}

TEST(ConvertCli, ConvertsAndReportsBadInputOnOneLine) {
  if (!fs::exists(std::string(GEMLET_BINARY_DIR) + "/apps/gemlet/gemlet")) GTEST_SKIP() << "gemlet binary not built";
  ScratchDir dir;
  const std::string out = dir / "out.gguf";

  CliRun ok = RunCli(kHfDir + "/gemma4_moe_kv_eq_v -o " + out + " --outtype f16", dir);
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.err.find("placeholder vocabulary"), std::string::npos) << ok.err;
  auto file = GgufFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ((*file)->FindTensor("blk.0.attn_q.weight")->type, DType::kF16);
  fs::remove(out);

  testing::WriteText(dir / "cut.model", std::string("\x0A\x10\x0A\x05", 4));
  for (const std::string& args : {kHfDir + "/missing -o " + out, kHfDir + " -o " + out,
                                  kHfDir + "/gemma1_2b_like_mqa -o " + out + " --tokenizer " + (dir / "cut.model"),
                                  kHfDir + "/gemma1_2b_like_mqa -o " + out + " --tokenizer " + (dir / "none.model"),
                                  kHfDir + "/gemma1_2b_like_mqa -o " + out + " --outtype q4_0",
                                  kHfDir + "/gemma1_2b_like_mqa"}) {
    SCOPED_TRACE(args);
    CliRun bad = RunCli(args, dir);
    // Usage errors (a bad --outtype, no -o) exit 2, input errors 1.
    const bool usage = args.find("--outtype q4_0") != std::string::npos || args.find(" -o ") == std::string::npos;
    EXPECT_EQ(bad.code, usage ? 2 : 1);
    EXPECT_EQ(bad.err.rfind("gemlet: ", 0), 0u) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// --mmproj-out without -o: the towers alone, the same tensors as beside a text conversion, and no
// text GGUF; a text-only checkpoint is refused.
TEST(ConvertCli, WritesTowersAlone) {
  if (!fs::exists(std::string(GEMLET_BINARY_DIR) + "/apps/gemlet/gemlet")) GTEST_SKIP() << "gemlet binary not built";
  ScratchDir dir;
  const std::string mm = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma4_e2b_image_audio";
  const std::string alone = dir / "alone.mmproj.gguf", both = dir / "both.mmproj.gguf", text = dir / "text.gguf";
  CliRun a = RunCli(mm + " --mmproj-out " + alone + " --mmproj-type f16", dir);
  ASSERT_EQ(a.code, 0) << a.err;
  CliRun b = RunCli(mm + " -o " + text + " --mmproj-out " + both + " --mmproj-type f16", dir);
  ASSERT_EQ(b.code, 0) << b.err;
  auto fa = GgufFile::Open(alone), fb = GgufFile::Open(both);
  ASSERT_TRUE(fa.ok() && fb.ok());
  ASSERT_EQ((*fa)->tensors().size(), (*fb)->tensors().size());
  for (const GgufTensor& t : (*fa)->tensors()) {
    SCOPED_TRACE(t.name);
    const GgufTensor* u = (*fb)->FindTensor(t.name);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(t.type, u->type);
    ASSERT_EQ(t.nbytes, u->nbytes);
    EXPECT_EQ(std::memcmp(t.data, u->data, t.nbytes), 0);
  }
  EXPECT_EQ((*fa)->GetString("clip.vision.projector_type").value(), "gemma4v");
  size_t ggufs = 0;
  for (const auto& entry : fs::directory_iterator(dir.str())) ggufs += entry.path().extension() == ".gguf";
  EXPECT_EQ(ggufs, 3u);  // alone, both and the text of the second run: the first wrote no text model

  CliRun text_only = RunCli(kHfDir + "/gemma1_2b_like_mqa --mmproj-out " + (dir / "x.gguf"), dir);
  EXPECT_EQ(text_only.code, 2) << text_only.err;  // an argument that does not fit the checkpoint
  EXPECT_NE(text_only.err.find("no vision_config"), std::string::npos) << text_only.err;
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

}  // namespace
}  // namespace gemlet

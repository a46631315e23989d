// Synthetic models: real dimensions, the converter's names and metadata, deterministic random weights,
// on-the-fly quantization equal to quantizing the F16 file, and tiny presets that load and run.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "quantize/quantize.h"
#include "quantize/synth.h"
#include "runtime/session.h"

namespace gemlet {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library
namespace {

// The vocabulary a preset imitates, from the shared data (the tiny presets take placeholders).
std::string DefaultTokenizerFor(const std::string& preset) {
  const SynthPreset* p = FindSynthPreset(preset);
  if (p == nullptr || p->tiny) return "";
  return test::TestdataDir() + (preset.rfind("gemma4", 0) == 0 ? "/tokenizer/gemma4/ggml-vocab-gemma-4.gguf.xz"
                                                                 : "/tokenizer/gemma3_tokenizer.json.xz");
}

Result<SynthReport> Synth(const std::string& preset, const std::string& out, FileType ftype, uint64_t seed = 1,
                          int threads = 2, int layers = 0) {
  SynthOptions o;
  o.preset = preset;
  o.output_path = out;
  o.ftype = ftype;
  o.seed = seed;
  o.n_threads = threads;
  o.n_layers = layers;
  o.tokenizer = DefaultTokenizerFor(preset);
  return WriteSynthModel(o);
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t ParameterCount(const std::string& preset, int layers = 0) {
  auto shapes = SynthTensorShapes(*FindSynthPreset(preset), layers);
  EXPECT_TRUE(shapes.ok()) << shapes.message();
  uint64_t n = 0;
  for (const auto& [name, ne] : *shapes) n += static_cast<uint64_t>(std::accumulate(ne.begin(), ne.end(), int64_t{1}, std::multiplies<>()));
  return n;
}

TEST(SynthPresetTest, EveryPresetParses) {
  for (const SynthPreset& p : SynthPresets()) {
    auto shapes = SynthTensorShapes(p, 0);
    EXPECT_TRUE(shapes.ok()) << p.name << ": " << shapes.message();
  }
}

// The published parameter counts (HF model cards / safetensors metadata) pin the dimensions down.
TEST(SynthPresetTest, ParameterCountsOfReleasedModels) {
  EXPECT_EQ(ParameterCount("gemma2-2b"), 2614341888ull);
  EXPECT_EQ(ParameterCount("gemma3-1b"), 999885952ull);
  EXPECT_NEAR(static_cast<double>(ParameterCount("gemma2-9b")), 9.24e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(ParameterCount("gemma3-4b")), 3.88e9, 0.02e9);   // text decoder of the 4.3B model
  EXPECT_NEAR(static_cast<double>(ParameterCount("gemma3-12b")), 11.77e9, 0.05e9);  // text decoder of the 12.2B model
  // The unified 12B by hand: embedding 262144 x 3840 = 1.007e9; 40 sliding layers of 47.2M attention
  // (q, o 16x256, k, v 8x256) + 176.9M MLP; 8 global ones of 65.0M attention (q, o 16x512, k=v 1x512).
  EXPECT_NEAR(static_cast<double>(ParameterCount("gemma4-12b")), 11.907e9, 0.002e9);
}

TEST(SynthPresetTest, Gemma4Layouts) {
  auto shapes = SynthTensorShapes(*FindSynthPreset("gemma4-e2b"), 0);
  ASSERT_TRUE(shapes.ok());
  std::map<std::string, std::vector<int64_t>> t(shapes->begin(), shapes->end());
  EXPECT_EQ(t["per_layer_token_embd.weight"], (std::vector<int64_t>{35 * 256, 262144}));
  EXPECT_EQ(t["per_layer_model_proj.weight"], (std::vector<int64_t>{1536, 35 * 256}));
  EXPECT_EQ(t["rope_freqs.weight"], (std::vector<int64_t>{256}));
  // Layers 0-14 own their K/V; 15-34 share them and have the double-wide MLP.
  EXPECT_EQ(t.count("blk.14.attn_k.weight"), 1u);
  EXPECT_EQ(t.count("blk.15.attn_k.weight"), 0u);
  EXPECT_EQ(t.count("blk.15.attn_v.weight"), 0u);
  EXPECT_EQ(t["blk.14.ffn_up.weight"], (std::vector<int64_t>{1536, 6144}));
  EXPECT_EQ(t["blk.15.ffn_up.weight"], (std::vector<int64_t>{1536, 12288}));
  // 4:1 pattern: layer 4 is global (head_dim 512), layer 3 sliding (256).
  EXPECT_EQ(t["blk.4.attn_q.weight"], (std::vector<int64_t>{1536, 8 * 512}));
  EXPECT_EQ(t["blk.3.attn_q.weight"], (std::vector<int64_t>{1536, 8 * 256}));
  EXPECT_EQ(t["blk.3.attn_k.weight"], (std::vector<int64_t>{1536, 256}));

  auto moe = SynthTensorShapes(*FindSynthPreset("gemma4-26b-a4b"), 0);
  ASSERT_TRUE(moe.ok());
  std::map<std::string, std::vector<int64_t>> m(moe->begin(), moe->end());
  EXPECT_EQ(m.count("blk.5.attn_v.weight"), 0u);  // K=V on global layers
  EXPECT_EQ(m["blk.5.attn_k.weight"], (std::vector<int64_t>{2816, 2 * 512}));
  EXPECT_EQ(m["blk.0.ffn_gate_up_exps.weight"], (std::vector<int64_t>{2816, 1408, 128}));

  auto unified = SynthTensorShapes(*FindSynthPreset("gemma4-12b"), 0);
  ASSERT_TRUE(unified.ok());
  std::map<std::string, std::vector<int64_t>> u(unified->begin(), unified->end());
  EXPECT_EQ(u.count("per_layer_token_embd.weight"), 0u);  // no PLE, no MoE
  EXPECT_EQ(u.count("blk.0.ffn_gate_inp.weight"), 0u);
  EXPECT_EQ(u.count("blk.5.attn_v.weight"), 0u);  // K=V on global layers, one KV head of 512
  EXPECT_EQ(u["blk.5.attn_k.weight"], (std::vector<int64_t>{3840, 512}));
  EXPECT_EQ(u["blk.4.attn_v.weight"], (std::vector<int64_t>{3840, 8 * 256}));
  EXPECT_EQ(u["blk.47.attn_q.weight"], (std::vector<int64_t>{3840, 16 * 512}));  // the last layer is global
}

TEST(SynthPresetTest, LayersOverrideScalesKvSharing) {
  auto json = SynthConfigJson(*FindSynthPreset("gemma4-e2b"), 10);
  ASSERT_TRUE(json.ok());
  auto j = nlohmann::json::parse(*json);
  EXPECT_EQ(j["num_hidden_layers"], 10);
  EXPECT_EQ(j["num_kv_shared_layers"], 5);  // 20 of 35 -> 5 of 10
  ASSERT_EQ(j["layer_types"].size(), 10u);
  EXPECT_EQ(j["layer_types"][4], "full_attention");
  EXPECT_EQ(j["layer_types"][9], "full_attention");
  EXPECT_EQ(j["layer_types"][8], "sliding_attention");
  EXPECT_FALSE(SynthConfigJson(*FindSynthPreset("gemma3-1b"), 27).ok());
}

// Names, dimensions and types as `gemlet convert --outtype f16` writes a checkpoint of the same family
// (the shared gemma4_e2b_like: PLE, 2 KV-shared layers, double-wide MLP), and the same metadata keys.
TEST(SynthTest, SameTensorsAndKeysAsTheConverter) {
  test::TempDir tmp;
  const std::string converted = tmp.File("conv.gguf"), synth = tmp.File("synth.gguf");
  auto r = test::RunCommand(test::GemletBinary() + " convert " + test::TestdataDir() + "/hf/gemma4_e2b_like --outtype f16 -o " +
                            converted + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_TRUE(Synth("tiny-gemma4", synth, FileType::kF16).ok());
  auto a = GgufFile::Open(converted);
  auto b = GgufFile::Open(synth);
  ASSERT_TRUE(a.ok() && b.ok());
  auto tensors = [](const GgufFile& f) {
    std::map<std::string, std::pair<int, DType>> m;
    for (const GgufTensor& t : f.tensors()) m[std::string(t.name)] = {t.n_dims, t.type};
    return m;
  };
  EXPECT_EQ(tensors(**a), tensors(**b));
  std::set<std::string> ka, kb;
  for (const auto& [k, v] : (*a)->metadata()) ka.insert(std::string(k));
  for (const auto& [k, v] : (*b)->metadata()) kb.insert(std::string(k));
  EXPECT_EQ(ka, kb);
}

TEST(SynthTest, DeterministicAcrossThreadCounts) {
  test::TempDir tmp;
  ASSERT_TRUE(Synth("tiny-gemma3", tmp.File("a.gguf"), FileType::kQ4_K_M, 7, 1).ok());
  ASSERT_TRUE(Synth("tiny-gemma3", tmp.File("b.gguf"), FileType::kQ4_K_M, 7, 3).ok());
  ASSERT_TRUE(Synth("tiny-gemma3", tmp.File("c.gguf"), FileType::kQ4_K_M, 8, 2).ok());
  const auto a = ReadBytes(tmp.File("a.gguf"));
  EXPECT_TRUE(a == ReadBytes(tmp.File("b.gguf")));
  EXPECT_FALSE(a == ReadBytes(tmp.File("c.gguf")));
}

// --distinct-rows N: same tensors, types and sizes; each tensor's first N rows are the full file's,
// every later row a copy of one of them (not all the same one), and tensors of <= N rows untouched.
TEST(SynthTest, DistinctRowsRepeatTheFirstRowsOfEachTensor) {
  test::TempDir tmp;
  ASSERT_TRUE(Synth("tiny-gemma4", tmp.File("full.gguf"), FileType::kQ4_K_M).ok());
  SynthOptions o;
  o.preset = "tiny-gemma4";
  o.output_path = tmp.File("pooled.gguf");
  o.ftype = FileType::kQ4_K_M;
  o.seed = 1;
  o.n_threads = 2;
  o.distinct_rows = 16;
  ASSERT_TRUE(WriteSynthModel(o).ok());
  auto full = GgufFile::Open(tmp.File("full.gguf"));
  auto pooled = GgufFile::Open(tmp.File("pooled.gguf"));
  ASSERT_TRUE(full.ok() && pooled.ok());
  ASSERT_EQ((*full)->tensors().size(), (*pooled)->tensors().size());
  int repeated_tensors = 0;
  for (size_t i = 0; i < (*full)->tensors().size(); ++i) {
    const GgufTensor& x = (*full)->tensors()[i];
    const GgufTensor& y = (*pooled)->tensors()[i];
    ASSERT_EQ(x.name, y.name);
    ASSERT_EQ(x.type, y.type) << x.name;
    ASSERT_EQ(x.nbytes, y.nbytes) << x.name;
    const size_t row_bytes = RowBytes(y.type, y.ne[0]);
    const size_t rows = y.nbytes / row_bytes;
    if (rows <= 16) {
      EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << x.name;
      continue;
    }
    ++repeated_tensors;
    const auto* a = static_cast<const uint8_t*>(x.data);
    const auto* b = static_cast<const uint8_t*>(y.data);
    EXPECT_EQ(std::memcmp(a, b, 16 * row_bytes), 0) << x.name;
    std::set<size_t> picks;
    for (size_t r = 16; r < rows; ++r) {
      size_t pick = 16;
      for (size_t k = 0; k < 16 && pick == 16; ++k) {
        if (std::memcmp(b + r * row_bytes, b + k * row_bytes, row_bytes) == 0) pick = k;
      }
      ASSERT_LT(pick, 16u) << x.name << " row " << r << " repeats none of the first rows";
      picks.insert(pick);
    }
    EXPECT_GT(picks.size(), 4u) << x.name;
    EXPECT_NE(std::memcmp(a, b, x.nbytes), 0) << x.name;
  }
  EXPECT_GT(repeated_tensors, 10);
  auto engine = runtime::Engine::Load(tmp.File("pooled.gguf"));
  ASSERT_TRUE(engine.ok()) << engine.message();
}

// synth --type Q4_K_M writes, tensor for tensor, what quantize makes of synth --type F16.
TEST(SynthTest, OnTheFlyQuantizationEqualsQuantizingTheF16File) {
  test::TempDir tmp;
  ASSERT_TRUE(Synth("tiny-gemma4", tmp.File("f16.gguf"), FileType::kF16).ok());
  ASSERT_TRUE(Synth("tiny-gemma4", tmp.File("direct.gguf"), FileType::kQ4_K_M).ok());
  QuantizeOptions q;
  q.input_path = tmp.File("f16.gguf");
  q.output_path = tmp.File("quantized.gguf");
  q.ftype = FileType::kQ4_K_M;
  q.n_threads = 2;
  ASSERT_TRUE(QuantizeGguf(q).ok());
  auto a = GgufFile::Open(tmp.File("direct.gguf"));
  auto b = GgufFile::Open(tmp.File("quantized.gguf"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  std::set<DType> types;
  for (size_t i = 0; i < (*a)->tensors().size(); ++i) {
    const GgufTensor& x = (*a)->tensors()[i];
    const GgufTensor& y = (*b)->tensors()[i];
    ASSERT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type) << x.name;
    ASSERT_EQ(x.nbytes, y.nbytes) << x.name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << x.name;
    types.insert(x.type);
  }
  // The tiny layout has rows of 256 throughout: real K-quant blocks, with Q6_K for the mix's picks.
  EXPECT_TRUE(types.count(DType::kQ4_K));
  EXPECT_TRUE(types.count(DType::kQ6_K));
  EXPECT_EQ(*(*a)->GetU32("general.file_type"), 15u);
}

// Tiny presets load in gemlet and give sane next-token distributions (no copy-the-input collapse).
TEST(SynthTest, TinyPresetsRunWithSaneLogits) {
  test::TempDir tmp;
  for (const std::string preset : {"tiny-gemma3", "tiny-gemma4"}) {
    SCOPED_TRACE(preset);
    const std::string path = tmp.File(preset + ".gguf");
    ASSERT_TRUE(Synth(preset, path, FileType::kQ8_0).ok());
    auto engine = runtime::Engine::Load(path);
    ASSERT_TRUE(engine.ok()) << engine.message();
    SessionOptions so;
    so.n_ctx = 64;
    so.n_threads = 2;
    auto session = Session::Create(engine.value(), so);
    ASSERT_TRUE(session.ok()) << session.message();
    std::vector<int32_t> ids = {2};
    for (int i = 1; i < 24; ++i) ids.push_back(4 + (i * 97) % 500);
    const int V = engine.value()->config().n_vocab;
    ASSERT_EQ(V, 512);
    std::vector<float> logits(ids.size() * static_cast<size_t>(V));
    ASSERT_TRUE((*session)->Evaluate(ids, logits.data(), true).ok());
    int copies = 0;
    double entropy_sum = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      const float* row = &logits[t * V];
      double mean = 0, sq = 0, mx = row[0];
      for (int i = 0; i < V; ++i) {
        ASSERT_TRUE(std::isfinite(row[i]));
        mean += row[i];
        mx = std::max(mx, static_cast<double>(row[i]));
      }
      mean /= V;
      double z = 0;
      for (int i = 0; i < V; ++i) {
        sq += (row[i] - mean) * (row[i] - mean);
        z += std::exp(row[i] - mx);
      }
      double h = 0;
      for (int i = 0; i < V; ++i) {
        const double p = std::exp(row[i] - mx) / z;
        if (p > 0) h -= p * std::log(p);
      }
      const double std = std::sqrt(sq / V);
      EXPECT_GT(std, 2.0);
      EXPECT_LT(std, 8.0);
      entropy_sum += h;
      copies += test::ArgMax(row, V) == ids[t];
    }
    EXPECT_GT(entropy_sum / static_cast<double>(ids.size()), 0.5);
    EXPECT_LT(copies, 6);
  }
}

TEST(SynthCliTest, WritesAPresetAndRejectsUnknownOnes) {
  test::TempDir tmp;
  auto r = test::RunCommand(test::GemletBinary() + " synth --preset tiny-gemma3 --type q8_0 --seed 3 -t 2 -o " + tmp.File("m.gguf") + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("tiny-gemma3"), std::string::npos) << r.out;
  auto f = GgufFile::Open(tmp.File("m.gguf"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*(*f)->GetU32("general.file_type"), 7u);
  auto bad = test::RunCommand(test::GemletBinary() + " synth --preset gemma9-1b -o " + tmp.File("x.gguf") + " 2>&1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("unknown preset"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace gemlet

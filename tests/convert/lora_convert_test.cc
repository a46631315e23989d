// `gemlet convert-lora`: PEFT folders to GGUF adapters, checked end to end. The reference is PEFT's
// documented rule applied to the HF checkpoint itself (W + scaling * B A, scaling = alpha / r or
// alpha / sqrt(r) for rsLoRA) and converted as any checkpoint is (the converter's output matches
// transformers: model/golden_test): the base with the converted adapter, unmerged, must give that
// merged checkpoint's logits within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/lora_files.h"
#include "common/test_util.h"
#include "convert/convert.h"
#include "convert/lora_convert.h"
#include "kernels/kernel_table.h"
#include "model/lora.h"
#include "model/model.h"

namespace gemlet {
namespace {

std::string Convert(const std::string& hf_dir, const std::string& out) {
  ConvertOptions o;
  o.hf_dir = hf_dir;
  o.output_path = out;
  auto r = ConvertHfToGguf(o);
  EXPECT_TRUE(r.ok()) << r.message();
  return out;
}

std::vector<float> AllLogits(const Model& m, const std::vector<int32_t>& tokens, const LoraStack* lora) {
  KernelContext ctx(2);
  auto cache = std::move(KvCache::Create(m.KvLayout(), 64, DType::kF32, 4)).value();
  cache->set_lora(lora);
  Workspace ws(m.config(), 64, 64, 2, m.ExtraScratchFloats(64));
  std::vector<float> logits(tokens.size() * static_cast<size_t>(m.config().n_vocab));
  EXPECT_TRUE(m.Forward(tokens.data(), static_cast<int>(tokens.size()), *cache, ws, ctx, logits.data(), true).ok());
  return logits;
}

struct Case {
  std::string model;
  test::PeftSpec spec;
  std::string outtype;  // convert-lora's
  float tolerance;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " " << c.outtype << (c.spec.rslora ? " rsLoRA" : ""); }

class LoraConvertTest : public ::testing::TestWithParam<Case> {};

TEST_P(LoraConvertTest, ConvertedAdapterGivesThePeftMergedCheckpointsLogits) {
  const Case& c = GetParam();
  test::TempDir dir;
  const std::string hf = test::TestdataDir() + "/hf/" + c.model;
  const std::string base_path = Convert(hf, dir.File("base.gguf"));
  const int modules = test::WritePeftAndMerged(hf, c.spec, dir.File("peft"), dir.File("merged_hf"));
  ASSERT_GT(modules, 0);
  const std::string merged_path = Convert(dir.File("merged_hf"), dir.File("merged.gguf"));

  LoraConvertOptions o;
  o.peft_dir = dir.File("peft");
  o.output_path = dir.File("adapter.gguf");
  o.base = base_path;
  ASSERT_TRUE(ParseDTypeName(c.outtype, &o.outtype));
  auto report = ConvertLora(o);
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_EQ(report->rank, c.spec.rank);
  EXPECT_LE(report->pairs, modules);  // KV-shared layers' k/v projections are left out

  auto base = LoadModelFile(base_path);
  auto merged = LoadModelFile(merged_path);
  ASSERT_TRUE(base.ok() && merged.ok());
  auto file = GgufFile::Open(o.output_path);
  ASSERT_TRUE(file.ok()) << file.message();
  auto adapter = LoraAdapter::Load(std::shared_ptr<const GgufFile>(std::move(file).value()), *base.value(), "t");
  ASSERT_TRUE(adapter.ok()) << adapter.message();
  const LoraStack stack({{std::shared_ptr<const LoraAdapter>(std::move(adapter).value()), 1.0f}});

  const std::vector<int32_t> tokens = test::ReadJson(hf + "/tokens.json")["input_ids"].get<std::vector<int32_t>>();
  const std::vector<float> plain = AllLogits(*base.value(), tokens, nullptr);
  const std::vector<float> unmerged = AllLogits(*base.value(), tokens, &stack);
  const std::vector<float> reference = AllLogits(*merged.value(), tokens, nullptr);
  const float moved = test::MaxAbsDiff(reference, plain), diff = test::MaxAbsDiff(unmerged, reference);
  std::printf("[convert-lora %s %s] PEFT merge moves the logits by %.3f; converted adapter vs it %.2e\n",
              c.model.c_str(), c.outtype.c_str(), moved, diff);
  EXPECT_GT(moved, 0.05f);
  EXPECT_LT(diff, c.tolerance);
}

test::PeftSpec RsLora() {
  test::PeftSpec s;
  s.rank = 8;
  s.alpha = 6.0;
  s.rslora = true;
  s.targets = {"q_proj", "v_proj", "down_proj"};
  s.seed = 9;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Peft, LoraConvertTest,
    ::testing::Values(Case{"gemma3_1b_like", {}, "f32", 1e-4f}, // Gemma 2's soft-capped logits reach +-30: 1.2e-4 apart is 4e-6 of them.
                      Case{"gemma2_gqa_softcap", RsLora(), "f32", 2e-4f},
                      Case{"gemma1_2b_like_mqa", {}, "f32", 1e-4f}, Case{"gemma4_e2b_like", {}, "f32", 1e-4f},
                      // Gemma 3n amplifies float rounding: its HF golden tolerance, 1e-2 (3.6e-4 in a release
                      // build, 1.4e-3 in the sanitizer build's code).
                      Case{"gemma3n_e2b_like", RsLora(), "f32", 1e-2f},
                      // Rounded adapters: A and B in 16 bits, and Q8_0 (A's rows; the fast kernels then
                      // also round the activations A multiplies to 8 bits, as llama.cpp's do).
                      Case{"gemma3_1b_like", {}, "f16", 1e-2f}, Case{"gemma3_1b_like", {}, "q8_0", 0.15f}),
    [](const auto& info) { return info.param.model + "_" + info.param.outtype + (info.param.spec.rslora ? "_rslora" : ""); });

TEST(LoraConvert, BadFoldersAndOtherBasesAreRefused) {
  test::TempDir dir;
  const std::string hf = test::TestdataDir() + "/hf/gemma3_1b_like";
  test::WritePeftAndMerged(hf, {}, dir.File("peft"), dir.File("merged"));
  const std::string g2 = Convert(test::TestdataDir() + "/hf/gemma2_gqa_softcap", dir.File("g2.gguf"));
  const std::string g3wide = Convert(test::TestdataDir() + "/hf/gemma3_4b_like_rope_linear8", dir.File("g3wide.gguf"));
  auto error = [&](const std::string& peft, const std::string& base) {
    LoraConvertOptions o;
    o.peft_dir = peft;
    o.output_path = dir.File("out.gguf");
    o.base = base;
    auto r = ConvertLora(o);
    return r.ok() ? std::string("(converted)") : r.message();
  };
  EXPECT_NE(error(dir.File("peft"), g3wide).find("another model"), std::string::npos) << error(dir.File("peft"), g3wide);
  EXPECT_NE(error(dir.File("peft"), g2).find("another model"), std::string::npos) << error(dir.File("peft"), g2);
  EXPECT_NE(error(dir.File("nothing"), g2).find("not a folder"), std::string::npos);
  EXPECT_NE(error(dir.File("peft"), "").find("needs the base model"), std::string::npos);
  // The base as an HF folder: its architecture only.
  EXPECT_EQ(error(dir.File("peft"), hf), "(converted)");
  auto written = GgufFile::Open(dir.File("out.gguf"));
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written.value()->GetString("general.architecture").value(), "gemma3");
  EXPECT_EQ(written.value()->GetString("general.type").value(), "adapter");
  EXPECT_EQ(written.value()->GetString("adapter.type").value(), "lora");
  EXPECT_FLOAT_EQ(written.value()->GetF32("adapter.lora.alpha").value(), 8.0f);
  // Not PEFT LoRA: another peft_type, DoRA, an embedding.
  for (const auto& [edit, want] : std::vector<std::pair<std::string, std::string>>{
           {"prefix", "gemlet converts LORA adapters"}, {"dora", "DoRA"}, {"embed", "not a LoRA A/B weight"}}) {
    const std::string d = dir.File("bad_" + edit);
    test::WritePeftAndMerged(hf, {}, d, dir.File("merged_" + edit));
    nlohmann::json config = test::ReadJson(d + "/adapter_config.json");
    if (edit == "prefix") config["peft_type"] = "PREFIX_TUNING";
    if (edit == "dora") config["use_dora"] = true;
    std::ofstream(d + "/adapter_config.json") << config.dump();
    if (edit == "embed") {
      test::RawTensors t = test::ReadSafetensors(d + "/adapter_model.safetensors");
      t["base_model.model.model.embed_tokens.weight"] = t.begin()->second;
      test::WriteSafetensors(d + "/adapter_model.safetensors", t);
    }
    EXPECT_NE(error(d, hf).find(want), std::string::npos) << edit << ": " << error(d, hf);
  }
}

}  // namespace
}  // namespace gemlet

namespace gemlet {
namespace {

// transformers' goldens (tests/data/lora, made on the device machine with a torch LoRA that does
// PEFT's documented math): each tiny model's base converted by gemlet, its PEFT adapters converted by
// `gemlet convert-lora` (alpha/r and rsLoRA) and by llama.cpp's convert_lora_to_gguf.py, against the
// hooked model's logits; both adapters at once against the combined golden.
class LoraGoldenTest : public ::testing::TestWithParam<std::string> {};

std::shared_ptr<const LoraAdapter> AdapterFor(const std::string& path, const Model& base) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return nullptr;
  auto a = LoraAdapter::Load(std::shared_ptr<const GgufFile>(std::move(file).value()), base, path, /*any_base=*/true);
  EXPECT_TRUE(a.ok()) << a.message();
  return a.ok() ? std::shared_ptr<const LoraAdapter>(std::move(a).value()) : nullptr;
}

TEST_P(LoraGoldenTest, MatchesTransformers) {
  const std::string model = GetParam();
  const std::string golden = std::string(GEMLET_SOURCE_DIR) + "/tests/data/lora/" + model;
  const std::string hf = test::TestdataDir() + "/hf/" + model;
  test::TempDir dir;
  auto base = LoadModelFile(Convert(hf, dir.File("base.gguf")));
  ASSERT_TRUE(base.ok()) << base.message();
  const std::vector<int32_t> tokens = test::ReadJson(hf + "/tokens.json")["input_ids"].get<std::vector<int32_t>>();
  const size_t n = tokens.size() * static_cast<size_t>(base.value()->config().n_vocab);
  // The families' HF golden tolerance (model/golden_test): 1e-3, Gemma 3n 1e-2.
  const float tolerance = model.rfind("gemma3n", 0) == 0 ? 1e-2f : 1e-3f;
  std::map<std::string, std::shared_ptr<const LoraAdapter>> ours;
  for (const char* variant : {"all_r8", "qv_rs4"}) {
    LoraConvertOptions o;
    o.peft_dir = golden + "/" + variant;
    o.output_path = dir.File(std::string(variant) + ".gguf");
    o.base = dir.File("base.gguf");
    auto converted = ConvertLora(o);
    ASSERT_TRUE(converted.ok()) << converted.message();
    ours[variant] = AdapterFor(o.output_path, *base.value());
    ASSERT_TRUE(ours[variant]);
    std::vector<float> want;
    ASSERT_TRUE(test::ReadF32Exactly(golden + "/" + variant + "/logits.f32", n, &want));
    const LoraStack stack({{ours[variant], 1.0f}});
    const float diff = test::MaxAbsDiff(AllLogits(*base.value(), tokens, &stack), want);
    std::printf("[lora golden %s %s] convert-lora's adapter vs transformers %.2e\n", model.c_str(), variant, diff);
    EXPECT_LT(diff, tolerance) << variant;
  }
  // llama.cpp's own file of the alpha/r adapter (its converter writes rsLoRA's alpha unchanged,
  // which llama.cpp then scales by alpha/r: not PEFT's rsLoRA, so that one is not compared).
  // Its Q8_0 file rounds A to 8 bits, and the fast kernels the activations A multiplies: on adapters
  // this strong (they move the logits by 23-29) that costs 0.5-2.7 (Gemma 3n 17): it must still land
  // nearer the golden than the base is.
  std::vector<float> want;
  ASSERT_TRUE(test::ReadF32Exactly(golden + "/all_r8/logits.f32", n, &want));
  const float moved = test::MaxAbsDiff(AllLogits(*base.value(), tokens, nullptr), want);
  for (const char* file : {"llama-f32.gguf", "llama-q8_0.gguf"}) {
    auto theirs = AdapterFor(golden + "/all_r8/" + file, *base.value());
    ASSERT_TRUE(theirs);
    const LoraStack stack({{theirs, 1.0f}});
    const float diff = test::MaxAbsDiff(AllLogits(*base.value(), tokens, &stack), want);
    std::printf("[lora golden %s] llama.cpp's %s vs transformers %.2e\n", model.c_str(), file, diff);
    EXPECT_LT(diff, std::string(file) == "llama-f32.gguf" ? tolerance : moved) << file;
  }
  std::vector<float> combo;
  ASSERT_TRUE(test::ReadF32Exactly(golden + "/combo_logits.f32", n, &combo));
  const LoraStack both({{ours["all_r8"], 0.5f}, {ours["qv_rs4"], 1.0f}});
  const float diff = test::MaxAbsDiff(AllLogits(*base.value(), tokens, &both), combo);
  std::printf("[lora golden %s] both adapters vs transformers %.2e\n", model.c_str(), diff);
  EXPECT_LT(diff, tolerance);
}

INSTANTIATE_TEST_SUITE_P(Transformers, LoraGoldenTest,
                         ::testing::Values("gemma1_2b_like_mqa", "gemma2_gqa_softcap", "gemma3_1b_like",
                                           "gemma3n_e2b_like", "gemma4_e2b_like", "gemma4_moe_kv_eq_v"),
                         [](const auto& info) { return info.param; });

// llama.cpp's --lora, on the two files of shared/testdata/gguf it computes right (category A: its
// own converter's base GGUF): its own converted adapters (alpha/r at scale 1; rsLoRA's file at user
// scale 2, which makes llama.cpp's alpha/r equal PEFT's alpha/sqrt(r) for r 4; both at once at 0.5
// and 2), through llama.cpp (tools/lora_reference/llama_logits.cc: F32 cache, no flash attention)
// and through gemlet. gemlet stays within its usual tolerance of the transformers golden; llama.cpp
// is 0.8-1.5x its own base's distance from HF away from it (its base: 0.0096 and 0.023), so the two
// agree to within 1.6x that distance, with every argmax equal.
TEST(LoraLlamaCpp, LlamaCppsLoraAgreesWhereItComputesTheBaseRight) {
  for (const std::string model : {"gemma1_2b_like_mqa", "gemma4_moe_kv_eq_v"}) {
    const std::string golden = std::string(GEMLET_SOURCE_DIR) + "/tests/data/lora/" + model;
    auto base = LoadModelFile(test::TestdataDir() + "/gguf/" + model + ".gguf");
    ASSERT_TRUE(base.ok()) << base.message();
    const std::string hf = test::TestdataDir() + "/hf/" + model;
    const std::vector<int32_t> tokens = test::ReadJson(hf + "/tokens.json")["input_ids"].get<std::vector<int32_t>>();
    const size_t n = tokens.size() * static_cast<size_t>(base.value()->config().n_vocab);
    std::vector<float> hf_logits, llama_base;
    ASSERT_TRUE(test::ReadF32Exactly(hf + "/logits_full.f32", n, &hf_logits));
    ASSERT_TRUE(test::ReadF32Exactly(golden + "/llamacpp_base.f32", n, &llama_base));
    const float llama_distance = test::MaxAbsDiff(llama_base, hf_logits);
    auto all_r8 = AdapterFor(golden + "/all_r8/llama-f32.gguf", *base.value());
    auto qv_rs4 = AdapterFor(golden + "/qv_rs4/llama-f32.gguf", *base.value());
    ASSERT_TRUE(all_r8 && qv_rs4);
    const struct {
      const char* name;
      LoraStack stack;
      std::string transformers;
    } cases[] = {{"all_r8", LoraStack({{all_r8, 1.0f}}), golden + "/all_r8/logits.f32"},
                 {"qv_rs4", LoraStack({{qv_rs4, 2.0f}}), golden + "/qv_rs4/logits.f32"},
                 {"combo", LoraStack({{all_r8, 0.5f}, {qv_rs4, 2.0f}}), golden + "/combo_logits.f32"}};
    for (const auto& c : cases) {
      std::vector<float> theirs, want;
      ASSERT_TRUE(test::ReadF32Exactly(golden + "/llamacpp_" + c.name + ".f32", n, &theirs));
      ASSERT_TRUE(test::ReadF32Exactly(c.transformers, n, &want));
      const std::vector<float> ours = AllLogits(*base.value(), tokens, &c.stack);
      const float vs_llama = test::MaxAbsDiff(ours, theirs), vs_hf = test::MaxAbsDiff(ours, want);
      std::printf("[lora llama.cpp %s %s] gemlet vs llama.cpp --lora %.2e, vs transformers %.2e; llama.cpp vs "
                  "transformers %.2e (its base %.2e)\n",
                  model.c_str(), c.name, vs_llama, vs_hf, test::MaxAbsDiff(theirs, want), llama_distance);
      EXPECT_LT(vs_hf, 1e-3f) << c.name;
      EXPECT_LT(vs_llama, 1.6f * llama_distance) << c.name;
      const int vocab = base.value()->config().n_vocab;
      for (size_t t = 0; t < tokens.size(); ++t) {
        const auto row = [&](const std::vector<float>& v) {
          return std::max_element(v.begin() + static_cast<ptrdiff_t>(t * vocab), v.begin() + static_cast<ptrdiff_t>((t + 1) * vocab)) - v.begin();
        };
        EXPECT_EQ(row(ours), row(theirs)) << c.name << " row " << t;
      }
    }
  }
}

}  // namespace
}  // namespace gemlet

// LoRA adapters on every family (model/lora.h): unmerged deltas against the same adapters merged into
// the weights (quantize/lora_tools.h) within 1e-5 of the logits' size, scale 0 is the base bit for bit, several
// sequences with different adapters in one step give each one's logits alone, and adapters made
// for another base are refused with one clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/family_models.h"
#include "common/lora_files.h"
#include "common/test_util.h"
#include "gguf/gguf_writer.h"
#include "kernels/kernel_table.h"
#include "model/decoder_blocks.h"
#include "model/lora.h"
#include "model/model.h"
#include "quantize/lora_tools.h"

namespace gemlet {
namespace {

using test::AdapterSpec;

void WriteAdapter(const GgufFile& base, const std::string& path, const AdapterSpec& spec) {
  test::WriteGgufAdapter(base, path, spec);
}

std::vector<int32_t> Tokens(int n, int seed) {
  std::vector<int32_t> t = {2};
  for (int i = 1; i < n; ++i) t.push_back(4 + (i * 53 + seed * 17) % 500);
  return t;
}

// Every position's logits of `tokens` from an empty cache, with the cache's adapters.
std::vector<float> AllLogits(const Model& m, const std::vector<int32_t>& tokens, const LoraStack* lora,
                             const KernelTable& kernels) {
  KernelContext ctx(2, &kernels);
  auto cache = KvCache::Create(m.KvLayout(), 64, DType::kF32, 4);
  EXPECT_TRUE(cache.ok()) << cache.message();
  cache.value()->set_lora(lora);
  Workspace ws(m.config(), 64, 64, 2, m.ExtraScratchFloats(64));
  std::vector<float> logits(tokens.size() * static_cast<size_t>(m.config().n_vocab));
  const Status s = m.Forward(tokens.data(), static_cast<int>(tokens.size()), *cache.value(), ws, ctx, logits.data(), true);
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

std::shared_ptr<const LoraAdapter> LoadAdapter(const std::string& path, const Model& base) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return nullptr;
  auto a = LoraAdapter::Load(std::shared_ptr<const GgufFile>(std::move(file).value()), base, path);
  EXPECT_TRUE(a.ok()) << a.message();
  return a.ok() ? std::shared_ptr<const LoraAdapter>(std::move(a).value()) : nullptr;
}

std::unique_ptr<Model> Load(const std::string& path) {
  auto m = LoadModelFile(path);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m).value() : nullptr;
}

class LoraFamilyTest : public ::testing::TestWithParam<std::string> {};

// Unmerged on the base against merged into a copy of it, for every family: f32 bases on the fast
// kernels, quantized ones on the reference kernels (the fast ones quantize activations, which a
// merged f32 matrix would not), merged in f32 so that only the order of the sums differs.
TEST_P(LoraFamilyTest, UnmergedMatchesMergedAndScaleZeroIsTheBase) {
  test::TempDir dir;
  const std::string base_path = family_models::ModelPath(GetParam());
  std::unique_ptr<Model> base = Load(base_path);
  ASSERT_TRUE(base);
  const bool quantized = GetParam().find("_q") != std::string::npos;
  const KernelTable& kernels = quantized ? *KernelsNamed("ref") : BestKernels();
  const std::string adapter_path = dir.File("a.gguf");
  WriteAdapter(base->gguf(), adapter_path, {});
  std::shared_ptr<const LoraAdapter> adapter = LoadAdapter(adapter_path, *base);
  ASSERT_TRUE(adapter);
  EXPECT_GT(adapter->pairs().size(), 0u);
  const std::vector<int32_t> tokens = Tokens(20, 1);

  const std::vector<float> plain = AllLogits(*base, tokens, nullptr, kernels);
  const LoraStack stack({{adapter, 0.75f}});
  const std::vector<float> unmerged = AllLogits(*base, tokens, &stack, kernels);
  const float moved = test::MaxAbsDiff(unmerged, plain);
  EXPECT_GT(moved, 0.05f) << "the adapter changes nothing";

  LoraMergeOptions o;
  o.base_path = base_path;
  o.output_path = dir.File("merged.gguf");
  o.adapters = {{adapter_path, 0.75f}};
  o.merged_type = DType::kF32;
  o.n_threads = 2;
  auto report = MergeLora(o);
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_EQ(report->tensors_merged, static_cast<int>(adapter->pairs().size()));
  std::unique_ptr<Model> merged = Load(o.output_path);
  ASSERT_TRUE(merged);
  const std::vector<float> folded = AllLogits(*merged, tokens, nullptr, kernels);
  const float diff = test::MaxAbsDiff(unmerged, folded);
  float scale = 0;
  for (float v : unmerged) scale = std::max(scale, std::fabs(v));
  std::printf("[lora %s] adapter moves the logits by %.3f; unmerged vs merged %.2e (logits up to %.1f)\n",
              GetParam().c_str(), moved, diff, scale);
  // Only the order of float sums differs, so the bound is relative to the logits' size: 1e-5 of the
  // largest (about 80 float32 roundings of it; the kernels' vector width moves the result: 1.16e-4
  // of logits up to 19.7 on AVX2, less on AVX-512). Gemma 3n's AltUp and sparse gates amplify rounding: the
  // two orders part by more there (5.5e-4); its bound is its HF golden tolerance, 1e-2.
  EXPECT_LT(diff, GetParam().rfind("gemma3n", 0) == 0 ? 1e-2f : 1e-5f * scale);

  // Scale 0 adds nothing: the base, bit for bit.
  const LoraStack off({{adapter, 0.0f}});
  EXPECT_EQ(test::MaxAbsDiff(AllLogits(*base, tokens, &off, kernels), plain), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Families, LoraFamilyTest,
                         ::testing::Values("gemma1_2b_like_mqa", "gemma2_gqa_softcap", "gemma3_1b_like",
                                           "gemma3n_e2b_like", "gemma4_e2b_like", "gemma4_moe_kv_eq_v",
                                           "gemma4_unified_12b_like", "gemma3_1b_like_q8_0", "gemma4_e2b_like_q4_0"),
                         [](const auto& info) { return info.param; });

// Two adapters at once with their scales: the deltas add (merged in one file, in order).
TEST(Lora, TwoAdaptersAddUp) {
  test::TempDir dir;
  const std::string base_path = family_models::ModelPath("gemma3_1b_like");
  std::unique_ptr<Model> base = Load(base_path);
  ASSERT_TRUE(base);
  AdapterSpec second;
  second.rank = 8;
  second.alpha = 0;  // no alpha: scale 1
  second.seed = 11;
  second.targets = {LoraTarget::kQ, LoraTarget::kV};
  second.type = DType::kF16;
  WriteAdapter(base->gguf(), dir.File("a.gguf"), {});
  WriteAdapter(base->gguf(), dir.File("b.gguf"), second);
  auto a = LoadAdapter(dir.File("a.gguf"), *base);
  auto b = LoadAdapter(dir.File("b.gguf"), *base);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->alpha(), 0.0f);
  const std::vector<int32_t> tokens = Tokens(16, 2);
  const LoraStack both({{a, 0.5f}, {b, 1.5f}});
  const std::vector<float> unmerged = AllLogits(*base, tokens, &both, BestKernels());
  LoraMergeOptions o;
  o.base_path = base_path;
  o.output_path = dir.File("merged.gguf");
  o.adapters = {{dir.File("a.gguf"), 0.5f}, {dir.File("b.gguf"), 1.5f}};
  o.n_threads = 2;
  ASSERT_TRUE(MergeLora(o).ok());
  std::unique_ptr<Model> merged = Load(o.output_path);
  ASSERT_TRUE(merged);
  EXPECT_LT(test::MaxAbsDiff(unmerged, AllLogits(*merged, tokens, nullptr, BestKernels())), 1e-4f);
  // Each alone differs from both.
  const LoraStack only_a({{a, 0.5f}});
  EXPECT_GT(test::MaxAbsDiff(unmerged, AllLogits(*base, tokens, &only_a, BestKernels())), 1e-3f);
  EXPECT_NE(both.key(), only_a.key());
  EXPECT_NE(LoraStack({{a, 0.5f}}).key(), LoraStack({{a, 0.25f}}).key());
  EXPECT_EQ(LoraStack({{a, 0.5f}}).key(), only_a.key());
}

// Sequences with different adapters (and one without) share a step: each row's logits are those of
// its sequence alone; a prompt step and token-by-token decoding give the same logits.
TEST(Lora, SequencesWithDifferentAdaptersShareAStep) {
  test::TempDir dir;
  std::unique_ptr<Model> m = Load(family_models::ModelPath("gemma4_e2b_like"));
  ASSERT_TRUE(m);
  WriteAdapter(m->gguf(), dir.File("a.gguf"), {});
  AdapterSpec other;
  other.seed = 99;
  WriteAdapter(m->gguf(), dir.File("b.gguf"), other);
  const LoraStack sa({{LoadAdapter(dir.File("a.gguf"), *m), 1.0f}});
  const LoraStack sb({{LoadAdapter(dir.File("b.gguf"), *m), 1.0f}});
  const LoraStack* stacks[] = {&sa, nullptr, &sb, &sa};
  const int V = m->config().n_vocab;
  KernelContext ctx(2);
  Workspace ws(m->config(), 32, 64, 2, m->ExtraScratchFloats(32));
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<SequenceChunk> chunks;
  const int n[] = {3, 5, 1, 4};
  int rows = 0;
  for (int i = 0; i < 4; ++i) {
    caches.push_back(std::move(KvCache::Create(m->KvLayout(), 64, DType::kF32, 4)).value());
    caches.back()->set_lora(stacks[i]);
    tokens.push_back(Tokens(n[i], i));
  }
  for (int i = 0; i < 4; ++i) {
    chunks.push_back({tokens[i].data(), n[i], caches[i].get()});
    rows += n[i];
  }
  std::vector<float> got(static_cast<size_t>(rows) * V);
  ASSERT_TRUE(m->ForwardBatch(chunks, ws, ctx, got.data(), true).ok());
  int row = 0;
  for (int i = 0; i < 4; ++i) {
    auto alone = std::move(KvCache::Create(m->KvLayout(), 64, DType::kF32, 4)).value();
    alone->set_lora(stacks[i]);
    std::vector<float> want(static_cast<size_t>(n[i]) * V), step(static_cast<size_t>(V));
    ASSERT_TRUE(m->Forward(tokens[i].data(), n[i], *alone, ws, ctx, want.data(), true).ok());
    EXPECT_EQ(test::MaxAbsDiff(got.data() + static_cast<size_t>(row) * V, want.data(), want.size()), 0.0f) << i;
    // Token by token.
    auto decoded = std::move(KvCache::Create(m->KvLayout(), 64, DType::kF32, 4)).value();
    decoded->set_lora(stacks[i]);
    for (int t = 0; t < n[i]; ++t) {
      ASSERT_TRUE(m->Forward(tokens[i].data() + t, 1, *decoded, ws, ctx, step.data(), false).ok());
      EXPECT_EQ(test::MaxAbsDiff(step.data(), want.data() + static_cast<size_t>(t) * V, V), 0.0f) << i << " " << t;
    }
    row += n[i];
  }
}

// Adapters for another base, or not adapters at all, are refused with a line that says why.
TEST(Lora, WrongAdaptersAreRefused) {
  test::TempDir dir;
  std::unique_ptr<Model> g3 = Load(family_models::ModelPath("gemma3_1b_like"));
  std::unique_ptr<Model> g2 = Load(family_models::ModelPath("gemma2_gqa_softcap"));
  std::unique_ptr<Model> g3_wide = Load(family_models::ModelPath("gemma3_4b_like_rope_linear8"));
  ASSERT_TRUE(g3 && g2 && g3_wide);
  WriteAdapter(g3->gguf(), dir.File("g3.gguf"), {});
  auto error = [&](const std::string& path, const Model& base) {
    auto file = GgufFile::Open(path);
    if (!file.ok()) return file.message();
    auto a = LoraAdapter::Load(std::shared_ptr<const GgufFile>(std::move(file).value()), base, "x");
    return a.ok() ? std::string("(loaded)") : a.message();
  };
  EXPECT_NE(error(dir.File("g3.gguf"), *g2).find("architecture 'gemma3', but the model is 'gemma2'"), std::string::npos)
      << error(dir.File("g3.gguf"), *g2);
  EXPECT_NE(error(dir.File("g3.gguf"), *g3_wide).find("another model"), std::string::npos) << error(dir.File("g3.gguf"), *g3_wide);
  // Another base model by name (same shapes): refused unless any_base; its own name (as PEFT spells
  // it, "org/name") loads.
  const std::string model_name = g3->gguf().GetString("general.name").value();
  AdapterSpec other_base;
  other_base.base_name = "google/gemma-2-9b-it";
  WriteAdapter(g3->gguf(), dir.File("other_base.gguf"), other_base);
  EXPECT_NE(error(dir.File("other_base.gguf"), *g3).find("was made for 'google/gemma-2-9b-it'"), std::string::npos)
      << error(dir.File("other_base.gguf"), *g3);
  {
    auto file = GgufFile::Open(dir.File("other_base.gguf"));
    ASSERT_TRUE(file.ok());
    EXPECT_TRUE(LoraAdapter::Load(std::shared_ptr<const GgufFile>(std::move(file).value()), *g3, "x", true).ok());
  }
  AdapterSpec own_base;
  own_base.base_name = "someorg/" + model_name;
  WriteAdapter(g3->gguf(), dir.File("own_base.gguf"), own_base);
  EXPECT_EQ(error(dir.File("own_base.gguf"), *g3), "(loaded)") << model_name;
  // A model file is not an adapter.
  EXPECT_NE(error(family_models::ModelPath("gemma3_1b_like"), *g3).find("is not an adapter"), std::string::npos);
  // A pair without its other half; an embedding (which gemlet does not adapt); a wrong adapter type.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"half", "has a lora_a but no lora_b"}, {"embd", "applies adapters to the attention and MLP"},
      {"type", "adapter.type is 'control_vector'"}, {"layer", "applies adapters to the attention and MLP"}};
  for (const auto& [kind, want] : cases) {
    GgufWriter w;
    w.SetString("general.architecture", "gemma3");
    w.SetString("general.type", "adapter");
    w.SetString("adapter.type", kind == "type" ? "control_vector" : "lora");
    std::vector<float> zeros(64 * 64, 0.0f);
    std::string name = kind == "embd" ? "token_embd.weight" : kind == "layer" ? "blk.99.attn_q.weight" : "blk.0.attn_q.weight";
    ASSERT_TRUE(w.AddTensorData(name + ".lora_a", DType::kF32, {64, 4}, zeros.data()).ok());
    if (kind != "half") {
      ASSERT_TRUE(w.AddTensorData(name + ".lora_b", DType::kF32, {4, 128}, zeros.data()).ok());
    }
    const std::string path = dir.File(kind + ".gguf");
    ASSERT_TRUE(w.Write(path).ok());
    EXPECT_NE(error(path, *g3).find(want), std::string::npos) << kind << ": " << error(path, *g3);
  }
}

}  // namespace
}  // namespace gemlet

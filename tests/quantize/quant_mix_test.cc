// Mix rules: the type llama-quantize gives each tensor of Gemma 3 / Gemma 4 layouts, per file type.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "quantize/quant_mix.h"

namespace gemlet {
namespace {

// A dense Gemma layout as llama.cpp's converter names it (F32 everywhere, like `convert --outtype f32`).
struct Layout {
  int64_t hidden, ffn, n_layer, n_head, n_kv, head_dim, vocab;
  int64_t ple = 0;          // per-layer input width (Gemma 4 E-models)
  int64_t shared_from = -1;  // first KV-shared layer (no attn_k / attn_v / attn_k_norm)
  bool double_wide = false;  // KV-shared layers get 2x ffn
};

std::vector<MixTensor> Tensors(const Layout& l) {
  std::vector<MixTensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> ne) { t.push_back({name, DType::kF32, std::move(ne)}); };
  add("token_embd.weight", {l.hidden, l.vocab});
  add("output_norm.weight", {l.hidden});
  if (l.ple > 0) {
    add("per_layer_token_embd.weight", {l.n_layer * l.ple, l.vocab});
    add("per_layer_model_proj.weight", {l.hidden, l.n_layer * l.ple});
    add("per_layer_proj_norm.weight", {l.ple});
    add("rope_freqs.weight", {l.head_dim});
  }
  for (int64_t il = 0; il < l.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const bool shared = l.shared_from >= 0 && il >= l.shared_from;
    const int64_t ffn = shared && l.double_wide ? 2 * l.ffn : l.ffn;
    add(p + "attn_norm.weight", {l.hidden});
    add(p + "attn_q.weight", {l.hidden, l.n_head * l.head_dim});
    if (!shared) {
      add(p + "attn_k.weight", {l.hidden, l.n_kv * l.head_dim});
      add(p + "attn_v.weight", {l.hidden, l.n_kv * l.head_dim});
      add(p + "attn_k_norm.weight", {l.head_dim});
    }
    add(p + "attn_q_norm.weight", {l.head_dim});
    add(p + "attn_output.weight", {l.n_head * l.head_dim, l.hidden});
    add(p + "post_attention_norm.weight", {l.hidden});
    add(p + "ffn_norm.weight", {l.hidden});
    add(p + "ffn_gate.weight", {l.hidden, ffn});
    add(p + "ffn_up.weight", {l.hidden, ffn});
    add(p + "ffn_down.weight", {ffn, l.hidden});
    add(p + "post_ffw_norm.weight", {l.hidden});
    if (l.ple > 0) {
      add(p + "inp_gate.weight", {l.hidden, l.ple});
      add(p + "proj.weight", {l.ple, l.hidden});
      add(p + "post_norm.weight", {l.hidden});
      add(p + "layer_output_scale.weight", {1});
    }
  }
  return t;
}

MixModel ModelOf(const Layout& l) { return MixModel{static_cast<int>(l.n_layer), static_cast<int>(l.n_head), static_cast<int>(l.n_kv), 0}; }

std::map<std::string, DType> Choose(const Layout& l, FileType ftype, bool pure = false) {
  const std::vector<MixTensor> t = Tensors(l);
  MixOptions o;
  o.ftype = ftype;
  o.pure = pure;
  const std::vector<MixDecision> d = ChooseTensorTypes(ModelOf(l), t, o);
  std::map<std::string, DType> out;
  for (size_t i = 0; i < t.size(); ++i) out[t[i].name] = d[i].type;
  return out;
}

std::string Layer(int il, const char* what) { return "blk." + std::to_string(il) + "." + what; }

// Gemma 3 4B (config.json: hidden 2560, 34 layers, 8 heads, 4 kv heads, head_dim 256, ffn 10240).
const Layout kGemma3_4B{2560, 10240, 34, 8, 4, 256, 262208};
// Gemma 3 1B (hidden 1152 = 4.5 x 256: the K types fall back on every matrix that reads the residual).
const Layout kGemma3_1B{1152, 6912, 26, 4, 1, 256, 262144};
// Gemma 4 E2B (35 layers, hidden 1536, 8 heads, 1 kv head, the last 20 layers KV-shared, double-wide MLP).
const Layout kGemma4_E2B{1536, 6144, 35, 8, 1, 256, 262144, 256, 15, true};

// The layers llama.cpp's use_more_bits picks for n = 34, worked out by hand.
const std::set<int> kMoreBits34 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29, 30, 31, 32, 33};

TEST(FileTypeTest, ParsesNamesAndAliases) {
  FileType f;
  ASSERT_TRUE(ParseFileType("q4_k_m", &f));
  EXPECT_EQ(f, FileType::kQ4_K_M);
  ASSERT_TRUE(ParseFileType("Q4_K", &f));
  EXPECT_EQ(f, FileType::kQ4_K_M);
  ASSERT_TRUE(ParseFileType("Q3_K", &f));
  EXPECT_EQ(f, FileType::kQ3_K_M);
  ASSERT_TRUE(ParseFileType("Q5_K", &f));
  EXPECT_EQ(f, FileType::kQ5_K_M);
  ASSERT_TRUE(ParseFileType("bf16", &f));
  EXPECT_EQ(static_cast<uint32_t>(f), 32u);
  EXPECT_FALSE(ParseFileType("Q4_K_X", &f));
  EXPECT_FALSE(ParseFileType("IQ2_XXS", &f));
  // general.file_type values are llama.cpp's LLAMA_FTYPE_*.
  EXPECT_EQ(static_cast<uint32_t>(FileType::kQ8_0), 7u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::kQ5_0), 8u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::kQ4_K_M), 15u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::kQ6_K), 18u);
}

TEST(QuantMixTest, LlamaTensorOrderIsByLayerNumber) {
  std::vector<std::string> names = {"blk.10.attn_q.weight", "blk.2.ffn_up.weight", "token_embd.weight",
                                    "blk.2.attn_k.weight", "output_norm.weight"};
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return LlamaTensorLess(a, b); });
  EXPECT_EQ(names, (std::vector<std::string>{"output_norm.weight", "token_embd.weight", "blk.2.attn_k.weight",
                                             "blk.2.ffn_up.weight", "blk.10.attn_q.weight"}));
}

TEST(QuantMixTest, WhatIsNeverQuantized) {
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.attn_norm.weight", {2560}));
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.attn_q_norm.weight", {256}));
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.layer_output_scale.weight", {1}));
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.attn_q.weight", {2560, 1}));  // 1-D in effect
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.ffn_gate_inp.weight", {2816, 128}));
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.altup_router.weight", {2048, 4}));
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.laurel_l.weight", {2048, 64}));
  EXPECT_FALSE(TensorAllowsQuantization("per_layer_model_proj.weight", {1536, 8960}));
  EXPECT_FALSE(TensorAllowsQuantization("blk.0.ffn_down_exps.scale", {128}));
  EXPECT_TRUE(TensorAllowsQuantization("per_layer_token_embd.weight", {8960, 262144}));
  EXPECT_TRUE(TensorAllowsQuantization("blk.0.ffn_gate_up_exps.weight", {2816, 1408, 128}));
  EXPECT_TRUE(TensorAllowsQuantization("token_embd.weight", {2560, 262208}));
}

TEST(QuantMixTest, Gemma3_4B_Q4_K_M) {
  auto t = Choose(kGemma3_4B, FileType::kQ4_K_M);
  // Tied embeddings are the LM head: Q6_K.
  EXPECT_EQ(t["token_embd.weight"], DType::kQ6_K);
  EXPECT_EQ(t["output_norm.weight"], DType::kF32);
  for (int il = 0; il < 34; ++il) {
    const DType more = kMoreBits34.count(il) ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(t[Layer(il, "attn_v.weight")], more) << il;
    EXPECT_EQ(t[Layer(il, "ffn_down.weight")], more) << il;
    EXPECT_EQ(t[Layer(il, "attn_q.weight")], DType::kQ4_K);
    EXPECT_EQ(t[Layer(il, "attn_k.weight")], DType::kQ4_K);
    EXPECT_EQ(t[Layer(il, "attn_output.weight")], DType::kQ4_K);
    EXPECT_EQ(t[Layer(il, "ffn_gate.weight")], DType::kQ4_K);
    EXPECT_EQ(t[Layer(il, "ffn_up.weight")], DType::kQ4_K);
    EXPECT_EQ(t[Layer(il, "attn_norm.weight")], DType::kF32);
    EXPECT_EQ(t[Layer(il, "attn_k_norm.weight")], DType::kF32);
  }
}

TEST(QuantMixTest, Gemma3_4B_OtherMixes) {
  auto q4s = Choose(kGemma3_4B, FileType::kQ4_K_S);
  auto q5m = Choose(kGemma3_4B, FileType::kQ5_K_M);
  auto q3m = Choose(kGemma3_4B, FileType::kQ3_K_M);
  auto q3l = Choose(kGemma3_4B, FileType::kQ3_K_L);
  auto q2 = Choose(kGemma3_4B, FileType::kQ2_K);
  auto q6 = Choose(kGemma3_4B, FileType::kQ6_K);
  auto q8 = Choose(kGemma3_4B, FileType::kQ8_0);
  auto q40 = Choose(kGemma3_4B, FileType::kQ4_0);
  for (int il = 0; il < 34; ++il) {
    // Q4_K_S: the first 4 attn_v and the first eighth of ffn_down get Q5_K.
    EXPECT_EQ(q4s[Layer(il, "attn_v.weight")], il < 4 ? DType::kQ5_K : DType::kQ4_K);
    EXPECT_EQ(q4s[Layer(il, "ffn_down.weight")], il < 34 / 8 ? DType::kQ5_K : DType::kQ4_K);
    EXPECT_EQ(q5m[Layer(il, "ffn_down.weight")], kMoreBits34.count(il) ? DType::kQ6_K : DType::kQ5_K);
    EXPECT_EQ(q5m[Layer(il, "attn_q.weight")], DType::kQ5_K);
    // Q3_K_M: attn_v Q5_K for the first two then Q4_K; ffn_down Q5_K for the first 1/16; attn_output Q4_K.
    EXPECT_EQ(q3m[Layer(il, "attn_v.weight")], il < 2 ? DType::kQ5_K : DType::kQ4_K);
    EXPECT_EQ(q3m[Layer(il, "ffn_down.weight")], il < 34 / 16 ? DType::kQ5_K : DType::kQ4_K);
    EXPECT_EQ(q3m[Layer(il, "attn_output.weight")], DType::kQ4_K);
    EXPECT_EQ(q3m[Layer(il, "attn_q.weight")], DType::kQ3_K);
    EXPECT_EQ(q3l[Layer(il, "attn_v.weight")], DType::kQ5_K);
    EXPECT_EQ(q3l[Layer(il, "ffn_down.weight")], DType::kQ5_K);
    EXPECT_EQ(q3l[Layer(il, "attn_output.weight")], DType::kQ5_K);
    // Q2_K: GQA 2 (< 4) gives Q3_K attn_v; ffn_down and attn_output Q3_K.
    EXPECT_EQ(q2[Layer(il, "attn_v.weight")], DType::kQ3_K);
    EXPECT_EQ(q2[Layer(il, "ffn_down.weight")], DType::kQ3_K);
    EXPECT_EQ(q2[Layer(il, "attn_output.weight")], DType::kQ3_K);
    EXPECT_EQ(q2[Layer(il, "ffn_up.weight")], DType::kQ2_K);
    EXPECT_EQ(q6[Layer(il, "ffn_up.weight")], DType::kQ6_K);
    EXPECT_EQ(q8[Layer(il, "attn_v.weight")], DType::kQ8_0);
    EXPECT_EQ(q40[Layer(il, "ffn_down.weight")], DType::kQ4_0);
  }
  EXPECT_EQ(q2["token_embd.weight"], DType::kQ6_K);
  EXPECT_EQ(q6["token_embd.weight"], DType::kQ6_K);
  EXPECT_EQ(q8["token_embd.weight"], DType::kQ8_0);  // Q8_0 stays Q8_0
  EXPECT_EQ(q40["token_embd.weight"], DType::kQ6_K);
}

TEST(QuantMixTest, Q2_K_AttnVDependsOnGqa) {
  // Gemma 3 1B has 4 heads on 1 kv head: GQA 4 -> Q4_K, which 1152-wide rows turn into Q5_0.
  auto t = Choose(kGemma3_1B, FileType::kQ2_K);
  EXPECT_EQ(t["blk.0.attn_v.weight"], DType::kQ5_0);
  EXPECT_EQ(t["blk.0.attn_q.weight"], DType::kQ4_0);  // Q2_K -> Q4_0
  EXPECT_EQ(t["blk.0.ffn_down.weight"], DType::kQ3_K);  // 6912 = 27 x 256
  EXPECT_EQ(t["blk.0.attn_output.weight"], DType::kQ3_K);  // 1024 wide
}

TEST(QuantMixTest, Gemma3_1B_FallbacksForRowsOf1152) {
  // 1152 is a multiple of 32, not 256: Q4_K -> Q5_0, Q6_K -> Q8_0, Q5_K -> Q5_1, Q3_K/Q2_K -> Q4_0.
  auto t = Choose(kGemma3_1B, FileType::kQ4_K_M);
  EXPECT_EQ(t["token_embd.weight"], DType::kQ8_0);  // the LM head rule picks Q8_0 for rows K blocks cannot hold
  for (int il = 0; il < 26; ++il) {
    const bool more = il < 3 || il >= 22 || (il - 3) % 3 == 2;  // use_more_bits(il, 26)
    EXPECT_EQ(t[Layer(il, "attn_q.weight")], DType::kQ5_0);
    EXPECT_EQ(t[Layer(il, "ffn_gate.weight")], DType::kQ5_0);
    EXPECT_EQ(t[Layer(il, "attn_v.weight")], more ? DType::kQ8_0 : DType::kQ5_0) << il;
    EXPECT_EQ(t[Layer(il, "ffn_down.weight")], more ? DType::kQ6_K : DType::kQ4_K) << il;  // 6912 fits
    EXPECT_EQ(t[Layer(il, "attn_output.weight")], DType::kQ4_K);                          // 1024 fits
  }
  EXPECT_EQ(Choose(kGemma3_1B, FileType::kQ5_K_S)["blk.0.attn_q.weight"], DType::kQ5_1);
  EXPECT_EQ(Choose(kGemma3_1B, FileType::kQ3_K_S)["blk.0.attn_q.weight"], DType::kQ4_0);
  EXPECT_EQ(Choose(kGemma3_1B, FileType::kQ6_K)["blk.0.attn_q.weight"], DType::kQ8_0);
}

TEST(QuantMixTest, RowsThatFitNoBlockBecomeF16) {
  std::vector<MixTensor> t = {{"blk.0.attn_q.weight", DType::kF32, {48, 64}}, {"blk.0.ffn_up.weight", DType::kF32, {256, 48}}};
  for (FileType f : {FileType::kQ8_0, FileType::kQ4_0, FileType::kQ4_K_M, FileType::kQ6_K}) {
    MixOptions o;
    o.ftype = f;
    auto d = ChooseTensorTypes(MixModel{1, 1, 1, 0}, t, o);
    EXPECT_EQ(d[0].type, DType::kF16) << GetFileTypeInfo(f).name;
    EXPECT_TRUE(d[0].fallback);
    EXPECT_FALSE(d[1].fallback);
  }
}

TEST(QuantMixTest, Gemma4_E2B_Q4_K_M) {
  auto t = Choose(kGemma4_E2B, FileType::kQ4_K_M);
  // Per-layer embeddings count as token embeddings: with tied embeddings, Q6_K like the LM head.
  EXPECT_EQ(t["per_layer_token_embd.weight"], DType::kQ6_K);
  EXPECT_EQ(t["token_embd.weight"], DType::kQ6_K);
  EXPECT_EQ(t["per_layer_model_proj.weight"], DType::kF32);  // llama.cpp keeps it as it is
  EXPECT_EQ(t["rope_freqs.weight"], DType::kF32);
  // Only the 15 non-shared layers have attn_v; use_more_bits runs over those 15.
  const std::set<int> v_more = {0, 3, 6, 9, 12, 13, 14};
  for (int il = 0; il < 15; ++il) EXPECT_EQ(t[Layer(il, "attn_v.weight")], v_more.count(il) ? DType::kQ6_K : DType::kQ4_K) << il;
  EXPECT_EQ(t.count(Layer(20, "attn_v.weight")), 0u);
  // ffn_down over all 35 layers: first 4, last 5 (>= 30), and every third from layer 6.
  for (int il = 0; il < 35; ++il) {
    const bool more = il < 4 || il >= 30 || (il - 4) % 3 == 2;
    EXPECT_EQ(t[Layer(il, "ffn_down.weight")], more ? DType::kQ6_K : DType::kQ4_K) << il;
    EXPECT_EQ(t[Layer(il, "inp_gate.weight")], DType::kQ4_K);
    EXPECT_EQ(t[Layer(il, "proj.weight")], DType::kQ4_K);
    EXPECT_EQ(t[Layer(il, "layer_output_scale.weight")], DType::kF32);
  }
}

TEST(QuantMixTest, TokenEmbeddingTypeOverride) {
  const std::vector<MixTensor> t = Tensors(kGemma4_E2B);
  MixOptions o;
  o.ftype = FileType::kQ4_K_M;
  o.token_embedding_type = DType::kQ4_K;
  const auto d = ChooseTensorTypes(ModelOf(kGemma4_E2B), t, o);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].name == "token_embd.weight" || t[i].name == "per_layer_token_embd.weight") {
      EXPECT_EQ(d[i].type, DType::kQ4_K);
    }
    if (t[i].name == "blk.0.ffn_down.weight") {
      EXPECT_EQ(d[i].type, DType::kQ6_K);  // the rest of the mix is unchanged
    }
  }
  // Rows that do not fit still fall back (Gemma 3 1B: 1152 wide).
  const std::vector<MixTensor> small = Tensors(kGemma3_1B);
  const auto d1 = ChooseTensorTypes(ModelOf(kGemma3_1B), small, o);
  EXPECT_EQ(d1[0].type, DType::kQ5_0);
}

// llama-quantize's --tensor-type: the named tensors get the type, every other tensor keeps the
// mix's choice (the mix counts ffn_down / attn_v tensors through the overridden ones too).
TEST(QuantMixTest, TensorTypePatternsOverrideOnlyWhatTheyName) {
  const std::vector<MixTensor> t = Tensors(kGemma3_4B);
  MixOptions o;
  o.ftype = FileType::kQ4_K_M;
  const auto plain = ChooseTensorTypes(ModelOf(kGemma3_4B), t, o);
  o.tensor_types = {{"blk\\.[0-3]\\.ffn_(up|gate|down)", DType::kQ8_0}, {"attn_v", DType::kQ5_K}, {"blk\\.0\\.", DType::kQ2_K}};
  const auto d = ChooseTensorTypes(ModelOf(kGemma3_4B), t, o);
  int overridden = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& n = t[i].name;
    const bool ffn = (n.starts_with("blk.0.") || n.starts_with("blk.1.") || n.starts_with("blk.2.") || n.starts_with("blk.3.")) &&
                     (n.find("ffn_up") != std::string::npos || n.find("ffn_gate") != std::string::npos ||
                      n.find("ffn_down") != std::string::npos);
    if (!plain[i].quantizable) {
      EXPECT_EQ(d[i].type, plain[i].type) << n;  // norms are never quantized, whatever a pattern says
    } else if (ffn) {
      EXPECT_EQ(d[i].type, DType::kQ8_0) << n;  // the first pattern that matches wins
      ++overridden;
    } else if (n.find("attn_v") != std::string::npos) {
      EXPECT_EQ(d[i].type, DType::kQ5_K) << n;
    } else if (n.starts_with("blk.0.")) {
      EXPECT_EQ(d[i].type, DType::kQ2_K) << n;
    } else {
      EXPECT_EQ(d[i].type, plain[i].type) << n;
    }
  }
  EXPECT_EQ(overridden, 12);
}

TEST(QuantMixTest, PureAndFloatTypes) {
  auto pure = Choose(kGemma3_4B, FileType::kQ4_K_M, /*pure=*/true);
  auto f16 = Choose(kGemma3_4B, FileType::kF16);
  auto bf16 = Choose(kGemma3_4B, FileType::kBF16);
  for (const auto& [name, type] : pure) {
    const bool norm = name.find("norm") != std::string::npos;
    EXPECT_EQ(type, norm ? DType::kF32 : DType::kQ4_K) << name;
    EXPECT_EQ(f16[name], norm ? DType::kF32 : DType::kF16) << name;
    EXPECT_EQ(bf16[name], norm ? DType::kF32 : DType::kBF16) << name;
  }
  // Pure Q4_K_M on Gemma 3 1B still falls back where the row does not fit.
  EXPECT_EQ(Choose(kGemma3_1B, FileType::kQ4_K_M, true)["blk.0.attn_q.weight"], DType::kQ5_0);
}

TEST(QuantMixTest, InputOrderDoesNotMatter) {
  std::vector<MixTensor> t = Tensors(kGemma3_4B);
  MixOptions o;
  o.ftype = FileType::kQ4_K_M;
  const auto expected = ChooseTensorTypes(ModelOf(kGemma3_4B), t, o);
  std::map<std::string, DType> by_name;
  for (size_t i = 0; i < t.size(); ++i) by_name[t[i].name] = expected[i].type;
  std::mt19937 rng(7);
  std::shuffle(t.begin(), t.end(), rng);
  const auto shuffled = ChooseTensorTypes(ModelOf(kGemma3_4B), t, o);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(shuffled[i].type, by_name[t[i].name]) << t[i].name;
}

TEST(QuantMixTest, EightExpertsRaiseAttention) {
  std::vector<MixTensor> t = {{"blk.0.attn_v.weight", DType::kF32, {256, 256}},
                              {"blk.0.attn_k.weight", DType::kF32, {256, 256}},
                              {"blk.0.attn_output.weight", DType::kF32, {256, 256}},
                              {"blk.0.ffn_down_exps.weight", DType::kF32, {256, 256, 8}}};
  MixOptions o;
  o.ftype = FileType::kQ4_K_M;
  auto d = ChooseTensorTypes(MixModel{8, 8, 8, 8}, t, o);
  EXPECT_EQ(d[0].type, DType::kQ8_0);
  EXPECT_EQ(d[1].type, DType::kQ8_0);
  EXPECT_EQ(d[2].type, DType::kQ5_K);
  EXPECT_EQ(d[3].type, DType::kQ6_K);  // layer 0 of 8 uses more bits
}

TEST(QuantMixTest, QuantizedOrOtherInputTypesOfSmallTensorsAreKept) {
  std::vector<MixTensor> t = {{"blk.0.attn_norm.weight", DType::kF16, {256}},
                              {"per_layer_model_proj.weight", DType::kBF16, {256, 512}}};
  MixOptions o;
  o.ftype = FileType::kQ4_0;
  auto d = ChooseTensorTypes(MixModel{1, 1, 1, 0}, t, o);
  EXPECT_EQ(d[0].type, DType::kF16);
  EXPECT_EQ(d[1].type, DType::kBF16);
  EXPECT_FALSE(d[0].quantizable);
}

}  // namespace
}  // namespace gemlet

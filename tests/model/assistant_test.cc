// Gemma 4's drafter (gemma4-assistant) from an HF checkpoint laid out as transformers saves a
// Gemma4AssistantForCausalLM (random weights, written here) for the shared tiny gemma4_e2b_like: `gemlet
// convert` writes llama.cpp's names and keys (and keeps the ordered embedding), the loader refuses bad
// files and mismatched targets by name, and a draft step over the target's cache gives what this file's
// own double-precision restatement of the model's math gives (HF's goldens: tools/drafter_reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "convert/test_util.h"
#include "convert/convert.h"
#include "gguf/gguf_reader.h"
#include "model/assistant.h"
#include "runtime/drafting.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet {
namespace {

using testing::F32Tensor;
using testing::RawTensor;
using testing::ScratchDir;

constexpr int kD = 48, kFfn = 96, kHeads = 4, kKv = 2, kHd = 32, kHdGlobal = 64, kVocab = 512, kBackbone = 64;
constexpr int kWindow = 8, kCentroids = 16, kTopK = 4;
const bool kSliding[] = {true, true, true, false};

// The drafter's weights as HF names them, and a config.json as Gemma4AssistantConfig writes it.
struct Checkpoint {
  std::map<std::string, std::vector<float>> w;  // HF name -> row-major values
  std::map<std::string, std::vector<int64_t>> shape;
  std::vector<int64_t> ordering;
  int kv_shared = 4;
  bool ordered = true;

  explicit Checkpoint(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    auto add = [&](const std::string& name, std::vector<int64_t> s, float mean, float std) {
      int64_t count = 1;
      for (int64_t x : s) count *= x;
      std::vector<float> v(static_cast<size_t>(count));
      for (float& x : v) x = mean + std * n(rng);
      w[name] = std::move(v);
      shape[name] = std::move(s);
    };
    auto linear = [&](const std::string& name, int64_t out, int64_t in) { add(name, {out, in}, 0, 1.0f / std::sqrt(float(in))); };
    add("model.embed_tokens.weight", {kVocab, kD}, 0, 1.0f / std::sqrt(float(kD)));
    add("model.norm.weight", {kD}, 5, 1);
    linear("pre_projection.weight", kD, 2 * kBackbone);
    linear("post_projection.weight", kBackbone, kD);
    linear("masked_embedding.centroids.weight", kCentroids, kD);
    for (int i = 0; i < 4; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      const int hd = kSliding[i] ? kHd : kHdGlobal;
      add(p + "input_layernorm.weight", {kD}, 1, 0.3f);
      linear(p + "self_attn.q_proj.weight", kHeads * hd, kD);
      add(p + "self_attn.q_norm.weight", {hd}, 2 / std::sqrt(float(hd)), 0.1f);
      linear(p + "self_attn.o_proj.weight", kD, kHeads * hd);
      add(p + "post_attention_layernorm.weight", {kD}, 2, 0.5f);
      add(p + "pre_feedforward_layernorm.weight", {kD}, 1, 0.3f);
      linear(p + "mlp.gate_proj.weight", kFfn, kD);
      linear(p + "mlp.up_proj.weight", kFfn, kD);
      linear(p + "mlp.down_proj.weight", kD, kFfn);
      add(p + "post_feedforward_layernorm.weight", {kD}, 2, 0.5f);
      add(p + "layer_scalar", {1}, 1, 0.2f);
    }
    ordering.resize(kVocab);
    std::iota(ordering.begin(), ordering.end(), 0);
    std::shuffle(ordering.begin(), ordering.end(), rng);
  }

  nlohmann::json Config() const {
    nlohmann::json text = {
        {"model_type", "gemma4_text"}, {"hidden_size", kD}, {"intermediate_size", kFfn}, {"num_hidden_layers", 4},
        {"num_attention_heads", kHeads}, {"num_key_value_heads", kKv}, {"head_dim", kHd}, {"global_head_dim", kHdGlobal},
        {"hidden_size_per_layer_input", 0}, {"vocab_size", kVocab}, {"vocab_size_per_layer_input", 0},
        {"num_kv_shared_layers", kv_shared}, {"use_double_wide_mlp", false}, {"attention_k_eq_v", false},
        {"enable_moe_block", false}, {"sliding_window", kWindow}, {"final_logit_softcapping", nullptr},
        {"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}},
        {"per_layer_config", {{"3", {{"head_dim", kHdGlobal}}}}}, {"max_position_embeddings", 4096},
        {"rms_norm_eps", 1e-6},
        {"rope_parameters",
         {{"full_attention", {{"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}, {"rope_type", "proportional"}}},
          {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}}}};
    return {{"architectures", {"Gemma4AssistantForCausalLM"}}, {"model_type", "gemma4_assistant"},
            {"backbone_hidden_size", kBackbone}, {"use_ordered_embeddings", ordered}, {"num_centroids", kCentroids},
            {"centroid_intermediate_top_k", kTopK}, {"tie_word_embeddings", true}, {"text_config", text}};
  }

  void Write(const std::string& dir) const {
    std::map<std::string, RawTensor> tensors;
    for (const auto& [name, v] : w) {
      if (ordered || name.rfind("masked_embedding.", 0) != 0) tensors[name] = F32Tensor(shape.at(name), v);
    }
    if (ordered) tensors["masked_embedding.token_ordering"] = Ordering();
    testing::WriteBytes(dir + "/model.safetensors", testing::SafetensorsBytes(tensors));
    testing::WriteText(dir + "/config.json", Config().dump(2));
  }

  RawTensor Ordering() const {
    RawTensor order;
    order.dtype = "I64";
    order.shape = {kVocab};
    order.bytes.resize(ordering.size() * 8);
    std::memcpy(order.bytes.data(), ordering.data(), order.bytes.size());
    return order;
  }

  // A drafter that proposes the token it is given, again and again: its layers add nothing (o and
  // down zero), pre_projection keeps a random projection P of the token's embedding and drops the
  // state, and its head's row t is P applied to the target's embedding of t: the input's own row
  // scores highest. Where the target repeats a token, its drafts are kept.
  void MakeCopier(const std::vector<float>& target_embedding, float embed_scale) {
    ordered = false;
    std::mt19937 rng(5);
    std::normal_distribution<float> n(0.0f, 1.0f / std::sqrt(float(kBackbone)));
    std::vector<float> proj(static_cast<size_t>(kD) * kBackbone);
    for (float& x : proj) x = n(rng);
    std::vector<float>& pre = w["pre_projection.weight"];
    std::fill(pre.begin(), pre.end(), 0.0f);
    for (int o = 0; o < kD; ++o) {
      for (int i = 0; i < kBackbone; ++i) pre[static_cast<size_t>(o) * 2 * kBackbone + i] = proj[static_cast<size_t>(o) * kBackbone + i];
    }
    std::vector<float>& head = w["model.embed_tokens.weight"];
    for (int t = 0; t < kVocab; ++t) {
      for (int o = 0; o < kD; ++o) {
        double acc = 0;
        for (int i = 0; i < kBackbone; ++i) {
          acc += double(proj[static_cast<size_t>(o) * kBackbone + i]) * target_embedding[static_cast<size_t>(t) * kBackbone + i] * embed_scale;
        }
        head[static_cast<size_t>(t) * kD + o] = static_cast<float>(acc);
      }
    }
    for (int i = 0; i < 4; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      std::fill(w[p + "self_attn.o_proj.weight"].begin(), w[p + "self_attn.o_proj.weight"].end(), 0.0f);
      std::fill(w[p + "mlp.down_proj.weight"].begin(), w[p + "mlp.down_proj.weight"].end(), 0.0f);
      w[p + "layer_scalar"][0] = 1.0f;
    }
  }
};

Result<ConvertResult> Convert(const Checkpoint& ck, const ScratchDir& scratch, const std::string& out) {
  std::filesystem::create_directories(scratch / "hf");
  ck.Write(scratch / "hf");
  ConvertOptions o;
  o.hf_dir = scratch / "hf";
  o.output_path = out;
  return ConvertHfToGguf(o);
}

// ---- the restatement: the model's math in double precision, from the HF tensors ----

std::vector<double> RmsNorm(const std::vector<double>& x, const float* w, size_t n, double eps = 1e-6) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * r * w[i];
  return out;
}

std::vector<double> Linear(const Checkpoint& ck, const std::string& name, const std::vector<double>& x) {
  const std::vector<float>& w = ck.w.at(name);
  const int64_t out = ck.shape.at(name)[0], in = ck.shape.at(name)[1];
  std::vector<double> y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double s = 0;
    for (int64_t i = 0; i < in; ++i) s += static_cast<double>(w[static_cast<size_t>(o * in + i)]) * x[static_cast<size_t>(i)];
    y[static_cast<size_t>(o)] = s;
  }
  return y;
}

struct Reference {
  std::vector<double> logits, state;
};

// One drafter step at position pos: `embedded` is the target's scaled embedding of the token,
// `state` the target's hidden state; K/V read from the target's cache as floats.
Reference Restate(const Checkpoint& ck, const std::vector<float>& embedded, const std::vector<float>& state,
                  const KvCache& cache, int src_sliding, int src_global, int64_t pos) {
  std::vector<double> in(embedded.begin(), embedded.end());
  in.insert(in.end(), state.begin(), state.end());
  std::vector<double> x = Linear(ck, "pre_projection.weight", in);
  for (int i = 0; i < 4; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const bool sliding = kSliding[i];
    const int hd = sliding ? kHd : kHdGlobal;
    std::vector<double> q = Linear(ck, p + "self_attn.q_proj.weight", RmsNorm(x, ck.w.at(p + "input_layernorm.weight").data(), kD));
    std::vector<double> attn(static_cast<size_t>(kHeads) * hd, 0.0);
    const int src = sliding ? src_sliding : src_global;
    // HF: the last W + 1 of [0, pos) (its bidirectional sliding mask keeps |q - kv| <= W, flipped;
    // tools/drafter_reference/README.md).
    const int64_t lo = sliding ? std::max<int64_t>(0, pos - kWindow - 1) : 0;
    std::vector<float> k(static_cast<size_t>(kKv) * hd), v(static_cast<size_t>(kKv) * hd);
    for (int h = 0; h < kHeads; ++h) {
      std::vector<double> qh(q.begin() + h * hd, q.begin() + (h + 1) * hd);
      qh = RmsNorm(qh, ck.w.at(p + "self_attn.q_norm.weight").data(), static_cast<size_t>(hd));
      // RoPE, rotate-half pairs: theta^(-2j/hd); global layers rotate the first quarter only.
      const double theta = sliding ? 10000.0 : 1000000.0;
      const int rotated = sliding ? hd / 2 : hd / 8;
      for (int j = 0; j < hd / 2; ++j) {
        const double inv = j < rotated ? static_cast<double>(static_cast<float>(1.0 / std::pow(theta, 2.0 * j / hd))) : 0.0;
        const double a = static_cast<double>(pos) * inv, c = std::cos(a), s = std::sin(a);
        const double x0 = qh[static_cast<size_t>(j)], x1 = qh[static_cast<size_t>(j + hd / 2)];
        qh[static_cast<size_t>(j)] = x0 * c - x1 * s;
        qh[static_cast<size_t>(j + hd / 2)] = x1 * c + x0 * s;
      }
      const int kvh = h / (kHeads / kKv);
      std::vector<double> scores;
      for (int64_t t = lo; t < pos; ++t) {
        cache.LoadKey(src, t, k.data());
        double s = 0;
        for (int e = 0; e < hd; ++e) s += qh[static_cast<size_t>(e)] * k[static_cast<size_t>(kvh * hd + e)];  // scale 1
        scores.push_back(s);
      }
      const double m = *std::max_element(scores.begin(), scores.end());
      double z = 0;
      for (double& s : scores) z += (s = std::exp(s - m));
      for (int64_t t = lo; t < pos; ++t) {
        cache.LoadValue(src, t, v.data());
        for (int e = 0; e < hd; ++e) attn[static_cast<size_t>(h * hd + e)] += scores[static_cast<size_t>(t - lo)] / z * v[static_cast<size_t>(kvh * hd + e)];
      }
    }
    const std::vector<double> o = RmsNorm(Linear(ck, p + "self_attn.o_proj.weight", attn), ck.w.at(p + "post_attention_layernorm.weight").data(), kD);
    for (int e = 0; e < kD; ++e) x[static_cast<size_t>(e)] += o[static_cast<size_t>(e)];
    const std::vector<double> f = RmsNorm(x, ck.w.at(p + "pre_feedforward_layernorm.weight").data(), kD);
    std::vector<double> g = Linear(ck, p + "mlp.gate_proj.weight", f), u = Linear(ck, p + "mlp.up_proj.weight", f);
    for (size_t e = 0; e < g.size(); ++e) {
      const double a = g[e];
      g[e] = 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (a + 0.044715 * a * a * a))) * u[e];
    }
    const std::vector<double> dn = RmsNorm(Linear(ck, p + "mlp.down_proj.weight", g), ck.w.at(p + "post_feedforward_layernorm.weight").data(), kD);
    const double scalar = ck.w.at(p + "layer_scalar")[0];
    for (int e = 0; e < kD; ++e) x[static_cast<size_t>(e)] = (x[static_cast<size_t>(e)] + dn[static_cast<size_t>(e)]) * scalar;
  }
  const std::vector<double> hn = RmsNorm(x, ck.w.at("model.norm.weight").data(), kD);
  // The ordered embedding: the tokens of the top-k centroids, the rest at their minimum less one.
  const std::vector<double> c = Linear(ck, "masked_embedding.centroids.weight", hn);
  std::vector<int> idx(kCentroids);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + kTopK, idx.end(), [&](int a, int b) { return c[size_t(a)] > c[size_t(b)]; });
  const std::vector<double> all = Linear(ck, "model.embed_tokens.weight", hn);
  Reference r;
  const int per = kVocab / kCentroids;
  double lowest = 1e300;
  std::vector<int64_t> chosen;
  for (int k2 = 0; k2 < kTopK; ++k2) {
    for (int j = 0; j < per; ++j) chosen.push_back(ck.ordering[static_cast<size_t>(idx[size_t(k2)] * per + j)]);
  }
  for (int64_t t : chosen) lowest = std::min(lowest, all[static_cast<size_t>(t)]);
  r.logits.assign(kVocab, lowest - 1.0);
  for (int64_t t : chosen) r.logits[static_cast<size_t>(t)] = all[static_cast<size_t>(t)];
  r.state = Linear(ck, "post_projection.weight", hn);
  return r;
}

TEST(Gemma4Assistant, ConvertWritesLlamaCppNamesAndKeysAndKeepsTheOrderedEmbedding) {
  ScratchDir scratch;
  const Checkpoint ck(101);
  auto r = Convert(ck, scratch, scratch / "assistant.gguf");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->arch, "gemma4-assistant");
  auto f = GgufFile::Open(scratch / "assistant.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.GetU32("gemma4-assistant.embedding_length"), uint32_t(kD));
  EXPECT_EQ(*g.GetU32("gemma4-assistant.embedding_length_out"), uint32_t(kBackbone));
  EXPECT_EQ(*g.GetU32("gemma4-assistant.nextn_predict_layers"), 4u);
  EXPECT_EQ(*g.GetU32("gemma4-assistant.attention.shared_kv_layers"), 4u);
  EXPECT_EQ(*g.GetU32("gemma4-assistant.centroid_intermediate_top_k"), uint32_t(kTopK));
  EXPECT_EQ(*g.GetU32("gemma4-assistant.attention.sliding_window"), uint32_t(kWindow));
  for (const char* name : {"token_embd.weight", "output_norm.weight", "rope_freqs.weight", "nextn.pre_projection.weight",
                           "nextn.post_projection.weight", "masked_embd_centroids.weight", "blk.3.attn_q.weight",
                           "blk.3.attn_q_norm.weight", "blk.0.layer_output_scale.weight", "blk.2.post_ffw_norm.weight"}) {
    EXPECT_NE(g.FindTensor(name), nullptr) << name;
  }
  EXPECT_EQ(g.FindTensor("blk.0.attn_k.weight"), nullptr);  // every layer reads the target's K/V
  EXPECT_EQ(g.FindTensor("output.weight"), nullptr);        // tied
  const GgufTensor* pre = g.FindTensor("nextn.pre_projection.weight");
  EXPECT_EQ(pre->ne[0], 2 * kBackbone);
  EXPECT_EQ(pre->ne[1], kD);
  const GgufTensor* order = g.FindTensor("masked_embd_ordering");
  ASSERT_NE(order, nullptr);
  ASSERT_EQ(order->type, DType::kI32);
  std::vector<int32_t> got(kVocab);
  std::memcpy(got.data(), order->data, got.size() * 4);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), ck.ordering.begin()));
}

TEST(Gemma4Assistant, BadCheckpointsAreRefusedByName) {
  {
    ScratchDir scratch;
    Checkpoint ck(102);
    ck.kv_shared = 2;
    auto r = Convert(ck, scratch, scratch / "a.gguf");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("shares the K/V of every layer"), std::string::npos) << r.message();
  }
  {
    ScratchDir scratch;
    Checkpoint ck(103);
    ck.ordering[5] = ck.ordering[6];
    auto r = Convert(ck, scratch, scratch / "a.gguf");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("not a permutation"), std::string::npos) << r.message();
  }
}

class Gemma4AssistantStep : public ::testing::Test {
 protected:
  static std::string TargetPath(const char* name) { return testing::kGgufDir + "/" + name + ".gguf"; }
};

TEST_F(Gemma4AssistantStep, MatchesTheRestatementOverTheTargetsCache) {
  ScratchDir scratch;
  const Checkpoint ck(104);
  ASSERT_TRUE(Convert(ck, scratch, scratch / "assistant.gguf").ok());
  auto drafter = runtime::Engine::Load(scratch / "assistant.gguf");
  ASSERT_TRUE(drafter.ok()) << drafter.message();
  auto target = runtime::Engine::Load(TargetPath("gemma4_e2b_like"));
  ASSERT_TRUE(target.ok()) << target.message();
  const ModelConfig& tc = (*target)->config();
  ASSERT_EQ(tc.d_model, kBackbone);

  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  auto session = runtime::Session::Create(*target, so);
  ASSERT_TRUE(session.ok()) << session.message();
  runtime::Session& s = **session;
  auto mtp = runtime::AssistantDrafter::Create(*drafter, s);
  ASSERT_TRUE(mtp.ok()) << mtp.message();
  // The cache's sources: layers 2 (global) and 3 (sliding) of s,s,f,s,s,f keep the K/V the shared tail reads.
  std::vector<int32_t> prompt = {2};
  for (int i = 1; i < 21; ++i) prompt.push_back(3 + (i * 97) % 500);
  std::vector<float> hidden(kBackbone), logits(kVocab);
  ASSERT_TRUE(s.Evaluate(prompt, logits.data(), false, hidden.data()).ok());
  // Hidden states come with the logits of their rows: asked for alone, refused.
  EXPECT_FALSE(s.Evaluate({5}, nullptr, false, hidden.data()).ok());
  const int64_t pos = s.n_past();  // 21: past the window of 8

  const Assistant& a = (*mtp)->assistant();
  AssistantScratch& scratch_rows = (*mtp)->scratch();
  int32_t token = 77;
  std::vector<float> state = hidden;
  double worst_logit = 0, worst_state = 0, logit_scale = 0;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> embedded(kBackbone);
    const WeightMatrix& table = *(*target)->model().InputEmbedding();
    ASSERT_EQ(table.type, DType::kF32);
    std::memcpy(embedded.data(), table.Row(token), kBackbone * sizeof(float));
    for (float& e : embedded) e *= tc.embed_scale;
    const Reference ref = Restate(ck, embedded, state, s.cache(), 3, 2, pos);
    s.DraftStep(a, token, state.data(), scratch_rows);
    for (int t = 0; t < kVocab; ++t) {
      worst_logit = std::max(worst_logit, std::fabs(ref.logits[size_t(t)] - scratch_rows.logits[size_t(t)]));
      logit_scale = std::max(logit_scale, std::fabs(ref.logits[size_t(t)]));
    }
    for (int e = 0; e < kBackbone; ++e) worst_state = std::max(worst_state, std::fabs(ref.state[size_t(e)] - scratch_rows.state[size_t(e)]));
    const auto best = std::max_element(ref.logits.begin(), ref.logits.end()) - ref.logits.begin();
    EXPECT_EQ(std::max_element(scratch_rows.logits.begin(), scratch_rows.logits.end()) - scratch_rows.logits.begin(), best);
    token = static_cast<int32_t>(best);
    state = scratch_rows.state;
  }
  std::printf("[ assistant] max |logit - restated| %.3g (logits up to %.3g), |state - restated| %.3g\n", worst_logit,
              logit_scale, worst_state);
  EXPECT_GT(logit_scale, 1.0);
  EXPECT_LT(worst_logit, 2e-4);
  EXPECT_LT(worst_state, 2e-4);
  EXPECT_EQ(s.n_past(), pos);
}

TEST_F(Gemma4AssistantStep, RefusesATargetOfOtherHeads) {
  ScratchDir scratch;
  ASSERT_TRUE(Convert(Checkpoint(105), scratch, scratch / "assistant.gguf").ok());
  auto model = LoadModelFile(scratch / "assistant.gguf");
  ASSERT_TRUE(model.ok()) << model.message();
  const Assistant* a = (*model)->AsAssistant();
  ASSERT_NE(a, nullptr);
  auto e2b = LoadModelFile(TargetPath("gemma4_e2b_like"));
  auto moe = LoadModelFile(TargetPath("gemma4_moe_kv_eq_v"));
  ASSERT_TRUE(e2b.ok() && moe.ok());
  EXPECT_TRUE(a->CheckTarget(**e2b).ok());
  // The MoE model's global layers keep 1 KV head (K=V), its window is 16.
  const Status s = a->CheckTarget(**moe);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("KV heads"), std::string::npos) << s.message();
  // A drafter evaluates nothing by itself.
  const int32_t token = 5;
  SequenceChunk chunk{&token, 1, nullptr};
  Workspace ws((*model)->config(), 1, 8, 1);
  KernelContext ctx(1);
  const Status step = (*model)->ForwardBatch({&chunk, 1}, ws, ctx, nullptr);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.message().find("drafter"), std::string::npos) << step.message();
}

// Greedy generation on gemma4_e2b_like, whose answer repeats tokens, with a drafter that proposes
// repeats: drafts are kept, and the tokens are plain decoding's.
TEST_F(Gemma4AssistantStep, KeptDraftsChangeNoToken) {
  ScratchDir scratch;
  auto target = runtime::Engine::Load(TargetPath("gemma4_e2b_like"));
  ASSERT_TRUE(target.ok()) << target.message();
  const WeightMatrix& table = *(*target)->model().InputEmbedding();
  ASSERT_EQ(table.type, DType::kF32);
  std::vector<float> embedding(static_cast<size_t>(kVocab) * kBackbone);
  std::memcpy(embedding.data(), table.data, embedding.size() * sizeof(float));
  Checkpoint ck(106);
  ck.MakeCopier(embedding, (*target)->config().embed_scale);
  ASSERT_TRUE(Convert(ck, scratch, scratch / "copier.gguf").ok());
  auto copier = runtime::Engine::Load(scratch / "copier.gguf");
  ASSERT_TRUE(copier.ok()) << copier.message();
  EXPECT_EQ((*copier)->model().AsAssistant()->sizes().n_centroids, 0);  // the full head

  const nlohmann::json tokens = test::ReadJson(testing::kHfDir + "/gemma4_e2b_like/tokens.json");
  const std::vector<int32_t> prompt = tokens["prompt_ids"].get<std::vector<int32_t>>();
  auto run = [&](bool with) {
    SessionOptions so;
    so.n_ctx = 96;
    so.n_threads = 2;
    auto s = runtime::Session::Create(*target, so);
    EXPECT_TRUE(s.ok());
    SamplingOptions sp;
    sp.temperature = 0;
    Sampler sampler(sp, kVocab);
    GenerateOptions o;
    o.max_tokens = 40;
    o.sampling = sp;
    o.max_draft = with ? 7 : 0;
    runtime::GenerationControls c;
    c.stop_at_end_of_turn = false;
    std::unique_ptr<runtime::AssistantDrafter> mtp;
    if (with) {
      auto made = runtime::AssistantDrafter::Create(*copier, **s);
      EXPECT_TRUE(made.ok()) << made.message();
      mtp = std::move(made).value();
      c.assistant = mtp.get();
    }
    auto r = runtime::Generate(**s, sampler, prompt, o, c, {});
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? r->reply : Reply{};
  };
  const Reply plain = run(false), spec = run(true);
  ASSERT_EQ(plain.tokens.size(), 40u);
  EXPECT_EQ(spec.tokens, plain.tokens);
  // HF's own greedy tokens begin the answer (the golden's 20).
  const std::vector<int32_t> hf = tokens["generated_ids"].get<std::vector<int32_t>>();
  EXPECT_TRUE(std::equal(hf.begin(), hf.end(), plain.tokens.begin()));
  std::printf("[ assistant] copier on gemma4_e2b_like: %d steps, %d drafted, %d kept\n", spec.stats.draft_steps,
              spec.stats.drafted_tokens, spec.stats.accepted_tokens);
  EXPECT_GT(spec.stats.accepted_tokens, 3);
  EXPECT_LT(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
}

}  // namespace
}  // namespace gemlet

// Gemma 4's drafter against transformers' Gemma4AssistantForCausalLM: the goldens of
// tools/drafter_reference/drafter_goldens.py (tiny random drafters on three tiny Gemma 4 backbones, made
// with transformers 5.17 in float32 on a CPU), in tests/data/drafter/ (README.md there and in
// tools/drafter_reference say what each file holds). For each case: `gemlet convert` of the drafter's HF
// folder; the target's final-normed hidden states of every prompt row; every step of the drafter chains
// fed transformers' own inputs (its embedded token, logits, projected state, argmax); gemlet's own chains
// from its own hidden state (the draft tokens); a perturbed input that must not pass; and generation
// with the drafter identical to plain decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "convert/convert.h"
#include "runtime/drafting.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet {
namespace {

namespace fs = std::filesystem;

std::string GoldenDir() { return std::string(GEMLET_SOURCE_DIR) + "/tests/data/drafter"; }

std::vector<std::string> Cases() {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(GoldenDir(), ec)) return out;
  for (const auto& e : fs::directory_iterator(GoldenDir())) {
    if (fs::exists(e.path() / "meta.json")) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The target a case's backbone is in gemlet's test data: llama.cpp's GGUF where there is one, else
// the HF folder converted.
std::string TargetFor(const std::string& backbone, const test::TempDir& dir) {
  const std::string gguf = test::TestdataDir() + "/gguf/" + backbone + ".gguf";
  if (fs::exists(gguf)) return gguf;
  ConvertOptions o;
  o.hf_dir = test::TestdataDir() + "/hf-mm/" + backbone;
  o.output_path = dir.File(backbone + ".gguf");
  auto r = ConvertHfToGguf(o);
  EXPECT_TRUE(r.ok()) << r.message();
  return o.output_path;
}

double MaxAbs(const float* a, const float* b, size_t n, double* scale = nullptr) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    if (scale) *scale = std::max(*scale, std::fabs(static_cast<double>(b[i])));
  }
  return worst;
}

class AssistantGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(AssistantGolden, MatchesTransformers) {
  const std::string dir = GoldenDir() + "/" + GetParam();
  const nlohmann::json meta = test::ReadJson(dir + "/meta.json");
  test::TempDir tmp;
  ConvertOptions co;
  co.hf_dir = dir;
  co.output_path = tmp.File("assistant.gguf");
  auto converted = ConvertHfToGguf(co);
  ASSERT_TRUE(converted.ok()) << converted.message();
  auto drafter = runtime::Engine::Load(co.output_path);
  ASSERT_TRUE(drafter.ok()) << drafter.message();
  auto target = runtime::Engine::Load(TargetFor(meta["backbone"].get<std::string>(), tmp));
  ASSERT_TRUE(target.ok()) << target.message();

  const std::vector<int32_t> ids = meta["input_ids"].get<std::vector<int32_t>>();
  const int db = meta["backbone_hidden_size"].get<int>(), V = (*target)->config().n_vocab, n = meta["n_draft"].get<int>();
  const std::vector<float> hidden = test::ReadF32File(dir + "/backbone_hidden.f32");
  std::vector<std::pair<std::string, std::shared_ptr<const runtime::Engine>>> files = {{"gemlet convert", *drafter}};
  if (fs::exists(dir + "/llamacpp-f32.gguf") && !meta["variant"]["ordered"].get<bool>()) {
    auto llama = runtime::Engine::Load(dir + "/llamacpp-f32.gguf");
    ASSERT_TRUE(llama.ok()) << llama.message();
    files.emplace_back("llama.cpp's convert_hf_to_gguf.py", *llama);
  }
  // The shared K/V of each layer type and the target layer that keeps it.
  struct GoldenKv {
    int layer = -1;
    std::vector<float> k, v;
  };
  const ModelConfig& tc = (*target)->config();
  std::map<std::string, GoldenKv> kv_golden;
  for (const bool sliding : {true, false}) {
    GoldenKv kv;
    for (int i = 0; i < tc.n_layers; ++i) {
      if (tc.layers[static_cast<size_t>(i)].sliding == sliding && tc.layers[static_cast<size_t>(i)].kv_source < 0) kv.layer = i;
    }
    const std::string type = sliding ? "sliding_attention" : "full_attention";
    ASSERT_GE(kv.layer, 0) << type;
    kv.k = test::ReadF32File(dir + "/backbone_" + type + "_k.f32");
    kv.v = test::ReadF32File(dir + "/backbone_" + type + "_v.f32");
    const LayerConfig& l = tc.layers[static_cast<size_t>(kv.layer)];
    ASSERT_EQ(kv.k.size(), static_cast<size_t>(l.n_kv_heads) * ids.size() * l.head_dim) << type;
    ASSERT_EQ(kv.v.size(), static_cast<size_t>(l.n_kv_heads) * ids.size() * l.head_dim_v) << type;
    kv_golden[type] = std::move(kv);
  }
  // Tolerances: float32 on both sides; logits reach about 30 and hidden states about 22. The
  // drafter's logits and states are held to 1e-5 of their largest golden value (about 80 float32
  // roundings of it: the kernels' vector width alone moved the state by 1.04e-4 of 24 on AVX2 and
  // by less on AVX-512), the backbone's values to 1e-4.
  constexpr double kHiddenTol = 1e-4, kRelTol = 1e-5, kGapTol = 1e-3;
  for (const auto& [label, engine] : files) {
    double worst_hidden = 0, worst_kv = 0, worst_embed = 0, worst_logit = 0, worst_state = 0, logit_scale = 0, state_scale = 0;
    double perturbed_logit = std::numeric_limits<double>::infinity();
    int argmax_checked = 0, own_tokens_checked = 0;
    for (const auto& chain : meta["chains"]) {
      const int p = chain["p"].get<int>();
      SessionOptions so;
      so.n_ctx = static_cast<int>(ids.size()) + 8;
      so.n_threads = 2;
      so.kv_cache_type = KvCacheType::kF32;  // transformers' K/V are float32 (the default f16 rounds them by ~1e-3)
      auto session = runtime::Session::Create(*target, so);
      ASSERT_TRUE(session.ok()) << session.message();
      runtime::Session& s = **session;
      // The target's final-normed hidden states, every row of the prompt up to p (golden row t: after
      // token t); row p - 1 is what transformers feeds the drafter's first step.
      std::vector<float> prompt_logits(static_cast<size_t>(p) * V), h(static_cast<size_t>(p) * db);
      ASSERT_TRUE(s.Evaluate(std::vector<int32_t>(ids.begin(), ids.begin() + p), prompt_logits.data(), true, h.data()).ok());
      worst_hidden = std::max(worst_hidden, MaxAbs(h.data(), hidden.data(), h.size()));
      // The K/V the drafter reads: the target's last layer of each type that keeps its own, for the
      // positions its cache holds (golden: [kv_heads, T, head_dim], keys roped).
      for (const auto& [type, kv] : kv_golden) {
        const LayerConfig& l = tc.layers[static_cast<size_t>(kv.layer)];
        std::vector<float> row(static_cast<size_t>(l.n_kv_heads) * std::max(l.head_dim, l.head_dim_v));
        for (int t = s.cache().OldestHeld(kv.layer); t < p; ++t) {
          for (int value = 0; value < 2; ++value) {
            const int hd = value ? l.head_dim_v : l.head_dim;
            if (value) s.cache().LoadValue(kv.layer, t, row.data());
            else s.cache().LoadKey(kv.layer, t, row.data());
            const std::vector<float>& g = value ? kv.v : kv.k;
            for (int head = 0; head < l.n_kv_heads; ++head) {
              const float* want = g.data() + (static_cast<size_t>(head) * ids.size() + static_cast<size_t>(t)) * hd;
              worst_kv = std::max(worst_kv, MaxAbs(row.data() + static_cast<size_t>(head) * hd, want, static_cast<size_t>(hd)));
            }
          }
        }
      }
      auto mtp = runtime::AssistantDrafter::Create(engine, s);
      ASSERT_TRUE(mtp.ok()) << mtp.message();
      const std::vector<float> in = test::ReadF32File(dir + "/draft_in_p" + std::to_string(p) + ".f32");
      const std::vector<float> logits = test::ReadF32File(dir + "/draft_logits_p" + std::to_string(p) + ".f32");
      const std::vector<float> states = test::ReadF32File(dir + "/draft_h_p" + std::to_string(p) + ".f32");
      ASSERT_EQ(in.size(), static_cast<size_t>(n) * 2 * db);
      ASSERT_EQ(logits.size(), static_cast<size_t>(n) * V);
      ASSERT_EQ(states.size(), static_cast<size_t>(n) * db);
      const std::vector<int32_t> tokens = chain["tokens"].get<std::vector<int32_t>>();
      const std::vector<int32_t> argmax = chain["argmax"].get<std::vector<int32_t>>();
      const std::vector<double> gaps = chain["top2_gap"].get<std::vector<double>>();
      AssistantScratch& out = (*mtp)->scratch();
      // Each step fed transformers' own token and state (the second half of its inputs_embeds).
      for (int k = 0; k < n; ++k) {
        const float* hf_in = in.data() + static_cast<size_t>(k) * 2 * db;
        s.DraftStep((*mtp)->assistant(), tokens[static_cast<size_t>(k)], hf_in + db, out);
        worst_embed = std::max(worst_embed, MaxAbs(out.input.data(), hf_in, static_cast<size_t>(db)));
        worst_logit = std::max(worst_logit, MaxAbs(out.logits.data(), logits.data() + static_cast<size_t>(k) * V, V, &logit_scale));
        worst_state = std::max(worst_state, MaxAbs(out.state.data(), states.data() + static_cast<size_t>(k) * db, db, &state_scale));
        if (gaps[static_cast<size_t>(k)] > kGapTol) {
          ++argmax_checked;
          EXPECT_EQ(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin(), argmax[static_cast<size_t>(k)])
              << label << " p=" << p << " step " << k;
        }
      }
      // gemlet's own chain: its own hidden row p - 1, then its own drafts and states. The draft
      // tokens are transformers' while every top-2 gap so far is clear of rounding.
      const std::vector<int32_t> own = runtime::DraftFromAssistant(s, **mtp, ids[static_cast<size_t>(p)],
                                                                   h.data() + static_cast<size_t>(p - 1) * db, n);
      for (int k = 0; k < n && gaps[static_cast<size_t>(k)] > kGapTol; ++k, ++own_tokens_checked) {
        EXPECT_EQ(own[static_cast<size_t>(k)], argmax[static_cast<size_t>(k)]) << label << " p=" << p << " own chain step " << k;
      }
      // A control: the first step with its state nudged (one element by 0.5) must miss the golden
      // by far more than the tolerance, or the comparison above would prove nothing.
      std::vector<float> nudged(in.begin() + db, in.begin() + 2 * db);
      nudged[0] += 0.5f;
      s.DraftStep((*mtp)->assistant(), tokens[0], nudged.data(), out);
      perturbed_logit = std::min(perturbed_logit, MaxAbs(out.logits.data(), logits.data(), V));
    }
    std::printf("[ drafter  ] %-34s %-16s hidden %.2g, K/V %.2g, embed %.2g, logits %.2g (of %.2g), state %.2g (of %.2g); "
                "argmax %d steps, own tokens %d; nudged logits %.2g\n",
                GetParam().c_str(), label.c_str(), worst_hidden, worst_kv, worst_embed, worst_logit, logit_scale, worst_state,
                state_scale, argmax_checked, own_tokens_checked, perturbed_logit);
    EXPECT_LT(worst_hidden, kHiddenTol) << label;
    EXPECT_LT(worst_kv, kHiddenTol) << label;
    EXPECT_LT(worst_embed, kHiddenTol) << label;
    EXPECT_LT(worst_logit, kRelTol * logit_scale) << label;
    EXPECT_LT(worst_state, kRelTol * state_scale) << label;
    EXPECT_GT(logit_scale, 1.0) << label;
    EXPECT_GT(perturbed_logit, 100 * kRelTol * logit_scale) << label;
    EXPECT_GE(argmax_checked, 2 * n) << label;
    EXPECT_GE(own_tokens_checked, 2) << label;
  }

  // Generation with the drafter: plain decoding's tokens, greedy.
  const int P = meta["prompt_len"].get<int>();
  auto generate = [&](bool with) {
    SessionOptions so;
    so.n_ctx = 96;
    so.n_threads = 2;
    auto s = runtime::Session::Create(*target, so);
    EXPECT_TRUE(s.ok());
    SamplingOptions sp;
    sp.temperature = 0;
    Sampler sampler(sp, V);
    GenerateOptions o;
    o.max_tokens = 24;
    o.sampling = sp;
    o.max_draft = with ? 4 : 0;
    runtime::GenerationControls c;
    c.stop_at_end_of_turn = false;
    std::unique_ptr<runtime::AssistantDrafter> mtp;
    if (with) {
      auto made = runtime::AssistantDrafter::Create(*drafter, **s);
      EXPECT_TRUE(made.ok());
      mtp = std::move(made).value();
      c.assistant = mtp.get();
    }
    auto r = runtime::Generate(**s, sampler, std::vector<int32_t>(ids.begin(), ids.begin() + P), o, c, {});
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? r->reply : Reply{};
  };
  const Reply plain = generate(false), spec = generate(true);
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_GT(spec.stats.draft_steps, 0);
  // transformers' own assisted generation gave its greedy tokens too.
  if (meta["assisted_generation"].contains("identical")) {
    EXPECT_TRUE(meta["assisted_generation"]["identical"].get<bool>());
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, AssistantGolden, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return n;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AssistantGolden);

}  // namespace
}  // namespace gemlet

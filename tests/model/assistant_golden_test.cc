// Gemma 4's drafter against transformers' Gemma4AssistantForCausalLM: the goldens of
// tools/drafter_reference/drafter_goldens.py (tiny random drafters on three tiny Gemma 4 backbones, made on
// a machine with transformers 5.17), unpacked into tests/data/drafter/. For each: `gemlet convert` of the
// drafter's HF folder, the target's final hidden states, every step of the drafter chains (logits and
// projected state, each step fed HF's own inputs), llama.cpp's conversion of the same folder, and
// generation with the drafter identical to plain decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
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
  // The sliding window transformers' drafter uses: the last W keys (this file's reading; the golden
  // script restated the drafter both ways).
  const auto& restated = meta["chains"][0]["restated_max_abs_diff"];
  ASSERT_TRUE(restated["window_W"].is_number()) << restated.dump();
  EXPECT_LT(restated["window_W"].get<double>(), 1e-4) << restated.dump();

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
  for (const auto& [label, engine] : files) {
    double worst_hidden = 0, worst_logit = 0, worst_state = 0, logit_scale = 0, state_scale = 0;
    for (const auto& chain : meta["chains"]) {
      const int p = chain["p"].get<int>();
      SessionOptions so;
      so.n_ctx = static_cast<int>(ids.size()) + 8;
      so.n_threads = 2;
      auto session = runtime::Session::Create(*target, so);
      ASSERT_TRUE(session.ok()) << session.message();
      runtime::Session& s = **session;
      std::vector<float> h(db);
      ASSERT_TRUE(s.Evaluate(std::vector<int32_t>(ids.begin(), ids.begin() + p), nullptr, false, h.data()).ok());
      worst_hidden = std::max(worst_hidden, MaxAbs(h.data(), hidden.data() + static_cast<size_t>(p - 1) * db, db));
      auto mtp = runtime::AssistantDrafter::Create(engine, s);
      ASSERT_TRUE(mtp.ok()) << mtp.message();
      const std::vector<float> in = test::ReadF32File(dir + "/draft_in_p" + std::to_string(p) + ".f32");
      const std::vector<float> logits = test::ReadF32File(dir + "/draft_logits_p" + std::to_string(p) + ".f32");
      const std::vector<float> states = test::ReadF32File(dir + "/draft_h_p" + std::to_string(p) + ".f32");
      const std::vector<int32_t> tokens = chain["tokens"].get<std::vector<int32_t>>();
      const std::vector<double> gaps = chain["top2_gap"].get<std::vector<double>>();
      for (int k = 0; k < n; ++k) {
        // HF's own state for this step: its second half of inputs_embeds.
        const float* state = in.data() + static_cast<size_t>(k) * 2 * db + db;
        s.DraftStep((*mtp)->assistant(), tokens[static_cast<size_t>(k)], state, (*mtp)->scratch());
        const AssistantScratch& out = (*mtp)->scratch();
        worst_logit = std::max(worst_logit, MaxAbs(out.logits.data(), logits.data() + static_cast<size_t>(k) * V, V, &logit_scale));
        worst_state = std::max(worst_state, MaxAbs(out.state.data(), states.data() + static_cast<size_t>(k) * db, db, &state_scale));
        if (gaps[static_cast<size_t>(k)] > 1e-3) {
          EXPECT_EQ(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin(),
                    chain["argmax"][static_cast<size_t>(k)].get<int>())
              << label << " p=" << p << " step " << k;
        }
      }
    }
    std::printf("[ drafter  ] %-40s %-34s hidden %.2g, logits %.2g (of %.2g), state %.2g (of %.2g)\n", GetParam().c_str(),
                label.c_str(), worst_hidden, worst_logit, logit_scale, worst_state, state_scale);
    EXPECT_LT(worst_hidden, 1e-4) << label;
    EXPECT_LT(worst_logit, 1e-4 * std::max(1.0, logit_scale)) << label;
    EXPECT_LT(worst_state, 1e-4 * std::max(1.0, state_scale)) << label;
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

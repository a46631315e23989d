// Gemma 4's own drafter (--spec mtp) on a tiny Gemma 4 and a drafter for it, both made by `gemlet synth`
// (random weights: drafts are seldom right). It loads, refuses what it cannot draft for, reads the
// target's cache without changing it, and changes no token: generation with it equals plain decoding,
// greedy and sampled. The hidden rows a verification hands it are those of decoding each row alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/family_models.h"
#include "common/test_util.h"
#include "quantize/synth.h"
#include "runtime/drafting.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet {

using namespace gemlet::runtime;
namespace {

// The tiny target and its drafter, made once per process (and removed at its end).
struct Files {
  test::TempDir dir;
  std::string target, drafter, drafter_q8, other_gemma4, gemma3;
};

const Files& Made() {
  static const std::unique_ptr<Files> files = [] {
    auto f = std::make_unique<Files>();
    auto synth = [&](const char* preset, const std::string& name, FileType ftype) {
      SynthOptions o;
      o.preset = preset;
      o.output_path = f->dir.File(name);
      o.ftype = ftype;
      o.seed = 7;
      o.n_threads = 2;
      auto r = WriteSynthModel(o);
      EXPECT_TRUE(r.ok()) << preset << ": " << r.message();
      return o.output_path;
    };
    f->target = synth("tiny-gemma4", "target.gguf", FileType::kAllF32);
    f->drafter = synth("tiny-gemma4-assistant", "drafter.gguf", FileType::kAllF32);
    f->drafter_q8 = synth("tiny-gemma4-assistant", "drafter-q8.gguf", FileType::kQ8_0);
    f->gemma3 = synth("tiny-gemma3", "gemma3.gguf", FileType::kAllF32);
    f->other_gemma4 = family_models::ModelPath("gemma4_e2b_like");  // hidden 64, not 256
    return f;
  }();
  return *files;
}

std::shared_ptr<const runtime::Engine> Load(const std::string& path) {
  auto e = runtime::Engine::Load(path);
  EXPECT_TRUE(e.ok()) << path << ": " << e.message();
  return e.ok() ? e.value() : nullptr;
}

std::unique_ptr<Session> NewSession(const std::shared_ptr<const runtime::Engine>& engine, int n_ctx = 160) {
  SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 2;
  auto s = Session::Create(engine, o);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p = {2};
  for (int i = 1; i < n; ++i) p.push_back(4 + (i * 53 + 17) % 500);
  return p;
}

TEST(Mtp, TheDrafterLoadsAndRefusesWhatItCannotDraftFor) {
  const Files& f = Made();
  auto target = Load(f.target), drafter = Load(f.drafter);
  ASSERT_TRUE(target && drafter);
  ASSERT_NE(drafter->model().AsAssistant(), nullptr);
  EXPECT_EQ(target->model().AsAssistant(), nullptr);
  EXPECT_EQ(drafter->config().arch, "gemma4-assistant");
  const AssistantSizes& z = drafter->model().AsAssistant()->sizes();
  EXPECT_EQ(z.backbone_width, target->config().d_model);
  EXPECT_EQ(z.n_centroids, 16);
  EXPECT_EQ(z.selected_tokens, 4 * 512 / 16);

  auto session = NewSession(target);
  ASSERT_TRUE(session);
  EXPECT_TRUE(AssistantDrafter::Create(drafter, *session).ok());

  // Another Gemma 4's hidden size, another family, a model that is not a drafter.
  auto other = Load(f.other_gemma4), gemma3 = Load(f.gemma3);
  ASSERT_TRUE(other && gemma3);
  auto wrong_width = AssistantDrafter::Create(drafter, *NewSession(other));
  ASSERT_FALSE(wrong_width.ok());
  EXPECT_EQ(wrong_width.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_width.message().find("hidden size 256"), std::string::npos) << wrong_width.message();
  auto wrong_family = AssistantDrafter::Create(drafter, *NewSession(gemma3));
  ASSERT_FALSE(wrong_family.ok());
  EXPECT_NE(wrong_family.message().find("drafts for Gemma 4 models"), std::string::npos) << wrong_family.message();
  auto not_a_drafter = AssistantDrafter::Create(target, *session);
  ASSERT_FALSE(not_a_drafter.ok());
  EXPECT_NE(not_a_drafter.message().find("not a Gemma 4 drafter"), std::string::npos) << not_a_drafter.message();

  // A drafter runs no session of its own.
  SessionOptions o;
  o.n_ctx = 64;
  auto alone = Session::Create(drafter, o);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.message().find("drafter"), std::string::npos) << alone.message();
}

TEST(Mtp, AVerificationLeavesEachRowTheHiddenStateOfDecodingItAlone) {
  auto target = Load(Made().target);
  ASSERT_TRUE(target);
  const int d = target->config().d_model, V = target->config().n_vocab;
  const std::vector<int32_t> prompt = Prompt(30);
  auto verify = NewSession(target), decode = NewSession(target);
  std::vector<float> h_prompt(d), h_split(d);
  std::vector<float> prompt_logits(V);
  // Hidden states come with the rows' logits (a step that wants none runs no output rows).
  ASSERT_TRUE(verify->Evaluate(prompt, prompt_logits.data(), false, h_prompt.data()).ok());
  // The prompt's last row, from a prompt cut in two: the same bits.
  ASSERT_TRUE(decode->Evaluate(std::vector<int32_t>(prompt.begin(), prompt.end() - 1), nullptr, false).ok());
  std::vector<float> last_logits(V);
  ASSERT_TRUE(decode->Evaluate({prompt.back()}, last_logits.data(), false, h_split.data()).ok());
  EXPECT_EQ(h_prompt, h_split);
  const std::vector<int32_t> step = {11, 12, 13, 14, 15, 16, 17, 18};
  std::vector<float> logits(step.size() * V), rows(step.size() * d), one(d);
  ASSERT_TRUE(verify->EvaluateAsDecode(step, logits.data(), rows.data()).ok());
  float worst = 0;
  std::vector<float> one_logits(V);
  for (size_t i = 0; i < step.size(); ++i) {
    ASSERT_TRUE(decode->Evaluate({step[i]}, one_logits.data(), false, one.data()).ok());
    for (int k = 0; k < d; ++k) worst = std::max(worst, std::abs(rows[i * d + k] - one[k]));
  }
  EXPECT_EQ(worst, 0.0f);
  float sumsq = 0;
  for (float v : one) sumsq += v * v;
  EXPECT_GT(sumsq, 0.0f);
}

TEST(Mtp, DraftingReadsTheCacheAndChangesNothing) {
  const Files& f = Made();
  auto target = Load(f.target), drafter = Load(f.drafter);
  ASSERT_TRUE(target && drafter);
  const int d = target->config().d_model, V = target->config().n_vocab;
  auto session = NewSession(target);
  const std::vector<int32_t> prompt = Prompt(40);  // past the window of 16: the rings have wrapped
  std::vector<float> hidden(d), logits(V);
  ASSERT_TRUE(session->Evaluate(prompt, logits.data(), false, hidden.data()).ok());
  auto mtp = AssistantDrafter::Create(drafter, *session);
  ASSERT_TRUE(mtp.ok()) << mtp.message();
  const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const std::vector<int32_t> a = DraftFromAssistant(*session, **mtp, next, hidden.data(), 5);
  const std::vector<int32_t> b = DraftFromAssistant(*session, **mtp, next, hidden.data(), 5);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a, b);
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < V);
  EXPECT_EQ(session->n_past(), static_cast<int>(prompt.size()));
  // The next evaluation gives what a session that never drafted gives.
  auto plain = NewSession(target);
  std::vector<float> l1(V), l2(V);
  ASSERT_TRUE(plain->Evaluate(prompt, nullptr, false).ok());
  ASSERT_TRUE(plain->Evaluate({next}, l1.data(), false).ok());
  ASSERT_TRUE(session->Evaluate({next}, l2.data(), false).ok());
  EXPECT_EQ(l1, l2);
  // A different state drafts differently (the chain reads it).
  std::vector<float> other(hidden.size());
  for (size_t k = 0; k < other.size(); ++k) other[k] = -hidden[k];
  EXPECT_NE(DraftFromAssistant(*session, **mtp, next, other.data(), 5), a);
}

Reply Generate(const std::shared_ptr<const runtime::Engine>& target, const std::shared_ptr<const runtime::Engine>& drafter,
               float temperature, int max_draft) {
  auto session = NewSession(target);
  SamplingOptions sp;
  sp.temperature = temperature;
  sp.seed = 5;
  sp.repeat_penalty = 1.1f;
  Sampler sampler(sp, target->config().n_vocab);
  GenerateOptions o;
  o.max_tokens = 48;
  o.sampling = sp;
  o.max_draft = max_draft;
  GenerationControls c;
  c.stop_at_end_of_turn = false;
  std::unique_ptr<AssistantDrafter> mtp;
  if (drafter) {
    auto made = AssistantDrafter::Create(drafter, *session);
    EXPECT_TRUE(made.ok()) << made.message();
    if (made.ok()) mtp = std::move(made).value();
    c.assistant = mtp.get();
  }
  auto r = runtime::Generate(*session, sampler, Prompt(24), o, c, {});
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? std::move(r).value().reply : Reply{};
}

TEST(Mtp, DraftsChangeNoTokenGreedyOrSampled) {
  const Files& f = Made();
  auto target = Load(f.target);
  ASSERT_TRUE(target);
  for (const std::string& path : {f.drafter, f.drafter_q8}) {
    auto drafter = Load(path);
    ASSERT_TRUE(drafter);
    for (float temperature : {0.0f, 0.9f}) {
      const Reply plain = Generate(target, nullptr, temperature, 0);
      const Reply spec = Generate(target, drafter, temperature, 7);
      ASSERT_EQ(plain.tokens.size(), 48u);
      EXPECT_EQ(spec.tokens, plain.tokens) << path << " T=" << temperature;
      EXPECT_EQ(plain.stats.draft_steps, 0);
      EXPECT_GT(spec.stats.draft_steps, 0);
      EXPECT_LE(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
      std::printf("[ mtp      ] %s T=%.1f: %d steps, %d drafted, %d kept\n", path.substr(path.rfind('/') + 1).c_str(),
                  temperature, spec.stats.draft_steps, spec.stats.drafted_tokens, spec.stats.accepted_tokens);
    }
  }
}

}  // namespace
}  // namespace gemlet

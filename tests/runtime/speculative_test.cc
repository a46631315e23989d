// Prompt-lookup speculative decoding changes no token: on every family's test model (f32 and
// quantized) and the demo model, a verification forward of up to 8 rows gives each row the logits
// of decoding it alone, bit for bit, and generation with drafts equals generation without, greedy
// and sampled with a seed. On the demo model, copying text, drafts are kept. The same with a draft
// model of the same vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/family_models.h"
#include "runtime/drafting.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet {

using namespace gemlet::runtime;
using namespace gemlet::family_models;
namespace {

TEST(LookupDraft, TakesWhatFollowedTheLatestLongestMatch) {
  // ... 5 6 7 | 9 ... 5 6 7 | 8 ... 5 6 7: the latest earlier "5 6 7" was followed by 8.
  const std::vector<int32_t> c = {1, 5, 6, 7, 9, 9, 2, 5, 6, 7, 8, 4, 4, 5, 6, 7};
  EXPECT_EQ(LookupDraft(c, 3), (std::vector<int32_t>{8, 4, 4}));
  EXPECT_EQ(LookupDraft(c, 1), (std::vector<int32_t>{8}));
  EXPECT_TRUE(LookupDraft(c, 0).empty());
  // No 4-gram, 3-gram or 2-gram match of "... 3": the last token alone, latest occurrence.
  EXPECT_EQ(LookupDraft(std::vector<int32_t>{3, 1, 2, 3, 7, 9, 3}, 2), (std::vector<int32_t>{7, 9}));
  EXPECT_TRUE(LookupDraft(std::vector<int32_t>{1, 2, 3}, 4).empty());  // nothing repeats
  EXPECT_EQ(LookupDraft(std::vector<int32_t>{1, 1}, 4), (std::vector<int32_t>{1}));  // ends at the context's end
}

// A session of 160 tokens on 2 threads: every test's.
std::unique_ptr<Session> NewSessionOf(const std::shared_ptr<const runtime::Engine>& engine) {
  SessionOptions o;
  o.n_ctx = 160;
  o.n_threads = 2;
  auto s = Session::Create(engine, o);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(s).value() : nullptr;
}

class SpeculativeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto engine = runtime::Engine::Load(ModelPath(GetParam()));
    ASSERT_TRUE(engine.ok()) << engine.message();
    engine_ = engine.value();
  }
  std::unique_ptr<Session> NewSession() { return NewSessionOf(engine_); }
  // A prompt that repeats itself, so that lookup finds drafts in it.
  std::vector<int32_t> Prompt() const {
    const int v = std::min(engine_->config().n_vocab, 512);
    std::vector<int32_t> p = {2};
    for (int rep = 0; rep < 3; ++rep) {
      for (int i = 0; i < 9; ++i) p.push_back(4 + (i * 37 + 11) % (v - 4));
    }
    return p;
  }
  Reply Run(const std::vector<int32_t>& prompt, float temperature, int max_draft) {
    auto session = NewSession();
    SamplingOptions sp;
    sp.temperature = temperature;
    sp.seed = 5;
    sp.repeat_penalty = 1.1f;  // the penalty window must follow drafts kept and dropped alike
    Sampler sampler(sp, engine_->config().n_vocab);
    GenerateOptions o;
    o.max_tokens = 48;
    o.sampling = sp;
    o.max_draft = max_draft;
    GenerationControls c;
    c.stop_at_end_of_turn = false;
    c.draft_min_ngram = 1;  // drafts at any repeated token: every model drafts, whatever it generates
    auto r = Generate(*session, sampler, prompt, o, c, {});
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? std::move(r).value().reply : Reply{};
  }
  std::shared_ptr<const runtime::Engine> engine_;
};

TEST_P(SpeculativeTest, AVerificationForwardGivesEachRowItsDecodeLogits) {
  ASSERT_TRUE(engine_);
  const int V = engine_->config().n_vocab;
  const std::vector<int32_t> prompt = Prompt();
  auto verify = NewSession(), decode = NewSession();
  ASSERT_TRUE(verify->Evaluate(prompt, nullptr, false).ok());
  ASSERT_TRUE(decode->Evaluate(prompt, nullptr, false).ok());
  // 1 token + 7 drafts: the largest step Generate verifies.
  const std::vector<int32_t> step(prompt.begin() + 1, prompt.begin() + 9);
  std::vector<float> rows(step.size() * V), one(V);
  ASSERT_TRUE(verify->EvaluateAsDecode(step, rows.data()).ok());
  float worst = 0;
  for (size_t i = 0; i < step.size(); ++i) {
    ASSERT_TRUE(decode->Evaluate({step[i]}, one.data(), false).ok());
    for (int t = 0; t < V; ++t) worst = std::max(worst, std::fabs(rows[i * V + t] - one[t]));
  }
  std::printf("[ spec     ] %-28s max |verify row - decode| logit: %.3g\n", GetParam().c_str(), worst);
  EXPECT_EQ(worst, 0.0f);
}

TEST_P(SpeculativeTest, DraftsChangeNoTokenGreedyOrSampled) {
  ASSERT_TRUE(engine_);
  const std::vector<int32_t> prompt = Prompt();
  for (float temperature : {0.0f, 0.9f}) {
    const Reply plain = Run(prompt, temperature, 0);
    const Reply spec = Run(prompt, temperature, 7);
    EXPECT_EQ(spec.tokens, plain.tokens) << "temperature " << temperature;
    EXPECT_EQ(spec.text, plain.text);
    EXPECT_EQ(plain.stats.draft_steps, 0);
    EXPECT_GT(spec.stats.draft_steps, 0) << "the repeating prompt gave no draft";
    EXPECT_LE(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
    std::printf("[ spec     ] %-28s T=%.1f: %d steps, %d drafted, %d kept\n", GetParam().c_str(), temperature,
                spec.stats.draft_steps, spec.stats.drafted_tokens, spec.stats.accepted_tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpeculativeTest, ::testing::Values("gemma1_2b_like_mqa", "gemma2_gqa_softcap", "gemma3_1b_like",
                                                                    "gemma3_4b_like_rope_linear8", "gemma3n_e2b_like",
                                                                    "gemma4_e2b_like", "gemma4_moe_kv_eq_v",
                                                                    "gemma4_unified_12b_like", "gemma3_1b_like_q8_0",
                                                                    "gemma3n_e2b_like_q8_0", "gemma4_e2b_like_q4_0",
                                                                    "gemma4_moe_kv_eq_v_q8_0", "demo_q4_k_m"),
                         [](const auto& info) { return info.param; });

// A draft model of the same vocabulary (the target's quantized copy, or the target itself where
// the family has none here) changes no token either, greedy or sampled; drafting with the target
// itself keeps every greedy draft, which holds only if the draft's cache follows the target's
// history exactly (taken back past the kept drafts, fed what it has not seen).
class DraftModelTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(DraftModelTest, DraftsChangeNoTokenGreedyOrSampled) {
  const auto& [target_name, draft_name] = GetParam();
  auto target = runtime::Engine::Load(ModelPath(target_name));
  ASSERT_TRUE(target.ok()) << target.message();
  auto draft = draft_name == target_name ? target : runtime::Engine::Load(ModelPath(draft_name));
  ASSERT_TRUE(draft.ok()) << draft.message();
  const int v = std::min((*target)->config().n_vocab, 512);
  std::vector<int32_t> prompt = {2};
  for (int i = 0; i < 20; ++i) prompt.push_back(4 + (i * 37 + 11) % (v - 4));
  for (float temperature : {0.0f, 0.9f}) {
    SamplingOptions sp;
    sp.temperature = temperature;
    sp.seed = 7;
    // Sampled with a penalty (whose window must follow kept and dropped drafts alike); greedy
    // without, so that a model drafting for itself proposes exactly the target's choices.
    sp.repeat_penalty = temperature > 0 ? 1.1f : 1.0f;
    GenerateOptions o;
    o.max_tokens = 40;
    o.sampling = sp;
    GenerationControls c;
    c.stop_at_end_of_turn = false;
    auto plain_session = NewSessionOf(*target);
    Sampler plain_sampler(sp, (*target)->config().n_vocab);
    auto plain = Generate(*plain_session, plain_sampler, prompt, o, c, {});
    ASSERT_TRUE(plain.ok()) << plain.message();
    auto spec_session = NewSessionOf(*target), draft_session = NewSessionOf(*draft);
    Sampler spec_sampler(sp, (*target)->config().n_vocab);
    o.max_draft = 7;
    c.draft_session = draft_session.get();
    auto spec = Generate(*spec_session, spec_sampler, prompt, o, c, {});
    ASSERT_TRUE(spec.ok()) << spec.message();
    EXPECT_EQ(spec->reply.tokens, plain->reply.tokens) << "temperature " << temperature;
    EXPECT_EQ(spec_session->history(), plain_session->history());
    const GenerationStats& st = spec->reply.stats;
    EXPECT_GT(st.draft_steps, 0);
    std::printf("[ draft    ] %-24s drafted by %-24s T=%.1f: %d steps, %d drafted, %d kept\n", target_name.c_str(),
                draft_name.c_str(), temperature, st.draft_steps, st.drafted_tokens, st.accepted_tokens);
    if (draft_name == target_name && temperature == 0) {
      EXPECT_EQ(st.accepted_tokens, st.drafted_tokens) << "a model drafting for itself";
    }
    // The draft's cache holds the target's history, up to the last step's drafts (or behind it,
    // where drafting paused after failed drafts).
    const std::vector<int32_t>& held = draft_session->history();
    const std::vector<int32_t>& history = spec_session->history();
    const size_t shared = std::min(held.size(), history.size()) - std::min<size_t>(7, std::min(held.size(), history.size()));
    EXPECT_TRUE(std::equal(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(shared), history.begin()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pairs, DraftModelTest,
    ::testing::Values(std::pair<std::string, std::string>{"gemma1_2b_like_mqa", "gemma1_2b_like_mqa"},
                      std::pair<std::string, std::string>{"gemma2_gqa_softcap", "gemma2_gqa_softcap"},
                      std::pair<std::string, std::string>{"gemma3_1b_like", "gemma3_1b_like_q8_0"},
                      std::pair<std::string, std::string>{"gemma3_4b_like_rope_linear8", "gemma3_4b_like_rope_linear8"},
                      std::pair<std::string, std::string>{"gemma3n_e2b_like", "gemma3n_e2b_like_q8_0"},
                      std::pair<std::string, std::string>{"gemma4_e2b_like", "gemma4_e2b_like_q4_0"},
                      std::pair<std::string, std::string>{"gemma4_moe_kv_eq_v", "gemma4_moe_kv_eq_v_q8_0"},
                      std::pair<std::string, std::string>{"demo_q4_k_m", "demo_q4_k_m"}),
    [](const auto& info) { return info.param.first + "_by_" + info.param.second; });

// Where the model repeats itself, drafts are kept and fewer forwards than tokens are run: the
// Gemma 4 test model in Q4_0 falls into a loop on the repeating prompt (23 of 24 drafts kept here).
TEST(SpeculativeGemma4, KeptDraftsSaveForwards) {
  auto engine = runtime::Engine::Load(ModelPath("gemma4_e2b_like_q4_0"));
  ASSERT_TRUE(engine.ok()) << engine.message();
  SessionOptions so;
  so.n_ctx = 160;
  so.n_threads = 2;
  auto session = Session::Create(*engine, so);
  ASSERT_TRUE(session.ok());
  std::vector<int32_t> prompt = {2};
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 0; i < 9; ++i) prompt.push_back(4 + (i * 37 + 11) % 508);
  }
  SamplingOptions sp;
  sp.temperature = 0;
  Sampler sampler(sp, (*engine)->config().n_vocab);
  GenerateOptions o;
  o.max_tokens = 48;
  o.sampling = sp;
  o.max_draft = 7;
  GenerationControls c;
  c.stop_at_end_of_turn = false;
  auto r = Generate(**session, sampler, prompt, o, c, {});
  ASSERT_TRUE(r.ok()) << r.message();
  const GenerationStats& s = r->reply.stats;
  EXPECT_GT(s.accepted_tokens, s.drafted_tokens / 2);
  // Forwards after the prompt: one per step, one per token decoded without a draft.
  const int plain_steps = static_cast<int>(r->reply.tokens.size()) - 1 - s.accepted_tokens;
  EXPECT_LT(plain_steps, static_cast<int>(r->reply.tokens.size()) - 1);
  // The cache ends as plain decoding leaves it: the same tokens, none of the dropped drafts.
  auto plain_session = Session::Create(*engine, so);
  ASSERT_TRUE(plain_session.ok());
  Sampler plain_sampler(sp, (*engine)->config().n_vocab);
  o.max_draft = 0;
  auto plain = Generate(**plain_session, plain_sampler, prompt, o, c, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->reply.tokens, r->reply.tokens);
  EXPECT_EQ((*plain_session)->history(), (*session)->history());
  EXPECT_EQ((*plain_session)->n_past(), (*session)->n_past());
}

}  // namespace
}  // namespace gemlet

// EvaluateBatch: several sessions stepped in one forward give what each gives stepped alone. Every
// family's test model (f32 as llama.cpp or gemlet converts them, and quantized copies) and the demo
// model: four sessions with different prompts (one past its sliding-window ring, so the ring wraps;
// Gemma 3n/4's KV-shared layers), prefilled together in one mixed step, then decoded step by step,
// then a step mixing a multi-token chunk with single-token ones; against twin sessions that run the
// same tokens through Session::Evaluate one at a time. Then bad requests and a stopped step.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/family_models.h"
#include "common/test_util.h"
#include "convert/convert.h"
#include "quantize/quantize.h"
#include "runtime/batch.h"
#include "runtime/session.h"

namespace gemlet {

using namespace gemlet::runtime;  // Engine, Session, EvaluateBatch: the runtime inside the library
namespace {

using namespace family_models;  // Cases(), ModelPath(): every family's test models

struct SessionSpec {
  int prompt_len;
  int n_ctx;
  DType kv;
  int rollback;  // ring spare room: 0 makes a ring exactly its window, so it wraps soonest
};
// A short prompt, two middle ones, one well past every test model's window + spare (8..16 + 16) so
// its rings wrap; contexts and KV types differ between sessions of one batch.
const std::vector<SessionSpec>& Specs() {
  static const std::vector<SessionSpec> specs = {
      {3, 64, DType::kF16, 16}, {13, 96, DType::kF32, 16}, {45, 96, DType::kF16, 16}, {26, 80, DType::kF32, 0}};
  return specs;
}

std::vector<int32_t> Prompt(int len, int seed, int n_vocab) {
  std::vector<int32_t> p = {2};  // <bos>
  for (int i = 1; i < len; ++i) p.push_back(4 + (i * 37 + seed * 101) % (std::min(n_vocab, 512) - 4));
  return p;
}

class BatchTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto engine = runtime::Engine::Load(ModelPath(GetParam()));
    ASSERT_TRUE(engine.ok()) << engine.message();
    engine_ = engine.value();
    V_ = engine_->config().n_vocab;
  }

  std::unique_ptr<Session> NewSession(const SessionSpec& spec) {
    SessionOptions o;
    o.n_ctx = spec.n_ctx;
    o.n_threads = 2;
    o.kv_cache_type = static_cast<KvCacheType>(spec.kv);  // the same values as DType
    o.rollback_tokens = spec.rollback;
    auto s = Session::Create(engine_, o);
    EXPECT_TRUE(s.ok()) << s.message();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  std::unique_ptr<BatchWorkspace> NewBatchWorkspace(int max_rows, int n_ctx = 96) {
    runtime::BatchOptions o;
    o.max_rows = max_rows;
    o.n_ctx = n_ctx;
    o.n_threads = 2;
    auto ws = BatchWorkspace::Create(engine_, o);
    EXPECT_TRUE(ws.ok()) << ws.message();
    return ws.ok() ? std::move(ws).value() : nullptr;
  }

  // Twin sessions per spec: batched_[i] is stepped through EvaluateBatch, alone_[i] through its own
  // Evaluate.
  void MakeTwins() {
    for (size_t i = 0; i < Specs().size(); ++i) {
      owned_.push_back(NewSession(Specs()[i]));
      batched_.push_back(owned_.back().get());
      owned_.push_back(NewSession(Specs()[i]));
      alone_.push_back(owned_.back().get());
      ASSERT_TRUE(batched_.back() && alone_.back());
      prompts_.push_back(Prompt(Specs()[i].prompt_len, static_cast<int>(i), V_));
    }
    next_.assign(batched_.size(), 0);
  }

  // One step: the batched sessions get their tokens in one EvaluateBatch, their twins one by one.
  // Records the largest logit difference; the argmax must agree (where the twin's top-2 margin
  // exceeds twice the allowed difference: closer calls may flip within it).
  void Step(const std::vector<std::vector<int32_t>>& tokens, BatchWorkspace& ws, const char* what) {
    std::vector<std::span<const int32_t>> spans(tokens.begin(), tokens.end());
    std::vector<float> got(batched_.size() * V_), want(V_);
    const Status s = EvaluateBatch(batched_, spans, ws, got.data());
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    for (size_t i = 0; i < alone_.size(); ++i) {
      ASSERT_TRUE(alone_[i]->Evaluate(tokens[i], want.data(), false).ok());
      Compare(got.data() + i * V_, want.data(), what, i);
      next_[i] = test::ArgMax(want.data(), V_);
    }
  }

  void Compare(const float* got, const float* want, const char* what, size_t session) {
    worst_ = test::Worse(worst_, test::MaxAbsDiff(got, want, V_));
    EXPECT_EQ(test::ArgMax(got, V_), test::ArgMax(want, V_)) << what << ", session " << session;
  }

  std::vector<std::vector<int32_t>> NextTokens() const {
    std::vector<std::vector<int32_t>> tokens;
    for (int32_t id : next_) tokens.push_back({id});
    return tokens;
  }

  // The caches hold the same: positions, tokens, and what the next token sees. (A stopped step's
  // sessions evaluate their history again before the next: they count more tokens evaluated.)
  void ExpectSameCaches(bool same_work = true) {
    std::vector<float> a(V_), b(V_);
    for (size_t i = 0; i < batched_.size(); ++i) {
      EXPECT_EQ(batched_[i]->n_past(), alone_[i]->n_past()) << "session " << i;
      EXPECT_EQ(batched_[i]->history(), alone_[i]->history()) << "session " << i;
      if (same_work) {
        EXPECT_EQ(batched_[i]->tokens_evaluated(), alone_[i]->tokens_evaluated()) << "session " << i;
      }
      ASSERT_TRUE(batched_[i]->Evaluate({next_[i]}, a.data(), false).ok());
      ASSERT_TRUE(alone_[i]->Evaluate({next_[i]}, b.data(), false).ok());
      Compare(a.data(), b.data(), "next token", i);
    }
    // The test models' windows are 8 or 16: the longest prompt's rings have wrapped (the demo's
    // window is longer than these sessions).
    const KvCache& cache = batched_[2]->cache();
    bool wrapped = false;
    for (int l = 0; l < engine_->config().n_layers; ++l) {
      if (cache.spec(l).window > 0 && cache.spec(l).source < 0) wrapped = wrapped || cache.capacity(l) < cache.n_past();
    }
    const int window = engine_->config().sliding_window;
    if (window > 0 && window <= 16) {
      EXPECT_TRUE(wrapped) << "no ring wrapped";
    }
  }

  void Report(const char* test) {
    std::printf("[ batch    ] %-28s %-7s max |batched - alone| logit: %.3g\n", GetParam().c_str(), test, worst_);
    EXPECT_EQ(worst_, 0.0f);
  }

  std::shared_ptr<const runtime::Engine> engine_;
  int V_ = 0;
  float worst_ = 0;
  std::vector<std::unique_ptr<Session>> owned_;
  std::vector<Session*> batched_, alone_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<int32_t> next_;
};

// Sessions at different positions decoding together: every prompt evaluated alone on both twins,
// then one token per session per step. Up to 8 rows run every matmul through the one-token
// kernels, a token at a time over each block of weights read once: bit for bit what decoding it
// alone computes, on every weight type.
TEST_P(BatchTest, DecodeStepsMatchSessionsSteppedAlone) {
  ASSERT_TRUE(engine_);
  MakeTwins();
  auto ws = NewBatchWorkspace(8);
  ASSERT_TRUE(ws);
  std::vector<float> a(V_), b(V_);
  for (size_t i = 0; i < batched_.size(); ++i) {
    ASSERT_TRUE(batched_[i]->Evaluate(prompts_[i], a.data(), false).ok());
    ASSERT_TRUE(alone_[i]->Evaluate(prompts_[i], b.data(), false).ok());
    next_[i] = test::ArgMax(b.data(), V_);
  }
  for (int step = 0; step < 8; ++step) Step(NextTokens(), *ws, "decode");
  ExpectSameCaches();
  Report("decode");
}

// Prefills of different lengths in one step, then decode, then a multi-token chunk beside
// single-token ones (a new message while the others decode). Steps of more than 8 rows take the
// prefill GEMM, the twins' short chunks the decode kernels: bit for bit on every weight type, as
// batch invariance promises (docs/determinism.md).
TEST_P(BatchTest, MixedStepsMatchSessionsSteppedAlone) {
  ASSERT_TRUE(engine_);
  MakeTwins();
  int rows = 0;
  for (const auto& p : prompts_) rows += static_cast<int>(p.size());
  auto ws = NewBatchWorkspace(rows);
  ASSERT_TRUE(ws);
  Step(prompts_, *ws, "prefill");
  for (int step = 0; step < 3; ++step) Step(NextTokens(), *ws, "decode");
  std::vector<std::vector<int32_t>> mixed = NextTokens();
  const int32_t first = next_[1];
  mixed[1] = Prompt(7, 9, V_);
  mixed[1][0] = first;
  Step(mixed, *ws, "mixed");
  for (int step = 0; step < 2; ++step) Step(NextTokens(), *ws, "decode after mixed");
  ExpectSameCaches();
  Report("mixed");
}

INSTANTIATE_TEST_SUITE_P(Models, BatchTest, ::testing::Values("gemma1_2b_like_mqa", "gemma2_gqa_softcap", "gemma3_1b_like",
                                                              "gemma3_4b_like_rope_linear8", "gemma3n_e2b_like",
                                                              "gemma4_e2b_like", "gemma4_moe_kv_eq_v",
                                                              "gemma4_unified_12b_like", "gemma3_1b_like_q8_0",
                                                              "gemma3n_e2b_like_q8_0", "gemma4_e2b_like_q4_0",
                                                              "gemma4_moe_kv_eq_v_q8_0", "demo_q4_k_m"),
                         [](const auto& info) { return info.param; });

// Bad requests: each refused with a message that says what is wrong, before anything runs; the
// sessions then step on exactly as twins that never saw them. Gemma 4's E2B-like model: rings and
// KV-shared layers, f32 weights (exact).
class BatchBadInputTest : public BatchTest {};

TEST_P(BatchBadInputTest, IsRefusedAndChangesNothing) {
  ASSERT_TRUE(engine_);
  MakeTwins();
  std::vector<float> a(V_), b(V_);
  for (size_t i = 0; i < batched_.size(); ++i) {
    ASSERT_TRUE(batched_[i]->Evaluate(prompts_[i], a.data(), false).ok());
    ASSERT_TRUE(alone_[i]->Evaluate(prompts_[i], b.data(), false).ok());
    next_[i] = test::ArgMax(b.data(), V_);
  }
  auto ws = NewBatchWorkspace(8);
  ASSERT_TRUE(ws);
  // A session whose context is nearly full, and one longer than the workspace's.
  SessionSpec full_spec{0, 16, DType::kF16, 16};
  auto full = NewSession(full_spec);
  ASSERT_TRUE(full);
  ASSERT_TRUE(full->Evaluate(Prompt(15, 3, V_), nullptr, false).ok());
  auto longer = NewSession({0, 200, DType::kF16, 16});
  ASSERT_TRUE(longer);
  auto other_engine = runtime::Engine::Load(ModelPath(GetParam()));
  ASSERT_TRUE(other_engine.ok());
  SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  auto stranger = Session::Create(other_engine.value(), o);
  ASSERT_TRUE(stranger.ok());

  const std::vector<int32_t> one = {5}, two = {5, 6}, five = {5, 6, 7, 8, 9}, empty = {}, bad_id = {V_};
  Session* s0 = batched_[0];
  Session* s1 = batched_[1];
  struct Case {
    const char* what;
    std::vector<Session*> sessions;
    std::vector<std::vector<int32_t>> tokens;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"too many rows", {s0, s1}, {five, five}, "10 tokens in one step exceed the workspace's batch of 8"},
      {"the same session twice", {s0, s1, s0}, {one, one, one}, "sessions 0 and 2 are the same session"},
      {"an empty token list", {s0, s1}, {one, empty}, "sequence 1: nothing to evaluate"},
      {"no sessions", {}, {}, "no sessions"},
      {"fewer token lists than sessions", {s0, s1}, {one}, "2 sessions but 1 token lists"},
      {"a token outside the vocabulary", {s0, s1}, {one, bad_id}, "outside the vocabulary"},
      {"a full context", {s0, full.get()}, {one, two}, "sequence 1: context is full"},
      {"a context longer than the workspace's", {s0, longer.get()}, {one, one}, "longer than the workspace's (96)"},
      {"another engine's session", {s0, stranger.value().get()}, {one, one}, "runs another model"},
      {"a null session", {s0, nullptr}, {one, one}, "session 1 is null"},
  };
  for (const Case& c : cases) {
    std::vector<int> n_past;
    for (Session* s : batched_) n_past.push_back(s->n_past());
    const int full_past = full->n_past();
    std::vector<std::span<const int32_t>> spans(c.tokens.begin(), c.tokens.end());
    std::vector<float> logits(std::max<size_t>(1, c.sessions.size()) * V_);
    const Status st = EvaluateBatch(c.sessions, spans, *ws, logits.data());
    EXPECT_FALSE(st.ok()) << c.what;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.what << ": '" << st.message() << "'";
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << c.what << ": one line";
    for (size_t i = 0; i < batched_.size(); ++i) {
      EXPECT_EQ(batched_[i]->n_past(), n_past[i]) << c.what;
      EXPECT_EQ(batched_[i]->history().size(), static_cast<size_t>(n_past[i])) << c.what;
    }
    EXPECT_EQ(full->n_past(), full_past) << c.what;
  }
  // Nothing was computed either: the next steps match the twins bit for bit.
  for (int step = 0; step < 3; ++step) Step(NextTokens(), *ws, "decode after refused requests");
  ExpectSameCaches();
  EXPECT_EQ(worst_, 0.0f);
}

// A stop requested for the step ends it with kCancelled, and no session advances; the step may have
// written ring slots, and the next evaluation refills them: the sessions step on as their twins.
TEST_P(BatchBadInputTest, StoppedStepAdvancesNoSession) {
  ASSERT_TRUE(engine_);
  MakeTwins();
  std::vector<float> a(V_), b(V_);
  for (size_t i = 0; i < batched_.size(); ++i) {
    ASSERT_TRUE(batched_[i]->Evaluate(prompts_[i], a.data(), false).ok());
    ASSERT_TRUE(alone_[i]->Evaluate(prompts_[i], b.data(), false).ok());
    next_[i] = test::ArgMax(b.data(), V_);
  }
  auto ws = NewBatchWorkspace(8);
  ASSERT_TRUE(ws);
  std::vector<int> n_past;
  for (Session* s : batched_) n_past.push_back(s->n_past());
  const std::vector<std::vector<int32_t>> tokens = NextTokens();
  std::vector<std::span<const int32_t>> spans(tokens.begin(), tokens.end());
  std::vector<float> logits(batched_.size() * V_);
  std::atomic<bool> stop{true};
  const Status st = EvaluateBatch(batched_, spans, *ws, logits.data(), &stop);
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.message();
  for (size_t i = 0; i < batched_.size(); ++i) {
    EXPECT_EQ(batched_[i]->n_past(), n_past[i]);
    EXPECT_EQ(batched_[i]->history().size(), static_cast<size_t>(n_past[i]));
  }
  for (int step = 0; step < 3; ++step) Step(NextTokens(), *ws, "decode after a stopped step");
  ExpectSameCaches(/*same_work=*/false);
  EXPECT_EQ(worst_, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Models, BatchBadInputTest, ::testing::Values("gemma4_e2b_like"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gemlet

// Model::ForwardBatch on raw KV caches: several sequences' rows in one forward give each sequence's
// rows of Forward alone (all rows, not only the last), the caches advance as Forward advances them,
// and a bad batch is refused before anything runs. (runtime/batch_test covers sessions, every
// family and the decode kernels.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/decoder_blocks.h"
#include "model/model.h"

namespace gemlet {
namespace {

class ForwardBatchTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto model = LoadModelFile(test::TestdataDir() + "/gguf/" + GetParam() + ".gguf");
    ASSERT_TRUE(model.ok()) << model.message();
    model_ = std::move(model).value();
    V_ = model_->config().n_vocab;
  }
  std::unique_ptr<KvCache> NewCache(int n_ctx = 64) {
    auto c = KvCache::Create(model_->KvLayout(), n_ctx, DType::kF32, 4);
    EXPECT_TRUE(c.ok()) << c.message();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  Workspace NewWorkspace(int max_batch, int n_ctx = 64) const {
    return Workspace(model_->config(), max_batch, n_ctx, 2, model_->ExtraScratchFloats(max_batch));
  }
  static std::vector<int32_t> Tokens(int n, int seed) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(4 + (i * 53 + seed * 17) % 500);
    return t;
  }

  std::unique_ptr<Model> model_;
  int V_ = 0;
};

// Three sequences at different positions (one past its rings' window + spare), every row's logits.
TEST_P(ForwardBatchTest, AllRowsMatchEachSequenceAlone) {
  ASSERT_TRUE(model_);
  KernelContext ctx(2);
  Workspace ws = NewWorkspace(32);
  const std::vector<int> history = {0, 5, 30}, now = {4, 1, 6};
  std::vector<std::unique_ptr<KvCache>> batched, alone;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<float> ignored(static_cast<size_t>(V_));
  for (size_t i = 0; i < history.size(); ++i) {
    batched.push_back(NewCache());
    alone.push_back(NewCache());
    ASSERT_TRUE(batched.back() && alone.back());
    if (history[i] > 0) {
      const std::vector<int32_t> h = Tokens(history[i], 10 + static_cast<int>(i));
      ASSERT_TRUE(model_->Forward(h.data(), history[i], *batched[i], ws, ctx, ignored.data(), false).ok());
      ASSERT_TRUE(model_->Forward(h.data(), history[i], *alone[i], ws, ctx, ignored.data(), false).ok());
    }
    tokens.push_back(Tokens(now[i], static_cast<int>(i)));
  }
  std::vector<SequenceChunk> chunks;
  int rows = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    chunks.push_back({tokens[i].data(), now[i], batched[i].get()});
    rows += now[i];
  }
  std::vector<float> got(static_cast<size_t>(rows) * V_);
  ASSERT_TRUE(model_->ForwardBatch(chunks, ws, ctx, got.data(), /*all_logits=*/true).ok());
  int row = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<float> want(static_cast<size_t>(now[i]) * V_);
    ASSERT_TRUE(model_->Forward(tokens[i].data(), now[i], *alone[i], ws, ctx, want.data(), true).ok());
    // f32 weights: the reference matmul, whose rows do not depend on how many there are.
    EXPECT_EQ(test::MaxAbsDiff(got.data() + static_cast<size_t>(row) * V_, want.data(), want.size()), 0.0f)
        << "sequence " << i;
    EXPECT_EQ(batched[i]->n_past(), history[i] + now[i]);
    EXPECT_EQ(batched[i]->n_past(), alone[i]->n_past());
    row += now[i];
  }
  // And the last rows only, without logits for the rest: [chunks, n_vocab].
  std::vector<float> last(chunks.size() * V_);
  for (size_t i = 0; i < chunks.size(); ++i) chunks[i] = {tokens[i].data(), 1, batched[i].get()};
  ASSERT_TRUE(model_->ForwardBatch(chunks, ws, ctx, last.data()).ok());
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::vector<float> want(static_cast<size_t>(V_));
    ASSERT_TRUE(model_->Forward(tokens[i].data(), 1, *alone[i], ws, ctx, want.data(), false).ok());
    EXPECT_EQ(test::MaxAbsDiff(last.data() + i * V_, want.data(), want.size()), 0.0f) << "sequence " << i;
  }
  // No logits at all: the caches still advance.
  ASSERT_TRUE(model_->ForwardBatch(chunks, ws, ctx, nullptr).ok());
  for (size_t i = 0; i < chunks.size(); ++i) EXPECT_EQ(batched[i]->n_past(), history[i] + now[i] + 2);
}

// A step that wants only each sequence's last row (a prompt) runs the KV-shared tail of Gemma 3n/4
// on those rows alone, and one that wants no logits skips it (NarrowToOutputRows): the last rows'
// logits are those of the whole step, and the caches hold what the whole step leaves, so that the
// next token decodes to the same logits. Sequences at different positions, one past its rings.
TEST_P(ForwardBatchTest, PromptStepsThatDropTheTailsRowsMatchTheWholeStep) {
  ASSERT_TRUE(model_);
  const ModelConfig& config = model_->config();
  const bool shares_kv = config.layers.back().kv_source >= 0;
  // The families with KV sharing must have a tail to drop, or this test would check nothing new.
  EXPECT_EQ(FirstOutputOnlyLayer(config) < config.n_layers, shares_kv);
  KernelContext ctx(2);
  Workspace ws = NewWorkspace(32);
  const std::vector<int> history = {0, 5, 30}, now = {4, 1, 6};
  std::vector<std::unique_ptr<KvCache>> narrowed, whole;
  std::vector<std::vector<int32_t>> tokens;
  for (size_t i = 0; i < history.size(); ++i) {
    narrowed.push_back(NewCache());
    whole.push_back(NewCache());
    ASSERT_TRUE(narrowed.back() && whole.back());
    if (history[i] > 0) {
      // No logits: the narrowed side skips the tail, the whole side computes every row's.
      const std::vector<int32_t> h = Tokens(history[i], 10 + static_cast<int>(i));
      std::vector<float> all(static_cast<size_t>(history[i]) * V_);
      ASSERT_TRUE(model_->Forward(h.data(), history[i], *narrowed[i], ws, ctx, nullptr, false).ok());
      ASSERT_TRUE(model_->Forward(h.data(), history[i], *whole[i], ws, ctx, all.data(), true).ok());
    }
    tokens.push_back(Tokens(now[i], static_cast<int>(i)));
  }
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i < tokens.size(); ++i) chunks.push_back({tokens[i].data(), now[i], narrowed[i].get()});
  std::vector<float> last(chunks.size() * V_);
  ASSERT_TRUE(model_->ForwardBatch(chunks, ws, ctx, last.data()).ok());
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<float> all(static_cast<size_t>(now[i]) * V_);
    ASSERT_TRUE(model_->Forward(tokens[i].data(), now[i], *whole[i], ws, ctx, all.data(), true).ok());
    // f32 weights: the reference matmul, whose rows do not depend on how many there are.
    EXPECT_EQ(test::MaxAbsDiff(last.data() + i * V_, all.data() + static_cast<size_t>(now[i] - 1) * V_, V_), 0.0f)
        << "sequence " << i;
    EXPECT_EQ(narrowed[i]->n_past(), whole[i]->n_past());
  }
  // The caches: one more token each decodes alike.
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<float> a(static_cast<size_t>(V_)), b(static_cast<size_t>(V_));
    const int32_t next = tokens[i][0];
    ASSERT_TRUE(model_->Forward(&next, 1, *narrowed[i], ws, ctx, a.data(), false).ok());
    ASSERT_TRUE(model_->Forward(&next, 1, *whole[i], ws, ctx, b.data(), false).ok());
    EXPECT_EQ(test::MaxAbsDiff(a.data(), b.data(), a.size()), 0.0f) << "sequence " << i;
  }
}

TEST_P(ForwardBatchTest, BadBatchIsRefusedBeforeAnythingRuns) {
  ASSERT_TRUE(model_);
  KernelContext ctx(2);
  Workspace ws = NewWorkspace(8);
  auto a = NewCache(), b = NewCache(), longer = NewCache(65), tiny = NewCache(4);
  ASSERT_TRUE(a && b && longer && tiny);
  const std::vector<int32_t> five = Tokens(5, 1), four = Tokens(4, 2), bad = {V_};
  ASSERT_TRUE(model_->Forward(four.data(), 3, *tiny, ws, ctx, nullptr, false).ok());
  struct Case {
    const char* what;
    std::vector<SequenceChunk> chunks;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"too many rows", {{five.data(), 5, a.get()}, {four.data(), 4, b.get()}}, "9 tokens in one step exceed the workspace's batch of 8"},
      {"the same cache twice", {{five.data(), 1, a.get()}, {four.data(), 1, b.get()}, {four.data(), 1, a.get()}},
       "sequences 0 and 2 share one KV cache"},
      {"an empty chunk", {{five.data(), 1, a.get()}, {four.data(), 0, b.get()}}, "sequence 1: nothing to evaluate"},
      {"no chunks", {}, "no sequences"},
      {"no cache", {{five.data(), 1, a.get()}, {four.data(), 1, nullptr}}, "sequence 1: no KV cache"},
      {"a token outside the vocabulary", {{bad.data(), 1, a.get()}, {four.data(), 1, b.get()}}, "sequence 0: token id"},
      {"a cache longer than the workspace", {{five.data(), 1, a.get()}, {four.data(), 1, longer.get()}},
       "context (65) is longer than the workspace's (64)"},
      {"a full cache", {{five.data(), 1, a.get()}, {four.data(), 2, tiny.get()}}, "sequence 1: context is full"},
  };
  std::vector<float> logits(3 * static_cast<size_t>(V_));
  for (const Case& c : cases) {
    const Status s = model_->ForwardBatch(c.chunks, ws, ctx, logits.data());
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.what << ": '" << s.message() << "'";
    EXPECT_EQ(a->n_past(), 0) << c.what;
    EXPECT_EQ(b->n_past(), 0) << c.what;
    EXPECT_EQ(tiny->n_past(), 3) << c.what;
  }
  // Forward of one sequence takes the same checks (a cache longer than its workspace).
  EXPECT_FALSE(model_->Forward(five.data(), 1, *longer, ws, ctx, logits.data(), false).ok());
  EXPECT_EQ(longer->n_past(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardBatchTest,
                         ::testing::Values("gemma1_2b_like_mqa", "gemma3n_e2b_like", "gemma4_e2b_like", "gemma4_moe_kv_eq_v"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gemlet

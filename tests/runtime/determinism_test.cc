// Same answer every time (#39, docs/determinism.md): on one kernel table, a token's logits are a
// function of the token, its position and the history before it; not of how the prompt is cut
// into chunks, the thread count, a prefix kept in the cache or restored from a saved session, or
// whether it is evaluated as one of speculation's verify rows. Every family's test model (f32 as
// llama.cpp or gemlet converts them, quantized copies, the demo model's Q4_K/Q6_K), every KV cache
// type, prompts past the sliding windows (the rings wrap) and, on the small models, past 256 keys
// (attention takes its softmax over key ranges). Every comparison is bit for bit. Greedy and seeded
// sampling then give the same tokens with any chunking and with speculation on or off. (Several
// sessions in one batched step: batch_test; the server: server/same_answer_test.)
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/family_models.h"
#include "common/test_util.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library
namespace {

using namespace family_models;  // Cases(), ModelPath()

constexpr KvCacheType kKvTypes[] = {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kQ8_0, KvCacheType::kQ4_0};

const char* KvName(KvCacheType t) {
  switch (t) {
    case KvCacheType::kF32: return "f32";
    case KvCacheType::kF16: return "f16";
    case KvCacheType::kQ8_0: return "q8_0";
    default: return "q4_0";
  }
}

class DeterminismTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto engine = runtime::Engine::Load(ModelPath(GetParam()));
    ASSERT_TRUE(engine.ok()) << engine.message();
    engine_ = engine.value();
    V_ = engine_->config().n_vocab;
    // Past every test model's windows; past 256 keys where a token costs little.
    n_prompt_ = GetParam().rfind("demo", 0) == 0 ? 72 : 270;
    prompt_ = {2};
    for (int i = 1; i < n_prompt_; ++i) prompt_.push_back(4 + (i * 37 + i * i * 11) % (std::min(V_, 512) - 4));
  }

  // Null where the model's head sizes do not fit the cache type's blocks (q8_0 and q4_0 need
  // multiples of 32): that combination is refused at creation, not computed.
  std::unique_ptr<Session> NewSession(KvCacheType kv, int threads, int max_batch = 512) const {
    SessionOptions o;
    o.n_ctx = 320;
    o.n_threads = threads;
    o.max_batch = max_batch;
    o.kv_cache_type = kv;
    auto s = Session::Create(engine_, o);
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Every row's logits, the prompt given in chunks of these sizes (each its own Evaluate).
  std::vector<float> RowsInChunks(Session& s, const std::vector<int>& chunks, int from = 0) const {
    std::vector<float> rows(static_cast<size_t>(n_prompt_ - from) * V_);
    int done = from;
    for (int chunk : chunks) {
      const std::vector<int32_t> part(prompt_.begin() + done, prompt_.begin() + done + chunk);
      EXPECT_TRUE(s.Evaluate(part, rows.data() + static_cast<size_t>(done - from) * V_, true).ok());
      done += chunk;
    }
    EXPECT_EQ(done, n_prompt_);
    return rows;
  }

  std::vector<int> RandomChunks(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int> chunks;
    for (int left = n; left > 0;) {
      const int size = std::min<int>(left, 1 + static_cast<int>(rng() % 40));
      chunks.push_back(size);
      left -= size;
    }
    return chunks;
  }

  // The first row (from `first` on) where a and b differ in any bit, -1 when none.
  int FirstDifferentRow(const std::vector<float>& a, const std::vector<float>& b) const {
    if (a.size() != b.size()) return 0;
    for (size_t r = 0; r < a.size() / V_; ++r) {
      if (std::memcmp(&a[r * V_], &b[r * V_], static_cast<size_t>(V_) * sizeof(float)) != 0) return static_cast<int>(r);
    }
    return -1;
  }

  std::shared_ptr<const runtime::Engine> engine_;
  int V_ = 0;
  int n_prompt_ = 0;
  std::vector<int32_t> prompt_;
};

// One token at a time (decode steps) on one thread against the whole prompt in one call, in the
// session's own chunks of 7, and in random chunks of 1-40 on 2 and 3 threads.
TEST_P(DeterminismTest, ChunkingsAndThreadsGiveTheSameLogits) {
  const int n_long = n_prompt_;
  for (KvCacheType kv : kKvTypes) {
    // The long prompt with the default cache type, a shorter one (still past the windows) with the
    // others: one token at a time is the slow reference.
    n_prompt_ = kv == KvCacheType::kF16 ? n_long : std::min(n_long, 48);
    auto one_by_one = NewSession(kv, 1);
    if (!one_by_one) continue;
    const std::vector<float> want = RowsInChunks(*one_by_one, std::vector<int>(n_prompt_, 1));
    struct Variant {
      std::string name;
      int threads, max_batch;
      std::vector<int> chunks;
    };
    const std::vector<Variant> variants = {{"whole prompt", 2, 512, {n_prompt_}},
                                           {"session chunks of 7", 3, 7, {n_prompt_}},
                                           {"random chunks", 2, 512, RandomChunks(n_prompt_, 1)},
                                           {"other random chunks", 3, 512, RandomChunks(n_prompt_, 2)}};
    for (const Variant& v : variants) {
      auto s = NewSession(kv, v.threads, v.max_batch);
      ASSERT_TRUE(s);
      EXPECT_EQ(FirstDifferentRow(RowsInChunks(*s, v.chunks), want), -1) << GetParam() << " " << KvName(kv) << ": " << v.name;
    }
  }
}

// A prefix kept in the cache (Truncate: within the rollback room, and far back where the rings are
// refilled by evaluating again) or restored from a saved session gives the rest of the prompt the
// rows of the prompt evaluated at once; so do speculation's verify rows (EvaluateAsDecode).
TEST_P(DeterminismTest, CacheHitsSavedSessionsAndVerifyRowsGiveTheSameLogits) {
  test::TempDir dir;
  for (KvCacheType kv : {KvCacheType::kF16, KvCacheType::kQ8_0}) {
    auto whole = NewSession(kv, 2);
    if (!whole) continue;
    const std::vector<float> want = RowsInChunks(*whole, {n_prompt_});
    auto rows_from = [&](int k) { return std::vector<float>(want.begin() + static_cast<size_t>(k) * V_, want.end()); };
    for (int keep : {n_prompt_ - 5, n_prompt_ / 3}) {
      ASSERT_TRUE(whole->Truncate(keep).ok());
      EXPECT_EQ(FirstDifferentRow(RowsInChunks(*whole, {n_prompt_ - keep}, keep), rows_from(keep)), -1)
          << GetParam() << " " << KvName(kv) << ": after Truncate(" << keep << ")";
    }
    const int keep = n_prompt_ / 2;
    auto first = NewSession(kv, 2, 16);
    ASSERT_TRUE(first);
    RowsInChunks(*first, {keep, n_prompt_ - keep});
    ASSERT_TRUE(first->Truncate(keep).ok());
    const std::string path = dir.File(std::string("state_") + KvName(kv));
    ASSERT_TRUE(first->SaveState(path, "").ok());
    auto restored = NewSession(kv, 1, 9);
    ASSERT_TRUE(restored && restored->LoadState(path).ok());
    EXPECT_EQ(FirstDifferentRow(RowsInChunks(*restored, {n_prompt_ - keep}, keep), rows_from(keep)), -1)
        << GetParam() << " " << KvName(kv) << ": after a saved session";
    auto verify = NewSession(kv, 2);
    ASSERT_TRUE(verify);
    const int head = n_prompt_ - 6;
    RowsInChunks(*verify, {head, 6});
    ASSERT_TRUE(verify->Truncate(head).ok());
    std::vector<float> verified(static_cast<size_t>(6) * V_);
    ASSERT_TRUE(verify->EvaluateAsDecode({prompt_.begin() + head, prompt_.end()}, verified.data()).ok());
    EXPECT_EQ(FirstDifferentRow(verified, rows_from(head)), -1) << GetParam() << " " << KvName(kv) << ": verify rows";
  }
}

// Greedy and seeded sampling: the same tokens with the prompt in chunks of 1, 5 or all at once, and
// with speculation (prompt lookup) on or off.
TEST_P(DeterminismTest, GreedyAndSeededDecodingGiveTheSameTokens) {
  for (float temperature : {0.0f, 0.9f}) {
    std::vector<int32_t> first;
    for (int max_batch : {512, 5, 1}) {
      for (int max_draft : {0, 4}) {
        auto s = NewSession(KvCacheType::kF16, 2, max_batch);
        ASSERT_TRUE(s);
        GenerateOptions g;
        g.max_tokens = 24;
        g.max_draft = max_draft;
        g.sampling.temperature = temperature;
        g.sampling.seed = 1234;
        Sampler sampler(g.sampling, V_);
        GenerationControls controls;
        controls.stop_at_end_of_turn = false;
        controls.draft_min_ngram = 1;  // drafts on these random prompts too
        auto out = Generate(*s, sampler, prompt_, g, controls, nullptr);
        ASSERT_TRUE(out.ok()) << out.message();
        const std::vector<int32_t>& tokens = out.value().reply.tokens;
        if (first.empty()) {
          first = tokens;
          ASSERT_EQ(first.size(), 24u);
          continue;
        }
        EXPECT_EQ(tokens, first) << GetParam() << " temperature " << temperature << ", chunks of " << max_batch
                                 << ", max_draft " << max_draft;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DeterminismTest,
                         ::testing::Values("gemma1_2b_like_mqa", "gemma2_gqa_softcap", "gemma3_1b_like",
                                           "gemma3_4b_like_rope_linear8", "gemma3n_e2b_like", "gemma4_e2b_like",
                                           "gemma4_moe_kv_eq_v", "gemma4_unified_12b_like", "gemma3_1b_like_q8_0",
                                           "gemma3n_e2b_like_q8_0", "gemma4_e2b_like_q4_0", "gemma4_moe_kv_eq_v_q8_0",
                                           "demo_q4_k_m"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gemlet

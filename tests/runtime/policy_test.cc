// The runtime's policies on their own, without the public facade: fitting a session to a memory
// budget, prefix reuse, draft pairing, and the memory governor's ladder carried out on a
// conversation. (The facade's tests check the same through the public API.)
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/budget.h"
#include "runtime/chat.h"
#include "runtime/drafting.h"
#include "runtime/memory_governor.h"
#include "runtime/prefix_reuse.h"
#include "runtime/session.h"

namespace gemlet::runtime {
namespace {

std::shared_ptr<const Engine> Load(const std::string& path) {
  auto engine = Engine::Load(path);
  EXPECT_TRUE(engine.ok()) << engine.message();
  return engine.ok() ? engine.value() : nullptr;
}

std::shared_ptr<const Engine> Demo() {
  static const std::shared_ptr<const Engine> demo = Load(GEMLET_DEMO_MODEL);
  return demo;
}

std::unique_ptr<Session> NewSession(int n_ctx) {
  SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 2;
  auto s = Session::Create(Demo(), o);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(BudgetTest, KeepsWhatFitsThenKeepsTheContextLongest) {
  ASSERT_TRUE(Demo());
  const Model& model = Demo()->model();
  // The session's own cost (KV and workspace), no process around it.
  const CostOf cost = [&](const SessionOptions& o) { return SessionCostOn(model, o, 0); };
  SessionOptions wanted;
  wanted.n_ctx = 2048;
  wanted.n_threads = 2;
  const uint64_t full = cost(wanted).total();
  std::string note;
  uint64_t floor = 0;
  auto same = FitToBudget(cost, model, full, wanted, &note, &floor);
  ASSERT_TRUE(same.ok()) << same.message();
  EXPECT_EQ(same->n_ctx, 2048);
  EXPECT_EQ(same->kv_cache_type, KvCacheType::kF16);
  EXPECT_GT(floor, 0u);
  EXPECT_LT(floor, full);

  auto smaller = FitToBudget(cost, model, full - 1, wanted, &note, nullptr);
  ASSERT_TRUE(smaller.ok()) << smaller.message();
  EXPECT_LE(cost(smaller.value()).total(), full - 1);
  // Just below: the context stays, the KV precision goes down a step (f16 -> q8_0).
  EXPECT_EQ(smaller->n_ctx, 2048);
  EXPECT_EQ(smaller->kv_cache_type, KvCacheType::kQ8_0);
  EXPECT_EQ(note.rfind("KV q8_0", 0), 0u) << note;
  // Below the least this context costs (the smallest chunk, q4_0): the context goes down too.
  SessionOptions least = wanted;
  least.max_batch = 64;
  least.kv_cache_type = KvCacheType::kQ4_0;
  const uint64_t below_2048 = cost(least).total() - 1;
  auto shorter = FitToBudget(cost, model, below_2048, wanted, &note, nullptr);
  ASSERT_TRUE(shorter.ok()) << shorter.message();
  EXPECT_EQ(shorter->n_ctx, 1024);
  EXPECT_LE(cost(shorter.value()).total(), below_2048);
  EXPECT_EQ(note.rfind("n_ctx 2048 -> 1024", 0), 0u) << note;

  auto at_floor = FitToBudget(cost, model, floor, wanted, nullptr, nullptr);
  ASSERT_TRUE(at_floor.ok()) << at_floor.message();
  EXPECT_EQ(at_floor->n_ctx, 256);
  auto below = FitToBudget(cost, model, floor - 1, wanted, nullptr, nullptr);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(below.message().find("floor"), std::string::npos) << below.message();
}

TEST(BudgetTest, ParsesByteSizes) {
  EXPECT_EQ(ParseByteSize("1048576"), 1048576u);
  EXPECT_EQ(ParseByteSize("512K"), 512u * 1024);
  EXPECT_EQ(ParseByteSize("300MiB"), 300u << 20);
  EXPECT_EQ(ParseByteSize("1.5G"), 3u << 29);
  EXPECT_EQ(ParseByteSize("12 apples"), 0u);
  EXPECT_EQ(ParseByteSize("-1G"), 0u);
  EXPECT_EQ(ParseByteSize(""), 0u);
}

TEST(PrefixReuseTest, KeepsTheSharedPrefixAndAlwaysEvaluatesTheLastToken) {
  auto session = NewSession(64);
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->Evaluate({2, 10, 11, 12}, nullptr, false).ok());
  const std::vector<int32_t> other = {2, 10, 11, 99, 100};
  auto kept = KeepCachedPrefix(*session, other);
  ASSERT_TRUE(kept.ok()) << kept.message();
  EXPECT_EQ(kept.value(), 3u);
  EXPECT_EQ(session->history(), (std::vector<int32_t>{2, 10, 11}));
  // The whole prompt held: its last token is evaluated again, for its logits.
  const std::vector<int32_t> held = {2, 10, 11};
  kept = KeepCachedPrefix(*session, held);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.value(), 2u);
  EXPECT_EQ(session->n_past(), 2);
  // Nothing shared: the cache is emptied.
  const std::vector<int32_t> fresh = {7, 8};
  kept = KeepCachedPrefix(*session, fresh);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.value(), 0u);
  EXPECT_EQ(session->n_past(), 0);
}

TEST(DraftingTest, ADraftModelMustShareTheVocabulary) {
  ASSERT_TRUE(Demo());
  EXPECT_TRUE(CheckDraftVocabulary(*Demo(), *Demo()).ok());
  // The same file loaded twice: compared token by token, and equal.
  auto again = Load(GEMLET_DEMO_MODEL);
  ASSERT_TRUE(again);
  EXPECT_TRUE(CheckDraftVocabulary(*Demo(), *again).ok());
  // A tiny test model's 512 pieces against the demo model's vocabulary.
  auto tiny = Load(std::string(GEMLET_TESTDATA_DIR) + "/gguf/gemma1_2b_like_mqa.gguf");
  ASSERT_TRUE(tiny);
  const Status s = CheckDraftVocabulary(*Demo(), *tiny);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("must share the model's vocabulary"), std::string::npos) << s.message();
}

// Critical pressure on a conversation: the first check gives back scratch and the oldest turns at
// once; the next lowers the KV precision (f16 -> q8_0), and the conversation goes on.
TEST(MemoryGovernorTest, CriticalPressureShedsTurnsThenLowersTheKvPrecision) {
  auto session = NewSession(512);
  ASSERT_TRUE(session);
  SamplingOptions greedy;
  greedy.temperature = 0;
  ChatSession chat(std::move(session), greedy);
  GenerateOptions o;
  o.max_tokens = 8;
  o.sampling = greedy;
  for (const char* text : {"Hello there.", "你好，今天怎么样？", "Tell me a joke.", "再说一个。"}) {
    ASSERT_TRUE(chat.Send(text, o, {}, {}).ok());
  }
  const size_t messages = chat.messages().size();
  PressureLadder ladder;
  const std::vector<MemoryActionEvent> first = ShedMemory(chat, ladder, PressureLevel::kCritical, 0);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].action, MemoryAction::kReleasedScratch);
  EXPECT_EQ(first[1].action, MemoryAction::kDroppedOldTurns);
  EXPECT_TRUE(first[1].critical);
  EXPECT_LT(chat.messages().size(), messages);
  EXPECT_NE(DescribeMemoryAction(first[1]).find("dropped old turns"), std::string::npos);

  const std::vector<MemoryActionEvent> second = ShedMemory(chat, ladder, PressureLevel::kCritical, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].action, MemoryAction::kLoweredKvPrecision);
  EXPECT_EQ(second[0].detail, "KV f16 -> q8_0");
  EXPECT_EQ(chat.session().options().kv_cache_type, KvCacheType::kQ8_0);
  EXPECT_GT(second[0].bytes_released, 0u);
  EXPECT_TRUE(chat.Send("Still there?", o, {}, {}).ok());
}

TEST(MemoryGovernorTest, PsiIsReadUntilItProvesUnreadable) {
  const std::string path = ::testing::TempDir() + "/psi-memory";
  {
    std::ofstream(path) << "some avg10=40.00 avg60=3.10 avg300=0.80 total=123456\n"
                           "full avg10=2.25 avg60=0.90 avg300=0.10 total=4567\n";
  }
  std::atomic<bool> unreadable{false};
  std::string note;
  EXPECT_EQ(PsiPressureLevel(path, &unreadable, &note), PressureLevel::kCritical);
  EXPECT_EQ(PsiPressureLevel("", &unreadable, &note), PressureLevel::kNone);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(PsiPressureLevel(path + ".missing", &unreadable, &note), PressureLevel::kNone);
  EXPECT_TRUE(unreadable.load());
  EXPECT_NE(note.find("memory pressure not watched"), std::string::npos);
  note.clear();
  // Said once, then not read again: not even the readable file.
  EXPECT_EQ(PsiPressureLevel(path, &unreadable, &note), PressureLevel::kNone);
  EXPECT_TRUE(note.empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gemlet::runtime

// Conversations' longer memory through the public API: summaries of the turns dropped to stay
// within the context (level 2), and saving for the background (ConversationOptions::state_path,
// Engine::OnBackground) while idle, from another thread during a turn, and from inside a turn.
#include "gemlet/gemlet.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api_test_util.h"

namespace gemlet {
namespace {

using test::DemoEngine;
using test::Greedy;
using test::WithContext;

// A scratch folder, removed at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char dir[] = "/tmp/gemlet-conv-XXXXXX";
    path = ::mkdtemp(dir) != nullptr ? dir : "";
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

const std::vector<std::string> kQuestions = {"Who are you?", "Tell me a short poem.", "What is the capital of France?",
                                             "Tell me a story.", "What is two plus two?"};

// Sends questions until a turn drops old messages; returns that turn's reply.
Result<Reply> SendUntilADrop(Conversation& c, const std::vector<std::string>& questions) {
  for (int turn = 0; turn < 60; ++turn) {
    Result<Reply> r = c.Send(questions[static_cast<size_t>(turn) % questions.size()], Greedy(40));
    if (!r.ok() || r->stats.dropped_messages > 0) return r;
  }
  return Status::Error("no turn dropped messages");
}

// Without summaries a drop forgets; with them the model's summary of the dropped turns rides on the
// next user turn, is counted in the stats, and rolls: the next drop's summary covers the first.
TEST(ConversationSummaries, DroppedTurnsAreSummarizedAndTheSummaryIsKept) {
  ConversationOptions o = WithContext(320);
  o.system = "You are a helpful assistant.";
  auto plain = Conversation::Create(DemoEngine(), o);
  ASSERT_TRUE(plain.ok());
  auto dropped = SendUntilADrop(**plain, kQuestions);
  ASSERT_TRUE(dropped.ok()) << dropped.message();
  EXPECT_EQ(dropped->stats.summarized_messages, 0);
  EXPECT_EQ((*plain)->summary(), "");

  o.summarize_dropped = true;
  o.summary_max_tokens = 24;
  auto c = Conversation::Create(DemoEngine(), o);
  ASSERT_TRUE(c.ok());
  auto r = SendUntilADrop(**c, kQuestions);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->stats.summarized_messages, r->stats.dropped_messages);
  EXPECT_GT(r->stats.summary_tokens, 0);
  EXPECT_LE(r->stats.summary_tokens, 24);
  EXPECT_EQ(r->stats.reevaluated_tokens, 0) << "the summary is written apart: the kept turns stay shifted";
  const std::string first = (*c)->summary();
  EXPECT_EQ(first.rfind("(A summary of our earlier conversation", 0), 0u) << first;
  EXPECT_LE((*c)->n_past(), (*c)->n_ctx());
  // The summary is context, not the user's words: messages() keeps what the user typed.
  for (const Message& m : (*c)->messages()) EXPECT_EQ(m.content.find("A summary of"), std::string::npos);

  // The next drop summarizes again, over the turn that carried the first summary.
  std::string second;
  for (int turn = 0; turn < 60 && second.empty(); ++turn) {
    auto next = (*c)->Send(kQuestions[static_cast<size_t>(turn) % kQuestions.size()], Greedy(40));
    ASSERT_TRUE(next.ok()) << next.message();
    if (next->stats.summarized_messages > 0) second = (*c)->summary();
  }
  ASSERT_FALSE(second.empty()) << "a second drop should have come";

  // Saved and loaded, the conversation keeps its summary (as JSON and with its KV cache).
  TempDir dir;
  ASSERT_TRUE((*c)->Save(dir.path + "/chat.json").ok());
  ASSERT_TRUE((*c)->SaveState(dir.path + "/chat.gsess").ok());
  auto json = Conversation::Create(DemoEngine(), o);
  ASSERT_TRUE(json.ok());
  ASSERT_TRUE((*json)->Load(dir.path + "/chat.json").ok());
  EXPECT_EQ((*json)->summary(), second);
  auto state = Conversation::Create(DemoEngine(), o);
  ASSERT_TRUE(state.ok());
  ASSERT_TRUE((*state)->LoadState(dir.path + "/chat.gsess").ok());
  EXPECT_EQ((*state)->summary(), second);
  auto after = (*state)->Send("Thank you.", Greedy(8));
  ASSERT_TRUE(after.ok());
  EXPECT_GT(after->stats.cached_tokens, after->stats.prompt_tokens / 2) << "the summary's tokens stayed cached";
  (*state)->Reset();
  EXPECT_EQ((*state)->summary(), "");
}

// Chinese turns get the Chinese preface (the prompt follows the turns' language).
TEST(ConversationSummaries, ChineseTurnsGetAChineseSummary) {
  ConversationOptions o = WithContext(320);
  o.summarize_dropped = true;
  o.summary_max_tokens = 16;
  auto c = Conversation::Create(DemoEngine(), o);
  ASSERT_TRUE(c.ok());
  auto r = SendUntilADrop(**c, {"请背诵《静夜思》。", "你好，你是谁？", "今天天气怎么样？", "给我讲个故事。"});
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_GT(r->stats.summarized_messages, 0);
  EXPECT_EQ((*c)->summary().rfind("（此前对话的摘要", 0), 0u) << (*c)->summary();
  EXPECT_TRUE(test::IsWholeUtf8((*c)->summary()));
}

// Without a system message and with room for a long answer, a turn may drop every earlier turn:
// what stays before it is BOS alone, and the chat goes on.
TEST(ConversationSummaries, EveryEarlierTurnMayGoWithoutASystemMessage) {
  ConversationOptions o = WithContext(256);
  o.summarize_dropped = true;
  o.summary_max_tokens = 64;
  auto c = Conversation::Create(DemoEngine(), o);
  ASSERT_TRUE(c.ok());
  int all_dropped = 0;
  for (int turn = 0; turn < 6; ++turn) {
    const size_t held = (*c)->messages().size();
    auto r = (*c)->Send(kQuestions[static_cast<size_t>(turn) % kQuestions.size()], Greedy(100));
    ASSERT_TRUE(r.ok()) << "turn " << turn << ": " << r.message();
    if (held > 0 && r->stats.dropped_messages == static_cast<int>(held)) ++all_dropped;
  }
  EXPECT_GT(all_dropped, 0);
}

TEST(ConversationSummaries, BadSummaryLengthIsRefused) {
  ConversationOptions o;
  o.summary_max_tokens = 0;
  auto c = Conversation::Create(DemoEngine(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

// An idle conversation with a state path is saved by OnBackground at once, and a conversation
// created on the same path resumes from it with nothing evaluated again.
TEST(ConversationBackground, OnBackgroundSavesAndCreateResumes) {
  TempDir dir;
  const std::string path = dir.path + "/app.gsess";
  ConversationOptions o = WithContext(512);
  o.state_path = path;
  auto engine = DemoEngine();
  std::vector<Message> before;
  std::string want;
  {
    auto c = Conversation::Create(engine, o);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ((*c)->messages().size(), 0u) << "no file yet: a new conversation";
    ASSERT_TRUE((*c)->Send("请背诵《静夜思》。", Greedy(24)).ok());
    EXPECT_FALSE(std::filesystem::exists(path)) << "nothing is written before the app goes to the background";
    engine->OnBackground();
    engine->OnForeground();
    EXPECT_TRUE(std::filesystem::exists(path));
    before = (*c)->messages();
    auto next = (*c)->Send("Who are you?", Greedy(16));  // after the save: not in the file
    ASSERT_TRUE(next.ok());
    want = next->text;
  }
  auto resumed = Conversation::Create(engine, o);
  ASSERT_TRUE(resumed.ok());
  ASSERT_EQ((*resumed)->messages().size(), before.size());
  EXPECT_EQ((*resumed)->messages()[0].content, before[0].content);
  auto got = (*resumed)->Send("Who are you?", Greedy(16));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->text, want) << "the resumed conversation answers as the saved one did";
  EXPECT_GT(got->stats.cached_tokens, 10) << "the earlier turn came from the file, not evaluated again";

  // A damaged file is logged and a new conversation begins (an app must still start).
  { std::FILE* f = std::fopen(path.c_str(), "wb"); std::fputs("nope", f); std::fclose(f); }
  auto fresh = Conversation::Create(engine, o);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->messages().size(), 0u);
}

// OnBackground while a turn runs (from another thread, and from the turn's own stream callback):
// the save waits for the turn to end, so the file holds the whole turn, never half of one.
TEST(ConversationBackground, ASaveDuringATurnWaitsForItsEnd) {
  TempDir dir;
  auto engine = DemoEngine();
  for (bool from_callback : {false, true}) {
    SCOPED_TRACE(from_callback ? "from the callback" : "from another thread");
    const std::string path = dir.path + (from_callback ? "/cb.gsess" : "/thread.gsess");
    ConversationOptions o = WithContext(512);
    o.state_path = path;
    auto c = Conversation::Create(engine, o);
    ASSERT_TRUE(c.ok());
    std::mutex m;
    std::condition_variable cv;
    bool streaming = false, signalled = false;
    std::thread app;
    if (!from_callback) {
      app = std::thread([&] {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return streaming; });
        engine->OnBackground();
        signalled = true;
        cv.notify_all();
      });
    }
    bool saved_mid_turn = false;
    auto r = (*c)->Send("Tell me a story.", Greedy(24), [&](ChunkKind, std::string_view) {
      if (from_callback) {
        if (!signalled) engine->OnBackground();
        signalled = true;
      } else {
        std::unique_lock<std::mutex> lock(m);
        streaming = true;
        cv.notify_all();
        cv.wait(lock, [&] { return signalled; });
      }
      saved_mid_turn = saved_mid_turn || std::filesystem::exists(path);
      return true;
    });
    if (app.joinable()) app.join();
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_TRUE(signalled);
    EXPECT_FALSE(saved_mid_turn);
    ASSERT_TRUE(std::filesystem::exists(path)) << "saved when the turn returned";
    engine->OnForeground();
    auto check = Conversation::Create(engine, WithContext(512));
    ASSERT_TRUE(check.ok());
    ASSERT_TRUE((*check)->LoadState(path).ok());
    ASSERT_EQ((*check)->messages().size(), 2u) << "the whole turn: the question and its answer";
    EXPECT_EQ((*check)->messages()[1].content, r->text);
  }
}

// The memory governor on a PSI file the test writes: moderate pressure gives back scratch, critical
// pressure drops the oldest turns at once (their KV pages go back), and critical pressure again
// lowers the KV precision to q8_0 (half the bytes); each action is an event, a log line and a
// count in the stats, and the chat goes on.
TEST(ConversationPressure, PsiPressureClimbsTheLadder) {
  TempDir dir;
  const std::string psi = dir.path + "/memory";
  auto write_psi = [&](double some, double full) {
    std::ofstream(psi) << "some avg10=" << some << " avg60=0.00 avg300=0.00 total=1\nfull avg10=" << full
                       << " avg60=0.00 avg300=0.00 total=1\n";
  };
  write_psi(0, 0);
  std::vector<MemoryActionEvent> events;
  EngineOptions eo;
  eo.memory_pressure_path = psi;
  eo.on_memory_action = [&](const MemoryActionEvent& e) { events.push_back(e); };
  auto engine = Engine::Load(test::kDemoModel, eo);
  ASSERT_TRUE(engine.ok());
  auto c = Conversation::Create(*engine, WithContext(1024));
  ASSERT_TRUE(c.ok());
  for (int turn = 0; turn < 6; ++turn) ASSERT_TRUE((*c)->Send(kQuestions[static_cast<size_t>(turn) % 5], Greedy(32)).ok());
  EXPECT_TRUE(events.empty()) << "no pressure, no action";
  const size_t messages = (*c)->messages().size();
  const int past = (*c)->n_past();
  const uint64_t kv_bytes = (*c)->memory().kv_cache_bytes;

  write_psi(12, 0);  // moderate
  auto r = (*c)->Send("Who are you?", Greedy(16));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].action, MemoryAction::kReleasedScratch);
  EXPECT_FALSE(events[0].critical);
  EXPECT_GT(events[0].bytes_released, 0u) << "the kernels' scratch of the turns before";

  write_psi(40, 8);  // critical: old turns go, at once
  r = (*c)->Send("Tell me a story.", Greedy(16));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].action, MemoryAction::kDroppedOldTurns);
  EXPECT_TRUE(events[1].critical);
  EXPECT_GT(events[1].bytes_released, 0u) << "the dropped turns' KV pages";
  EXPECT_LT((*c)->messages().size(), messages);
  EXPECT_LT((*c)->n_past(), past);

  r = (*c)->Send("What is two plus two?", Greedy(16));  // still critical: lower precision
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].action, MemoryAction::kLoweredKvPrecision);
  EXPECT_EQ(events[2].detail, "KV f16 -> q8_0");
  EXPECT_LT((*c)->memory().kv_cache_bytes, kv_bytes * 6 / 10);
  EXPECT_FALSE(r->text.empty()) << "the chat goes on in q8_0";
  EXPECT_EQ(r->stats.memory.pressure_actions, 3);
  EXPECT_EQ(r->stats.memory.pressure_released_bytes,
            events[0].bytes_released + events[1].bytes_released + events[2].bytes_released);

  write_psi(0, 0);  // the episode ends; nothing more happens
  ASSERT_TRUE((*c)->Send("Thank you.", Greedy(8)).ok());
  EXPECT_EQ(events.size(), 3u);
}

// The app's warning (iOS didReceiveMemoryWarning: running-critical) acts at once on an idle
// conversation, on the calling thread, with no PSI file at all.
TEST(ConversationPressure, AnAppWarningActsAtOnceOnIdleConversations) {
  std::vector<MemoryActionEvent> events;
  EngineOptions eo;
  eo.memory_pressure_path = "";
  eo.on_memory_action = [&](const MemoryActionEvent& e) { events.push_back(e); };
  auto engine = Engine::Load(test::kDemoModel, eo);
  ASSERT_TRUE(engine.ok());
  auto c = Conversation::Create(*engine, WithContext(1024));
  ASSERT_TRUE(c.ok());
  for (int turn = 0; turn < 6; ++turn) ASSERT_TRUE((*c)->Send(kQuestions[static_cast<size_t>(turn) % 5], Greedy(32)).ok());
  const size_t messages = (*c)->messages().size();
  const uint64_t resident = (*c)->memory().kv_cache_resident_bytes;
  (*engine)->OnMemoryWarning(MemoryPressure::kRunningCritical);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].action, MemoryAction::kReleasedScratch);
  EXPECT_EQ(events[1].action, MemoryAction::kDroppedOldTurns);
  EXPECT_LT((*c)->messages().size(), messages);
  EXPECT_LT((*c)->memory().kv_cache_resident_bytes, resident);
  // The next turn reuses the shifted cache (nothing is evaluated again) and answers.
  auto r = (*c)->Send("Who are you?", Greedy(16));
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->stats.cached_tokens, r->stats.prompt_tokens / 2);
  EXPECT_FALSE(r->text.empty());
  ASSERT_TRUE((*c)->Send("Thank you.", Greedy(8)).ok());
  EXPECT_EQ(events.size(), 2u) << "a warning is acted on once, not at every turn after it";
  // A second warning soon after climbs on: the KV precision.
  (*engine)->OnMemoryWarning(MemoryPressure::kRunningCritical);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].action, MemoryAction::kLoweredKvPrecision);
  ASSERT_TRUE((*c)->Send("Who are you?", Greedy(8)).ok());
  EXPECT_EQ((*c)->memory().pressure_actions, 3);
  // Still pressed: q8_0 goes to q4_0, and the chat still answers.
  const uint64_t q8_bytes = (*c)->memory().kv_cache_bytes;
  (*engine)->OnMemoryWarning(MemoryPressure::kComplete);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].detail, "KV q8_0 -> q4_0");
  EXPECT_LT((*c)->memory().kv_cache_bytes, q8_bytes * 6 / 10);
  auto r4 = (*c)->Send("Tell me a story.", Greedy(12));
  ASSERT_TRUE(r4.ok()) << r4.message();
  EXPECT_FALSE(r4->text.empty());
}

}  // namespace
}  // namespace gemlet

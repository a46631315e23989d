// The C API (include/gemlet/gemlet.h) on the bundled demo model: status codes and the per-thread
// last error, option structs that grow (struct_size), streaming with user data and a stop by the
// callback's return value, whole UTF-8 pieces, cancel from another thread, platform signals.
#include "gemlet/gemlet.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api_test_util.h"

namespace {

using gemlet::test::kDemoModel;

struct Engine {
  gemlet_engine* e = nullptr;
  Engine() { EXPECT_EQ(gemlet_engine_load(kDemoModel, nullptr, &e), GEMLET_OK) << gemlet_last_error(); }
  ~Engine() { gemlet_engine_free(e); }
};

struct Collected {
  std::string text;
  std::vector<std::string> pieces;
  int stop_after = -1;  // return false on this call
};

bool Collect(gemlet_chunk_kind kind, const char* text, size_t len, void* user_data) {
  auto* c = static_cast<Collected*>(user_data);
  EXPECT_EQ(kind, GEMLET_CHUNK_TEXT);
  EXPECT_EQ(std::strlen(text), len);  // NUL-terminated too
  c->pieces.emplace_back(text, len);
  c->text.append(text, len);
  return c->stop_after < 0 || static_cast<int>(c->pieces.size()) < c->stop_after;
}

gemlet_generate_options Greedy(int max_tokens) {
  gemlet_generate_options g = gemlet_generate_options_default();
  g.max_tokens = max_tokens;
  g.temperature = 0;
  return g;
}

TEST(CApi, VersionAndStatusNames) {
  EXPECT_STREQ(gemlet_version(), "0.1.0");
  EXPECT_STREQ(gemlet_status_name(GEMLET_CANCELLED), "cancelled");
}

TEST(CApi, ErrorsHaveCodesAndAPerThreadMessage) {
  gemlet_engine* e = reinterpret_cast<gemlet_engine*>(0x1);
  EXPECT_EQ(gemlet_engine_load("/nonexistent.gguf", nullptr, &e), GEMLET_ERROR);
  EXPECT_EQ(e, nullptr);
  const std::string message = gemlet_last_error();
  EXPECT_NE(message.find("/nonexistent.gguf"), std::string::npos) << message;
  // Another thread has its own last error.
  std::string other = "unset";
  std::thread([&] { other = gemlet_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(gemlet_engine_load(nullptr, nullptr, &e), GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("path"), std::string::npos);
  EXPECT_EQ(gemlet_session_create(nullptr, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_conversation_send(nullptr, "hi", nullptr, nullptr, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);
  gemlet_session_free(nullptr);  // free accepts NULL
  gemlet_conversation_free(nullptr);
  gemlet_engine_free(nullptr);
}

TEST(CApi, OptionStructsAreCheckedAndMayBeOlder) {
  gemlet_engine_options bad = gemlet_engine_options_default();
  bad.struct_size = sizeof(bad) + 8;  // from a newer header than the library
  gemlet_engine* e = nullptr;
  EXPECT_EQ(gemlet_engine_load(kDemoModel, &bad, &e), GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("struct_size"), std::string::npos);
  bad.struct_size = 0;  // not initialised
  EXPECT_EQ(gemlet_engine_load(kDemoModel, &bad, &e), GEMLET_INVALID_ARGUMENT);
  // An older, shorter struct: the fields it lacks keep their defaults.
  gemlet_engine_options old = gemlet_engine_options_default();
  old.struct_size = offsetof(gemlet_engine_options, cache_dir);
  old.n_threads = 1;
  ASSERT_EQ(gemlet_engine_load(kDemoModel, &old, &e), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_engine_n_vocab(e), 8192);
  EXPECT_STREQ(gemlet_engine_architecture(e), "gemma3");
  gemlet_engine_free(e);
}

// Kernels by name, at load and at run time; the reference and the best kernels agree on a short
// greedy answer of the demo model; a name this CPU does not run is refused, naming those it does.
TEST(CApi, KernelsAreChosenByNameAtLoadAndAtRunTime) {
  gemlet_engine_options o = gemlet_engine_options_default();
  o.kernels = "ref";
  gemlet_engine* e = nullptr;
  ASSERT_EQ(gemlet_engine_load(kDemoModel, &o, &e), GEMLET_OK) << gemlet_last_error();
  EXPECT_STREQ(gemlet_engine_kernels(e), "ref");
  auto answer = [&] {
    gemlet_conversation* c = nullptr;
    EXPECT_EQ(gemlet_conversation_create(e, nullptr, &c), GEMLET_OK);
    const gemlet_generate_options g = Greedy(6);
    EXPECT_EQ(gemlet_conversation_send(c, "Who are you?", &g, nullptr, nullptr, nullptr), GEMLET_OK);
    std::string text = gemlet_conversation_last_reply(c);
    gemlet_conversation_free(c);
    return text;
  };
  const std::string ref = answer();
  ASSERT_EQ(gemlet_engine_set_kernels(e, "auto"), GEMLET_OK);
  EXPECT_STRNE(gemlet_engine_kernels(e), "");
  EXPECT_FALSE(ref.empty());
  EXPECT_EQ(answer(), ref);
  const std::string before = gemlet_engine_kernels(e);
  EXPECT_EQ(gemlet_engine_set_kernels(e, "AVX9000"), GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("ref"), std::string::npos) << gemlet_last_error();
  EXPECT_EQ(before, gemlet_engine_kernels(e));
  EXPECT_EQ(gemlet_engine_set_kernels(e, nullptr), GEMLET_INVALID_ARGUMENT);
  gemlet_engine_free(e);
  o.kernels = "nope";
  EXPECT_EQ(gemlet_engine_load(kDemoModel, &o, &e), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(e, nullptr);
}

TEST(CApi, TokenizeAndDetokenizeRoundTrip) {
  Engine engine;
  const char* text = "床前明月光 hello";
  size_t n = 0;
  EXPECT_EQ(gemlet_tokenize(engine.e, text, std::strlen(text), true, false, nullptr, 0, &n), GEMLET_BUFFER_TOO_SMALL);
  ASSERT_GT(n, 1u);  // the count, to size the buffer
  std::vector<int32_t> ids(n);
  ASSERT_EQ(gemlet_tokenize(engine.e, text, std::strlen(text), true, false, ids.data(), ids.size(), &n), GEMLET_OK);
  EXPECT_EQ(ids[0], 2);  // <bos>
  char* back = nullptr;
  ASSERT_EQ(gemlet_detokenize(engine.e, ids.data() + 1, ids.size() - 1, &back), GEMLET_OK);
  EXPECT_STREQ(back, text);
  gemlet_string_free(back);
}

TEST(CApi, ConversationStreamsChineseInWholeCharacters) {
  Engine engine;
  gemlet_conversation_options co = gemlet_conversation_options_default();
  co.session.n_ctx = 512;
  gemlet_conversation* c = nullptr;
  ASSERT_EQ(gemlet_conversation_create(engine.e, &co, &c), GEMLET_OK) << gemlet_last_error();
  Collected got;
  gemlet_stats stats = gemlet_stats_default();
  EXPECT_EQ(stats.struct_size, sizeof(stats));
  const gemlet_generate_options g = Greedy(40);
  ASSERT_EQ(gemlet_conversation_send(c, "请背诵《静夜思》。", &g, Collect, &got, &stats), GEMLET_OK)
      << gemlet_last_error();
  for (const std::string& p : got.pieces) EXPECT_TRUE(gemlet::test::IsWholeUtf8(p)) << p;
  EXPECT_NE(got.text.find("床前明月光"), std::string::npos) << got.text;
  EXPECT_EQ(got.text, gemlet_conversation_last_reply(c));
  EXPECT_EQ(stats.stop, GEMLET_STOP_END_OF_TURN);
  // Each piece is at least one token; <end_of_turn> ends the answer without text.
  EXPECT_GE(stats.generated_tokens, static_cast<int>(got.pieces.size()) + 1);
  EXPECT_GT(stats.prompt_tokens, 5);
  EXPECT_EQ(stats.cached_tokens, 0);  // the first turn
  EXPECT_GT(stats.kv_cache_bytes, 0u);
  EXPECT_GT(gemlet_conversation_n_past(c), 10);
  // The turns so far, as the conversation holds them.
  ASSERT_EQ(gemlet_conversation_n_messages(c), 2u);
  const char *role = nullptr, *content = nullptr;
  ASSERT_EQ(gemlet_conversation_message(c, 0, &role, &content), GEMLET_OK);
  EXPECT_STREQ(role, "user");
  EXPECT_STREQ(content, "请背诵《静夜思》。");
  ASSERT_EQ(gemlet_conversation_message(c, 1, &role, &content), GEMLET_OK);
  EXPECT_STREQ(role, "assistant");
  EXPECT_EQ(got.text, content);
  EXPECT_EQ(gemlet_conversation_message(c, 2, &role, &content), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_conversation_message(c, 0, nullptr, &content), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_conversation_set_thinking(c, false), GEMLET_OK);  // Gemma 3 has no thought channel: a no-op
  EXPECT_EQ(gemlet_conversation_set_thinking(nullptr, true), GEMLET_INVALID_ARGUMENT);

  // A callback's false stops the answer: GEMLET_CANCELLED, and the conversation goes on.
  Collected stopped;
  stopped.stop_after = 2;
  const gemlet_generate_options long_g = Greedy(100);
  EXPECT_EQ(gemlet_conversation_send(c, "Who are you?", &long_g, Collect, &stopped, nullptr), GEMLET_CANCELLED);
  EXPECT_EQ(stopped.pieces.size(), 2u);
  Collected after;
  EXPECT_EQ(gemlet_conversation_send(c, "你好", &g, Collect, &after, nullptr), GEMLET_OK) << gemlet_last_error();
  EXPECT_FALSE(after.text.empty());
  gemlet_conversation_free(c);
}

TEST(CApi, SessionEvaluateAndCancelFromAnotherThread) {
  Engine engine;
  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 2048;
  so.n_threads = 2;
  gemlet_session* s = nullptr;
  ASSERT_EQ(gemlet_session_create(engine.e, &so, &s), GEMLET_OK) << gemlet_last_error();
  std::vector<int32_t> prompt(2000);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(300 + (i * 37) % 7000);
  prompt[0] = 2;
  gemlet_status status = GEMLET_OK;
  std::chrono::steady_clock::time_point returned;
  std::atomic<bool> started{false};
  std::thread worker([&] {
    started = true;
    status = gemlet_session_evaluate(s, prompt.data(), prompt.size(), nullptr);
    returned = std::chrono::steady_clock::now();
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto at = std::chrono::steady_clock::now();
  gemlet_session_cancel(s);
  worker.join();
  ASSERT_EQ(status, GEMLET_CANCELLED) << "the prefill ended before the cancel";
  const double latency_ms = std::chrono::duration<double, std::milli>(returned - at).count();
  EXPECT_LT(latency_ms, 100.0 * gemlet::test::TimeScale());
  EXPECT_LT(gemlet_session_n_past(s), 2000);
  std::vector<float> logits(8192);
  const int32_t one = 300;
  EXPECT_EQ(gemlet_session_evaluate(s, &one, 1, logits.data()), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_session_truncate(s, 100000), GEMLET_ERROR);
  const int keep = gemlet_session_n_past(s) / 2;  // how much finished depends on the machine's speed
  EXPECT_EQ(gemlet_session_truncate(s, keep), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_session_n_past(s), keep);
  gemlet_session_reset(s);
  // Dropping tokens from the middle: the rest move down, nothing evaluated again; a range past the
  // end is an error.
  ASSERT_EQ(gemlet_session_evaluate(s, prompt.data(), 10, nullptr), GEMLET_OK) << gemlet_last_error();
  int redone = -1;
  EXPECT_EQ(gemlet_session_discard(s, 1, 2, &redone), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(redone, 0);
  EXPECT_EQ(gemlet_session_n_past(s), 8);
  EXPECT_EQ(gemlet_session_discard(s, 1, 100000, nullptr), GEMLET_ERROR);
  EXPECT_EQ(gemlet_session_discard(nullptr, 0, 1, nullptr), GEMLET_INVALID_ARGUMENT);
  // Save and restore: the same next logits, nothing evaluated; a missing file is an error.
  char dir[] = "/tmp/gemlet-capi-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string state = std::string(dir) + "/s.gsess";
  ASSERT_EQ(gemlet_session_save(s, state.c_str()), GEMLET_OK) << gemlet_last_error();
  std::vector<float> want(8192), got(8192);
  ASSERT_EQ(gemlet_session_evaluate(s, &one, 1, want.data()), GEMLET_OK);
  gemlet_session* r = nullptr;
  ASSERT_EQ(gemlet_session_create(engine.e, nullptr, &r), GEMLET_OK);
  ASSERT_EQ(gemlet_session_restore(r, state.c_str()), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_session_n_past(r), 8);
  ASSERT_EQ(gemlet_session_evaluate(r, &one, 1, got.data()), GEMLET_OK);
  EXPECT_EQ(got, want);
  EXPECT_EQ(gemlet_session_restore(r, (std::string(dir) + "/missing").c_str()), GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("missing"), std::string::npos);
  EXPECT_EQ(gemlet_session_save(nullptr, state.c_str()), GEMLET_INVALID_ARGUMENT);
  gemlet_session_free(r);
  std::remove(state.c_str());
  ::rmdir(dir);
  gemlet_session_reset(s);
  EXPECT_EQ(gemlet_session_n_past(s), 0);
  gemlet_session_free(s);
}

TEST(CApi, PlatformSignalsReachTheEngine) {
  Engine engine;
  EXPECT_EQ(gemlet_engine_set_thermal_state(engine.e, GEMLET_THERMAL_CRITICAL), GEMLET_OK);
  EXPECT_EQ(gemlet_engine_thermal_state(engine.e), GEMLET_THERMAL_CRITICAL);
  EXPECT_EQ(gemlet_engine_set_thermal_state(engine.e, static_cast<gemlet_thermal_state>(9)), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_engine_memory_warning(engine.e, GEMLET_MEMORY_RUNNING_LOW), GEMLET_OK);
  EXPECT_EQ(gemlet_engine_memory_level(engine.e), GEMLET_MEMORY_RUNNING_LOW);
  EXPECT_EQ(gemlet_engine_memory_warning(engine.e, static_cast<gemlet_memory_level>(7)), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_engine_on_background(engine.e), GEMLET_OK);
  EXPECT_TRUE(gemlet_engine_in_background(engine.e));
  EXPECT_EQ(gemlet_engine_on_foreground(engine.e), GEMLET_OK);
  EXPECT_FALSE(gemlet_engine_in_background(engine.e));
  EXPECT_EQ(gemlet_engine_set_thread_limit(engine.e, 1), GEMLET_OK);
  EXPECT_EQ(gemlet_engine_set_thread_limit(engine.e, -1), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_engine_set_thermal_state(nullptr, GEMLET_THERMAL_FAIR), GEMLET_INVALID_ARGUMENT);
}

struct Actions {
  std::vector<gemlet_memory_action> seen;
  uint64_t bytes = 0;
};
void OnAction(gemlet_memory_action action, bool critical, uint64_t bytes, const char* detail, void* user_data) {
  auto* a = static_cast<Actions*>(user_data);
  EXPECT_TRUE(critical);
  EXPECT_NE(detail, nullptr);
  a->seen.push_back(action);
  a->bytes += bytes;
}

// An app's memory warning has an idle conversation give back memory at once, the callback hears
// each action with the app's user data, and the turn's stats count them; on_background saves the
// conversation to its state path, from which a new one resumes.
TEST(CApi, MemoryWarningsAndBackgroundSavesReachConversations) {
  Actions actions;
  gemlet_engine_options eo = gemlet_engine_options_default();
  eo.memory_pressure_path = "";
  eo.on_memory_action = OnAction;
  eo.memory_action_user_data = &actions;
  gemlet_engine* e = nullptr;
  ASSERT_EQ(gemlet_engine_load(kDemoModel, &eo, &e), GEMLET_OK) << gemlet_last_error();
  char dir[] = "/tmp/gemlet-capi-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/app.gsess";
  gemlet_conversation_options co = gemlet_conversation_options_default();
  co.session.n_ctx = 1024;
  co.state_path = path.c_str();
  gemlet_conversation* c = nullptr;
  ASSERT_EQ(gemlet_conversation_create(e, &co, &c), GEMLET_OK) << gemlet_last_error();
  const gemlet_generate_options g = Greedy(32);
  for (const char* q : {"Who are you?", "Tell me a story.", "Tell me a short poem.", "What is two plus two?", "Who are you?"}) {
    ASSERT_EQ(gemlet_conversation_send(c, q, &g, nullptr, nullptr, nullptr), GEMLET_OK) << gemlet_last_error();
  }
  ASSERT_EQ(gemlet_engine_memory_warning(e, GEMLET_MEMORY_RUNNING_CRITICAL), GEMLET_OK);
  ASSERT_EQ(actions.seen.size(), 2u);
  EXPECT_EQ(actions.seen[0], GEMLET_MEMORY_RELEASED_SCRATCH);
  EXPECT_EQ(actions.seen[1], GEMLET_MEMORY_DROPPED_OLD_TURNS);
  gemlet_stats st = gemlet_stats_default();
  ASSERT_EQ(gemlet_conversation_send(c, "Thank you.", &g, nullptr, nullptr, &st), GEMLET_OK);
  EXPECT_EQ(st.pressure_actions, 2);
  EXPECT_EQ(st.pressure_released_bytes, actions.bytes);
  const size_t kept = gemlet_conversation_n_messages(c);
  ASSERT_EQ(gemlet_engine_on_background(e), GEMLET_OK);
  ASSERT_EQ(gemlet_engine_on_foreground(e), GEMLET_OK);
  gemlet_conversation_free(c);
  gemlet_conversation* resumed = nullptr;
  ASSERT_EQ(gemlet_conversation_create(e, &co, &resumed), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_conversation_n_messages(resumed), kept);
  gemlet_conversation_free(resumed);
  gemlet_engine_free(e);
  std::remove(path.c_str());
  ::rmdir(dir);
}

void CountLog(int level, const char* message, void* user_data) {
  if (level >= 1 && std::strstr(message, "memory warning")) ++*static_cast<int*>(user_data);
}

TEST(CApi, LogCallbackGetsUserData) {
  Engine engine;
  int count = 0;
  gemlet_set_log_callback(CountLog, &count);
  gemlet_engine_memory_warning(engine.e, GEMLET_MEMORY_COMPLETE);
  gemlet_set_log_callback(nullptr, nullptr);
  gemlet_engine_memory_warning(engine.e, GEMLET_MEMORY_COMPLETE);
  EXPECT_EQ(count, 1);
}

TEST(CApi, TaskPresetsRunOnASessionAndSayWhatIsWrong) {
  Engine engine;
  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 1024;
  gemlet_session* s = nullptr;
  ASSERT_EQ(gemlet_session_create(engine.e, &so, &s), GEMLET_OK) << gemlet_last_error();
  gemlet_task_options t = gemlet_task_options_default();
  t.task = "translate";
  t.to = "en";
  t.glossary = "毛肚\tbeef tripe\n";
  const gemlet_generate_options g = Greedy(8);
  const char* out = nullptr;
  gemlet_stats stats = gemlet_stats_default();
  ASSERT_EQ(gemlet_task_run(s, "今晚吃毛肚。", &t, &g, &out, &stats), GEMLET_OK) << gemlet_last_error();
  ASSERT_NE(out, nullptr);
  EXPECT_GT(stats.generated_tokens, 0);
  EXPECT_LE(stats.generated_tokens, 8);
  // Translate must render 毛肚 as "beef tripe": reported missing exactly when the answer lacks it.
  EXPECT_STREQ(gemlet_task_glossary_missing(s), std::string(out).find("beef tripe") == std::string::npos ? "beef tripe\n" : "");
  t.task = "limerick";
  EXPECT_EQ(gemlet_task_run(s, "x", &t, &g, &out, nullptr), GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("unknown task 'limerick'"), std::string::npos) << gemlet_last_error();
  t.task = "polish";
  EXPECT_EQ(gemlet_task_run(s, "  ", &t, &g, &out, nullptr), GEMLET_ERROR);
  EXPECT_STREQ(out, "");
  EXPECT_STREQ(gemlet_task_glossary_missing(s), "");
  EXPECT_STREQ(gemlet_task_glossary_missing(nullptr), "");
  EXPECT_EQ(gemlet_task_run(s, nullptr, &t, &g, &out, nullptr), GEMLET_INVALID_ARGUMENT);
  EXPECT_STREQ(gemlet_detect_language("這是繁體字"), "zh-Hant");
  EXPECT_STREQ(gemlet_detect_language("plain English"), "en");
  EXPECT_STREQ(gemlet_detect_language(nullptr), "unknown");
  gemlet_session_free(s);
}

}  // namespace

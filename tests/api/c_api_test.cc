// The C API (include/gemlet/gemlet.h) on the bundled demo model: status codes and the per-thread
// last error, option structs that grow (struct_size), streaming with user data and a stop by the
// callback's return value, whole UTF-8 pieces, cancel from another thread, platform signals; and
// what the C API adds for parity with the C++ one, checked against the C++ API itself: generation
// on a session, model info, memory, budget fitting, the chat format, messages in and out, the
// batch decoder and the model-less tokenizer.
#include "gemlet/gemlet.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api_test_util.h"
#include "gemlet/gemlet.hpp"

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

TEST(CApi, TheHostsFootprintCallbackIsTheProcessMemory) {
  static uint64_t footprint = uint64_t{5} << 30;
  gemlet_set_footprint_callback([](void* user) { return *static_cast<uint64_t*>(user); }, &footprint);
  gemlet_process_memory m = gemlet_process_memory_default();
  ASSERT_EQ(gemlet_measure_process_memory(&m), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(m.anon_bytes, footprint);
  footprint = uint64_t{6} << 30;  // read at each call
  ASSERT_EQ(gemlet_measure_process_memory(&m), GEMLET_OK);
  EXPECT_EQ(m.anon_bytes, footprint);
  gemlet_set_footprint_callback(nullptr, nullptr);
  ASSERT_EQ(gemlet_measure_process_memory(&m), GEMLET_OK);
  EXPECT_LT(m.anon_bytes, uint64_t{5} << 30);
}

TEST(CApi, ZeroThreadsMeansEveryHardwareThread) {
  EXPECT_EQ(gemlet_resolve_thread_count(3), 3);
  EXPECT_EQ(gemlet_resolve_thread_count(0), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(gemlet_resolve_thread_count(-2), gemlet_resolve_thread_count(0));
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
  {  // one layer's time: a chunk of the prompt on a session of its own
    gemlet_session* timed = nullptr;
    ASSERT_EQ(gemlet_session_create(engine.e, &so, &timed), GEMLET_OK) << gemlet_last_error();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(gemlet_session_evaluate(timed, prompt.data(), so.max_batch, nullptr), GEMLET_OK) << gemlet_last_error();
    const double chunk_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    gemlet_session_free(timed);
    gemlet_model_info info = gemlet_model_info_default();
    ASSERT_EQ(gemlet_engine_info(engine.e, &info), GEMLET_OK);
    EXPECT_LT(latency_ms, gemlet::test::CancelLatencyBoundMs(chunk_ms / info.n_layers));
  }
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

// ---- parity with the C++ API ----

// A C stream callback that collects the pieces.
bool Append(gemlet_chunk_kind, const char* text, size_t len, void* user_data) {
  static_cast<std::string*>(user_data)->append(text, len);
  return true;
}

std::vector<int32_t> Tokens(const gemlet_reply* r) {
  size_t n = 0;
  const int32_t* t = gemlet_reply_tokens(r, &n);
  return std::vector<int32_t>(t, t + n);
}

TEST(CApiParity, AbiVersionNamesAndChecks) {
  EXPECT_EQ(gemlet_abi_version(), GEMLET_ABI_VERSION);
  EXPECT_STREQ(gemlet_stop_reason_name(GEMLET_STOP_CONTEXT_FULL), gemlet::StopReasonName(gemlet::StopReason::kContextFull));
  EXPECT_STREQ(gemlet_thermal_state_name(GEMLET_THERMAL_SERIOUS), gemlet::ThermalStateName(gemlet::ThermalState::kSerious));
  EXPECT_STREQ(gemlet_memory_level_name(GEMLET_MEMORY_RUNNING_LOW),
               gemlet::MemoryPressureName(gemlet::MemoryPressure::kRunningLow));
  EXPECT_STREQ(gemlet_memory_action_name(GEMLET_MEMORY_LOWERED_KV_PRECISION),
               gemlet::MemoryActionName(gemlet::MemoryAction::kLoweredKvPrecision));
  for (gemlet_kv_type t : {GEMLET_KV_F16, GEMLET_KV_F32, GEMLET_KV_Q8_0, GEMLET_KV_Q4_0}) {
    gemlet_kv_type back = GEMLET_KV_F16;
    ASSERT_TRUE(gemlet_parse_kv_type(gemlet_kv_type_name(t), &back)) << gemlet_kv_type_name(t);
    EXPECT_EQ(back, t);
  }
  EXPECT_STREQ(gemlet_kv_type_name(GEMLET_KV_Q8_0), "q8_0");
  EXPECT_FALSE(gemlet_parse_kv_type("q5_1", nullptr));
  const std::vector<std::string> kernels = gemlet::AvailableKernels();
  ASSERT_EQ(gemlet_n_available_kernels(), kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) EXPECT_EQ(gemlet_available_kernel(i), kernels[i]);
  EXPECT_EQ(gemlet_available_kernel(kernels.size()), nullptr);
  gemlet_kernel_options k = gemlet_kernel_options_default();
  EXPECT_EQ(gemlet_kernel_options_validate(&k), GEMLET_OK);
  k.kernels = "AVX9000";
  EXPECT_EQ(gemlet_kernel_options_validate(&k), GEMLET_INVALID_ARGUMENT);
  gemlet::KernelOptions cxx;
  cxx.kernels = "AVX9000";
  EXPECT_EQ(gemlet_last_error(), gemlet::Validate(cxx));
  gemlet_generate_options g = gemlet_generate_options_default();
  EXPECT_EQ(gemlet_generate_options_validate(&g), GEMLET_OK);
  g.top_p = 2;
  EXPECT_EQ(gemlet_generate_options_validate(&g), GEMLET_INVALID_ARGUMENT);
  gemlet::GenerateOptions cg;
  cg.sampling.top_p = 2;
  EXPECT_EQ(gemlet_last_error(), gemlet::Validate(cg));
  EXPECT_EQ(gemlet_parse_byte_size("1.5G"), gemlet::ParseByteSize("1.5G"));
  EXPECT_EQ(gemlet_parse_byte_size("nonsense"), 0u);
  EXPECT_EQ(gemlet_default_memory_budget(), gemlet::DefaultMemoryBudget());
  gemlet_process_memory pm = gemlet_process_memory_default();
  ASSERT_EQ(gemlet_measure_process_memory(&pm), GEMLET_OK);
  EXPECT_GT(pm.rss_bytes, 0u);
}

TEST(CApiParity, ModelInfoMemoryAndKernelsAreTheCppOnes) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  const gemlet::ModelInfo& want = cxx->info();
  gemlet_model_info info = gemlet_model_info_default();
  ASSERT_EQ(gemlet_engine_info(engine.e, &info), GEMLET_OK);
  EXPECT_EQ(info.struct_size, sizeof(info));
  EXPECT_EQ(info.architecture, want.architecture);
  EXPECT_EQ(info.name, want.name);
  EXPECT_EQ(info.chat_format, want.chat_format);
  EXPECT_EQ(info.file_type, want.file_type);
  EXPECT_EQ(info.n_vocab, want.n_vocab);
  EXPECT_EQ(info.n_ctx_train, want.n_ctx_train);
  EXPECT_EQ(info.n_layers, want.n_layers);
  EXPECT_EQ(info.d_model, want.d_model);
  EXPECT_EQ(info.n_parameters, want.n_parameters);
  EXPECT_EQ(info.file_bytes, want.file_bytes);
  EXPECT_EQ(info.tensor_bytes, want.tensor_bytes);
  EXPECT_EQ(info.decode_weight_bytes, want.decode_weight_bytes);
  // An older caller's struct gets what it holds and keeps its size.
  gemlet_model_info old = gemlet_model_info_default();
  old.struct_size = offsetof(gemlet_model_info, n_layers);
  ASSERT_EQ(gemlet_engine_info(engine.e, &old), GEMLET_OK);
  EXPECT_EQ(old.struct_size, offsetof(gemlet_model_info, n_layers));
  EXPECT_EQ(old.n_vocab, want.n_vocab);
  EXPECT_EQ(old.n_layers, 0);
  EXPECT_EQ(gemlet_engine_info(engine.e, nullptr), GEMLET_INVALID_ARGUMENT);

  EXPECT_EQ(gemlet_engine_bos_token(engine.e), cxx->bos_token());
  EXPECT_TRUE(gemlet_engine_is_end_of_generation(engine.e, 106) == cxx->IsEndOfGeneration(106));
  char* piece = nullptr;
  ASSERT_EQ(gemlet_engine_token_text(engine.e, 300, &piece), GEMLET_OK);
  EXPECT_EQ(piece, cxx->TokenText(300));
  gemlet_string_free(piece);
  for (int64_t pos : {0, 100, 5000}) {
    EXPECT_EQ(gemlet_engine_decode_kv_bytes_at(engine.e, GEMLET_KV_Q8_0, pos),
              cxx->DecodeKvBytesAt(gemlet::KvCacheType::kQ8_0, pos));
  }
  ASSERT_EQ(gemlet_engine_prepare_weights(engine.e, 2), GEMLET_OK);
  gemlet_engine_stop_prepare_weights(engine.e);  // nothing running: forgotten by the next call
  ASSERT_EQ(gemlet_engine_prepare_weights(engine.e, 1), GEMLET_OK);
  gemlet_memory_usage usage = gemlet_memory_usage_default();
  ASSERT_EQ(gemlet_engine_measure_memory(engine.e, &usage), GEMLET_OK);
  EXPECT_GT(usage.rss_bytes, 0u);
  EXPECT_GT(usage.tokenizer_bytes, 0u);

  gemlet_kernel_options k = gemlet_kernel_options_default();
  ASSERT_EQ(gemlet_engine_kernel_options(engine.e, &k), GEMLET_OK);
  EXPECT_STREQ(k.kernels, "auto");
  k.kernels = "ref";
  k.spin_wait = false;
  ASSERT_EQ(gemlet_engine_set_kernel_options(engine.e, &k), GEMLET_OK) << gemlet_last_error();
  gemlet_kernel_options now = gemlet_kernel_options_default();
  ASSERT_EQ(gemlet_engine_kernel_options(engine.e, &now), GEMLET_OK);
  EXPECT_STREQ(now.kernels, "ref");
  EXPECT_FALSE(now.spin_wait);
  EXPECT_STREQ(gemlet_engine_kernels(engine.e), "ref");
  EXPECT_EQ(gemlet_engine_set_thread_limit(engine.e, 3), GEMLET_OK);
  EXPECT_EQ(gemlet_engine_thread_limit(engine.e), 3);
}

// Generate via C gives the tokens and text of the C++ Session::Generate (greedy), streams them, and
// Complete reuses the cached prefix as the C++ one does.
TEST(CApiParity, SessionGenerateAndCompleteAreTheCppOnes) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  const std::vector<int32_t> prompt = cxx->Tokenize("<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n",
                                                    {.add_special = true, .parse_special = true});
  auto cs = gemlet::Session::Create(cxx, {.n_ctx = 512});
  ASSERT_TRUE(cs.ok());
  auto want = (*cs)->Generate(prompt, gemlet::test::Greedy(12));
  ASSERT_TRUE(want.ok()) << want.message();

  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 512;
  gemlet_session* s = nullptr;
  ASSERT_EQ(gemlet_session_create(engine.e, &so, &s), GEMLET_OK);
  EXPECT_EQ(gemlet_session_n_ctx(s), 512);
  EXPECT_EQ(gemlet_session_rollback_room(s), (*cs)->rollback_room());
  const gemlet_generate_options g = Greedy(12);
  std::string streamed;
  gemlet_reply* r = nullptr;
  ASSERT_EQ(gemlet_session_generate(s, prompt.data(), prompt.size(), &g, Append, &streamed, &r), GEMLET_OK)
      << gemlet_last_error();
  EXPECT_EQ(Tokens(r), want->tokens);
  EXPECT_EQ(gemlet_reply_text(r), want->text);
  EXPECT_EQ(streamed, want->text);
  EXPECT_STREQ(gemlet_reply_thinking(r), "");
  EXPECT_EQ(gemlet_reply_n_tool_calls(r), 0u);
  EXPECT_EQ(gemlet_reply_tool_call(r, 0), nullptr);
  gemlet_stats st = gemlet_stats_default();
  ASSERT_EQ(gemlet_reply_stats(r, &st), GEMLET_OK);
  EXPECT_EQ(st.generated_tokens, want->stats.generated_tokens);
  EXPECT_EQ(st.prompt_tokens, want->stats.prompt_tokens);
  EXPECT_EQ(st.stop, static_cast<gemlet_stop_reason>(want->stats.stop));
  EXPECT_EQ(st.kv_cache_resident_bytes, want->stats.memory.kv_cache_resident_bytes);
  gemlet_reply_free(r);
  // The cache holds what the C++ session's holds.
  size_t n = 0;
  const int32_t* held = gemlet_session_tokens(s, &n);
  EXPECT_EQ(std::vector<int32_t>(held, held + n), (*cs)->tokens());

  // Memory: the C++ session with the same options says the same.
  gemlet_memory_stats ms = gemlet_memory_stats_default();
  ASSERT_EQ(gemlet_session_memory(s, &ms), GEMLET_OK);
  EXPECT_EQ(ms.kv_cache_bytes, (*cs)->memory().kv_cache_bytes);
  EXPECT_EQ(ms.kv_cache_resident_bytes, (*cs)->memory().kv_cache_resident_bytes);
  gemlet_memory_plan plan = gemlet_memory_plan_default();
  ASSERT_EQ(gemlet_session_memory_plan(s, &plan), GEMLET_OK);
  const gemlet::MemoryPlan want_plan = (*cs)->memory_plan();
  EXPECT_EQ(plan.kv_cache_bytes, want_plan.kv_cache_bytes);
  EXPECT_EQ(plan.weights_resident_bytes, want_plan.weights_resident_bytes);
  EXPECT_EQ(plan.n_ctx, 512);
  EXPECT_EQ(plan.text, want_plan.text);

  // Complete with the same prompt: the prompt's tokens are reused from the cache.
  auto want2 = (*cs)->Complete(prompt, gemlet::test::Greedy(8));
  ASSERT_TRUE(want2.ok());
  const gemlet_generate_options g8 = Greedy(8);
  ASSERT_EQ(gemlet_session_complete(s, prompt.data(), prompt.size(), &g8, nullptr, nullptr, &r), GEMLET_OK);
  ASSERT_EQ(gemlet_reply_stats(r, &st), GEMLET_OK);
  EXPECT_EQ(st.cached_tokens, want2->stats.cached_tokens);
  EXPECT_GT(st.cached_tokens, 0);
  EXPECT_EQ(Tokens(r), want2->tokens);
  gemlet_reply_free(r);

  // A callback's false: GEMLET_CANCELLED with the partial reply.
  Collected stopped;
  stopped.stop_after = 1;
  gemlet_session_reset(s);
  ASSERT_EQ(gemlet_session_generate(s, prompt.data(), prompt.size(), &g, Collect, &stopped, &r), GEMLET_CANCELLED);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(gemlet_reply_stats(r, &st), GEMLET_OK);
  EXPECT_EQ(st.stop, GEMLET_STOP_CANCELLED);
  EXPECT_EQ(gemlet_reply_text(r), stopped.text);
  gemlet_reply_free(r);
  // Bad options fail before anything runs.
  gemlet_generate_options bad = Greedy(4);
  bad.top_p = 0;
  EXPECT_EQ(gemlet_session_generate(s, prompt.data(), prompt.size(), &bad, nullptr, nullptr, &r), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(gemlet_session_complete(s, nullptr, 0, &g, nullptr, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);
  // An older gemlet_generate_options (before response_format) is still read.
  gemlet_generate_options old = Greedy(2);
  old.struct_size = offsetof(gemlet_generate_options, response_format);
  EXPECT_EQ(gemlet_session_generate(s, prompt.data(), prompt.size(), &old, nullptr, nullptr, nullptr), GEMLET_OK)
      << gemlet_last_error();

  gemlet_engine* own = nullptr;
  ASSERT_EQ(gemlet_session_engine(s, &own), GEMLET_OK);
  EXPECT_EQ(gemlet_engine_n_vocab(own), 8192);
  gemlet_session_free(s);
  gemlet_engine_free(own);  // after the session: either order is fine
}

TEST(CApiParity, BudgetFittingGivesTheCppOptions) {
  // The baseline is the process's dirty memory when asked, which moves by pages between the C and
  // the C++ call (and by more under a sanitizer's allocator): a host reading that holds still
  // makes the two sides' plans comparable to the byte.
  gemlet_set_footprint_callback([](void*) -> uint64_t { return uint64_t{48} << 20; }, nullptr);
  struct ResetFootprint {
    ~ResetFootprint() { gemlet_set_footprint_callback(nullptr, nullptr); }
  } reset_footprint;
  Engine engine;
  // A fresh C++ engine beside the fresh C one: the cost counts what an engine has packed so far,
  // which must be the same on both sides.
  auto loaded = gemlet::Engine::Load(kDemoModel);
  ASSERT_TRUE(loaded.ok());
  const std::shared_ptr<gemlet::Engine> cxx = *loaded;
  gemlet_session_options wanted = gemlet_session_options_default();
  wanted.n_ctx = 4096;
  gemlet_session_cost cost = gemlet_session_cost_default();
  ASSERT_EQ(gemlet_plan_session(engine.e, &wanted, &cost), GEMLET_OK);
  const gemlet::SessionCost want_cost = gemlet::PlanSession(*cxx, {.n_ctx = 4096});
  EXPECT_EQ(cost.kv_bytes, want_cost.kv_bytes);
  EXPECT_EQ(cost.activation_bytes, want_cost.activation_bytes);
  EXPECT_EQ(cost.total_bytes, cost.kv_bytes + cost.activation_bytes + cost.packed_in_memory_bytes + cost.baseline_bytes);
  const gemlet::EngineOptions engine_defaults;
  // Budgets from "fits as asked" down to "not even the floor": the same options, note and floor.
  // Each budget sits a sixteenth of the KV cache from the nearest step (n_ctx halves it).
  for (uint64_t budget : {cost.total_bytes * 4, cost.total_bytes - cost.kv_bytes * 3 / 8,
                          cost.total_bytes - cost.kv_bytes * 13 / 16, uint64_t{1} << 20}) {
    SCOPED_TRACE(budget);
    gemlet_session_options got = gemlet_session_options_default();
    char* note = nullptr;
    uint64_t floor = 0;
    const gemlet_status status = gemlet_fit_to_budget(engine.e, budget, &wanted, &got, &note, &floor);
    std::string want_note;
    uint64_t want_floor = 0;
    auto want = gemlet::FitToBudget(*cxx, budget, {.n_ctx = 4096}, &want_note, &want_floor);
    ASSERT_EQ(status == GEMLET_OK, want.ok()) << gemlet_last_error();
    EXPECT_EQ(floor, want_floor);
    if (!want.ok()) {
      EXPECT_EQ(status, GEMLET_INVALID_ARGUMENT);
      EXPECT_EQ(gemlet_last_error(), want.message());
      EXPECT_EQ(note, nullptr);
      continue;
    }
    EXPECT_EQ(got.n_ctx, want->n_ctx);
    EXPECT_EQ(got.kv_type, want->kv_cache_type == gemlet::KvCacheType::kQ8_0   ? GEMLET_KV_Q8_0
                           : want->kv_cache_type == gemlet::KvCacheType::kQ4_0 ? GEMLET_KV_Q4_0
                           : want->kv_cache_type == gemlet::KvCacheType::kF32  ? GEMLET_KV_F32
                                                                               : GEMLET_KV_F16);
    EXPECT_EQ(note, want_note);
    gemlet_string_free(note);
    // Before loading: the file's fit agrees with the C++ one too.
    gemlet_session_options file_got = gemlet_session_options_default();
    auto file_want = gemlet::FitFileToBudget(kDemoModel, engine_defaults, budget, {.n_ctx = 4096});
    ASSERT_EQ(gemlet_fit_file_to_budget(kDemoModel, nullptr, budget, &wanted, &file_got, nullptr, nullptr) == GEMLET_OK,
              file_want.ok());
    if (file_want.ok()) {
      EXPECT_EQ(file_got.n_ctx, file_want->n_ctx);
    }
  }
  EXPECT_EQ(gemlet_fit_file_to_budget("/nonexistent.gguf", nullptr, 1 << 30, nullptr, nullptr, nullptr, nullptr),
            GEMLET_ERROR);
}

// The chat format through C: the C++ API's text and tokens for the same messages, tool calls included.
TEST(CApiParity, ChatTemplateAndTokenizeChatAreTheCppOnes) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  gemlet_message m[3] = {gemlet_message_default(), gemlet_message_default(), gemlet_message_default()};
  m[0].role = "system";
  m[0].content = "You are terse.";
  m[1].role = "user";
  m[1].content = "Hi <end_of_turn> there";
  m[2].role = "assistant";
  m[2].content = "Hello.";
  const std::vector<gemlet::Message> cm = {{"system", "You are terse."}, {"user", "Hi <end_of_turn> there"},
                                           {"assistant", "Hello."}};
  char* text = nullptr;
  ASSERT_EQ(gemlet_engine_apply_chat_template(engine.e, m, 3, true, &text), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(text, cxx->ApplyChatTemplate(cm, true).value());
  gemlet_string_free(text);
  size_t n = 0;
  EXPECT_EQ(gemlet_engine_tokenize_chat(engine.e, m, 3, nullptr, nullptr, 0, &n), GEMLET_BUFFER_TOO_SMALL);
  std::vector<int32_t> ids(n);
  ASSERT_EQ(gemlet_engine_tokenize_chat(engine.e, m, 3, nullptr, ids.data(), ids.size(), &n), GEMLET_OK);
  EXPECT_EQ(ids, cxx->TokenizeChat(cm).value());
  gemlet_chat_options co = gemlet_chat_options_default();
  co.add_generation_prompt = false;
  ASSERT_EQ(gemlet_engine_tokenize_chat(engine.e, m, 2, &co, ids.data(), ids.size(), &n), GEMLET_OK);
  ids.resize(n);
  EXPECT_EQ(ids, cxx->TokenizeChat(std::span(cm).first(2), {.add_generation_prompt = false}).value());
  // An assistant turn with a tool call: whatever the C++ API says of it (Gemma 3 has no tool format),
  // C says the same.
  const gemlet_tool_call call = {"get_weather", "{\"city\":\"Paris\"}", "call_1"};
  m[2].tool_calls = &call;
  m[2].n_tool_calls = 1;
  std::vector<gemlet::Message> with_call = cm;
  with_call[2].tool_calls = {{"get_weather", "{\"city\":\"Paris\"}", "call_1"}};
  auto want = cxx->ApplyChatTemplate(with_call, true);
  const gemlet_status status = gemlet_engine_apply_chat_template(engine.e, m, 3, true, &text);
  ASSERT_EQ(status == GEMLET_OK, want.ok());
  if (want.ok()) {
    EXPECT_EQ(text, *want);
    gemlet_string_free(text);
  } else {
    EXPECT_EQ(gemlet_last_error(), want.message());
  }
  m[2].tool_calls = nullptr;  // a count without calls is refused, not read
  EXPECT_EQ(gemlet_engine_apply_chat_template(engine.e, m, 3, true, &text), GEMLET_INVALID_ARGUMENT);
  // Response formats: a schema the sampler supports passes, a malformed one is refused as in C++.
  gemlet_generate_options g = Greedy(64);
  g.response_format = "{\"type\":\"json_object\"}";
  EXPECT_EQ(gemlet_engine_check_response_format(engine.e, &g, 512), GEMLET_OK) << gemlet_last_error();
  g.response_format = "{\"type\":\"json_schema\"";
  gemlet::GenerateOptions cg;
  cg.max_tokens = 64;
  cg.response_format = g.response_format;
  EXPECT_EQ(gemlet_engine_check_response_format(engine.e, &g, 512), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_last_error(), cxx->CheckResponseFormat(cg, 512).message());
}

// Messages out (tool calls included) and in: what set_messages takes, message_at gives back.
TEST(CApiParity, ConversationMessagesInAndOut) {
  Engine engine;
  gemlet_conversation_options co = gemlet_conversation_options_default();
  co.session.n_ctx = 512;
  gemlet_conversation* c = nullptr;
  ASSERT_EQ(gemlet_conversation_create(engine.e, &co, &c), GEMLET_OK);
  EXPECT_EQ(gemlet_conversation_n_ctx(c), 512);
  gemlet_message m[2] = {gemlet_message_default(), gemlet_message_default()};
  m[0].role = "user";
  m[0].content = "请背诵《静夜思》。";
  m[1].role = "assistant";
  m[1].content = "床前明月光";
  ASSERT_EQ(gemlet_conversation_set_messages(c, m, 2), GEMLET_OK) << gemlet_last_error();
  ASSERT_EQ(gemlet_conversation_n_messages(c), 2u);
  gemlet_message got = gemlet_message_default();
  ASSERT_EQ(gemlet_conversation_message_at(c, 1, &got), GEMLET_OK);
  EXPECT_STREQ(got.role, "assistant");
  EXPECT_STREQ(got.content, "床前明月光");
  EXPECT_EQ(got.n_tool_calls, 0u);
  EXPECT_EQ(gemlet_conversation_message_at(c, 2, &got), GEMLET_INVALID_ARGUMENT);
  // The next send evaluates them: the answer follows the turns set.
  const gemlet_generate_options g = Greedy(8);
  ASSERT_EQ(gemlet_conversation_send(c, "谢谢", &g, nullptr, nullptr, nullptr), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_conversation_n_messages(c), 4u);
  // Another role is refused, and the turns stay as they were.
  m[0].role = "system";
  EXPECT_EQ(gemlet_conversation_set_messages(c, m, 2), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_conversation_n_messages(c), 4u);
  // An older, shorter gemlet_message array (role and content only) is read with its own stride.
  struct OldMessage {
    size_t struct_size;
    const char* role;
    const char* content;
  } old[2] = {{sizeof(OldMessage), "user", "hi"}, {sizeof(OldMessage), "assistant", "hello"}};
  ASSERT_EQ(gemlet_conversation_set_messages(c, reinterpret_cast<const gemlet_message*>(old), 2), GEMLET_OK)
      << gemlet_last_error();
  ASSERT_EQ(gemlet_conversation_n_messages(c), 2u);
  ASSERT_EQ(gemlet_conversation_message_at(c, 1, &got), GEMLET_OK);
  EXPECT_STREQ(got.content, "hello");

  char* summary = nullptr;
  ASSERT_EQ(gemlet_conversation_summary(c, &summary), GEMLET_OK);
  EXPECT_STREQ(summary, "");
  gemlet_string_free(summary);
  EXPECT_EQ(gemlet_conversation_set_summarize_dropped(c, true), GEMLET_OK);
  gemlet_memory_stats ms = gemlet_memory_stats_default();
  ASSERT_EQ(gemlet_conversation_memory(c, &ms), GEMLET_OK);
  EXPECT_GT(ms.kv_cache_bytes, 0u);
  gemlet_memory_plan plan = gemlet_memory_plan_default();
  ASSERT_EQ(gemlet_conversation_memory_plan(c, &plan), GEMLET_OK);
  EXPECT_EQ(plan.n_ctx, 512);
  EXPECT_NE(std::string(plan.text).find("memory plan"), std::string::npos) << plan.text;
  gemlet_conversation_free(c);
}

// Requests stepped together give each one what Session::Complete gives it alone (greedy), and a
// cancel from another thread ends only its own request.
TEST(CApiParity, BatchDecoderMatchesCompleteAndCancels) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  const char* users[2] = {"Who are you?", "请背诵《静夜思》。"};
  std::vector<int32_t> prompts[2];
  std::vector<int32_t> want[2];
  for (int i = 0; i < 2; ++i) {
    prompts[i] = cxx->TokenizeChat(std::vector<gemlet::Message>{{"user", users[i]}}).value();
    auto s = gemlet::Session::Create(cxx, {.n_ctx = 512});
    want[i] = (*s)->Complete(prompts[i], gemlet::test::Greedy(10)).value().tokens;
  }
  gemlet_batch_options bo = gemlet_batch_options_default();
  EXPECT_EQ(bo.max_requests, 8);
  bo.max_requests = 3;
  gemlet_batch_decoder* d = nullptr;
  ASSERT_EQ(gemlet_batch_decoder_create(engine.e, &bo, &d), GEMLET_OK) << gemlet_last_error();
  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 512;
  gemlet_session* s[3] = {};
  for (auto& one : s) ASSERT_EQ(gemlet_session_create(engine.e, &so, &one), GEMLET_OK);
  const gemlet_generate_options g = Greedy(10);
  const gemlet_generate_options long_g = Greedy(400);
  int ids[3] = {};
  std::string streamed[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(gemlet_batch_decoder_submit(d, s[i], prompts[i].data(), prompts[i].size(), &g, Append, &streamed[i], &ids[i]),
              GEMLET_OK) << gemlet_last_error();
  }
  ASSERT_EQ(gemlet_batch_decoder_submit(d, s[2], prompts[0].data(), prompts[0].size(), &long_g, nullptr, nullptr, &ids[2]),
            GEMLET_OK);
  EXPECT_EQ(gemlet_batch_decoder_running(d), 3);
  std::atomic<bool> cancel_now{false};
  std::thread canceller([&] {
    while (!cancel_now) std::this_thread::yield();
    gemlet_batch_decoder_cancel(d, ids[2]);
  });
  std::vector<int32_t> got[3];
  gemlet_stop_reason stop[3] = {};
  int finished = 0, steps = 0;
  while (finished < 3 && steps++ < 1000) {
    size_t n = 0;
    ASSERT_EQ(gemlet_batch_decoder_step(d, &n), GEMLET_OK);
    if (steps == 1) {
      EXPECT_GT(gemlet_batch_decoder_last_step_tokens(d), 0);
    }
    if (steps == 3) cancel_now = true;
    for (size_t k = 0; k < n; ++k) {
      int id = 0;
      gemlet_reply* r = nullptr;
      ASSERT_EQ(gemlet_batch_decoder_finished(d, k, &id, &r), GEMLET_OK) << gemlet_last_error();
      const int which = id == ids[0] ? 0 : id == ids[1] ? 1 : 2;
      got[which] = Tokens(r);
      gemlet_stats st = gemlet_stats_default();
      ASSERT_EQ(gemlet_reply_stats(r, &st), GEMLET_OK);
      stop[which] = st.stop;
      if (which < 2) {
        EXPECT_EQ(streamed[which], gemlet_reply_text(r));
      }
      gemlet_reply_free(r);
      ++finished;
    }
    int bad_id = -1;
    EXPECT_EQ(gemlet_batch_decoder_finished(d, n, &bad_id, nullptr), GEMLET_INVALID_ARGUMENT);
    EXPECT_EQ(bad_id, 0);
  }
  cancel_now = true;
  canceller.join();
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], want[1]);
  EXPECT_EQ(stop[2], GEMLET_STOP_CANCELLED);
  EXPECT_LT(got[2].size(), 400u);
  EXPECT_EQ(gemlet_batch_decoder_running(d), 0);
  gemlet_batch_decoder_free(d);
  for (auto* one : s) gemlet_session_free(one);
  bo.max_requests = 0;
  EXPECT_EQ(gemlet_batch_decoder_create(engine.e, &bo, &d), GEMLET_INVALID_ARGUMENT);
}

TEST(CApiParity, TokenizerWithoutAModel) {
  Engine engine;
  gemlet_tokenizer* t = nullptr;
  EXPECT_EQ(gemlet_tokenizer_open("/nonexistent/tokenizer.json", &t), GEMLET_ERROR);
  EXPECT_EQ(t, nullptr);
  ASSERT_EQ(gemlet_tokenizer_open(kDemoModel, &t), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_tokenizer_vocab_size(t), 8192);
  const std::string text = "床前明月光 hello";
  size_t n = 0;
  std::vector<int32_t> ids(64), want(64);
  ASSERT_EQ(gemlet_tokenizer_encode(t, text.data(), text.size(), true, false, ids.data(), ids.size(), &n), GEMLET_OK);
  ids.resize(n);
  ASSERT_EQ(gemlet_tokenize(engine.e, text.data(), text.size(), true, false, want.data(), want.size(), &n), GEMLET_OK);
  want.resize(n);
  EXPECT_EQ(ids, want);
  char* back = nullptr;
  ASSERT_EQ(gemlet_tokenizer_decode(t, ids.data() + 1, ids.size() - 1, &back), GEMLET_OK);
  EXPECT_EQ(back, text);
  gemlet_string_free(back);
  char* piece = nullptr;
  ASSERT_EQ(gemlet_tokenizer_piece(t, 2, &piece), GEMLET_OK);
  EXPECT_STREQ(piece, "<bos>");
  gemlet_string_free(piece);
  gemlet_tokenizer_free(t);
}

}  // namespace

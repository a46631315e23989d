// The thermal governor through the public API on the demo model: a hot fake skin zone throttles
// Generate (fewer threads, paced steps, shorter prompt chunks, the same tokens), a cool one does
// not, app levels act too, bad zones and limits fail the load; and the simulated device's 10-minute
// run driven through the C API's thermal levels (tests/common/thermal_device.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "common/thermal_device.h"
#include "gemlet/gemlet.h"
#include "gemlet/gemlet.hpp"

namespace gemlet {
namespace {

const char* kModel = GEMLET_DEMO_MODEL;

std::shared_ptr<Engine> Load(const std::string& root, int threads, bool thermal = true) {
  EngineOptions o;
  o.n_threads = threads;
  o.thermal.enabled = thermal;
  o.thermal.sysfs_root = root;
  auto e = Engine::Load(kModel, o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? e.value() : nullptr;
}

GenerateOptions Greedy(int n) {
  GenerateOptions g;
  g.max_tokens = n;
  g.sampling.temperature = 0;
  return g;
}

Reply GenerateOn(const std::shared_ptr<Engine>& engine, const std::string& prompt, int n, SessionOptions so = {}) {
  so.n_ctx = 512;
  auto s = Session::Create(engine, so);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return {};
  const std::vector<Message> chat = {{"user", prompt}};
  auto text = engine->ApplyChatTemplate(chat);
  EXPECT_TRUE(text.ok()) << text.message();
  auto r = (*s)->Generate(engine->Tokenize(text.ok() ? *text : prompt, {.add_special = true, .parse_special = true}),
                          Greedy(n));
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : Reply{};
}

TEST(ThermalApiTest, AHotSkinZoneThrottlesGenerateAndKeepsItsTokens) {
  test::TempDir dir;
  test::FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "x86_pkg_temp", 90);
  sysfs.AddZone(1, "skin-therm", 50);  // 8 °C over the limit
  auto hot = Load(dir.path(), 2);
  ASSERT_TRUE(hot);
  const Reply r = GenerateOn(hot, "Who are you?", 12);
  ASSERT_EQ(r.stats.generated_tokens, 12);
  const GenerationStats::Thermal& th = r.stats.thermal;
  EXPECT_GT(th.throttled_steps, 0);
  EXPECT_EQ(th.min_threads, 1);  // a fraction of 0.15 of 2 threads
  EXPECT_LT(th.min_duty, 0.5);
  EXPECT_GT(th.min_duty, 0);
  EXPECT_GT(th.paced_seconds, 0);
  EXPECT_LT(th.min_prefill_chunk, 512);
  const Engine::ThermalStatus s = hot->thermal_status();
  EXPECT_EQ(s.zone, "skin-therm");
  EXPECT_TRUE(s.has_reading);
  EXPECT_DOUBLE_EQ(s.temperature_c, 50);
  EXPECT_TRUE(s.throttled);
  EXPECT_LT(s.work_fraction, 0.2);
  EXPECT_EQ(s.threads, 1);
  // Throttling slows the answer, it does not change it: the same tokens as one thread unthrottled.
  auto cool = Load(dir.path(), 1, /*thermal=*/false);
  ASSERT_TRUE(cool);
  const Reply ref = GenerateOn(cool, "Who are you?", 12);
  EXPECT_EQ(r.tokens, ref.tokens);
  EXPECT_EQ(ref.stats.thermal.throttled_steps, 0);
}

TEST(ThermalApiTest, ACoolSkinZoneLeavesGenerateAlone) {
  test::TempDir dir;
  test::FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "battery", 31);
  auto engine = Load(dir.path(), 2);
  ASSERT_TRUE(engine);
  const Reply r = GenerateOn(engine, "Who are you?", 8);
  EXPECT_EQ(r.stats.thermal.throttled_steps, 0);
  EXPECT_EQ(r.stats.thermal.paced_seconds, 0);
  const Engine::ThermalStatus s = engine->thermal_status();
  EXPECT_EQ(s.zone, "battery");
  EXPECT_DOUBLE_EQ(s.temperature_c, 31);
  EXPECT_FALSE(s.throttled);
  EXPECT_EQ(s.threads, 2);
  EXPECT_DOUBLE_EQ(s.duty, 1.0);
}

TEST(ThermalApiTest, AHotDeviceEvaluatesALongPromptInShorterChunks) {
  test::TempDir dir;
  test::FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "skin", 50);
  auto engine = Load(dir.path(), 2);
  ASSERT_TRUE(engine);
  std::vector<int> done;
  SessionOptions so;
  so.max_batch = 128;
  so.progress = [&](int d, int total) {
    if (total > 1) done.push_back(d);  // the prompt's chunks, not the decoded tokens
  };
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "The cat sat on the mat. ";
  const Reply r = GenerateOn(engine, prompt, 1, so);
  ASSERT_GT(r.stats.prompt_tokens, 128);
  ASSERT_GE(done.size(), 2u);
  // Chunks of at most 128 * 0.15 (the work fraction at 50 °C) tokens, not 128.
  int prev = 0;
  for (int d : done) {
    EXPECT_LE(d - prev, 20);
    prev = d;
  }
  EXPECT_EQ(done.back(), r.stats.prompt_tokens);
  EXPECT_LE(r.stats.thermal.min_prefill_chunk, 20);
}

TEST(ThermalApiTest, ThrottledChunksRefuseABadRequestBeforeEvaluatingAny) {
  // Chunked by the governor or not, a request Forward would refuse evaluates nothing.
  test::TempDir dir;
  test::FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "skin", 50);
  auto engine = Load(dir.path(), 2);
  ASSERT_TRUE(engine);
  SessionOptions so;
  so.n_ctx = 128;
  auto s = Session::Create(engine, so);
  ASSERT_TRUE(s.ok());
  std::vector<int32_t> tokens(100, 5);
  tokens.back() = engine->info().n_vocab;  // out of range, in the last chunk
  EXPECT_FALSE((*s)->Evaluate(tokens).ok());
  EXPECT_EQ((*s)->n_past(), 0);
  std::vector<int32_t> too_many(200, 5);  // more than the context holds
  EXPECT_FALSE((*s)->Evaluate(too_many).ok());
  EXPECT_EQ((*s)->n_past(), 0);
  tokens.back() = 5;
  EXPECT_TRUE((*s)->Evaluate(tokens).ok());
  EXPECT_EQ((*s)->n_past(), 100);
  EXPECT_TRUE(engine->thermal_status().throttled);
}

TEST(ThermalApiTest, AppLevelsThrottleWithoutAZone) {
  test::TempDir dir;  // no zones: the governor acts on levels only
  auto engine = Load(dir.path(), 2);
  ASSERT_TRUE(engine);
  EXPECT_TRUE(engine->thermal_status().zone.empty());
  EXPECT_EQ(GenerateOn(engine, "Hi", 4).stats.thermal.throttled_steps, 0);
  engine->SetThermalState(ThermalState::kCritical);
  const Reply hot = GenerateOn(engine, "Hi", 4);
  EXPECT_GT(hot.stats.thermal.throttled_steps, 0);
  EXPECT_EQ(hot.stats.thermal.min_threads, 1);       // a quarter of 2 threads: 1 at half duty
  EXPECT_DOUBLE_EQ(hot.stats.thermal.min_duty, 0.5);
  EXPECT_EQ(engine->thermal_status().level, ThermalState::kCritical);
  engine->SetThermalState(ThermalState::kNominal);
  EXPECT_EQ(GenerateOn(engine, "Hi", 4).stats.thermal.throttled_steps, 0);
  EXPECT_FALSE(engine->thermal_status().throttled);

  auto off = Load(dir.path(), 2, /*thermal=*/false);
  off->SetThermalState(ThermalState::kCritical);
  EXPECT_EQ(GenerateOn(off, "Hi", 4).stats.thermal.throttled_steps, 0);
  EXPECT_FALSE(off->thermal_status().enabled);
}

TEST(ThermalApiTest, AnUnknownZoneOrABadLimitFailsTheLoad) {
  test::TempDir dir;
  test::FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "x86_pkg_temp", 60);
  EngineOptions o;
  o.thermal.sysfs_root = dir.path();
  o.thermal.zone = "skin-therm";
  auto e = Engine::Load(kModel, o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.message().find("no thermal zone 'skin-therm'"), std::string::npos) << e.message();
  o.thermal.zone = "x86_pkg_temp";  // named: used even though it is a die sensor
  EXPECT_TRUE(Engine::Load(kModel, o).ok());
  o.thermal.zone.clear();
  o.thermal.limit_c = 5;
  EXPECT_EQ(Engine::Load(kModel, o).status().code(), StatusCode::kInvalidArgument);

  gemlet_engine_options c = gemlet_engine_options_default();
  EXPECT_DOUBLE_EQ(c.thermal_limit_c, 42);
  c.thermal_root = dir.path().c_str();
  c.thermal_zone = "nosuch";
  gemlet_engine* engine = nullptr;
  EXPECT_EQ(gemlet_engine_load(kModel, &c, &engine), GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("no thermal zone 'nosuch'"), std::string::npos);
  EXPECT_EQ(engine, nullptr);
}

// The simulated device, 10 minutes from 30 °C; an OS turns its skin temperature into levels
// (test::OsThermalLevels: fair 40, serious 42, critical 43 °C, each left 1 °C lower), the app passes
// them through gemlet_engine_set_thermal_state, and the device does the work the engine's throttle
// allows for the next 100 ms: u = duty * threads / n_threads from gemlet_engine_thermal_status.
TEST(ThermalApiTest, CApiLevelsRunHoldsTheLimitAndKeepsTheTokens) {
  test::TempDir dir;  // no zone: the levels alone
  gemlet_engine_options o = gemlet_engine_options_default();
  o.n_threads = 4;
  o.thermal_root = dir.path().c_str();
  gemlet_engine* engine = nullptr;
  ASSERT_EQ(gemlet_engine_load(kModel, &o, &engine), GEMLET_OK) << gemlet_last_error();
  test::SimulatedSkin skin;
  test::OsThermalLevels os;
  bool c_api_ok = true;
  const test::SimRun run = test::RunSimulation(skin, 600, 0.1, [&](double, double celsius) {
    const int level = os.Update(celsius);
    c_api_ok &= gemlet_engine_set_thermal_state(engine, static_cast<gemlet_thermal_state>(level)) == GEMLET_OK;
    gemlet_thermal_status s = gemlet_thermal_status_default();
    c_api_ok &= gemlet_engine_thermal_status(engine, &s) == GEMLET_OK;
    c_api_ok &= s.level == level;
    return test::SimThrottle{s.threads, 4, s.duty, s.prefill_chunk, level, s.throttled};
  });
  EXPECT_TRUE(c_api_ok);
  EXPECT_LE(run.max_celsius, 42.5);
  EXPECT_GE(run.token_fraction(), 0.70);
  EXPECT_LE(run.throttle_changes, 30);
  gemlet_engine_free(engine);
}

}  // namespace
}  // namespace gemlet

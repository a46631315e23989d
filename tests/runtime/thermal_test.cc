// The thermal governor against the simulated device of issue 17 (tests/common/thermal_device.h): a
// fake sysfs skin zone beside a hot CPU zone, 10 simulated minutes from 30 °C on a simulated clock;
// the zone finder and reader; the controller's hysteresis and the throttle planner.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "common/test_util.h"
#include "common/thermal_device.h"
#include "runtime/thermal.h"

namespace gemlet::runtime {
namespace {

using test::FakeSysfs;
using test::OsThermalLevels;
using test::RunSimulation;
using test::SimRun;
using test::SimThrottle;
using test::SimulatedSkin;

constexpr int kThreads = 4;      // the simulated device's cores
constexpr int kBatch = 512;
constexpr double kMinutes10 = 600;
constexpr double kInterval = 0.1;  // the zone is rewritten, and read, every 100 ms

SimThrottle ToSim(const Throttle& t, int level = 0) {
  return SimThrottle{t.threads, kThreads, t.duty, t.prefill_chunk, level, t.throttled};
}

// The device with its fake zones, the engine's monitor reading them on the simulated clock.
struct SysfsDevice {
  test::TempDir dir;
  FakeSysfs sysfs{dir.path()};
  SimulatedSkin skin;
  double now = 0;
  std::optional<ThermalMonitor> monitor;
  ThrottlePlanner planner;

  SysfsDevice() {
    sysfs.AddZone(0, "x86_pkg_temp", 85);  // a die sensor, hot under load: must be ignored
    sysfs.AddZone(1, "skin-therm", skin.celsius);
    Result<std::optional<ThermalZone>> zone = FindThermalZone(sysfs.root(), "");
    EXPECT_TRUE(zone.ok() && zone->has_value());
    monitor.emplace(true, ThermalParams{}, zone.ok() ? *zone : std::nullopt, [this] { return now; });
  }
  SimThrottle Step(double t, double celsius) {
    sysfs.SetTemp(1, celsius);
    now = t;
    const ThermalMonitor::Reading r = monitor->Poll();
    return ToSim(planner.Plan(r.work_fraction, r.throttled, kThreads, kBatch));
  }
  SimRun Run(double seconds, double start = 0) {
    return RunSimulation(skin, seconds, kInterval, [&](double t, double c) { return Step(start + t, c); });
  }
};

double MeanCelsius(const SimRun& run, double from_t) {
  double sum = 0;
  int n = 0;
  for (const test::SimSample& s : run.samples) {
    if (s.t >= from_t) sum += s.celsius, ++n;
  }
  return n > 0 ? sum / n : 0;
}

TEST(ThermalSimTest, DeviceUnthrottledPassesTheLimit) {
  // The premise of the requirement: full work settles at 46 °C, above the 42 °C limit.
  SimulatedSkin skin;
  const SimRun run = RunSimulation(skin, kMinutes10, kInterval, [](double, double) {
    return SimThrottle{kThreads, kThreads, 1.0, kBatch, 0, false};
  });
  EXPECT_NEAR(run.max_celsius, 46, 0.05);
  EXPECT_NEAR(run.token_fraction(), 1.0, 1e-9);
}

TEST(ThermalSimTest, SysfsZoneRunHoldsTheLimitAndKeepsTheTokens) {
  SysfsDevice d;
  const SimRun run = d.Run(kMinutes10);
  EXPECT_LE(run.max_celsius, 42.5);
  EXPECT_GE(run.token_fraction(), 0.70);
  // It settles just under the limit rather than far below it (what the tokens pay for).
  EXPECT_GT(MeanCelsius(run, 300), 41.0);
  EXPECT_LT(MeanCelsius(run, 300), 42.0);
  // And the throttle shows in threads and duty, not only in the fraction: the steady state runs 3
  // of 4 threads at a duty near 1.
  const test::SimSample& last = run.samples.back();
  EXPECT_TRUE(last.throttle.throttled);
  EXPECT_EQ(last.throttle.threads, 3);
  EXPECT_GT(last.throttle.duty, 0.9);
  EXPECT_LT(last.throttle.prefill_chunk, kBatch);
  // No chattering: it engages once and changes its thread count a few times at most.
  EXPECT_LE(run.throttle_changes, 6);
  const ThermalStatus s = d.monitor->Status();
  EXPECT_EQ(s.zone, "skin-therm");
  EXPECT_LE(s.changes, 4);
  EXPECT_GT(s.throttled_seconds, 400);
  EXPECT_EQ(d.monitor->read_errors(), 0);
}

TEST(ThermalSimTest, RecoversOnceCooled) {
  SysfsDevice d;
  d.Run(kMinutes10);
  ASSERT_TRUE(d.monitor->Status().throttled);
  // The app idles two and a half minutes (no session asks the monitor), and the skin cools.
  d.skin.Step(0, 150, 3000);
  ASSERT_LT(d.skin.celsius, 32);
  // The next answer runs unthrottled from its first step...
  const SimRun again = d.Run(20, kMinutes10 + 150);
  EXPECT_FALSE(again.samples.front().throttle.throttled);
  EXPECT_EQ(again.samples.front().throttle.threads, kThreads);
  EXPECT_DOUBLE_EQ(again.samples.front().u, 1.0);
  EXPECT_FALSE(d.monitor->Status().throttled);
}

TEST(ThermalSimTest, AppLevelsRunHoldsTheLimitAndKeepsTheTokens) {
  // No zone: the app passes the OS's levels (here from the simulated skin), as through
  // Engine::SetThermalState; the C API's run of the same is in tests/api/thermal_api_test.cc.
  double now = 0;
  ThermalMonitor monitor(true, ThermalParams{}, std::nullopt, [&] { return now; });
  ThrottlePlanner planner;
  OsThermalLevels os;
  SimulatedSkin skin;
  int level_changes = 0, last_level = 0;
  const SimRun run = RunSimulation(skin, kMinutes10, kInterval, [&](double t, double c) {
    now = t;
    const int level = os.Update(c);
    level_changes += level != last_level;
    last_level = level;
    monitor.SetLevel(level);
    const ThermalMonitor::Reading r = monitor.Poll();
    return ToSim(planner.Plan(r.work_fraction, r.throttled, kThreads, kBatch), level);
  });
  EXPECT_LE(run.max_celsius, 42.5);
  EXPECT_GE(run.token_fraction(), 0.70);
  EXPECT_GT(level_changes, 2);  // it did go to serious and back, not only to fair
  EXPECT_LE(level_changes, 30);
  EXPECT_EQ(monitor.Status().changes, level_changes + 1);  // the levels and one engage
}

TEST(ThermalMonitorTest, ReadsTheZoneAtMostEvery100ms) {
  test::TempDir dir;
  FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "skin", 35);
  double now = 0;
  ThermalMonitor m(true, ThermalParams{}, *FindThermalZone(dir.path(), "skin").value(), [&] { return now; });
  EXPECT_FALSE(m.Status().has_reading);
  EXPECT_TRUE(m.active());
  m.Poll();
  EXPECT_DOUBLE_EQ(m.Status().temperature_c, 35);
  sysfs.SetTemp(0, 50);
  now = 0.05;
  m.Poll();
  EXPECT_DOUBLE_EQ(m.Status().temperature_c, 35);
  now = 0.1;
  const ThermalMonitor::Reading r = m.Poll();
  EXPECT_DOUBLE_EQ(m.Status().temperature_c, 50);
  EXPECT_TRUE(r.throttled);  // 50 °C at once: the first hot reading throttles without integrating
  EXPECT_LT(r.work_fraction, 0.2);
}

TEST(ThermalMonitorTest, DisabledNeverThrottlesAndWithoutZoneWaitsForLevels) {
  double now = 0;
  ThermalMonitor off(false, ThermalParams{}, std::nullopt, [&] { return now; });
  off.SetLevel(3);
  EXPECT_FALSE(off.active());
  EXPECT_DOUBLE_EQ(off.Poll().work_fraction, 1.0);
  EXPECT_EQ(off.Status().level, ThermalState::kCritical);  // recorded

  ThermalMonitor levels(true, ThermalParams{}, std::nullopt, [&] { return now; });
  EXPECT_FALSE(levels.active());
  levels.SetLevel(2);
  EXPECT_TRUE(levels.active());
  EXPECT_DOUBLE_EQ(levels.Poll().work_fraction, kLevelWorkFraction[2]);
  levels.SetLevel(0);
  EXPECT_DOUBLE_EQ(levels.Poll().work_fraction, 1.0);
  EXPECT_FALSE(levels.Poll().throttled);
}

TEST(ThermalGovernorTest, ReleasesOnlyBelowTheLimitLessTheMargin) {
  ThermalGovernor g;  // limit 42 (set point 41.5), release margin 1
  double t = 0;
  auto hold = [&](ThermalGovernor& gov, double celsius, double seconds) {
    for (int i = 0; i < static_cast<int>(std::lround(seconds / 0.1)); ++i, t += 0.1) gov.AddReading(t, celsius);
  };
  hold(g, 43, 30);
  EXPECT_TRUE(g.throttled());
  EXPECT_LT(g.work_fraction(), 0.5);
  // Below the set point the controller gives the work back, all of it in time...
  hold(g, 41.3, 400);
  EXPECT_DOUBLE_EQ(g.work_fraction(), 1.0);
  // ...but within 1 °C of the limit it stays throttled (shorter chunks, reported as throttled)...
  EXPECT_TRUE(g.throttled());
  hold(g, 40.9, 0.1);
  EXPECT_FALSE(g.throttled());
  EXPECT_EQ(g.changes(), 2);
  EXPECT_GT(g.throttled_seconds(), 429);
  EXPECT_LT(g.throttled_seconds(), 431);
  // ...while a governor that was never throttled does not engage at the same 41.3 °C.
  ThermalGovernor fresh;
  hold(fresh, 41.3, 60);
  EXPECT_FALSE(fresh.throttled());
  EXPECT_EQ(fresh.changes(), 0);
}

TEST(ThermalGovernorTest, ActsOnTheRiseBeforeTheLimit) {
  // 0.2 °C/s towards the limit: the predicted temperature passes it long before the reading does.
  ThermalGovernor g;
  for (int i = 0; i < 200; ++i) g.AddReading(i * 0.1, 36 + i * 0.02);
  EXPECT_LT(g.temperature(), 40);
  EXPECT_NEAR(g.slope(), 0.2, 0.02);
  EXPECT_TRUE(g.throttled());
  EXPECT_LT(g.work_fraction(), 1.0);
}

TEST(ThrottlePlannerTest, FewerThreadsFirstThenDutyWithHysteresis) {
  ThrottlePlanner p;
  Throttle t = p.Plan(1.0, false, 4, 512);
  EXPECT_EQ(t.threads, 4);
  EXPECT_DOUBLE_EQ(t.duty, 1.0);
  EXPECT_EQ(t.prefill_chunk, 512);
  t = p.Plan(0.72, true, 4, 512);  // 2.88 threads' worth: 3 threads at 96%
  EXPECT_EQ(t.threads, 3);
  EXPECT_NEAR(t.duty, 0.96, 1e-12);
  EXPECT_EQ(t.prefill_chunk, 368);
  t = p.Plan(0.76, true, 4, 512);  // more than 3 threads' worth: a fourth at once
  EXPECT_EQ(t.threads, 4);
  EXPECT_NEAR(t.duty, 0.76, 1e-12);
  t = p.Plan(0.73, true, 4, 512);  // 2.92: not a tenth of a thread below 3, so it keeps 4
  EXPECT_EQ(t.threads, 4);
  EXPECT_NEAR(t.duty * t.threads / 4, 0.73, 1e-12);
  t = p.Plan(0.72, true, 4, 512);
  EXPECT_EQ(t.threads, 3);
  t = p.Plan(0.1, true, 4, 512);
  EXPECT_EQ(t.threads, 1);
  EXPECT_NEAR(t.duty, 0.4, 1e-12);
  EXPECT_EQ(t.prefill_chunk, 51);
  t = p.Plan(0.01, true, 4, 512);
  EXPECT_EQ(t.prefill_chunk, ThrottlePlanner::kMinPrefillChunk);
  t = p.Plan(0.5, false, 4, 512);  // not throttled: everything back
  EXPECT_EQ(t.threads, 4);
  EXPECT_DOUBLE_EQ(t.duty, 1.0);
  EXPECT_EQ(t.prefill_chunk, 512);
}

TEST(ThermalZoneTest, PicksTheSkinZoneNeverTheCpu) {
  test::TempDir dir;
  FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "x86_pkg_temp", 85);
  sysfs.AddZone(1, "cpu-0-0-usr", 80);
  sysfs.AddZone(2, "battery", 33);
  sysfs.AddZone(10, "skin-therm", 36);
  EXPECT_EQ(ListThermalZones(dir.path()).size(), 4u);
  Result<std::optional<ThermalZone>> z = FindThermalZone(dir.path(), "");
  ASSERT_TRUE(z.ok()) << z.message();
  ASSERT_TRUE(z->has_value());
  EXPECT_EQ((*z)->type, "skin-therm");  // skin before battery
  EXPECT_EQ((*z)->name, "thermal_zone10");
  Result<double> c = ReadZoneCelsius((*z)->temp_path);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(*c, 36);
}

TEST(ThermalZoneTest, StaysOffWithNoSkinCaseOrBatteryZone) {
  test::TempDir dir;
  FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "x86_pkg_temp", 85);
  sysfs.AddZone(1, "acpitz", 50);
  sysfs.AddZone(2, "soc_thermal", 70);
  Result<std::optional<ThermalZone>> z = FindThermalZone(dir.path(), "");
  ASSERT_TRUE(z.ok());
  EXPECT_FALSE(z->has_value());
  // A root with no zones at all (a container, a Mac) is the same.
  Result<std::optional<ThermalZone>> none = FindThermalZone(dir.path() + "/missing", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ThermalZoneTest, ANamedZoneIsUsedAsToldAndAnUnknownOneIsAnError) {
  test::TempDir dir;
  FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "x86_pkg_temp", 85);
  sysfs.AddZone(1, "Back-Therm", 37);
  // Named, even a die sensor is used (the user asked for it); types match in any case, and the
  // directory name works too.
  EXPECT_EQ((*FindThermalZone(dir.path(), "x86_pkg_temp").value()).name, "thermal_zone0");
  EXPECT_EQ((*FindThermalZone(dir.path(), "back-therm").value()).name, "thermal_zone1");
  EXPECT_EQ((*FindThermalZone(dir.path(), "thermal_zone1").value()).type, "Back-Therm");
  Result<std::optional<ThermalZone>> bad = FindThermalZone(dir.path(), "skin");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("no thermal zone 'skin'"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("x86_pkg_temp (thermal_zone0)"), std::string::npos) << bad.message();
  EXPECT_EQ(bad.message().find('\n'), std::string::npos);
}

TEST(ThermalZoneTest, ClassifiesZoneTypes) {
  for (const char* type : {"skin-therm", "sdm-skin", "case_therm", "shell_front", "back_therm", "battery", "BAT0",
                           "xo_therm", "quiet_therm"}) {
    EXPECT_TRUE(IsCaseZoneType(type)) << type;
  }
  for (const char* type : {"x86_pkg_temp", "cpu-1-0-usr", "cpuss-0", "soc_thermal", "tsens_tz_sensor1", "gpu-usr",
                           "acpitz", "cpu_bat_skin"}) {  // die markers win over a case marker
    EXPECT_FALSE(IsCaseZoneType(type)) << type;
  }
  Result<double> missing = ReadZoneCelsius("/nonexistent/temp");
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace gemlet::runtime

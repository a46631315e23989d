// The simulated device of the thermal governor's requirement (issue 17, item 6), shared by its tests
// and bench/thermal: a skin heated by the work done, a fake sysfs tree it is written to, an OS that
// turns its temperature into thermal levels, and the 10-minute run that ties them to a governor.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace gemlet::test {

// dT/dt = 0.32 u - 0.02 (T - 30): T in °C, t in s, u the fraction of full unthrottled work done.
// Full work settles at 46 °C; the most that holds 42 °C is u = 0.75 (0.02 * 12 / 0.32).
struct SimulatedSkin {
  static constexpr double kHeating = 0.32;   // °C/s at full work
  static constexpr double kCooling = 0.02;   // 1/s: a 50 s time constant
  static constexpr double kAmbient = 30;
  double celsius = kAmbient;
  // Explicit Euler in substeps (at 5 ms the error against the exact exponential is ~1e-4 °C).
  void Step(double u, double dt, int substeps = 20) {
    const double h = dt / substeps;
    for (int i = 0; i < substeps; ++i) celsius += h * (kHeating * u - kCooling * (celsius - kAmbient));
  }
};

// A fake /sys/class/thermal under `root`: thermal_zoneN/type and thermal_zoneN/temp (millidegrees).
class FakeSysfs {
 public:
  explicit FakeSysfs(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  void AddZone(int index, const std::string& type, double celsius) {
    const std::string dir = Dir(index);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/type") << type << "\n";
    SetTemp(index, celsius);
  }
  void SetTemp(int index, double celsius) {
    std::ofstream(Dir(index) + "/temp") << std::lround(celsius * 1000) << "\n";
  }

 private:
  std::string Dir(int index) const { return root_ + "/thermal_zone" + std::to_string(index); }
  std::string root_;
};

// How an OS reports a skin temperature as levels (ThermalState 0..3), with hysteresis: a level is
// entered at its threshold and left 1 °C below it. Chosen for this device like a vendor tunes its
// thermal HAL: fair at 40 °C (warm to the touch), serious at 42 (the comfort limit), critical at 43.
struct OsThermalLevels {
  static constexpr double kEnter[3] = {40, 42, 43};
  static constexpr double kExitBelow = 1;
  int level = 0;
  int Update(double celsius) {
    while (level < 3 && celsius >= kEnter[level]) ++level;
    while (level > 0 && celsius < kEnter[level - 1] - kExitBelow) --level;
    return level;
  }
};

// What a governor lets the device run for the next interval.
struct SimThrottle {
  int threads = 1;
  int max_threads = 1;
  double duty = 1;
  int prefill_chunk = 0;
  int level = 0;  // the OS level, for runs driven by levels
  bool throttled = false;
};

// u = duty * threads / max_threads: the work model of runtime::ThrottlePlanner (work per second in
// proportion to threads in use, and to the share of time spent evaluating).
inline double WorkFraction(const SimThrottle& s) {
  return std::clamp(s.duty * s.threads / std::max(1, s.max_threads), 0.0, 1.0);
}

struct SimSample {
  double t = 0, celsius = 0, u = 0;
  SimThrottle throttle;
};

struct SimRun {
  double max_celsius = 0;
  double work = 0;          // ∫ u dt: tokens in units of the unthrottled rate
  double seconds = 0;
  double token_fraction() const { return seconds > 0 ? work / seconds : 0; }
  std::vector<SimSample> samples;  // every interval
  int throttle_changes = 0;        // intervals whose threads or throttled flag differ from the last
};

// The run: every `interval` s of simulated time the skin's temperature is handed to `step` (which
// writes it to the fake zone, or turns it into an OS level, and asks the governor), and the skin
// then heats with the work the answer allows for one interval.
inline SimRun RunSimulation(SimulatedSkin& skin, double seconds, double interval,
                            const std::function<SimThrottle(double t, double celsius)>& step) {
  SimRun run;
  run.max_celsius = skin.celsius;
  const int n = static_cast<int>(std::lround(seconds / interval));
  SimThrottle last;
  for (int i = 0; i < n; ++i) {
    const double t = i * interval;
    const SimThrottle th = step(t, skin.celsius);
    if (i > 0 && (th.threads != last.threads || th.throttled != last.throttled)) ++run.throttle_changes;
    last = th;
    const double u = WorkFraction(th);
    run.samples.push_back({t, skin.celsius, u, th});
    skin.Step(u, interval);
    run.work += u * interval;
    run.max_celsius = std::max(run.max_celsius, skin.celsius);
  }
  run.seconds = n * interval;
  return run;
}

}  // namespace gemlet::test

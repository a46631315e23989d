// The thermal governor on issue 17's simulated device, 10 minutes from 30 °C: unthrottled, through a
// fake sysfs skin zone (beside a hot CPU zone it must ignore), and through the C API's thermal
// levels. Prints the curve (t, T, u, threads, duty, prefill chunk, level) and the totals as Markdown:
// bench/thermal/RESULTS.md is its output. Simulated clock: the run takes milliseconds, not minutes.
//
// Usage: gemlet_thermal_sim [MODEL.gguf] [EVERY_SECONDS]   (the model is loaded for the C API run)
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "common/thermal_device.h"
#include "gemlet/gemlet.h"
#include "runtime/thermal.h"

namespace {

using gemlet::test::SimRun;
using gemlet::test::SimThrottle;

constexpr int kThreads = 4;

// A fresh folder for a fake sysfs tree, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gemlet-thermal-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};
constexpr double kSeconds = 600, kInterval = 0.1;

std::string HostCpu() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

void PrintRun(const char* title, const SimRun& run, double every, double wall_ms) {
  std::printf("\n### %s\n\n", title);
  std::printf("| t (s) | T (°C) | u | threads | duty | prefill chunk | level | throttled |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|:---:|\n");
  const int stride = static_cast<int>(every / kInterval + 0.5);
  for (size_t i = 0; i < run.samples.size(); i += stride) {
    const gemlet::test::SimSample& s = run.samples[i];
    std::printf("| %.0f | %.2f | %.3f | %d/%d | %.3f | %d | %d | %s |\n", s.t, s.celsius, s.u, s.throttle.threads,
                s.throttle.max_threads, s.throttle.duty, s.throttle.prefill_chunk, s.throttle.level,
                s.throttle.throttled ? "yes" : "");
  }
  double first = -1;
  for (const gemlet::test::SimSample& s : run.samples) {
    if (s.throttle.throttled) {
      first = s.t;
      break;
    }
  }
  std::printf("\nmax T **%.3f °C**, tokens **%.1f%%** of unthrottled, first throttled at %.1f s, %d changes of "
              "threads or throttle state; simulated in %.1f ms\n",
              run.max_celsius, 100 * run.token_fraction(), first, run.throttle_changes, wall_ms);
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "models/gemlet-demo.gguf";
  const double every = argc > 2 ? std::atof(argv[2]) : 20;
  std::printf("## Thermal governor on the simulated device\n\n");
  std::printf("dT/dt = 0.32 u - 0.02 (T - 30) from 30 °C for %.0f s, the zone written and read every %.0f ms; "
              "%d threads, u = duty x threads / %d; limit 42 °C. Host: %s.\n",
              kSeconds, kInterval * 1000, kThreads, kThreads, HostCpu().c_str());

  // Unthrottled: where the device goes on its own.
  {
    gemlet::test::SimulatedSkin skin;
    const auto t0 = std::chrono::steady_clock::now();
    const SimRun run = gemlet::test::RunSimulation(skin, kSeconds, kInterval, [](double, double) {
      return SimThrottle{kThreads, kThreads, 1.0, 512, 0, false};
    });
    PrintRun("Unthrottled", run, every * 3, Ms(t0));
  }

  // The sysfs zone: the engine's monitor on the simulated clock.
  {
    TempDir dir;
    gemlet::test::FakeSysfs sysfs(dir.path());
    sysfs.AddZone(0, "x86_pkg_temp", 85);
    sysfs.AddZone(1, "skin-therm", 30);
    auto zone = gemlet::runtime::FindThermalZone(dir.path(), "");
    if (!zone.ok() || !zone->has_value()) {
      std::fprintf(stderr, "no skin zone found in the fake sysfs tree\n");
      return 1;
    }
    double now = 0;
    gemlet::runtime::ThermalMonitor monitor(true, gemlet::runtime::ThermalParams{}, *zone, [&] { return now; });
    gemlet::runtime::ThrottlePlanner planner;
    gemlet::test::SimulatedSkin skin;
    const auto t0 = std::chrono::steady_clock::now();
    const SimRun run = gemlet::test::RunSimulation(skin, kSeconds, kInterval, [&](double t, double celsius) {
      sysfs.SetTemp(1, celsius);
      now = t;
      const auto r = monitor.Poll();
      const gemlet::runtime::Throttle th = planner.Plan(r.work_fraction, r.throttled, kThreads, 512);
      return SimThrottle{th.threads, kThreads, th.duty, th.prefill_chunk, 0, th.throttled};
    });
    PrintRun("Sysfs skin zone (thermal_zone1 skin-therm; thermal_zone0 x86_pkg_temp at 85 °C ignored)", run, every,
             Ms(t0));
  }

  // The C API's levels: an OS turns the skin temperature into levels, the app passes them on.
  {
    TempDir dir;  // no zones: levels only
    gemlet_engine_options o = gemlet_engine_options_default();
    o.n_threads = kThreads;
    o.thermal_root = dir.path().c_str();
    gemlet_engine* engine = nullptr;
    if (gemlet_engine_load(model.c_str(), &o, &engine) != GEMLET_OK) {
      std::fprintf(stderr, "%s\n", gemlet_last_error());
      return 1;
    }
    gemlet::test::SimulatedSkin skin;
    gemlet::test::OsThermalLevels os;
    const auto t0 = std::chrono::steady_clock::now();
    const SimRun run = gemlet::test::RunSimulation(skin, kSeconds, kInterval, [&](double, double celsius) {
      const int level = os.Update(celsius);
      gemlet_engine_set_thermal_state(engine, static_cast<gemlet_thermal_state>(level));
      gemlet_thermal_status s = gemlet_thermal_status_default();
      gemlet_engine_thermal_status(engine, &s);
      return SimThrottle{s.threads, kThreads, s.duty, s.prefill_chunk, level, s.throttled};
    });
    PrintRun("C API levels (OS: fair >= 40, serious >= 42, critical >= 43 °C, each left 1 °C lower; work fractions "
             "1, 0.8, 0.6, 0.25)",
             run, every, Ms(t0));
    gemlet_engine_free(engine);
  }
  return 0;
}

// The thermal governor: a controller from a skin temperature (or the app's thermal level) to the
// fraction of full work a session may do, how a session runs that fraction (threads, paced steps,
// prefill chunks), the Linux thermal-zone reader, and the engine-wide monitor that ties them to a
// clock. The controller takes its time from the caller, so a simulation runs it exactly and fast.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gemlet/types.hpp"

namespace gemlet::runtime {

// The controller's constants. The defaults are tuned for a phone's or laptop's skin: a thermal
// time constant of about a minute, a few degrees from full load to idle (docs/thermal.md).
struct ThermalParams {
  double limit_c = 42;  // the skin must not pass this (comfort: IEC 62368-1 allows 43 °C long-term)
  // The controller aims this far below the limit: room for the sensor's lag and noise.
  double setpoint_margin_c = 0.5;
  // The temperature is predicted this far ahead from its slope: skin heats for tens of seconds after
  // the work that heats it, so acting on the temperature alone overshoots.
  double lookahead_s = 20;
  double kp = 0.1;    // work fraction per °C of predicted error
  double ki = 0.01;   // work fraction per °C·s of predicted error
  double slope_tau_s = 4;  // the slope estimate's smoothing: sensors step in 0.1-1 °C and jitter
  double min_fraction = 0.1;  // the least work the controller allows (an answer still progresses)
  // Once throttled, the governor calls itself released only below limit - release_margin: the
  // hysteresis that keeps shrunken chunks and reports from flapping near the limit.
  double release_margin_c = 1.0;
};

// The work fraction for each app level (ThermalState nominal, fair, serious, critical). The OS does
// the hysteresis between levels; these make a device whose levels step at about 40/42/43 °C skin
// settle near 41-42 °C (bench/thermal/RESULTS.md).
inline constexpr double kLevelWorkFraction[4] = {1.0, 0.8, 0.6, 0.25};

// From readings and levels to a work fraction: a PI controller on the predicted temperature
// (T + lookahead * dT/dt) against limit - margin, its output in [min_fraction, 1], combined with the
// app's level by taking the smaller.
class ThermalGovernor {
 public:
  explicit ThermalGovernor(const ThermalParams& params = {}) : params_(params) {}

  // A temperature read at time t_s (seconds from any origin, not decreasing).
  void AddReading(double t_s, double celsius);
  // The app's level, 0 (nominal) .. 3 (critical); out of range is clamped.
  void SetLevel(double t_s, int level);

  double work_fraction() const;  // 1: unthrottled
  bool throttled() const { return throttled_; }
  int level() const { return level_; }
  bool has_reading() const { return has_reading_; }
  double temperature() const { return last_c_; }
  double slope() const { return slope_; }  // °C/s, smoothed
  // Seconds spent throttled, counted between updates at most 1 s apart (idle gaps do not count).
  double throttled_seconds() const { return throttled_seconds_; }
  int changes() const { return changes_; }  // times throttled() or the level changed
  const ThermalParams& params() const { return params_; }

 private:
  void Advance(double t_s);  // time accounting up to t_s
  void UpdateThrottled();

  ThermalParams params_;
  double w_temp_ = 1;    // the temperature controller's output
  double integral_ = 1;  // its integral term: the sustainable fraction, once settled
  int level_ = 0;
  bool throttled_ = false;
  bool has_reading_ = false;
  bool has_time_ = false;
  double last_t_ = 0;      // the last update's time
  double last_read_t_ = 0;  // the last reading's time
  double last_c_ = 0;
  double slope_ = 0;
  double throttled_seconds_ = 0;
  int changes_ = 0;
};

// How one session runs a work fraction: its thread count, its duty (the share of wall time spent
// evaluating; the rest is slept between steps) and its prefill chunk.
struct Throttle {
  int threads = 1;
  double duty = 1;
  int prefill_chunk = 512;
  bool throttled = false;
};

// The model behind the split (docs/thermal.md): work done per second is proportional to threads
// in use times duty, so threads * duty / max_threads = the work fraction. Fewer threads come first
// (fewer busy cores: less power at the same token rate on big.LITTLE and laptop parts alike), the
// duty makes up the rest. The thread count has hysteresis: it rises as soon as the fraction needs a
// thread more, and falls only when it needs a thread and a tenth less, so it changes rarely (a
// change rebuilds the session's thread pool).
class ThrottlePlanner {
 public:
  static constexpr double kThreadHysteresis = 0.1;
  static constexpr int kMinPrefillChunk = 16;
  Throttle Plan(double work_fraction, bool throttled, int max_threads, int max_batch);

 private:
  int threads_ = 0;  // 0: none planned yet
};

// ---- Linux thermal zones ----

struct ThermalZone {
  std::string name;       // the directory, "thermal_zone3"
  std::string type;       // its type file, "skin-therm"
  std::string temp_path;  // <root>/thermal_zone3/temp (millidegrees Celsius)
};

// Zone types that measure what a user touches (chosen automatically), and die sensors that run at
// 60-90 °C under load (never chosen automatically). Lower case substrings; docs/thermal.md lists
// where they come from.
bool IsCaseZoneType(std::string_view type);
bool IsDieZoneType(std::string_view type);

// The zones under root (thermal_zone* with a type file), by index.
std::vector<ThermalZone> ListThermalZones(const std::string& root);
// The zone to govern by: `wanted` (a type, case-insensitive, or a directory name) if given, an
// error naming the zones there when it is not found; else the best skin/case/battery zone (skin
// first, then case/shell/back, then board thermistors, then battery), nullopt when there is none.
Result<std::optional<ThermalZone>> FindThermalZone(const std::string& root, const std::string& wanted);
// A zone's temp file in °C. Reads with plain syscalls into a stack buffer: it runs in the decode
// loop, where nothing allocates.
Result<double> ReadZoneCelsius(const std::string& temp_path);

// ---- the engine's governor ----


// One per engine, shared by its sessions (thread-safe): the governor, fed by the zone (read at most
// every kPollSeconds, when a session asks) and by the app's levels.
class ThermalMonitor {
 public:
  static constexpr double kPollSeconds = 0.1;
  using Clock = std::function<double()>;  // seconds, steady
  static double SteadySeconds();

  // enabled false: the monitor records levels but never throttles. No clock: SteadySeconds (not
  // stored as a function pointer: its typeinfo would be exported from libgemlet.so).
  ThermalMonitor(bool enabled, const ThermalParams& params, std::optional<ThermalZone> zone, Clock clock = {});

  struct Reading {
    double work_fraction = 1;
    bool throttled = false;
  };
  // The governor's word now, after reading the zone if kPollSeconds have passed since it last did.
  Reading Poll();
  void SetLevel(int level);
  // What the governor sees and does now, as the public ThermalStatus: threads, duty and prefill
  // chunk are what a session of `threads` threads would run now.
  ThermalStatus Status(int threads = 1) const;
  int read_errors() const;  // zone reads that failed so far
  // Whether sessions need to ask at all: enabled with a zone, or a level above nominal seen.
  bool active() const;

 private:
  double Now() const { return clock_ ? clock_() : SteadySeconds(); }

  const bool enabled_;
  const std::optional<ThermalZone> zone_;
  const Clock clock_;
  mutable std::mutex mutex_;
  ThermalGovernor governor_;
  bool polled_ = false;
  double last_poll_ = 0;
  int read_errors_ = 0;
  std::atomic<bool> level_seen_{false};
};

}  // namespace gemlet::runtime

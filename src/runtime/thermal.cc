// The thermal governor's controller, the per-session throttle plan, the thermal-zone reader and the
// engine's monitor (runtime/thermal.h).
#include "runtime/thermal.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>

namespace gemlet::runtime {

// ---- ThermalGovernor ----

void ThermalGovernor::Advance(double t_s) {
  if (has_time_) {
    // Only the time between close updates counts: the monitor is asked while sessions evaluate,
    // and an idle hour between two answers is not an hour of throttling.
    const double dt = std::clamp(t_s - last_t_, 0.0, 1.0);
    if (throttled_) throttled_seconds_ += dt;
  }
  has_time_ = true;
  last_t_ = std::max(last_t_, t_s);
}

void ThermalGovernor::AddReading(double t_s, double celsius) {
  Advance(t_s);
  const ThermalParams& p = params_;
  if (has_reading_) {
    const double dt = t_s - last_read_t_;
    if (dt > 0) {
      const double a = dt / (p.slope_tau_s + dt);
      slope_ += a * ((celsius - last_c_) / dt - slope_);
    }
  }
  const double error = p.limit_c - p.setpoint_margin_c - (celsius + p.lookahead_s * slope_);
  // Positional PI with conditional integration (the anti-windup): the integral, which holds the
  // sustainable fraction once settled, moves only while the output is not pinned at a bound in the
  // direction the error pushes. It starts at 1, so the first reading acts proportionally at once
  // (an engine loaded on a hot device throttles without integrating down to it). A gap of more
  // than a second between readings (no session asked) integrates as one second.
  const double dt = has_reading_ ? std::clamp(t_s - last_read_t_, 0.0, 1.0) : 0.0;
  const double raw = integral_ + p.kp * error;
  const bool pinned = (raw >= 1.0 && error > 0) || (raw <= p.min_fraction && error < 0);
  if (!pinned) integral_ = std::clamp(integral_ + p.ki * error * dt, p.min_fraction, 1.0);
  w_temp_ = std::clamp(integral_ + p.kp * error, p.min_fraction, 1.0);
  has_reading_ = true;
  last_c_ = celsius;
  last_read_t_ = t_s;
  UpdateThrottled();
}

void ThermalGovernor::SetLevel(double t_s, int level) {
  Advance(t_s);
  level = std::clamp(level, 0, 3);
  if (level != level_) ++changes_;
  level_ = level;
  UpdateThrottled();
}

double ThermalGovernor::work_fraction() const { return std::min(w_temp_, kLevelWorkFraction[level_]); }

void ThermalGovernor::UpdateThrottled() {
  const double w = work_fraction();
  bool now = throttled_;
  if (!throttled_) {
    now = w < 1.0;
  } else if (w >= 1.0) {
    // Released only when the controller has given back full work and the skin is clear of the
    // limit by the release margin (or, with no reading, the app's level alone is nominal).
    now = has_reading_ && last_c_ >= params_.limit_c - params_.release_margin_c;
  }
  if (now != throttled_) ++changes_;
  throttled_ = now;
}

// ---- ThrottlePlanner ----

Throttle ThrottlePlanner::Plan(double w, bool throttled, int max_threads, int max_batch) {
  max_threads = std::max(1, max_threads);
  max_batch = std::max(1, max_batch);
  w = std::clamp(w, 0.0, 1.0);
  Throttle t;
  t.throttled = throttled;
  if (!throttled || threads_ <= 0 || threads_ > max_threads) threads_ = max_threads;
  if (throttled) {
    const double need = w * max_threads;  // threads' worth of full-speed work
    if (need > threads_) {
      threads_ = std::min(max_threads, static_cast<int>(std::ceil(need - 1e-9)));
    } else if (need <= threads_ - 1 - kThreadHysteresis) {
      threads_ = std::max(1, static_cast<int>(std::ceil(need - 1e-9)));
    }
  }
  t.threads = threads_;
  t.duty = throttled ? std::clamp(w * max_threads / threads_, 0.0, 1.0) : 1.0;
  // Shorter chunks while throttled: the pacing between them then spreads a long prompt's heat
  // instead of one chunk running at full power for seconds.
  t.prefill_chunk = throttled ? std::clamp(static_cast<int>(max_batch * w), std::min(kMinPrefillChunk, max_batch), max_batch)
                              : max_batch;
  return t;
}

// ---- thermal zones ----

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ContainsAny(std::string_view type, std::initializer_list<std::string_view> parts) {
  const std::string t = Lower(type);
  for (std::string_view p : parts) {
    if (t.find(p) != std::string::npos) return true;
  }
  return false;
}

// Lower is better; -1: not a zone to choose automatically.
int CaseZoneRank(std::string_view type) {
  if (IsDieZoneType(type)) return -1;
  if (ContainsAny(type, {"skin"})) return 0;
  if (ContainsAny(type, {"case", "shell", "back"})) return 1;
  if (ContainsAny(type, {"xo_therm", "quiet_therm"})) return 2;
  if (ContainsAny(type, {"battery", "bat"})) return 3;
  return -1;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n < 0) return std::nullopt;
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

}  // namespace

bool IsCaseZoneType(std::string_view type) { return CaseZoneRank(type) >= 0; }

bool IsDieZoneType(std::string_view type) {
  return ContainsAny(type, {"cpu", "x86_pkg", "pkg_temp", "soc", "tsens", "gpu", "core", "cluster", "apc", "ddr",
                            "modem", "npu", "acpitz"});
}

std::vector<ThermalZone> ListThermalZones(const std::string& root) {
  std::vector<std::pair<int, ThermalZone>> found;
  DIR* dir = ::opendir(root.c_str());
  if (dir == nullptr) return {};
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    constexpr std::string_view kPrefix = "thermal_zone";
    if (name.rfind(kPrefix, 0) != 0 || name.size() == kPrefix.size()) continue;
    char* end = nullptr;
    const long index = std::strtol(name.c_str() + kPrefix.size(), &end, 10);
    if (*end != '\0') continue;
    const std::string base = root + "/" + name;
    std::optional<std::string> type = ReadSmallFile(base + "/type");
    if (!type) continue;
    found.push_back({static_cast<int>(index), ThermalZone{name, *type, base + "/temp"}});
  }
  ::closedir(dir);
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ThermalZone> zones;
  for (auto& f : found) zones.push_back(std::move(f.second));
  return zones;
}

Result<std::optional<ThermalZone>> FindThermalZone(const std::string& root, const std::string& wanted) {
  const std::vector<ThermalZone> zones = ListThermalZones(root);
  if (!wanted.empty()) {
    const std::string w = Lower(wanted);
    for (const ThermalZone& z : zones) {
      if (Lower(z.type) == w || z.name == wanted) return std::optional<ThermalZone>(z);
    }
    std::string names;
    for (const ThermalZone& z : zones) names += (names.empty() ? "" : ", ") + z.type + " (" + z.name + ")";
    return Status::Error(StatusCode::kInvalidArgument,
                         "no thermal zone '" + wanted + "' in " + root +
                             (names.empty() ? " (it has no thermal_zone*/type)" : " (zones: " + names + ")"));
  }
  std::optional<ThermalZone> best;
  int best_rank = -1;
  for (const ThermalZone& z : zones) {
    const int rank = CaseZoneRank(z.type);
    if (rank >= 0 && (best_rank < 0 || rank < best_rank)) {
      best = z;
      best_rank = rank;
    }
  }
  return best;
}

Result<double> ReadZoneCelsius(const std::string& temp_path) {
  const int fd = ::open(temp_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error("cannot open " + temp_path);
  char buf[32];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return Status::Error("cannot read " + temp_path);
  buf[n] = '\0';
  char* end = nullptr;
  const long milli = std::strtol(buf, &end, 10);
  if (end == buf) return Status::Error(temp_path + " does not hold a temperature");
  return static_cast<double>(milli) / 1000.0;  // the sysfs ABI: millidegrees Celsius
}

// ---- ThermalMonitor ----

double ThermalMonitor::SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ThermalMonitor::ThermalMonitor(bool enabled, const ThermalParams& params, std::optional<ThermalZone> zone, Clock clock)
    : enabled_(enabled), zone_(std::move(zone)), clock_(std::move(clock)), governor_(params) {}

bool ThermalMonitor::active() const { return enabled_ && (zone_.has_value() || level_seen_.load(std::memory_order_relaxed)); }

ThermalMonitor::Reading ThermalMonitor::Poll() {
  if (!enabled_) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = Now();
  if (zone_ && (!polled_ || now - last_poll_ >= kPollSeconds - 1e-9)) {
    polled_ = true;
    last_poll_ = now;
    // A zone that cannot be read keeps the last word: the governor neither lifts a throttle on a
    // failed read nor invents one.
    Result<double> c = ReadZoneCelsius(zone_->temp_path);
    if (c.ok()) governor_.AddReading(now, *c);
    else ++read_errors_;
  }
  return {governor_.work_fraction(), governor_.throttled()};
}

void ThermalMonitor::SetLevel(int level) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (level > 0) level_seen_.store(true, std::memory_order_relaxed);
  governor_.SetLevel(Now(), level);
}

ThermalStatus ThermalMonitor::Status(int threads) const {
  std::lock_guard<std::mutex> lock(mutex_);
  ThermalStatus s;
  s.enabled = enabled_;
  if (zone_) s.zone = zone_->type;
  s.has_reading = governor_.has_reading();
  s.temperature_c = governor_.temperature();
  s.level = static_cast<ThermalState>(governor_.level());
  s.work_fraction = enabled_ ? governor_.work_fraction() : 1.0;
  s.throttled = enabled_ && governor_.throttled();
  s.throttled_seconds = governor_.throttled_seconds();
  s.changes = governor_.changes();
  const Throttle plan = ThrottlePlanner().Plan(s.work_fraction, s.throttled, threads, 512);
  s.threads = plan.threads;
  s.duty = plan.duty;
  s.prefill_chunk = plan.prefill_chunk;
  return s;
}

int ThermalMonitor::read_errors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return read_errors_;
}

}  // namespace gemlet::runtime

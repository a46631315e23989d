// What `gemlet bench`, `gemlet bench --spec` (bench_spec.cc) and `gemlet bench --image/--audio`
// (bench_media.cc) time and print with.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gemlet/gemlet.hpp"

namespace gemlet::cli {

inline double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// /proc/cpuinfo's first "model name" (every table names the host's CPU); "unknown" without one.
inline std::string CpuInfo() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (line.rfind("model name", 0) == 0 && colon != std::string::npos) return line.substr(colon + 2);
  }
  return "unknown";
}

// Peak anonymous memory (what a phone counts), sampled every 10 ms from a thread of its own for the
// object's life.
class PeakAnonSampler {
 public:
  PeakAnonSampler()
      : thread_([this] {
          while (on_.load()) {
            const uint64_t anon = MeasureProcessMemory().anon_bytes;
            if (anon > peak_.load()) peak_.store(anon);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~PeakAnonSampler() { Stop(); }
  void Stop() {
    on_.store(false);
    if (thread_.joinable()) thread_.join();
  }
  uint64_t peak() const { return peak_.load(); }

 private:
  std::atomic<bool> on_{true};
  std::atomic<uint64_t> peak_{0};
  std::thread thread_;
};

}  // namespace gemlet::cli

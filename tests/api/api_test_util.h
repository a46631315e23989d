// Shared by the public-API tests: the demo model (its path, one engine per test binary), option
// shorthands, a UTF-8 check for streamed pieces, and how much slower a sanitizer build runs (for
// the one latency bound the API promises).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "gemlet/gemlet.hpp"

#include "common/test_util.h"

namespace gemlet::test {

inline constexpr const char* kDemoModel = GEMLET_DEMO_MODEL;

// Memory pressure is not read from the system: a busy test machine must not drop turns.
inline std::shared_ptr<Engine> DemoEngine() {
  static std::shared_ptr<Engine> engine = [] {
    EngineOptions o;
    o.memory_pressure_path = "";
    auto e = Engine::Load(kDemoModel, o);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? std::move(e).value() : nullptr;
  }();
  return engine;
}

inline ConversationOptions WithContext(int n_ctx) {
  ConversationOptions o;
  o.session.n_ctx = n_ctx;
  return o;
}

inline GenerateOptions Greedy(int max_tokens) {
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0;
  return g;
}

// How much slower than a native release build this run is, for the one latency bound the API
// promises (a cancel within 100 ms): sanitizer builds by 8, and an emulator (qemu-aarch64 runs the
// arm64 tests) says by how much more through GEMLET_TEST_TIME_SCALE.
inline double TimeScale() {
#if defined(GEMLET_TEST_SANITIZED)
  double scale = 8.0;
#else
  double scale = 1.0;
#endif
  if (const char* env = std::getenv("GEMLET_TEST_TIME_SCALE"); env != nullptr && std::atof(env) > 0) scale *= std::atof(env);
  return scale;
}

// The bound on a cancel's latency, given how long one layer of a prompt chunk took in this build:
// 100 ms (scaled as above), or two layers where one takes longer than that (ThreadSanitizer over
// instrumented vector kernels took 1.8 s a layer of the demo model on an AVX2-only CPU), still far
// less than the whole chunk a cancel checked only between chunks would wait for.
inline double CancelLatencyBoundMs(double layer_ms) { return std::max(100.0 * TimeScale(), 2 * layer_ms); }

// True when `s` is a sequence of whole, well-formed UTF-8 characters.
inline bool IsWholeUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace gemlet::test

// Load: 64 clients at once send short requests (chat and text, streamed and not) to an in-process
// server, and a quarter of them hang up mid-answer. Every request that stays gets a whole answer
// (or a 503 when the queue is full), the server ends idle with every slot free, and its memory
// stays bounded. GEMLET_LOAD_REQUESTS sets the number of requests (200 by default; the 1,000-request
// run of bench/RESULTS.md sets it), GEMLET_LOAD_CLIENTS the clients (64).
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"

namespace gemlet {
namespace {

using nlohmann::json;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

struct Tally {
  std::mutex mutex;
  int ok = 0, busy = 0, hung_up = 0, bad = 0;
  std::vector<std::string> problems;
  std::vector<double> latencies;  // of whole answers, seconds
  void Problem(const std::string& p) {
    std::lock_guard<std::mutex> lock(mutex);
    ++bad;
    if (problems.size() < 10) problems.push_back(p);
  }
};

// One request: returns after the answer, a 503, or hanging up on purpose.
void OneRequest(int port, std::mt19937& rng, Tally& tally) {
  static const char* kUsers[] = {"Hello", "你好", "What is 2+2?", "写一首短诗", "Tell me about cats.", "Explain rain."};
  const bool chat = rng() % 4 != 0;
  const bool stream = rng() % 2 == 0;
  const bool hang_up = rng() % 4 == 0;
  const int max_tokens = 2 + static_cast<int>(rng() % 12);
  json body = {{"max_tokens", max_tokens}, {"stream", stream}, {"temperature", 0.7}, {"seed", rng() % 1000}};
  const std::string user = kUsers[rng() % 6];
  if (chat) {
    body["messages"] = {{{"role", "user"}, {"content", user}}};
  } else {
    body["prompt"] = user;
  }
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = chat ? "/v1/chat/completions" : "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string received;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    return !(hang_up && !received.empty());
  };
  const auto start = std::chrono::steady_clock::now();
  httplib::Result r = c.send(req);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (hang_up) {
    std::lock_guard<std::mutex> lock(tally.mutex);
    ++tally.hung_up;
    return;
  }
  if (!r) {
    return tally.Problem("no response (" + httplib::to_string(r.error()) + ") to " + req.path + (stream ? " streamed" : "") +
                        " after " + std::to_string(seconds) + " s, " + std::to_string(received.size()) + " bytes in");
  }
  if (r->status == 503) {
    {
      std::lock_guard<std::mutex> lock(tally.mutex);
      ++tally.busy;
    }
    if (r->get_header_value("Retry-After").empty()) tally.Problem("503 without Retry-After");
    // As a client that honours Retry-After would, a little less patient.
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 800));
    return;
  }
  if (r->status != 200) return tally.Problem("HTTP " + std::to_string(r->status) + ": " + received);
  if (stream) {
    if (received.find("data: [DONE]") == std::string::npos) return tally.Problem("stream without [DONE]: " + received);
  } else {
    json j = json::parse(received, nullptr, false);
    if (j.is_discarded() || !j.contains("choices")) return tally.Problem("not a completion: " + received);
    if (j["usage"]["completion_tokens"].get<int>() > max_tokens) return tally.Problem("too many tokens: " + received);
  }
  std::lock_guard<std::mutex> lock(tally.mutex);
  ++tally.ok;
  tally.latencies.push_back(seconds);
}

TEST(ServerLoad, ManyClientsSomeHangingUp) {
  const int requests = EnvInt("GEMLET_LOAD_REQUESTS", 200);
  const int clients = EnvInt("GEMLET_LOAD_CLIENTS", 64);
  EngineOptions eo;
  eo.memory_pressure_path = "";
  auto engine = Engine::Load(GEMLET_DEMO_MODEL, eo);
  ASSERT_TRUE(engine.ok()) << engine.message();
  ServerOptions o;
  o.port = 0;
  o.parallel = 4;
  o.queue_size = 32;  // 64 clients > 4 slots + 32 waiting: some are turned away with 503
  o.slot.n_ctx = 256;
  if (std::getenv("GEMLET_LOAD_HTTP_THREADS")) o.http_threads = EnvInt("GEMLET_LOAD_HTTP_THREADS", 0);
  auto server = Server::Create(engine.value(), o);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.value()->Start().ok());
  const int port = server.value()->port();

  // Warm up (weights packed, slots' caches touched), then measure what the load adds.
  {
    std::mt19937 rng(1);
    Tally warm;
    for (int i = 0; i < 8; ++i) OneRequest(port, rng, warm);
  }
  const uint64_t anon_before = engine.value()->MeasureMemory().anon_bytes;

  Tally tally;
  std::atomic<int> next{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      while (next.fetch_add(1) < requests) OneRequest(port, rng, tally);
    });
  }
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (const std::string& p : tally.problems) ADD_FAILURE() << p;
  EXPECT_EQ(tally.bad, 0);
  EXPECT_EQ(tally.ok + tally.busy + tally.hung_up + tally.bad, requests);
  // The rest hung up (a quarter) or were turned away (the queue holds 32 of 64 clients): how many
  // depends on the machine's speed, so only some answers are required.
  EXPECT_GE(tally.ok, o.parallel);

  // Idle again: every slot free, nothing queued, and the next request is answered.
  httplib::Client c("127.0.0.1", port);
  std::string metrics;
  for (int i = 0; i < 300; ++i) {
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    metrics = m->body;
    if (metrics.find("gemlet_requests_processing 0\n") != std::string::npos &&
        metrics.find("gemlet_requests_deferred 0\n") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(metrics.find("gemlet_requests_processing 0\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gemlet_requests_deferred 0\n"), std::string::npos) << metrics;
  auto last = c.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})",
                     "application/json");
  ASSERT_TRUE(last);
  EXPECT_EQ(last->status, 200) << last->body;

  // Bounded: the slots' caches and workspaces were all made before the load; what it may add is
  // the HTTP threads' stacks and buffers and the allocator's slack, not a per-request leak.
  const uint64_t anon_after = engine.value()->MeasureMemory().anon_bytes;
  const double grown_mib = (static_cast<double>(anon_after) - static_cast<double>(anon_before)) / (1 << 20);
#if !defined(GEMLET_TEST_SANITIZED)
  EXPECT_LT(grown_mib, 64.0) << "anonymous memory grew by " << grown_mib << " MiB over " << requests << " requests";
#endif
  std::sort(tally.latencies.begin(), tally.latencies.end());
  const auto pct = [&](double p) {
    return tally.latencies.empty() ? 0.0 : tally.latencies[static_cast<size_t>(p * (tally.latencies.size() - 1))];
  };
  std::printf("[load] %d requests from %d clients in %.1f s: %d answered, %d turned away (503), %d hung up; "
              "latency p50 %.2f s, p95 %.2f s, max %.2f s; anonymous memory %+.1f MiB\n",
              requests, clients, wall, tally.ok, tally.busy, tally.hung_up, pct(0.5), pct(0.95), pct(1.0), grown_mib);
  server.value()->Stop();
}

}  // namespace
}  // namespace gemlet

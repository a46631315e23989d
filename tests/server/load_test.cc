// Load with faults: 64 clients at once send short requests (chat and text, streamed and not) to an
// in-process server; a quarter of them hang up mid-answer, and one in eight is malformed (not JSON,
// nested too deep, a wrong type, an unknown route, a body announced too large). Every request that
// stays gets a whole, valid answer (the queue holds every client: no 503), every malformed one its
// 4xx in OpenAI's shape, the server ends idle with every slot free, and its memory stays bounded;
// the answers are those the same requests get alone (GEMLET_LOAD_CHECKED of them, 40 by default).
// GEMLET_LOAD_REQUESTS sets the number of requests (200 by default; the 1,000-request run of
// bench/RESULTS.md sets it), GEMLET_LOAD_CLIENTS the clients (64).
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
#include <utility>
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
  int ok = 0, busy = 0, hung_up = 0, refused = 0, bad = 0;
  std::vector<std::string> problems;
  std::vector<double> latencies;  // of whole answers, seconds
  // Each whole answer's text by its request (the body without "stream"): checked afterwards against
  // the same request sent alone (seeded sampling repeats whatever the load: docs/determinism.md).
  // Only the first `keep_answers`: the process measured is the clients' as well as the server's,
  // and every answer kept would count as the server's memory growth.
  std::vector<std::pair<std::string, std::string>> answers;
  size_t keep_answers = 0;
  void Problem(const std::string& p) {
    std::lock_guard<std::mutex> lock(mutex);
    ++bad;
    if (problems.size() < 10) problems.push_back(p);
  }
};

// A malformed request and the status it must get; the answer must be OpenAI's error object.
void OneMalformedRequest(int port, std::mt19937& rng, Tally& tally) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const int kind = static_cast<int>(rng() % 5);
  const int want = kind == 3 ? 404 : kind == 4 ? 413 : 400;
  httplib::Result r = [&] {
    switch (kind) {
      case 0: return c.Post("/v1/chat/completions", "{\"messages\": [", "application/json");
      case 1: return c.Post("/v1/chat/completions", std::string(5000, '[') + std::string(5000, ']'), "application/json");
      case 2: return c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": "many"})", "application/json");
      case 3: return c.Post("/v1/no/such/route", "{}", "application/json");
      default: {  // a body announced far too large, refused from the head (no body sent)
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/chat/completions";
        req.set_header("Content-Length", "100000000");
        req.set_header("Content-Type", "application/json");
        return c.send(req);
      }
    }
  }();
  if (!r) return tally.Problem("no response to malformed request " + std::to_string(kind));
  json j = json::parse(r->body, nullptr, false);
  if (r->status != want || j.is_discarded() || !j.contains("error") || !j["error"]["message"].is_string()) {
    return tally.Problem("malformed request " + std::to_string(kind) + ": HTTP " + std::to_string(r->status) + " " +
                         r->body.substr(0, 200));
  }
  std::lock_guard<std::mutex> lock(tally.mutex);
  ++tally.refused;
}

// The answer's text: a completion's, or a stream's deltas put together ("" when unreadable).
std::string AnswerText(const std::string& received, bool chat, bool stream) {
  auto text_of = [&](const json& choice) -> std::string {
    const json& part = chat ? (stream ? choice["delta"] : choice["message"]) : choice;
    const char* field = chat ? "content" : "text";
    return part.contains(field) && part[field].is_string() ? part[field].get<std::string>() : std::string();
  };
  if (!stream) {
    json j = json::parse(received, nullptr, false);
    return j.is_discarded() ? std::string() : text_of(j["choices"][0]);
  }
  std::string text;
  for (size_t at = received.find("data: "); at != std::string::npos; at = received.find("data: ", at + 6)) {
    const size_t end = received.find('\n', at);
    json j = json::parse(received.substr(at + 6, end - at - 6), nullptr, false);
    if (!j.is_discarded() && j.contains("choices") && !j["choices"].empty()) text += text_of(j["choices"][0]);
  }
  return text;
}

// One request: returns after the answer, a 503, or hanging up on purpose.
void OneRequest(int port, std::mt19937& rng, Tally& tally) {
  if (rng() % 8 == 0) return OneMalformedRequest(port, rng, tally);
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
  json key = body;
  key.erase("stream");
  std::lock_guard<std::mutex> lock(tally.mutex);
  ++tally.ok;
  tally.latencies.push_back(seconds);
  if (tally.answers.size() < tally.keep_answers) {
    tally.answers.emplace_back((chat ? "chat " : "text ") + key.dump(), AnswerText(received, chat, stream));
  }
}

// Up to `limit` of the answers given under load against the same requests sent alone, one at a time.
void ExpectAnswersAsAlone(int port, const Tally& tally, size_t limit) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  size_t checked = 0, with_text = 0;
  for (size_t i = 0; i < tally.answers.size() && i < limit; ++i, ++checked) {
    const auto& [key, text] = tally.answers[i];
    with_text += !text.empty();
    const bool chat = key.rfind("chat ", 0) == 0;
    auto r = c.Post(chat ? "/v1/chat/completions" : "/v1/completions", key.substr(5), "application/json");
    ASSERT_TRUE(r && r->status == 200) << key;
    EXPECT_EQ(AnswerText(r->body, chat, false), text) << "under load vs alone: " << key;
  }
  EXPECT_GT(with_text, checked / 2) << "the answers' texts were not read (streams and completions alike)";
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
  // Every client can wait for a slot (twice over: a client that hung up holds its place until its
  // job is dropped): each request gets its answer, no 503.
  o.queue_size = 2 * clients;
  o.slot.n_ctx = 256;
  // A handler thread for each client, as many as the warm-up round below uses. Each handler thread
  // keeps its own allocator caches (glibc's per-thread tcache and arena, up to ~200 KiB a thread),
  // filled as it meets requests of each size: bounded (with one arena and no tcache the same run
  // grows by 0.1 MiB), and the warm-up fills most of them, so that the memory check below sees what
  // requests leave behind rather than caches met late.
  o.http_threads = EnvInt("GEMLET_LOAD_HTTP_THREADS", clients + 8);
  auto server = Server::Create(engine.value(), o);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.value()->Start().ok());
  const int port = server.value()->port();

  // Runs `n` requests from `clients` threads at once.
  const auto run = [&](int n, int seed, Tally& tally) {
    std::atomic<int> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(seed + t);
        while (next.fetch_add(1) < n) OneRequest(port, rng, tally);
      });
    }
    for (auto& th : threads) th.join();
  };
  // Warm up with the same mix at the same concurrency (weights packed, slots' caches touched, the
  // handler threads and their allocator caches made), then measure what the load adds.
  {
    Tally warm;
    run(4 * clients, 1, warm);
  }
  const uint64_t anon_before = engine.value()->MeasureMemory().anon_bytes;
  const uint64_t rss_before = MeasureProcessMemory().rss_bytes;

  Tally tally;
  const size_t checked = static_cast<size_t>(EnvInt("GEMLET_LOAD_CHECKED", 40));
  tally.keep_answers = checked;
  tally.latencies.reserve(static_cast<size_t>(requests));
  const auto start = std::chrono::steady_clock::now();
  run(requests, 1000, tally);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (const std::string& p : tally.problems) ADD_FAILURE() << p;
  EXPECT_EQ(tally.bad, 0);
  EXPECT_EQ(tally.busy, 0) << "the queue holds every client";
  EXPECT_EQ(tally.ok + tally.hung_up + tally.refused, requests) << "every request answered, refused or hung up on";
  EXPECT_GT(tally.refused, 0);

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
  // Every answer was the one its request gets alone (a sample: each costs a request).
  ASSERT_GT(tally.answers.size(), 10u);
  ExpectAnswersAsAlone(port, tally, checked);

  // Bounded: the slots' caches and workspaces were all made before the load; what it may add is
  // the HTTP threads' stacks and buffers and the allocator's slack, not a per-request leak.
  const uint64_t anon_after = engine.value()->MeasureMemory().anon_bytes;
  const uint64_t rss_after = MeasureProcessMemory().rss_bytes;
  const double grown_mib = (static_cast<double>(anon_after) - static_cast<double>(anon_before)) / (1 << 20);
  const double rss_growth = static_cast<double>(rss_after) / static_cast<double>(rss_before) - 1;
#if !defined(GEMLET_TEST_SANITIZED)
  EXPECT_LT(grown_mib, 64.0) << "anonymous memory grew by " << grown_mib << " MiB over " << requests << " requests";
  EXPECT_LT(rss_growth, 0.10) << "RSS " << (rss_before >> 20) << " -> " << (rss_after >> 20) << " MiB over " << requests
                              << " requests";
#endif
  std::sort(tally.latencies.begin(), tally.latencies.end());
  const auto pct = [&](double p) {
    return tally.latencies.empty() ? 0.0 : tally.latencies[static_cast<size_t>(p * (tally.latencies.size() - 1))];
  };
  std::printf("[load] %d requests from %d clients in %.1f s: %d answered, %d malformed refused, %d hung up; "
              "latency p50 %.2f s, p95 %.2f s, max %.2f s; anonymous memory %+.1f MiB, RSS %+.1f%%\n",
              requests, clients, wall, tally.ok, tally.refused, tally.hung_up, pct(0.5), pct(0.95), pct(1.0), grown_mib,
              100 * rss_growth);
  server.value()->Stop();
}

}  // namespace
}  // namespace gemlet

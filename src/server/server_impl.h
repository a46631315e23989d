// What the server's files share (server.cc, transcription.cc): Server::Impl, the routed
// cpp-httplib server it runs on the front's connections, and the small helpers of its answers.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gemlet/server.hpp"
#include "server/http_front.h"
#include "server/image_cache.h"
#include "server/protocol.h"
#include "server/scheduler.h"

namespace gemlet {
namespace server {

inline constexpr const char* kJson = "application/json; charset=utf-8";

inline int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A generation that failed after it was queued: the request's fault (400), the server stopping or
// the job cancelled (503), else the server's (500).
inline ApiError FailedReply(const Status& s) {
  const int status = s.code() == StatusCode::kCancelled ? 503 : s.code() == StatusCode::kInvalidArgument ? 400 : 500;
  return MakeError(status, s.message(), status == 400 ? "invalid_request_error" : "server_error");
}

inline bool WriteRaw(httplib::DataSink& sink, const std::string& text) { return sink.write(text.data(), text.size()); }

// cpp-httplib's routes and request handling (its parser, the pre- and post-routing handlers), run
// on the connections server::HttpFront hands over instead of on connections of its own.
class RoutedServer : public httplib::Server {
 public:
  // While serving, cpp-httplib's streamed answers look at the listening socket to tell whether the
  // server is shutting down; the front holds the real one, so this stands in for it.
  void MarkServing(bool serving) { svr_sock_ = serving ? kServing : INVALID_SOCKET; }
  bool Handle(httplib::Stream& stream, bool close_after) {
    bool closed = false;
    return process_request(stream, close_after, closed, nullptr) && !closed;
  }

 private:
  static constexpr socket_t kServing = 0;  // never closed: cpp-httplib closes it only after its own listen
};

}  // namespace server

struct Server::Impl {
  ServerOptions options;
  ModelInfo info;  // of the model file: the same whether loaded or not
  int slot_ctx = 0;
  std::string model_name;
  server::Limits limits;
  std::unique_ptr<server::ImageCache> images;  // encoded images by their bytes' hash (model_mutex: cleared on unload)
  std::unique_ptr<server::AudioCache> clips;   // encoded clips (their pieces), the same way
  server::RoutedServer http;
  std::unique_ptr<server::HttpFront> front;

  // The model, while loaded: the engine and the scheduler over its slots. Every request that needs
  // them holds a lease; with none held for idle_unload_seconds both are let go, and the next
  // Acquire loads them again.
  std::mutex model_mutex;
  std::shared_ptr<Engine> engine;
  std::shared_ptr<server::Scheduler> scheduler;
  // options.adapters loaded for `engine` (in order: their ids), and the scales requests without a
  // "lora" field run them at (POST /lora-adapters sets them; adapter_mutex).
  std::vector<std::shared_ptr<const Adapter>> adapters;
  std::mutex adapter_mutex;
  std::vector<float> adapter_scales;
  // The adapters a request runs: its "lora" list over the loaded ones, else the current scales.
  // 400 for an id no adapter has.
  Result<std::vector<AdapterUse>> RequestAdapters(const std::vector<std::shared_ptr<const Adapter>>& loaded,
                                                  const server::CompletionRequest& r);
  void AddLoraRoutes();
  int leases = 0;
  std::chrono::steady_clock::time_point last_release = std::chrono::steady_clock::now();
  server::SchedulerStats retired;  // counters of the schedulers unloaded so far
  uint64_t loads = 0, unloads = 0;
  std::condition_variable idle_wake;
  std::thread idle_thread;

  struct Lease {
    Impl* owner;
    std::shared_ptr<Engine> engine;
    std::shared_ptr<server::Scheduler> scheduler;
    std::vector<std::shared_ptr<const Adapter>> adapters;  // engine's
    Lease(Impl* o, std::shared_ptr<Engine> e, std::shared_ptr<server::Scheduler> s,
          std::vector<std::shared_ptr<const Adapter>> a)
        : owner(o), engine(std::move(e)), scheduler(std::move(s)), adapters(std::move(a)) {}
    ~Lease() { owner->Release(); }
  };
  // The loaded model (loading it again if it was unloaded), held until the lease is dropped.
  Result<std::shared_ptr<Lease>> Acquire();
  void Release();
  Status LoadLocked();  // model_mutex held
  void IdleLoop();
  std::optional<std::chrono::duration<double>> IdleLimitLocked() const;
  void UnloadLocked(const std::string& why);  // model_mutex held, the model loaded
  std::optional<double> keep_alive;  // seconds, from the last request that gave one (model_mutex)
  // Ollama's keep_alive for the model after this request; 400 when the server cannot load it again.
  std::optional<server::ApiError> KeepAlive(const server::CompletionRequest& r);
  void OllamaLoad(httplib::Response& res, const server::CompletionRequest& r, bool chat);

  int port = 0;
  int64_t created = server::UnixNow();
  std::atomic<uint64_t> next_id{1};

  std::mutex state_mutex;
  std::condition_variable state_changed;
  bool running = false;
  bool stopped = false;

  std::mutex metrics_mutex;
  std::map<std::pair<std::string, int>, uint64_t> responses;  // (route label, status) -> count
  std::set<std::string> route_paths;  // the fixed paths routed, filled by Routes before listening
  std::string machine_hostname;

  void Routes();
  // After every route: the metrics, the log line (server::Admit runs before).
  void Account(const httplib::Request& req, httplib::Response& res);
  // /metrics' label for a request: the route's path or template, else "other", so that probed
  // paths cannot grow the table.
  std::string RouteLabel(const httplib::Request& req) const;
  template <class Handler>
  void Get(const std::string& path, Handler handler) {
    route_paths.insert(path);
    http.Get(path, handler);
  }
  template <class Handler>
  void Post(const std::string& path, Handler handler) {
    route_paths.insert(path);
    http.Post(path, handler);
  }
  std::string NewId(const char* prefix) { return std::string(prefix) + std::to_string(created) + "-" + std::to_string(next_id++); }

  // The dialects' handlers share this: parse, tokenize, queue, answer.
  enum class Dialect { kOpenAiChat, kOpenAiText, kOllamaChat, kOllamaGenerate, kTask };
  void Generate(const httplib::Request& req, httplib::Response& res, Dialect dialect);
  // The request's images encoded (through the cache) into their content parts.
  std::optional<server::ApiError> EncodeImages(const Engine& engine, server::CompletionRequest* r);
  // Its clips, each into its part, or a long one's pieces into parts in a row (transcription.cc).
  std::optional<server::ApiError> EncodeAudio(const Engine& engine, server::CompletionRequest* r);
  // POST /v1/audio/transcriptions (transcription.cc).
  void Transcribe(const httplib::Request& req, httplib::Response& res);
  std::optional<server::ApiError> Prompt(const Engine& engine, const server::CompletionRequest& r, gemlet::Prompt* prompt) const;
  void StreamOpenAi(httplib::Response& res, std::vector<std::shared_ptr<server::Job>> jobs, server::CompletionRequest r, server::ResponseContext c,
                    std::shared_ptr<Lease> lease);
  void StreamOllama(httplib::Response& res, std::shared_ptr<server::Job> job, server::CompletionRequest r, server::ResponseContext c,
                    std::shared_ptr<Lease> lease);
  void Tokenize(const httplib::Request& req, httplib::Response& res);
  void Detokenize(const httplib::Request& req, httplib::Response& res);
  std::string Metrics();
  nlohmann::json ModelJson() const;
};

}  // namespace gemlet

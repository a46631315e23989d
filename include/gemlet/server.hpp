// gemlet's local HTTP server: OpenAI's chat and text completions (streamed as server-sent events or
// not), models, llama-server's /health, /metrics, /tokenize and /detokenize, and Ollama's /api/chat,
// /api/generate, /api/tags and /api/show, over the public API (gemlet.hpp). `parallel` requests are
// decoded at once, one forward for all of them per token. Images (OpenAI's image_url data URLs,
// Ollama's images) when the engine has a vision tower; audio (OpenAI's input_audio parts and
// /v1/audio/transcriptions) when it has an audio tower.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gemlet/export.h"
#include "gemlet/gemlet.hpp"

namespace gemlet {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback by default: nothing else on the network reaches it
  int port = 8080;                 // 0: a free port, chosen at Start (Server::port())
  // Non-empty: every route but /health and the web page wants "Authorization: Bearer <api_key>".
  std::string api_key;
  // A host that is not loopback with no api_key is refused by Create (anyone on the network could
  // use the model) unless this says that is meant.
  bool allow_no_auth = false;
  int parallel = 4;                // requests decoded at once, each in a slot with its own KV cache
  SessionOptions slot;             // each slot's session: n_ctx (its context), KV cache type, threads
  int queue_size = 64;             // requests waiting for a slot; more get 503 with Retry-After
  size_t max_body_bytes = 4u << 20;  // larger request bodies get 413
  // Images (a model with a vision tower: EngineOptions::mmproj_path). They come inline, base64 in
  // the body, so such a server takes bodies up to max_image_body_bytes instead; one image's file
  // may be max_image_bytes (more: 413), and its pixels the decoder's limit (50 M; more: 400).
  size_t max_image_body_bytes = 32u << 20;
  size_t max_image_bytes = 20u << 20;
  ImageOptions image{};  // how images are encoded (Gemma 4: max_soft_tokens)
  // Encoded images kept for later requests (their embeddings' bytes; 0: none kept): a conversation
  // resent every turn encodes its images once, and the slots' prefix reuse keeps their KV.
  size_t image_cache_bytes = 64u << 20;
  // Audio (a model with an audio tower: EngineOptions::mmproj_path of Gemma 4 E2B/E4B): OpenAI's
  // input_audio parts and POST /v1/audio/transcriptions. One clip's file may be max_audio_bytes (more:
  // 413; a server that takes audio takes bodies that hold one, base64 too) and max_audio_seconds long
  // (more: 413); a clip over the model's 30 s is cut at its pauses into pieces (Engine::EncodeAudioPieces).
  size_t max_audio_bytes = 25u << 20;  // OpenAI's limit for an upload
  double max_audio_seconds = 600.0;
  // Encoded clips kept for later requests (their pieces' embeddings; 0: none kept).
  size_t audio_cache_bytes = 64u << 20;
  int max_tokens = 4096;           // the most tokens a request may ask for (more: 400)
  // LoRA adapters (llama-server's --lora), loaded with the model (again after an idle unload). Every
  // request runs them at these scales, or at its own: a "lora" field of [{"id": N, "scale": S}]
  // (adapters it does not list at 0), as llama-server takes it. GET /lora-adapters lists them with
  // their ids; POST /lora-adapters (the same list) sets the scales requests without a "lora" get.
  // Requests with different adapters share the decoding steps; a slot's cache is reused only by a
  // request with the same adapters and scales.
  struct Adapter {
    std::string path;
    float scale = 1.0f;
  };
  std::vector<Adapter> adapters;
  bool adapters_any_base = false;  // Engine::LoadAdapter's any_base
  std::string model_name;          // the id /v1/models lists; empty: the file name without .gguf
  // Browsers. Any web page the user opens can send requests to a local server, so a request
  // whose Origin is not this server's own page gets 403 unless it matches one of these patterns
  // ('*' matches any run of characters: "http://localhost:*", "chrome-extension://*", "app://*",
  // "tauri://*", "null", or "*" for any); an allowed origin gets the CORS headers and preflights.
  std::vector<std::string> cors_origins;
  // A request whose Host is a name (not an IP literal) other than localhost, *.localhost, this
  // machine's hostname (NAME.local too), host.docker.internal, host.containers.internal or `host`
  // gets 403 (DNS rebinding: a page on a name that now resolves to 127.0.0.1 sends that name)
  // unless it matches one of these patterns ("*": any name).
  std::vector<std::string> allowed_hosts;
  // Connections. One thread reads every request head, so idle, slow and trickling clients hold
  // no handler; a connection gets one of `http_threads` once its head has arrived.
  int http_threads = 0;            // requests handled at once; 0: parallel + queue_size + 16, at least 32
  int max_connections = 512;       // open at once; one more gets 503 and is closed
  int head_timeout_seconds = 10;   // a request head must arrive within this from its first byte (else 408)
  // One line per request ("POST /v1/chat/completions 200 0.41 s"); null: none.
  std::function<void(const std::string& line)> log{};
  // > 0: after this many seconds without a request the model is unloaded (the engine and the
  // slots' KV caches: what an idle laptop or phone should not hold), and `reload` loads it again
  // for the next request, which waits for it. The memory is given back only if the server holds
  // the engine alone: pass it to Create and keep no other reference. Needs `reload`.
  int idle_unload_seconds = 0;
  std::function<Result<std::shared_ptr<Engine>>()> reload{};
};

class GEMLET_CXX_API Server {
 public:
  static Result<std::unique_ptr<Server>> Create(std::shared_ptr<Engine> engine, const ServerOptions& options);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port and serves on background threads until Stop.
  Status Start();
  int port() const;  // the bound port (after Start)
  // Stops accepting, cancels the requests in flight (their streams end) and joins the threads.
  // Thread-safe; a second call does nothing.
  void Stop();
  // Blocks until Stop is called (from another thread or a signal handler's thread).
  void Wait();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemlet

// `gemlet serve`: the local OpenAI- and Ollama-compatible server (include/gemlet/server.hpp) until
// SIGINT or SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "cli_common.h"
#include "command.h"
#include "gemlet/server.hpp"

namespace gemlet::cli {
namespace {

// The key from a file: its first line, without the newline (so `echo KEY > file` works).
Result<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read the API key file '" + path + "'");
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) return Status::Error("the API key file '" + path + "' is empty");
  return key;
}

int RunServe(int argc, char** argv) {
  CLI::App app{"Serve the model over HTTP: OpenAI's /v1/chat/completions, /v1/completions and /v1/models, "
               "Ollama's /api/chat and /api/generate, /health, /metrics and a chat page at /. With --mmproj the "
               "model sees images: OpenAI's image_url parts (data: URLs) and Ollama's images; and, where the mmproj "
               "has an audio tower (Gemma 4 E2B, E4B), hears: OpenAI's input_audio parts and /v1/audio/transcriptions"};
  app.name("gemlet serve");
  ModelOptions mo;
  ServerOptions so;
  std::string api_key_file, alias, image_cache = "64M", max_image = "20M", audio_cache = "64M", max_audio = "25M";
  int parallel = 4, idle_unload = 0;
  AddModelOptions(app, &mo);
  app.get_option("--mmproj")->description(
      "the model's vision and audio towers (llama.cpp's mmproj GGUF): requests may then carry images, OpenAI's "
      "image_url parts as data: URLs (remote URLs are refused: nothing leaves the device) and Ollama's base64 images, "
      "and with an audio tower clips: input_audio parts and uploads to /v1/audio/transcriptions");
  const auto size_check = [](const std::string& v) {
    return v == "0" || ParseByteSize(v) > 0 ? std::string() : "'" + v + "' is not a size such as 64M or 1G";
  };
  app.add_option("--image-cache", image_cache,
                 "encoded images kept for later requests (a conversation resent every turn encodes its images once; "
                 "0: none kept)")
      ->capture_default_str()->check(size_check);
  app.add_option("--max-image", max_image,
                 "the largest image file a request may carry (more: 413); a body with images may be 32M, or the "
                 "base64 of this and 4M more")
      ->capture_default_str()->check([](const std::string& v) {
        return ParseByteSize(v) > 0 ? std::string() : "'" + v + "' is not a size such as 20M";
      });
  app.add_option("--audio-cache", audio_cache, "encoded clips kept for later requests (0: none kept)")
      ->capture_default_str()->check(size_check);
  app.add_option("--max-audio", max_audio,
                 "the largest audio file a request may carry (more: 413); a body with audio may be the base64 of "
                 "this and 4M more")
      ->capture_default_str()->check([](const std::string& v) {
        return ParseByteSize(v) > 0 ? std::string() : "'" + v + "' is not a size such as 25M";
      });
  app.add_option("--max-audio-seconds", so.max_audio_seconds,
                 "the longest clip a request may carry (more: 413); one over the model's 30 s is cut at its pauses")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--host", so.host, "address to listen on (default 127.0.0.1: this machine only)")->capture_default_str();
  app.add_option("--port", so.port, "port (0: any free port; the chosen one is printed)")->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--api-key", so.api_key, "require 'Authorization: Bearer KEY' on every API route");
  app.add_option("--api-key-file", api_key_file, "the same, the key read from the first line of FILE");
  app.add_option("-n,--parallel", parallel, "requests decoded at once (slots; each holds a context)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--ctx-size", mo.ctx, "context per slot, in tokens (the same as -c)")->check(CLI::PositiveNumber);
  app.add_option("--queue", so.queue_size, "requests that may wait for a slot; beyond, 503 with Retry-After")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--max-tokens", so.max_tokens, "the most tokens one request may ask for")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-connections", so.max_connections,
                 "connections open at once; one more is answered 503 and closed (idle and slow ones count, "
                 "but hold no thread)")
      ->capture_default_str()->check(CLI::Range(1, 60000));
  app.add_option("--alias", alias, "the model's id in /v1/models (default: the file's name)");
  app.add_option("--cors-origin", so.cors_origins,
                 "let web pages of this origin call the API (repeatable; '*' matches any run of characters: "
                 "'http://localhost:*', 'chrome-extension://*', 'tauri://*'; '*' alone: any page). Without it, "
                 "only the server's own chat page may");
  app.add_option("--allow-host", so.allowed_hosts,
                 "answer requests addressed to this host name too (repeatable, '*' wildcards; by default IP addresses, "
                 "localhost, this machine's hostname and host.docker.internal)");
  app.add_flag("--no-auth", so.allow_no_auth, "listen on a non-loopback --host without an API key (anyone on the network may use it)");
  app.add_option("--idle-unload", idle_unload,
                 "unload the model after SECONDS without a request, giving its memory back (0: never); "
                 "the next request loads it again")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (!so.api_key.empty() && !api_key_file.empty()) return UsageError("give --api-key or --api-key-file, not both");
  if (!api_key_file.empty()) {
    Result<std::string> key = ReadKeyFile(api_key_file);
    if (!key.ok()) return Fail(key.message());
    so.api_key = key.value();
  }
  if (so.allow_no_auth && so.api_key.empty()) {
    std::fprintf(stderr, "gemlet: warning: listening on %s without an API key (--no-auth)\n", so.host.c_str());
  }

  mo.sessions = parallel;
  auto loaded = LoadForGeneration(mo);
  if (!loaded.ok()) return Fail(loaded.message());
  LoadedModel& m = loaded.value();
  so.parallel = parallel;
  so.slot = m.session;
  so.slot.progress = nullptr;  // the scheduler's thread evaluates: no progress lines on the terminal
  // --lora: the server's adapters (ids in flag order), loaded with the model and chosen per request.
  so.slot.adapters.clear();
  for (const AdapterUse& a : m.session.adapters) so.adapters.push_back({a.adapter->path(), a.scale});
  so.adapters_any_base = mo.lora_any_base;
  mo.lora.clear();  // a reload loads the model; the server loads its adapters for it
  Result<std::string> path = ResolveModelPath(mo.model_path, mo.store_dir);
  so.model_name = !alias.empty() ? alias : std::filesystem::path(path.ok() ? path.value() : "gemlet").stem().string();
  so.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  so.idle_unload_seconds = idle_unload;
  so.image.max_soft_tokens = mo.max_soft_tokens;
  so.image.pan_and_scan.enabled = mo.pan_and_scan;
  so.image_cache_bytes = image_cache == "0" ? 0 : static_cast<size_t>(ParseByteSize(image_cache));
  so.max_image_bytes = static_cast<size_t>(ParseByteSize(max_image));
  so.audio_cache_bytes = audio_cache == "0" ? 0 : static_cast<size_t>(ParseByteSize(audio_cache));
  so.max_audio_bytes = static_cast<size_t>(ParseByteSize(max_audio));
  // base64 writes 4 characters for 3 bytes: room for the largest image and the rest of the body.
  so.max_image_body_bytes = std::max(so.max_image_body_bytes, so.max_image_bytes / 3 * 4 + (4u << 20));
  // Always able to load the model again: --idle-unload and Ollama's keep_alive unload it.
  so.reload = [mo]() -> Result<std::shared_ptr<Engine>> {
    auto again = LoadForGeneration(mo);
    if (!again.ok()) return again.status();
    return std::move(again.value().engine);
  };

  // SIGINT/SIGTERM end the server from a thread of ours (a signal handler may do almost nothing).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: they all inherit it
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-answer is a failed write, not the end of the process

  // The server holds the engine alone, so that unloading it when idle gives its memory back.
  auto server = Server::Create(std::move(m.engine), so);
  if (!server.ok()) return Fail(server.message());
  if (Status s = server.value()->Start(); !s.ok()) return Fail(s.message());
  std::printf("gemlet serve: %s, %d slot%s of %d tokens, listening on http://%s:%d\n", so.model_name.c_str(), parallel,
              parallel == 1 ? "" : "s", so.slot.n_ctx, so.host.c_str(),
              server.value()->port());
  std::fflush(stdout);
  std::thread waiter([&server, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "gemlet serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.value()->Stop();
  });
  server.value()->Wait();
  // Stopped by the signal thread; wake it if it is still waiting (Stop came from elsewhere).
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return 0;
}

CommandRegistrar serve_command("serve", "serve the model over HTTP (OpenAI and Ollama APIs, a chat page)", RunServe);

}  // namespace
}  // namespace gemlet::cli

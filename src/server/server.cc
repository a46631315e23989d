// The HTTP side of gemlet serve (cpp-httplib): routes, the API key, CORS, limits, and the answers,
// streamed as server-sent events (OpenAI) or NDJSON (Ollama) while the scheduler generates.
#include "gemlet/server.hpp"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "server/admission.h"
#include "server/http_front.h"
#include "server/http_guard.h"
#include "server/image_cache.h"
#include "server/protocol.h"
#include "server/scheduler.h"
#include "server/server_impl.h"
#include "server/web/web_assets.h"

namespace gemlet {

using nlohmann::json;
using server::ApiError;
using server::CompletionRequest;
using server::Job;
using server::MakeError;

namespace {

using server::FailedReply;
using server::kJson;
using server::UnixNow;
using server::WriteRaw;

constexpr int kMinHttpThreads = 32;

bool WriteEvent(httplib::DataSink& sink, const json& j) { return WriteRaw(sink, "data: " + j.dump() + "\n\n"); }
bool WriteLine(httplib::DataSink& sink, const json& j) { return WriteRaw(sink, j.dump() + "\n"); }

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Create(std::shared_ptr<Engine> engine, const ServerOptions& options) {
  if (!engine) return Status::Error(StatusCode::kInvalidArgument, "no engine");
  if (options.parallel < 1 || options.parallel > 64) {
    return Status::Error(StatusCode::kInvalidArgument, "parallel must be in [1, 64]");
  }
  if (options.port < 0 || options.port > 65535) return Status::Error(StatusCode::kInvalidArgument, "port must be in [0, 65535]");
  if (options.queue_size < 0) return Status::Error(StatusCode::kInvalidArgument, "queue_size must be >= 0");
  if (options.max_tokens < 1) return Status::Error(StatusCode::kInvalidArgument, "max_tokens must be >= 1");
  if (options.idle_unload_seconds < 0) return Status::Error(StatusCode::kInvalidArgument, "idle_unload_seconds must be >= 0");
  if (options.idle_unload_seconds > 0 && !options.reload) {
    return Status::Error(StatusCode::kInvalidArgument, "idle_unload_seconds needs a reload function to load the model again");
  }
  if (!server::IsLoopbackAddress(options.host) && options.api_key.empty() && !options.allow_no_auth) {
    return Status::Error(StatusCode::kInvalidArgument,
                         "listening on " + options.host + " without an API key would let anyone on the network use the "
                         "model: give --api-key or --api-key-file (or --no-auth if that is meant)");
  }
  auto impl = std::make_unique<Impl>();
  impl->info = engine->info();
  impl->engine = std::move(engine);
  impl->options = options;
  impl->model_name = !options.model_name.empty() ? options.model_name : !impl->info.name.empty() ? impl->info.name : "gemlet";
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) == 0) impl->machine_hostname = hostname;
  impl->limits.max_tokens = options.max_tokens;
  impl->limits.max_image_bytes = options.max_image_bytes;
  impl->limits.max_audio_bytes = options.max_audio_bytes;
  if (!(options.max_audio_seconds > 0)) return Status::Error(StatusCode::kInvalidArgument, "max_audio_seconds must be > 0");
  // Images and clips come inline in the body (base64; a transcription's upload as it is): a server
  // that takes them takes larger bodies.
  if (impl->info.takes_images) impl->options.max_body_bytes = std::max(options.max_body_bytes, options.max_image_body_bytes);
  if (impl->info.takes_audio) {
    impl->options.max_body_bytes = std::max({impl->options.max_body_bytes, options.max_image_body_bytes,
                                             options.max_audio_bytes / 3 * 4 + (size_t{4} << 20)});
  }
  for (const ServerOptions::Adapter& a : options.adapters) {
    if (!std::isfinite(a.scale)) return Status::Error(StatusCode::kInvalidArgument, "adapter '" + a.path + "' has a non-finite scale");
    impl->adapter_scales.push_back(a.scale);
  }
  impl->images = std::make_unique<server::ImageCache>(options.image_cache_bytes);
  impl->clips = std::make_unique<server::AudioCache>(options.audio_cache_bytes);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::Start() {
  Impl& d = *impl_;
  {
    std::lock_guard<std::mutex> lock(d.state_mutex);
    if (d.running || d.stopped) return Status::Error(StatusCode::kInvalidArgument, "the server was started already");
  }
  {
    std::lock_guard<std::mutex> lock(d.model_mutex);
    if (Status s = d.LoadLocked(); !s.ok()) return s;
  }
  // Handlers are for requests whose head has arrived (server::HttpFront reads heads on one
  // thread): enough for every slot and queued request, a streamed answer holding one to its end,
  // and the quick routes beside them.
  server::FrontOptions front;
  front.workers = d.options.http_threads > 0 ? d.options.http_threads
                                             : std::max(kMinHttpThreads, d.options.parallel + d.options.queue_size + 16);
  front.max_connections = std::max(1, d.options.max_connections);
  front.head_timeout = std::chrono::seconds(std::max(1, d.options.head_timeout_seconds));
  d.http.set_payload_max_length(d.options.max_body_bytes);
  // Only for the Keep-Alive header cpp-httplib writes: the front enforces both.
  d.http.set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(front.idle_timeout).count());
  d.http.set_keep_alive_max_count(static_cast<size_t>(front.max_requests_per_connection));
  d.Routes();
  auto listening = server::HttpFront::Listen(d.options.host, d.options.port, front,
                                             [&d](httplib::Stream& stream, bool close_after) {
                                               return d.http.Handle(stream, close_after);
                                             });
  if (!listening.ok()) {
    std::lock_guard<std::mutex> lock(d.model_mutex);
    d.scheduler->Stop();
    return Status::Error(listening.status().message() + " (in use, or not an address of this machine)");
  }
  d.front = std::move(listening).value();
  d.port = d.front->port();
  {
    std::lock_guard<std::mutex> lock(d.state_mutex);
    d.running = true;
  }
  d.http.MarkServing(true);
  d.front->Start();
  if (d.options.reload) d.idle_thread = std::thread([&d] { d.IdleLoop(); });
  return Status::Ok();
}

int Server::port() const { return impl_->port; }

void Server::Stop() {
  Impl& d = *impl_;
  {
    std::lock_guard<std::mutex> lock(d.state_mutex);
    if (d.stopped) return;
    d.stopped = true;
  }
  d.idle_wake.notify_all();
  if (d.idle_thread.joinable()) d.idle_thread.join();
  // The scheduler first: every job ends, so the handlers streaming them return and the HTTP
  // threads can be joined. Not under model_mutex: those handlers release their leases.
  std::shared_ptr<server::Scheduler> scheduler;
  {
    std::lock_guard<std::mutex> lock(d.model_mutex);
    scheduler = d.scheduler;
  }
  if (scheduler) scheduler->Stop();
  d.http.MarkServing(false);
  if (d.front) d.front->Stop();
  {
    std::lock_guard<std::mutex> lock(d.state_mutex);
    d.running = false;
  }
  d.state_changed.notify_all();
}

void Server::Wait() {
  std::unique_lock<std::mutex> lock(impl_->state_mutex);
  impl_->state_changed.wait(lock, [this] { return impl_->stopped && !impl_->running; });
}

Status Server::Impl::LoadLocked() {
  if (!engine) {
    if (!options.reload) return Status::Error("the model is not loaded and there is no way to load it");
    Result<std::shared_ptr<Engine>> loaded = options.reload();
    if (!loaded.ok()) return loaded.status();
    engine = std::move(loaded).value();
  }
  adapters.clear();
  for (const ServerOptions::Adapter& a : options.adapters) {
    Result<std::shared_ptr<const Adapter>> adapter = engine->LoadAdapter(a.path, options.adapters_any_base);
    if (!adapter.ok()) return adapter.status();
    adapters.push_back(std::move(adapter).value());
  }
  auto s = std::make_shared<server::Scheduler>(engine, options.parallel, options.slot, options.queue_size);
  if (Status started = s->Start(); !started.ok()) return started;
  scheduler = std::move(s);
  slot_ctx = scheduler->slot_ctx();
  ++loads;
  return Status::Ok();
}

Result<std::shared_ptr<Server::Impl::Lease>> Server::Impl::Acquire() {
  std::lock_guard<std::mutex> lock(model_mutex);
  if (!scheduler) {
    if (options.log) options.log("loading the model again (unloaded when idle)");
    if (Status s = LoadLocked(); !s.ok()) {
      engine.reset();
      return Status::Error("cannot load the model again: " + s.message());
    }
  }
  ++leases;
  return std::make_shared<Lease>(this, engine, scheduler, adapters);
}

void Server::Impl::Release() {
  std::lock_guard<std::mutex> lock(model_mutex);
  --leases;
  last_release = std::chrono::steady_clock::now();
  if (leases == 0 && keep_alive && *keep_alive == 0) idle_wake.notify_all();
}

std::optional<ApiError> Server::Impl::KeepAlive(const CompletionRequest& r) {
  if (!r.keep_alive_seconds) return std::nullopt;
  if (!options.reload && *r.keep_alive_seconds >= 0) {
    ApiError e = MakeError(400, "'keep_alive' needs a server that can load the model again (ServerOptions::reload)");
    e.param = "keep_alive";
    return e;
  }
  std::lock_guard<std::mutex> lock(model_mutex);
  keep_alive = *r.keep_alive_seconds;
  idle_wake.notify_all();
  return std::nullopt;
}

// Ollama's load and unload requests: no prompt, and keep_alive 0 to unload.
void Server::Impl::OllamaLoad(httplib::Response& res, const CompletionRequest& r, bool chat) {
  server::ResponseContext c;
  c.created = UnixNow();
  c.model = model_name;
  const bool unload = r.keep_alive_seconds && *r.keep_alive_seconds == 0;
  if (unload) {
    std::lock_guard<std::mutex> lock(model_mutex);
    if (scheduler && leases == 0) UnloadLocked("keep_alive 0");
    // With requests running, the idle loop unloads it once they are done (keep_alive is 0).
  } else {
    Result<std::shared_ptr<Lease>> lease = Acquire();
    if (!lease.ok()) return server::SendError(res, MakeError(500, lease.message(), "server_error"));
  }
  res.set_content(server::OllamaLoadJson(c, chat, unload).dump(), kJson);
}

// How long the model stays loaded without a lease: the last keep_alive a request gave (Ollama's),
// else idle_unload_seconds; nullopt: for ever. model_mutex held.
std::optional<std::chrono::duration<double>> Server::Impl::IdleLimitLocked() const {
  if (keep_alive) {
    if (*keep_alive < 0) return std::nullopt;
    return std::chrono::duration<double>(*keep_alive);
  }
  if (options.idle_unload_seconds > 0) return std::chrono::duration<double>(options.idle_unload_seconds);
  return std::nullopt;
}

void Server::Impl::UnloadLocked(const std::string& why) {
  retired += scheduler->stats();
  scheduler->Stop();
  scheduler.reset();
  engine.reset();
  adapters.clear();
  images->Clear();
  clips->Clear();
#if defined(__GLIBC__)
  malloc_trim(0);  // glibc keeps freed heap pages mapped; give them back too
#endif
  ++unloads;
  if (options.log) options.log("unloaded the model (" + why + ")");
}

// Unloads the model once no request has held it for the idle limit. A lease is taken before a job
// is queued and dropped after its answer is sent, so no lease means no job anywhere.
void Server::Impl::IdleLoop() {
  std::unique_lock<std::mutex> lock(model_mutex);
  for (;;) {
    const auto limit = IdleLimitLocked();
    const auto nap = limit ? std::min<std::chrono::duration<double>>(*limit, std::chrono::seconds(1)) : std::chrono::seconds(1);
    idle_wake.wait_for(lock, std::max<std::chrono::duration<double>>(nap, std::chrono::milliseconds(10)));
    {
      std::lock_guard<std::mutex> state(state_mutex);
      if (stopped) return;
    }
    const auto now_limit = IdleLimitLocked();
    if (!scheduler || leases > 0 || !now_limit || std::chrono::steady_clock::now() - last_release < *now_limit) continue;
    UnloadLocked(keep_alive ? "keep_alive" : std::to_string(options.idle_unload_seconds) + " s idle");
  }
}

namespace {

// What the model takes: text, images with a vision tower, audio with an audio tower.
json InputModalities(const ModelInfo& info) {
  json m = json::array({"text"});
  if (info.takes_images) m.push_back("image");
  if (info.takes_audio) m.push_back("audio");
  return m;
}

// Ollama's capabilities: "completion"; "vision" with a vision tower, "audio" with an audio tower;
// "tools" and "thinking" where the chat format has them (Gemma 4's).
json OllamaCapabilities(const ModelInfo& info) {
  json c = json::array({"completion"});
  if (info.takes_images) c.push_back("vision");
  if (info.takes_audio) c.push_back("audio");
  if (info.chat_format == "gemma4") {
    c.push_back("tools");
    c.push_back("thinking");
  }
  return c;
}

}  // namespace

json Server::Impl::ModelJson() const {
  return {{"id", model_name},
          {"object", "model"},
          {"created", created},
          {"owned_by", "gemlet"},
          {"input_modalities", InputModalities(info)},
          {"meta",
           {{"architecture", info.architecture},
            {"mmproj_projector", info.mmproj_projector},
            {"n_vocab", info.n_vocab},
            {"n_ctx_train", info.n_ctx_train},
            {"n_ctx", slot_ctx},
            {"n_params", info.n_parameters},
            {"size", info.file_bytes},
            {"file_type", info.file_type}}}};
}

std::string Server::Impl::RouteLabel(const httplib::Request& req) const {
  if (route_paths.count(req.path)) return req.path;
  if (req.path.rfind("/v1/tasks/", 0) == 0) return "/v1/tasks/{name}";
  if (req.method == "GET" && server::FindWebAsset(req.path) != nullptr) return "page";
  return "other";
}

void Server::Impl::Account(const httplib::Request& req, httplib::Response& res) {
  {
    std::lock_guard<std::mutex> lock(metrics_mutex);
    ++responses[{RouteLabel(req), res.status}];
  }
  if (options.log) options.log(req.method + " " + server::LogSafe(req.path) + " " + std::to_string(res.status));
}

void Server::Impl::Routes() {
  // Before routing: Host, Origin (and CORS preflights), the API key. After: the metrics and the log.
  // cpp-httplib runs neither for a body over the size limit, which its error handler answers.
  server::AdmissionOptions admission{options.host, options.allowed_hosts, options.cors_origins, machine_hostname,
                                     options.api_key, options.max_body_bytes};
  http.set_pre_routing_handler([admission](const httplib::Request& req, httplib::Response& res) {
    return server::Admit(req, res, admission) ? httplib::Server::HandlerResponse::Handled
                                              : httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) { Account(req, res); });
  // Unknown routes, oversized bodies (413) and the like: an OpenAI-shaped error when nothing was written.
  http.set_error_handler([limit = options.max_body_bytes, media = info.takes_images || info.takes_audio](
                             const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 404   ? "no route " + server::LogSafe(req.method) + " " + server::LogSafe(req.path)
                          : res.status == 413 ? "the request body is too large (" + std::to_string(limit) + " bytes at most" +
                                                    (media ? ", images and audio included)" : ")")
                                              : "the request failed (HTTP " + std::to_string(res.status) + ")";
    res.set_content(server::ErrorText(MakeError(res.status, message)), kJson);
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    server::SendError(res, MakeError(500, what, "server_error"));
  });

  Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(model_mutex);
    // Unloaded when idle, every slot is idle: the next request loads the model again.
    const server::SchedulerStats s = scheduler ? scheduler->stats() : server::SchedulerStats{options.parallel};
    res.set_content(json({{"status", "ok"},
                          {"slots_idle", s.slots - s.slots_busy},
                          {"slots_processing", s.slots_busy},
                          {"model_loaded", scheduler != nullptr}})
                        .dump(),
                    kJson);
  });
  const auto models = [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(json({{"object", "list"}, {"data", json::array({ModelJson()})}}).dump(), kJson);
  };
  AddLoraRoutes();
  Get("/v1/models", models);
  Get("/models", models);
  const auto chat = [this](const httplib::Request& req, httplib::Response& res) { Generate(req, res, Dialect::kOpenAiChat); };
  const auto text = [this](const httplib::Request& req, httplib::Response& res) { Generate(req, res, Dialect::kOpenAiText); };
  Post("/v1/chat/completions", chat);
  Post("/chat/completions", chat);
  Post("/v1/completions", text);
  Post("/completions", text);
  // The task presets (gemlet/tasks.hpp) for Shortcuts and scripts: POST /v1/tasks/polish {"input": ...}.
  http.Post(R"(/v1/tasks/([a-z_]+))", [this](const httplib::Request& req, httplib::Response& res) { Generate(req, res, Dialect::kTask); });
  Get("/v1/tasks", [](const httplib::Request&, httplib::Response& res) {
    json tasks = json::array();
    for (const std::string& name : TaskNames()) tasks.push_back({{"name", name}, {"summary", TaskSummary(name)}});
    res.set_content(json({{"object", "list"}, {"data", tasks}}).dump(), kJson);
  });
  // OpenAI's transcriptions: a clip uploaded as multipart/form-data (transcription.cc).
  const auto transcribe = [this](const httplib::Request& req, httplib::Response& res) { Transcribe(req, res); };
  Post("/v1/audio/transcriptions", transcribe);
  Post("/audio/transcriptions", transcribe);
  Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { Tokenize(req, res); });
  Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { Detokenize(req, res); });
  Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Metrics(), "text/plain; version=0.0.4");
  });

  // Ollama.
  Post("/api/chat", [this](const httplib::Request& req, httplib::Response& res) { Generate(req, res, Dialect::kOllamaChat); });
  Post("/api/generate",
            [this](const httplib::Request& req, httplib::Response& res) { Generate(req, res, Dialect::kOllamaGenerate); });
  Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json({{"version", "0.1.0-gemlet"}}).dump(), kJson);
  });
  Get("/api/tags", [this](const httplib::Request&, httplib::Response& res) {
    json model = {{"name", model_name},
                  {"model", model_name},
                  {"size", info.file_bytes},
                  {"digest", ""},
                  {"details",
                   {{"format", "gguf"},
                    {"family", info.architecture},
                    {"families", json::array({info.architecture})},
                    {"parameter_size", std::to_string(info.n_parameters)},
                    {"quantization_level", info.file_type}}}};
    res.set_content(json({{"models", json::array({model})}}).dump(), kJson);
  });
  Post("/api/show", [this](const httplib::Request&, httplib::Response& res) {
    json j = {{"details",
               {{"format", "gguf"},
                {"family", info.architecture},
                {"parameter_size", std::to_string(info.n_parameters)},
                {"quantization_level", info.file_type}}},
              {"model_info",
               {{"general.architecture", info.architecture},
                {"general.parameter_count", info.n_parameters},
                {info.architecture + ".context_length", info.n_ctx_train},
                {info.architecture + ".block_count", info.n_layers},
                {info.architecture + ".embedding_length", info.d_model}}},
              {"capabilities", OllamaCapabilities(info)}};
    if (info.takes_images || info.takes_audio) j["projector_info"] = {{"clip.projector_type", info.mmproj_projector}};
    res.set_content(j.dump(), kJson);
  });

  // The chat page (src/server/web/, compiled in), last: any other GET is one of its files or 404.
  http.Get("/.*", [](const httplib::Request& req, httplib::Response& res) {
    const server::WebAsset* asset = server::FindWebAsset(req.path);
    if (!asset) {
      return server::SendError(res, MakeError(404, "no route GET " + server::LogSafe(req.path), "invalid_request_error", "not_found"));
    }
    res.set_header("Content-Security-Policy", std::string(server::kWebContentSecurityPolicy));
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(asset->body), std::string(asset->content_type));
  });
}

std::optional<ApiError> Server::Impl::EncodeImages(const Engine& engine, CompletionRequest* r) {
  if (r->images.empty()) return std::nullopt;
  if (!info.takes_images) {
    ApiError e = MakeError(400, "'" + r->images[0].param + "': this model has no vision tower, so it cannot take "
                                "images (a model that has one is served with its mmproj file: gemlet serve --mmproj FILE)");
    e.param = r->images[0].param;
    return e;
  }
  for (server::RequestImage& image : r->images) {
    Result<std::shared_ptr<const EncodedMedia>> media = images->Encode(engine, image.bytes, options.image);
    if (!media.ok()) {
      // The bytes are the client's: an image that does not decode (corrupt, truncated, not an image,
      // over the decoder's pixel limit) is the request's fault.
      ApiError e = MakeError(400, "'" + image.where + "': the image cannot be used: " + media.message());
      e.param = image.param;
      return e;
    }
    std::vector<ContentPart>& parts = image.message < r->messages.size() && r->chat ? r->messages[image.message].parts
                                                                                      : r->prompt_parts;
    parts[image.part].media = std::move(media).value();
    image.bytes = std::string();  // the file is not needed any more
  }
  return std::nullopt;
}

std::optional<ApiError> Server::Impl::Prompt(const Engine& engine, const CompletionRequest& r,
                                             gemlet::Prompt* prompt) const {
  std::vector<int32_t>* tokens = &prompt->tokens;
  if (r.chat) {
    ChatOptions o;
    o.thinking = r.thinking;
    o.tools = r.tools;
    o.tool_choice = r.tool_choice;
    if (r.images.empty() && r.audio.empty()) {
      Result<std::vector<int32_t>> t = engine.TokenizeChat(r.messages, o);
      if (!t.ok()) return MakeError(400, t.message(), "invalid_request_error");
      *tokens = std::move(t).value();
    } else {
      Result<gemlet::Prompt> p = engine.ChatPrompt(r.messages, o);
      if (!p.ok()) return MakeError(400, p.message(), "invalid_request_error");
      *prompt = std::move(p).value();
    }
  } else if (!r.prompt_parts.empty()) {
    // Raw /api/generate with images: the images, then the text, no chat template.
    Result<gemlet::Prompt> p = engine.TokenizePrompt(r.prompt_parts, {.add_special = true, .parse_special = true});
    if (!p.ok()) return MakeError(400, p.message(), "invalid_request_error");
    *prompt = std::move(p).value();
  } else if (!r.prompt_tokens.empty()) {
    for (int32_t id : r.prompt_tokens) {
      if (id < 0 || id >= info.n_vocab) {
        return MakeError(400, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                              std::to_string(info.n_vocab - 1) + ")");
      }
    }
    *tokens = r.prompt_tokens;
  } else {
    // Raw prompts, as llama-server takes them: BOS first, and written control tokens are parsed.
    *tokens = engine.Tokenize(r.prompt, {.add_special = true, .parse_special = true});
  }
  for (const auto& [id, bias] : r.options.sampling.logit_bias) {
    if (id >= info.n_vocab) {
      ApiError e = MakeError(400, "'logit_bias' names token " + std::to_string(id) + ", outside the vocabulary (0.." +
                                  std::to_string(info.n_vocab - 1) + ")");
      e.param = "logit_bias";
      return e;
    }
  }
  if (r.num_ctx > slot_ctx) {
    ApiError e = MakeError(400, "'options.num_ctx' asks for " + std::to_string(r.num_ctx) + " tokens; each slot of this server "
                            "holds " + std::to_string(slot_ctx) + " (start it with a larger --ctx-size)");
    e.param = "options.num_ctx";
    return e;
  }
  const int n_ctx = r.num_ctx > 0 ? r.num_ctx : slot_ctx;
  if (static_cast<int>(tokens->size()) >= n_ctx) {
    ApiError e = MakeError(400, "the prompt has " + std::to_string(tokens->size()) + " tokens; the context holds " +
                                std::to_string(n_ctx) + " (with room for at least one more)",
                       "invalid_request_error", "context_length_exceeded");
    e.param = r.chat ? "messages" : "prompt";
    return e;
  }
  return std::nullopt;
}

void Server::Impl::Generate(const httplib::Request& req, httplib::Response& res, Dialect dialect) {
  json body;
  if (auto e = server::ParseBody(req.body, options.max_body_bytes, &body)) return server::SendError(res, *e);
  CompletionRequest r;
  const bool ollama = dialect == Dialect::kOllamaChat || dialect == Dialect::kOllamaGenerate;
  std::optional<ApiError> err;
  std::string task;         // kTask: its name (from the path), and its prompt
  TaskPrompt task_prompt;
  switch (dialect) {
    case Dialect::kOpenAiChat: err = server::ParseChatRequest(body, limits, &r); break;
    case Dialect::kOpenAiText: err = server::ParseCompletionRequest(body, limits, &r); break;
    case Dialect::kOllamaChat: err = server::ParseOllamaRequest(body, true, limits, &r); break;
    case Dialect::kOllamaGenerate: err = server::ParseOllamaRequest(body, false, limits, &r); break;
    case Dialect::kTask: {
      task = req.matches.size() > 1 ? std::string(req.matches[1]) : std::string();
      TaskOptions options;
      std::string input;
      err = server::ParseTaskRequest(body, task, limits, &options, &input, &r);
      if (err) break;
      Result<TaskPrompt> p = TaskMessages(input, options);
      if (!p.ok()) {
        const bool unknown = p.status().code() == StatusCode::kInvalidArgument && p.message().rfind("unknown task", 0) == 0;
        err = MakeError(unknown ? 404 : 400, p.message(), "invalid_request_error", unknown ? "not_found" : "");
        break;
      }
      task_prompt = std::move(p).value();
      r.messages = task_prompt.messages;
      break;
    }
  }
  if (err) return server::SendError(res, *err);
  if (auto e = KeepAlive(r)) return server::SendError(res, *e);
  if (r.load_only) return OllamaLoad(res, r, dialect == Dialect::kOllamaChat);
  if (std::string invalid = Validate(r.options); !invalid.empty()) return server::SendError(res, MakeError(400, invalid));
  Result<std::shared_ptr<Lease>> leased = Acquire();
  if (!leased.ok()) return server::SendError(res, MakeError(500, leased.message(), "server_error"));
  std::shared_ptr<Lease> lease = std::move(leased).value();
  auto job = std::make_shared<Job>();
  if (auto e = EncodeImages(*lease->engine, &r)) return server::SendError(res, *e);
  if (auto e = EncodeAudio(*lease->engine, &r)) return server::SendError(res, *e);
  if (auto e = Prompt(*lease->engine, r, &job->prompt)) return server::SendError(res, *e);
  job->options = r.options;
  job->stream = r.stream;
  Result<std::vector<AdapterUse>> lora = RequestAdapters(lease->adapters, r);
  if (!lora.ok()) {
    ApiError e = MakeError(400, lora.message());
    e.param = "lora";
    return server::SendError(res, e);
  }
  job->adapters = std::move(lora).value();
  if (r.num_ctx > 0) {
    // Ollama's num_ctx below the slot's: the prompt and the answer together stay within it.
    const int room = r.num_ctx - static_cast<int>(job->prompt.tokens.size());
    job->options.max_tokens = job->options.max_tokens > 0 ? std::min(job->options.max_tokens, room) : room;
  }
  if (!r.options.response_format.empty() || !r.options.tool_choice.empty()) {
    if (Status s = lease->engine->CheckResponseFormat(r.options, slot_ctx); !s.ok()) {
      ApiError e = MakeError(400, s.message());
      e.param = r.options.response_format.empty() ? "tool_choice" : "response_format";
      return server::SendError(res, e);
    }
  }
  // n choices: the same prompt in n jobs, choice i sampling with seed + i.
  std::vector<std::shared_ptr<Job>> jobs = {job};
  for (int i = 1; i < r.n; ++i) {
    auto choice = std::make_shared<Job>();
    choice->prompt = job->prompt;
    choice->options = job->options;
    choice->adapters = job->adapters;
    choice->stream = job->stream;
    choice->options.sampling.seed += static_cast<uint64_t>(i);
    jobs.push_back(std::move(choice));
  }
  for (const std::shared_ptr<Job>& j : jobs) {
    if (!lease->scheduler->Enqueue(j)) {
      for (const std::shared_ptr<Job>& queued : jobs) queued->cancelled.store(true);
      res.set_header("Retry-After", "1");
      return server::SendError(res, MakeError(503, "the server is busy: every slot is decoding and the queue is full; retry shortly",
                                  "server_error", "overloaded"));
    }
  }
  server::ResponseContext c;
  c.id = NewId(dialect == Dialect::kOpenAiChat ? "chatcmpl-" : dialect == Dialect::kTask ? "task-" : "cmpl-");
  c.created = UnixNow();
  c.model = model_name;
  c.engine = lease->engine.get();
  if (r.stream) {
    if (ollama) return StreamOllama(res, job, std::move(r), c, std::move(lease));
    return StreamOpenAi(res, jobs, std::move(r), c, std::move(lease));
  }
  // Not streamed: wait for the replies. A client that hangs up meanwhile is only noticed when its
  // connection is written to, so after a second the answer goes out chunked, led by whitespace
  // (valid before JSON) once a second: a closed connection then cancels the jobs within seconds.
  const auto all_done = [jobs](std::chrono::milliseconds wait) {
    bool done = true;
    for (const std::shared_ptr<Job>& j : jobs) {
      std::vector<Job::Chunk> ignored;
      done = j->Take(&ignored, wait) && done;
    }
    return done;
  };
  const auto cancel_all = [jobs] {
    for (const std::shared_ptr<Job>& j : jobs) j->cancelled.store(true);
  };
  bool done = false;
  for (int waited = 0; waited < 10 && !done; ++waited) done = all_done(std::chrono::milliseconds(100));
  const auto answer = [dialect, r, c, task, task_prompt, jobs]() -> std::pair<int, std::string> {
    std::vector<json> completions;
    for (const std::shared_ptr<Job>& j : jobs) {
      Result<Reply> reply = Status::Error("unset");
      {
        std::lock_guard<std::mutex> lock(j->mutex);
        reply = j->reply;
      }
      if (!reply.ok()) {
        const ApiError e = FailedReply(reply.status());
        return {e.status, server::ErrorJson(e).dump()};
      }
      switch (dialect) {
        case Dialect::kOpenAiChat: completions.push_back(server::ChatCompletionJson(c, r, reply.value())); break;
        case Dialect::kOpenAiText: completions.push_back(server::TextCompletionJson(c, r, reply.value())); break;
        case Dialect::kTask: completions.push_back(server::TaskJson(c, task, task_prompt, reply.value())); break;
        default: completions.push_back(server::OllamaDoneJson(c, dialect == Dialect::kOllamaChat, reply.value(), true));
      }
    }
    return {200, (completions.size() == 1 ? completions[0] : server::MergeChoices(std::move(completions))).dump()};
  };
  if (done) {
    auto [status, text] = answer();
    res.status = status;
    res.set_content(text, kJson);
    return;
  }
  res.set_chunked_content_provider(
      kJson,
      [all_done, cancel_all, answer, lease](size_t, httplib::DataSink& sink) {
        while (!all_done(std::chrono::milliseconds(1000))) {
          if (!WriteRaw(sink, " ")) {
            cancel_all();
            return false;
          }
        }
        if (!WriteRaw(sink, answer().second)) return false;
        sink.done();
        return true;
      },
      [cancel_all](bool success) {
        if (!success) cancel_all();
      });
}

void Server::Impl::StreamOpenAi(httplib::Response& res, std::vector<std::shared_ptr<Job>> jobs, CompletionRequest r,
                                server::ResponseContext c, std::shared_ptr<Lease> lease) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [jobs, r, c, lease](size_t, httplib::DataSink& sink) {
        const auto fail = [&jobs] {
          for (const std::shared_ptr<Job>& j : jobs) j->cancelled.store(true);
          return false;
        };
        // Each event speaks of one choice (index i of n).
        const auto write = [&sink](json event, size_t i) {
          if (event.contains("choices") && !event["choices"].empty()) event["choices"][0]["index"] = i;
          return WriteEvent(sink, event);
        };
        for (size_t i = 0; r.chat && i < jobs.size(); ++i) {
          if (!write(server::ChatChunkJson(c, {{"role", "assistant"}, {"content", ""}}, nullptr), i)) return fail();
        }
        // One choice's end: its tool calls, and its last chunk with the finish reason and logprobs.
        const auto finish = [&](const Result<Reply>& reply, size_t i) {
          if (!reply.ok()) return WriteEvent(sink, server::ErrorJson(FailedReply(reply.status())));
          if (r.chat && !reply.value().tool_calls.empty()) {
            json calls = server::ChatChunkJson(c, {{"tool_calls", server::ToolCallsJson(c, r, reply.value(), true)}}, nullptr);
            if (!write(calls, i)) return false;
          }
          const char* reason = server::FinishReason(reply.value());
          json last = r.chat ? server::ChatChunkJson(c, json::object(), reason) : server::TextChunkJson(c, "", reason);
          // Logprobs of a streamed answer come with its last chunk, all of them: the text arrives in
          // pieces that need not match tokens, and clients append each chunk's logprobs.
          last["choices"][0]["logprobs"] = server::LogprobsJson(c, r, reply.value());
          return write(last, i);
        };
        std::vector<Result<Reply>> replies(jobs.size(), Status::Error("unset"));
        std::vector<bool> finished(jobs.size(), false);
        size_t open = jobs.size();
        // One choice waits for its next piece up to a second; several take turns, briefly each.
        const auto wait = std::chrono::milliseconds(jobs.size() == 1 ? 1000 : 50);
        auto last_write = std::chrono::steady_clock::now();
        while (open > 0) {
          for (size_t i = 0; i < jobs.size(); ++i) {
            if (finished[i]) continue;
            std::vector<Job::Chunk> chunks;
            const bool done = jobs[i]->Take(&chunks, wait);
            for (const Job::Chunk& chunk : chunks) {
              if (chunk.kind == ChunkKind::kToolCall) continue;  // sent whole with the last chunk
              if (!r.chat && chunk.kind == ChunkKind::kThinking) continue;
              const char* field = chunk.kind == ChunkKind::kThinking ? "reasoning_content" : "content";
              json event = r.chat ? server::ChatChunkJson(c, {{field, chunk.text}}, nullptr)
                                  : server::TextChunkJson(c, chunk.text, nullptr);
              if (!write(event, i)) return fail();
              last_write = std::chrono::steady_clock::now();
            }
            if (!done) continue;
            {
              std::lock_guard<std::mutex> lock(jobs[i]->mutex);
              replies[i] = jobs[i]->reply;
            }
            finished[i] = true;
            --open;
            if (!finish(replies[i], i)) return fail();
            last_write = std::chrono::steady_clock::now();
          }
          // Nothing for a second (a long prompt): a comment line, which tells whether the client is still there.
          if (open > 0 && std::chrono::steady_clock::now() - last_write >= std::chrono::seconds(1)) {
            if (!WriteRaw(sink, ": keep-alive\n\n")) return fail();
            last_write = std::chrono::steady_clock::now();
          }
        }
        const bool all_ok = std::all_of(replies.begin(), replies.end(), [](const Result<Reply>& x) { return x.ok(); });
        if (r.include_usage && all_ok) {
          json usage = r.chat ? server::ChatChunkJson(c, json::object(), nullptr) : server::TextChunkJson(c, "", nullptr);
          usage["choices"] = json::array();
          usage["usage"] = server::UsageJson(replies[0].value());
          int completion_tokens = 0;
          for (const Result<Reply>& x : replies) completion_tokens += x.value().stats.generated_tokens;
          usage["usage"]["completion_tokens"] = completion_tokens;
          usage["usage"]["total_tokens"] = usage["usage"]["prompt_tokens"].get<int>() + completion_tokens;
          if (!WriteEvent(sink, usage)) return false;
        }
        if (!WriteRaw(sink, "data: [DONE]\n\n")) return false;
        sink.done();
        return true;
      },
      [jobs](bool success) {
        if (success) return;
        for (const std::shared_ptr<Job>& j : jobs) j->cancelled.store(true);
      });
}

void Server::Impl::StreamOllama(httplib::Response& res, std::shared_ptr<Job> job, CompletionRequest r,
                                server::ResponseContext c, std::shared_ptr<Lease> lease) {
  res.set_chunked_content_provider(
      "application/x-ndjson",
      [job, r, c, lease](size_t, httplib::DataSink& sink) {
        for (;;) {
          std::vector<Job::Chunk> chunks;
          const bool done = job->Take(&chunks, std::chrono::milliseconds(1000));
          for (const Job::Chunk& chunk : chunks) {
            if (chunk.kind == ChunkKind::kToolCall) continue;
            const bool thought = chunk.kind == ChunkKind::kThinking;
            json line = server::OllamaChunkJson(c, r.chat, thought ? "" : chunk.text, thought ? chunk.text : "");
            if (!WriteLine(sink, line)) {
              job->cancelled.store(true);
              return false;
            }
          }
          if (done) break;
        }
        Result<Reply> reply = Status::Error("unset");
        {
          std::lock_guard<std::mutex> lock(job->mutex);
          reply = job->reply;
        }
        json last = reply.ok() ? server::OllamaDoneJson(c, r.chat, reply.value(), false) : json({{"error", reply.message()}});
        if (!WriteLine(sink, last)) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancelled.store(true);
      });
}

void Server::Impl::Tokenize(const httplib::Request& req, httplib::Response& res) {
  json body;
  if (auto e = server::ParseBody(req.body, options.max_body_bytes, &body)) return server::SendError(res, *e);
  if (!body.is_object()) return server::SendError(res, MakeError(400, "the request body is not a JSON object"));
  if (!body.contains("content") || !body["content"].is_string()) {
    ApiError e = MakeError(400, "'content' must be a string");
    e.param = "content";
    return server::SendError(res, e);
  }
  const auto flag = [&body](const char* key, bool fallback) {
    return body.contains(key) && body[key].is_boolean() ? body[key].get<bool>() : fallback;
  };
  Result<std::shared_ptr<Lease>> lease = Acquire();
  if (!lease.ok()) return server::SendError(res, MakeError(500, lease.message(), "server_error"));
  const Engine& engine = *lease.value()->engine;
  const std::vector<int32_t> tokens = engine.Tokenize(
      body["content"].get<std::string>(), {.add_special = flag("add_special", false), .parse_special = flag("parse_special", true)});
  json out = json::array();
  if (flag("with_pieces", false)) {
    for (int32_t t : tokens) out.push_back({{"id", t}, {"piece", engine.TokenText(t)}});
  } else {
    out = tokens;
  }
  res.set_content(json({{"tokens", out}}).dump(), kJson);
}

void Server::Impl::Detokenize(const httplib::Request& req, httplib::Response& res) {
  json body;
  if (auto e = server::ParseBody(req.body, options.max_body_bytes, &body)) return server::SendError(res, *e);
  if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array()) {
    ApiError e = MakeError(400, "'tokens' must be an array of token ids");
    e.param = "tokens";
    return server::SendError(res, e);
  }
  std::vector<int32_t> tokens;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= info.n_vocab) {
      ApiError e = MakeError(400, "'tokens' holds " + t.dump() + ", not a token id of this model (0.." +
                                  std::to_string(info.n_vocab - 1) + ")");
      e.param = "tokens";
      return server::SendError(res, e);
    }
    tokens.push_back(t.get<int32_t>());
  }
  Result<std::shared_ptr<Lease>> lease = Acquire();
  if (!lease.ok()) return server::SendError(res, MakeError(500, lease.message(), "server_error"));
  res.set_content(json({{"content", lease.value()->engine->Detokenize(tokens)}}).dump(), kJson);
}

std::string Server::Impl::Metrics() {
  server::SchedulerStats s{options.parallel};
  uint64_t anon_bytes = 0;
  bool loaded = false;
  uint64_t n_loads = 0, n_unloads = 0;
  {
    std::lock_guard<std::mutex> lock(model_mutex);
    if (scheduler) s = scheduler->stats();
    s += retired;
    loaded = scheduler != nullptr;
    anon_bytes = engine ? engine->MeasureMemory().anon_bytes : MeasureProcessMemory().anon_bytes;
    n_loads = loads;
    n_unloads = unloads;
  }
  std::ostringstream out;
  const auto metric = [&out](const char* name, const char* type, const char* help, double value) {
    out << "# HELP gemlet_" << name << " " << help << "\n# TYPE gemlet_" << name << " " << type << "\ngemlet_" << name
        << " " << value << "\n";
  };
  metric("prompt_tokens_total", "counter", "Prompt tokens evaluated (reused prefix tokens not counted).",
         static_cast<double>(s.prompt_tokens_total));
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.",
         static_cast<double>(s.cached_tokens_total));
  metric("tokens_predicted_total", "counter", "Tokens generated.", static_cast<double>(s.generated_tokens_total));
  metric("requests_finished_total", "counter", "Generation requests finished (including cancelled).",
         static_cast<double>(s.requests_total));
  metric("requests_cancelled_total", "counter", "Generation requests cancelled (client gone, server stopping).",
         static_cast<double>(s.requests_cancelled));
  metric("requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
         static_cast<double>(s.requests_rejected));
  metric("requests_processing", "gauge", "Slots decoding a request now.", s.slots_busy);
  metric("requests_deferred", "gauge", "Requests waiting for a slot.", s.queued);
  metric("slots", "gauge", "Slots (requests decoded at once).", s.slots);
  metric("decode_steps_total", "counter", "Batched forward steps run.", static_cast<double>(s.steps_total));
  metric("step_tokens_total", "counter", "Tokens evaluated by those steps.", static_cast<double>(s.step_tokens_total));
  metric("busy_seconds_total", "counter", "Seconds spent stepping.", s.busy_seconds);
  const server::ImageCacheStats im = images->stats();
  metric("image_encodes_total", "counter", "Images decoded and run through the vision tower (not found in the image cache).",
         static_cast<double>(im.encodes));
  metric("image_cache_hits_total", "counter", "Images taken from the encoded-image cache (the same bytes sent again).",
         static_cast<double>(im.hits));
  metric("image_cache_evictions_total", "counter", "Encoded images dropped to keep the cache within its bound.",
         static_cast<double>(im.evictions));
  metric("image_cache_bytes", "gauge", "Bytes of encoded images (their embeddings) the cache holds.",
         static_cast<double>(im.bytes));
  metric("image_encode_seconds_total", "counter", "Seconds spent decoding and encoding images.", im.encode_seconds);
  const server::ImageCacheStats au = clips->stats();
  metric("audio_encodes_total", "counter", "Clips decoded and run through the audio tower (not found in the audio cache).",
         static_cast<double>(au.encodes));
  metric("audio_cache_hits_total", "counter", "Clips taken from the encoded-audio cache (the same bytes sent again).",
         static_cast<double>(au.hits));
  metric("audio_cache_evictions_total", "counter", "Encoded clips dropped to keep the cache within its bound.",
         static_cast<double>(au.evictions));
  metric("audio_cache_bytes", "gauge", "Bytes of encoded clips (their pieces' embeddings) the cache holds.",
         static_cast<double>(au.bytes));
  metric("audio_encode_seconds_total", "counter", "Seconds spent decoding and encoding clips.", au.encode_seconds);
  metric("process_anon_bytes", "gauge", "Anonymous (dirty) memory of the process.", static_cast<double>(anon_bytes));
  metric("model_loaded", "gauge", "1 while the model is loaded (0: unloaded when idle).", loaded ? 1 : 0);
  metric("model_loads_total", "counter", "Times the model was loaded (the first time included).", static_cast<double>(n_loads));
  metric("model_unloads_total", "counter", "Times the model was unloaded after --idle-unload seconds idle.",
         static_cast<double>(n_unloads));
  if (front) {
    const server::FrontCounts c = front->counts();
    metric("http_connections_open", "gauge", "Connections open now.", static_cast<double>(c.open));
    metric("http_connections_busy", "gauge", "Connections whose request is being handled.", static_cast<double>(c.busy));
    metric("http_connections_refused_total", "counter", "Connections answered 503 at once: max_connections were open.",
           static_cast<double>(c.over_cap));
    metric("http_head_timeouts_total", "counter", "Connections closed (408) because a request head came too slowly.",
           static_cast<double>(c.head_timeouts));
  }
  out << "# HELP gemlet_http_responses_total HTTP responses by route and status.\n"
      << "# TYPE gemlet_http_responses_total counter\n";
  std::lock_guard<std::mutex> lock(metrics_mutex);
  for (const auto& [key, count] : responses) {
    out << "gemlet_http_responses_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << count << "\n";
  }
  return out.str();
}

}  // namespace gemlet

// The C API (include/gemlet/gemlet.h) over the C++ API: handles, option structs that may grow
// (struct_size), status codes with a per-thread last error, and callbacks with user data. No
// exception leaves a function here.
#include "gemlet/gemlet.h"

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/api_internal.h"
#include "gemlet/delta.hpp"
#include "gemlet/gemlet.hpp"
#include "gemlet/tasks.hpp"
#ifdef GEMLET_HAVE_STORE
#include "gemlet/store.hpp"
#endif
#include "kernels/kernels.h"

struct gemlet_engine {
  std::shared_ptr<gemlet::Engine> engine;
  std::string architecture;
};
struct gemlet_session {
  std::unique_ptr<gemlet::Session> session;
  std::string task_output = {};  // what gemlet_task_run's *output points to
  std::string task_glossary_missing = {};  // gemlet_task_glossary_missing's answer, one term a line
};
struct gemlet_conversation {
  std::unique_ptr<gemlet::Conversation> conversation;
  std::string last_reply;
  std::vector<gemlet::Message> messages;  // what gemlet_conversation_message points into
};

namespace {

thread_local std::string g_last_error;

gemlet_status Code(gemlet::StatusCode code) {
  switch (code) {
    case gemlet::StatusCode::kOk: return GEMLET_OK;
    case gemlet::StatusCode::kError: return GEMLET_ERROR;
    case gemlet::StatusCode::kInvalidArgument: return GEMLET_INVALID_ARGUMENT;
    case gemlet::StatusCode::kCancelled: return GEMLET_CANCELLED;
    case gemlet::StatusCode::kContextFull: return GEMLET_CONTEXT_FULL;
    case gemlet::StatusCode::kOutOfMemory: return GEMLET_OUT_OF_MEMORY;
  }
  return GEMLET_ERROR;
}

gemlet_status Fail(gemlet_status code, std::string message) {
  g_last_error = std::move(message);
  return code;
}

gemlet_status Report(const gemlet::Status& s) {
  if (s.ok()) return GEMLET_OK;
  return Fail(Code(s.code()), s.message());
}

// Runs fn, turning anything thrown (allocation failure, a bug) into a status: no exception may
// unwind into C, Swift or the JVM.
template <class Fn>
gemlet_status Guard(Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Fail(GEMLET_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Fail(GEMLET_ERROR, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(GEMLET_ERROR, "internal error");
  }
}

// An options struct from the caller over the defaults: only the fields its struct_size covers, so
// a struct from an older, smaller header keeps defaults for the fields added since.
template <class T>
bool ReadOptions(const T* in, T* out) {
  if (in == nullptr) return true;
  if (in->struct_size < sizeof(size_t) || in->struct_size > sizeof(T)) return false;
  std::memcpy(static_cast<void*>(out), in, in->struct_size);
  out->struct_size = sizeof(T);
  return true;
}

gemlet_status BadStruct(const char* what) {
  return Fail(GEMLET_INVALID_ARGUMENT, std::string(what) + ": struct_size is not that of a gemlet.h struct "
                                                           "(start from the *_default() initialiser)");
}

gemlet_status NullHandle(const char* what) { return Fail(GEMLET_INVALID_ARGUMENT, std::string(what) + " is NULL"); }

gemlet::EngineOptions ToEngineOptions(const gemlet_engine_options& o) {
  gemlet::EngineOptions e;
  e.n_threads = o.n_threads;
  if (o.cache_dir) e.cache_dir = o.cache_dir;
  if (o.data_dir) e.data_dir = o.data_dir;
  if (o.progress) {
    const gemlet_progress_fn fn = o.progress;
    void* user = o.progress_user_data;
    e.progress = [fn, user](float fraction) { return fn(fraction, user); };
  }
  if (o.kernels) e.kernels.kernels = o.kernels;
  if (o.thermal_zone) e.thermal.zone = o.thermal_zone;
  if (o.thermal_root) e.thermal.sysfs_root = o.thermal_root;
  if (o.thermal_limit_c != 0) e.thermal.limit_c = o.thermal_limit_c;  // 0: a zeroed struct, the default
  e.thermal.enabled = !o.thermal_off;
  if (o.memory_pressure_path) e.memory_pressure_path = o.memory_pressure_path;
  if (o.on_memory_action) {
    const gemlet_memory_action_fn fn = o.on_memory_action;
    void* user = o.memory_action_user_data;
    e.on_memory_action = [fn, user](const gemlet::MemoryActionEvent& ev) {
      fn(static_cast<gemlet_memory_action>(static_cast<int>(ev.action)), ev.critical, ev.bytes_released,
         ev.detail.c_str(), user);
    };
  }
  return e;
}

gemlet::SessionOptions ToSessionOptions(const gemlet_session_options& o) {
  gemlet::SessionOptions s;
  s.n_ctx = o.n_ctx;
  s.n_threads = o.n_threads;
  s.max_batch = o.max_batch;
  s.kv_cache_type = o.kv_type == GEMLET_KV_F32    ? gemlet::KvCacheType::kF32
                    : o.kv_type == GEMLET_KV_Q8_0 ? gemlet::KvCacheType::kQ8_0
                    : o.kv_type == GEMLET_KV_Q4_0 ? gemlet::KvCacheType::kQ4_0
                                                  : gemlet::KvCacheType::kF16;
  return s;
}

bool ToGenerateOptions(const gemlet_generate_options& o, gemlet::GenerateOptions* g) {
  g->max_tokens = o.max_tokens;
  g->sampling.temperature = o.temperature;
  g->sampling.top_k = o.top_k;
  g->sampling.top_p = o.top_p;
  g->sampling.min_p = o.min_p;
  g->sampling.repeat_penalty = o.repeat_penalty;
  g->sampling.repeat_last_n = o.repeat_last_n;
  g->sampling.presence_penalty = o.presence_penalty;
  g->sampling.frequency_penalty = o.frequency_penalty;
  g->sampling.seed = o.seed;
  if (o.n_stop > 0 && o.stop == nullptr) return false;
  for (size_t i = 0; i < o.n_stop; ++i) {
    if (o.stop[i] == nullptr) return false;
    g->stop.emplace_back(o.stop[i]);
  }
  return true;
}

void WriteStats(const gemlet::GenerationStats& s, gemlet_stats* out) {
  if (out == nullptr || out->struct_size < sizeof(size_t)) return;
  gemlet_stats full{};
  full.struct_size = sizeof(gemlet_stats);
  full.prompt_tokens = s.prompt_tokens;
  full.cached_tokens = s.cached_tokens;
  full.generated_tokens = s.generated_tokens;
  full.ttft_seconds = s.ttft_seconds;
  full.prefill_tokens_per_second = s.prefill_tokens_per_second;
  full.decode_tokens_per_second = s.decode_tokens_per_second;
  full.stop = static_cast<gemlet_stop_reason>(static_cast<int>(s.stop));
  full.kv_cache_bytes = s.memory.kv_cache_bytes;
  full.activation_bytes = s.memory.activation_bytes;
  full.dropped_messages = s.dropped_messages;
  full.dropped_tokens = s.dropped_tokens;
  full.reevaluated_tokens = s.reevaluated_tokens;
  full.summarized_messages = s.summarized_messages;
  full.summary_tokens = s.summary_tokens;
  full.pressure_actions = s.memory.pressure_actions;
  full.pressure_released_bytes = s.memory.pressure_released_bytes;
  const size_t n = out->struct_size < sizeof(full) ? out->struct_size : sizeof(full);
  std::memcpy(static_cast<void*>(out), &full, n);
  out->struct_size = n;
}

gemlet_status LoadInto(gemlet::Result<std::shared_ptr<gemlet::Engine>> r, gemlet_engine** out) {
  if (!r.ok()) return Report(r.status());
  auto* e = new gemlet_engine{std::move(r).value(), {}};
  e->architecture = e->engine->info().architecture;
  *out = e;
  return GEMLET_OK;
}

}  // namespace

extern "C" {

const char* gemlet_version(void) { return gemlet::Version(); }
const char* gemlet_last_error(void) { return g_last_error.c_str(); }

const char* gemlet_status_name(gemlet_status status) {
  switch (status) {
    case GEMLET_OK: return "ok";
    case GEMLET_ERROR: return "error";
    case GEMLET_INVALID_ARGUMENT: return "invalid argument";
    case GEMLET_CANCELLED: return "cancelled";
    case GEMLET_CONTEXT_FULL: return "context full";
    case GEMLET_OUT_OF_MEMORY: return "out of memory";
    case GEMLET_BUFFER_TOO_SMALL: return "buffer too small";
  }
  return "unknown status";
}

void gemlet_set_log_callback(gemlet_log_fn callback, void* user_data) {
  if (callback == nullptr) {
    gemlet::SetLogCallback(nullptr);
    return;
  }
  gemlet::SetLogCallback([callback, user_data](int level, std::string_view message) {
    const std::string text(message);  // NUL-terminated for C
    callback(level, text.c_str(), user_data);
  });
}

// ---- engine ----

gemlet_engine_options gemlet_engine_options_default(void) {
  gemlet_engine_options o{};
  o.struct_size = sizeof(o);
  o.thermal_limit_c = gemlet::ThermalOptions().limit_c;
  return o;
}

gemlet_status gemlet_engine_load(const char* path, const gemlet_engine_options* options, gemlet_engine** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (path == nullptr) return NullHandle("path");
    gemlet_engine_options o = gemlet_engine_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_engine_options");
    return LoadInto(gemlet::Engine::Load(path, ToEngineOptions(o)), out);
  });
}

gemlet_status gemlet_engine_load_fd(int fd, uint64_t offset, uint64_t length, const gemlet_engine_options* options,
                                    gemlet_engine** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    gemlet_engine_options o = gemlet_engine_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_engine_options");
    return LoadInto(gemlet::Engine::LoadFromFd(fd, offset, length, ToEngineOptions(o)), out);
  });
}

void gemlet_engine_free(gemlet_engine* engine) { delete engine; }

int gemlet_engine_n_vocab(const gemlet_engine* engine) { return engine ? engine->engine->info().n_vocab : 0; }
int gemlet_engine_n_ctx_train(const gemlet_engine* engine) { return engine ? engine->engine->info().n_ctx_train : 0; }
const char* gemlet_engine_architecture(const gemlet_engine* engine) {
  return engine ? engine->architecture.c_str() : "";
}

gemlet_status gemlet_tokenize(const gemlet_engine* engine, const char* text, size_t text_len, bool add_special,
                              bool parse_special, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (text == nullptr && text_len > 0) return NullHandle("text");
    if (tokens == nullptr && capacity > 0) return NullHandle("tokens");
    const std::vector<int32_t> ids =
        engine->engine->Tokenize(std::string_view(text ? text : "", text_len), {add_special, parse_special});
    if (n_tokens) *n_tokens = ids.size();
    if (ids.size() > capacity) {
      return Fail(GEMLET_BUFFER_TOO_SMALL, "the text has " + std::to_string(ids.size()) + " tokens, the buffer room for " +
                                    std::to_string(capacity));
    }
    std::copy(ids.begin(), ids.end(), tokens);
    return GEMLET_OK;
  });
}

gemlet_status gemlet_detokenize(const gemlet_engine* engine, const int32_t* tokens, size_t n_tokens, char** text) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (text == nullptr) return NullHandle("text");
    if (tokens == nullptr && n_tokens > 0) return NullHandle("tokens");
    const std::string s = engine->engine->Detokenize(std::span<const int32_t>(tokens, n_tokens));
    char* copy = new char[s.size() + 1];
    std::memcpy(copy, s.c_str(), s.size() + 1);
    *text = copy;
    return GEMLET_OK;
  });
}

void gemlet_string_free(char* text) { delete[] text; }

gemlet_status gemlet_engine_set_thread_limit(gemlet_engine* engine, int n_threads) {
  if (engine == nullptr) return NullHandle("engine");
  if (n_threads < 0) return Fail(GEMLET_INVALID_ARGUMENT, "the thread limit must be >= 0");
  engine->engine->SetThreadLimit(n_threads);
  return GEMLET_OK;
}

gemlet_status gemlet_engine_set_kernels(gemlet_engine* engine, const char* kernels) {
  if (engine == nullptr) return NullHandle("engine");
  if (kernels == nullptr) return NullHandle("kernels");
  return Guard([&] {
    gemlet::KernelOptions k = engine->engine->kernel_options();
    k.kernels = kernels;
    return Report(engine->engine->SetKernelOptions(k));
  });
}

const char* gemlet_engine_kernels(const gemlet_engine* engine) {
  return engine ? engine->engine->impl().CurrentKernels().table->name : "";
}

gemlet_status gemlet_engine_set_thermal_state(gemlet_engine* engine, gemlet_thermal_state state) {
  if (engine == nullptr) return NullHandle("engine");
  if (state < GEMLET_THERMAL_NOMINAL || state > GEMLET_THERMAL_CRITICAL) {
    return Fail(GEMLET_INVALID_ARGUMENT, "unknown thermal state " + std::to_string(static_cast<int>(state)));
  }
  engine->engine->SetThermalState(static_cast<gemlet::ThermalState>(state));
  return GEMLET_OK;
}

gemlet_thermal_state gemlet_engine_thermal_state(const gemlet_engine* engine) {
  return engine ? static_cast<gemlet_thermal_state>(engine->engine->thermal_state()) : GEMLET_THERMAL_NOMINAL;
}

gemlet_thermal_status gemlet_thermal_status_default(void) {
  gemlet_thermal_status s{};
  s.struct_size = sizeof(s);
  s.work_fraction = 1;
  s.duty = 1;
  return s;
}

gemlet_status gemlet_engine_thermal_status(const gemlet_engine* engine, gemlet_thermal_status* status) {
  if (engine == nullptr) return NullHandle("engine");
  if (status == nullptr || status->struct_size < sizeof(size_t)) return NullHandle("status");
  return Guard([&] {
    const gemlet::Engine::ThermalStatus t = engine->engine->thermal_status();
    gemlet_thermal_status full = gemlet_thermal_status_default();
    full.enabled = t.enabled;
    full.has_reading = t.has_reading;
    full.throttled = t.throttled;
    full.temperature_c = t.temperature_c;
    full.level = static_cast<gemlet_thermal_state>(t.level);
    full.work_fraction = t.work_fraction;
    full.threads = t.threads;
    full.duty = t.duty;
    full.prefill_chunk = t.prefill_chunk;
    full.throttled_seconds = t.throttled_seconds;
    full.changes = t.changes;
    // Only what the caller's struct holds: an older, smaller header keeps its size.
    const size_t n = status->struct_size < sizeof(full) ? status->struct_size : sizeof(full);
    std::memcpy(static_cast<void*>(status), &full, n);
    status->struct_size = n;
    return GEMLET_OK;
  });
}

gemlet_status gemlet_engine_memory_warning(gemlet_engine* engine, gemlet_memory_level level) {
  if (engine == nullptr) return NullHandle("engine");
  switch (level) {
    case GEMLET_MEMORY_NONE:
    case GEMLET_MEMORY_RUNNING_MODERATE:
    case GEMLET_MEMORY_RUNNING_LOW:
    case GEMLET_MEMORY_RUNNING_CRITICAL:
    case GEMLET_MEMORY_UI_HIDDEN:
    case GEMLET_MEMORY_BACKGROUND:
    case GEMLET_MEMORY_MODERATE:
    case GEMLET_MEMORY_COMPLETE:
      engine->engine->OnMemoryWarning(static_cast<gemlet::MemoryPressure>(level));
      return GEMLET_OK;
  }
  return Fail(GEMLET_INVALID_ARGUMENT, "unknown memory level " + std::to_string(static_cast<int>(level)) +
                                           " (Android's onTrimMemory levels)");
}

gemlet_memory_level gemlet_engine_memory_level(const gemlet_engine* engine) {
  return engine ? static_cast<gemlet_memory_level>(engine->engine->memory_pressure()) : GEMLET_MEMORY_NONE;
}

gemlet_status gemlet_engine_on_background(gemlet_engine* engine) {
  if (engine == nullptr) return NullHandle("engine");
  engine->engine->OnBackground();
  return GEMLET_OK;
}

gemlet_status gemlet_engine_on_foreground(gemlet_engine* engine) {
  if (engine == nullptr) return NullHandle("engine");
  engine->engine->OnForeground();
  return GEMLET_OK;
}

bool gemlet_engine_in_background(const gemlet_engine* engine) { return engine && engine->engine->in_background(); }

// ---- session ----

gemlet_session_options gemlet_session_options_default(void) {
  gemlet_session_options o{};
  o.struct_size = sizeof(o);
  o.max_batch = 512;
  o.kv_type = GEMLET_KV_F16;
  return o;
}

gemlet_status gemlet_session_create(gemlet_engine* engine, const gemlet_session_options* options,
                                    gemlet_session** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (engine == nullptr) return NullHandle("engine");
    gemlet_session_options o = gemlet_session_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_session_options");
    auto s = gemlet::Session::Create(engine->engine, ToSessionOptions(o));
    if (!s.ok()) return Report(s.status());
    *out = new gemlet_session{std::move(s).value()};
    return GEMLET_OK;
  });
}

void gemlet_session_free(gemlet_session* session) { delete session; }

gemlet_status gemlet_session_evaluate(gemlet_session* session, const int32_t* tokens, size_t n_tokens, float* logits) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (tokens == nullptr && n_tokens > 0) return NullHandle("tokens");
    return Report(session->session->Evaluate(std::span<const int32_t>(tokens, n_tokens), logits, false));
  });
}

gemlet_status gemlet_session_truncate(gemlet_session* session, int n_keep) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    return Report(session->session->Truncate(n_keep));
  });
}

gemlet_status gemlet_session_save(const gemlet_session* session, const char* path) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (path == nullptr) return NullHandle("path");
    return Report(session->session->SaveState(path));
  });
}

gemlet_status gemlet_session_restore(gemlet_session* session, const char* path) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (path == nullptr) return NullHandle("path");
    return Report(session->session->LoadState(path));
  });
}

gemlet_status gemlet_session_discard(gemlet_session* session, int begin, int count, int* reevaluated) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    gemlet::Result<int> r = session->session->Discard(begin, count);
    if (!r.ok()) return Report(r.status());
    if (reevaluated != nullptr) *reevaluated = *r;
    return GEMLET_OK;
  });
}

void gemlet_session_reset(gemlet_session* session) {
  if (session) session->session->Reset();
}
int gemlet_session_n_past(const gemlet_session* session) { return session ? session->session->n_past() : 0; }
void gemlet_session_cancel(gemlet_session* session) {
  if (session) session->session->Cancel();
}

// ---- generation and conversation ----

gemlet_generate_options gemlet_generate_options_default(void) {
  const gemlet::GenerateOptions d;
  gemlet_generate_options o{};
  o.struct_size = sizeof(o);
  o.max_tokens = d.max_tokens;
  o.temperature = d.sampling.temperature;
  o.top_k = d.sampling.top_k;
  o.top_p = d.sampling.top_p;
  o.min_p = d.sampling.min_p;
  o.repeat_penalty = d.sampling.repeat_penalty;
  o.repeat_last_n = d.sampling.repeat_last_n;
  o.presence_penalty = d.sampling.presence_penalty;
  o.frequency_penalty = d.sampling.frequency_penalty;
  o.seed = d.sampling.seed;
  return o;
}

gemlet_stats gemlet_stats_default(void) {
  gemlet_stats s{};
  s.struct_size = sizeof(s);
  return s;
}

gemlet_conversation_options gemlet_conversation_options_default(void) {
  gemlet_conversation_options o{};
  o.struct_size = sizeof(o);
  o.session = gemlet_session_options_default();
  return o;
}

gemlet_status gemlet_conversation_create(gemlet_engine* engine, const gemlet_conversation_options* options,
                                         gemlet_conversation** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (engine == nullptr) return NullHandle("engine");
    gemlet_conversation_options o = gemlet_conversation_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_conversation_options");
    gemlet_session_options so = gemlet_session_options_default();
    if (!ReadOptions(&o.session, &so)) return BadStruct("gemlet_conversation_options.session");
    gemlet::ConversationOptions co;
    co.session = ToSessionOptions(so);
    if (o.system) co.system = o.system;
    co.thinking = o.thinking;
    co.summarize_dropped = o.summarize_dropped;
    if (o.summary_max_tokens > 0) co.summary_max_tokens = o.summary_max_tokens;
    else if (o.summary_max_tokens < 0) return Fail(GEMLET_INVALID_ARGUMENT, "summary_max_tokens must not be negative");
    if (o.state_path) co.state_path = o.state_path;
    auto c = gemlet::Conversation::Create(engine->engine, co);
    if (!c.ok()) return Report(c.status());
    *out = new gemlet_conversation{std::move(c).value(), {}, {}};
    return GEMLET_OK;
  });
}

void gemlet_conversation_free(gemlet_conversation* conversation) { delete conversation; }

gemlet_status gemlet_conversation_send(gemlet_conversation* conversation, const char* user_text,
                                       const gemlet_generate_options* options, gemlet_stream_fn callback,
                                       void* user_data, gemlet_stats* stats) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (user_text == nullptr) return NullHandle("user_text");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_generate_options");
    gemlet::GenerateOptions g;
    if (!ToGenerateOptions(o, &g)) return Fail(GEMLET_INVALID_ARGUMENT, "stop holds a NULL string");
    conversation->last_reply.clear();
    std::string piece;  // NUL-terminated copy for C callers
    gemlet::StreamCallback on_text;
    if (callback) {
      on_text = [&](gemlet::ChunkKind kind, std::string_view text) {
        piece.assign(text);
        return callback(static_cast<gemlet_chunk_kind>(static_cast<int>(kind)), piece.c_str(), piece.size(), user_data);
      };
    }
    auto reply = conversation->conversation->Send(user_text, g, on_text);
    if (!reply.ok()) return Report(reply.status());
    conversation->last_reply = reply->text;
    WriteStats(reply->stats, stats);
    if (reply->stats.stop == gemlet::StopReason::kCancelled) return Fail(GEMLET_CANCELLED, "cancelled");
    return GEMLET_OK;
  });
}

const char* gemlet_conversation_last_reply(const gemlet_conversation* conversation) {
  return conversation ? conversation->last_reply.c_str() : "";
}

void gemlet_conversation_cancel(gemlet_conversation* conversation) {
  if (conversation) conversation->conversation->Cancel();
}

gemlet_status gemlet_conversation_set_system(gemlet_conversation* conversation, const char* system) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    conversation->conversation->SetSystem(system ? system : "");
    return GEMLET_OK;
  });
}

gemlet_status gemlet_conversation_set_thinking(gemlet_conversation* conversation, bool thinking) {
  if (conversation == nullptr) return NullHandle("conversation");
  conversation->conversation->SetThinking(thinking);
  return GEMLET_OK;
}

size_t gemlet_conversation_n_messages(gemlet_conversation* conversation) {
  if (conversation == nullptr) return 0;
  conversation->messages = conversation->conversation->messages();
  return conversation->messages.size();
}

gemlet_status gemlet_conversation_message(const gemlet_conversation* conversation, size_t index, const char** role,
                                          const char** content) {
  if (conversation == nullptr) return NullHandle("conversation");
  if (role == nullptr || content == nullptr) return NullHandle(role == nullptr ? "role" : "content");
  if (index >= conversation->messages.size()) {
    return Fail(GEMLET_INVALID_ARGUMENT, "message " + std::to_string(index) + " of " +
                                             std::to_string(conversation->messages.size()) +
                                             " (call gemlet_conversation_n_messages first)");
  }
  *role = conversation->messages[index].role.c_str();
  *content = conversation->messages[index].content.c_str();
  return GEMLET_OK;
}

void gemlet_conversation_reset(gemlet_conversation* conversation) {
  if (conversation) conversation->conversation->Reset();
}

int gemlet_conversation_n_past(const gemlet_conversation* conversation) {
  return conversation ? conversation->conversation->n_past() : 0;
}

gemlet_status gemlet_conversation_save(const gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->Save(path));
  });
}

gemlet_status gemlet_conversation_load(gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->Load(path));
  });
}

gemlet_status gemlet_conversation_save_state(const gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->SaveState(path));
  });
}

gemlet_status gemlet_conversation_restore_state(gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->LoadState(path));
  });
}

gemlet_task_options gemlet_task_options_default(void) {
  gemlet_task_options o{};
  o.struct_size = sizeof(o);
  return o;
}

gemlet_status gemlet_task_run(gemlet_session* session, const char* input, const gemlet_task_options* options,
                              const gemlet_generate_options* generate, const char** output, gemlet_stats* stats) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (input == nullptr) return NullHandle("input");
    if (output == nullptr) return NullHandle("output");
    *output = "";
    session->task_glossary_missing.clear();
    gemlet_task_options t = gemlet_task_options_default();
    if (!ReadOptions(options, &t)) return BadStruct("gemlet_task_options");
    if (t.task == nullptr) return NullHandle("options->task");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(generate, &o)) return BadStruct("gemlet_generate_options");
    gemlet::TaskOptions to;
    if (!ToGenerateOptions(o, &to.generate)) return Fail(GEMLET_INVALID_ARGUMENT, "stop holds a NULL string");
    to.task = t.task;
    to.style = t.style ? t.style : "";
    to.to = t.to ? t.to : "";
    to.schema = t.schema ? t.schema : "";
    to.glossary = t.glossary ? t.glossary : "";
    to.thinking = t.thinking;
    auto reply = gemlet::RunTask(*session->session, input, to);
    if (!reply.ok()) return Report(reply.status());
    session->task_output = std::move(reply->output);
    *output = session->task_output.c_str();
    for (const std::string& term : reply->glossary_missing) session->task_glossary_missing += term + "\n";
    WriteStats(reply->stats, stats);
    return GEMLET_OK;
  });
}

const char* gemlet_task_glossary_missing(const gemlet_session* session) {
  return session == nullptr ? "" : session->task_glossary_missing.c_str();
}

const char* gemlet_detect_language(const char* text) {
  if (text == nullptr) return "unknown";
  // Static strings for C: the tags DetectLanguageTag gives.
  const std::string tag = gemlet::DetectLanguageTag(text);
  for (const char* known : {"en", "zh-Hans", "zh-Hant", "mixed"}) {
    if (tag == known) return known;
  }
  return "unknown";
}

// ---- The model store: a thin wrapper of gemlet::ModelStore (include/gemlet/store.hpp). ----
#ifdef GEMLET_HAVE_STORE
struct gemlet_store {
  std::unique_ptr<gemlet::ModelStore> store;
};

namespace {
char* CopyOut(const std::string& s) {
  char* copy = new char[s.size() + 1];
  std::memcpy(copy, s.c_str(), s.size() + 1);
  return copy;
}
}  // namespace

gemlet_status gemlet_store_open(const char* dir, gemlet_store** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    const std::string d = dir != nullptr && *dir ? std::string(dir) : gemlet::ModelStore::DefaultDir();
    auto opened = gemlet::ModelStore::Open(d);
    if (!opened.ok()) return Report(opened.status());
    *out = new gemlet_store{std::move(opened).value()};
    return GEMLET_OK;
  });
}

void gemlet_store_free(gemlet_store* store) { delete store; }

gemlet_status gemlet_store_install(gemlet_store* store, const char* name, const char* version, const char* file,
                                   const char* sha256, unsigned flags) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr || version == nullptr || file == nullptr) return NullHandle(name == nullptr ? "name" : version == nullptr ? "version" : "file");
    gemlet::InstallOptions o;
    o.activate = (flags & GEMLET_STORE_ACTIVATE) != 0;
    o.keep_old = (flags & GEMLET_STORE_KEEP_OLD) != 0;
    o.move = (flags & GEMLET_STORE_MOVE) != 0;
    return Report(store->store->Install(name, version, file, sha256 != nullptr ? sha256 : "", o).status());
  });
}

gemlet_status gemlet_store_verify(gemlet_store* store, const char* name, int* n_failed) {
  return Guard([&] {
    if (n_failed != nullptr) *n_failed = 0;
    if (store == nullptr) return NullHandle("store");
    auto results = store->store->Verify(name != nullptr ? name : "");
    if (!results.ok()) return Report(results.status());
    int failed = 0;
    std::string first;
    for (const gemlet::VerifyResult& r : *results) {
      if (r.ok) continue;
      if (failed++ == 0) first = r.name + " " + r.version + " (" + r.path + "): " + r.problem;
    }
    if (n_failed != nullptr) *n_failed = failed;
    return failed == 0 ? GEMLET_OK : Fail(GEMLET_ERROR, first);
  });
}

gemlet_status gemlet_store_switch(gemlet_store* store, const char* name, const char* version, bool keep_old) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr || version == nullptr) return NullHandle(name == nullptr ? "name" : "version");
    return Report(store->store->Activate(name, version, keep_old));
  });
}

gemlet_status gemlet_store_rollback(gemlet_store* store, const char* name) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr) return NullHandle("name");
    return Report(store->store->Rollback(name).status());
  });
}

gemlet_status gemlet_store_remove(gemlet_store* store, const char* name) {
  return Guard([&] {
    if (store == nullptr) return NullHandle("store");
    if (name == nullptr) return NullHandle("name");
    return Report(store->store->Remove(name));
  });
}

gemlet_status gemlet_store_resolve(const gemlet_store* store, const char* ref, char** path) {
  return Guard([&] {
    if (store == nullptr || ref == nullptr || path == nullptr) return NullHandle(store == nullptr ? "store" : ref == nullptr ? "ref" : "path");
    *path = nullptr;
    auto p = store->store->Resolve(ref);
    if (!p.ok()) return Report(p.status());
    *path = CopyOut(*p);
    return GEMLET_OK;
  });
}

gemlet_status gemlet_store_active_version(const gemlet_store* store, const char* name, char** version) {
  return Guard([&] {
    if (store == nullptr || name == nullptr || version == nullptr) return NullHandle(store == nullptr ? "store" : name == nullptr ? "name" : "version");
    *version = nullptr;
    auto m = store->store->Get(name);
    if (!m.ok()) return Report(m.status());
    *version = CopyOut(m->active);
    return GEMLET_OK;
  });
}
#else
// No OpenSSL for this target: the store's entry points exist (the ABI is the same everywhere) and
// say why they cannot work.
struct gemlet_store {};
namespace {
gemlet_status NoStore() { return Fail(GEMLET_ERROR, "this libgemlet was built without the model store (no OpenSSL)"); }
}  // namespace
gemlet_status gemlet_store_open(const char*, gemlet_store** out) {
  if (out != nullptr) *out = nullptr;
  return NoStore();
}
void gemlet_store_free(gemlet_store* store) { delete store; }
gemlet_status gemlet_store_install(gemlet_store*, const char*, const char*, const char*, const char*, unsigned) { return NoStore(); }
gemlet_status gemlet_store_verify(gemlet_store*, const char*, int* n_failed) {
  if (n_failed != nullptr) *n_failed = 0;
  return NoStore();
}
gemlet_status gemlet_store_switch(gemlet_store*, const char*, const char*, bool) { return NoStore(); }
gemlet_status gemlet_store_rollback(gemlet_store*, const char*) { return NoStore(); }
gemlet_status gemlet_store_remove(gemlet_store*, const char*) { return NoStore(); }
gemlet_status gemlet_store_resolve(const gemlet_store*, const char*, char** path) {
  if (path != nullptr) *path = nullptr;
  return NoStore();
}
gemlet_status gemlet_store_active_version(const gemlet_store*, const char*, char** version) {
  if (version != nullptr) *version = nullptr;
  return NoStore();
}
#endif

}  // extern "C"

// ---- model files: digests and delta patches ----

bool gemlet_delta_available(void) { return gemlet::delta::Available(); }

gemlet_status gemlet_file_sha256(const char* path, char out_hex[65]) {
  if (path == nullptr) return NullHandle("path");
  if (out_hex == nullptr) return NullHandle("out_hex");
  return Guard([&] {
    gemlet::Result<std::string> digest = gemlet::delta::FileSha256(path);
    if (!digest.ok()) return Report(digest.status());
    std::memcpy(out_hex, digest->c_str(), 65);
    return GEMLET_OK;
  });
}

gemlet_status gemlet_file_verify(const char* path, const char* sha256_hex) {
  if (path == nullptr) return NullHandle("path");
  if (sha256_hex == nullptr) return NullHandle("sha256_hex");
  return Guard([&] { return Report(gemlet::delta::VerifyFile(path, sha256_hex)); });
}

gemlet_patch_info gemlet_patch_info_default(void) {
  gemlet_patch_info info{};
  info.struct_size = sizeof(info);
  return info;
}

gemlet_status gemlet_patch_info_read(const char* patch_path, gemlet_patch_info* info) {
  if (patch_path == nullptr) return NullHandle("patch_path");
  if (info == nullptr || info->struct_size < sizeof(size_t)) return NullHandle("info");
  return Guard([&] {
    gemlet::Result<gemlet::delta::PatchInfo> p = gemlet::delta::ReadPatchInfo(patch_path);
    if (!p.ok()) return Report(p.status());
    gemlet_patch_info full = gemlet_patch_info_default();
    full.old_size = p->old_size;
    std::memcpy(full.old_sha256, p->old_sha256.c_str(), 65);
    full.new_size = p->new_size;
    std::memcpy(full.new_sha256, p->new_sha256.c_str(), 65);
    full.patch_size = p->patch_bytes;
    full.literal_bytes = p->literal_bytes;
    // Only what the caller's struct holds: an older, smaller header keeps its size.
    const size_t n = info->struct_size < sizeof(full) ? info->struct_size : sizeof(full);
    std::memcpy(static_cast<void*>(info), &full, n);
    info->struct_size = n;
    return GEMLET_OK;
  });
}

gemlet_status gemlet_delta_apply(const char* old_path, const char* patch_path, const char* new_path,
                                 gemlet_progress_fn progress, void* user_data) {
  if (old_path == nullptr) return NullHandle("old_path");
  if (patch_path == nullptr) return NullHandle("patch_path");
  if (new_path == nullptr) return NullHandle("new_path");
  return Guard([&] {
    gemlet::delta::ApplyOptions options;
    if (progress != nullptr) {
      options.progress = [progress, user_data](uint64_t done, uint64_t total) {
        return progress(total ? static_cast<float>(static_cast<double>(done) / static_cast<double>(total)) : 1.0f,
                        user_data);
      };
    }
    return Report(gemlet::delta::Apply(old_path, patch_path, new_path, options).status());
  });
}

// The C API's engine (gemlet_engine): loading, model info, tokens and the chat format, kernels,
// platform signals, memory, and fitting a session to a memory budget.
#include <string_view>

#include "api/gemlet_c_internal.h"

using namespace gemlet::capi;

namespace {

gemlet_status LoadInto(gemlet::Result<std::shared_ptr<gemlet::Engine>> r, gemlet_engine** out) {
  if (!r.ok()) return Report(r.status());
  *out = new gemlet_engine(std::move(r).value());
  return GEMLET_OK;
}

// The fitted options, note and floor of FitToBudget / FitFileToBudget to the caller.
gemlet_status FitOut(const gemlet::Result<gemlet::SessionOptions>& r, const std::string& note_text,
                     gemlet_session_options* fitted, char** note) {
  if (!r.ok()) return Report(r.status());
  const gemlet_session_options out = FromSessionOptions(r.value());
  if (!WriteOut(out, fitted)) return NullHandle("fitted");
  if (note) *note = CopyOut(note_text);
  return GEMLET_OK;
}

}  // namespace

extern "C" {

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
  return engine ? engine->engine->info().architecture.c_str() : "";  // info() lives as long as the engine
}

gemlet_model_info gemlet_model_info_default(void) {
  static const gemlet::ModelInfo none;  // the empty strings the defaults point to
  return FromModelInfo(none);
}

gemlet_status gemlet_engine_info(const gemlet_engine* engine, gemlet_model_info* info) {
  if (engine == nullptr) return NullHandle("engine");
  if (!WriteOut(FromModelInfo(engine->engine->info()), info)) return NullHandle("info");
  return GEMLET_OK;
}

gemlet_status gemlet_tokenize(const gemlet_engine* engine, const char* text, size_t text_len, bool add_special,
                              bool parse_special, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (text == nullptr && text_len > 0) return NullHandle("text");
    if (tokens == nullptr && capacity > 0) return NullHandle("tokens");
    return CopyTokens(engine->engine->Tokenize(std::string_view(text ? text : "", text_len), {add_special, parse_special}),
                      tokens, capacity, n_tokens);
  });
}

gemlet_status gemlet_detokenize(const gemlet_engine* engine, const int32_t* tokens, size_t n_tokens, char** text) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (text == nullptr) return NullHandle("text");
    if (tokens == nullptr && n_tokens > 0) return NullHandle("tokens");
    *text = CopyOut(engine->engine->Detokenize(std::span<const int32_t>(tokens, n_tokens)));
    return GEMLET_OK;
  });
}

gemlet_status gemlet_engine_token_text(const gemlet_engine* engine, int32_t token, char** text) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (text == nullptr) return NullHandle("text");
    *text = CopyOut(engine->engine->TokenText(token));
    return GEMLET_OK;
  });
}

int32_t gemlet_engine_bos_token(const gemlet_engine* engine) { return engine ? engine->engine->bos_token() : -1; }
bool gemlet_engine_is_end_of_generation(const gemlet_engine* engine, int32_t token) {
  return engine && engine->engine->IsEndOfGeneration(token);
}

gemlet_status gemlet_engine_apply_chat_template(const gemlet_engine* engine, const gemlet_message* messages,
                                                size_t n_messages, bool add_generation_prompt, char** text) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    if (text == nullptr) return NullHandle("text");
    *text = nullptr;
    std::vector<gemlet::Message> chat;
    if (!ToMessages(messages, n_messages, &chat)) return GEMLET_INVALID_ARGUMENT;
    auto r = engine->engine->ApplyChatTemplate(chat, add_generation_prompt);
    if (!r.ok()) return Report(r.status());
    *text = CopyOut(*r);
    return GEMLET_OK;
  });
}

gemlet_status gemlet_engine_tokenize_chat(const gemlet_engine* engine, const gemlet_message* messages, size_t n_messages,
                                          const gemlet_chat_options* options, int32_t* tokens, size_t capacity,
                                          size_t* n_tokens) {
  return Guard([&] {
    if (n_tokens) *n_tokens = 0;
    if (engine == nullptr) return NullHandle("engine");
    if (tokens == nullptr && capacity > 0) return NullHandle("tokens");
    gemlet_chat_options o = gemlet_chat_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_chat_options");
    std::vector<gemlet::Message> chat;
    if (!ToMessages(messages, n_messages, &chat)) return GEMLET_INVALID_ARGUMENT;
    auto r = engine->engine->TokenizeChat(chat, ToChatOptions(o));
    if (!r.ok()) return Report(r.status());
    return CopyTokens(*r, tokens, capacity, n_tokens);
  });
}

gemlet_status gemlet_engine_check_response_format(const gemlet_engine* engine, const gemlet_generate_options* options,
                                                  int n_ctx) {
  return Guard([&] {
    if (engine == nullptr) return NullHandle("engine");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_generate_options");
    gemlet::GenerateOptions g;
    if (!ToGenerateOptions(o, &g)) return GEMLET_INVALID_ARGUMENT;
    return Report(engine->engine->CheckResponseFormat(g, n_ctx));
  });
}

// ---- threads and kernels ----

gemlet_status gemlet_engine_set_thread_limit(gemlet_engine* engine, int n_threads) {
  if (engine == nullptr) return NullHandle("engine");
  if (n_threads < 0) return Fail(GEMLET_INVALID_ARGUMENT, "the thread limit must be >= 0");
  engine->engine->SetThreadLimit(n_threads);
  return GEMLET_OK;
}

int gemlet_engine_thread_limit(const gemlet_engine* engine) { return engine ? engine->engine->thread_limit() : 0; }

gemlet_status gemlet_engine_set_kernels(gemlet_engine* engine, const char* kernels) {
  if (engine == nullptr) return NullHandle("engine");
  if (kernels == nullptr) return NullHandle("kernels");
  return Guard([&] {
    gemlet::KernelOptions k = engine->engine->kernel_options();
    k.kernels = kernels;
    return Report(engine->engine->SetKernelOptions(k));
  });
}

gemlet_status gemlet_engine_set_kernel_options(gemlet_engine* engine, const gemlet_kernel_options* options) {
  if (engine == nullptr) return NullHandle("engine");
  return Guard([&] {
    gemlet_kernel_options o = gemlet_kernel_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_kernel_options");
    return Report(engine->engine->SetKernelOptions(ToKernelOptions(o)));
  });
}

gemlet_status gemlet_engine_kernel_options(const gemlet_engine* engine, gemlet_kernel_options* options) {
  if (engine == nullptr) return NullHandle("engine");
  return Guard([&] {
    if (!WriteOut(FromKernelOptions(engine->engine->kernel_options()), options)) return NullHandle("options");
    return GEMLET_OK;
  });
}

// The C++ API gives the name as a std::string; C callers were promised a static string, which the
// fixed set of kernel names allows.
const char* gemlet_engine_kernels(const gemlet_engine* engine) {
  if (engine == nullptr) return "";
  try {
    return Intern(engine->engine->kernels_name());
  } catch (...) {
    return "";
  }
}

gemlet_status gemlet_engine_prepare_weights(const gemlet_engine* engine, int n_threads) {
  if (engine == nullptr) return NullHandle("engine");
  return Guard([&] {
    engine->stop_prepare.store(false);  // a stop meant for an earlier call must not end this one
    engine->engine->PrepareWeights(&engine->stop_prepare, n_threads < 1 ? 1 : n_threads);
    return GEMLET_OK;
  });
}

void gemlet_engine_stop_prepare_weights(const gemlet_engine* engine) {
  if (engine) engine->stop_prepare.store(true);
}

gemlet_memory_usage gemlet_memory_usage_default(void) { return FromMemoryUsage({}); }

gemlet_status gemlet_engine_measure_memory(const gemlet_engine* engine, gemlet_memory_usage* usage) {
  if (engine == nullptr) return NullHandle("engine");
  return Guard([&] {
    if (!WriteOut(FromMemoryUsage(engine->engine->MeasureMemory()), usage)) return NullHandle("usage");
    return GEMLET_OK;
  });
}

uint64_t gemlet_engine_decode_kv_bytes_at(const gemlet_engine* engine, gemlet_kv_type type, int64_t pos) {
  if (engine == nullptr) return 0;
  try {
    return engine->engine->DecodeKvBytesAt(ToKvCacheType(type), pos);
  } catch (...) {
    return 0;
  }
}

// ---- platform signals ----

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
    WriteOut(FromThermalStatus(engine->engine->thermal_status()), status);
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

// ---- memory budget ----

gemlet_session_cost gemlet_session_cost_default(void) { return FromSessionCost({}); }

gemlet_status gemlet_plan_session(const gemlet_engine* engine, const gemlet_session_options* options,
                                  gemlet_session_cost* cost) {
  if (engine == nullptr) return NullHandle("engine");
  return Guard([&] {
    gemlet_session_options o = gemlet_session_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_session_options");
    if (!WriteOut(FromSessionCost(gemlet::PlanSession(*engine->engine, ToSessionOptions(o))), cost)) {
      return NullHandle("cost");
    }
    return GEMLET_OK;
  });
}

gemlet_status gemlet_fit_to_budget(const gemlet_engine* engine, uint64_t budget_bytes,
                                   const gemlet_session_options* wanted, gemlet_session_options* fitted, char** note,
                                   uint64_t* floor_bytes) {
  return Guard([&] {
    if (note) *note = nullptr;
    if (engine == nullptr) return NullHandle("engine");
    gemlet_session_options o = gemlet_session_options_default();
    if (!ReadOptions(wanted, &o)) return BadStruct("gemlet_session_options");
    std::string note_text;
    auto r = gemlet::FitToBudget(*engine->engine, budget_bytes, ToSessionOptions(o), &note_text, floor_bytes);
    return FitOut(r, note_text, fitted, note);
  });
}

gemlet_status gemlet_fit_file_to_budget(const char* path, const gemlet_engine_options* engine_options,
                                        uint64_t budget_bytes, const gemlet_session_options* wanted,
                                        gemlet_session_options* fitted, char** note, uint64_t* floor_bytes) {
  return Guard([&] {
    if (note) *note = nullptr;
    if (path == nullptr) return NullHandle("path");
    gemlet_engine_options eo = gemlet_engine_options_default();
    if (!ReadOptions(engine_options, &eo)) return BadStruct("gemlet_engine_options");
    gemlet_session_options o = gemlet_session_options_default();
    if (!ReadOptions(wanted, &o)) return BadStruct("gemlet_session_options");
    std::string note_text;
    auto r = gemlet::FitFileToBudget(path, ToEngineOptions(eo), budget_bytes, ToSessionOptions(o), &note_text,
                                     floor_bytes);
    return FitOut(r, note_text, fitted, note);
  });
}

}  // extern "C"

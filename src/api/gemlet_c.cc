// The C API (include/gemlet/gemlet.h) over the C++ API: its error mechanism (status codes with a
// per-thread last error), version and ABI, log callback, the names of its enums, process-wide
// queries, option checks, and the model-less tokenizer. The objects' functions are in
// gemlet_c_engine.cc, gemlet_c_session.cc, gemlet_c_conversation.cc and gemlet_c_store.cc; the
// struct converters in gemlet_c_convert.cc. No exception leaves a function here.
#include <algorithm>
#include <mutex>
#include <set>
#include <string_view>

#include "api/gemlet_c_internal.h"

namespace gemlet::capi {

namespace {

thread_local std::string g_last_error;

gemlet_status Code(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return GEMLET_OK;
    case StatusCode::kError: return GEMLET_ERROR;
    case StatusCode::kInvalidArgument: return GEMLET_INVALID_ARGUMENT;
    case StatusCode::kCancelled: return GEMLET_CANCELLED;
    case StatusCode::kContextFull: return GEMLET_CONTEXT_FULL;
    case StatusCode::kOutOfMemory: return GEMLET_OUT_OF_MEMORY;
    case StatusCode::kTooLarge: return GEMLET_TOO_LARGE;
  }
  return GEMLET_ERROR;
}

}  // namespace

const char* LastError() { return g_last_error.c_str(); }

gemlet_status Fail(gemlet_status code, std::string message) {
  g_last_error = std::move(message);
  return code;
}

gemlet_status Report(const Status& s) {
  if (s.ok()) return GEMLET_OK;
  return Fail(Code(s.code()), s.message());
}

gemlet_status BadStruct(const char* what) {
  return Fail(GEMLET_INVALID_ARGUMENT, std::string(what) + ": struct_size is not that of a gemlet.h struct "
                                                           "(start from the *_default() initialiser)");
}

gemlet_status NullHandle(const char* what) { return Fail(GEMLET_INVALID_ARGUMENT, std::string(what) + " is NULL"); }

char* CopyOut(const std::string& s) {
  char* copy = new char[s.size() + 1];
  std::memcpy(copy, s.c_str(), s.size() + 1);
  return copy;
}

const char* Intern(const std::string& s) {
  static std::mutex mutex;
  static std::set<std::string>* names = new std::set<std::string>();  // never freed: callers keep the pointers
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(s).first->c_str();
}

gemlet_status CopyTokens(const std::vector<int32_t>& ids, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  if (n_tokens) *n_tokens = ids.size();
  if (ids.size() > capacity) {
    return Fail(GEMLET_BUFFER_TOO_SMALL, "the text has " + std::to_string(ids.size()) + " tokens, the buffer room for " +
                                             std::to_string(capacity));
  }
  std::copy(ids.begin(), ids.end(), tokens);
  return GEMLET_OK;
}

StreamCallback ToStreamCallback(gemlet_stream_fn fn, void* user_data) {
  if (fn == nullptr) return {};
  auto piece = std::make_shared<std::string>();  // NUL-terminated copy for C; shared by the callback's copies
  return [fn, user_data, piece](ChunkKind kind, std::string_view text) {
    piece->assign(text);
    return fn(static_cast<gemlet_chunk_kind>(static_cast<int>(kind)), piece->c_str(), piece->size(), user_data);
  };
}

gemlet_reply* NewReply(Reply reply) {
  auto* r = new gemlet_reply{std::move(reply), {}};
  for (const ToolCall& t : r->reply.tool_calls) r->tool_calls.push_back(FromToolCall(t));
  r->top_logprobs = FromTopLogprobs(r->reply.logprobs);
  return r;
}

}  // namespace gemlet::capi

using namespace gemlet::capi;

extern "C" {

const char* gemlet_version(void) { return gemlet::Version(); }
int gemlet_abi_version(void) { return GEMLET_ABI_VERSION; }
const char* gemlet_last_error(void) { return LastError(); }

const char* gemlet_status_name(gemlet_status status) {
  switch (status) {
    case GEMLET_OK: return "ok";
    case GEMLET_ERROR: return "error";
    case GEMLET_INVALID_ARGUMENT: return "invalid argument";
    case GEMLET_CANCELLED: return "cancelled";
    case GEMLET_CONTEXT_FULL: return "context full";
    case GEMLET_OUT_OF_MEMORY: return "out of memory";
    case GEMLET_BUFFER_TOO_SMALL: return "buffer too small";
    case GEMLET_TOO_LARGE: return "too large";
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

void gemlet_set_footprint_callback(gemlet_footprint_fn callback, void* user_data) {
  if (callback == nullptr) {
    gemlet::SetFootprintCallback(nullptr);
    return;
  }
  gemlet::SetFootprintCallback([callback, user_data]() -> uint64_t { return callback(user_data); });
}

int gemlet_resolve_thread_count(int n_threads) { return gemlet::ResolveThreadCount(n_threads); }

void gemlet_string_free(char* text) { delete[] text; }

// ---- names of the enums: the C++ API's, for the values C knows ----

const char* gemlet_thermal_state_name(gemlet_thermal_state state) {
  if (state < GEMLET_THERMAL_NOMINAL || state > GEMLET_THERMAL_CRITICAL) return "unknown";
  return gemlet::ThermalStateName(static_cast<gemlet::ThermalState>(state));
}

const char* gemlet_memory_level_name(gemlet_memory_level level) {
  return gemlet::MemoryPressureName(static_cast<gemlet::MemoryPressure>(level));
}

const char* gemlet_memory_action_name(gemlet_memory_action action) {
  if (action < GEMLET_MEMORY_RELEASED_SCRATCH || action > GEMLET_MEMORY_LOWERED_KV_PRECISION) return "unknown";
  return gemlet::MemoryActionName(static_cast<gemlet::MemoryAction>(action));
}

const char* gemlet_stop_reason_name(gemlet_stop_reason reason) {
  if (reason < GEMLET_STOP_END_OF_TURN || reason > GEMLET_STOP_CANCELLED) return "unknown";
  return gemlet::StopReasonName(static_cast<gemlet::StopReason>(reason));
}

const char* gemlet_kv_type_name(gemlet_kv_type type) {
  if (type < GEMLET_KV_F16 || type > GEMLET_KV_Q4_0) return "";
  return gemlet::KvCacheTypeName(ToKvCacheType(type));
}

bool gemlet_parse_kv_type(const char* name, gemlet_kv_type* out) {
  gemlet::KvCacheType t;
  if (name == nullptr || !gemlet::ParseKvCacheType(name, &t)) return false;
  if (out) *out = FromKvCacheType(t);
  return true;
}

// ---- process-wide queries ----

gemlet_process_memory gemlet_process_memory_default(void) { return FromProcessMemory({}); }

gemlet_status gemlet_measure_process_memory(gemlet_process_memory* out) {
  if (out == nullptr || out->struct_size < sizeof(size_t)) return NullHandle("out");
  return Guard([&] {
    WriteOut(FromProcessMemory(gemlet::MeasureProcessMemory()), out);
    return GEMLET_OK;
  });
}

uint64_t gemlet_parse_byte_size(const char* text) { return text ? gemlet::ParseByteSize(text) : 0; }
uint64_t gemlet_default_memory_budget(void) { return gemlet::DefaultMemoryBudget(); }

// The list is fixed for the process (this build, this CPU): made once, its strings static.
static const std::vector<std::string>& KernelNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>(gemlet::AvailableKernels());
  return *names;
}
size_t gemlet_n_available_kernels(void) { return KernelNames().size(); }
const char* gemlet_available_kernel(size_t index) {
  return index < KernelNames().size() ? KernelNames()[index].c_str() : nullptr;
}

// ---- option checks ----

gemlet_kernel_options gemlet_kernel_options_default(void) { return FromKernelOptions(gemlet::KernelOptions()); }

gemlet_status gemlet_kernel_options_validate(const gemlet_kernel_options* options) {
  return Guard([&] {
    gemlet_kernel_options o = gemlet_kernel_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_kernel_options");
    const std::string problem = gemlet::Validate(ToKernelOptions(o));
    return problem.empty() ? GEMLET_OK : Fail(GEMLET_INVALID_ARGUMENT, problem);
  });
}

gemlet_status gemlet_generate_options_validate(const gemlet_generate_options* options) {
  return Guard([&] {
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_generate_options");
    gemlet::GenerateOptions g;
    if (!ToGenerateOptions(o, &g)) return GEMLET_INVALID_ARGUMENT;
    const std::string problem = gemlet::Validate(g);
    return problem.empty() ? GEMLET_OK : Fail(GEMLET_INVALID_ARGUMENT, problem);
  });
}

// ---- a tokenizer without a model ----

gemlet_status gemlet_tokenizer_open(const char* path, gemlet_tokenizer** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (path == nullptr) return NullHandle("path");
    auto t = gemlet::TextTokenizer::Open(path);
    if (!t.ok()) return Report(t.status());
    *out = new gemlet_tokenizer{std::move(t).value()};
    return GEMLET_OK;
  });
}

void gemlet_tokenizer_free(gemlet_tokenizer* tokenizer) { delete tokenizer; }

gemlet_status gemlet_tokenizer_encode(const gemlet_tokenizer* tokenizer, const char* text, size_t text_len,
                                      bool add_special, bool parse_special, int32_t* tokens, size_t capacity,
                                      size_t* n_tokens) {
  return Guard([&] {
    if (tokenizer == nullptr) return NullHandle("tokenizer");
    if (text == nullptr && text_len > 0) return NullHandle("text");
    if (tokens == nullptr && capacity > 0) return NullHandle("tokens");
    return CopyTokens(tokenizer->tokenizer->Encode(std::string_view(text ? text : "", text_len), {add_special, parse_special}),
                      tokens, capacity, n_tokens);
  });
}

gemlet_status gemlet_tokenizer_decode(const gemlet_tokenizer* tokenizer, const int32_t* tokens, size_t n_tokens,
                                      char** text) {
  return Guard([&] {
    if (tokenizer == nullptr) return NullHandle("tokenizer");
    if (text == nullptr) return NullHandle("text");
    if (tokens == nullptr && n_tokens > 0) return NullHandle("tokens");
    *text = CopyOut(tokenizer->tokenizer->Decode(std::span<const int32_t>(tokens, n_tokens)));
    return GEMLET_OK;
  });
}

gemlet_status gemlet_tokenizer_piece(const gemlet_tokenizer* tokenizer, int32_t token, char** piece) {
  return Guard([&] {
    if (tokenizer == nullptr) return NullHandle("tokenizer");
    if (piece == nullptr) return NullHandle("piece");
    *piece = CopyOut(tokenizer->tokenizer->Piece(token));
    return GEMLET_OK;
  });
}

int gemlet_tokenizer_vocab_size(const gemlet_tokenizer* tokenizer) {
  return tokenizer ? tokenizer->tokenizer->vocab_size() : 0;
}

}  // extern "C"

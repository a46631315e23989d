// The C API's converters: gemlet.h's ABI-fixed structs to the C++ API's value types (gemlet/types.hpp)
// and back, one function per type and direction, so a field added to either side has one place to go.
#include "api/gemlet_c_internal.h"

namespace gemlet::capi {

EngineOptions ToEngineOptions(const gemlet_engine_options& o) {
  EngineOptions e;
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
  if (o.mmproj_path) e.mmproj_path = o.mmproj_path;
  e.audio_hf_eager_mask = o.audio_hf_eager_mask;
  if (o.on_memory_action) {
    const gemlet_memory_action_fn fn = o.on_memory_action;
    void* user = o.memory_action_user_data;
    e.on_memory_action = [fn, user](const MemoryActionEvent& ev) {
      fn(static_cast<gemlet_memory_action>(static_cast<int>(ev.action)), ev.critical, ev.bytes_released,
         ev.detail.c_str(), user);
    };
  }
  return e;
}

KernelOptions ToKernelOptions(const gemlet_kernel_options& o) {
  KernelOptions k;
  if (o.kernels) k.kernels = o.kernels;
  k.pack_weights = o.pack_weights;
  k.prefetch_bytes = o.prefetch_bytes;
  k.vnni_gemm = o.vnni_gemm;
  k.spin_wait = o.spin_wait;
  k.batch_invariant = o.batch_invariant;
  return k;
}

gemlet_kernel_options FromKernelOptions(const KernelOptions& k) {
  gemlet_kernel_options o{};
  o.struct_size = sizeof(o);
  o.kernels = Intern(k.kernels);
  o.pack_weights = k.pack_weights;
  o.prefetch_bytes = k.prefetch_bytes;
  o.vnni_gemm = k.vnni_gemm;
  o.spin_wait = k.spin_wait;
  o.batch_invariant = k.batch_invariant;
  return o;
}

// gemlet.h numbers the KV types in the order they were added; the C++ enum uses the GGML type ids.
KvCacheType ToKvCacheType(gemlet_kv_type t) {
  switch (t) {
    case GEMLET_KV_F32: return KvCacheType::kF32;
    case GEMLET_KV_Q8_0: return KvCacheType::kQ8_0;
    case GEMLET_KV_Q4_0: return KvCacheType::kQ4_0;
    case GEMLET_KV_F16: break;
  }
  return KvCacheType::kF16;
}

gemlet_kv_type FromKvCacheType(KvCacheType t) {
  switch (t) {
    case KvCacheType::kF32: return GEMLET_KV_F32;
    case KvCacheType::kQ8_0: return GEMLET_KV_Q8_0;
    case KvCacheType::kQ4_0: return GEMLET_KV_Q4_0;
    case KvCacheType::kF16: break;
  }
  return GEMLET_KV_F16;
}

// gemlet_session_options cannot grow (gemlet_conversation_options holds one by value): the fields
// it lacks (rollback_tokens, progress, draft_model) come from gemlet_session_extra_options
// (ApplySessionExtraOptions), else keep the C++ defaults.
SessionOptions ToSessionOptions(const gemlet_session_options& o) {
  SessionOptions s;
  s.n_ctx = o.n_ctx;
  s.n_threads = o.n_threads;
  s.max_batch = o.max_batch;
  s.kv_cache_type = ToKvCacheType(o.kv_type);
  return s;
}

gemlet_session_options FromSessionOptions(const SessionOptions& s) {
  gemlet_session_options o{};
  o.struct_size = sizeof(o);
  o.n_ctx = s.n_ctx;
  o.n_threads = s.n_threads;
  o.max_batch = s.max_batch;
  o.kv_type = FromKvCacheType(s.kv_cache_type);
  return o;
}

void ApplySessionExtraOptions(const gemlet_session_extra_options& o, SessionOptions* s) {
  s->rollback_tokens = o.rollback_tokens;
  if (o.progress) {
    const gemlet_prompt_progress_fn fn = o.progress;
    void* user = o.progress_user_data;
    s->progress = [fn, user](int done, int total) { fn(done, total, user); };
  }
  // The shared engine, not the handle: the session outlives a draft handle the caller frees.
  if (o.draft_model) s->draft_model = o.draft_model->engine;
}

gemlet_session_extra_options FromSessionExtraOptions(const SessionOptions& s) {
  gemlet_session_extra_options o{};
  o.struct_size = sizeof(o);
  o.rollback_tokens = s.rollback_tokens;
  return o;  // a default has no draft model and no progress callback: they cannot come back as C handles
}

bool ToGenerateOptions(const gemlet_generate_options& o, GenerateOptions* g) {
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
  if (o.n_stop > 0 && o.stop == nullptr) return Fail(GEMLET_INVALID_ARGUMENT, "stop is NULL with n_stop > 0"), false;
  for (size_t i = 0; i < o.n_stop; ++i) {
    if (o.stop[i] == nullptr) return Fail(GEMLET_INVALID_ARGUMENT, "stop holds a NULL string"), false;
    g->stop.emplace_back(o.stop[i]);
  }
  if (o.response_format) g->response_format = o.response_format;
  if (o.tool_choice) g->tool_choice = o.tool_choice;
  g->max_draft = o.max_draft;
  if (o.n_logit_bias > 0 && (o.logit_bias_tokens == nullptr || o.logit_bias_values == nullptr)) {
    return Fail(GEMLET_INVALID_ARGUMENT, "logit_bias_tokens or logit_bias_values is NULL with n_logit_bias > 0"), false;
  }
  for (size_t i = 0; i < o.n_logit_bias; ++i) {
    g->sampling.logit_bias.emplace_back(o.logit_bias_tokens[i], o.logit_bias_values[i]);
  }
  // The C++ API caps the alternatives at the vocabulary only; the C API holds apps to the documented
  // 20 (OpenAI's limit too), so a typo cannot make every token sort the whole vocabulary.
  if (o.logprobs && (o.top_logprobs < 0 || o.top_logprobs > 20)) {
    return Fail(GEMLET_INVALID_ARGUMENT, "top_logprobs must be in [0, 20]"), false;
  }
  g->top_logprobs = o.logprobs ? o.top_logprobs : -1;
  return true;
}

gemlet_stats FromGenerationStats(const GenerationStats& s) {
  gemlet_stats c{};
  c.struct_size = sizeof(c);
  c.prompt_tokens = s.prompt_tokens;
  c.cached_tokens = s.cached_tokens;
  c.generated_tokens = s.generated_tokens;
  c.ttft_seconds = s.ttft_seconds;
  c.prefill_tokens_per_second = s.prefill_tokens_per_second;
  c.decode_tokens_per_second = s.decode_tokens_per_second;
  c.stop = static_cast<gemlet_stop_reason>(static_cast<int>(s.stop));
  c.kv_cache_bytes = s.memory.kv_cache_bytes;
  c.activation_bytes = s.memory.activation_bytes;
  c.dropped_messages = s.dropped_messages;
  c.dropped_tokens = s.dropped_tokens;
  c.reevaluated_tokens = s.reevaluated_tokens;
  c.summarized_messages = s.summarized_messages;
  c.summary_tokens = s.summary_tokens;
  c.pressure_actions = s.memory.pressure_actions;
  c.pressure_released_bytes = s.memory.pressure_released_bytes;
  c.kv_cache_resident_bytes = s.memory.kv_cache_resident_bytes;
  c.draft_steps = s.draft_steps;
  c.drafted_tokens = s.drafted_tokens;
  c.accepted_tokens = s.accepted_tokens;
  c.throttled_steps = s.thermal.throttled_steps;
  return c;
}

gemlet_model_info FromModelInfo(const ModelInfo& m) {
  gemlet_model_info c{};
  c.struct_size = sizeof(c);
  c.architecture = m.architecture.c_str();
  c.name = m.name.c_str();
  c.chat_format = m.chat_format.c_str();
  c.n_vocab = m.n_vocab;
  c.n_ctx_train = m.n_ctx_train;
  c.n_layers = m.n_layers;
  c.d_model = m.d_model;
  c.n_parameters = m.n_parameters;
  c.file_bytes = m.file_bytes;
  c.tensor_bytes = m.tensor_bytes;
  c.file_type = m.file_type.c_str();
  c.decode_weight_bytes = m.decode_weight_bytes;
  c.prompt_macs_per_token = m.prompt_macs_per_token;
  c.load_seconds = m.load_seconds;
  c.map_seconds = m.map_seconds;
  c.packed_cache = m.packed_cache.c_str();
  c.packed_cache_seconds = m.packed_cache_seconds;
  c.takes_images = m.takes_images;
  c.takes_audio = m.takes_audio;
  c.mmproj_projector = m.mmproj_projector.c_str();
  return c;
}

gemlet_memory_usage FromMemoryUsage(const MemoryUsage& u) {
  gemlet_memory_usage c{};
  c.struct_size = sizeof(c);
  c.rss_bytes = u.rss_bytes;
  c.peak_rss_bytes = u.peak_rss_bytes;
  c.anon_bytes = u.anon_bytes;
  c.model_file_resident_bytes = u.model_file_resident_bytes;
  c.on_demand_resident_bytes = u.on_demand_resident_bytes;
  c.packed_weight_bytes = u.packed_weight_bytes;
  c.packed_mapped_bytes = u.packed_mapped_bytes;
  c.tokenizer_bytes = u.tokenizer_bytes;
  return c;
}

gemlet_memory_stats FromMemoryStats(const MemoryStats& m) {
  gemlet_memory_stats c{};
  c.struct_size = sizeof(c);
  c.kv_cache_bytes = m.kv_cache_bytes;
  c.kv_cache_resident_bytes = m.kv_cache_resident_bytes;
  c.activation_bytes = m.activation_bytes;
  c.pressure_actions = m.pressure_actions;
  c.pressure_released_bytes = m.pressure_released_bytes;
  return c;
}

gemlet_memory_plan FromMemoryPlan(const MemoryPlan& p) {
  gemlet_memory_plan c{};
  c.struct_size = sizeof(c);
  c.file_bytes = p.file_bytes;
  c.weights_resident_bytes = p.weights_resident_bytes;
  c.weights_on_demand_bytes = p.weights_on_demand_bytes;
  c.kv_cache_bytes = p.kv_cache_bytes;
  c.activation_bytes = p.activation_bytes;
  c.n_ctx = p.n_ctx;
  c.text = p.text.c_str();
  return c;
}

gemlet_session_cost FromSessionCost(const SessionCost& s) {
  gemlet_session_cost c{};
  c.struct_size = sizeof(c);
  c.kv_bytes = s.kv_bytes;
  c.activation_bytes = s.activation_bytes;
  c.packed_in_memory_bytes = s.packed_in_memory_bytes;
  c.baseline_bytes = s.baseline_bytes;
  c.total_bytes = s.total();
  return c;
}

gemlet_process_memory FromProcessMemory(const ProcessMemory& p) {
  gemlet_process_memory c{};
  c.struct_size = sizeof(c);
  c.rss_bytes = p.rss_bytes;
  c.anon_bytes = p.anon_bytes;
  c.peak_rss_bytes = p.peak_rss_bytes;
  return c;
}

gemlet_thermal_status FromThermalStatus(const ThermalStatus& t) {
  gemlet_thermal_status c = gemlet_thermal_status_default();
  c.enabled = t.enabled;
  c.has_reading = t.has_reading;
  c.throttled = t.throttled;
  c.temperature_c = t.temperature_c;
  c.level = static_cast<gemlet_thermal_state>(t.level);
  c.work_fraction = t.work_fraction;
  c.threads = t.threads;
  c.duty = t.duty;
  c.prefill_chunk = t.prefill_chunk;
  c.throttled_seconds = t.throttled_seconds;
  c.changes = t.changes;
  return c;
}

gemlet_tool_call FromToolCall(const ToolCall& t) {
  return gemlet_tool_call{t.name.c_str(), t.arguments.c_str(), t.id.c_str()};
}

gemlet_token_logprob FromTokenLogprob(const TokenLogprob& t) { return gemlet_token_logprob{t.token, t.logprob}; }

std::vector<std::vector<gemlet_token_logprob>> FromTopLogprobs(const std::vector<TokenLogprobs>& logprobs) {
  std::vector<std::vector<gemlet_token_logprob>> out;
  out.reserve(logprobs.size());
  for (const TokenLogprobs& l : logprobs) {
    std::vector<gemlet_token_logprob>& top = out.emplace_back();
    for (const TokenLogprob& t : l.top) top.push_back(FromTokenLogprob(t));
  }
  return out;
}

gemlet_status ReadLogprob(const std::vector<TokenLogprobs>& logprobs,
                          const std::vector<std::vector<gemlet_token_logprob>>& top_copies, size_t index,
                          gemlet_token_logprob* chosen, const gemlet_token_logprob** top, size_t* n_top) {
  if (index >= logprobs.size()) {
    return Fail(GEMLET_INVALID_ARGUMENT,
                "logprob " + std::to_string(index) + " of " + std::to_string(logprobs.size()));
  }
  if (chosen) *chosen = FromTokenLogprob(logprobs[index].chosen);
  const std::vector<gemlet_token_logprob>& t = top_copies[index];
  if (top) *top = t.empty() ? nullptr : t.data();
  if (n_top) *n_top = t.size();
  return GEMLET_OK;
}

gemlet_message FromMessage(const Message& m, const std::vector<gemlet_tool_call>& calls) {
  gemlet_message c = gemlet_message_default();
  c.role = m.role.c_str();
  c.content = m.content.c_str();
  c.tool_calls = calls.empty() ? nullptr : calls.data();
  c.n_tool_calls = calls.size();
  c.reasoning = m.reasoning.c_str();
  c.tool_call_id = m.tool_call_id.c_str();
  c.name = m.name.c_str();
  return c;
}

bool ToMessages(const gemlet_message* messages, size_t n, std::vector<Message>* out) {
  out->clear();
  if (n == 0) return true;
  if (messages == nullptr) return NullHandle("messages"), false;
  // The array's stride is the caller's sizeof(gemlet_message), which its struct_size says: an older
  // header's shorter messages are read one by one over the defaults.
  const size_t stride = messages[0].struct_size;
  if (stride < sizeof(size_t) || stride > sizeof(gemlet_message)) return BadStruct("gemlet_message"), false;
  const auto* base = reinterpret_cast<const unsigned char*>(messages);
  auto text = [](const char* s) { return std::string(s ? s : ""); };
  for (size_t i = 0; i < n; ++i) {
    gemlet_message m = gemlet_message_default();
    const auto* in = reinterpret_cast<const gemlet_message*>(base + i * stride);
    if (in->struct_size != stride) {
      return Fail(GEMLET_INVALID_ARGUMENT, "message " + std::to_string(i) + ": struct_size differs from message 0's"), false;
    }
    ReadOptions(in, &m);
    if (m.n_tool_calls > 0 && m.tool_calls == nullptr) {
      return Fail(GEMLET_INVALID_ARGUMENT, "message " + std::to_string(i) + ": tool_calls is NULL"), false;
    }
    Message msg;
    msg.role = text(m.role);
    msg.content = text(m.content);
    for (size_t k = 0; k < m.n_tool_calls; ++k) {
      msg.tool_calls.push_back(ToolCall{text(m.tool_calls[k].name), text(m.tool_calls[k].arguments), text(m.tool_calls[k].id)});
    }
    msg.reasoning = text(m.reasoning);
    msg.tool_call_id = text(m.tool_call_id);
    msg.name = text(m.name);
    if (m.n_parts > 0 && !ToContentParts(m.parts, m.n_parts, &msg.parts)) return false;
    out->push_back(std::move(msg));
  }
  return true;
}

ChatOptions ToChatOptions(const gemlet_chat_options& o) {
  ChatOptions c;
  c.add_generation_prompt = o.add_generation_prompt;
  c.thinking = o.thinking;
  if (o.tools) c.tools = o.tools;
  if (o.tool_choice) c.tool_choice = o.tool_choice;
  return c;
}

BatchOptions ToBatchOptions(const gemlet_batch_options& o) {
  BatchOptions b;
  b.max_requests = o.max_requests;
  b.prefill_chunk = o.prefill_chunk;
  return b;
}

}  // namespace gemlet::capi

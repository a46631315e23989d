/* Prints the size and field offsets of every struct in gemlet.h as JSON, as a C compiler lays them
 * out: the Python binding's ctypes declarations are checked against it. */
#include <stddef.h>
#include <stdio.h>

#include "gemlet/gemlet.h"

static int first = 1;

static void Open(const char* name, size_t size) {
  printf("%s\n  \"%s\": {\"size\": %zu, \"fields\": {", first ? "{" : ",", name, size);
  first = 0;
}

#define FIELD(type, field, sep) printf("%s\"%s\": %zu", sep, #field, offsetof(type, field))

int main(void) {
  Open("gemlet_engine_options", sizeof(gemlet_engine_options));
  FIELD(gemlet_engine_options, struct_size, "");
  FIELD(gemlet_engine_options, n_threads, ", ");
  FIELD(gemlet_engine_options, cache_dir, ", ");
  FIELD(gemlet_engine_options, data_dir, ", ");
  FIELD(gemlet_engine_options, progress, ", ");
  FIELD(gemlet_engine_options, progress_user_data, ", ");
  FIELD(gemlet_engine_options, kernels, ", ");
  FIELD(gemlet_engine_options, thermal_zone, ", ");
  FIELD(gemlet_engine_options, thermal_root, ", ");
  FIELD(gemlet_engine_options, thermal_limit_c, ", ");
  FIELD(gemlet_engine_options, thermal_off, ", ");
  FIELD(gemlet_engine_options, memory_pressure_path, ", ");
  FIELD(gemlet_engine_options, on_memory_action, ", ");
  FIELD(gemlet_engine_options, memory_action_user_data, ", ");
  FIELD(gemlet_engine_options, mmproj_path, ", ");
  FIELD(gemlet_engine_options, audio_hf_eager_mask, ", ");
  printf("}}");

  Open("gemlet_session_options", sizeof(gemlet_session_options));
  FIELD(gemlet_session_options, struct_size, "");
  FIELD(gemlet_session_options, n_ctx, ", ");
  FIELD(gemlet_session_options, n_threads, ", ");
  FIELD(gemlet_session_options, max_batch, ", ");
  FIELD(gemlet_session_options, kv_type, ", ");
  printf("}}");

  Open("gemlet_generate_options", sizeof(gemlet_generate_options));
  FIELD(gemlet_generate_options, struct_size, "");
  FIELD(gemlet_generate_options, max_tokens, ", ");
  FIELD(gemlet_generate_options, temperature, ", ");
  FIELD(gemlet_generate_options, top_k, ", ");
  FIELD(gemlet_generate_options, top_p, ", ");
  FIELD(gemlet_generate_options, min_p, ", ");
  FIELD(gemlet_generate_options, repeat_penalty, ", ");
  FIELD(gemlet_generate_options, repeat_last_n, ", ");
  FIELD(gemlet_generate_options, presence_penalty, ", ");
  FIELD(gemlet_generate_options, frequency_penalty, ", ");
  FIELD(gemlet_generate_options, seed, ", ");
  FIELD(gemlet_generate_options, stop, ", ");
  FIELD(gemlet_generate_options, n_stop, ", ");
  FIELD(gemlet_generate_options, response_format, ", ");
  FIELD(gemlet_generate_options, tool_choice, ", ");
  FIELD(gemlet_generate_options, max_draft, ", ");
  FIELD(gemlet_generate_options, logit_bias_tokens, ", ");
  FIELD(gemlet_generate_options, logit_bias_values, ", ");
  FIELD(gemlet_generate_options, n_logit_bias, ", ");
  FIELD(gemlet_generate_options, logprobs, ", ");
  FIELD(gemlet_generate_options, top_logprobs, ", ");
  printf("}}");

  Open("gemlet_session_extra_options", sizeof(gemlet_session_extra_options));
  FIELD(gemlet_session_extra_options, struct_size, "");
  FIELD(gemlet_session_extra_options, rollback_tokens, ", ");
  FIELD(gemlet_session_extra_options, draft_model, ", ");
  FIELD(gemlet_session_extra_options, progress, ", ");
  FIELD(gemlet_session_extra_options, progress_user_data, ", ");
  printf("}}");

  Open("gemlet_token_logprob", sizeof(gemlet_token_logprob));
  FIELD(gemlet_token_logprob, token, "");
  FIELD(gemlet_token_logprob, logprob, ", ");
  printf("}}");

  Open("gemlet_stats", sizeof(gemlet_stats));
  FIELD(gemlet_stats, struct_size, "");
  FIELD(gemlet_stats, prompt_tokens, ", ");
  FIELD(gemlet_stats, cached_tokens, ", ");
  FIELD(gemlet_stats, generated_tokens, ", ");
  FIELD(gemlet_stats, ttft_seconds, ", ");
  FIELD(gemlet_stats, prefill_tokens_per_second, ", ");
  FIELD(gemlet_stats, decode_tokens_per_second, ", ");
  FIELD(gemlet_stats, stop, ", ");
  FIELD(gemlet_stats, kv_cache_bytes, ", ");
  FIELD(gemlet_stats, activation_bytes, ", ");
  FIELD(gemlet_stats, dropped_messages, ", ");
  FIELD(gemlet_stats, dropped_tokens, ", ");
  FIELD(gemlet_stats, reevaluated_tokens, ", ");
  FIELD(gemlet_stats, summarized_messages, ", ");
  FIELD(gemlet_stats, summary_tokens, ", ");
  FIELD(gemlet_stats, pressure_actions, ", ");
  FIELD(gemlet_stats, pressure_released_bytes, ", ");
  FIELD(gemlet_stats, kv_cache_resident_bytes, ", ");
  FIELD(gemlet_stats, draft_steps, ", ");
  FIELD(gemlet_stats, drafted_tokens, ", ");
  FIELD(gemlet_stats, accepted_tokens, ", ");
  FIELD(gemlet_stats, throttled_steps, ", ");
  printf("}}");

  Open("gemlet_conversation_options", sizeof(gemlet_conversation_options));
  FIELD(gemlet_conversation_options, struct_size, "");
  FIELD(gemlet_conversation_options, session, ", ");
  FIELD(gemlet_conversation_options, system, ", ");
  FIELD(gemlet_conversation_options, thinking, ", ");
  FIELD(gemlet_conversation_options, summarize_dropped, ", ");
  FIELD(gemlet_conversation_options, summary_max_tokens, ", ");
  FIELD(gemlet_conversation_options, state_path, ", ");
  printf("}}");

  Open("gemlet_model_info", sizeof(gemlet_model_info));
  FIELD(gemlet_model_info, struct_size, "");
  FIELD(gemlet_model_info, architecture, ", ");
  FIELD(gemlet_model_info, name, ", ");
  FIELD(gemlet_model_info, chat_format, ", ");
  FIELD(gemlet_model_info, n_vocab, ", ");
  FIELD(gemlet_model_info, n_ctx_train, ", ");
  FIELD(gemlet_model_info, n_layers, ", ");
  FIELD(gemlet_model_info, d_model, ", ");
  FIELD(gemlet_model_info, n_parameters, ", ");
  FIELD(gemlet_model_info, file_bytes, ", ");
  FIELD(gemlet_model_info, tensor_bytes, ", ");
  FIELD(gemlet_model_info, file_type, ", ");
  FIELD(gemlet_model_info, decode_weight_bytes, ", ");
  FIELD(gemlet_model_info, load_seconds, ", ");
  FIELD(gemlet_model_info, map_seconds, ", ");
  FIELD(gemlet_model_info, packed_cache, ", ");
  FIELD(gemlet_model_info, packed_cache_seconds, ", ");
  FIELD(gemlet_model_info, takes_images, ", ");
  FIELD(gemlet_model_info, takes_audio, ", ");
  FIELD(gemlet_model_info, mmproj_projector, ", ");
  FIELD(gemlet_model_info, prompt_macs_per_token, ", ");
  printf("}}");

  Open("gemlet_memory_usage", sizeof(gemlet_memory_usage));
  FIELD(gemlet_memory_usage, struct_size, "");
  FIELD(gemlet_memory_usage, rss_bytes, ", ");
  FIELD(gemlet_memory_usage, peak_rss_bytes, ", ");
  FIELD(gemlet_memory_usage, anon_bytes, ", ");
  FIELD(gemlet_memory_usage, model_file_resident_bytes, ", ");
  FIELD(gemlet_memory_usage, on_demand_resident_bytes, ", ");
  FIELD(gemlet_memory_usage, packed_weight_bytes, ", ");
  FIELD(gemlet_memory_usage, packed_mapped_bytes, ", ");
  FIELD(gemlet_memory_usage, tokenizer_bytes, ", ");
  printf("}}");

  Open("gemlet_memory_stats", sizeof(gemlet_memory_stats));
  FIELD(gemlet_memory_stats, struct_size, "");
  FIELD(gemlet_memory_stats, kv_cache_bytes, ", ");
  FIELD(gemlet_memory_stats, kv_cache_resident_bytes, ", ");
  FIELD(gemlet_memory_stats, activation_bytes, ", ");
  FIELD(gemlet_memory_stats, pressure_actions, ", ");
  FIELD(gemlet_memory_stats, pressure_released_bytes, ", ");
  printf("}}");

  Open("gemlet_memory_plan", sizeof(gemlet_memory_plan));
  FIELD(gemlet_memory_plan, struct_size, "");
  FIELD(gemlet_memory_plan, file_bytes, ", ");
  FIELD(gemlet_memory_plan, weights_resident_bytes, ", ");
  FIELD(gemlet_memory_plan, weights_on_demand_bytes, ", ");
  FIELD(gemlet_memory_plan, kv_cache_bytes, ", ");
  FIELD(gemlet_memory_plan, activation_bytes, ", ");
  FIELD(gemlet_memory_plan, n_ctx, ", ");
  FIELD(gemlet_memory_plan, text, ", ");
  printf("}}");

  Open("gemlet_session_cost", sizeof(gemlet_session_cost));
  FIELD(gemlet_session_cost, struct_size, "");
  FIELD(gemlet_session_cost, kv_bytes, ", ");
  FIELD(gemlet_session_cost, activation_bytes, ", ");
  FIELD(gemlet_session_cost, packed_in_memory_bytes, ", ");
  FIELD(gemlet_session_cost, baseline_bytes, ", ");
  FIELD(gemlet_session_cost, total_bytes, ", ");
  printf("}}");

  Open("gemlet_tool_call", sizeof(gemlet_tool_call));
  FIELD(gemlet_tool_call, name, "");
  FIELD(gemlet_tool_call, arguments, ", ");
  FIELD(gemlet_tool_call, id, ", ");
  printf("}}");

  Open("gemlet_message", sizeof(gemlet_message));
  FIELD(gemlet_message, struct_size, "");
  FIELD(gemlet_message, role, ", ");
  FIELD(gemlet_message, content, ", ");
  FIELD(gemlet_message, tool_calls, ", ");
  FIELD(gemlet_message, n_tool_calls, ", ");
  FIELD(gemlet_message, reasoning, ", ");
  FIELD(gemlet_message, tool_call_id, ", ");
  FIELD(gemlet_message, name, ", ");
  FIELD(gemlet_message, parts, ", ");
  FIELD(gemlet_message, n_parts, ", ");
  printf("}}");

  Open("gemlet_content_part", sizeof(gemlet_content_part));
  FIELD(gemlet_content_part, struct_size, "");
  FIELD(gemlet_content_part, text, ", ");
  FIELD(gemlet_content_part, media, ", ");
  printf("}}");

  Open("gemlet_image_options", sizeof(gemlet_image_options));
  FIELD(gemlet_image_options, struct_size, "");
  FIELD(gemlet_image_options, max_soft_tokens, ", ");
  FIELD(gemlet_image_options, pan_and_scan, ", ");
  printf("}}");

  Open("gemlet_audio_options", sizeof(gemlet_audio_options));
  FIELD(gemlet_audio_options, struct_size, "");
  FIELD(gemlet_audio_options, max_seconds, ", ");
  printf("}}");

  Open("gemlet_chat_options", sizeof(gemlet_chat_options));
  FIELD(gemlet_chat_options, struct_size, "");
  FIELD(gemlet_chat_options, add_generation_prompt, ", ");
  FIELD(gemlet_chat_options, thinking, ", ");
  FIELD(gemlet_chat_options, tools, ", ");
  FIELD(gemlet_chat_options, tool_choice, ", ");
  printf("}}");

  Open("gemlet_batch_options", sizeof(gemlet_batch_options));
  FIELD(gemlet_batch_options, struct_size, "");
  FIELD(gemlet_batch_options, max_requests, ", ");
  FIELD(gemlet_batch_options, prefill_chunk, ", ");
  printf("}}");

  /* Enums are passed as ctypes.c_int. */
  printf(",\n  \"enum\": {\"size\": %zu, \"fields\": {}}\n}\n", sizeof(gemlet_status));
  return 0;
}

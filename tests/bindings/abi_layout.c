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

  /* Enums are passed as ctypes.c_int. */
  printf(",\n  \"enum\": {\"size\": %zu, \"fields\": {}}\n}\n", sizeof(gemlet_status));
  return 0;
}

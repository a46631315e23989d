/* gemlet's C API: what apps in any language embed (Swift, Kotlin/Java through JNI, Python through
 * ctypes). A thin layer over the C++ API (gemlet.hpp) with the same objects:
 *   gemlet_engine        a loaded model: immutable weights shared by its sessions, thread-safe
 *   gemlet_session       tokens in, logits and tokens out, one KV cache
 *   gemlet_conversation  messages, the model's chat format, streamed answers
 * Conventions:
 *   - every fallible call returns a gemlet_status; on failure gemlet_last_error() says what went
 *     wrong, in the calling thread (each thread has its own last error);
 *   - every object has a create/free pair; free accepts NULL;
 *   - option structs start with struct_size: take them from *_options_default(), change what you
 *     need, pass a pointer (NULL means defaults). A struct from an older header is still accepted;
 *   - text is UTF-8 everywhere; streamed pieces are whole characters, never a split sequence;
 *   - no call throws, aborts or exits; a NULL handle is GEMLET_INVALID_ARGUMENT.
 * Thread safety: an engine may be used by many threads; a session or conversation by one thread at a
 * time, except *_cancel(), which any thread may call while another runs the object. A cancel stops
 * the call in progress; one made while nothing runs is forgotten when the next call starts.
 * Callbacks (stream, progress) run on the thread that made the call, before it returns; the log
 * callback may run on any thread. */
#ifndef GEMLET_GEMLET_H_
#define GEMLET_GEMLET_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemlet/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gemlet_status {
  GEMLET_OK = 0,
  GEMLET_ERROR = 1,            /* bad input or file: gemlet_last_error() names it */
  GEMLET_INVALID_ARGUMENT = 2, /* a NULL handle, a bad option */
  GEMLET_CANCELLED = 3,        /* stopped by *_cancel() or by a callback's return value */
  GEMLET_CONTEXT_FULL = 4,     /* the context has no room for the tokens */
  GEMLET_OUT_OF_MEMORY = 5,
  GEMLET_BUFFER_TOO_SMALL = 6, /* an output buffer cannot hold the result: the call says the size needed */
  GEMLET_TOO_LARGE = 7         /* the input is over a limit the caller set (a clip longer than max_seconds) */
} gemlet_status;

typedef struct gemlet_engine gemlet_engine;
typedef struct gemlet_session gemlet_session;
typedef struct gemlet_conversation gemlet_conversation;
typedef struct gemlet_batch_decoder gemlet_batch_decoder;
typedef struct gemlet_tokenizer gemlet_tokenizer;
typedef struct gemlet_reply gemlet_reply;
typedef struct gemlet_media gemlet_media;    /* an encoded image or clip (see "images and audio") */
typedef struct gemlet_prompt gemlet_prompt;  /* tokens with media among them */
typedef struct gemlet_adapter gemlet_adapter;  /* a LoRA adapter (see "LoRA adapters") */

/* The ABI this header describes. It changes only when a struct's layout or a function's meaning
 * changes incompatibly; appending fields to a struct with struct_size, or adding functions, keeps
 * it. An app compares gemlet_abi_version() with GEMLET_ABI_VERSION at startup and refuses to run
 * on a library of another ABI (a libgemlet.so swapped under it). */
#define GEMLET_ABI_VERSION 1

/* "0.1.0" */
GEMLET_API const char* gemlet_version(void);
/* The library's GEMLET_ABI_VERSION (that of the header it was built with). */
GEMLET_API int gemlet_abi_version(void);
/* The message of the calling thread's last failed call ("" if none); valid until its next call. */
GEMLET_API const char* gemlet_last_error(void);
GEMLET_API const char* gemlet_status_name(gemlet_status status);

/* Log messages of the library (level 0 debug, 1 info, 2 warning, 3 error); NULL restores the
 * default (warnings and errors to stderr). The callback may be called from any thread. */
typedef void (*gemlet_log_fn)(int level, const char* message, void* user_data);
GEMLET_API void gemlet_set_log_callback(gemlet_log_fn callback, void* user_data);

/* The process's memory footprint in bytes as the host reads it (iOS: task_vm_info's
 * phys_footprint; Android: its own reading): budget planning and memory reports count it as the
 * process's dirty memory. Process-wide; called from any thread. NULL restores the default
 * (/proc/self/status's RssAnon on Linux). */
typedef uint64_t (*gemlet_footprint_fn)(void* user_data);
GEMLET_API void gemlet_set_footprint_callback(gemlet_footprint_fn callback, void* user_data);

/* The threads a request for n_threads gets: n_threads when > 0, else every hardware thread (the
 * meaning of 0 in every options struct). */
GEMLET_API int gemlet_resolve_thread_count(int n_threads);

/* The process's memory now, cheaply (for sampling a peak); 0 where the platform does not say. */
typedef struct gemlet_process_memory {
  size_t struct_size;
  uint64_t rss_bytes;
  uint64_t anon_bytes;      /* anonymous (dirty) memory: what iOS and Android count */
  uint64_t peak_rss_bytes;
} gemlet_process_memory;
GEMLET_API gemlet_process_memory gemlet_process_memory_default(void);
GEMLET_API gemlet_status gemlet_measure_process_memory(gemlet_process_memory* out);
/* "300M", "1.5G", "512K", "1048576" to bytes (K/M/G/T are powers of 1024, with or without iB); 0 on error. */
GEMLET_API uint64_t gemlet_parse_byte_size(const char* text);
/* The budget when none is given: the cgroup's memory limit if any, else half of MemAvailable; 0 unknown. */
GEMLET_API uint64_t gemlet_default_memory_budget(void);

/* The kernels this build runs on this CPU: "ref", then the SIMD targets, best first. index past the
 * end gives NULL; the strings are static. */
GEMLET_API size_t gemlet_n_available_kernels(void);
GEMLET_API const char* gemlet_available_kernel(size_t index);
/* How the kernels run (see gemlet.hpp's KernelOptions): take it from gemlet_kernel_options_default(). */
typedef struct gemlet_kernel_options {
  size_t struct_size;
  const char* kernels;   /* "auto" (NULL), "ref" or a name from gemlet_available_kernel() */
  bool pack_weights;     /* repack weights on first use into the layout the kernels stream fastest */
  int prefetch_bytes;    /* decode's weight prefetch distance: 0 (off) to 1 MiB, or -1: this CPU's and kernel table's choice */
  bool vnni_gemm;        /* prefill through the VNNI panel GEMM where the CPU has VNNI */
  bool spin_wait;        /* threads poll briefly between the loops of a step instead of sleeping */
  bool batch_invariant;  /* a token's logits do not depend on the tokens sharing its step (default true) */
} gemlet_kernel_options;
GEMLET_API gemlet_kernel_options gemlet_kernel_options_default(void);
/* GEMLET_OK when the options are valid, else GEMLET_INVALID_ARGUMENT with gemlet_last_error() saying
 * what is wrong: for apps that check settings before loading a model. */
GEMLET_API gemlet_status gemlet_kernel_options_validate(const gemlet_kernel_options* options);

/* ---- engine ---- */

/* Called while loading with the fraction done; return false to cancel (GEMLET_CANCELLED). */
typedef bool (*gemlet_progress_fn)(float fraction, void* user_data);
/* What the memory governor did under pressure (in the order it climbs), as an event. */
typedef enum gemlet_memory_action {
  GEMLET_MEMORY_RELEASED_SCRATCH = 0,
  GEMLET_MEMORY_DROPPED_OLD_TURNS = 1,
  GEMLET_MEMORY_LOWERED_KV_PRECISION = 2
} gemlet_memory_action;
typedef void (*gemlet_memory_action_fn)(gemlet_memory_action action, bool critical, uint64_t bytes_released,
                                        const char* detail, void* user_data);

typedef struct gemlet_engine_options {
  size_t struct_size;       /* sizeof(gemlet_engine_options), set by the default initialiser */
  int n_threads;            /* threads per session unless set there; 0: every hardware thread */
  const char* cache_dir;    /* folders the app owns (phones have no XDG_*); NULL: none */
  const char* data_dir;
  gemlet_progress_fn progress;
  void* progress_user_data;
  const char* kernels;      /* "auto" (NULL), "ref" (the scalar reference) or a CPU target ("AVX2") */
  /* The thermal governor (docs/thermal.md): a thermal zone's type or directory (NULL: the first
   * skin/case/battery zone, if any; an unknown name fails the load), where the zones are (NULL:
   * /sys/class/thermal), the limit in C (42 by default, and for 0), and true to turn it off. */
  const char* thermal_zone;
  const char* thermal_root;
  double thermal_limit_c;
  bool thermal_off;
  /* The memory governor: a Linux PSI file read before each conversation turn (NULL:
   * /proc/pressure/memory; "": none; apps pass warnings to gemlet_engine_memory_warning), and a
   * callback for each action it takes (NULL: none; on the thread that took it). */
  const char* memory_pressure_path;
  gemlet_memory_action_fn on_memory_action;
  void* memory_action_user_data;
  /* A multimodal model's towers: llama.cpp's mmproj GGUF (NULL: text only). */
  const char* mmproj_path;
  /* Gemma 4 audio with transformers' eager attention mask (checks against its goldens only). */
  bool audio_hf_eager_mask;
} gemlet_engine_options;

GEMLET_API gemlet_engine_options gemlet_engine_options_default(void);
GEMLET_API gemlet_status gemlet_engine_load(const char* path, const gemlet_engine_options* options,
                                            gemlet_engine** out);
/* A GGUF inside another file (an uncompressed Android asset: AAsset_openFileDescriptor gives fd,
 * offset and length). fd is not kept: the caller may close it after the call. */
GEMLET_API gemlet_status gemlet_engine_load_fd(int fd, uint64_t offset, uint64_t length,
                                               const gemlet_engine_options* options, gemlet_engine** out);
/* Sessions and conversations keep the engine's weights alive: free them in any order. */
GEMLET_API void gemlet_engine_free(gemlet_engine* engine);

GEMLET_API int gemlet_engine_n_vocab(const gemlet_engine* engine);
GEMLET_API int gemlet_engine_n_ctx_train(const gemlet_engine* engine);
/* general.architecture ("gemma3", ...); valid while the engine lives. */
GEMLET_API const char* gemlet_engine_architecture(const gemlet_engine* engine);

/* What a loaded model is. The strings stay valid while the engine lives. */
typedef struct gemlet_model_info {
  size_t struct_size;
  const char* architecture;   /* general.architecture: "gemma3", "gemma4", ... */
  const char* name;           /* general.name, "" when the file has none */
  const char* chat_format;    /* "gemma" (Gemma 1-3) or "gemma4" */
  int n_vocab;
  int n_ctx_train;
  int n_layers;
  int d_model;
  uint64_t n_parameters;
  uint64_t file_bytes;
  uint64_t tensor_bytes;      /* the tensors' data (file_bytes less header and metadata) */
  const char* file_type;      /* "Q4_K_M", "F16", ...; "?" unknown */
  uint64_t decode_weight_bytes; /* weight bytes one decoded token reads */
  double load_seconds;
  double map_seconds;
  const char* packed_cache;   /* "" not used, "loaded", "built" or "none" */
  double packed_cache_seconds;
  bool takes_images;          /* the mmproj's towers: what the model takes besides text */
  bool takes_audio;
  const char* mmproj_projector; /* "gemma3", "gemma4v", ...; "" without an mmproj */
  uint64_t prompt_macs_per_token; /* weight multiply-accumulates one prompt token makes in prefill */
} gemlet_model_info;
GEMLET_API gemlet_model_info gemlet_model_info_default(void);
GEMLET_API gemlet_status gemlet_engine_info(const gemlet_engine* engine, gemlet_model_info* info);

/* One token's piece as text ("" out of range), freed with gemlet_string_free. */
GEMLET_API gemlet_status gemlet_engine_token_text(const gemlet_engine* engine, int32_t token, char** text);
GEMLET_API int32_t gemlet_engine_bos_token(const gemlet_engine* engine);  /* -1: none (or NULL) */
GEMLET_API bool gemlet_engine_is_end_of_generation(const gemlet_engine* engine, int32_t token);

/* Packs the weights into the layout the kernels read (done on first use otherwise), or, mapped from
 * the packed-weight cache, reads them in from disk: call it while the user types the first message. gemlet_engine_stop_prepare_weights() from another thread ends it
 * after the matrix in hand (what is left is packed on first use); a stop made while nothing
 * prepares is forgotten when the next call starts. n_threads < 1 is 1. */
GEMLET_API gemlet_status gemlet_engine_prepare_weights(const gemlet_engine* engine, int n_threads);
GEMLET_API void gemlet_engine_stop_prepare_weights(const gemlet_engine* engine);

/* What the process holds now beside the plan: resident set, how much of the model file is mapped in. */
typedef struct gemlet_memory_usage {
  size_t struct_size;
  uint64_t rss_bytes;
  uint64_t peak_rss_bytes;
  uint64_t anon_bytes;
  uint64_t model_file_resident_bytes;
  uint64_t on_demand_resident_bytes;   /* of that, the embedding tables read by rows */
  uint64_t packed_weight_bytes;        /* weights repacked for the kernels so far */
  uint64_t packed_mapped_bytes;        /* of those, mapped from the packed-weight cache */
  uint64_t tokenizer_bytes;
} gemlet_memory_usage;
GEMLET_API gemlet_memory_usage gemlet_memory_usage_default(void);
GEMLET_API gemlet_status gemlet_engine_measure_memory(const gemlet_engine* engine, gemlet_memory_usage* usage);

/* Text to token ids. Writes at most `capacity` ids to `tokens` and the full count to *n_tokens;
 * GEMLET_BUFFER_TOO_SMALL (with the count) when they do not fit: call again with a larger buffer. */
GEMLET_API gemlet_status gemlet_tokenize(const gemlet_engine* engine, const char* text, size_t text_len,
                                         bool add_special, bool parse_special, int32_t* tokens,
                                         size_t capacity, size_t* n_tokens);
/* Token ids to text: a NUL-terminated string the caller frees with gemlet_string_free. */
GEMLET_API gemlet_status gemlet_detokenize(const gemlet_engine* engine, const int32_t* tokens, size_t n_tokens,
                                           char** text);
GEMLET_API void gemlet_string_free(char* text);

/* At most this many threads for every session of the engine from its next call on (0: no limit). */
GEMLET_API gemlet_status gemlet_engine_set_thread_limit(gemlet_engine* engine, int n_threads);
/* The kernels every session of the engine runs from its next call on: "auto", "ref" or a CPU target
 * name. GEMLET_INVALID_ARGUMENT (naming the ones this CPU runs) for any other. */
GEMLET_API gemlet_status gemlet_engine_set_kernels(gemlet_engine* engine, const char* kernels);
/* The kernels in use ("AVX3_DL", "NEON", "ref", ...): a static string. */
GEMLET_API const char* gemlet_engine_kernels(const gemlet_engine* engine);
/* The same with every kernel setting, and the settings in force (kernels: the name as given, "auto"
 * included; a static string). */
GEMLET_API gemlet_status gemlet_engine_set_kernel_options(gemlet_engine* engine, const gemlet_kernel_options* options);
GEMLET_API gemlet_status gemlet_engine_kernel_options(const gemlet_engine* engine, gemlet_kernel_options* options);
/* The thread limit set by gemlet_engine_set_thread_limit (0: none). */
GEMLET_API int gemlet_engine_thread_limit(const gemlet_engine* engine);

/* Platform signals, passed in by the app. Thermal levels are iOS ProcessInfo.ThermalState's; map
 * Android's THERMAL_STATUS_NONE/LIGHT to NOMINAL, MODERATE to FAIR, SEVERE to SERIOUS, CRITICAL and
 * above to CRITICAL. */
typedef enum gemlet_thermal_state {
  GEMLET_THERMAL_NOMINAL = 0,
  GEMLET_THERMAL_FAIR = 1,
  GEMLET_THERMAL_SERIOUS = 2,
  GEMLET_THERMAL_CRITICAL = 3
} gemlet_thermal_state;
/* Android's onTrimMemory levels, by value; iOS's didReceiveMemoryWarning is RUNNING_CRITICAL. */
typedef enum gemlet_memory_level {
  GEMLET_MEMORY_NONE = 0,
  GEMLET_MEMORY_RUNNING_MODERATE = 5,
  GEMLET_MEMORY_RUNNING_LOW = 10,
  GEMLET_MEMORY_RUNNING_CRITICAL = 15,
  GEMLET_MEMORY_UI_HIDDEN = 20,
  GEMLET_MEMORY_BACKGROUND = 40,
  GEMLET_MEMORY_MODERATE = 60,
  GEMLET_MEMORY_COMPLETE = 80
} gemlet_memory_level;
GEMLET_API gemlet_status gemlet_engine_set_thermal_state(gemlet_engine* engine, gemlet_thermal_state state);
GEMLET_API gemlet_thermal_state gemlet_engine_thermal_state(const gemlet_engine* engine);
/* What the thermal governor sees and does now (docs/thermal.md): it acts on the levels above and,
 * on Linux, on a skin/case/battery thermal zone. Take it from gemlet_thermal_status_default(). */
typedef struct gemlet_thermal_status {
  size_t struct_size;
  bool enabled;
  bool has_reading;          /* a zone was read */
  bool throttled;            /* with hysteresis: released 1 C below the limit */
  double temperature_c;      /* the zone's latest reading */
  gemlet_thermal_state level;
  double work_fraction;      /* of full speed sessions may run (1: unthrottled) */
  int threads;               /* what a session on the engine's n_threads runs now: threads, */
  double duty;               /* the share of time it evaluates (the rest sleeps between steps), */
  int prefill_chunk;         /* and its prompt chunk (of 512) */
  double throttled_seconds;  /* spent throttled while sessions ran */
  int changes;               /* throttle on/off and level changes so far */
} gemlet_thermal_status;
GEMLET_API gemlet_thermal_status gemlet_thermal_status_default(void);
GEMLET_API gemlet_status gemlet_engine_thermal_status(const gemlet_engine* engine, gemlet_thermal_status* status);
GEMLET_API gemlet_status gemlet_engine_memory_warning(gemlet_engine* engine, gemlet_memory_level level);
GEMLET_API gemlet_memory_level gemlet_engine_memory_level(const gemlet_engine* engine);
GEMLET_API gemlet_status gemlet_engine_on_background(gemlet_engine* engine);
GEMLET_API gemlet_status gemlet_engine_on_foreground(gemlet_engine* engine);
GEMLET_API bool gemlet_engine_in_background(const gemlet_engine* engine);
/* "nominal", "fair", "serious", "critical"; "none", "running_moderate", ...: static strings. */
GEMLET_API const char* gemlet_thermal_state_name(gemlet_thermal_state state);
GEMLET_API const char* gemlet_memory_level_name(gemlet_memory_level level);
GEMLET_API const char* gemlet_memory_action_name(gemlet_memory_action action);

/* ---- session ---- */

typedef enum gemlet_kv_type { GEMLET_KV_F16 = 0, GEMLET_KV_F32 = 1, GEMLET_KV_Q8_0 = 2, GEMLET_KV_Q4_0 = 3 } gemlet_kv_type;

typedef struct gemlet_session_options {
  size_t struct_size;
  int n_ctx;        /* 0: the model's training context, at most 4096 */
  int n_threads;    /* 0: the engine's */
  int max_batch;    /* prompt tokens per forward chunk (512) */
  gemlet_kv_type kv_type;
  /* Not growable: gemlet_conversation_options holds one by value. What it lacks (rollback room,
   * a draft model, prompt progress) is gemlet_session_extra_options', for gemlet_session_create2
   * and gemlet_conversation_create2. */
} gemlet_session_options;

GEMLET_API gemlet_session_options gemlet_session_options_default(void);
/* "f16", "f32", "q8_0", "q4_0" (static; "" for another value), and back: false for another name. */
GEMLET_API const char* gemlet_kv_type_name(gemlet_kv_type type);
GEMLET_API bool gemlet_parse_kv_type(const char* name, gemlet_kv_type* out);
/* K and V bytes a decode step at position pos reads from a cache of this type (with the model info's
 * decode_weight_bytes: the traffic a bandwidth bound divides). 0 for a NULL engine. */
GEMLET_API uint64_t gemlet_engine_decode_kv_bytes_at(const gemlet_engine* engine, gemlet_kv_type type, int64_t pos);
GEMLET_API gemlet_status gemlet_session_create(gemlet_engine* engine, const gemlet_session_options* options,
                                               gemlet_session** out);
/* The session options gemlet_session_options cannot hold (it is embedded by value, so it cannot
 * grow): growable by struct_size like the other option structs. Take it from
 * gemlet_session_extra_options_default(). */
/* Called after each chunk of a long prompt with the prompt tokens evaluated so far and their total,
 * on the evaluating thread (every evaluation reports: a decoded token as 1 of 1). To stop, call gemlet_session_cancel / gemlet_conversation_cancel (from
 * this callback too): the call then returns GEMLET_CANCELLED. */
typedef void (*gemlet_prompt_progress_fn)(int done, int total, void* user_data);
typedef struct gemlet_session_extra_options {
  size_t struct_size;
  int rollback_tokens;        /* tokens gemlet_session_truncate takes back without evaluating again (16) */
  /* Speculative decoding with a draft model: a smaller model of the same vocabulary (another one is
   * GEMLET_INVALID_ARGUMENT) whose greedy continuation generate options' max_draft verifies instead
   * of prompt lookup; the tokens are those decoding without it gives. The session keeps its own
   * reference: the caller may free its handle after the create. NULL: prompt lookup. */
  gemlet_engine* draft_model;
  gemlet_prompt_progress_fn progress;  /* NULL: none */
  void* progress_user_data;
} gemlet_session_extra_options;
GEMLET_API gemlet_session_extra_options gemlet_session_extra_options_default(void);
/* gemlet_session_create with the extra options too (NULL: their defaults). */
GEMLET_API gemlet_status gemlet_session_create2(gemlet_engine* engine, const gemlet_session_options* options,
                                                const gemlet_session_extra_options* extra, gemlet_session** out);
GEMLET_API void gemlet_session_free(gemlet_session* session);
/* Evaluates tokens after those cached; `logits` (NULL: none) receives the last position's n_vocab
 * values. GEMLET_CANCELLED after gemlet_session_cancel() from another thread; what finished stays. */
GEMLET_API gemlet_status gemlet_session_evaluate(gemlet_session* session, const int32_t* tokens, size_t n_tokens,
                                                 float* logits);
/* The same, with every position's logits: `logits` holds n_tokens * n_vocab floats, row-major. */
GEMLET_API gemlet_status gemlet_session_evaluate_all(gemlet_session* session, const int32_t* tokens, size_t n_tokens,
                                                    float* logits);
/* A prompt with images or audio among its tokens: the last row's logits (every row's with all_logits);
 * logits may be NULL. */
GEMLET_API gemlet_status gemlet_session_evaluate_prompt(gemlet_session* session, const gemlet_prompt* prompt,
                                                        float* logits, bool all_logits);
/* The media the cache holds: count, and media `index`'s position with a new reference (free it). */
GEMLET_API size_t gemlet_session_n_media(const gemlet_session* session);
GEMLET_API gemlet_status gemlet_session_media_at(const gemlet_session* session, size_t index, int* position,
                                                 gemlet_media** media);
GEMLET_API gemlet_status gemlet_session_truncate(gemlet_session* session, int n_keep);
/* Removes tokens [begin, begin + count) from the cache: later tokens move down, their keys rotated to
 * their new positions, nothing evaluated (unless sliding-window layers cannot follow: then the kept
 * tokens are evaluated again, and *reevaluated, when not NULL, says how many). */
GEMLET_API gemlet_status gemlet_session_discard(gemlet_session* session, int begin, int count, int* reevaluated);
GEMLET_API void gemlet_session_reset(gemlet_session* session);

/* ---- LoRA adapters ----
 * An adapter in llama.cpp's GGUF format (`gemlet convert-lora` makes one from a PEFT folder), loaded
 * for one engine's model and applied unmerged: sessions and conversations switch between adapters
 * without reloading anything. Refused with one line when it was made for another model. */
GEMLET_API gemlet_status gemlet_engine_load_adapter(const gemlet_engine* engine, const char* path, gemlet_adapter** out);
GEMLET_API void gemlet_adapter_free(gemlet_adapter* adapter);  /* sessions using it keep their reference */
GEMLET_API const char* gemlet_adapter_path(const gemlet_adapter* adapter);
GEMLET_API const char* gemlet_adapter_name(const gemlet_adapter* adapter);
GEMLET_API const char* gemlet_adapter_sha256(const gemlet_adapter* adapter);
GEMLET_API float gemlet_adapter_alpha(const gemlet_adapter* adapter);  /* 0: none in the file (scale 1) */
GEMLET_API int gemlet_adapter_rank(const gemlet_adapter* adapter);
GEMLET_API int gemlet_adapter_projections(const gemlet_adapter* adapter);
GEMLET_API uint64_t gemlet_adapter_bytes(const gemlet_adapter* adapter);
/* The next calls run with adapters[0..n) at scales[0..n) (scales NULL: 1 each; n 0: the base model).
 * When the set, order or a scale changes, the session's cache is emptied: another adapter's K/V
 * are never reused. */
GEMLET_API gemlet_status gemlet_session_set_adapters(gemlet_session* session, const gemlet_adapter* const* adapters,
                                                     const float* scales, size_t n);
/* The adapters set: count, and adapter `index` (a new reference: free it; NULL: not wanted) and its scale. */
GEMLET_API size_t gemlet_session_n_adapters(const gemlet_session* session);
GEMLET_API gemlet_status gemlet_session_adapter_at(const gemlet_session* session, size_t index, gemlet_adapter** adapter,
                                                   float* scale);
GEMLET_API int gemlet_session_n_past(const gemlet_session* session);
GEMLET_API int gemlet_session_n_ctx(const gemlet_session* session);
/* Tokens gemlet_session_truncate takes back without evaluating anything again. */
GEMLET_API int gemlet_session_rollback_room(const gemlet_session* session);
/* The tokens the cache holds: *n_tokens of them, valid until the next call on the session. */
GEMLET_API const int32_t* gemlet_session_tokens(const gemlet_session* session, size_t* n_tokens);
/* A new handle on the session's engine (free it with gemlet_engine_free). */
GEMLET_API gemlet_status gemlet_session_engine(const gemlet_session* session, gemlet_engine** out);

/* Memory a session (or a conversation) holds, by its own accounting. */
typedef struct gemlet_memory_stats {
  size_t struct_size;
  uint64_t kv_cache_bytes;           /* reserved for the whole context */
  uint64_t kv_cache_resident_bytes;  /* committed so far */
  uint64_t activation_bytes;         /* the workspace (scratch included) */
  int pressure_actions;              /* conversations: the memory governor's actions so far */
  uint64_t pressure_released_bytes;
} gemlet_memory_stats;
GEMLET_API gemlet_memory_stats gemlet_memory_stats_default(void);
GEMLET_API gemlet_status gemlet_session_memory(const gemlet_session* session, gemlet_memory_stats* stats);
/* What a session costs: resident weights, weights left on disk (read by rows), its KV cache and
 * activations; text is the same as a readable table, valid until the next memory_plan call on the
 * same object. */
typedef struct gemlet_memory_plan {
  size_t struct_size;
  uint64_t file_bytes;
  uint64_t weights_resident_bytes;
  uint64_t weights_on_demand_bytes;
  uint64_t kv_cache_bytes;
  uint64_t activation_bytes;
  int n_ctx;
  const char* text;
} gemlet_memory_plan;
GEMLET_API gemlet_memory_plan gemlet_memory_plan_default(void);
GEMLET_API gemlet_status gemlet_session_memory_plan(gemlet_session* session, gemlet_memory_plan* plan);

/* ---- memory budget ---- */

/* What a session with these options would cost in dirty memory, at worst (its context full). */
typedef struct gemlet_session_cost {
  size_t struct_size;
  uint64_t kv_bytes;
  uint64_t activation_bytes;
  uint64_t packed_in_memory_bytes;  /* weights the kernels will pack into anonymous memory */
  uint64_t baseline_bytes;          /* the process's anonymous memory now */
  uint64_t total_bytes;             /* the sum of the four */
} gemlet_session_cost;
GEMLET_API gemlet_session_cost gemlet_session_cost_default(void);
GEMLET_API gemlet_status gemlet_plan_session(const gemlet_engine* engine, const gemlet_session_options* options,
                                             gemlet_session_cost* cost);
/* The session options that fit budget_bytes: `wanted` (NULL: defaults) if it fits, else its context
 * halved (down to 256), then KV q8_0, then q4_0. *fitted receives them; note (NULL: not wanted)
 * receives what was changed ("" when nothing), freed with gemlet_string_free; floor_bytes (NULL: not
 * wanted) the least this model needs. GEMLET_INVALID_ARGUMENT when even that does not fit. */
GEMLET_API gemlet_status gemlet_fit_to_budget(const gemlet_engine* engine, uint64_t budget_bytes,
                                              const gemlet_session_options* wanted, gemlet_session_options* fitted,
                                              char** note, uint64_t* floor_bytes);
/* The same before loading, from the file's header and tensor table: a model that cannot fit costs
 * nothing. engine_options NULL: defaults. */
GEMLET_API gemlet_status gemlet_fit_file_to_budget(const char* path, const gemlet_engine_options* engine_options,
                                                   uint64_t budget_bytes, const gemlet_session_options* wanted,
                                                   gemlet_session_options* fitted, char** note, uint64_t* floor_bytes);
/* Thread-safe: stops the session's running call within one layer's time. */
GEMLET_API void gemlet_session_cancel(gemlet_session* session);
/* Suspend / resume: the tokens and KV rows the cache holds, to a checksummed file bound to this
 * model file; restore maps them back with nothing evaluated. A truncated, corrupted or other-model
 * file is GEMLET_ERROR (gemlet_last_error says which) and leaves the session as it was. */
GEMLET_API gemlet_status gemlet_session_save(const gemlet_session* session, const char* path);
GEMLET_API gemlet_status gemlet_session_restore(gemlet_session* session, const char* path);

/* ---- generation ---- */

typedef struct gemlet_generate_options {
  size_t struct_size;
  int max_tokens;           /* 512; <= 0: until the context is full */
  float temperature;        /* 0.8; 0: greedy */
  int top_k;                /* 64; 0: off */
  float top_p;              /* 0.95; 1: off */
  float min_p;              /* 0: off */
  float repeat_penalty;     /* 1: off */
  int repeat_last_n;        /* 64 */
  float presence_penalty;
  float frequency_penalty;
  uint64_t seed;
  const char* const* stop;  /* n_stop strings that end the answer (not included) */
  size_t n_stop;
  /* Appended (a struct from an older header keeps the defaults). Structured output: OpenAI's
   * response_format as JSON text ({"type":"json_object"}, {"type":"json_schema",...}); NULL or
   * {"type":"text"}: free text. tool_choice: OpenAI's, as JSON text, enforced while sampling (Gemma 4);
   * NULL: auto. */
  const char* response_format;
  const char* tool_choice;
  int max_draft;            /* speculative decoding by prompt lookup: tokens drafted per step; 0 off */
  /* OpenAI's logit_bias: n_logit_bias (token, bias) pairs, bias in [-100, 100]; -100 bans the token. */
  const int32_t* logit_bias_tokens;
  const float* logit_bias_values;
  size_t n_logit_bias;
  /* OpenAI's logprobs and top_logprobs: with logprobs, the reply's gemlet_reply_logprob gives each
   * generated token's log-probability under the model (before penalties, temperature and
   * truncation) and its top_logprobs (0 to 20) most likely alternatives. Off by default (and in a
   * zeroed struct): computing them costs a pass over the vocabulary per token. */
  bool logprobs;
  int top_logprobs;
} gemlet_generate_options;
GEMLET_API gemlet_generate_options gemlet_generate_options_default(void);
/* GEMLET_OK when the options are valid, else GEMLET_INVALID_ARGUMENT naming what is wrong ("top-p
 * must be in (0, 1]"): for apps that check settings before loading a model. */
GEMLET_API gemlet_status gemlet_generate_options_validate(const gemlet_generate_options* options);

typedef enum gemlet_chunk_kind {
  GEMLET_CHUNK_TEXT = 0,
  GEMLET_CHUNK_THINKING = 1,  /* Gemma 4's thought channel */
  GEMLET_CHUNK_TOOL_CALL = 2  /* Gemma 4's call:NAME{ARGS} */
} gemlet_chunk_kind;
/* A streamed piece: `len` bytes of whole UTF-8 characters (also NUL-terminated). Return false to
 * stop generating (the call then returns GEMLET_CANCELLED). */
typedef bool (*gemlet_stream_fn)(gemlet_chunk_kind kind, const char* text, size_t len, void* user_data);

typedef enum gemlet_stop_reason {
  GEMLET_STOP_END_OF_TURN = 0,
  GEMLET_STOP_STOP_STRING = 1,
  GEMLET_STOP_MAX_TOKENS = 2,
  GEMLET_STOP_CONTEXT_FULL = 3,
  GEMLET_STOP_CANCELLED = 4
} gemlet_stop_reason;

/* Take it from gemlet_stats_default() (which sets struct_size) before passing it to a call. */
typedef struct gemlet_stats {
  size_t struct_size;
  int prompt_tokens;
  int cached_tokens;
  int generated_tokens;
  double ttft_seconds;
  double prefill_tokens_per_second;
  double decode_tokens_per_second;
  gemlet_stop_reason stop;
  uint64_t kv_cache_bytes;
  uint64_t activation_bytes;
  /* Conversations: the oldest messages dropped to make room for this turn, their tokens, and the
   * kept tokens evaluated again for it (0: the KV cache was shifted over the dropped ones). */
  int dropped_messages;
  int dropped_tokens;
  int reevaluated_tokens;
  /* With summarize_dropped: the dropped messages summarized before this turn, the summary's tokens. */
  int summarized_messages;
  int summary_tokens;
  /* Conversations: the memory governor's actions so far and the bytes they gave back. */
  int pressure_actions;
  uint64_t pressure_released_bytes;
  /* Appended: KV pages committed so far; speculative decoding's verification steps, tokens drafted
   * and of those kept; forward steps the thermal governor throttled. */
  uint64_t kv_cache_resident_bytes;
  int draft_steps;
  int drafted_tokens;
  int accepted_tokens;
  int throttled_steps;
} gemlet_stats;

GEMLET_API gemlet_stats gemlet_stats_default(void);
/* "end_of_turn", "stop_string", "max_tokens", "context_full", "cancelled" (static strings). */
GEMLET_API const char* gemlet_stop_reason_name(gemlet_stop_reason reason);

/* A function call the model made (Gemma 4), or that an assistant message of a history carries.
 * Fixed layout (it is passed in arrays; a later need comes as a new struct). */
typedef struct gemlet_tool_call {
  const char* name;
  const char* arguments;  /* a JSON object's text, as OpenAI's API carries it */
  const char* id;         /* the history's id for it (NULL: none) */
} gemlet_tool_call;

/* A generation's result (gemlet_session_generate/complete, a batch request): free it with
 * gemlet_reply_free. Its strings and arrays stay valid until then. */
GEMLET_API void gemlet_reply_free(gemlet_reply* reply);
GEMLET_API const char* gemlet_reply_text(const gemlet_reply* reply);      /* the answer (no thinking, no calls) */
GEMLET_API const char* gemlet_reply_thinking(const gemlet_reply* reply);  /* Gemma 4's thought channel */
GEMLET_API const int32_t* gemlet_reply_tokens(const gemlet_reply* reply, size_t* n_tokens);  /* generated ids */
GEMLET_API size_t gemlet_reply_n_tool_calls(const gemlet_reply* reply);
GEMLET_API const gemlet_tool_call* gemlet_reply_tool_call(const gemlet_reply* reply, size_t index);  /* NULL past the end */
GEMLET_API gemlet_status gemlet_reply_stats(const gemlet_reply* reply, gemlet_stats* stats);
/* A token and its log-probability (natural log). Fixed layout (it is passed in arrays). */
typedef struct gemlet_token_logprob {
  int32_t token;
  float logprob;
} gemlet_token_logprob;
/* With gemlet_generate_options.logprobs: one entry per generated token (0 without). */
GEMLET_API size_t gemlet_reply_n_logprobs(const gemlet_reply* reply);
/* Generated token `index`: *chosen (NULL: not wanted) the token sampled and its log-probability;
 * *top (NULL: not wanted) the top_logprobs most likely tokens, most likely first, *n_top of them,
 * valid until the reply is freed. GEMLET_INVALID_ARGUMENT past the end. */
GEMLET_API gemlet_status gemlet_reply_logprob(const gemlet_reply* reply, size_t index, gemlet_token_logprob* chosen,
                                              const gemlet_token_logprob** top, size_t* n_top);

/* Evaluates `prompt` (tokens after the cache's), then samples up to max_tokens tokens, streaming their
 * text to callback (NULL: none); stops at the model's end of turn. *reply (NULL: not wanted) receives
 * the result, also when a cancel or the callback's false stopped it (then GEMLET_CANCELLED). */
GEMLET_API gemlet_status gemlet_session_generate(gemlet_session* session, const int32_t* prompt, size_t n_prompt,
                                                 const gemlet_generate_options* options, gemlet_stream_fn callback,
                                                 void* user_data, gemlet_reply** reply);
/* Prefix reuse across requests: as a fresh session would generate for `prompt`, keeping the longest
 * prefix of it the cache holds (the reply's stats.cached_tokens) and evaluating only the rest. */
GEMLET_API gemlet_status gemlet_session_complete(gemlet_session* session, const int32_t* prompt, size_t n_prompt,
                                                 const gemlet_generate_options* options, gemlet_stream_fn callback,
                                                 void* user_data, gemlet_reply** reply);
/* The same two with images or audio in the prompt; an image counts as cached only where the cache
 * holds the same image at the same place. */
GEMLET_API gemlet_status gemlet_session_generate_prompt(gemlet_session* session, const gemlet_prompt* prompt,
                                                        const gemlet_generate_options* options,
                                                        gemlet_stream_fn callback, void* user_data,
                                                        gemlet_reply** reply);
GEMLET_API gemlet_status gemlet_session_complete_prompt(gemlet_session* session, const gemlet_prompt* prompt,
                                                        const gemlet_generate_options* options,
                                                        gemlet_stream_fn callback, void* user_data,
                                                        gemlet_reply** reply);
/* Whether options' response_format and tool_choice are ones generation accepts on this model (a
 * supported schema, room for its shortest output in max_tokens, or n_ctx when max_tokens <= 0):
 * GEMLET_INVALID_ARGUMENT saying why not. The first call builds the vocabulary's tables. */
GEMLET_API gemlet_status gemlet_engine_check_response_format(const gemlet_engine* engine,
                                                             const gemlet_generate_options* options, int n_ctx);

/* ---- chat messages and the model's chat format ---- */

/* One message of a chat: role "system", "user", "assistant" or (Gemma 4) "tool". Take it from
 * gemlet_message_default(). In an array every element has the caller's struct_size. NULL strings
 * are "". */
typedef struct gemlet_message {
  size_t struct_size;
  const char* role;
  const char* content;                /* a tool message: the function's result */
  const gemlet_tool_call* tool_calls; /* assistant: the calls it made (n_tool_calls of them) */
  size_t n_tool_calls;
  const char* reasoning;              /* assistant: its thought (written back between tool steps only) */
  const char* tool_call_id;           /* tool: the call it answers */
  const char* name;                   /* tool: the function's name */
  /* Content with images or audio, in order, instead of `content` (which must then be NULL or ""). */
  const struct gemlet_content_part* parts;
  size_t n_parts;
} gemlet_message;
GEMLET_API gemlet_message gemlet_message_default(void);

typedef struct gemlet_chat_options {
  size_t struct_size;
  bool add_generation_prompt;  /* end with the opening of the model's turn (true by default) */
  bool thinking;               /* Gemma 4: the thought channel on */
  const char* tools;           /* Gemma 4: OpenAI's "tools" array as JSON text; NULL: none */
  const char* tool_choice;     /* OpenAI's "tool_choice" as JSON text; NULL: auto */
} gemlet_chat_options;
GEMLET_API gemlet_chat_options gemlet_chat_options_default(void);
/* The model's chat format applied to messages, as text with its markup (no BOS), freed with
 * gemlet_string_free. */
GEMLET_API gemlet_status gemlet_engine_apply_chat_template(const gemlet_engine* engine, const gemlet_message* messages,
                                                           size_t n_messages, bool add_generation_prompt, char** text);
/* The same prompt as tokens, BOS first, ready for gemlet_session_complete: the markup becomes its
 * control tokens, message text is tokenized with special-token parsing off. Buffer as gemlet_tokenize:
 * GEMLET_BUFFER_TOO_SMALL with the count in *n_tokens when they do not fit. options NULL: defaults. */
GEMLET_API gemlet_status gemlet_engine_tokenize_chat(const gemlet_engine* engine, const gemlet_message* messages,
                                                     size_t n_messages, const gemlet_chat_options* options,
                                                     int32_t* tokens, size_t capacity, size_t* n_tokens);

/* ---- images and audio (gemlet_engine_options.mmproj_path) ---- */

typedef enum gemlet_media_kind { GEMLET_MEDIA_IMAGE = 0, GEMLET_MEDIA_AUDIO = 1 } gemlet_media_kind;
/* gemlet_media: an image or clip encoded into its soft tokens' embeddings, made once, placed in any
 * number of prompts and messages. Prompts, sessions and conversations keep their own reference: free
 * it whenever the app is done with it. */
typedef struct gemlet_image_options {
  size_t struct_size;
  int max_soft_tokens; /* Gemma 4: soft tokens per image at most (70 ... 1120); 0: the mmproj's default */
  int pan_and_scan;    /* Gemma 3: nonzero: a long image's crops too (ImageOptions::pan_and_scan, its defaults) */
} gemlet_image_options;
GEMLET_API gemlet_image_options gemlet_image_options_default(void);
/* An image file's bytes (PNG, JPEG, WebP, HEIC), decoded, preprocessed as the model's HF processor
 * does and encoded. options NULL: defaults. GEMLET_INVALID_ARGUMENT without a vision tower. */
GEMLET_API gemlet_status gemlet_engine_encode_image(const gemlet_engine* engine, const uint8_t* bytes, size_t n_bytes,
                                                    const gemlet_image_options* options, gemlet_media** out);
GEMLET_API gemlet_status gemlet_engine_encode_image_file(const gemlet_engine* engine, const char* path,
                                                         const gemlet_image_options* options, gemlet_media** out);
/* Pixels preprocessed already as HF's processor makes them: Gemma 3 [3, S, S] (positions NULL);
 * Gemma 4 patches [rows, 3 * p * p] with positions [rows, 2] ((column, row); -1 for padding). */
GEMLET_API gemlet_status gemlet_engine_encode_image_pixels(const gemlet_engine* engine, const float* values,
                                                           size_t n_values, const int32_t* positions,
                                                           size_t n_positions, gemlet_media** out);
/* A clip's bytes (WAV, FLAC, Ogg Opus/Vorbis, MP3) or file, at most the model's 30 s. */
GEMLET_API gemlet_status gemlet_engine_encode_audio(const gemlet_engine* engine, const uint8_t* bytes, size_t n_bytes,
                                                    gemlet_media** out);
GEMLET_API gemlet_status gemlet_engine_encode_audio_file(const gemlet_engine* engine, const char* path,
                                                         gemlet_media** out);
/* Samples from a microphone callback: `channels` interleaved floats in [-1, 1] per frame at sample_rate. */
GEMLET_API gemlet_status gemlet_engine_encode_audio_pcm(const gemlet_engine* engine, const float* samples,
                                                        size_t n_samples, int sample_rate, int channels,
                                                        gemlet_media** out);
/* Log-mel features as HF's extractor gives them ([frames, mels]) and the valid-frame mask (NULL: all). */
GEMLET_API gemlet_status gemlet_engine_encode_audio_features(const gemlet_engine* engine, const float* features,
                                                             size_t n_features, const uint8_t* mask, size_t n_mask,
                                                             gemlet_media** out);
/* A clip of any length (up to options->max_seconds, 10 minutes by default; longer: GEMLET_TOO_LARGE)
 * in pieces the model hears one at a time: each at most its 30 s, cut at the quietest moment of the
 * window's last 5 s (a pause between words), in order and without gaps; a clip within the window is
 * one piece. options NULL: defaults. */
typedef struct gemlet_audio_options {
  size_t struct_size;
  double max_seconds;
} gemlet_audio_options;
GEMLET_API gemlet_audio_options gemlet_audio_options_default(void);
typedef struct gemlet_audio_pieces gemlet_audio_pieces;
GEMLET_API gemlet_status gemlet_engine_encode_audio_pieces(const gemlet_engine* engine, const uint8_t* bytes,
                                                           size_t n_bytes, const gemlet_audio_options* options,
                                                           gemlet_audio_pieces** out);
GEMLET_API gemlet_status gemlet_engine_encode_audio_pieces_file(const gemlet_engine* engine, const char* path,
                                                                const gemlet_audio_options* options,
                                                                gemlet_audio_pieces** out);
GEMLET_API gemlet_status gemlet_engine_encode_audio_pieces_pcm(const gemlet_engine* engine, const float* samples,
                                                               size_t n_samples, int sample_rate, int channels,
                                                               const gemlet_audio_options* options,
                                                               gemlet_audio_pieces** out);
GEMLET_API size_t gemlet_audio_pieces_count(const gemlet_audio_pieces* pieces);
/* Piece i: its media (a new reference, freed with gemlet_media_free; NULL: not wanted) and where it
 * lies in the clip, in seconds (NULL: not wanted). */
GEMLET_API gemlet_status gemlet_audio_pieces_at(const gemlet_audio_pieces* pieces, size_t index, gemlet_media** media,
                                                double* start_seconds, double* end_seconds);
GEMLET_API void gemlet_audio_pieces_free(gemlet_audio_pieces* pieces);
GEMLET_API void gemlet_media_free(gemlet_media* media);
GEMLET_API gemlet_media_kind gemlet_media_get_kind(const gemlet_media* media);
GEMLET_API int gemlet_media_n_tokens(const gemlet_media* media);
GEMLET_API int gemlet_media_n_embd(const gemlet_media* media);
/* [n_tokens, n_embd], valid while the media lives. */
GEMLET_API const float* gemlet_media_embeddings(const gemlet_media* media);
/* 32 hex digits naming what was encoded; valid while the media lives. */
GEMLET_API const char* gemlet_media_content_hash(const gemlet_media* media);
/* The token a prompt holds where an image's (clip's) soft tokens go, one per soft token. */
GEMLET_API gemlet_status gemlet_engine_media_token(const gemlet_engine* engine, gemlet_media_kind kind, int32_t* token);

/* One part of a message or raw prompt: text, or (media not NULL) an image or clip. */
typedef struct gemlet_content_part {
  size_t struct_size;
  const char* text;
  const gemlet_media* media;
} gemlet_content_part;
GEMLET_API gemlet_content_part gemlet_content_part_default(void);

/* gemlet_prompt: tokens with media among them, what gemlet_session_evaluate_prompt, _generate_prompt
 * and _complete_prompt take. */
/* Raw text and media (no chat format): BOS first when add_special, each media part with the markup
 * the model's processor puts around it. */
GEMLET_API gemlet_status gemlet_engine_tokenize_prompt(const gemlet_engine* engine, const gemlet_content_part* parts,
                                                       size_t n_parts, bool add_special, bool parse_special,
                                                       gemlet_prompt** out);
/* gemlet_engine_tokenize_chat with the messages' parts placed. options NULL: defaults. */
GEMLET_API gemlet_status gemlet_engine_chat_prompt(const gemlet_engine* engine, const gemlet_message* messages,
                                                   size_t n_messages, const gemlet_chat_options* options,
                                                   gemlet_prompt** out);
/* A prompt of the app's own tokens; gemlet_prompt_place_media puts media over tokens
 * [position, position + its n_tokens) (spans in order, not overlapping). */
GEMLET_API gemlet_status gemlet_prompt_new(const int32_t* tokens, size_t n_tokens, gemlet_prompt** out);
GEMLET_API gemlet_status gemlet_prompt_place_media(gemlet_prompt* prompt, int position, const gemlet_media* media);
GEMLET_API void gemlet_prompt_free(gemlet_prompt* prompt);
/* The tokens, valid until the prompt changes or is freed. */
GEMLET_API const int32_t* gemlet_prompt_tokens(const gemlet_prompt* prompt, size_t* n_tokens);
GEMLET_API size_t gemlet_prompt_n_media(const gemlet_prompt* prompt);
/* Media `index`: its position and a new reference (*media, free it; NULL to skip). */
GEMLET_API gemlet_status gemlet_prompt_media_at(const gemlet_prompt* prompt, size_t index, int* position,
                                                gemlet_media** media);

/* ---- conversation ---- */

typedef struct gemlet_conversation_options {
  size_t struct_size;
  gemlet_session_options session;
  const char* system;  /* NULL: no system message */
  bool thinking;       /* Gemma 4: think before answering */
  /* Dropped turns are first summarized by the model, the summary kept as context (at most
   * summary_max_tokens; 0: the default, 96). */
  bool summarize_dropped;
  int summary_max_tokens;
  /* Suspend for apps: restored from this file at create when it is there, saved to it by
   * gemlet_engine_on_background (at once when idle, else when the running send returns). NULL: none. */
  const char* state_path;
} gemlet_conversation_options;

GEMLET_API gemlet_conversation_options gemlet_conversation_options_default(void);
GEMLET_API gemlet_status gemlet_conversation_create(gemlet_engine* engine, const gemlet_conversation_options* options,
                                                    gemlet_conversation** out);
/* gemlet_conversation_create with the session's extra options too (NULL: their defaults). */
GEMLET_API gemlet_status gemlet_conversation_create2(gemlet_engine* engine, const gemlet_conversation_options* options,
                                                     const gemlet_session_extra_options* extra,
                                                     gemlet_conversation** out);
GEMLET_API void gemlet_conversation_free(gemlet_conversation* conversation);
/* Sends a user message and streams the answer to `callback` (NULL: none). `stats` (NULL: none;
 * set its struct_size) receives the turn's figures. A cancel or a callback's false returns
 * GEMLET_CANCELLED; the answer so far stays in the conversation, or none if it had not begun. */
GEMLET_API gemlet_status gemlet_conversation_send(gemlet_conversation* conversation, const char* user_text,
                                                  const gemlet_generate_options* options, gemlet_stream_fn callback,
                                                  void* user_data, gemlet_stats* stats);
/* A user message with images or audio among its text parts, in order. */
GEMLET_API gemlet_status gemlet_conversation_send_parts(gemlet_conversation* conversation,
                                                        const gemlet_content_part* parts, size_t n_parts,
                                                        const gemlet_generate_options* options,
                                                        gemlet_stream_fn callback, void* user_data,
                                                        gemlet_stats* stats);
/* The last answer's text (no thinking); valid until the next call on the conversation. */
GEMLET_API const char* gemlet_conversation_last_reply(const gemlet_conversation* conversation);
/* With gemlet_generate_options.logprobs: the last send's log-probabilities, one entry per generated
 * token (0 without, and after a failed send), read as gemlet_reply_n_logprobs / gemlet_reply_logprob
 * read a reply's; *top is valid until the next call on the conversation. A cancelled send keeps
 * those of the answer so far. */
GEMLET_API size_t gemlet_conversation_last_n_logprobs(const gemlet_conversation* conversation);
GEMLET_API gemlet_status gemlet_conversation_last_logprob(const gemlet_conversation* conversation, size_t index,
                                                          gemlet_token_logprob* chosen,
                                                          const gemlet_token_logprob** top, size_t* n_top);
/* Thread-safe: stops the running send, in the prompt's evaluation too. */
GEMLET_API void gemlet_conversation_cancel(gemlet_conversation* conversation);
GEMLET_API gemlet_status gemlet_conversation_set_system(gemlet_conversation* conversation, const char* system);
/* Gemma 4: think before answering from the next send on (the thought streams as THINKING). */
GEMLET_API gemlet_status gemlet_conversation_set_thinking(gemlet_conversation* conversation, bool thinking);
/* The user and assistant turns so far: n_messages takes a snapshot (0 for NULL) that message(i)
 * reads; the strings stay valid until the next n_messages or free. */
GEMLET_API size_t gemlet_conversation_n_messages(gemlet_conversation* conversation);
GEMLET_API gemlet_status gemlet_conversation_message(const gemlet_conversation* conversation, size_t index,
                                                     const char** role, const char** content);
/* The whole message `index` of that snapshot, tool calls included (pointers valid as for
 * gemlet_conversation_message); fills what message->struct_size holds. */
GEMLET_API gemlet_status gemlet_conversation_message_at(const gemlet_conversation* conversation, size_t index,
                                                        gemlet_message* message);
/* Replaces the user and assistant turns with ones kept elsewhere (a history store), evaluated on the
 * next send. GEMLET_INVALID_ARGUMENT for another role. */
GEMLET_API gemlet_status gemlet_conversation_set_messages(gemlet_conversation* conversation,
                                                          const gemlet_message* messages, size_t n_messages);
/* Old turns dropped to make room are first summarized by the model (from the next send on). */
GEMLET_API gemlet_status gemlet_conversation_set_summarize_dropped(gemlet_conversation* conversation, bool on);
/* The summary of dropped turns the conversation carries now ("" when none), freed with gemlet_string_free. */
GEMLET_API gemlet_status gemlet_conversation_summary(const gemlet_conversation* conversation, char** summary);
GEMLET_API int gemlet_conversation_n_ctx(const gemlet_conversation* conversation);
GEMLET_API gemlet_status gemlet_conversation_memory(const gemlet_conversation* conversation, gemlet_memory_stats* stats);
GEMLET_API gemlet_status gemlet_conversation_memory_plan(gemlet_conversation* conversation, gemlet_memory_plan* plan);
GEMLET_API void gemlet_conversation_reset(gemlet_conversation* conversation);
/* The next turns run with these LoRA adapters (gemlet_session_set_adapters); a change evaluates the
 * conversation again under the new ones at the next send. */
GEMLET_API gemlet_status gemlet_conversation_set_adapters(gemlet_conversation* conversation,
                                                          const gemlet_adapter* const* adapters, const float* scales,
                                                          size_t n);
GEMLET_API size_t gemlet_conversation_n_adapters(const gemlet_conversation* conversation);
GEMLET_API gemlet_status gemlet_conversation_adapter_at(const gemlet_conversation* conversation, size_t index,
                                                        gemlet_adapter** adapter, float* scale);
GEMLET_API int gemlet_conversation_n_past(const gemlet_conversation* conversation);
GEMLET_API gemlet_status gemlet_conversation_save(const gemlet_conversation* conversation, const char* path);
GEMLET_API gemlet_status gemlet_conversation_load(gemlet_conversation* conversation, const char* path);
/* The whole conversation, KV cache included (as gemlet_session_save): what an app's on_background
 * handler writes, and restores on launch with nothing evaluated again. */
GEMLET_API gemlet_status gemlet_conversation_save_state(const gemlet_conversation* conversation, const char* path);
GEMLET_API gemlet_status gemlet_conversation_restore_state(gemlet_conversation* conversation, const char* path);

/* ---- many requests at once (servers) ----
 * Each step gives every running request its next token, or the next chunk of its prompt, in one
 * forward over all of them; each request behaves as gemlet_session_complete on its own session. One
 * thread submits and steps; gemlet_batch_decoder_cancel may come from any thread. */
typedef struct gemlet_batch_options {
  size_t struct_size;
  int max_requests;   /* requests running at once (8) */
  int prefill_chunk;  /* prompt tokens a request evaluates per step (256) */
} gemlet_batch_options;
GEMLET_API gemlet_batch_options gemlet_batch_options_default(void);
GEMLET_API gemlet_status gemlet_batch_decoder_create(gemlet_engine* engine, const gemlet_batch_options* options,
                                                     gemlet_batch_decoder** out);
GEMLET_API void gemlet_batch_decoder_free(gemlet_batch_decoder* decoder);
/* Starts a request on `session` (of this engine, running nothing else, outliving the request);
 * callback runs on the thread calling step. *id receives the request's id (> 0);
 * GEMLET_INVALID_ARGUMENT when max_requests are running. */
GEMLET_API gemlet_status gemlet_batch_decoder_submit(gemlet_batch_decoder* decoder, gemlet_session* session,
                                                     const int32_t* prompt, size_t n_prompt,
                                                     const gemlet_generate_options* options, gemlet_stream_fn callback,
                                                     void* user_data, int* id);
/* The same with images or audio in the prompt (gemlet_engine_chat_prompt, gemlet_prompt_new), as
 * gemlet_session_complete_prompt would: the prompt up to its last image is evaluated in a step of
 * its own on the request's session. The prompt may be freed once this returns. */
GEMLET_API gemlet_status gemlet_batch_decoder_submit_prompt(gemlet_batch_decoder* decoder, gemlet_session* session,
                                                            const gemlet_prompt* prompt,
                                                            const gemlet_generate_options* options,
                                                            gemlet_stream_fn callback, void* user_data, int* id);
/* One step of every running request; *n_finished receives how many finished in it, which
 * gemlet_batch_decoder_finished reads (until the next step). */
GEMLET_API gemlet_status gemlet_batch_decoder_step(gemlet_batch_decoder* decoder, size_t* n_finished);
/* Finished request `index` of the last step: *id its id (0 for a bad index, which is
 * GEMLET_INVALID_ARGUMENT); returns the request's own status: GEMLET_OK with *reply (NULL: not
 * wanted) a new reply the caller frees (a cancelled request too: its stats say CANCELLED), or the
 * request's error with gemlet_last_error() its message and *reply NULL. */
GEMLET_API gemlet_status gemlet_batch_decoder_finished(const gemlet_batch_decoder* decoder, size_t index, int* id,
                                                       gemlet_reply** reply);
/* Thread-safe: the request ends at the next step with GEMLET_STOP_CANCELLED (its partial reply). */
GEMLET_API void gemlet_batch_decoder_cancel(gemlet_batch_decoder* decoder, int id);
GEMLET_API int gemlet_batch_decoder_running(const gemlet_batch_decoder* decoder);
GEMLET_API int gemlet_batch_decoder_last_step_tokens(const gemlet_batch_decoder* decoder);

/* ---- a tokenizer on its own, without a model ----
 * From a GGUF's tokenizer.ggml.* metadata, a Hugging Face tokenizer.json or a SentencePiece
 * tokenizer.model (tokenizer_config.json and config.json read from beside it). Thread-safe. */
GEMLET_API gemlet_status gemlet_tokenizer_open(const char* path, gemlet_tokenizer** out);
GEMLET_API void gemlet_tokenizer_free(gemlet_tokenizer* tokenizer);
/* As gemlet_tokenize. */
GEMLET_API gemlet_status gemlet_tokenizer_encode(const gemlet_tokenizer* tokenizer, const char* text, size_t text_len,
                                                 bool add_special, bool parse_special, int32_t* tokens,
                                                 size_t capacity, size_t* n_tokens);
GEMLET_API gemlet_status gemlet_tokenizer_decode(const gemlet_tokenizer* tokenizer, const int32_t* tokens,
                                                 size_t n_tokens, char** text);
/* The vocabulary's piece ("▁the", "<0x0A>"; "" out of range), freed with gemlet_string_free. */
GEMLET_API gemlet_status gemlet_tokenizer_piece(const gemlet_tokenizer* tokenizer, int32_t token, char** piece);
GEMLET_API int gemlet_tokenizer_vocab_size(const gemlet_tokenizer* tokenizer);

/* ---- task presets (gemlet/tasks.hpp): polish, summarize, rewrite, translate, explain, sql ---- */

typedef struct gemlet_task_options {
  size_t struct_size;
  const char* task;      /* "polish", "summarize", "rewrite", "translate", "explain" or "sql" */
  const char* style;     /* rewrite: "formal" (NULL), "casual" or "concise" */
  const char* to;        /* translate: the target ("zh", "zh-Hant", "en", ...); others: NULL = the input's language */
  const char* schema;    /* sql: the tables; NULL: none */
  const char* glossary;  /* TSV text, term TAB rendering [TAB note] per line; NULL: none */
  bool thinking;         /* Gemma 4: think first (never part of the output) */
  /* describe: the image; transcribe: the clip, or a long clip's pieces in order (gemlet_audio_pieces_at:
   * one generation each, the texts joined); translate: either. NULL with n_media 0: none. */
  const gemlet_media* const* media;
  size_t n_media;
} gemlet_task_options;

GEMLET_API gemlet_task_options gemlet_task_options_default(void);
/* Runs a task on `input` in `session`: `*output` gets the result alone (no thought, no lead-in),
 * valid until the next task call on the session. GEMLET_CONTEXT_FULL for an input too long for the
 * session (summarize takes it in parts instead); GEMLET_INVALID_ARGUMENT for an unknown task, style
 * or language; GEMLET_ERROR for empty input or a bad glossary line. */
GEMLET_API gemlet_status gemlet_task_run(gemlet_session* session, const char* input, const gemlet_task_options* options,
                                         const gemlet_generate_options* generate, const char** output, gemlet_stats* stats);
/* What the last gemlet_task_run's answer had to hold from the glossary and still lacks (polish and
 * rewrite keep a term verbatim, translate renders it as given; a term in another case or spacing, or
 * left untranslated, was repaired already): one per line, "" when none. Valid as *output is. */
GEMLET_API const char* gemlet_task_glossary_missing(const gemlet_session* session);
/* The language the presets detect in `text` and answer in (static strings): a BCP-47 tag of
 * DetectableLanguages() in gemlet/tasks.hpp ("en", "fr", "nb", "ja", "zh-Hans", "zh-Hant", ...),
 * "mixed" (Chinese with English words) or "unknown" (no letters; NULL). */
GEMLET_API const char* gemlet_detect_language(const char* text);

/* ---- model files: digests and delta patches (docs/delta.md) ----
 * For apps that download models themselves: verify a download against its published SHA-256, read
 * what a patch (`gemlet diff`) applies to, and patch an installed file up to the next version.
 * These need OpenSSL's libcrypto; a library built without it (gemlet_delta_available() false)
 * answers GEMLET_ERROR and gemlet_last_error() says so. */
GEMLET_API bool gemlet_delta_available(void);
/* The SHA-256 of a whole file: 64 lowercase hex digits and a NUL in out_hex. */
GEMLET_API gemlet_status gemlet_file_sha256(const char* path, char out_hex[65]);
/* GEMLET_OK when the file's SHA-256 is sha256_hex (64 hex digits, either case); GEMLET_ERROR naming
 * both digests when it is not; GEMLET_INVALID_ARGUMENT when sha256_hex is not a digest. */
GEMLET_API gemlet_status gemlet_file_verify(const char* path, const char* sha256_hex);

typedef struct gemlet_patch_info {
  size_t struct_size;
  uint64_t old_size;     /* the file the patch applies to */
  char old_sha256[65];
  uint64_t new_size;     /* the file it makes */
  char new_sha256[65];
  uint64_t patch_size;
  uint64_t literal_bytes; /* NEW's bytes the patch carries; the rest is copied from OLD */
} gemlet_patch_info;
GEMLET_API gemlet_patch_info gemlet_patch_info_default(void);
/* Reads and checks a patch's header and index (not its data) without OLD: a truncated, damaged or
 * foreign file is GEMLET_ERROR. */
GEMLET_API gemlet_status gemlet_patch_info_read(const char* patch_path, gemlet_patch_info* info);
/* Rebuilds NEW from OLD and a patch: checks that OLD is the file the patch was made from (its
 * SHA-256), writes NEW through a temporary file beside new_path checking every chunk's digest, then
 * NEW's SHA-256, and renames it over new_path (the file and the directory synced). On any failure
 * nothing appears at new_path (a file already there stays as it was) and gemlet_last_error() names
 * the file and what failed. progress (may be NULL) gets the fraction written; returning false
 * cancels (GEMLET_CANCELLED). Memory stays at a few MiB whatever the model's size. */
GEMLET_API gemlet_status gemlet_delta_apply(const char* old_path, const char* patch_path, const char* new_path,
                                            gemlet_progress_fn progress, void* user_data);

/* ---- The model store (gemlet/store.hpp, docs/store.md) ----
 * Models by name and version in one folder, each file checked against its SHA-256 before it becomes
 * visible; an active version per name that switches atomically, a previous one to roll back to. Apps
 * download with their own HTTP client and install the finished file here. A libgemlet built
 * without OpenSSL (the arm64 cross build) has no store: these return GEMLET_ERROR saying so. */
typedef struct gemlet_store gemlet_store;
/* dir NULL or "": $XDG_DATA_HOME/gemlet/models, else ~/.local/share/gemlet/models. */
GEMLET_API gemlet_status gemlet_store_open(const char* dir, gemlet_store** out);
GEMLET_API void gemlet_store_free(gemlet_store* store);
enum {
  GEMLET_STORE_ACTIVATE = 1, /* make the installed version the active one */
  GEMLET_STORE_KEEP_OLD = 2, /* keep the version it replaces as the previous one (for rollback) */
  GEMLET_STORE_MOVE = 4      /* rename the file in (same filesystem) instead of copying it */
};
/* Checks `file` against sha256 (64 hex digits; NULL: computed and recorded) and installs it as NAME
 * VERSION; a mismatch is GEMLET_ERROR and installs nothing. */
GEMLET_API gemlet_status gemlet_store_install(gemlet_store* store, const char* name, const char* version, const char* file,
                                              const char* sha256, unsigned flags);
/* Re-hashes the installed files of name (NULL: every model); GEMLET_ERROR when one fails (the first
 * failure in gemlet_last_error), n_failed (may be NULL) counts them. */
GEMLET_API gemlet_status gemlet_store_verify(gemlet_store* store, const char* name, int* n_failed);
/* Makes an installed version the active one; the old one stays as previous only with keep_old. */
GEMLET_API gemlet_status gemlet_store_switch(gemlet_store* store, const char* name, const char* version, bool keep_old);
GEMLET_API gemlet_status gemlet_store_rollback(gemlet_store* store, const char* name);
GEMLET_API gemlet_status gemlet_store_remove(gemlet_store* store, const char* name);
/* "NAME" or "NAME:VERSION" to the installed file's path (free it with gemlet_string_free). */
GEMLET_API gemlet_status gemlet_store_resolve(const gemlet_store* store, const char* ref, char** path);
/* The active version of name ("" for none is never returned: an unknown name is GEMLET_ERROR). */
GEMLET_API gemlet_status gemlet_store_active_version(const gemlet_store* store, const char* name, char** version);

#ifdef __cplusplus
}
#endif

#endif /* GEMLET_GEMLET_H_ */

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
  GEMLET_BUFFER_TOO_SMALL = 6  /* an output buffer cannot hold the result: the call says the size needed */
} gemlet_status;

typedef struct gemlet_engine gemlet_engine;
typedef struct gemlet_session gemlet_session;
typedef struct gemlet_conversation gemlet_conversation;

/* "0.1.0" */
GEMLET_API const char* gemlet_version(void);
/* The message of the calling thread's last failed call ("" if none); valid until its next call. */
GEMLET_API const char* gemlet_last_error(void);
GEMLET_API const char* gemlet_status_name(gemlet_status status);

/* Log messages of the library (level 0 debug, 1 info, 2 warning, 3 error); NULL restores the
 * default (warnings and errors to stderr). The callback may be called from any thread. */
typedef void (*gemlet_log_fn)(int level, const char* message, void* user_data);
GEMLET_API void gemlet_set_log_callback(gemlet_log_fn callback, void* user_data);

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

/* ---- session ---- */

typedef enum gemlet_kv_type { GEMLET_KV_F16 = 0, GEMLET_KV_F32 = 1, GEMLET_KV_Q8_0 = 2, GEMLET_KV_Q4_0 = 3 } gemlet_kv_type;

typedef struct gemlet_session_options {
  size_t struct_size;
  int n_ctx;        /* 0: the model's training context, at most 4096 */
  int n_threads;    /* 0: the engine's */
  int max_batch;    /* prompt tokens per forward chunk (512) */
  gemlet_kv_type kv_type;
  /* Not growable: gemlet_conversation_options holds one by value. Sessions keep the C++ API's
   * default rollback room (16 tokens gemlet_session_truncate takes back without re-evaluating). */
} gemlet_session_options;

GEMLET_API gemlet_session_options gemlet_session_options_default(void);
GEMLET_API gemlet_status gemlet_session_create(gemlet_engine* engine, const gemlet_session_options* options,
                                               gemlet_session** out);
GEMLET_API void gemlet_session_free(gemlet_session* session);
/* Evaluates tokens after those cached; `logits` (NULL: none) receives the last position's n_vocab
 * values. GEMLET_CANCELLED after gemlet_session_cancel() from another thread; what finished stays. */
GEMLET_API gemlet_status gemlet_session_evaluate(gemlet_session* session, const int32_t* tokens, size_t n_tokens,
                                                 float* logits);
GEMLET_API gemlet_status gemlet_session_truncate(gemlet_session* session, int n_keep);
/* Removes tokens [begin, begin + count) from the cache: later tokens move down, their keys rotated to
 * their new positions, nothing evaluated (unless sliding-window layers cannot follow: then the kept
 * tokens are evaluated again, and *reevaluated, when not NULL, says how many). */
GEMLET_API gemlet_status gemlet_session_discard(gemlet_session* session, int begin, int count, int* reevaluated);
GEMLET_API void gemlet_session_reset(gemlet_session* session);
GEMLET_API int gemlet_session_n_past(const gemlet_session* session);
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
} gemlet_generate_options;
GEMLET_API gemlet_generate_options gemlet_generate_options_default(void);

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
} gemlet_stats;

GEMLET_API gemlet_stats gemlet_stats_default(void);

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
GEMLET_API void gemlet_conversation_free(gemlet_conversation* conversation);
/* Sends a user message and streams the answer to `callback` (NULL: none). `stats` (NULL: none;
 * set its struct_size) receives the turn's figures. A cancel or a callback's false returns
 * GEMLET_CANCELLED; the answer so far stays in the conversation, or none if it had not begun. */
GEMLET_API gemlet_status gemlet_conversation_send(gemlet_conversation* conversation, const char* user_text,
                                                  const gemlet_generate_options* options, gemlet_stream_fn callback,
                                                  void* user_data, gemlet_stats* stats);
/* The last answer's text (no thinking); valid until the next call on the conversation. */
GEMLET_API const char* gemlet_conversation_last_reply(const gemlet_conversation* conversation);
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
GEMLET_API void gemlet_conversation_reset(gemlet_conversation* conversation);
GEMLET_API int gemlet_conversation_n_past(const gemlet_conversation* conversation);
GEMLET_API gemlet_status gemlet_conversation_save(const gemlet_conversation* conversation, const char* path);
GEMLET_API gemlet_status gemlet_conversation_load(gemlet_conversation* conversation, const char* path);
/* The whole conversation, KV cache included (as gemlet_session_save): what an app's on_background
 * handler writes, and restores on launch with nothing evaluated again. */
GEMLET_API gemlet_status gemlet_conversation_save_state(const gemlet_conversation* conversation, const char* path);
GEMLET_API gemlet_status gemlet_conversation_restore_state(gemlet_conversation* conversation, const char* path);

/* ---- task presets (gemlet/tasks.hpp): polish, summarize, rewrite, translate, explain, sql ---- */

typedef struct gemlet_task_options {
  size_t struct_size;
  const char* task;      /* "polish", "summarize", "rewrite", "translate", "explain" or "sql" */
  const char* style;     /* rewrite: "formal" (NULL), "casual" or "concise" */
  const char* to;        /* translate: the target ("zh", "zh-Hant", "en", ...); others: NULL = the input's language */
  const char* schema;    /* sql: the tables; NULL: none */
  const char* glossary;  /* TSV text, term TAB rendering [TAB note] per line; NULL: none */
  bool thinking;         /* Gemma 4: think first (never part of the output) */
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
/* "en", "zh-Hans", "zh-Hant", "mixed" or "unknown" (static strings): the language the presets
 * detect in `text` and answer in. */
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

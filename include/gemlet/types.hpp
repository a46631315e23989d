// gemlet's public value types: options, messages, replies, stats, events and plans. Plain data,
// defined once: the public API (gemlet.hpp) and the runtime below it both use these, so nothing is
// copied between twin structs. The C API (gemlet.h) keeps its own ABI-fixed structs and converts at
// its boundary only. Functions over these types are declared in gemlet.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gemlet/export.h"

namespace gemlet {

class Engine;  // gemlet.hpp

// ---- platform signals (the app passes them in; phones have no SIGTSTP or /proc to watch) ----

// iOS ProcessInfo.ThermalState; Android's THERMAL_STATUS_* map onto it (NONE, LIGHT -> kNominal/
// kFair; MODERATE -> kFair; SEVERE -> kSerious; CRITICAL, EMERGENCY, SHUTDOWN -> kCritical).
enum class ThermalState { kNominal = 0, kFair = 1, kSerious = 2, kCritical = 3 };
// Android ComponentCallbacks2.onTrimMemory levels, by their values; iOS's memory warning is
// kRunningCritical (the app is in the foreground and about to be killed).
enum class MemoryPressure {
  kNone = 0,
  kRunningModerate = 5,
  kRunningLow = 10,
  kRunningCritical = 15,
  kUiHidden = 20,
  kBackground = 40,
  kModerate = 60,
  kComplete = 80,
};


// The process's memory now, cheaply (for sampling a peak): resident set, its anonymous part (what
// a phone counts), and the resident peak so far. 0 where the platform does not say.
struct ProcessMemory {
  uint64_t rss_bytes = 0;
  uint64_t anon_bytes = 0;
  uint64_t peak_rss_bytes = 0;
};


// How the KV cache stores keys and values: f16 (the default), f32, q8_0 (half of f16's bytes, a
// small loss) or q4_0 (28% of f16's bytes: for a memory budget nothing else fits; bench/RESULTS.md
// has what each costs in accuracy).
// The values are the GGML type ids of these element types (the kernels' DType): a KV cache type is
// a tensor type, the same number everywhere below the API.
enum class KvCacheType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8 };


// How the kernels run. The defaults are the fastest on this CPU; the rest are for A/B measurements,
// for checking results against the reference, and for governors (a hot phone trades speed for heat).
struct KernelOptions {
  // "auto": the best this CPU runs; "ref": the scalar reference (slow; it defines the results); or a
  // name from AvailableKernels() ("AVX2", "NEON", ...).
  std::string kernels = "auto";
  bool pack_weights = true;   // repack weights on first use into the layout the kernels stream fastest
  // How far ahead decode prefetches weights: 0 (off) to 1 MiB, or kPrefetchAuto, the choice for this
  // CPU and kernel table (none for the AVX-512 kernels on AMD, whose hardware prefetcher follows
  // their packed weights; 2 KiB elsewhere, AVX2 on AMD included).
  static constexpr int kPrefetchAuto = -1;
  int prefetch_bytes = kPrefetchAuto;
  bool vnni_gemm = true;      // prefill through the VNNI panel GEMM where the CPU has VNNI
  bool spin_wait = true;      // threads poll briefly between the loops of a step instead of sleeping
  // A token's logits do not depend on the tokens that share its step (prompt chunk size, batched
  // requests, a cached prefix): docs/determinism.md. Off allows faster kernels whose rounding does.
  bool batch_invariant = true;
};


// What the memory governor did to a conversation under pressure (EngineOptions::on_memory_action,
// a warning in the log, MemoryStats). In the order it climbs: the kernels' scratch and unused KV
// pages; the oldest turns' KV; a lower KV precision (q8_0) for what follows.
enum class MemoryAction { kReleasedScratch, kDroppedOldTurns, kLoweredKvPrecision };
struct MemoryActionEvent {
  MemoryAction action = MemoryAction::kReleasedScratch;
  bool critical = false;        // the pressure was critical (else moderate)
  uint64_t bytes_released = 0;  // dirty memory given back
  std::string detail;           // "4 messages, 312 tokens", "KV f16 -> q8_0"
};

// The thermal governor (docs/thermal.md): it throttles the engine's sessions (fewer threads, paced
// steps, shorter prefill chunks) while the device is hot, judged by the levels the app passes to
// SetThermalState and, on Linux, by a thermal zone of the device's skin, case or battery (never a
// CPU die sensor, which runs at 60-90 °C under load). With no such zone it acts on levels alone.
struct ThermalOptions {
  bool enabled = true;    // false: nothing throttles (levels are still recorded)
  // A zone's type ("skin-therm", as in its type file, any case) or directory ("thermal_zone3"); an
  // unknown name fails the load. Empty: the first skin/case/battery zone, if any.
  std::string zone{};
  std::string sysfs_root = "/sys/class/thermal";  // where thermal_zone*/ are (tests point elsewhere)
  double limit_c = 42;    // the zone's temperature to stay under, in °C (20..100)
};

struct EngineOptions {
  // Threads a session uses unless its options say otherwise; 0: every hardware thread.
  int n_threads = 0;
  // Folders the app owns (phones have no XDG_* variables): cache for files gemlet can rebuild
  // (packed weights), data for files it cannot. Empty: none used. With a cache folder, the weights
  // the kernels repack are written there once (kernels that pack: AVX-512 VNNI; ARM with dotprod or i8mm) and mapped
  // read-only from then on: clean file pages instead of anonymous memory, and no packing at start.
  std::string cache_dir{};
  std::string data_dir{};
  // Called while loading with the fraction done (0..1); return false to cancel the load, which then
  // fails with StatusCode::kCancelled.
  std::function<bool(float fraction)> progress{};
  KernelOptions kernels{};
  // The memory governor reads Linux PSI here before each conversation turn ("": not read); apps
  // pass their OS's warnings to OnMemoryWarning as well or instead. Moderate pressure (5% of time
  // stalled) gives back scratch, then old turns if it lasts; critical (30%, or 5% fully stalled,
  // or a critical warning) drops old turns at once, then lowers the KV precision.
  std::string memory_pressure_path = "/proc/pressure/memory";
  // Called for each action of the memory governor, on the thread that took it.
  std::function<void(const MemoryActionEvent& event)> on_memory_action{};
  ThermalOptions thermal{};
  // A multimodal model's towers: llama.cpp's mmproj GGUF (`gemlet convert --mmproj-out`, or the
  // mmproj file published beside the model). Empty: text only. Mapped like the model file; a tower
  // the model cannot take (another width, another family) fails the load.
  std::string mmproj_path{};
  // Gemma 4 audio: run its local attention with transformers' eager mask, which hides the frames it
  // means to show (docs/multimodal.md), instead of the model's window (llama.cpp's, and HF's sdpa
  // path). For checks against goldens made with HF's eager attention only.
  bool audio_hf_eager_mask = false;
};

// What a loaded model is.
struct ModelInfo {
  std::string architecture;  // general.architecture: "gemma3", "gemma4", ...
  std::string name;          // general.name, when the file has one
  std::string chat_format;   // "gemma" (Gemma 1-3) or "gemma4"
  int n_vocab = 0;
  int n_ctx_train = 0;       // the context the model was trained for
  int n_layers = 0;
  int d_model = 0;
  uint64_t n_parameters = 0;
  uint64_t file_bytes = 0;
  uint64_t tensor_bytes = 0;  // the tensors' data (file_bytes less header and metadata)
  std::string file_type;      // llama.cpp's name of general.file_type: "Q4_K_M", "F16", ...; "?" unknown
  // Weight bytes one decoded token reads (every matrix once; embedding tables one row; MoE experts
  // the used share): with Session::DecodeKvBytesAt, the traffic a bandwidth bound divides.
  uint64_t decode_weight_bytes = 0;
  // Weight multiply-accumulates one prompt token makes in prefill (every matrix but the lookups, the
  // output head and a KV-shared tail, which a prompt runs on its last row; MoE experts the used
  // share): with tools::MeasureInt8Peaks, the work a compute bound divides.
  uint64_t prompt_macs_per_token = 0;
  double load_seconds = 0;   // mapping, validating and binding the file, and building the tokenizer
  double map_seconds = 0;    // of that, mapping, validating and binding (the rest is the tokenizer)
  // The packed-weight cache (EngineOptions::cache_dir): "" not used, "loaded" mapped as found,
  // "built" written at this load, "none" it could not be used (a warning was logged); and the time
  // it took (a build packs every weight once: about what the first prompt would otherwise pay).
  std::string packed_cache;
  double packed_cache_seconds = 0;
  // What the model takes besides text (EngineOptions::mmproj_path's towers).
  bool takes_images = false;
  bool takes_audio = false;
  std::string mmproj_projector;  // the mmproj's projector types ("gemma3", "gemma4v", ...), "" without one
};

// What the process holds now beside the plan (MemoryPlan): its resident set and peak, and how much
// of the model file is mapped into it (of that, the embedding tables read by rows).
struct GEMLET_CXX_API MemoryUsage {
  uint64_t rss_bytes = 0;
  uint64_t peak_rss_bytes = 0;
  uint64_t anon_bytes = 0;  // anonymous (dirty) memory: what iOS and Android count and kill for
  uint64_t model_file_resident_bytes = 0;
  uint64_t on_demand_resident_bytes = 0;
  uint64_t packed_weight_bytes = 0;  // weights repacked for the kernels so far (packed on first use)
  uint64_t packed_mapped_bytes = 0;  // of those, mapped from the packed-weight cache (clean file pages)
  uint64_t tokenizer_bytes = 0;      // the tokenizer's tables (anonymous; 262k pieces: about 40 MiB)
  std::string ToString() const;  // one line, "memory now: RSS ..."
};

struct TokenizeOptions {
  bool add_special = false;    // add BOS (and EOS) as the model's tokenizer does
  bool parse_special = false;  // text such as "<start_of_turn>" becomes its control token
};

// A function call the model made (Gemma 4), or that an assistant message of the history carries.
struct ToolCall {
  std::string name;       // the function's name
  // Its arguments as a JSON object's text ({"city":"Paris"}), as OpenAI's API carries them. A call
  // the model wrote that does not parse keeps its raw text ("{city:<|"|>Paris...").
  std::string arguments;
  std::string id = {};    // the history's id for it (a tool message's tool_call_id names it)
};

// ---- images and audio ----

enum class MediaKind { kImage = 0, kAudio = 1 };

// An image or an audio clip as the model takes it: the embeddings of its soft tokens, which a
// prompt holds in place of the media's placeholder tokens. Made once by Engine::EncodeImage (a
// conversation keeps it for every later turn), immutable, shared by the prompts and sessions that
// hold it.
struct EncodedMedia {
  MediaKind kind = MediaKind::kImage;
  int n_tokens = 0;               // soft tokens
  int n_embd = 0;                 // the text model's width
  std::vector<float> embeddings;  // [n_tokens, n_embd]
  // The text model attends both ways over the soft tokens (Gemma 3's images; Gemma 4's where the
  // checkpoint says so), not only causally.
  bool two_way = false;
  // 32 hex digits naming what was encoded (the preprocessed pixels or features, and the budget):
  // saved sessions record it. Caches compare the embeddings themselves, never the name alone.
  std::string content_hash;
  // Gemma 3n: the last row is this token's embedding (the end-of-image or end-of-audio marker, which
  // the model embeds through its tower's embedder rather than its token table), and the prompt holds
  // this token there, after n_tokens - 1 placeholders. -1: every row is a soft token.
  int32_t end_token = -1;
  // Gemma 3's pan-and-scan (ImageOptions::pan_and_scan): the image's crops, each encoded like the
  // whole image (this media's rows). A prompt holds the whole image and then its crops, each in its
  // own markup, with the processor's words around them ("Here is the original image ...").
  std::vector<std::shared_ptr<const EncodedMedia>> crops;
};

// Media at its place in a prompt: tokens [position, position + media->n_tokens) are its soft
// tokens' placeholders (the model's image or audio token), which the media's rows replace.
struct MediaSpan {
  int position = 0;
  std::shared_ptr<const EncodedMedia> media;
};

// Tokens with images or audio among them (Engine::ChatPrompt makes one from messages): what
// Session::Evaluate, Generate and Complete take. media: in position order, not overlapping.
struct Prompt {
  std::vector<int32_t> tokens;
  std::vector<MediaSpan> media;
};

// How an image is encoded.
struct ImageOptions {
  // Gemma 4: the image's soft tokens at most (its processor's max_soft_tokens: 70, 140, 280, 560 or
  // 1120; more tokens see finer detail and cost more); 0: the mmproj's default (280).
  int max_soft_tokens = 0;
  // Gemma 3: pan-and-scan (HF's Gemma3ImageProcessor do_pan_and_scan): an image whose long side is
  // at least min_ratio times its short side is also cut into 2..max_crops crops along the long
  // side, each at least min_crop_size pixels, encoded besides the whole image (a crop costs as many
  // soft tokens as the image). The numbers are the processor's defaults. Other models refuse it.
  struct PanAndScan {
    bool enabled = false;
    int min_crop_size = 256;
    int max_crops = 4;
    double min_ratio = 1.2;
  } pan_and_scan;
};

// How a clip of any length is taken (Engine::EncodeAudioPieces).
struct AudioOptions {
  // A longer clip is refused with StatusCode::kTooLarge, the message naming both durations (from a
  // file's header, before it is decoded, where the header tells).
  double max_seconds = 600.0;
};

// One piece of a long clip, encoded as EncodeAudio encodes a clip, and where it lies in the clip.
struct AudioPiece {
  std::shared_ptr<const EncodedMedia> media;
  double start_seconds = 0;
  double end_seconds = 0;
};

// One part of a message's content (OpenAI's content parts): text, or an image or clip.
struct ContentPart {
  std::string text;                           // a text part
  std::shared_ptr<const EncodedMedia> media;  // set: a media part (text unused)
};

struct Message {
  std::string role;  // "system", "user", "assistant", and (Gemma 4) "tool"
  std::string content;  // a tool message: the function's result
  // Content with images or audio, in order: used instead of `content`, which must then be empty.
  // Text parts are trimmed one by one, as the official templates trim them.
  std::vector<ContentPart> parts = {};
  // Gemma 4's tool calling:
  std::vector<ToolCall> tool_calls = {};  // assistant: the calls it made
  std::string reasoning = {};     // assistant: its thought (written back between tool steps only)
  std::string tool_call_id = {};  // tool: the call it answers
  std::string name = {};          // tool: the function's name
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with the opening of the model's turn
  bool thinking = false;              // Gemma 4: the thought channel on
  // Gemma 4: the functions the model may call, OpenAI's "tools" array as JSON text
  // ([{"type":"function","function":{"name","description","parameters"}}]); empty: none.
  std::string tools = {};
  // OpenAI's "tool_choice" as JSON text ("auto", "none", "required", {"type":"function",...});
  // empty: auto. The template can only declare tools or not: "none" leaves them out, "required"
  // and a named function are declared as auto is (not enforced).
  std::string tool_choice = {};
};

// A LoRA adapter (gemlet.hpp: Engine::LoadAdapter) and its scale (llama.cpp's --lora-scaled): each
// adds scale * alpha/r * B (A x) to the projections it changes.
class Adapter;
struct AdapterUse {
  std::shared_ptr<const Adapter> adapter;
  float scale = 1.0f;
};

struct SessionOptions {
  int n_ctx = 0;         // tokens the KV cache holds; 0: the model's training context, at most 4096
  int n_threads = 0;     // 0: the engine's n_threads
  int max_batch = 512;   // prompt tokens evaluated per forward chunk
  KvCacheType kv_cache_type = KvCacheType::kF16;
  // Tokens Truncate takes back without evaluating anything again (sliding-window layers keep this
  // many positions beyond their window): regenerating an answer, speculative decoding.
  int rollback_tokens = 16;
  // Called after each chunk of a long prompt with (tokens done, total), on the evaluating thread
  // (every evaluation reports: a decoded token as (1, 1)).
  std::function<void(int done, int total)> progress{};
  // Speculative decoding with a draft model: a smaller model of the same vocabulary (Create
  // refuses another, kInvalidArgument) whose greedy continuation GenerateOptions::max_draft
  // verifies instead of prompt lookup. The session keeps the draft's own cache beside its own (the
  // same n_ctx and KV type), so a chat's turns reuse both. Null: prompt lookup.
  std::shared_ptr<Engine> draft_model{};
  // The LoRA adapters the session starts with (Session::SetAdapters changes them later).
  std::vector<AdapterUse> adapters{};
};

// What a session costs before it runs: weights that become resident (read for every token),
// weights that stay on disk (embedding tables read by rows), the KV cache for its context, and its
// activations.
struct MemoryPlan {
  uint64_t file_bytes = 0;
  uint64_t weights_resident_bytes = 0;
  uint64_t weights_on_demand_bytes = 0;
  uint64_t kv_cache_bytes = 0;
  uint64_t activation_bytes = 0;
  int n_ctx = 0;
  std::string text;  // the same as a readable table, "memory plan (n_ctx ...)"
};

struct SamplingOptions {
  float temperature = 0.8f;  // 0: greedy
  int top_k = 64;            // 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.0f;        // 0: off; else keeps tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;         // the same seed and logits give the same tokens, on every platform
  // OpenAI's logit_bias: (token id, bias) pairs, each bias added to its token's logit before
  // penalties and truncation, in [-100, 100]; -100 bans the token. Ids outside the vocabulary are
  // ignored here (the server refuses them).
  std::vector<std::pair<int32_t, float>> logit_bias{};
};

struct GenerateOptions {
  int max_tokens = 512;                   // <= 0: until the context is full
  SamplingOptions sampling;
  std::vector<std::string> stop{};          // generation stops before any of these texts
  // >= 0: Reply::logprobs gets each generated token's log-probability under the model (before
  // penalties, temperature and truncation) and this many most likely alternatives (at most 20).
  int top_logprobs = -1;
  // Structured output, OpenAI's response_format as JSON text: {"type":"json_object"} (any JSON
  // object) or {"type":"json_schema","json_schema":{"schema":{...}}}; empty or {"type":"text"}:
  // free text. Sampling is constrained token by token, so the answer parses and validates whatever
  // the weights, provided max_tokens holds the shortest valid output (else kInvalidArgument, as for
  // schema keywords outside the supported subset: docs/server.md lists it).
  std::string response_format = {};
  // Gemma 4 tool calling: OpenAI's tool_choice as JSON text, enforced while sampling where the
  // prompt cannot say it (ChatOptions::tool_choice renders the prompt). "required": the answer
  // opens with a tool call (after a thought, if the model thinks first); {"type":"function",
  // "function":{"name":"NAME"}}: with a call of NAME; "none": no tool call. Empty or "auto": free.
  // Not together with a response_format (kInvalidArgument).
  std::string tool_choice = {};
  // Speculative decoding by prompt lookup (Session::Generate / Complete, Conversation::Send; not
  // BatchDecoder): up to this many tokens that followed an earlier occurrence of the last few tokens
  // (in the prompt or the answer) are drafted and verified in one forward. Every position is still
  // sampled as without drafts, and a draft is kept only where the sample equals it, so the output is
  // plain decoding's: a step verifies at most 7 drafts, which the kernels evaluate row by row as
  // they decode one token, bit for bit. Rewrites and summaries copy their input and gain the most.
  // 0: off; more than 7 (or the session's rollback room) is capped. With SessionOptions::draft_model
  // the drafts are that model's greedy continuation instead, kept by the same rule (a draft that is
  // one token, kept where the target's sample equals it, is speculative sampling's acceptance test).
  int max_draft = 0;
};

// What one streamed piece of text is.
enum class ChunkKind { kText, kThinking, kToolCall };
// A piece of the answer, always whole UTF-8 characters. Return false to stop generating.
using StreamCallback = std::function<bool(ChunkKind kind, std::string_view text)>;

enum class StopReason { kEndOfTurn, kStopString, kMaxTokens, kContextFull, kCancelled };

// Memory a session holds (its own accounting).
struct MemoryStats {
  uint64_t kv_cache_bytes = 0;           // reserved for the whole context
  uint64_t kv_cache_resident_bytes = 0;  // committed so far: what the tokens held cost (pages given back on reset)
  uint64_t activation_bytes = 0;  // the session's workspace (scratch included)
  // Conversations: the memory governor's actions so far and the bytes they gave back.
  int pressure_actions = 0;
  uint64_t pressure_released_bytes = 0;
};

struct GenerationStats {
  int prompt_tokens = 0;     // tokens of the request
  int cached_tokens = 0;     // of those, already in the KV cache (not evaluated again)
  int generated_tokens = 0;
  double ttft_seconds = 0;   // from the call to the first generated token
  double prefill_tokens_per_second = 0;
  double decode_tokens_per_second = 0;
  StopReason stop = StopReason::kMaxTokens;
  MemoryStats memory;
  // Conversation: the oldest messages dropped before this turn to make room (whole user/assistant
  // pairs; the system message stays), their tokens, and the kept tokens evaluated again for it
  // (0 when the KV cache was shifted over the dropped ones, the usual case).
  // Speculative decoding (GenerateOptions::max_draft): verification forwards, tokens drafted, and
  // of those, kept.
  int draft_steps = 0;
  int drafted_tokens = 0;
  int accepted_tokens = 0;
  int dropped_messages = 0;
  int dropped_tokens = 0;
  int reevaluated_tokens = 0;
  // With ConversationOptions::summarize_dropped: the dropped messages the model summarized before
  // this turn, and the summary's tokens (it is generated apart: the conversation's cache is untouched).
  int summarized_messages = 0;
  int summary_tokens = 0;
  // What the thermal governor did during this call.
  struct Thermal {
    int throttled_steps = 0;    // forward steps (prompt chunks, tokens) run throttled; 0: none
    int min_threads = 0;        // the fewest threads a step ran on
    double min_duty = 1;        // the lowest share of time spent evaluating
    int min_prefill_chunk = 0;  // the shortest prompt chunk planned
    double paced_seconds = 0;   // slept between steps
  } thermal;
};


struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;  // natural log
};
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // most likely first
};

struct Reply {
  std::string text;      // the answer (no thinking, no tool calls)
  std::string thinking;  // Gemma 4's thought channel
  std::vector<ToolCall> tool_calls;
  std::vector<int32_t> tokens;  // generated ids
  std::vector<TokenLogprobs> logprobs;  // with GenerateOptions::top_logprobs >= 0: one per token
  GenerationStats stats;
};

struct BatchOptions {
  int max_requests = 8;      // requests running at once
  int prefill_chunk = 256;   // prompt tokens a request evaluates per step (long prompts take turns)
};


// What a session would cost in dirty memory (anonymous pages: what iOS and Android count), at
// worst: its whole context filled. Clean file pages (mapped weights, the packed-weight cache) are
// not in it: the OS drops and re-reads them.
struct SessionCost {
  uint64_t kv_bytes = 0;          // the KV cache for the whole context
  uint64_t activation_bytes = 0;  // the session's workspace
  uint64_t packed_in_memory_bytes = 0;  // weights the kernels will pack into anonymous memory (none with a cache)
  uint64_t baseline_bytes = 0;    // the process's anonymous memory now (code, tokenizer, other sessions)
  uint64_t total() const { return kv_bytes + activation_bytes + packed_in_memory_bytes + baseline_bytes; }
};

struct ConversationOptions {
  SessionOptions session;
  std::string system{};     // the system message; empty: none
  bool thinking = false;  // Gemma 4: think before answering (the thought streams as kThinking)
  // When old turns are dropped to make room, the model first writes a short summary of them (a
  // prompt of ours, in Chinese or English after the turns' language; greedy, at most
  // summary_max_tokens), which the next user turn carries before its text. Costs a prefill of the
  // dropped turns in a session of their size, freed after; the room kept for the answer grows by
  // the summary's length.
  bool summarize_dropped = false;
  int summary_max_tokens = 96;
  // Suspend and resume for apps: with a path, Create restores the conversation from it when the
  // file is there (a file refused is logged and a new conversation begins), and Engine::OnBackground
  // saves it there (at once when idle, else when the running Send returns), as SaveState does.
  std::string state_path{};
};

// What the thermal governor sees and does now (Engine::thermal_status).
struct ThermalStatus {
  bool enabled = false;       // ThermalOptions::enabled
  std::string zone;           // the zone it reads ("skin-therm"); empty: levels only
  bool has_reading = false;
  double temperature_c = 0;   // the zone's latest reading
  ThermalState level = ThermalState::kNominal;
  double work_fraction = 1;   // of full speed that sessions may run (1: unthrottled)
  bool throttled = false;     // with hysteresis: released 1 °C below the limit
  // A session on the engine's n_threads runs this now: threads, the share of time it evaluates
  // (the rest sleeps between steps), its prefill chunk (of the default 512).
  int threads = 0;
  double duty = 1;
  int prefill_chunk = 512;
  double throttled_seconds = 0;  // spent throttled while sessions ran
  int changes = 0;               // throttle on/off and level changes so far
};

}  // namespace gemlet

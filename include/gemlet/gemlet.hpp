// gemlet's public C++ API: Engine (a loaded model, immutable and shared), Session (tokens in,
// logits and tokens out, one KV cache) and Conversation (messages, the model's chat format,
// streamed answers). Apps, the CLI, the server and the C API (gemlet.h) all stand on this header;
// nothing of the library's own headers is reachable from it.
//
// Thread safety: an Engine may be used from any number of threads at once, and so may its
// sessions and conversations as long as each one is used by one thread at a time. Cancel() is the
// exception: it may be called from any thread while another runs the object.
//
// Errors: every fallible call returns Status or Result<T> (gemlet/status.hpp); nothing throws or
// exits.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gemlet/export.h"
#include "gemlet/status.hpp"
#include "gemlet/types.hpp"

namespace gemlet {

// "0.1.0"
GEMLET_CXX_API const char* Version();

// ---- names and checks of the value types (gemlet/types.hpp) ----

GEMLET_CXX_API const char* ThermalStateName(ThermalState state);
GEMLET_CXX_API const char* MemoryPressureName(MemoryPressure level);
// The process's memory now, cheaply (for sampling a peak).
GEMLET_CXX_API ProcessMemory MeasureProcessMemory();

// Where messages of the library go (loading notes, warnings). Level: 0 debug, 1 info, 2 warning,
// 3 error. Process-wide; nullptr restores the default (warnings and errors to stderr).
using LogCallback = std::function<void(int level, std::string_view message)>;
GEMLET_CXX_API void SetLogCallback(LogCallback callback);
// The process's memory footprint as the host reads it (iOS: task_vm_info's phys_footprint; Android:
// its own reading), in bytes: budget planning (PlanSession, FitToBudget) and MeasureMemory count it
// as the process's dirty memory. Process-wide, may be called from any thread; nullptr restores the
// default (/proc/self/status's RssAnon on Linux).
using FootprintCallback = std::function<uint64_t()>;
GEMLET_CXX_API void SetFootprintCallback(FootprintCallback callback);

// The threads a request for n_threads gets: n_threads when > 0, else every hardware thread (the
// meaning of 0 in every options struct).
GEMLET_CXX_API int ResolveThreadCount(int n_threads);
GEMLET_CXX_API const char* KvCacheTypeName(KvCacheType type);  // "f16", "f32", "q8_0", "q4_0"
// false when the name is none of those.
GEMLET_CXX_API bool ParseKvCacheType(std::string_view name, KvCacheType* out);
// The kernel names this build runs on this CPU: "ref", then the SIMD targets, best first.
GEMLET_CXX_API std::vector<std::string> AvailableKernels();
// Empty when the options are valid, else what is wrong.
GEMLET_CXX_API std::string Validate(const KernelOptions& options);
GEMLET_CXX_API const char* MemoryActionName(MemoryAction action);
// Empty when the options are valid, else what is wrong ("top-p must be in (0, 1]"): for callers that
// check flags before loading a model. Generate and Send check the same and fail with kInvalidArgument.
GEMLET_CXX_API std::string Validate(const GenerateOptions& options);
GEMLET_CXX_API const char* StopReasonName(StopReason reason);

// A tokenizer on its own, without a model: from a GGUF file's tokenizer.ggml.* metadata, a Hugging
// Face tokenizer.json, or a SentencePiece tokenizer.model (tokenizer_config.json and config.json
// are read from beside the file). Thread-safe.
class GEMLET_CXX_API TextTokenizer {
 public:
  static Result<std::unique_ptr<TextTokenizer>> Open(const std::string& path);
  ~TextTokenizer();
  TextTokenizer(const TextTokenizer&) = delete;
  TextTokenizer& operator=(const TextTokenizer&) = delete;

  std::vector<int32_t> Encode(std::string_view text, const TokenizeOptions& options = {}) const;
  std::string Decode(std::span<const int32_t> tokens) const;
  std::string Piece(int32_t token) const;  // the vocabulary's piece ("▁the", "<0x0A>"); "" out of range
  int vocab_size() const;

  struct Impl;
  explicit TextTokenizer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- LoRA adapters ----

// A LoRA adapter for one engine's model, in llama.cpp's GGUF adapter format (convert_lora_to_gguf.py,
// or `gemlet convert-lora` from a PEFT folder). Immutable and shared: any number of sessions run with
// any set of adapters (Session::SetAdapters), applied unmerged on the base weights, which stay as
// they are: switching adapters between two requests loads and merges nothing.
class GEMLET_CXX_API Adapter {
 public:
  ~Adapter();
  Adapter(const Adapter&) = delete;
  Adapter& operator=(const Adapter&) = delete;

  const std::string& path() const;
  const std::string& name() const;    // general.name, else the file's name without .gguf
  const std::string& sha256() const;  // of the file: what cached K/V and saved sessions are keyed by
  float alpha() const;                // adapter.lora.alpha; 0 when the file has none (scale 1)
  int rank() const;                   // the largest rank of its pairs
  int projections() const;            // the (layer, projection) pairs it changes
  uint64_t bytes() const;             // its tensors as stored (what it adds to memory, packed or not)

  struct Impl;
  Impl& impl() const { return *impl_; }
  explicit Adapter(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

class GEMLET_CXX_API Engine {
 public:
  // Maps a GGUF file; its weights are read in place and shared by every session.
  static Result<std::shared_ptr<Engine>> Load(const std::string& path, const EngineOptions& options);
  // With the default options. (An overload, not a default argument: the options' temporary is then
  // built inside the library, where GCC 12 does not misreport its strings as uninitialized.)
  static Result<std::shared_ptr<Engine>> Load(const std::string& path);
  // A GGUF stored inside another file (an uncompressed asset in an Android APK): the `length` bytes
  // from `offset` of the open descriptor `fd`. The engine duplicates fd; the caller may close it.
  static Result<std::shared_ptr<Engine>> LoadFromFd(int fd, uint64_t offset, uint64_t length,
                                                    const EngineOptions& options);
  static Result<std::shared_ptr<Engine>> LoadFromFd(int fd, uint64_t offset, uint64_t length);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelInfo& info() const;
  const EngineOptions& options() const;

  // Tokenizer (thread-safe).
  std::vector<int32_t> Tokenize(std::string_view text, const TokenizeOptions& options = {}) const;
  std::string Detokenize(std::span<const int32_t> tokens) const;
  std::string TokenText(int32_t token) const;  // one token's piece as text ("" when out of range)
  int32_t bos_token() const;                   // -1 when the vocabulary has none
  bool IsEndOfGeneration(int32_t token) const;
  // The model's chat format applied to messages, as text with its markup (tokenize it with
  // parse_special, and add_special as the tokenizer adds BOS: the text carries none).
  // add_generation_prompt: end with the opening of the model's turn.
  Result<std::string> ApplyChatTemplate(std::span<const Message> messages, bool add_generation_prompt = true) const;
  // The same prompt as tokens, BOS first, ready for Session::Complete: the markup becomes its
  // control tokens, message content is tokenized with special-token parsing off (text such as
  // "<end_of_turn>" in a message cannot end a turn). Errors name a bad role, order or tool.
  Result<std::vector<int32_t>> TokenizeChat(std::span<const Message> messages, const ChatOptions& options = {}) const;

  // ---- images and audio (EngineOptions::mmproj_path) ----
  // An image file's bytes (PNG, JPEG, WebP or HEIC; EXIF orientation applied) decoded, preprocessed
  // as the model's HF processor does and encoded by the vision tower: its soft tokens, for messages'
  // content parts or a Prompt. An error names what is wrong with an image that cannot be decoded or
  // is too large (50 M pixels); kInvalidArgument for an engine without a vision tower.
  Result<std::shared_ptr<const EncodedMedia>> EncodeImage(std::span<const uint8_t> bytes,
                                                          const ImageOptions& options = {}) const;
  Result<std::shared_ptr<const EncodedMedia>> EncodeImageFile(const std::string& path,
                                                              const ImageOptions& options = {}) const;
  // Pixels preprocessed already, as HF's processor gives them (checks against HF: `gemlet logits
  // --pixel-values`). Gemma 3: [3, S, S], channels first, normalised. Gemma 4: patches
  // [rows, 3 * p * p] with their positions [rows, 2] ((column, row); (-1, -1) for padding rows).
  Result<std::shared_ptr<const EncodedMedia>> EncodeImagePixels(std::span<const float> values,
                                                                std::span<const int32_t> positions = {}) const;
  // An audio file's bytes (WAV, FLAC, Ogg Opus or Vorbis, MP3; not AAC), mixed to mono, resampled to
  // the model's rate and turned into log-mel features as the model's HF feature extractor does, then
  // encoded by the audio tower. A clip is at most the model's 30 s: a longer one is an error.
  Result<std::shared_ptr<const EncodedMedia>> EncodeAudio(std::span<const uint8_t> bytes) const;
  Result<std::shared_ptr<const EncodedMedia>> EncodeAudioFile(const std::string& path) const;
  // Samples straight from a microphone callback: `channels` interleaved floats in [-1, 1] per frame
  // at sample_rate (any rate: resampled).
  Result<std::shared_ptr<const EncodedMedia>> EncodeAudioPcm(std::span<const float> samples, int sample_rate,
                                                             int channels = 1) const;
  // A clip of any length up to options.max_seconds (10 minutes by default) in pieces the model hears
  // one at a time: each at most the model's 30 s, cut at the quietest moment of the window's last
  // 5 s, so a piece ends in a pause between words unless there was none (the rule:
  // src/media/audio_split.h). In order, covering the clip without gaps or overlaps; a clip within
  // the window is one piece, EncodeAudio's. Longer than max_seconds: kTooLarge.
  Result<std::vector<AudioPiece>> EncodeAudioPieces(std::span<const uint8_t> bytes, const AudioOptions& options = {}) const;
  Result<std::vector<AudioPiece>> EncodeAudioPiecesFile(const std::string& path, const AudioOptions& options = {}) const;
  Result<std::vector<AudioPiece>> EncodeAudioPiecesPcm(std::span<const float> samples, int sample_rate, int channels = 1,
                                                       const AudioOptions& options = {}) const;
  // Log-mel features computed already, as HF's feature extractor gives them: [frames, mels], and a
  // mask of valid frames (1; empty: every frame valid). Checks from outside (`gemlet logits
  // --audio-features`).
  Result<std::shared_ptr<const EncodedMedia>> EncodeAudioFeatures(std::span<const float> features,
                                                                  std::span<const uint8_t> mask = {}) const;
  // Text and media with no chat format (a raw prompt): text parts tokenized as Tokenize does (BOS
  // first when options.add_special), each media part expanded as the model's processor places it.
  Result<Prompt> TokenizePrompt(std::span<const ContentPart> parts, const TokenizeOptions& options = {}) const;
  // The token a prompt holds where an image's (a clip's) soft tokens go: one per soft token, between
  // the markup TokenizePrompt writes. An error when the vocabulary has none.
  Result<int32_t> MediaToken(MediaKind kind) const;
  // TokenizeChat with the messages' media parts placed (Message::parts).
  Result<Prompt> ChatPrompt(std::span<const Message> messages, const ChatOptions& options = {}) const;

  // Whether options.response_format (and tool_choice) is one Generate accepts on this model (a supported schema,
  // and room for its shortest output in max_tokens, or n_ctx when max_tokens <= 0): servers answer
  // 400 before queueing. The first call builds the vocabulary's tables (about 0.2 s for 262k tokens).
  Status CheckResponseFormat(const GenerateOptions& options, int n_ctx) const;

  // Threads every session of this engine may use at most from its next call on (the thermal
  // governor lowers it); 0 lifts the limit. Thread-safe.
  void SetThreadLimit(int n_threads);
  int thread_limit() const;
  // The kernels every session of this engine runs from its next call on (a call in progress keeps
  // the ones it started with). kInvalidArgument for an unknown name or a bad value. Thread-safe.
  Status SetKernelOptions(const KernelOptions& options);
  KernelOptions kernel_options() const;
  // The name of the kernels in use now ("AVX3_DL", "ref", ...): "auto" resolved.
  std::string kernels_name() const;

  // Maps a LoRA adapter for this engine's model. Refused with one line when the file is not a LoRA
  // adapter, was made for another architecture, names tensors the model lacks or shapes that do
  // not fit (an adapter for another base), names another base model (general.base_model.0.name
  // against the model's names; any_base: load it anyway), or adapts what gemlet does not
  // (embeddings, experts).
  Result<std::shared_ptr<const Adapter>> LoadAdapter(const std::string& path, bool any_base = false) const;

  // Packs the weights into the layout the kernels read (done on first use otherwise), or, mapped
  // from the packed-weight cache, reads them in from disk: an app calls it while the user types the
  // first message. A set `stop` ends it after the matrix in hand; what is
  // left is packed on first use. Thread-safe; uses n_threads threads.
  void PrepareWeights(const std::atomic<bool>* stop = nullptr, int n_threads = 1) const;
  MemoryUsage MeasureMemory() const;
  // K and V bytes a decode step at position pos reads from a cache of this type (with
  // ModelInfo::decode_weight_bytes: the traffic a bandwidth bound divides).
  uint64_t DecodeKvBytesAt(KvCacheType type, int64_t pos) const;

  // Platform signals (thread-safe). They are recorded here; the memory and thermal governors act
  // on them. OnMemoryWarning has idle conversations give back memory at once (busy ones at their
  // next turn); OnBackground saves every conversation that has a ConversationOptions::state_path.
  void SetThermalState(ThermalState state);
  ThermalState thermal_state() const;
  // What the thermal governor sees and does now (thread-safe).
  using ThermalStatus = gemlet::ThermalStatus;
  ThermalStatus thermal_status() const;
  void OnMemoryWarning(MemoryPressure level);
  MemoryPressure memory_pressure() const;  // the latest level, until OnForeground or kNone
  void OnBackground();
  void OnForeground();
  bool in_background() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- Session ----

class GEMLET_CXX_API Session {
 public:
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<Engine> engine, const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Evaluates tokens after those the cache holds. `logits` (nullable) receives the last position's
  // n_vocab logits, or every position's ([n, n_vocab], row-major) when all_logits. A Cancel() from
  // another thread stops it between layers with kCancelled; what finished stays cached.
  Status Evaluate(std::span<const int32_t> tokens, float* logits = nullptr, bool all_logits = false);
  // The same with images or audio among the tokens (Engine::ChatPrompt, TokenizePrompt): each span's
  // rows take its media's embeddings. kInvalidArgument for media the model cannot take.
  Status Evaluate(const Prompt& prompt, float* logits = nullptr, bool all_logits = false);
  // Evaluates `prompt` (tokens after the cache's), then samples up to options.max_tokens tokens,
  // streaming their text. Stops at the model's end of turn.
  Result<Reply> Generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                         const StreamCallback& on_text = {});
  Result<Reply> Generate(const Prompt& prompt, const GenerateOptions& options, const StreamCallback& on_text = {});

  // Prefix reuse across requests: generates for `prompt` as a fresh session would, keeping the
  // longest prefix of it the cache already holds (a request that shares a system prompt, a
  // document or a conversation with the one before skips it) and evaluating only the rest.
  // stats.cached_tokens says how many were reused. What the cache held after that prefix is dropped.
  Result<Reply> Complete(std::span<const int32_t> prompt, const GenerateOptions& options,
                         const StreamCallback& on_text = {});
  // With media: an image counts as cached only where the cache holds the same image (its
  // embeddings, bit for bit) at the same place, so an image is encoded and evaluated once per
  // conversation, and another image behind the same placeholders is never taken for it.
  Result<Reply> Complete(const Prompt& prompt, const GenerateOptions& options, const StreamCallback& on_text = {});

  // Keeps the first n tokens of the cache (from the start of an image or clip that n would cut: media
  // stays whole). Reset keeps none. Taking back at most rollback_room()
  // tokens evaluates nothing; further back, the kept tokens are evaluated again where
  // sliding-window layers no longer hold what they need.
  Status Truncate(int n);
  int rollback_room() const;
  // Removes tokens [begin, begin + count) from the cache, for apps that manage their own context
  // (Conversation does this itself): the later tokens move down and their cached keys are rotated
  // to their new positions in place, nothing is evaluated again. When sliding-window layers cannot
  // follow (fewer than a window of tokens after the removed ones), the kept tokens are evaluated
  // again instead. Returns the tokens evaluated again (0: shifted in place).
  Result<int> Discard(int begin, int count);

  // Suspend and resume (an app sent to the background, a CLI chat closed): the tokens and the KV
  // rows the cache holds go to a versioned file with a checksum, bound to this model file (its
  // identity: size, time, a hash of its ends); LoadState maps them back with nothing evaluated, so
  // the next logits are the same bits as before the save. A truncated, corrupted or other-model
  // file is refused with one line and the session stays as it was. The file holds what the cache
  // held: the conversation's text, in plain bytes; keep it where the app keeps its private data.
  Status SaveState(const std::string& path) const;
  Status LoadState(const std::string& path);
  void Reset();
  // Thread-safe: stops the Evaluate or Generate running on another thread within one layer's time.
  void Cancel();

  // Runs the next calls with these LoRA adapters (empty: the base model), their deltas added in
  // this order. The cached K/V were computed under the adapters before them: when the set, order
  // or a scale changes, the cache is emptied (Complete then evaluates the whole prompt again), so a
  // request never reads another adapter's K/V. Setting the same set again keeps the cache.
  // kInvalidArgument for an adapter of another engine or a non-finite scale.
  Status SetAdapters(std::span<const AdapterUse> adapters);
  const std::vector<AdapterUse>& adapters() const;

  int n_past() const;
  int n_ctx() const;
  const std::vector<int32_t>& tokens() const;  // what the cache holds
  const std::vector<MediaSpan>& media() const;  // the images and audio among them
  MemoryStats memory() const;
  MemoryPlan memory_plan() const;
  const Engine& engine() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- many requests at once ----

// Generates for several sessions at once, for servers: each Step() gives every running request its
// next token, or the next chunk of its prompt, in one forward over all of them, so the weights are
// read once per step for every request (on a CPU, that is where a server's throughput comes from).
// Each request behaves as Session::Complete would on its own session, bit for bit, whatever shares
// its steps (KernelOptions::batch_invariant, the default: docs/determinism.md); a seeded sampled
// answer too.
// One thread submits and steps (a server's scheduler); Cancel may come from any thread.
class GEMLET_CXX_API BatchDecoder {
 public:
  static Result<std::unique_ptr<BatchDecoder>> Create(std::shared_ptr<Engine> engine, const BatchOptions& options = {});
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  // Starts a request: `session` keeps the longest prefix of `prompt` its cache holds (prefix reuse
  // across requests) and evaluates the rest in the coming steps. The session must belong to this
  // engine, run no other request, and outlive this one; on_text runs on the thread calling Step.
  // Returns the request's id (> 0); kInvalidArgument when max_requests are running.
  Result<int> Submit(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options,
                     StreamCallback on_text = {});
  // The same with images or audio in the prompt (Engine::ChatPrompt), as Session::Complete(Prompt)
  // would: media counts as cached only where the cache holds the same media at the same place. The
  // prompt up to the end of its last image is evaluated in a step of its own on the request's
  // session (each image's rows in one chunk); the rest joins the batched steps.
  Result<int> Submit(Session& session, const Prompt& prompt, const GenerateOptions& options, StreamCallback on_text = {});
  struct Finished {
    int id = 0;
    Result<Reply> reply;
  };
  // One step of every running request. Returns those that finished in it (each exactly once): a
  // failed evaluation fails only its own request.
  std::vector<Finished> Step();
  // Thread-safe: the request ends at the next Step with StopReason::kCancelled (its partial reply).
  void Cancel(int id);
  int running() const;
  int last_step_tokens() const;  // tokens the last Step evaluated in its forward

 private:
  struct Impl;
  explicit BatchDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- memory budget ----

// What a session with these options would cost (SessionCost).
GEMLET_CXX_API SessionCost PlanSession(const Engine& engine, const SessionOptions& options);

// The budget when none is given: the cgroup's memory limit (memory.max, memory.limit_in_bytes) if
// there is one, else half of MemAvailable; 0 if neither is known.
GEMLET_CXX_API uint64_t DefaultMemoryBudget();

// The session options that fit `budget_bytes`: `wanted` if it fits; else the context is kept
// longest: at each context (halving down to 256 tokens) a shorter prompt chunk and a lower KV
// precision (q8_0: half of f16's bytes, then q4_0: 28%, where the model's head sizes allow) are
// tried before a smaller context. `note` (nullable) says what was changed ("n_ctx 4096 -> 1024, KV q8_0");
// `floor_bytes` (nullable) receives the least this model needs (n_ctx 256, the smallest KV). An error
// (kInvalidArgument) when even that does not fit: the message gives the floor and the budget.
GEMLET_CXX_API Result<SessionOptions> FitToBudget(const Engine& engine, uint64_t budget_bytes, SessionOptions wanted,
                                                  std::string* note = nullptr, uint64_t* floor_bytes = nullptr);
// The same before loading, so a model that cannot fit costs nothing: the file's header and tensor
// table are read (mapped: clean pages), the tokenizer is not built but counted (by its vocabulary's
// size), and the packed weights count only without a cache folder (engine_options.cache_dir).
GEMLET_CXX_API Result<SessionOptions> FitFileToBudget(const std::string& path, const EngineOptions& engine_options,
                                                      uint64_t budget_bytes, SessionOptions wanted,
                                                      std::string* note = nullptr, uint64_t* floor_bytes = nullptr);
// "300M", "1.5G", "512K", "1048576" (bytes; K/M/G/T are powers of 1024, with or without iB); 0 on error.
GEMLET_CXX_API uint64_t ParseByteSize(std::string_view text);

// ---- Conversation ----

class GEMLET_CXX_API Conversation {
 public:
  static Result<std::unique_ptr<Conversation>> Create(std::shared_ptr<Engine> engine,
                                                      const ConversationOptions& options = {});
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  // Adds a user message and streams the answer, which joins the conversation. Earlier turns are not
  // evaluated again (the KV cache holds them). When the conversation would not leave room for the
  // answer (max_tokens, at most half the context), its oldest user/assistant pairs are dropped and
  // the cache shifted over them (stats.dropped_*): a chat goes on past the context. On an error, or
  // a cancel before the answer began, the conversation is as it was before the call but for the
  // messages dropped.
  Result<Reply> Send(std::string_view user_text, const GenerateOptions& options = {},
                     const StreamCallback& on_text = {});
  // A user message with images or audio (Engine::EncodeImage), in order among its text parts. Each
  // is evaluated once and stays in the cache with its turn. Save() records media by content hash:
  // SaveState keeps them (the KV state holds their embeddings), a plain Save/Load does not (a note
  // takes their place).
  Result<Reply> Send(std::span<const ContentPart> parts, const GenerateOptions& options = {},
                     const StreamCallback& on_text = {});
  // Thread-safe: stops the Send running on another thread, in the prompt's evaluation too.
  void Cancel();

  void SetSystem(std::string system);
  void SetThinking(bool on);
  void SetSummarizeDropped(bool on);
  // The summary of dropped turns the conversation carries now ("" when none): the preface of the
  // user turn that carries it, or the one waiting for the next user turn.
  std::string summary() const;
  void Reset();  // forgets the messages (and the summary), keeps the system message
  // The next turns run with these LoRA adapters (Session::SetAdapters): when the set changes, the
  // next Send evaluates the conversation again under the new ones (nothing cached is reused).
  Status SetAdapters(std::span<const AdapterUse> adapters);
  std::vector<AdapterUse> adapters() const;
  std::vector<Message> messages() const;  // user and assistant turns
  // The messages as JSON (portable: any model can load them; the next Send evaluates them).
  Status Save(const std::string& path) const;
  Status Load(const std::string& path);
  // Replaces the messages (user and assistant turns) with ones kept elsewhere (the history store),
  // as Load does from a file: evaluated on the next Send. kInvalidArgument for another role.
  Status SetMessages(std::vector<Message> messages);
  // The whole state, KV cache included, as Session::SaveState: resumed with nothing evaluated.
  Status SaveState(const std::string& path) const;
  Status LoadState(const std::string& path);

  int n_past() const;  // tokens the conversation's KV cache holds
  int n_ctx() const;
  MemoryStats memory() const;
  MemoryPlan memory_plan() const;

  struct Impl;

 private:
  explicit Conversation(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemlet

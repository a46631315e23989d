// The public C++ API (include/gemlet/gemlet.hpp) over the runtime: the value types' names, logging,
// TextTokenizer and Engine (loading, tokenizing, kernels, the platform signals an app passes in).
// Sessions are in session.cc, conversations in conversation.cc; policy is the runtime's.
#include "gemlet/gemlet.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "api/api_internal.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "runtime/budget.h"
#include "runtime/chat.h"
#include "runtime/drafting.h"
#include "runtime/generate.h"
#include "runtime/json_constraint.h"
#include "runtime/memory_governor.h"
#include "runtime/memory_pressure.h"
#include "runtime/memory_report.h"
#include "runtime/prefix_reuse.h"
#include "runtime/session.h"
#include "runtime/thermal.h"
#include "runtime/tool_calls.h"

namespace gemlet {

const char* Version() { return "0.1.0"; }

const char* ThermalStateName(ThermalState state) {
  switch (state) {
    case ThermalState::kNominal: return "nominal";
    case ThermalState::kFair: return "fair";
    case ThermalState::kSerious: return "serious";
    case ThermalState::kCritical: return "critical";
  }
  return "?";
}

const char* MemoryPressureName(MemoryPressure level) {
  switch (level) {
    case MemoryPressure::kNone: return "none";
    case MemoryPressure::kRunningModerate: return "running-moderate";
    case MemoryPressure::kRunningLow: return "running-low";
    case MemoryPressure::kRunningCritical: return "running-critical";
    case MemoryPressure::kUiHidden: return "ui-hidden";
    case MemoryPressure::kBackground: return "background";
    case MemoryPressure::kModerate: return "moderate";
    case MemoryPressure::kComplete: return "complete";
  }
  return "?";
}

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfTurn: return "end of turn";
    case StopReason::kStopString: return "stop string";
    case StopReason::kMaxTokens: return "max tokens";
    case StopReason::kContextFull: return "context full";
    case StopReason::kCancelled: return "cancelled";
  }
  return "?";
}

// ---- logging ----

namespace {
std::mutex& LogMutex() {
  static std::mutex m;
  return m;
}
LogCallback& LogTarget() {
  static LogCallback callback;
  return callback;
}
}  // namespace

void SetFootprintCallback(FootprintCallback callback) { runtime::SetFootprintReader(std::move(callback)); }

void SetLogCallback(LogCallback callback) {
  std::lock_guard<std::mutex> lock(LogMutex());
  LogTarget() = std::move(callback);
}

namespace api {
void Log(int level, const std::string& message) {
  std::lock_guard<std::mutex> lock(LogMutex());
  if (LogTarget()) {
    LogTarget()(level, message);
  } else if (level >= 2) {
    std::fprintf(stderr, "gemlet: %s\n", message.c_str());
  }
}

Engine::Impl::Kernels ResolveKernels(const KernelOptions& o) {
  Engine::Impl::Kernels k;
  k.options = o;
  k.table = KernelsNamed(o.kernels);
  return k;
}
}  // namespace api

// ---- TextTokenizer ----

struct TextTokenizer::Impl {
  std::unique_ptr<GgufFile> gguf;  // keeps a GGUF's strings alive for the tokenizer
  std::unique_ptr<Tokenizer> tokenizer;
};

TextTokenizer::TextTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TextTokenizer::~TextTokenizer() = default;

Result<std::unique_ptr<TextTokenizer>> TextTokenizer::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::Error("cannot open '" + path + "'");
  char magic[4] = {};
  const size_t got = std::fread(magic, 1, 4, f);
  std::fclose(f);
  if (got == 4 && std::string_view(magic, 4) == "GGUF") {
    ASSIGN_OR_RETURN(impl->gguf, GgufFile::Open(path));
    auto tok = Tokenizer::FromGguf(*impl->gguf);
    if (!tok.ok()) return tok.status().WithContext(path);
    impl->tokenizer = std::make_unique<Tokenizer>(std::move(tok).value());
  } else {
    ASSIGN_OR_RETURN(TokenizerMetadata meta, ReadHfTokenizerFile(path, /*keep_merges=*/true));
    auto vocab = VocabFromMetadata(meta);
    if (!vocab.ok()) return vocab.status().WithContext(path);
    impl->tokenizer = std::make_unique<Tokenizer>(std::move(vocab).value());
  }
  return std::make_unique<TextTokenizer>(std::move(impl));
}

namespace {
std::vector<int32_t> Encode(const Tokenizer& tok, std::string_view text, const TokenizeOptions& options) {
  EncodeOptions e;
  e.add_bos = options.add_special && tok.vocab().add_bos();
  e.add_eos = options.add_special && tok.vocab().add_eos();
  e.parse_special = options.parse_special;
  return tok.Encode(text, e);
}
}  // namespace

std::vector<int32_t> TextTokenizer::Encode(std::string_view text, const TokenizeOptions& options) const {
  return gemlet::Encode(*impl_->tokenizer, text, options);
}
std::string TextTokenizer::Decode(std::span<const int32_t> tokens) const { return impl_->tokenizer->Decode(tokens); }
std::string TextTokenizer::Piece(int32_t token) const { return std::string(impl_->tokenizer->TokenPiece(token)); }
int TextTokenizer::vocab_size() const { return impl_->tokenizer->vocab_size(); }

// ---- Engine ----

namespace {

ModelInfo DescribeModel(const runtime::Engine& engine) {
  ModelInfo info;
  const ModelConfig& c = engine.config();
  info.architecture = c.arch;
  info.name = c.name;
  info.chat_format = runtime::ChatStyleName(engine.chat_style());
  info.n_vocab = c.n_vocab;
  info.n_ctx_train = c.n_ctx_train;
  info.n_layers = c.n_layers;
  info.d_model = c.d_model;
  const GgufFile& gguf = engine.model().gguf();
  for (const GgufTensor& t : gguf.tensors()) info.n_parameters += static_cast<uint64_t>(t.n_elements());
  info.file_bytes = gguf.mapping() ? gguf.mapping()->size() : 0;
  for (const GgufTensor& t : gguf.tensors()) info.tensor_bytes += t.nbytes;
  info.file_type = runtime::FileTypeName(gguf);
  info.decode_weight_bytes = static_cast<uint64_t>(runtime::DecodeWeightBytesPerToken(gguf, c.arch));
  info.prompt_macs_per_token = static_cast<uint64_t>(runtime::PromptMacsPerToken(gguf, c.arch));
  info.load_seconds = engine.load_seconds();
  info.map_seconds = engine.model_map_seconds();
  return info;
}


// The thermal zone the governor reads, found before the model loads so that a wrong name fails fast.
Result<std::optional<runtime::ThermalZone>> FindZone(const ThermalOptions& t) {
  if (!t.enabled) return std::optional<runtime::ThermalZone>();
  ASSIGN_OR_RETURN(std::optional<runtime::ThermalZone> zone, runtime::FindThermalZone(t.sysfs_root, t.zone));
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.1f", t.limit_c);
  api::Log(1, zone ? "thermal governor: zone " + zone->type + " (" + zone->temp_path + "), limit " + limit + " C"
                   : "thermal governor: no skin, case or battery zone in " + t.sysfs_root +
                         "; it acts on the app's thermal levels only");
  return zone;
}

Result<std::unique_ptr<Engine::Impl>> Finish(Result<std::shared_ptr<const runtime::Engine>> loaded,
                                             const EngineOptions& o, std::optional<runtime::ThermalZone> zone) {
  if (!loaded.ok()) return loaded.status();
  // Loading maps and validates the file in one step; the callback hears the end of it and may still
  // refuse the engine (an app whose user went away meanwhile).
  if (o.progress && !o.progress(1.0f)) return Status::Error(StatusCode::kCancelled, "loading cancelled");
  auto impl = std::make_unique<Engine::Impl>();
  impl->runtime = std::move(loaded).value();
  impl->options = o;
  impl->info = DescribeModel(*impl->runtime);
  impl->kernels = api::ResolveKernels(o.kernels);
  RETURN_IF_ERROR(api::LoadTowers(*impl));
  runtime::ThermalParams thermal;
  thermal.limit_c = o.thermal.limit_c;
  impl->thermal_monitor = std::make_shared<runtime::ThermalMonitor>(o.thermal.enabled, thermal, std::move(zone));
  // The packed-weight cache: mapped read-only, the packed weights are clean file pages (what a phone
  // does not count against the app), and a second start packs nothing.
  const Engine::Impl::Kernels& k = impl->kernels;
  if (!o.cache_dir.empty() && k.options.pack_weights && k.table->packed_layout(DType::kQ4_0) != nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    const int threads = runtime::ResolveThreads(o.n_threads);
    auto used = impl->runtime->UsePackedCache(o.cache_dir, *k.table, threads);
    impl->info.packed_cache_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (used.ok()) {
      impl->info.packed_cache = *used == PackedCacheOutcome::kLoaded ? "loaded" : "built";
    } else {
      impl->info.packed_cache = "none";
      api::Log(2, "packed-weight cache: " + used.message() + "; packing in memory instead");
    }
  }
  return impl;
}

Status CheckOptions(const EngineOptions& o) {
  if (o.n_threads < 0) return Status::Error(StatusCode::kInvalidArgument, "n_threads must be >= 0");
  if (std::string err = Validate(o.kernels); !err.empty()) return Status::Error(StatusCode::kInvalidArgument, err);
  if (!(o.thermal.limit_c >= 20 && o.thermal.limit_c <= 100)) {
    return Status::Error(StatusCode::kInvalidArgument, "the thermal limit must be in [20, 100] C");
  }
  return Status::Ok();
}


}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::shared_ptr<Engine>> Engine::Load(const std::string& path) { return Load(path, EngineOptions()); }

Result<std::shared_ptr<Engine>> Engine::Load(const std::string& path, const EngineOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (options.progress && !options.progress(0.0f)) return Status::Error(StatusCode::kCancelled, "loading cancelled");
  ASSIGN_OR_RETURN(std::optional<runtime::ThermalZone> zone, FindZone(options.thermal));
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Finish(runtime::Engine::Load(path), options, std::move(zone)));
  return std::shared_ptr<Engine>(new Engine(std::move(impl)));
}

Result<std::shared_ptr<Engine>> Engine::LoadFromFd(int fd, uint64_t offset, uint64_t length) {
  return LoadFromFd(fd, offset, length, EngineOptions());
}

Result<std::shared_ptr<Engine>> Engine::LoadFromFd(int fd, uint64_t offset, uint64_t length,
                                                   const EngineOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (fd < 0) return Status::Error(StatusCode::kInvalidArgument, "invalid file descriptor " + std::to_string(fd));
  if (options.progress && !options.progress(0.0f)) return Status::Error(StatusCode::kCancelled, "loading cancelled");
  ASSIGN_OR_RETURN(std::optional<runtime::ThermalZone> zone, FindZone(options.thermal));
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                   Finish(runtime::Engine::LoadRange(fd, offset, length), options, std::move(zone)));
  return std::shared_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }
const EngineOptions& Engine::options() const { return impl_->options; }

std::vector<int32_t> Engine::Tokenize(std::string_view text, const TokenizeOptions& options) const {
  return gemlet::Encode(impl_->runtime->tokenizer(), text, options);
}

std::string Engine::Detokenize(std::span<const int32_t> tokens) const {
  return impl_->runtime->tokenizer().Decode(tokens);
}

std::string Engine::TokenText(int32_t token) const {
  return impl_->runtime->tokenizer().Decode(std::span<const int32_t>(&token, 1));
}

int32_t Engine::bos_token() const { return impl_->runtime->tokenizer().bos_id(); }
bool Engine::IsEndOfGeneration(int32_t token) const { return impl_->runtime->IsEndOfGeneration(token); }

void Engine::PrepareWeights(const std::atomic<bool>* stop, int n_threads) const {
  const Impl::Kernels k = impl_->CurrentKernels();
  KernelContext ctx(std::max(1, n_threads), k.table, k.options);
  impl_->runtime->model().PrepareWeights(ctx, stop);
}

std::string MemoryUsage::ToString() const { return runtime::DescribeMemoryUsage(*this); }

MemoryUsage Engine::MeasureMemory() const {
  MemoryUsage u = runtime::MeasureMemory(impl_->runtime->model());
  u.tokenizer_bytes = impl_->runtime->tokenizer().Bytes();
  return u;
}

ProcessMemory MeasureProcessMemory() {
  ProcessMemory p;
  p.rss_bytes = runtime::CurrentRssBytes();
  p.anon_bytes = runtime::AnonBytes();
  p.peak_rss_bytes = runtime::PeakRssBytes();
  return p;
}

uint64_t Engine::DecodeKvBytesAt(KvCacheType type, int64_t pos) const {
  return static_cast<uint64_t>(runtime::DecodeKvBytesAt(impl_->runtime->model(), runtime::KvDType(type), pos));
}

Result<std::string> Engine::ApplyChatTemplate(std::span<const Message> messages, bool add_generation_prompt) const {
  const std::vector<Message> chat(messages.begin(), messages.end());
  runtime::ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.add_bos = false;
  return runtime::RenderChat(impl_->runtime->chat_style(), chat, o);
}


Result<std::vector<int32_t>> Engine::TokenizeChat(std::span<const Message> messages, const ChatOptions& options) const {
  if (messages.empty()) return Status::Error(StatusCode::kInvalidArgument, "the conversation is empty");
  for (const Message& m : messages) {
    for (const ContentPart& part : m.parts) {
      if (part.media) {
        return Status::Error(StatusCode::kInvalidArgument, "the messages hold images or audio: use ChatPrompt");
      }
    }
  }
  const std::vector<Message> chat(messages.begin(), messages.end());
  runtime::ChatRenderOptions o;
  static_cast<ChatOptions&>(o) = options;
  return runtime::EncodeChat(*impl_->runtime, chat, o);
}

Status Engine::CheckResponseFormat(const GenerateOptions& options, int n_ctx) const {
  return impl_->Constraint(options, n_ctx).status();
}

void Engine::SetThreadLimit(int n_threads) { impl_->thread_limit.store(std::max(0, n_threads)); }
int Engine::thread_limit() const { return impl_->thread_limit.load(); }

std::vector<std::string> AvailableKernels() { return KernelNames(); }

std::string Validate(const KernelOptions& o) {
  if (KernelsNamed(o.kernels) == nullptr) {
    std::string names;
    for (const std::string& n : KernelNames()) names += ", " + n;
    return "unknown kernels '" + o.kernels + "' (this CPU runs: auto" + names + ")";
  }
  if (o.prefetch_bytes < KernelOptions::kPrefetchAuto || o.prefetch_bytes > (1 << 20)) {
    return "prefetch bytes must be in [0, 1048576], or -1 for this CPU's choice";
  }
  return std::string();
}

Status Engine::SetKernelOptions(const KernelOptions& options) {
  if (std::string err = Validate(options); !err.empty()) return Status::Error(StatusCode::kInvalidArgument, err);
  std::lock_guard<std::mutex> lock(impl_->kernels_mutex);
  impl_->kernels = api::ResolveKernels(options);
  return Status::Ok();
}

KernelOptions Engine::kernel_options() const { return impl_->CurrentKernels().options; }
std::string Engine::kernels_name() const { return impl_->CurrentKernels().table->name; }

void Engine::SetThermalState(ThermalState state) {
  // Apps may pass the state on every OS callback; the log hears changes only.
  if (impl_->thermal.exchange(state) != state) api::Log(1, std::string("thermal state: ") + ThermalStateName(state));
  impl_->thermal_monitor->SetLevel(static_cast<int>(state));
}
ThermalState Engine::thermal_state() const { return impl_->thermal.load(); }

int ResolveThreadCount(int n_threads) { return runtime::ResolveThreads(n_threads); }

const char* KvCacheTypeName(KvCacheType type) { return KvTypeName(runtime::KvDType(type)); }

bool ParseKvCacheType(std::string_view name, KvCacheType* out) {
  DType t;
  if (!ParseKvType(std::string(name), &t)) return false;
  *out = static_cast<KvCacheType>(t);  // the same values (runtime::KvDType)
  return true;
}

const char* MemoryActionName(MemoryAction action) { return runtime::MemoryActionName(action); }

Engine::ThermalStatus Engine::thermal_status() const {
  return impl_->thermal_monitor->Status(runtime::ResolveThreads(impl_->options.n_threads));
}

MemoryPressure Engine::memory_pressure() const { return impl_->pressure.load(); }

void Engine::OnForeground() {
  impl_->background.store(false);
  impl_->pressure.store(MemoryPressure::kNone);
}
bool Engine::in_background() const { return impl_->background.load(); }

}  // namespace gemlet

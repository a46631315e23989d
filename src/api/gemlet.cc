// The public C++ API (include/gemlet/gemlet.hpp) over the runtime: option translation, the platform
// signals an app passes in, cancellation, and stats. No model logic lives here.
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
#include "runtime/chat.h"
#include "runtime/generate.h"
#include "runtime/json_constraint.h"
#include "runtime/memory_pressure.h"
#include "runtime/memory_report.h"
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

// The public StopReason mirrors the runtime's, value for value.
const char* StopReasonName(StopReason reason) {
  return runtime::StopReasonName(static_cast<runtime::StopReason>(static_cast<int>(reason)));
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
  info.load_seconds = engine.load_seconds();
  info.map_seconds = engine.model_map_seconds();
  return info;
}

Engine::Impl::Kernels ResolveKernels(const KernelOptions& o) {
  Engine::Impl::Kernels k;
  k.options = o;
  k.table = KernelsNamed(o.kernels);
  k.tuning.pack_weights = o.pack_weights;
  k.tuning.prefetch_bytes = o.prefetch_bytes == KernelOptions::kPrefetchAuto ? DefaultDecodePrefetchBytes()
                                                                            : static_cast<size_t>(o.prefetch_bytes);
  k.tuning.vnni_gemm = o.vnni_gemm;
  k.tuning.spin_wait = o.spin_wait;
  return k;
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
  impl->kernels = ResolveKernels(o.kernels);
  runtime::ThermalParams thermal;
  thermal.limit_c = o.thermal.limit_c;
  impl->thermal_monitor = std::make_shared<runtime::ThermalMonitor>(o.thermal.enabled, thermal, std::move(zone));
  // The packed-weight cache: mapped read-only, the packed weights are clean file pages (what a phone
  // does not count against the app), and a second start packs nothing.
  const Engine::Impl::Kernels& k = impl->kernels;
  if (!o.cache_dir.empty() && k.tuning.pack_weights && k.table->packed_layout(DType::kQ4_0) != nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    const int threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  KernelContext ctx(std::max(1, n_threads), k.table, k.tuning);
  impl_->runtime->model().PrepareWeights(ctx, stop);
}

namespace {
runtime::MeasuredMemory ToRuntime(const MemoryUsage& u) {
  runtime::MeasuredMemory m;
  m.rss = u.rss_bytes;
  m.peak_rss = u.peak_rss_bytes;
  m.file_resident = u.model_file_resident_bytes;
  m.on_demand_resident = u.on_demand_resident_bytes;
  m.anon = u.anon_bytes;
  m.packed_mapped = u.packed_mapped_bytes;
  m.packed_anon = u.packed_weight_bytes - u.packed_mapped_bytes;
  m.tokenizer = u.tokenizer_bytes;
  return m;
}
}  // namespace

std::string MemoryUsage::ToString() const { return ToRuntime(*this).ToString(); }

MemoryUsage Engine::MeasureMemory() const {
  const runtime::MeasuredMemory m = runtime::MeasureMemory(impl_->runtime->model());
  MemoryUsage u;
  u.rss_bytes = m.rss;
  u.peak_rss_bytes = m.peak_rss;
  u.model_file_resident_bytes = m.file_resident;
  u.on_demand_resident_bytes = m.on_demand_resident;
  u.anon_bytes = m.anon;
  u.packed_weight_bytes = m.packed_anon + m.packed_mapped;
  u.packed_mapped_bytes = m.packed_mapped;
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
  return static_cast<uint64_t>(runtime::DecodeKvBytesAt(impl_->runtime->model(), api::ToKvType(type), pos));
}

Result<std::string> Engine::ApplyChatTemplate(std::span<const Message> messages, bool add_generation_prompt) const {
  std::vector<runtime::ChatMessage> chat;
  for (const Message& m : messages) chat.push_back({m.role, m.content});
  runtime::ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.add_bos = false;
  return runtime::RenderChat(impl_->runtime->chat_style(), chat, o);
}

namespace {

runtime::ChatMessage ToRuntime(const Message& m) {
  runtime::ChatMessage c{m.role, m.content};
  for (const ToolCall& t : m.tool_calls) c.tool_calls.push_back({t.id, t.name, t.arguments});
  c.reasoning = m.reasoning;
  c.tool_call_id = m.tool_call_id;
  c.name = m.name;
  return c;
}

}  // namespace

Result<std::vector<int32_t>> Engine::TokenizeChat(std::span<const Message> messages, const ChatOptions& options) const {
  if (messages.empty()) return Status::Error(StatusCode::kInvalidArgument, "the conversation is empty");
  std::vector<runtime::ChatMessage> chat;
  for (const Message& m : messages) chat.push_back(ToRuntime(m));
  runtime::ChatRenderOptions o;
  o.add_generation_prompt = options.add_generation_prompt;
  o.enable_thinking = options.thinking;
  o.tools = options.tools;
  ASSIGN_OR_RETURN(o.tool_choice, runtime::ParseToolChoice(options.tool_choice));
  return runtime::EncodeChat(*impl_->runtime, chat, o);
}

Status Engine::CheckResponseFormat(const GenerateOptions& options, int n_ctx) const {
  return api::MakeConstraint(*impl_, options, n_ctx).status();
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
  impl_->kernels = ResolveKernels(options);
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

const char* KvCacheTypeName(KvCacheType type) { return KvTypeName(api::ToKvType(type)); }

bool ParseKvCacheType(std::string_view name, KvCacheType* out) {
  KvType t;
  if (!ParseKvType(std::string(name), &t)) return false;
  *out = t == KvType::kF32 ? KvCacheType::kF32 : t == KvType::kQ8_0 ? KvCacheType::kQ8_0 : t == KvType::kQ4_0 ? KvCacheType::kQ4_0 : KvCacheType::kF16;
  return true;
}

const char* MemoryActionName(MemoryAction action) {
  switch (action) {
    case MemoryAction::kReleasedScratch: return "released scratch";
    case MemoryAction::kDroppedOldTurns: return "dropped old turns";
    case MemoryAction::kLoweredKvPrecision: return "lowered KV precision";
  }
  return "?";
}

Engine::ThermalStatus Engine::thermal_status() const {
  const runtime::ThermalSnapshot s = impl_->thermal_monitor->Snapshot();
  ThermalStatus t;
  t.enabled = s.enabled;
  t.zone = s.zone;
  t.has_reading = s.has_reading;
  t.temperature_c = s.temperature_c;
  t.level = static_cast<ThermalState>(s.level);
  t.work_fraction = s.work_fraction;
  t.throttled = s.throttled;
  const int threads = impl_->options.n_threads > 0 ? impl_->options.n_threads
                                                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const runtime::Throttle plan = runtime::ThrottlePlanner().Plan(s.work_fraction, s.throttled, threads, 512);
  t.threads = plan.threads;
  t.duty = plan.duty;
  t.prefill_chunk = plan.prefill_chunk;
  t.throttled_seconds = s.throttled_seconds;
  t.changes = s.changes;
  return t;
}

namespace {
// The pressure Linux PSI shows now (none without a file, or when it cannot be read). The app's
// warnings are events, handed to each conversation (Conversation::Impl::pending_warning).
runtime::PressureLevel PsiPressure(const Engine::Impl& e) {
  if (e.options.memory_pressure_path.empty() || e.psi_unreadable.load()) return runtime::PressureLevel::kNone;
  Result<runtime::PsiMemory> psi = runtime::ReadPsiMemory(e.options.memory_pressure_path);
  if (!psi.ok()) {
    if (!e.psi_unreadable.exchange(true)) api::Log(1, "memory pressure not watched: " + psi.message());
    return runtime::PressureLevel::kNone;
  }
  return runtime::ClassifyPsi(psi.value());
}
}  // namespace
MemoryPressure Engine::memory_pressure() const { return impl_->pressure.load(); }

void Engine::OnForeground() {
  impl_->background.store(false);
  impl_->pressure.store(MemoryPressure::kNone);
}
bool Engine::in_background() const { return impl_->background.load(); }

// ---- Session ----

namespace {

// The runtime's session options for these; threads default to the engine's (default_threads).
runtime::SessionOptions ToRuntime(const SessionOptions& o, int default_threads) {
  runtime::SessionOptions r;
  r.n_ctx = o.n_ctx;
  r.n_threads = o.n_threads > 0 ? o.n_threads : default_threads;
  r.max_batch = o.max_batch;
  r.rollback_tokens = o.rollback_tokens;
  r.kv_type = api::ToKvType(o.kv_cache_type);
  return r;
}

runtime::SessionOptions ToRuntime(const SessionOptions& o, const Engine& engine) {
  runtime::SessionOptions r = ToRuntime(o, engine.options().n_threads);
  const Engine::Impl::Kernels k = engine.impl().CurrentKernels();
  r.kernels = k.table;
  r.tuning = k.tuning;
  return r;
}

Status CheckSessionOptions(const SessionOptions& o) {
  if (o.n_ctx < 0) return Status::Error(StatusCode::kInvalidArgument, "n_ctx must be >= 0");
  if (o.n_threads < 0) return Status::Error(StatusCode::kInvalidArgument, "n_threads must be >= 0");
  if (o.max_batch <= 0) return Status::Error(StatusCode::kInvalidArgument, "max_batch must be > 0");
  if (o.rollback_tokens < 0) return Status::Error(StatusCode::kInvalidArgument, "rollback_tokens must be >= 0");
  return Status::Ok();
}

}  // namespace

// The translations BatchDecoder (batch_decoder.cc) shares.
namespace api {

Result<DraftSession> MakeDraftSession(const Engine& engine, const SessionOptions& options, const runtime::Session& target) {
  DraftSession d;
  if (!options.draft_model) return d;
  const Engine& draft = *options.draft_model;
  const int n_vocab = engine.info().n_vocab;
  if (draft.info().n_vocab != n_vocab) {
    return Status::Error(StatusCode::kInvalidArgument, "the draft model's vocabulary has " + std::to_string(draft.info().n_vocab) +
                                                           " tokens and the model's " + std::to_string(n_vocab) +
                                                           ": a draft model must share the model's vocabulary");
  }
  if (&draft != &engine) {
    for (int32_t id = 0; id < n_vocab; ++id) {
      if (draft.TokenText(id) != engine.TokenText(id)) {
        return Status::Error(StatusCode::kInvalidArgument, "the draft model's token " + std::to_string(id) + " is '" +
                                                               draft.TokenText(id) + "' and the model's '" + engine.TokenText(id) +
                                                               "': a draft model must share the model's vocabulary");
      }
    }
  }
  SessionOptions o = options;
  o.n_ctx = target.n_ctx();
  o.progress = nullptr;
  runtime::SessionOptions ro = gemlet::ToRuntime(o, draft);
  ro.n_threads = target.n_threads();
  ASSIGN_OR_RETURN(d.session, runtime::Session::Create(draft.impl().runtime, ro));
  d.engine = options.draft_model;
  return d;
}

SamplingParams ToRuntime(const SamplingOptions& s) {
  SamplingParams p;
  p.temperature = s.temperature;
  p.top_k = s.top_k;
  p.top_p = s.top_p;
  p.min_p = s.min_p;
  p.repeat_penalty = s.repeat_penalty;
  p.presence_penalty = s.presence_penalty;
  p.frequency_penalty = s.frequency_penalty;
  p.penalty_last_n = s.repeat_last_n;
  p.seed = s.seed;
  p.logit_bias = s.logit_bias;
  return p;
}

StopReason ToPublic(runtime::StopReason r) {
  switch (r) {
    case runtime::StopReason::kEndOfTurn: return StopReason::kEndOfTurn;
    case runtime::StopReason::kStopString: return StopReason::kStopString;
    case runtime::StopReason::kMaxTokens: return StopReason::kMaxTokens;
    case runtime::StopReason::kContextFull: return StopReason::kContextFull;
    case runtime::StopReason::kCancelled: return StopReason::kCancelled;
  }
  return StopReason::kMaxTokens;
}

// "call:NAME{ARGS}" (Gemma 4's tool-call text) -> {NAME, ARGS as JSON}; text that does not parse
// keeps its name (when it has one) and its raw text as the arguments.
ToolCall ParseToolCall(const std::string& text) {
  if (Result<runtime::ChatToolCall> parsed = runtime::ParseGemma4ToolCall(text); parsed.ok()) {
    return ToolCall{parsed.value().name, parsed.value().arguments};
  }
  ToolCall call;
  const std::string_view t(text);
  const size_t brace = t.find('{');
  if (t.rfind("call:", 0) == 0 && brace != std::string_view::npos) {
    call.name = std::string(t.substr(5, brace - 5));
    call.arguments = std::string(t.substr(brace));
  } else {
    call.arguments = text;
  }
  return call;
}

MemoryStats SessionMemory(const runtime::Session& s) {
  MemoryStats m;
  m.kv_cache_bytes = s.cache().bytes();
  m.kv_cache_resident_bytes = s.cache().ResidentBytes();
  m.activation_bytes = s.activation_bytes();
  return m;
}

Reply ToReply(const runtime::GenerateResult& r, int cached, const runtime::Session& session) {
  Reply reply;
  reply.text = r.text;
  reply.thinking = r.thought;
  for (const std::string& call : r.tool_calls) reply.tool_calls.push_back(ParseToolCall(call));
  reply.tokens = r.tokens;
  for (const runtime::TokenLogprobs& lp : r.logprobs) {
    TokenLogprobs& out = reply.logprobs.emplace_back();
    out.chosen = {lp.token, lp.logprob};
    for (const auto& [token, logprob] : lp.top) out.top.push_back({token, logprob});
  }
  GenerationStats& st = reply.stats;
  st.prompt_tokens = r.prompt_tokens + cached;
  st.cached_tokens = cached;
  st.generated_tokens = static_cast<int>(r.tokens.size());
  st.ttft_seconds = r.prefill_seconds;
  st.prefill_tokens_per_second = r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0;
  st.decode_tokens_per_second =
      r.decode_seconds > 0 && r.tokens.size() > 1 ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds : 0;
  st.stop = ToPublic(r.stop);
  st.draft_steps = r.speculation.steps;
  st.drafted_tokens = r.speculation.drafted;
  st.accepted_tokens = r.speculation.accepted;
  st.memory = SessionMemory(session);
  const runtime::Session::ThermalStepStats& th = session.thermal_stats();
  st.thermal.throttled_steps = th.throttled_steps;
  st.thermal.min_threads = th.min_threads;
  st.thermal.min_duty = th.min_duty;
  st.thermal.min_prefill_chunk = th.min_prefill_chunk;
  st.thermal.paced_seconds = th.paced_seconds;
  return reply;
}

runtime::TextSink ToSink(const StreamCallback& on_text) {
  if (!on_text) return {};
  return [&on_text](std::string_view text, runtime::TextKind kind) {
    const ChunkKind k = kind == runtime::TextKind::kThought    ? ChunkKind::kThinking
                        : kind == runtime::TextKind::kToolCall ? ChunkKind::kToolCall
                                                               : ChunkKind::kText;
    return on_text(k, text);
  };
}

Status CheckGenerateOptions(const GenerateOptions& o) {
  if (std::string err = Validate(o); !err.empty()) return Status::Error(StatusCode::kInvalidArgument, err);
  return Status::Ok();
}

MemoryPlan PlanMemory(const runtime::Session& s, KvType kv_type) {
  runtime::MemoryReport r = runtime::ComputeMemoryReport(s.engine().model(), s.n_ctx(), kv_type, s.ring_spare());
  r.activations = s.activation_bytes();
  MemoryPlan p;
  p.file_bytes = r.file_bytes;
  p.weights_resident_bytes = r.weights_resident;
  p.weights_on_demand_bytes = r.weights_on_demand;
  p.kv_cache_bytes = r.kv_total;
  p.activation_bytes = r.activations;
  p.n_ctx = r.n_ctx;
  p.text = r.ToString();
  return p;
}

runtime::GenerateOptions ToRuntime(const GenerateOptions& o, const std::atomic<bool>* cancel) {
  runtime::GenerateOptions g;
  g.max_tokens = o.max_tokens;
  g.sampling = ToRuntime(o.sampling);
  g.stop_strings = o.stop;
  g.cancel = cancel;
  g.top_logprobs = o.top_logprobs;
  g.max_draft = o.max_draft;
  return g;
}

Result<std::unique_ptr<runtime::TokenConstraint>> MakeConstraint(Engine::Impl& engine, const GenerateOptions& options,
                                                                 int n_ctx) {
  ASSIGN_OR_RETURN(const runtime::ToolChoice choice, runtime::ParseToolChoice(options.tool_choice));
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::TokenConstraint> tool_constraint,
                   runtime::ToolChoiceConstraint(choice, *engine.runtime));
  if (options.response_format.empty()) return tool_constraint;
  std::shared_ptr<const TokenVocabulary> vocab;
  {
    std::lock_guard<std::mutex> lock(engine.token_vocabulary_mutex);
    if (!engine.token_vocabulary) {
      ASSIGN_OR_RETURN(engine.token_vocabulary, runtime::BuildTokenVocabulary(*engine.runtime));
    }
    vocab = engine.token_vocabulary;
  }
  const int max_tokens = options.max_tokens > 0 ? options.max_tokens : n_ctx;
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::GrammarConstraint> c,
                   runtime::GrammarConstraint::ForResponseFormat(options.response_format, std::move(vocab),
                                                                 *engine.runtime, max_tokens));
  // A grammar never lets a special token through, <|tool_call> included: it serves "none" as it is.
  if (c && tool_constraint && choice.mode != runtime::ToolChoice::kNone) {
    return Status::Error(StatusCode::kInvalidArgument, "a required tool_choice and a response_format cannot both constrain one answer");
  }
  if (c) return std::unique_ptr<runtime::TokenConstraint>(std::move(c));
  return tool_constraint;
}

Result<size_t> KeepCachedPrefix(runtime::Session& session, std::span<const int32_t> prompt) {
  const std::vector<int32_t>& held = session.history();
  size_t common = 0;
  while (common < held.size() && common < prompt.size() && held[common] == prompt[common]) ++common;
  // At least the last prompt token is evaluated: its logits pick the first answer token.
  if (common == prompt.size() && common > 0) --common;
  RETURN_IF_ERROR(session.Truncate(static_cast<int>(common)));
  return common;
}

}  // namespace api

using api::CheckGenerateOptions;
using api::MakeConstraint;
using api::ToReply;
using api::ToSink;
using api::ToRuntime;
using api::SessionMemory;
using api::PlanMemory;

std::string Validate(const GenerateOptions& o) {
  if (std::string err = ToRuntime(o.sampling).Validate(); !err.empty()) return err;
  for (const std::string& s : o.stop) {
    if (s.empty()) return "stop strings must not be empty";
  }
  if (o.max_draft < 0 || o.max_draft > 64) return "max_draft must be in [0, 64]";
  return std::string();
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<Engine> engine, const SessionOptions& options) {
  if (!engine) return Status::Error(StatusCode::kInvalidArgument, "no engine");
  RETURN_IF_ERROR(CheckSessionOptions(options));
  auto impl = std::make_unique<Impl>();
  const runtime::SessionOptions ro = ToRuntime(options, *engine);
  ASSIGN_OR_RETURN(impl->session, runtime::Session::Create(engine->impl().runtime, ro));
  ASSIGN_OR_RETURN(impl->draft, api::MakeDraftSession(*engine, options, *impl->session));
  impl->own_threads = impl->session->n_threads();
  impl->kv_type = ro.kv_type;
  if (options.progress) impl->session->SetProgress(options.progress);
  impl->engine = std::move(engine);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Status Session::Evaluate(std::span<const int32_t> tokens, float* logits, bool all_logits) {
  impl_->BeginCall();
  impl_->session->SetStopFlag(&impl_->cancel);
  Status s = impl_->session->Evaluate(std::vector<int32_t>(tokens.begin(), tokens.end()), logits, all_logits);
  impl_->session->SetStopFlag(nullptr);
  return s;
}

Result<Reply> Session::Generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                const StreamCallback& on_text) {
  RETURN_IF_ERROR(CheckGenerateOptions(options));
  impl_->BeginCall();
  Sampler sampler(ToRuntime(options.sampling), impl_->engine->info().n_vocab);
  const runtime::TextSink sink = ToSink(on_text);
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::TokenConstraint> constraint,
                   MakeConstraint(impl_->engine->impl(), options, impl_->session->n_ctx()));
  runtime::GenerateOptions g = ToRuntime(options, &impl_->cancel);
  g.constraint = constraint.get();
  g.draft_session = impl_->draft.session.get();
  ASSIGN_OR_RETURN(runtime::GenerateResult r,
                   runtime::Generate(*impl_->session, sampler, std::vector<int32_t>(prompt.begin(), prompt.end()), g, sink));
  // The last sampled token is not in the cache yet: evaluate it so that the cache holds the whole
  // exchange and a following Generate continues from it.
  if (!r.pending.empty() && r.stop != runtime::StopReason::kContextFull && r.stop != runtime::StopReason::kCancelled) {
    RETURN_IF_ERROR(impl_->session->Evaluate(r.pending, nullptr, false));
  }
  return ToReply(r, 0, *impl_->session);
}

Result<Reply> Session::Complete(std::span<const int32_t> prompt, const GenerateOptions& options,
                                const StreamCallback& on_text) {
  RETURN_IF_ERROR(CheckGenerateOptions(options));
  if (prompt.empty()) return Status::Error(StatusCode::kInvalidArgument, "the prompt is empty");
  impl_->BeginCall();
  ASSIGN_OR_RETURN(const size_t common, api::KeepCachedPrefix(*impl_->session, prompt));
  ASSIGN_OR_RETURN(Reply reply, Generate(prompt.subspan(common), options, on_text));
  reply.stats.prompt_tokens += static_cast<int>(common);
  reply.stats.cached_tokens = static_cast<int>(common);
  return reply;
}

Status Session::Truncate(int n) { return impl_->session->Truncate(n); }
Status Session::SaveState(const std::string& path) const { return impl_->session->SaveState(path, std::string()); }
Status Session::LoadState(const std::string& path) { return impl_->session->LoadState(path).status(); }
Result<int> Session::Discard(int begin, int count) {
  impl_->BeginCall();
  return impl_->session->Discard(begin, count);
}
void Session::Reset() { impl_->session->Reset(); }
void Session::Cancel() { impl_->cancel.store(true); }
int Session::n_past() const { return impl_->session->n_past(); }
int Session::rollback_room() const { return impl_->session->rollback_room(); }
int Session::n_ctx() const { return impl_->session->n_ctx(); }
const std::vector<int32_t>& Session::tokens() const { return impl_->session->history(); }
MemoryStats Session::memory() const { return SessionMemory(*impl_->session); }
MemoryPlan Session::memory_plan() const { return PlanMemory(*impl_->session, impl_->kv_type); }

const Engine& Session::engine() const { return *impl_->engine; }

// ---- memory budget ----

namespace {

// Weights the kernels will pack into anonymous memory: the packable matrices nothing has packed or
// mapped yet, unless packing is off.
uint64_t PackedInMemoryBytes(const Model& model, const KernelTable& kernels, const KernelTuning& tuning) {
  if (!tuning.pack_weights) return 0;
  uint64_t bytes = 0;
  for (const WeightMatrix& w : model.packed_store().matrices()) {
    const PackedLayout* layout = kernels.packed_layout(w.type);
    if (layout == nullptr || w.packed->bytes() > 0) continue;
    bytes += static_cast<uint64_t>(w.n_out / PackedWeights::kGroupRows) * layout->group_bytes(w);
  }
  return bytes + model.packed_store().PackedBytesInMemory();
}

// A session's cost on a model, all but the baseline.
SessionCost SessionCostOn(const Model& model, const runtime::SessionOptions& ro, uint64_t packed_in_memory) {
  SessionCost c;
  c.kv_bytes = runtime::Session::PlanKvBytes(model, ro);
  c.activation_bytes = runtime::Session::PlanActivationBytes(model, ro);
  c.packed_in_memory_bytes = packed_in_memory;
  return c;
}

// What building the tokenizer adds to anonymous memory, per piece of the vocabulary (measured:
// 41 MiB for Gemma 4's 262,144 pieces, 0.8 MiB for the demo model's 8,192), rounded up.
constexpr uint64_t kTokenizerBytesPerPiece = 170;

auto MiB(uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; }

// The largest context (halving down to 256) and KV precision (then q8_0, where the head sizes
// allow) whose cost fits; else the floor's error.
Result<SessionOptions> FitLoop(const std::function<SessionCost(const SessionOptions&)>& cost, const Model& model,
                               uint64_t budget, SessionOptions wanted, std::string* note, uint64_t* floor_bytes) {
  bool blocks_ok = true;  // block rows hold whole 32-value blocks: every layer's head sizes must be multiples of 32
  for (const KvLayerSpec& s : model.KvLayout()) {
    if (s.source < 0 && (s.head_dim_k % 32 != 0 || s.head_dim_v % 32 != 0)) blocks_ok = false;
  }
  // The wanted precision, then the smaller ones in order (never a larger one than asked for).
  std::vector<KvCacheType> types = {wanted.kv_cache_type};
  if (blocks_ok && (wanted.kv_cache_type == KvCacheType::kF16 || wanted.kv_cache_type == KvCacheType::kF32)) {
    types.push_back(KvCacheType::kQ8_0);
  }
  if (blocks_ok && wanted.kv_cache_type != KvCacheType::kQ4_0) types.push_back(KvCacheType::kQ4_0);
  // The prompt's chunk: its activations (attention scores of a chunk against the whole context)
  // are most of a small model's floor, and a smaller chunk costs only prefill speed.
  const std::vector<int> batches = [&] {
    std::vector<int> b = {wanted.max_batch};
    for (int x : {256, 128, 64}) {
      if (x < b.back()) b.push_back(x);
    }
    return b;
  }();
  SessionOptions floor = wanted;
  floor.n_ctx = std::min(wanted.n_ctx, 256);
  floor.kv_cache_type = types.back();
  floor.max_batch = std::min(batches.back(), floor.n_ctx);
  const SessionCost floor_cost = cost(floor);
  if (floor_bytes != nullptr) *floor_bytes = floor_cost.total();
  if (cost(wanted).total() <= budget) return wanted;
  // The context is kept longest, then the chunk, then the precision.
  for (int n = wanted.n_ctx; ; n = std::max(256, n / 2)) {
    for (int batch : batches) {
      for (KvCacheType type : types) {
        SessionOptions o = wanted;
        o.n_ctx = n;
        o.kv_cache_type = type;
        o.max_batch = std::min(batch, n);
        const uint64_t total = cost(o).total();
        if (total > budget) continue;
        if (note != nullptr) {
          std::vector<std::string> changes;
          if (n != wanted.n_ctx) changes.push_back("n_ctx " + std::to_string(wanted.n_ctx) + " -> " + std::to_string(n));
          if (o.max_batch != std::min(wanted.max_batch, n)) {
            changes.push_back("prompt chunk " + std::to_string(wanted.max_batch) + " -> " + std::to_string(o.max_batch));
          }
          if (type != wanted.kv_cache_type) changes.push_back(std::string("KV ") + KvCacheTypeName(type));
          note->clear();
          for (const std::string& c : changes) *note += (note->empty() ? "" : ", ") + c;
          *note += " (" + MiB(total) + " of the " + MiB(budget) + " budget)";
        }
        return o;
      }
    }
    if (n <= 256) break;
  }
  const SessionCost& c = floor_cost;
  return Status::Error(StatusCode::kInvalidArgument,
                       "a memory budget of " + MiB(budget) + " is below this model's floor of " + MiB(c.total()) +
                           " (n_ctx " + std::to_string(floor.n_ctx) + ", prompt chunk " + std::to_string(floor.max_batch) + ", KV " +
                           KvCacheTypeName(floor.kv_cache_type) + ": KV " + MiB(c.kv_bytes) + ", activations " + MiB(c.activation_bytes) +
                           ", packed weights in memory " + MiB(c.packed_in_memory_bytes) + ", the process " +
                           MiB(c.baseline_bytes) + ")" +
                           (c.packed_in_memory_bytes > 0 ? "; a packed-weight cache folder would save the packed weights" : ""));
}

}  // namespace

SessionCost PlanSession(const Engine& engine, const SessionOptions& options) {
  const runtime::Engine& rt = *engine.impl().runtime;
  const Engine::Impl::Kernels k = engine.impl().CurrentKernels();
  SessionCost c = SessionCostOn(rt.model(), ToRuntime(options, engine), PackedInMemoryBytes(rt.model(), *k.table, k.tuning));
  c.baseline_bytes = runtime::AnonBytes();
  // What is packed in memory already is part of the baseline: count it once.
  c.baseline_bytes -= std::min<uint64_t>(c.baseline_bytes, rt.model().packed_store().PackedBytesInMemory());
  return c;
}

uint64_t DefaultMemoryBudget() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::FILE* f = std::fopen(path, "r");
    if (f == nullptr) continue;
    char buf[64] = {};
    const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
    std::fclose(f);
    const unsigned long long v = got ? std::strtoull(buf, nullptr, 10) : 0;
    if (v > 0 && v < (1ull << 60)) return v;  // "max" and the v1 "unlimited" value mean no limit
  }
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[128];
  uint64_t available = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "MemAvailable:", 13) == 0) available = std::strtoull(line + 13, nullptr, 10) * 1024;
  }
  std::fclose(f);
  return available / 2;
}

uint64_t ParseByteSize(std::string_view text) {
  std::string t(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || !(v > 0)) return 0;
  std::string unit(end);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "IB") unit.resize(unit.size() - 2);
  else if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  double scale = 1;
  if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return 0;
  return static_cast<uint64_t>(v * scale);
}

Result<SessionOptions> FitToBudget(const Engine& engine, uint64_t budget, SessionOptions wanted, std::string* note,
                                   uint64_t* floor_bytes) {
  const Model& model = engine.impl().runtime->model();
  wanted.n_ctx = runtime::Session::Resolved(model, ToRuntime(wanted, engine)).n_ctx;
  return FitLoop([&](const SessionOptions& o) { return PlanSession(engine, o); }, model, budget, wanted, note, floor_bytes);
}

Result<SessionOptions> FitFileToBudget(const std::string& path, const EngineOptions& engine_options, uint64_t budget,
                                       SessionOptions wanted, std::string* note, uint64_t* floor_bytes) {
  if (std::string err = Validate(engine_options.kernels); !err.empty()) {
    return Status::Error(StatusCode::kInvalidArgument, err);
  }
  // The process with the model's own structures (its metadata and tensor table, which the engine
  // keeps too), plus what loading adds beside the weights' clean pages: the tokenizer.
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFile(path));
  const uint64_t baseline = runtime::AnonBytes() + kTokenizerBytesPerPiece * static_cast<uint64_t>(model->config().n_vocab);
  const Engine::Impl::Kernels k = ResolveKernels(engine_options.kernels);
  // With a cache folder the packed weights are written to a file and mapped: clean pages.
  const uint64_t packed = engine_options.cache_dir.empty() ? PackedInMemoryBytes(*model, *k.table, k.tuning) : 0;
  auto cost = [&](const SessionOptions& o) {
    SessionCost c = SessionCostOn(*model, ToRuntime(o, engine_options.n_threads), packed);
    c.baseline_bytes = baseline;
    return c;
  };
  wanted.n_ctx = runtime::Session::Resolved(*model, ToRuntime(wanted, engine_options.n_threads)).n_ctx;
  return FitLoop(cost, *model, budget, wanted, note, floor_bytes);
}

// ---- Conversation ----

struct Conversation::Impl {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<runtime::ChatSession> chat;
  DraftSession draft;  // SessionOptions::draft_model's; it follows the chat's history by itself
  std::atomic<bool> cancel{false};
  int own_threads = 1;
  KvType kv_type = KvType::kF16;
  // Suspend for apps (ConversationOptions::state_path): OnBackground saves here. `busy` is held by
  // every call, so a save from the app's lifecycle thread never meets a Send half-way; a save asked
  // for during a call is made when it returns.
  std::string state_path;
  runtime::PressureLadder ladder;
  // An app's warning that came while a call ran (or from inside it): taken at the next turn.
  std::atomic<int> pending_warning{0};
  int pressure_actions = 0;
  uint64_t pressure_released = 0;
  mutable std::mutex busy;
  std::atomic<std::thread::id> busy_thread{};  // who holds `busy` (a stream callback may call OnBackground)
  std::atomic<bool> save_requested{false};

  ~Impl() {
    if (!engine) return;  // Create failed before registering it
    Engine::Impl& e = engine->impl();
    std::lock_guard<std::mutex> lock(e.conversations_mutex);
    std::erase(e.conversations, this);
  }
  MemoryStats Memory() const {
    MemoryStats m = SessionMemory(chat->session());
    m.pressure_actions = pressure_actions;
    m.pressure_released_bytes = pressure_released;
    return m;
  }
  // The memory governor, between calls (the caller holds `busy`): the ladder's next steps for this
  // level, each reported.
  void Govern(runtime::PressureLevel level) {
    level = std::max(level, static_cast<runtime::PressureLevel>(pending_warning.exchange(0)));
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    for (runtime::PressureStep step : ladder.Next(level, now)) {
      runtime::Session& s = chat->session();
      MemoryActionEvent e;
      e.critical = level == runtime::PressureLevel::kCritical;
      if (step == runtime::PressureStep::kReleaseScratch) {
        e.action = MemoryAction::kReleasedScratch;
        e.bytes_released = s.ReleaseIdleMemory();
        e.detail = "scratch and unused KV pages";
      } else if (step == runtime::PressureStep::kDropOldTurns) {
        e.action = MemoryAction::kDroppedOldTurns;
        const size_t before = s.cache().ResidentBytes();
        Result<runtime::DroppedTurns> d = chat->ShedOldTurns(s.n_past() / 2);
        if (!d.ok() || d->messages == 0) continue;  // too short to shed anything: nothing to report
        const size_t after = s.cache().ResidentBytes();
        e.bytes_released = before > after ? before - after : 0;
        e.detail = std::to_string(d->messages) + " messages, " + std::to_string(d->tokens) + " tokens";
      } else {
        e.action = MemoryAction::kLoweredKvPrecision;
        if (kv_type == KvType::kQ4_0) continue;  // the lowest already
        const KvType to = kv_type == KvType::kQ8_0 ? KvType::kQ4_0 : KvType::kQ8_0;
        const size_t before = s.cache().bytes();
        const char* from = KvTypeName(kv_type);
        if (!s.ConvertKv(to).ok()) continue;  // head sizes blocks of 32 cannot hold
        kv_type = to;
        e.bytes_released = before - std::min(before, s.cache().bytes());
        e.detail = std::string("KV ") + from + " -> " + KvTypeName(to);
      }
      ++pressure_actions;
      pressure_released += e.bytes_released;
      api::Log(2, std::string("memory pressure (") + (e.critical ? "critical" : "moderate") + "): " +
                      MemoryActionName(e.action) + " (" + e.detail + "), gave back " +
                      (e.bytes_released >= (1u << 20) ? std::to_string((e.bytes_released + (1 << 19)) >> 20) + " MiB"
                                                      : std::to_string((e.bytes_released + 512) >> 10) + " KiB"));
      if (engine->options().on_memory_action) engine->options().on_memory_action(e);
    }
  }
  // Saves when a save was asked for; the caller holds `busy`.
  void SaveIfRequested() {
    if (!save_requested.exchange(false)) return;
    const Status s = chat->SaveState(state_path);
    if (s.ok()) api::Log(1, "saved the conversation to " + state_path + " (the app went to the background)");
    else api::Log(2, "could not save the conversation for the background: " + s.message());
  }
  // Every call: holds `busy` for its length, then makes a save that came in meanwhile.
  template <typename F>
  auto Call(F&& f) {
    struct Finally {
      Impl* impl;
      ~Finally() {
        if (impl->state_path.empty() || !impl->save_requested.load()) return;
        std::lock_guard<std::mutex> lock(impl->busy);
        impl->SaveIfRequested();
      }
    } finally{this};
    std::lock_guard<std::mutex> lock(busy);
    struct Owner {
      std::atomic<std::thread::id>& id;
      explicit Owner(std::atomic<std::thread::id>& i) : id(i) { id.store(std::this_thread::get_id()); }
      ~Owner() { id.store(std::thread::id()); }
    } owner(busy_thread);
    return f();
  }
};

void Engine::OnMemoryWarning(MemoryPressure level) {
  impl_->pressure.store(level);
  api::Log(1, std::string("memory warning: ") + MemoryPressureName(level));
  // A warning is an event (iOS sends one, Android one per level change), not a state: each
  // conversation acts on it once, the idle ones now, a busy one (or this thread's own, from a
  // stream callback) at the start of its next turn.
  const runtime::PressureLevel warned = runtime::FromTrimLevel(static_cast<int>(level));
  if (warned == runtime::PressureLevel::kNone) return;
  const runtime::PressureLevel now = std::max(warned, PsiPressure(*impl_));
  std::lock_guard<std::mutex> lock(impl_->conversations_mutex);
  for (Conversation::Impl* c : impl_->conversations) {
    int pending = c->pending_warning.load();
    while (pending < static_cast<int>(warned) && !c->pending_warning.compare_exchange_weak(pending, static_cast<int>(warned))) {
    }
    if (c->busy_thread.load() == std::this_thread::get_id()) continue;
    std::unique_lock<std::mutex> idle(c->busy, std::try_to_lock);
    if (idle.owns_lock()) c->Govern(now);
  }
}

void Engine::OnBackground() {
  impl_->background.store(true);
  std::lock_guard<std::mutex> lock(impl_->conversations_mutex);
  for (Conversation::Impl* c : impl_->conversations) {
    if (c->state_path.empty()) continue;
    // Asked first, then tried: either this try_lock or the running call's end sees the request. From
    // inside the call (its stream callback) only the call's end can save: half a turn is no state.
    c->save_requested.store(true);
    if (c->busy_thread.load() == std::this_thread::get_id()) continue;
    std::unique_lock<std::mutex> idle(c->busy, std::try_to_lock);
    if (idle.owns_lock()) c->SaveIfRequested();
  }
}

Conversation::Conversation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Conversation::~Conversation() = default;

Result<std::unique_ptr<Conversation>> Conversation::Create(std::shared_ptr<Engine> engine,
                                                           const ConversationOptions& options) {
  if (!engine) return Status::Error(StatusCode::kInvalidArgument, "no engine");
  RETURN_IF_ERROR(CheckSessionOptions(options.session));
  if (options.summary_max_tokens < 1) {
    return Status::Error(StatusCode::kInvalidArgument, "summary_max_tokens must be at least 1");
  }
  const runtime::SessionOptions ro = ToRuntime(options.session, *engine);
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Session> session, runtime::Session::Create(engine->impl().runtime, ro));
  ASSIGN_OR_RETURN(DraftSession draft, api::MakeDraftSession(*engine, options.session, *session));
  // Made once nothing can fail before it is registered: its destructor unregisters it.
  auto impl = std::make_unique<Impl>();
  impl->draft = std::move(draft);
  impl->own_threads = session->n_threads();
  impl->kv_type = ro.kv_type;
  if (options.session.progress) session->SetProgress(options.session.progress);
  impl->chat = std::make_unique<runtime::ChatSession>(std::move(session), SamplingParams{});
  impl->chat->SetSystem(options.system);
  impl->chat->SetThinking(options.thinking);
  impl->chat->SetSummaries({options.summarize_dropped, options.summary_max_tokens});
  impl->engine = std::move(engine);
  if (!options.state_path.empty()) {
    struct stat st{};
    if (::stat(options.state_path.c_str(), &st) == 0) {
      if (Status s = impl->chat->LoadState(options.state_path); !s.ok()) {
        api::Log(2, "not resuming the conversation: " + s.message() + "; a new one begins");
      }
    }
    impl->state_path = options.state_path;
  }
  {
    Engine::Impl& e = impl->engine->impl();
    std::lock_guard<std::mutex> lock(e.conversations_mutex);
    e.conversations.push_back(impl.get());
  }
  return std::unique_ptr<Conversation>(new Conversation(std::move(impl)));
}

Result<Reply> Conversation::Send(std::string_view user_text, const GenerateOptions& options,
                                 const StreamCallback& on_text) {
  RETURN_IF_ERROR(CheckGenerateOptions(options));
  return impl_->Call([&]() -> Result<Reply> {
    impl_->Govern(PsiPressure(impl_->engine->impl()));
    impl_->engine->impl().Apply(impl_->chat->session(), impl_->own_threads);
    if (impl_->draft.session) impl_->draft.engine->impl().Apply(*impl_->draft.session, impl_->own_threads);
    impl_->cancel.store(false);
    impl_->chat->SetSampling(ToRuntime(options.sampling));
    const runtime::TextSink sink = ToSink(on_text);
    ASSIGN_OR_RETURN(std::unique_ptr<runtime::TokenConstraint> constraint,
                     MakeConstraint(impl_->engine->impl(), options, impl_->chat->session().n_ctx()));
    runtime::GenerateOptions g = ToRuntime(options, &impl_->cancel);
    g.constraint = constraint.get();
    g.draft_session = impl_->draft.session.get();
    ASSIGN_OR_RETURN(runtime::GenerateResult r, impl_->chat->Send(std::string(user_text), g, sink));
    const runtime::ChatTurnStats& turn = impl_->chat->last_turn();
    Reply reply = ToReply(r, turn.tokens_reused, impl_->chat->session());
    reply.stats.dropped_messages = turn.messages_dropped;
    reply.stats.dropped_tokens = turn.tokens_dropped;
    reply.stats.reevaluated_tokens = turn.tokens_reevaluated;
    reply.stats.summarized_messages = turn.messages_summarized;
    reply.stats.summary_tokens = turn.summary_tokens;
    reply.stats.memory = impl_->Memory();
    return reply;
  });
}

void Conversation::Cancel() { impl_->cancel.store(true); }
void Conversation::SetSystem(std::string system) {
  impl_->Call([&] { impl_->chat->SetSystem(system); });
}
void Conversation::SetThinking(bool on) {
  impl_->Call([&] { impl_->chat->SetThinking(on); });
}
void Conversation::SetSummarizeDropped(bool on) {
  impl_->Call([&] {
    runtime::SummaryOptions o = impl_->chat->summaries();
    o.enabled = on;
    impl_->chat->SetSummaries(o);
  });
}
std::string Conversation::summary() const {
  return impl_->Call([&] { return impl_->chat->summary(); });
}
void Conversation::Reset() {
  impl_->Call([&] { impl_->chat->Reset(); });
}

std::vector<Message> Conversation::messages() const {
  return impl_->Call([&] {
    std::vector<Message> out;
    for (const runtime::ChatTurn& m : impl_->chat->messages()) out.push_back({m.role, m.content});
    return out;
  });
}

Status Conversation::Save(const std::string& path) const {
  return impl_->Call([&] { return impl_->chat->Save(path); });
}
Status Conversation::Load(const std::string& path) {
  return impl_->Call([&] { return impl_->chat->Load(path); });
}
Status Conversation::SaveState(const std::string& path) const {
  return impl_->Call([&] { return impl_->chat->SaveState(path); });
}
Status Conversation::LoadState(const std::string& path) {
  return impl_->Call([&] { return impl_->chat->LoadState(path); });
}
Status Conversation::SetMessages(std::vector<Message> messages) {
  return impl_->Call([&] {
    std::vector<runtime::ChatMessage> chat;
    for (Message& m : messages) chat.push_back({std::move(m.role), std::move(m.content)});
    Status s = impl_->chat->SetMessages(std::move(chat));
    return s.ok() ? s : Status::Error(StatusCode::kInvalidArgument, s.message());
  });
}
int Conversation::n_past() const { return impl_->chat->session().n_past(); }
int Conversation::n_ctx() const { return impl_->chat->session().n_ctx(); }
MemoryStats Conversation::memory() const { return impl_->Memory(); }
MemoryPlan Conversation::memory_plan() const { return PlanMemory(impl_->chat->session(), impl_->kv_type); }

}  // namespace gemlet

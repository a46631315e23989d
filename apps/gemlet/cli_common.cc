// Shared option handling and output for run, chat, serve and the tasks, over the public API.
#include "cli_common.h"

#include <cmath>
#include <cstdlib>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "command.h"
#include "store_cli.h"

namespace gemlet::cli {

bool StdoutIsTerminal() { return ::isatty(STDOUT_FILENO) == 1; }
bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

void AddModelOptions(CLI::App& app, ModelOptions* o) {
  app.add_option("-m,--model", o->model_path, "GGUF model file, NAME[:VERSION] from the model store, or demo (the tiny "
                 "bundled model); default: $GEMLET_MODEL, else the store's default ('gemlet default')");
  AddStoreFlag(app, &o->store_dir);
  AddThreadsFlag(app, o->threads);
  AddContextFlag(app, o->ctx);
  AddBatchFlag(app, o->batch);
  AddKvTypeFlag(app, o->kv_type);
  AddKernelFlags(app, o->kernels);
  AddCacheFlags(app, o->cache_dir, o->no_cache);
  AddThermalFlags(app, o->thermal);
  app.add_option("--mmproj", o->mmproj, "the model's vision tower: llama.cpp's mmproj GGUF (for --image)")
      ->check(CLI::ExistingFile);
  app.add_option("--lora", o->lora,
                 "a LoRA adapter (llama.cpp's GGUF format; `gemlet convert-lora` makes one from PEFT), FILE or "
                 "FILE:SCALE; repeatable, applied unmerged on the base in the order given")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--lora-any-base", o->lora_any_base,
               "load --lora adapters even when they name another base model than this one (same shapes still checked)");
  app.add_option("--max-soft-tokens", o->max_soft_tokens,
                 "Gemma 4: soft tokens per image at most (70, 140, 280, 560, 1120: finer detail costs more; 0: the "
                 "mmproj's default)")
      ->check(NonNegative());
  app.add_flag("--pan-and-scan", o->pan_and_scan,
               "Gemma 3: also show the model crops of a long image (its processor's do_pan_and_scan: 2-4 crops "
               "along the long side when it is 1.2x the short one, each costing as many tokens as the image)");
  AddMemBudgetFlag(app, o->mem_budget,
                   "dirty memory the session may use (300M, 2G; default: the cgroup's limit, else half of the available "
                   "memory): a smaller context or a q8_0 or q4_0 KV cache is chosen to fit, or the run is refused");
  app.add_option("--pressure-file", o->pressure_file,
                 "where memory pressure is read before each chat turn (Linux PSI; 'off': not read). Under pressure "
                 "the chat gives back scratch, then its oldest turns, then KV precision (q8_0, then q4_0)")
      ->capture_default_str()
      ->check([](const std::string& v) {
        return v == "off" || ::access(v.c_str(), R_OK) == 0 ? std::string() : "cannot read '" + v + "' (give a PSI file or 'off')";
      });
}

void AddMediaFlags(CLI::App& app, MediaFlags* flags) {
  app.add_option("--image", flags->images, "an image for the prompt (PNG, JPEG, WebP, HEIC; repeatable, placed before "
                                           "the text; needs --mmproj)")
      ->check(CLI::ExistingFile);
  app.add_option("--audio", flags->audio, "an audio clip for the prompt (WAV, FLAC, Ogg, MP3; up to 30 s; repeatable, "
                                          "after the images; needs --mmproj)")
      ->check(CLI::ExistingFile);
}

Result<std::vector<ContentPart>> EncodeMedia(const Engine& engine, const ModelOptions& o, const MediaFlags& flags) {
  std::vector<ContentPart> parts;
  ImageOptions options;
  options.max_soft_tokens = o.max_soft_tokens;
  options.pan_and_scan.enabled = o.pan_and_scan;
  for (const std::string& path : flags.images) {
    auto image = engine.EncodeImageFile(path, options);
    if (!image.ok()) return image.status();
    parts.push_back({"", image.value()});
  }
  for (const std::string& path : flags.audio) {
    auto clip = engine.EncodeAudioFile(path);
    if (!clip.ok()) return clip.status();
    parts.push_back({"", clip.value()});
  }
  return parts;
}

void AddGenerationOptions(CLI::App& app, GenerationFlags* g) {
  SamplingOptions& s = g->sampling;
  app.add_option("-n,--max-tokens", g->max_tokens, "new tokens at most (0: until the context is full)")
      ->check(NonNegative());
  app.add_option("--temp", s.temperature, "sampling temperature (0: greedy)");
  app.add_option("--top-k", s.top_k, "keep the k most likely tokens (0: off)");
  app.add_option("--top-p", s.top_p, "nucleus sampling threshold (1: off)");
  app.add_option("--min-p", s.min_p, "drop tokens below min-p times the best one (0: off)");
  app.add_option("--repeat-penalty", s.repeat_penalty, "penalise tokens seen recently (1: off)");
  app.add_option("--presence-penalty", s.presence_penalty, "subtract from seen tokens' logits");
  app.add_option("--frequency-penalty", s.frequency_penalty, "subtract per occurrence");
  app.add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalties look back over");
  app.add_option("-s,--seed", s.seed, "random seed (same seed, same output)");
  app.add_option("--stop", g->stop, "stop before this text (repeatable)");
  app.add_flag("--stats", g->stats, "print load time, time to first token, speeds, KV memory and peak RSS");
  app.add_flag("--think", g->think, "Gemma 4: let the model think before answering");
  app.add_flag("--show-thinking", g->show_thinking, "print the thought channel (dimmed on a terminal)");
  app.add_option("--spec", g->spec,
                 "speculative decoding: none, lookup (draft from earlier text), draft (a draft model's) or mtp (Gemma "
                 "4's own drafter, a gemma4-assistant file as --draft-model); the output is the same")
      ->check(CLI::IsMember({"none", "lookup", "draft", "mtp"}))->default_str(g->default_spec);
  AddDraftFlag(app, g->draft);
  app.add_option("--draft-model", g->draft_model,
                 "a smaller model of the same vocabulary that drafts (means --spec draft), or with --spec mtp Gemma 4's "
                 "drafter (gemma4-assistant): a file or NAME[:VERSION]");
}

namespace {
// The bundled demo model: beside the source tree the binary was built from, else in the cwd.
Result<std::string> DemoModel() {
  for (const std::string& candidate : {std::string(GEMLET_DEMO_MODEL), std::string("models/gemlet-demo.gguf")}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return Status::Error("-m demo: the bundled demo model " + std::string(GEMLET_DEMO_MODEL) + " is missing");
}

// A NAME[:VERSION] from the store, unless it names a file: a path that exists is always a path, and
// something that looks like one (a '/', a .gguf ending) is left for the loader's own message.
// "demo" is the bundled demo model, unless the store holds a model of that name.
Result<std::string> FileOrStoreModel(const std::string& m, const std::string& store_dir) {
  std::error_code ec;
  if (std::filesystem::exists(m, ec)) return m;
  const std::string name = m.substr(0, m.find(':'));
  if (m.find('/') != std::string::npos || (m.size() > 5 && m.compare(m.size() - 5, 5, ".gguf") == 0) ||
      !ModelStore::CheckName(name, "model").ok()) {
    return m;
  }
  // Checked before opening the store, which would create its folder.
  if (m == "demo" && !std::filesystem::exists(StoreDir(store_dir) + "/demo/model.json", ec)) return DemoModel();
  auto store = OpenStore(store_dir);
  if (!store.ok()) return store.status();
  Result<StoredModel> stored = (*store)->Get(name);
  if (!stored.ok()) {
    return Status::Error("'" + m + "' is neither a file nor a model in the store " + (*store)->dir() + " ('gemlet list' "
                         "shows the installed models, 'gemlet pull " + name + "' fetches one)");
  }
  return (*store)->Resolve(m);
}
}  // namespace

Result<std::string> ResolveModelPath(const std::string& flag, const std::string& store_dir) {
  if (!flag.empty()) return FileOrStoreModel(flag, store_dir);
  if (const char* env = std::getenv("GEMLET_MODEL"); env && *env) return FileOrStoreModel(env, store_dir);
  // The store's default; never the demo model unasked: its answers would pass for a real model's.
  // Looked for before opening the store, which would create its folder.
  std::error_code ec;
  const std::string dir = StoreDir(store_dir);
  if (!dir.empty() && std::filesystem::exists(dir + "/.default", ec)) {
    auto store = OpenStore(dir);
    if (!store.ok()) return store.status();
    if (Result<std::string> name = (*store)->DefaultModel(); name.ok() && !name->empty()) return (*store)->Resolve(*name);
  }
  return Status::Error("no model given: get one with 'gemlet pull gemma4-e2b' (it becomes the default), or pass -m "
                       "MODEL.gguf|NAME or set GEMLET_MODEL (-m demo: the tiny demo model)");
}

namespace {
// The store name a model flag (else $GEMLET_MODEL, else the store's default) stands for; "" when it
// is a file or names nothing in the store.
std::string StoreModelName(const std::string& flag, const std::string& store_dir) {
  std::string ref = flag;
  if (ref.empty()) {
    if (const char* env = std::getenv("GEMLET_MODEL"); env && *env) ref = env;
  }
  std::error_code ec;
  const std::string dir = StoreDir(store_dir);
  if (ref.empty()) {
    if (dir.empty() || !std::filesystem::exists(dir + "/.default", ec)) return "";
    auto store = OpenStore(dir);
    if (!store.ok()) return "";
    Result<std::string> name = (*store)->DefaultModel();
    return name.ok() ? *name : "";
  }
  if (std::filesystem::exists(ref, ec)) return "";
  const std::string name = ref.substr(0, ref.find(':'));
  if (!ModelStore::CheckName(name, "model").ok() || !std::filesystem::exists(dir + "/" + name + "/model.json", ec)) return "";
  return name;
}
}  // namespace

Result<std::string> ResolveMmprojPath(const std::string& mmproj_flag, const std::string& model_flag,
                                      const std::string& store_dir) {
  std::error_code ec;
  if (!mmproj_flag.empty()) {
    const std::string name = mmproj_flag.substr(0, mmproj_flag.find(':'));
    if (std::filesystem::exists(mmproj_flag, ec) || mmproj_flag.find('/') != std::string::npos ||
        !ModelStore::CheckName(name, "model").ok() ||
        !std::filesystem::exists(StoreDir(store_dir) + "/" + name + "/model.json", ec)) {
      return mmproj_flag;  // a path: the loader names what is wrong with it
    }
    auto store = OpenStore(store_dir);
    if (!store.ok()) return store.status();
    return (*store)->Resolve(mmproj_flag);
  }
  const std::string model = StoreModelName(model_flag, store_dir);
  if (model.empty() || !std::filesystem::exists(StoreDir(store_dir) + "/" + model + "-mmproj/model.json", ec)) return std::string();
  auto store = OpenStore(store_dir);
  if (!store.ok()) return store.status();
  return (*store)->Resolve(model + "-mmproj");
}

Status SettleMmproj(ModelOptions* o) {
  Result<std::string> mmproj = ResolveMmprojPath(o->mmproj, o->model_path, o->store_dir);
  if (!mmproj.ok()) return mmproj.status();
  o->mmproj = *mmproj;
  return Status::Ok();
}

namespace {
// The engine options the model flags ask for (the model's, and a draft model's).
EngineOptions EngineOptionsOf(const ModelOptions& o) {
  EngineOptions e;
  e.kernels = o.kernels;
  e.cache_dir = CacheDir(o.cache_dir, o.no_cache);
  e.n_threads = o.threads;
  e.memory_pressure_path = o.pressure_file == "off" ? std::string() : o.pressure_file;
  e.thermal = o.thermal;
  e.mmproj_path = o.mmproj;
  return e;
}
}  // namespace

Result<LoraSpec> ParseLoraSpec(const std::string& spec) {
  LoraSpec out{spec, 1.0f};
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    const std::string tail = spec.substr(colon + 1);
    char* end = nullptr;
    const float scale = std::strtof(tail.c_str(), &end);
    if (!tail.empty() && end == tail.c_str() + tail.size()) {
      if (!std::isfinite(scale)) return Status::Error("--lora '" + spec + "': the scale is not a finite number");
      out.path = spec.substr(0, colon);
      out.scale = scale;
    }
  }
  if (out.path.empty()) return Status::Error("--lora '" + spec + "' names no file");
  return out;
}

Result<std::vector<AdapterUse>> LoadAdapters(const Engine& engine, const std::vector<std::string>& specs, bool any_base) {
  std::vector<AdapterUse> out;
  for (const std::string& spec : specs) {
    Result<LoraSpec> s = ParseLoraSpec(spec);
    if (!s.ok()) return s.status();
    Result<std::shared_ptr<const Adapter>> adapter = engine.LoadAdapter(s->path, any_base);
    if (!adapter.ok()) return adapter.status();
    out.push_back({std::move(adapter).value(), s->scale});
  }
  return out;
}

Result<LoadedModel> LoadForGeneration(const ModelOptions& options) {
  Result<std::string> path = ResolveModelPath(options.model_path, options.store_dir);
  if (!path.ok()) return path.status();
  ModelOptions o = options;
  if (Status s = SettleMmproj(&o); !s.ok()) return s;
  const bool tty = StderrIsTerminal();
  if (tty) std::fprintf(stderr, "loading %s ...\r", path->c_str());
  if (std::string err = Validate(o.kernels); !err.empty()) return Status::Error(StatusCode::kInvalidArgument, err);
  const EngineOptions engine_options = EngineOptionsOf(o);
  LoadedModel m;
  m.session.n_ctx = o.ctx;
  m.session.n_threads = o.threads;
  m.session.max_batch = o.batch;
  m.session.kv_cache_type = KvTypeOf(o.kv_type);
  // The memory budget: the session's dirty memory (what a phone counts) must fit it. Checked from
  // the file before loading (a model that cannot fit costs nothing), then planned on the loaded
  // engine, which knows the tokenizer's and packed weights' real cost.
  const uint64_t budget = o.mem_budget.empty() ? DefaultMemoryBudget() : ParseByteSize(o.mem_budget);
  const SessionOptions wanted = m.session;
  uint64_t floor = 0;
  if (budget > 0) {
    Result<SessionOptions> planned = FitFileToBudget(*path, engine_options, budget, m.session, nullptr, &floor);
    if (!planned.ok()) return Status::Error(planned.message() + " (refused before loading)");
    m.session = std::move(planned).value();
  }
  Result<std::shared_ptr<Engine>> engine = Engine::Load(*path, engine_options);
  if (!engine.ok()) return engine.status();
  m.engine = std::move(engine).value();
  if (tty) std::fprintf(stderr, "\r\033[K");
  Result<std::vector<AdapterUse>> adapters = LoadAdapters(*m.engine, o.lora, o.lora_any_base);
  if (!adapters.ok()) return adapters.status();
  if (budget > 0) {
    std::string note;
    uint64_t loaded_floor = 0;  // the engine's own figure; the larger of the two is the one to trust
    // Several sessions (serve's slots) share what the engine holds once (its baseline and packed
    // weights) and each need their own cache and workspace: one session then fits its share.
    uint64_t one_budget = budget;
    if (o.sessions > 1) {
      const SessionCost cost = PlanSession(*m.engine, wanted);
      const uint64_t shared = cost.packed_in_memory_bytes + cost.baseline_bytes;
      if (budget <= shared) {
        return Status::Error("the memory budget (" + std::to_string(budget >> 20) + " MiB) does not cover what the model "
                             "holds before any session (" + std::to_string(shared >> 20) + " MiB)");
      }
      one_budget = shared + (budget - shared) / static_cast<uint64_t>(o.sessions);
    }
    Result<SessionOptions> fitted = FitToBudget(*m.engine, one_budget, wanted, &note, &loaded_floor);
    floor = std::max(floor, loaded_floor);
    if (!fitted.ok()) return Status::Error(fitted.message());
    m.session = std::move(fitted).value();
    const bool changed = !note.empty();
    if (changed || !o.mem_budget.empty()) {
      const std::string slots = o.sessions > 1 ? " for " + std::to_string(o.sessions) + " sessions" : "";
      std::fprintf(stderr, "(memory budget %llu MiB%s, this model's floor %llu MiB: %s)\n",
                   static_cast<unsigned long long>(budget >> 20), slots.c_str(),
                   static_cast<unsigned long long>((floor + (1 << 20) - 1) >> 20), changed ? note.c_str() : "runs as asked");
    }
  }
  m.session.adapters = std::move(adapters).value();
  if (tty) {
    // Long prompts show their progress on a terminal; piped output stays clean.
    m.session.progress = [](int done, int total) {
      if (total < 256) return;
      std::fprintf(stderr, done < total ? "\rprompt %d/%d tokens" : "\r\033[K", done, total);
    };
  }
  return m;
}

Result<std::unique_ptr<Conversation>> OpenConversation(const LoadedModel& m, ConversationOptions co) {
  co.session = m.session;
  return Conversation::Create(m.engine, co);
}

GenerateOptions MakeGenerateOptions(const GenerationFlags& g) {
  GenerateOptions o;
  o.max_tokens = g.max_tokens;
  o.sampling = g.sampling;
  o.stop = g.stop;
  o.max_draft = g.spec == "lookup" || g.spec == "draft" || g.spec == "mtp" ? g.draft : 0;
  return o;
}

std::string MeasuredSpeculation(const ModelOptions& o) {
  Result<std::string> path = ResolveModelPath(o.model_path, o.store_dir);
  if (!path.ok()) return "none";  // loading reports it
  std::error_code ec;  // no record without the file: opening the store would create its folder
  if (const std::string dir = StoreDir(o.store_dir); dir.empty() || !std::filesystem::exists(dir + "/.speculation.json", ec)) {
    return "none";
  }
  auto store = OpenStore(o.store_dir);
  if (!store.ok()) return "none";
  Result<SpeculationRecord> r = (*store)->FindSpeculation(*path, "lookup");
  return r.ok() && r->spec == "lookup" && r->speedup > 1 ? "lookup" : "none";
}

std::string SettleSpeculation(GenerationFlags* g) {
  if (g->spec.empty()) g->spec = g->draft_model.empty() ? g->default_spec : "draft";
  if (!g->draft_model.empty() && g->spec != "draft" && g->spec != "mtp") {
    return "--draft-model drafts for --spec draft or mtp: not with --spec " + g->spec;
  }
  if (g->spec == "draft" && g->draft_model.empty()) {
    return "--spec draft needs --draft-model FILE (a smaller model of the same vocabulary)";
  }
  if (g->spec == "mtp" && g->draft_model.empty()) {
    return "--spec mtp needs --draft-model FILE (Gemma 4's drafter for this model, a gemma4-assistant file)";
  }
  return std::string();
}

Status AttachDraftModel(const GenerationFlags& g, const ModelOptions& o, LoadedModel* m) {
  if (g.spec != "draft" && g.spec != "mtp") return Status::Ok();
  Result<std::string> path = ResolveModelPath(g.draft_model, o.store_dir);
  if (!path.ok()) return Status::Error("the draft model: " + path.message());
  EngineOptions engine_options = EngineOptionsOf(o);
  engine_options.memory_pressure_path = "";  // the model's engine governs memory
  engine_options.mmproj_path = "";           // a draft reads text only
  Result<std::shared_ptr<Engine>> draft = Engine::Load(*path, engine_options);
  if (!draft.ok()) return Status::Error("the draft model: " + draft.message());
  // A gemma4-assistant file drafts as Gemma 4's drafter (mtp) whichever of the two is named.
  if (g.spec == "mtp" && (*draft)->info().architecture != "gemma4-assistant") {
    return Status::Error("--spec mtp: '" + *path + "' is a " + (*draft)->info().architecture +
                         " model, not Gemma 4's drafter (gemma4-assistant)");
  }
  m->session.draft_model = std::move(draft).value();
  return Status::Ok();
}

bool PrintChunk(const GenerationFlags& g, bool color, ChunkKind kind, std::string_view text) {
  const bool thought = kind == ChunkKind::kThinking;
  if (thought && !g.show_thinking) return true;
  if (thought && color) std::fputs("\033[2m", stdout);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (thought && color) std::fputs("\033[0m", stdout);
  std::fflush(stdout);
  return true;
}

void PrintStats(const Engine& engine, const Reply& reply) {
  const GenerationStats& s = reply.stats;
  const MemoryUsage now = engine.MeasureMemory();
  std::fprintf(stderr,
               "\n[stats] load %.2f s | prompt %d tok, ttft %.3f s, prefill %.1f tok/s | generated %d tok, decode %.1f "
               "tok/s | KV %.1f MiB | peak RSS %.1f MiB | stop: %s\n",
               engine.info().load_seconds, s.prompt_tokens - s.cached_tokens, s.ttft_seconds,
               s.prefill_tokens_per_second, s.generated_tokens, s.decode_tokens_per_second,
               static_cast<double>(s.memory.kv_cache_bytes) / (1 << 20),
               static_cast<double>(now.peak_rss_bytes) / (1 << 20), StopReasonName(s.stop));
  std::fputs(now.ToString().c_str(), stderr);
  if (s.draft_steps > 0) {
    std::fprintf(stderr, "[spec] %d verification steps, %d drafted, %d kept (%.0f%%), %.2f tokens per step\n",
                 s.draft_steps, s.drafted_tokens, s.accepted_tokens,
                 s.drafted_tokens ? 100.0 * s.accepted_tokens / s.drafted_tokens : 0.0,
                 static_cast<double>(s.accepted_tokens + s.draft_steps) / s.draft_steps);
  }
  if (s.thermal.throttled_steps > 0) {
    const Engine::ThermalStatus t = engine.thermal_status();
    std::fprintf(stderr, "[thermal] %d steps throttled (zone %s at %.1f C): threads down to %d, duty down to %.2f, "
                 "prompt chunks down to %d, %.2f s paced\n",
                 s.thermal.throttled_steps, t.zone.empty() ? "none, app level" : t.zone.c_str(), t.temperature_c,
                 s.thermal.min_threads, s.thermal.min_duty, s.thermal.min_prefill_chunk, s.thermal.paced_seconds);
  }
}

}  // namespace gemlet::cli

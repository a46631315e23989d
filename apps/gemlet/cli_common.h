// Options and helpers shared by the generating subcommands (run, chat, serve, the tasks), over the
// public API: model lookup, sampling and session flags, printing streamed text and stats, terminal detection.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flags.h"
#include "gemlet/gemlet.hpp"

namespace gemlet::cli {

struct ModelOptions {
  std::string model_path;  // a file, or NAME[:VERSION] in the store
  std::string store_dir;   // --store: "" the default store
  int threads = 0;
  int ctx = kDefaultContext;
  int batch = 512;
  std::string kv_type = kDefaultKvType;
  KernelOptions kernels;
  std::string cache_dir;  // empty: DefaultCacheDir()
  bool no_cache = false;
  std::string mem_budget;  // empty: DefaultMemoryBudget()
  std::string pressure_file = "/proc/pressure/memory";  // "off": none
  ThermalOptions thermal;  // --thermal-limit, --thermal-zone, --thermal-root, --no-thermal
  int sessions = 1;  // sessions the budget must hold at once (serve's slots); each gets LoadedModel::session
  std::vector<std::string> lora;  // --lora FILE[:SCALE], repeatable: LoRA adapters every session runs
  bool lora_any_base = false;     // --lora-any-base: load adapters that name another base model
  std::string mmproj;       // --mmproj: the model's vision tower
  int max_soft_tokens = 0;  // --max-soft-tokens: Gemma 4's soft tokens per image (0: the mmproj's)
  bool pan_and_scan = false;  // --pan-and-scan: Gemma 3's crops of a long image
};

struct GenerationFlags {
  int max_tokens = 512;
  SamplingOptions sampling;
  std::vector<std::string> stop;
  bool stats = false;
  bool think = false;
  bool show_thinking = false;
  std::string spec;                   // --spec none|lookup|draft|mtp; "" until given
  std::string default_spec = "none";  // what no --spec means (the task presets: MeasuredSpeculation's)
  int draft = 7;              // --draft N
  std::string draft_model;    // --draft-model FILE (--spec draft; --spec mtp: a gemma4-assistant file)
};

// A LoRA adapter as the flags name it: FILE, or FILE:SCALE (a number after the last colon).
struct LoraSpec {
  std::string path;
  float scale = 1.0f;
};
Result<LoraSpec> ParseLoraSpec(const std::string& spec);
// Loads each FILE[:SCALE] for engine (one error line names the file and what is wrong with it).
Result<std::vector<AdapterUse>> LoadAdapters(const Engine& engine, const std::vector<std::string>& specs,
                                             bool any_base = false);

// The model and engine flags of run, chat, serve and the tasks (flags.h's shared ones among them).
void AddModelOptions(CLI::App& app, ModelOptions* o);
// --image FILE and --audio FILE (repeatable) for the commands that take them with their prompt.
struct MediaFlags {
  std::vector<std::string> images;
  std::vector<std::string> audio;
  bool empty() const { return images.empty() && audio.empty(); }
};
void AddMediaFlags(CLI::App& app, MediaFlags* flags);
// The images, then the clips, encoded for a message (needs --mmproj): its media parts, in order.
Result<std::vector<ContentPart>> EncodeMedia(const Engine& engine, const ModelOptions& o, const MediaFlags& flags);
void AddGenerationOptions(CLI::App& app, GenerationFlags* g);

// The model to use: -m, else $GEMLET_MODEL, else the store's default model; none is an error that
// says how to get one. A path that exists stays a path; otherwise NAME[:VERSION] is looked up in the
// model store (store_dir, "" the default one); "demo" is the bundled demo model, only when named.
Result<std::string> ResolveModelPath(const std::string& flag, const std::string& store_dir = "");

// The towers to load: --mmproj (a file, or NAME[:VERSION] in the store), else NAME-mmproj when the
// model is the store's NAME and that is installed (`gemlet pull NAME` brings it), else none ("").
Result<std::string> ResolveMmprojPath(const std::string& mmproj_flag, const std::string& model_flag,
                                      const std::string& store_dir = "");

// o->mmproj made ResolveMmprojPath's answer (a path, or "" for none).
Status SettleMmproj(ModelOptions* o);

// The engine and the options of the session to create; a short "loading" line when stderr is a
// terminal, and a progress line for long prompts there.
struct LoadedModel {
  std::shared_ptr<Engine> engine;
  SessionOptions session;
};
Result<LoadedModel> LoadForGeneration(const ModelOptions& o);

// A conversation on the loaded model with the session options, system message and --think.
// A conversation on the loaded model with its session options (the budget's, the flags') over co's.
Result<std::unique_ptr<Conversation>> OpenConversation(const LoadedModel& m, ConversationOptions co);

GenerateOptions MakeGenerateOptions(const GenerationFlags& g);
// What the task presets draft with when no flag says: "lookup" where `gemlet bench --spec lookup`
// recorded a gain for this CPU and o's model in the store, else "none" (it is slower where drafts
// are seldom right: speculation is chosen by measurement).
std::string MeasuredSpeculation(const ModelOptions& o);
// --spec and --draft-model together: a draft model means --spec draft (an error with --spec none or
// lookup, or --spec draft / mtp without one). Returns the usage error, "" when none.
std::string SettleSpeculation(GenerationFlags* g);
// With --spec draft or mtp: loads the draft model (the same engine options as the model's) into
// m->session.draft_model, so that every session and conversation opened from m drafts with it (a
// gemma4-assistant file as Gemma 4's drafter; --spec mtp refuses any other).
Status AttachDraftModel(const GenerationFlags& g, const ModelOptions& o, LoadedModel* m);

// Prints one streamed piece to stdout: thinking only with --show-thinking (dimmed on a terminal).
bool PrintChunk(const GenerationFlags& g, bool color, ChunkKind kind, std::string_view text);

// "[stats] load 0.12 s | prompt 20 tok, ttft 0.35 s, ... | peak RSS 512 MiB | stop: end of turn", then
// what the process holds now.
void PrintStats(const Engine& engine, const Reply& reply);

bool StdoutIsTerminal();
bool StderrIsTerminal();

}  // namespace gemlet::cli

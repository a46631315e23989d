// Options and helpers shared by the generating subcommands (run, chat): model lookup, sampling and
// session flags, stats, terminal detection.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "runtime/generate.h"
#include "runtime/memory_report.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet::cli {

using runtime::Engine;
using runtime::GenerateOptions;
using runtime::GenerateResult;
using runtime::Session;

struct ModelOptions {
  std::string model_path;
  int threads = 0;
  int ctx = 4096;
  int batch = 512;
  std::string kv_type = "f16";
};

struct GenerationFlags {
  int max_tokens = 512;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stats = false;
  bool think = false;
  bool show_thinking = false;
};

void AddModelOptions(CLI::App& app, ModelOptions* o);
void AddGenerationOptions(CLI::App& app, GenerationFlags* g);

// The model to use: -m, else $GEMLET_MODEL, else the bundled demo model.
Result<std::string> ResolveModelPath(const std::string& flag);

// Loads the engine and creates a session; prints the KV memory it will take to stderr with --stats
// and a short "loading" line when stderr is a terminal.
struct LoadedModel {
  std::shared_ptr<const Engine> engine;
  std::unique_ptr<Session> session;
  double load_seconds = 0;
  size_t kv_bytes = 0;
};
Result<LoadedModel> LoadForGeneration(const ModelOptions& o, bool verbose);

GenerateOptions MakeGenerateOptions(const GenerationFlags& g);

// "load 0.12 s | ttft 0.35 s | prefill 412.0 tok/s | decode 21.3 tok/s | KV 64.0 MiB | peak RSS 512 MiB"
void PrintStats(const LoadedModel& m, const GenerateResult& r);

bool StdoutIsTerminal();
bool StderrIsTerminal();

}  // namespace gemlet::cli

// The flags more than one subcommand takes, each declared once (names, help, check), and the one
// function that settles each default the CLI resolves itself.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "gemlet/gemlet.hpp"

namespace gemlet::cli {

constexpr int kDefaultContext = 4096;        // -c: run, chat, serve and the tasks
constexpr const char* kDefaultKvType = "f16";  // --kv-type: half of f32's memory, the same greedy tokens

// -m/--model FILE, required: the subcommands that open a GGUF file by path (bench, logits, eval).
// run, chat, serve and the tasks take store names too (AddModelOptions).
CLI::Option* AddModelFileFlag(CLI::App& app, std::string& path, const std::string& help = "GGUF model file");

// -t/--threads N; 0, the default, is every core.
CLI::Option* AddThreadsFlag(CLI::App& app, int& threads);
// -t/--threads N,N,...: bench measures at each count (none given: every core).
CLI::Option* AddThreadsFlag(CLI::App& app, std::vector<int>& threads);
// The thread count 0 stands for, where the CLI must know the number (bench prints it): every core.
int ThreadsOrAllCores(int threads);

// -c/--ctx N, in tokens. fit names what 0 (the flag's default) means for a subcommand that sizes the
// context to its input ("prompt + decode"; ContextOrFit); without it 0 is refused and the variable's
// value is the default (kDefaultContext for the generating subcommands).
CLI::Option* AddContextFlag(CLI::App& app, int& ctx, const std::string& fit = "");
int ContextOrFit(int ctx, int needed);

// -b/--batch N: prompt tokens per forward chunk.
CLI::Option* AddBatchFlag(CLI::App& app, int& batch);

// --kv-type f16|q8_0|q4_0|f32 (eval also names a second one, --ref-kv-type). KvTypeOf reads a value
// the flag's check let through.
CLI::Option* AddKvTypeFlag(CLI::App& app, std::string& kv_type,
                           const std::string& help = "KV cache storage: f16, q8_0 (half the memory), q4_0 (28%) or f32",
                           const std::string& name = "--kv-type");
KvCacheType KvTypeOf(const std::string& kv_type);

// --mem-budget SIZE (300M, 2G); help says what the subcommand fits to it.
CLI::Option* AddMemBudgetFlag(CLI::App& app, std::string& budget, const std::string& help);

// --draft N (1 to 7): tokens drafted at most per speculative step.
CLI::Option* AddDraftFlag(CLI::App& app, int& draft, const std::string& help = "tokens drafted at most per step");

// --kernels, --no-pack, --prefetch, --no-vnni-gemm, --no-batch-invariant, --no-spin: the engine's KernelOptions (A/B
// measurements, checks against the reference kernels). Check them with Validate() after parsing.
void AddKernelFlags(CLI::App& app, KernelOptions& k);
// --thermal-limit C, --thermal-zone NAME, --no-thermal, and --thermal-root DIR (hidden: for tests).
void AddThermalFlags(CLI::App& app, ThermalOptions& t);
// --cache-dir DIR and --no-cache: where the packed-weight cache lives (EngineOptions::cache_dir).
void AddCacheFlags(CLI::App& app, std::string& dir, bool& off);
// The folder for files gemlet can rebuild: $XDG_CACHE_HOME/gemlet, else ~/.cache/gemlet ("" if
// neither is known); flag_dir when given, "" when off.
std::string CacheDir(const std::string& flag_dir, bool off);

}  // namespace gemlet::cli

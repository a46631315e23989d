// The shared flags of flags.h and the defaults they resolve.
#include "flags.h"

#include <algorithm>
#include <cstdlib>

#include "command.h"

namespace gemlet::cli {

CLI::Option* AddModelFileFlag(CLI::App& app, std::string& path, const std::string& help) {
  return app.add_option("-m,--model", path, help)->required();
}

CLI::Option* AddThreadsFlag(CLI::App& app, int& threads) {
  return app.add_option("-t,--threads", threads, "threads (default: all cores)")->check(NonNegative());
}

CLI::Option* AddThreadsFlag(CLI::App& app, std::vector<int>& threads) {
  return app.add_option("-t,--threads", threads, "thread counts (comma separated; default: all cores)")
      ->delimiter(',')->check(Positive());
}

int ThreadsOrAllCores(int threads) { return ResolveThreadCount(threads); }

CLI::Option* AddContextFlag(CLI::App& app, int& ctx, const std::string& fit) {
  if (fit.empty()) return app.add_option("-c,--ctx", ctx, "context size in tokens")->check(Positive());
  return app.add_option("-c,--ctx", ctx, "context size in tokens (default: " + fit + ")")->check(NonNegative());
}

int ContextOrFit(int ctx, int needed) { return ctx > 0 ? ctx : needed; }

CLI::Option* AddBatchFlag(CLI::App& app, int& batch) {
  return app.add_option("-b,--batch", batch, "prompt tokens per forward chunk")->check(Positive());
}

CLI::Option* AddKvTypeFlag(CLI::App& app, std::string& kv_type, const std::string& help, const std::string& name) {
  return app.add_option(name, kv_type, help)->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
}

KvCacheType KvTypeOf(const std::string& kv_type) {
  KvCacheType type = KvCacheType::kF16;
  ParseKvCacheType(kv_type, &type);  // checked by the flag's member list
  return type;
}

CLI::Option* AddMemBudgetFlag(CLI::App& app, std::string& budget, const std::string& help) {
  return app.add_option("--mem-budget", budget, help)->check([](const std::string& v) {
    return ParseByteSize(v) > 0 ? std::string() : "'" + v + "' is not a size such as 300M or 2G";
  });
}

CLI::Option* AddDraftFlag(CLI::App& app, int& draft, const std::string& help) {
  return app.add_option("--draft", draft, help)->check(CLI::Range(1, 7))->capture_default_str();
}

void AddKernelFlags(CLI::App& app, KernelOptions& k) {
  std::string names = "auto";
  for (const std::string& n : AvailableKernels()) names += ", " + n;
  app.add_option("--kernels", k.kernels, "kernels: " + names + " (auto: the best this CPU runs; ref: the scalar "
                 "reference)");
  app.add_flag("!--no-pack", k.pack_weights, "read weights as stored instead of repacking them for the kernels");
  app.add_option("--prefetch", k.prefetch_bytes,
                 "bytes decode prefetches ahead of the weight rows (0: off; -1, the default: the choice for this CPU and its kernels)")
      ->check(CLI::Range(KernelOptions::kPrefetchAuto, 1 << 20));
  app.add_flag("!--no-vnni-gemm", k.vnni_gemm, "prefill with the per-row tiles instead of the VNNI panel GEMM");
  app.add_flag("!--no-batch-invariant", k.batch_invariant, "allow faster prefill kernels whose rounding depends on "
               "how many tokens share a step (greedy output may then change with -b, the cache, other requests)");
  app.add_flag("!--no-spin", k.spin_wait, "threads sleep between the loops of a step instead of polling");
}

void AddThermalFlags(CLI::App& app, ThermalOptions& t) {
  app.add_option("--thermal-limit", t.limit_c, "skin temperature in C to stay under: above it, fewer threads, paced "
                 "tokens, shorter prompt chunks (default 42)")->check(CLI::Range(20.0, 100.0));
  app.add_option("--thermal-zone", t.zone, "the thermal zone to read, by type or thermal_zoneN (default: the first "
                 "skin, case or battery zone; none: no thermal governor)");
  app.add_option("--thermal-root", t.sysfs_root, "where the thermal zones are")->group("");
  app.add_flag("!--no-thermal", t.enabled, "no thermal governor");
}

void AddCacheFlags(CLI::App& app, std::string& dir, bool& off) {
  app.add_option("--cache-dir", dir, "where the weights packed for the kernels are kept between runs (default: "
                 "$XDG_CACHE_HOME/gemlet, else ~/.cache/gemlet)");
  app.add_flag("--no-cache", off, "pack the weights in memory, keep no cache file");
}

std::string CacheDir(const std::string& flag_dir, bool off) {
  if (off) return std::string();
  if (!flag_dir.empty()) return flag_dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') return std::string(xdg) + "/gemlet";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') return std::string(home) + "/.cache/gemlet";
  return std::string();
}

}  // namespace gemlet::cli

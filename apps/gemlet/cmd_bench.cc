// `gemlet bench`: llama-bench-style prompt (ppN) and generation (tgN) speeds, plus time to first
// token, peak RSS, bytes read per decoded token, this machine's memory read bandwidth and how close
// decoding comes to the bound that bandwidth sets.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_media.h"
#include "bench_spec.h"
#include "bench_util.h"
#include "cli_common.h"
#include "command.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/tools.hpp"

namespace gemlet::cli {
namespace {

struct Stats {
  double mean = 0, stddev = 0;
};
Stats MeanStd(const std::vector<double>& v) {
  Stats s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / static_cast<double>(v.size() - 1));  // sample stddev, as llama-bench
  }
  return s;
}

std::string ParamsShort(double n) {
  char buf[32];
  if (n >= 0.95e9) std::snprintf(buf, sizeof buf, "%.0fB", n / 1e9);
  else if (n >= 1e7) std::snprintf(buf, sizeof buf, "%.0fM", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  return buf;
}

struct TestResult {
  int n_prompt = 0, n_gen = 0, n_depth = 0, n_threads = 0;
  std::vector<uint64_t> samples_ns;
  std::vector<double> samples_ts;
};

// A chat prompt of at least `n` tokens (one user turn, rendered with the model's chat template),
// or nothing when the vocabulary cannot spell it (placeholder tokenizers).
std::vector<int32_t> TokenizeChat(const Engine& engine, const std::string& text) {
  return engine.Tokenize(text, TokenizeOptions{.add_special = true, .parse_special = true});
}

std::string ChatPromptText(const Engine& engine, int n) {
  const std::string sentence = "Summarise the following notes on memory bandwidth and caches in two sentences. ";
  std::string body;
  for (int i = 0; i < 64; ++i) {
    body += sentence;
    const Message turn{"user", body};
    auto text = engine.ApplyChatTemplate(std::span<const Message>(&turn, 1));
    if (!text.ok()) return "";
    if (static_cast<int>(TokenizeChat(engine, text.value()).size()) >= n) return text.value();
  }
  return "";
}

// The bandwidth bound measured in a child process, so that its 1 GiB buffer leaves this process's
// peak RSS alone: the probe before the tests. 0 when the child fails.
tools::BandwidthBound ProbeBandwidthInChild(int threads, size_t bytes) {
  int fds[2];
  tools::BandwidthBound bound;
  if (::pipe(fds) != 0) return bound;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const tools::BandwidthBound b = tools::MeasureReadBandwidthBound(threads, bytes);
    const double fields[3] = {b.gbs, static_cast<double>(b.best.streams), static_cast<double>(b.best.prefetch_bytes)};
    const ssize_t written = ::write(fds[1], fields, sizeof fields);
    ::_exit(written == static_cast<ssize_t>(sizeof fields) ? 0 : 1);
  }
  ::close(fds[1]);
  double fields[3] = {0, 0, 0};
  if (pid > 0 && ::read(fds[0], fields, sizeof fields) == static_cast<ssize_t>(sizeof fields)) {
    bound.gbs = fields[0];
    bound.best = {static_cast<int>(fields[1]), static_cast<size_t>(fields[2]), fields[0]};
  }
  ::close(fds[0]);
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  return bound;
}

// --peak: the probe of the sequence the engine's kernel table issues (none for the reference and
// row-tile tables, whose prefill is not built on one).
const tools::Int8Peak* PeakOf(const std::vector<tools::Int8Peak>& peaks, const std::string& kernels) {
  for (const tools::Int8Peak& p : peaks) {
    if (p.kernels == kernels) return &p;
  }
  return nullptr;
}

std::string ProbeName(const tools::BandwidthProbe& p) {
  return std::to_string(p.streams) + (p.streams == 1 ? " stream" : " streams") +
         (p.prefetch_bytes ? ", prefetch " + std::to_string(p.prefetch_bytes) + " B" : ", no prefetch");
}

// The flags of the ppN/tgN benchmark.
struct BenchFlags {
  std::string model_path, kv_type_name = kDefaultKvType, mem_budget, cache_dir;
  std::vector<int> prompts = {512}, gens = {128}, depths = {0}, threads_list;
  std::vector<std::string> lora;  // --lora FILE[:SCALE]: every test runs with these adapters
  int reps = 5, batch = 512, ttft_prompt = 200, bandwidth_mib = 1024;
  bool json = false, no_cache = false, peak = false, prepare = false;
  KernelOptions kernel_options;
};

void AddBenchFlags(CLI::App& app, BenchFlags* f) {
  AddModelFileFlag(app, f->model_path);
  app.add_option("-p,--n-prompt", f->prompts, "prompt lengths (comma separated; 0 skips)")
      ->delimiter(',')->check(NonNegative());
  app.add_option("-n,--n-gen", f->gens, "generation lengths (comma separated; 0 skips)")
      ->delimiter(',')->check(NonNegative());
  app.add_option("-d,--n-depth", f->depths, "tokens already in the context before each test (comma separated; "
                 "as llama-bench: attention at long context)")
      ->delimiter(',')->check(NonNegative());
  AddThreadsFlag(app, f->threads_list);
  app.add_option("-r,--repetitions", f->reps, "repetitions of each test")->check(Positive());
  AddBatchFlag(app, f->batch);
  app.add_option("--ttft-prompt", f->ttft_prompt, "chat prompt length for the time to first token (0 skips)")
      ->check(NonNegative());
  AddKvTypeFlag(app, f->kv_type_name);
  AddKernelFlags(app, f->kernel_options);
  AddCacheFlags(app, f->cache_dir, f->no_cache);
  AddMemBudgetFlag(app, f->mem_budget,
                   "measure under this much dirty memory (300M, 2G): the prompt chunk and KV type are chosen to fit "
                   "it as run and chat choose them, at the context the tests need");
  app.add_option("--lora", f->lora, "run every test with this LoRA adapter, FILE or FILE:SCALE (repeatable); also "
                 "times loading it and switching to and from it between two requests")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--json", f->json, "print a JSON array, one object per test (llama-bench's field names and ours)");
  app.add_option("--bandwidth-mib", f->bandwidth_mib, "the bandwidth probes' buffer (far larger than the caches)")
      ->check(CLI::Range(16, 1 << 16))->capture_default_str();
  app.add_flag("--prepare", f->prepare, "before the tests, prepare the weights as chat does while the user types "
               "(pack them, or read the packed-weight cache in from disk), timed apart: the first evaluation then "
               "pays neither, and a model larger than half the memory is measured as it runs, not as the disk reads it");
  app.add_flag("--peak", f->peak, "after the tests, probe this CPU's int8 multiply-accumulate peak for each instruction "
               "sequence the kernels use, and give each prompt test's rate as a fraction of its table's peak");
}

// What the tests measured, for both reports.
struct BenchRun {
  std::shared_ptr<Engine> engine;
  KvCacheType kv_type = KvCacheType::kF16;
  double load_cpu_ms = 0;
  int n_ctx = 0, ttft_tokens = 0;
  std::vector<TestResult> results;
  std::vector<double> ttft_by_threads, first_eval_by_threads;  // per thread count
  MemoryUsage memory;
  uint64_t peak_anon = 0;
  tools::BandwidthBound bw_before, bw_after;
  std::vector<tools::Int8Peak> peaks;  // --peak
  std::vector<AdapterUse> adapters;  // --lora
  double adapter_load_ms = 0;        // loading (mapping, checking) them
  double prepare_ms = -1;            // --prepare: PrepareWeights, or -1
  std::vector<double> switch_us;     // SetAdapters between two requests: to them and back, each
  const tools::BandwidthBound& bw() const { return bw_before.gbs > bw_after.gbs ? bw_before : bw_after; }
};

// Loads the model, timing it: wall time (what a user waits) and this thread's CPU time (what a
// busy, shared machine does not inflate).
Status LoadForBench(const BenchFlags& f, BenchRun* run) {
  timespec cpu0{}, cpu1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  EngineOptions engine_options;
  engine_options.kernels = f.kernel_options;
  engine_options.cache_dir = CacheDir(f.cache_dir, f.no_cache);
  // A benchmark measures the engine, not the thermal governor's pacing of it (docs/thermal.md).
  engine_options.thermal.enabled = false;
  auto loaded = Engine::Load(f.model_path, engine_options);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  run->load_cpu_ms = (cpu1.tv_sec - cpu0.tv_sec) * 1e3 + (cpu1.tv_nsec - cpu0.tv_nsec) * 1e-6;
  if (!loaded.ok()) return loaded.status();
  run->engine = loaded.value();
  run->kv_type = KvTypeOf(f.kv_type_name);
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::vector<AdapterUse>> adapters = LoadAdapters(*run->engine, f.lora, /*any_base=*/true);
  if (!adapters.ok()) return adapters.status();
  run->adapters = std::move(adapters).value();
  run->adapter_load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

// The session the tests of one thread count run in, fitted to --mem-budget when given.
Result<std::unique_ptr<Session>> BenchSession(const BenchFlags& f, const BenchRun& run, int n_threads) {
  SessionOptions options;
  options.n_ctx = run.n_ctx;
  options.n_threads = n_threads;
  options.max_batch = f.batch;
  options.kv_cache_type = run.kv_type;
  options.adapters = run.adapters;
  if (!f.mem_budget.empty()) {
    std::string note;
    uint64_t floor = 0;
    auto fitted = FitToBudget(*run.engine, ParseByteSize(f.mem_budget), options, &note, &floor);
    if (!fitted.ok()) return fitted.status();
    options = fitted.value();
    if (options.n_ctx < run.n_ctx) {
      return Status::Error("a memory budget of " + f.mem_budget + " fits a context of " + std::to_string(options.n_ctx) +
                           " tokens; these tests need " + std::to_string(run.n_ctx));
    }
    std::fprintf(stderr, "(memory budget %s, floor %llu MiB: %s)\n", f.mem_budget.c_str(),
                 static_cast<unsigned long long>((floor + (1 << 20) - 1) >> 20), note.empty() ? "runs as asked" : note.c_str());
  }
  return Session::Create(run.engine, options);
}

// Every test at one thread count: the warm-up (the first evaluation's cost), ppN and tgN at each
// depth, and the time to first token of the chat prompt.
Status MeasureAtThreads(const BenchFlags& f, int n_threads, const std::string& ttft_text, std::mt19937& rng,
                        BenchRun* run) {
  const ModelInfo& info = run->engine->info();
  auto random_tokens = [&](int n) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> id(4, std::max(5, info.n_vocab - 1));
    for (int32_t& t : tokens) t = id(rng);
    if (n > 0) tokens[0] = 2;  // <bos>
    return tokens;
  };
  auto created = BenchSession(f, *run, n_threads);
  if (!created.ok()) return created.status();
  Session& session = *created.value();
  std::vector<float> logits(static_cast<size_t>(info.n_vocab));
  Status status;
  auto evaluate = [&](const std::vector<int32_t>& tokens) {
    if (status.ok()) status = session.Evaluate(tokens, logits.data(), /*all_logits=*/false);
  };
  // Warm-up: page in the weights (and pack them for the kernels: they are packed on first use),
  // grow every scratch buffer, settle the thread pool. The first evaluation is what a user's
  // first prompt pays on top of its prefill.
  session.Reset();
  const double warm0 = Now();
  evaluate(random_tokens(16));
  run->first_eval_by_threads.push_back(Now() - warm0);
  evaluate({17});

  // Each repetition starts from the same n_depth-token context, prefilled untimed.
  auto reset_to_depth = [&](int depth) {
    session.Reset();
    if (depth > 0) evaluate(random_tokens(depth));
  };
  for (int depth : f.depths) {
    for (int p : f.prompts) {
      if (p <= 0) continue;
      TestResult r{p, 0, depth, n_threads, {}, {}};
      for (int i = 0; i < f.reps; ++i) {
        auto tokens = random_tokens(p);
        if (depth > 0) tokens[0] = 17;  // a continuation: no second <bos>
        reset_to_depth(depth);
        const double t0 = Now();
        evaluate(tokens);
        const double dt = Now() - t0;
        r.samples_ns.push_back(static_cast<uint64_t>(dt * 1e9));
        r.samples_ts.push_back(p / dt);
      }
      run->results.push_back(r);
    }
    for (int n : f.gens) {
      if (n <= 0) continue;
      TestResult r{0, n, depth, n_threads, {}, {}};
      for (int i = 0; i < f.reps; ++i) {
        const auto tokens = random_tokens(n);
        reset_to_depth(depth);
        const double t0 = Now();
        for (int j = 0; j < n; ++j) evaluate({tokens[j]});
        const double dt = Now() - t0;
        r.samples_ns.push_back(static_cast<uint64_t>(dt * 1e9));
        r.samples_ts.push_back(n / dt);
      }
      run->results.push_back(r);
    }
  }
  // Time to first token: from the chat prompt's text to the first (here: argmax) token, i.e.
  // tokenizing and the prefill.
  if (f.ttft_prompt > 0) {
    std::vector<double> t;
    for (int i = 0; i < f.reps; ++i) {
      session.Reset();
      const double t0 = Now();
      evaluate(ttft_text.empty() ? random_tokens(f.ttft_prompt) : TokenizeChat(*run->engine, ttft_text));
      volatile int first = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      (void)first;
      t.push_back(Now() - t0);
    }
    run->ttft_by_threads.push_back(Median(t));
  }
  return status;
}

// The mean KV bytes a tgN test reads per token, over its run's context lengths.
double KvBytesMean(const BenchRun& run, const TestResult& r) {
  double sum = 0;
  for (int j = 0; j < r.n_gen; ++j) sum += static_cast<double>(run.engine->DecodeKvBytesAt(run.kv_type, r.n_depth + j));
  return r.n_gen > 0 ? sum / r.n_gen : 0.0;
}

std::string ModelType(const ModelInfo& info) {
  return info.architecture + " " + ParamsShort(static_cast<double>(info.n_parameters)) + " " + info.file_type;
}

// llama-bench's JSON, one object per test, with gemlet's own fields after its.
void PrintJson(const BenchFlags& f, const BenchRun& run) {
  const ModelInfo& info = run.engine->info();
  const double bandwidth = run.bw().gbs * 1e9, weight_bytes = static_cast<double>(info.decode_weight_bytes);
  nlohmann::json out = nlohmann::json::array();
  char time_buf[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(time_buf, sizeof time_buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  for (const TestResult& r : run.results) {
    const Stats ns = MeanStd(std::vector<double>(r.samples_ns.begin(), r.samples_ns.end()));
    const Stats ts = MeanStd(r.samples_ts);
    const size_t ti = static_cast<size_t>(std::find(f.threads_list.begin(), f.threads_list.end(), r.n_threads) -
                                          f.threads_list.begin());
    nlohmann::json o = {
        {"build_commit", "unknown"},
        {"build_number", 0},
        {"cpu_info", CpuInfo()},
        {"gpu_info", ""},
        {"backends", "CPU"},
        {"model_filename", f.model_path},
        {"model_type", ModelType(info)},
        {"model_size", static_cast<uint64_t>(info.tensor_bytes)},
        {"model_n_params", static_cast<uint64_t>(info.n_parameters)},
        {"n_batch", f.batch},
        {"n_ubatch", f.batch},
        {"n_threads", r.n_threads},
        {"type_k", f.kv_type_name},
        {"type_v", f.kv_type_name},
        {"n_gpu_layers", 0},
        {"use_mmap", true},
        {"embeddings", false},
        {"n_prompt", r.n_prompt},
        {"n_gen", r.n_gen},
        {"n_depth", r.n_depth},
        {"test_time", time_buf},
        {"avg_ns", static_cast<uint64_t>(ns.mean)},
        {"stddev_ns", static_cast<uint64_t>(ns.stddev)},
        {"avg_ts", ts.mean},
        {"stddev_ts", ts.stddev},
        {"samples_ns", r.samples_ns},
        {"samples_ts", r.samples_ts},
        // gemlet's own fields
        {"kernels", run.engine->kernels_name()},
        {"n_ctx", run.n_ctx},
        {"load_ms", info.load_seconds * 1e3},
        {"load_model_ms", info.map_seconds * 1e3},
        {"first_eval_ms", ti < run.first_eval_by_threads.size() ? run.first_eval_by_threads[ti] * 1e3 : 0.0},
        {"packed_weight_bytes", run.memory.packed_weight_bytes},
        {"load_cpu_ms", run.load_cpu_ms},
        {"prepare_ms", run.prepare_ms},
        {"peak_rss_bytes", run.memory.peak_rss_bytes},
        {"peak_anon_bytes", run.peak_anon},
        {"packed_cache", info.packed_cache},
        {"packed_cache_ms", info.packed_cache_seconds * 1e3},
        {"packed_mapped_bytes", run.memory.packed_mapped_bytes},
        {"mem_read_bw_gbs", bandwidth / 1e9},
        {"mem_read_bw_before_gbs", run.bw_before.gbs},
        {"mem_read_bw_after_gbs", run.bw_after.gbs},
        {"mem_read_bw_probe", ProbeName(run.bw().best)},
        {"ttft_prompt_tokens", f.ttft_prompt > 0 ? run.ttft_tokens : 0},
        {"ttft_ms", ti < run.ttft_by_threads.size() ? run.ttft_by_threads[ti] * 1e3 : 0.0},
    };
    if (r.n_prompt > 0) o["prompt_macs_per_token"] = static_cast<uint64_t>(info.prompt_macs_per_token);
    if (const tools::Int8Peak* peak = PeakOf(run.peaks, run.engine->kernels_name()); peak != nullptr) {
      o["int8_peak_gmacs"] = peak->gmacs;
      o["int8_peak_sequence"] = peak->sequence;
      if (r.n_prompt > 0 && r.n_gen == 0) {
        o["peak_fraction"] = ts.mean * static_cast<double>(info.prompt_macs_per_token) / (peak->gmacs * 1e9);
      }
    }
    if (r.n_gen > 0) {
      const double kv = KvBytesMean(run, r), per_token = weight_bytes + kv;
      o["weight_bytes_per_token"] = static_cast<uint64_t>(weight_bytes);
      o["kv_bytes_per_token"] = static_cast<uint64_t>(kv);
      o["read_gbs"] = ts.mean * per_token / 1e9;
      o["bw_bound_ts"] = bandwidth / per_token;
      o["bw_fraction"] = ts.mean * per_token / bandwidth;
    }
    out.push_back(o);
  }
  std::printf("%s\n", out.dump(2).c_str());
}

// llama-bench's table, then the lines only gemlet measures.
void PrintTable(const BenchFlags& f, const BenchRun& run) {
  const ModelInfo& info = run.engine->info();
  const double model_size = static_cast<double>(info.tensor_bytes), n_params = static_cast<double>(info.n_parameters);
  const double bandwidth = run.bw().gbs * 1e9, weight_bytes = static_cast<double>(info.decode_weight_bytes);
  const std::string model_type = ModelType(info), backend = "CPU (" + run.engine->kernels_name() + ")";
  std::printf("| %-30s | %10s | %9s | %-16s | %7s | %13s | %20s |\n", "model", "size", "params", "backend", "threads",
              "test", "t/s");
  std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", std::string(30, '-').c_str(), "---------:", "--------:",
              std::string(16, '-').c_str(), "------:", "------------:", "-------------------:");
  for (const TestResult& r : run.results) {
    const Stats ts = MeanStd(r.samples_ts);
    char size[32], params[32], test[48], speed[48];
    std::snprintf(size, sizeof size, "%.2f MiB", model_size / (1024.0 * 1024.0));
    std::snprintf(params, sizeof params, "%.2f M", n_params / 1e6);
    std::snprintf(test, sizeof test, "%s%d", r.n_prompt > 0 ? "pp" : "tg", r.n_prompt > 0 ? r.n_prompt : r.n_gen);
    if (r.n_depth > 0) std::snprintf(test + std::strlen(test), sizeof test - std::strlen(test), " @ d%d", r.n_depth);
    std::snprintf(speed, sizeof speed, "%.2f ± %.2f", ts.mean, ts.stddev);
    std::printf("| %-30s | %10s | %9s | %-16s | %7d | %13s | %20s |\n", model_type.c_str(), size, params,
                backend.c_str(), r.n_threads, test, speed);
  }
  std::printf("\n");
  std::printf("model ready (mmap + checks + tokenizer): %.1f ms (%.1f ms CPU); mmap + checks + weights bound: %.1f ms\n",
              info.load_seconds * 1e3, run.load_cpu_ms, info.map_seconds * 1e3);
  if (!run.adapters.empty()) {
    uint64_t bytes = 0;
    for (const AdapterUse& a : run.adapters) bytes += a.adapter->bytes();
    std::vector<double> sw = run.switch_us;
    std::sort(sw.begin(), sw.end());
    std::printf("LoRA: %zu adapter%s, %.2f MiB, loaded in %.2f ms; switching between two requests (to the base and "
                "back): median %.1f us\n", run.adapters.size(), run.adapters.size() == 1 ? "" : "s",
                static_cast<double>(bytes) / (1024.0 * 1024.0), run.adapter_load_ms, sw.empty() ? 0.0 : sw[sw.size() / 2]);
  }
  if (run.prepare_ms >= 0) std::printf("weights prepared (--prepare: packed, or read in from the cache): %.1f ms\n", run.prepare_ms);
  for (size_t i = 0; i < run.first_eval_by_threads.size(); ++i) {
    const double packed_now = (run.memory.packed_weight_bytes - run.memory.packed_mapped_bytes) / (1024.0 * 1024.0);
    std::printf("first evaluation (16 tokens: pages in the weights and packs %.1f MiB of them for the kernels, "
                "%d threads): %.1f ms\n", packed_now, f.threads_list[i], run.first_eval_by_threads[i] * 1e3);
  }
  for (size_t i = 0; i < run.ttft_by_threads.size(); ++i) {
    std::printf("time to first token (%d-token chat prompt, %d threads): %.1f ms (median of %d)\n", run.ttft_tokens,
                f.threads_list[i], run.ttft_by_threads[i] * 1e3, f.reps);
  }
  std::printf("peak RSS: %.1f MiB, peak anonymous memory %.1f MiB (n_ctx %d)\n",
              static_cast<double>(run.memory.peak_rss_bytes) / (1024.0 * 1024.0),
              static_cast<double>(run.peak_anon) / (1024.0 * 1024.0), run.n_ctx);
  if (!info.packed_cache.empty()) {
    std::printf("packed-weight cache: %s in %.1f ms; %.1f MiB of packed weights mapped from it\n", info.packed_cache.c_str(),
                info.packed_cache_seconds * 1e3, run.memory.packed_mapped_bytes / (1024.0 * 1024.0));
  }
  const int bw_threads = *std::max_element(f.threads_list.begin(), f.threads_list.end());
  std::printf("memory read bandwidth bound (%d threads, %d MiB, best of 12 probes before and after the tests): %.2f GB/s "
              "(%s; %.2f before, %.2f after)\n",
              bw_threads, f.bandwidth_mib, bandwidth / 1e9, ProbeName(run.bw().best).c_str(), run.bw_before.gbs,
              run.bw_after.gbs);
  for (const tools::Int8Peak& p : run.peaks) {
    std::printf("int8 peak, %s (%s, %d threads): %.1f GMAC/s\n", p.kernels.c_str(), p.sequence.c_str(), bw_threads,
                p.gmacs);
  }
  if (const tools::Int8Peak* peak = PeakOf(run.peaks, run.engine->kernels_name()); peak != nullptr) {
    for (const TestResult& r : run.results) {
      if (r.n_prompt <= 0 || r.n_gen > 0) continue;
      const double macs = static_cast<double>(info.prompt_macs_per_token), ts = MeanStd(r.samples_ts).mean;
      std::printf("pp%d, %d threads: %.1f M weight MACs per prompt token -> %.1f GMAC/s, %.0f%% of the %s peak\n",
                  r.n_prompt, r.n_threads, macs / 1e6, ts * macs / 1e9, 100.0 * ts * macs / (peak->gmacs * 1e9),
                  peak->kernels.c_str());
    }
  }
  for (const TestResult& r : run.results) {
    if (r.n_gen <= 0) continue;
    const double kv = KvBytesMean(run, r), per_token = weight_bytes + kv;
    const double ts = MeanStd(r.samples_ts).mean;
    std::printf("tg%d%s, %d threads: reads %.1f MiB weights + %.2f MiB KV per token (mean over the run) -> %.2f GB/s, "
                "%.0f%% of the bandwidth bound (%.2f t/s)\n",
                r.n_gen, r.n_depth > 0 ? (" @ d" + std::to_string(r.n_depth)).c_str() : "", r.n_threads,
                weight_bytes / (1024.0 * 1024.0), kv / (1024.0 * 1024.0), ts * per_token / 1e9,
                100.0 * ts * per_token / bandwidth, bandwidth / per_token);
  }
}

int RunBench(int argc, char** argv) {
  // --spec lookup|draft measures speculative decoding instead (bench_spec.cc).
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--spec" || std::string_view(argv[i]).rfind("--spec=", 0) == 0) return RunSpecBench(argc, argv);
  }
  // --image FILE / --audio FILE measure the model's towers instead (bench_media.cc).
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--image" || arg == "--audio" || arg.rfind("--image=", 0) == 0 || arg.rfind("--audio=", 0) == 0) {
      return RunMediaBench(argc, argv);
    }
  }
  CLI::App app{"Measure prompt processing (ppN) and generation (tgN) speed like llama-bench, plus time to first token,\n"
               "peak RSS, bytes read per decoded token and the fraction of the memory bandwidth bound reached.\n"
               "With --spec lookup|draft: speculative decoding's verification cost and a workload's acceptance "
               "(gemlet bench --spec lookup --help); with --image FILE or --audio FILE: encoding through the "
               "model's towers (gemlet bench --image x --help)"};
  app.name("gemlet bench");
  BenchFlags f;
  AddBenchFlags(app, &f);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = Validate(f.kernel_options); !err.empty()) return UsageError(err);
  if (f.threads_list.empty()) f.threads_list = {ThreadsOrAllCores(0)};
  const int max_prompt = f.prompts.empty() ? 0 : *std::max_element(f.prompts.begin(), f.prompts.end());
  const int max_gen = f.gens.empty() ? 0 : *std::max_element(f.gens.begin(), f.gens.end());
  if (f.depths.empty()) f.depths = {0};
  const int max_depth = *std::max_element(f.depths.begin(), f.depths.end());
  if (max_prompt == 0 && max_gen == 0) return UsageError("nothing to measure: every -p and -n is 0");

  // The bandwidth bound before the tests (in a child: before any thread of ours starts) and after;
  // the larger is the bound.
  BenchRun run;
  const int bw_threads = *std::max_element(f.threads_list.begin(), f.threads_list.end());
  const size_t bw_bytes = static_cast<size_t>(f.bandwidth_mib) << 20;
  run.bw_before = ProbeBandwidthInChild(bw_threads, bw_bytes);
  // Peak anonymous memory over the whole run, from before the load to before the bandwidth test.
  PeakAnonSampler sampler;
  if (Status s = LoadForBench(f, &run); !s.ok()) return Fail(s.message());
  if (f.prepare) {
    const auto t0 = std::chrono::steady_clock::now();
    run.engine->PrepareWeights(nullptr, *std::max_element(f.threads_list.begin(), f.threads_list.end()));
    run.prepare_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  const std::string ttft_text = f.ttft_prompt > 0 ? ChatPromptText(*run.engine, f.ttft_prompt) : "";
  run.ttft_tokens = ttft_text.empty() ? f.ttft_prompt : static_cast<int>(TokenizeChat(*run.engine, ttft_text).size());
  // Like llama-bench, each test starts from a cache holding n_depth tokens (none by default); one
  // context fits the longest of them.
  run.n_ctx = std::max({max_depth + std::max(max_prompt, max_gen), run.ttft_tokens, 16}) + 1;
  std::mt19937 rng(1234);
  for (int n_threads : f.threads_list) {
    if (Status s = MeasureAtThreads(f, n_threads, ttft_text, rng, &run); !s.ok()) return Fail(s.message());
  }
  if (!run.adapters.empty()) {
    // What switching costs a server between two requests: SetAdapters on a session that holds a
    // prompt (the cache is let go: the next request evaluates its prompt under the new adapters).
    auto session = BenchSession(f, run, f.threads_list.front());
    if (!session.ok()) return Fail(session.message());
    const std::vector<int32_t> prompt(16, run.engine->bos_token() >= 0 ? run.engine->bos_token() : 2);
    for (int i = 0; i < 10; ++i) {
      if (Status s = session.value()->Evaluate(prompt); !s.ok()) return Fail(s.message());
      for (const std::vector<AdapterUse>& next : {std::vector<AdapterUse>{}, run.adapters}) {
        const auto t0 = std::chrono::steady_clock::now();
        if (Status s = session.value()->SetAdapters(next); !s.ok()) return Fail(s.message());
        run.switch_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  run.memory = run.engine->MeasureMemory();  // peak RSS before the bandwidth test's buffer
  sampler.Stop();
  run.peak_anon = sampler.peak();
  run.bw_after = tools::MeasureReadBandwidthBound(bw_threads, bw_bytes);
  if (f.peak) run.peaks = tools::MeasureInt8Peaks(bw_threads);
  if (f.json) {
    PrintJson(f, run);
  } else {
    PrintTable(f, run);
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("bench", "measure prompt and generation speed (llama-bench style), TTFT, RSS and bandwidth use", RunBench);

}  // namespace gemlet::cli

// Shared option handling for run and chat.
#include "cli_common.h"

#include "command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace gemlet::cli {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library

bool StdoutIsTerminal() { return ::isatty(STDOUT_FILENO) == 1; }
bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

void AddModelOptions(CLI::App& app, ModelOptions* o) {
  app.add_option("-m,--model", o->model_path, "GGUF model file (default: $GEMLET_MODEL, else the bundled demo model)");
  app.add_option("-t,--threads", o->threads, "threads (default: all cores)")->check(NonNegative());
  app.add_option("-c,--ctx", o->ctx, "context size in tokens")->check(Positive());
  app.add_option("-b,--batch", o->batch, "prompt tokens per forward chunk")->check(Positive());
  app.add_option("--kv-type", o->kv_type, "KV cache storage: f16, q8_0 (half the memory) or f32")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
}

void AddGenerationOptions(CLI::App& app, GenerationFlags* g) {
  SamplingParams& s = g->sampling;
  app.add_option("-n,--max-tokens", g->max_tokens, "new tokens at most (0: until the context is full)")
      ->check(NonNegative());
  app.add_option("--temp", s.temperature, "sampling temperature (0: greedy)");
  app.add_option("--top-k", s.top_k, "keep the k most likely tokens (0: off)");
  app.add_option("--top-p", s.top_p, "nucleus sampling threshold (1: off)");
  app.add_option("--min-p", s.min_p, "drop tokens below min-p times the best one (0: off)");
  app.add_option("--repeat-penalty", s.repeat_penalty, "penalise tokens seen recently (1: off)");
  app.add_option("--presence-penalty", s.presence_penalty, "subtract from seen tokens' logits");
  app.add_option("--frequency-penalty", s.frequency_penalty, "subtract per occurrence");
  app.add_option("--repeat-last-n", s.penalty_last_n, "tokens the penalties look back over");
  app.add_option("-s,--seed", s.seed, "random seed (same seed, same output)");
  app.add_option("--stop", g->stop, "stop before this text (repeatable)");
  app.add_flag("--stats", g->stats, "print load time, time to first token, speeds, KV memory and peak RSS");
  app.add_flag("--think", g->think, "Gemma 4: let the model think before answering");
  app.add_flag("--show-thinking", g->show_thinking, "print the thought channel (dimmed on a terminal)");
}

Result<std::string> ResolveModelPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("GEMLET_MODEL"); env && *env) return std::string(env);
  // The demo model ships in the repository; look beside the build tree first, then the cwd.
  for (const std::string& candidate : {std::string(GEMLET_DEFAULT_MODEL), std::string("models/gemlet-demo.gguf")}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return Status::Error("no model given: pass -m MODEL.gguf or set GEMLET_MODEL (the demo model " +
                       std::string(GEMLET_DEFAULT_MODEL) + " is missing)");
}

Result<LoadedModel> LoadForGeneration(const ModelOptions& o, bool verbose) {
  ASSIGN_OR_RETURN(std::string path, ResolveModelPath(o.model_path));
  const bool tty = StderrIsTerminal();
  if (tty) std::fprintf(stderr, "loading %s ...\r", path.c_str());
  LoadedModel m;
  ASSIGN_OR_RETURN(m.engine, Engine::Load(path));
  m.load_seconds = m.engine->load_seconds();
  SessionOptions so;
  so.n_ctx = o.ctx;
  so.n_threads = o.threads;
  so.max_batch = o.batch;
  ParseKvType(o.kv_type, &so.kv_type);
  m.kv_bytes = Session::PlanKvBytes(*m.engine, so);
  ASSIGN_OR_RETURN(m.session, Session::Create(m.engine, so));
  if (verbose) {
    if (tty) std::fprintf(stderr, "\r\033[K");
    MemoryReport plan = ComputeMemoryReport(m.engine->model(), m.session->n_ctx(), so.kv_type);
    plan.activations = m.session->activation_bytes();
    std::fputs(plan.ToString().c_str(), stderr);
  }
  if (tty) {
    std::fprintf(stderr, "\r\033[K");
    // Long prompts show their progress on a terminal; piped output stays clean.
    m.session->SetProgress([](int done, int total) {
      if (total < 256) return;
      std::fprintf(stderr, done < total ? "\rprompt %d/%d tokens" : "\r\033[K", done, total);
    });
  }
  return m;
}

GenerateOptions MakeGenerateOptions(const GenerationFlags& g) {
  GenerateOptions o;
  o.max_tokens = g.max_tokens;
  o.sampling = g.sampling;
  o.stop_strings = g.stop;
  return o;
}

void PrintStats(const LoadedModel& m, const GenerateResult& r) {
  const int generated = static_cast<int>(r.tokens.size());
  const double prefill_tps = r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0;
  const double decode_tps = r.decode_seconds > 0 && generated > 1 ? (generated - 1) / r.decode_seconds : 0;
  std::fprintf(stderr,
               "\n[stats] load %.2f s | prompt %d tok, ttft %.3f s, prefill %.1f tok/s | generated %d tok, decode %.1f "
               "tok/s | KV %.1f MiB | peak RSS %.1f MiB | stop: %s\n",
               m.load_seconds, r.prompt_tokens, r.prefill_seconds, prefill_tps, generated, decode_tps,
               static_cast<double>(m.kv_bytes) / (1 << 20), static_cast<double>(PeakRssBytes()) / (1 << 20),
               StopReasonName(r.stop));
  std::fputs(MeasureMemory(m.engine->model()).ToString().c_str(), stderr);
}

}  // namespace gemlet::cli

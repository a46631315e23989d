// `gemlet bench --spec lookup|draft|mtp`: what speculative decoding gives on one model. Two parts:
//
//  1. The verification cost curve: one forward of 1 + k rows (every row's logits, as a step that
//     verifies k drafts needs) against one decode step, at a context of --depth tokens, and the
//     forced-acceptance ceiling (k + 1) / cost(k): the speed-up if every draft were right.
//  2. A workload through the task presets (--task, or each line's own task): every message with and
//     without speculation, greedy. Outputs must be identical; reports the drafts kept per
//     verification step, decode tokens/s both ways, and the speed-up the cost curve projects from
//     the measured acceptance, and the break-even acceptance: the rate at which a verification step
//     (and, with a draft model, its drafting) costs exactly the tokens it yields.
//  3. The result, recorded in the model store's folder for this CPU and model file (--no-record
//     skips it): the task presets speculate only where it shows a gain.
#include "bench_spec.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "cli_common.h"
#include "command.h"
#include "store_cli.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/json_input.hpp"
#include "gemlet/store.hpp"
#include "gemlet/tasks.hpp"

namespace gemlet::cli {
namespace {

struct WorkItem {
  std::string task, style, text;
};

// A few everyday messages in both languages, for a run without --workload.
std::vector<WorkItem> BuiltInWorkload() {
  return {{"polish", "", "这个需求下周三前要上线，大家抓紧。"},
          {"polish", "", "老板说报告写的太长了，让我删一半但是重点都要保留"},
          {"rewrite", "formal", "我明天有点事，会议能不能改到下午三点以后"},
          {"rewrite", "concise", "麻烦你把上周的会议纪要再发我一份，我找不到了，谢谢啦"},
          {"polish", "", "i think we should moved the launch to next week because the tests is not finish"},
          {"rewrite", "formal", "hey can u send me the slides from yesterday asap"},
          {"polish", "", "Please find attached the report, let me know if their is any question."},
          {"rewrite", "concise", "I wanted to reach out to let you know that the meeting has been moved to Friday afternoon."}};
}

Result<std::vector<WorkItem>> ReadWorkload(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read the workload '" + path + "'");
  std::vector<WorkItem> items;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j =
        CheckJsonText(line, "workload line").ok() ? nlohmann::json::parse(line, nullptr, false) : nlohmann::json();
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      return Status::Error(path + ":" + std::to_string(line_no) + ": expected a JSON object with a \"text\" string");
    }
    WorkItem w;
    w.text = j["text"].get<std::string>();
    std::istringstream task(j.value("task", std::string("polish")));
    task >> w.task >> w.style;
    items.push_back(std::move(w));
  }
  if (items.empty()) return Status::Error("the workload '" + path + "' has no messages");
  return items;
}

// cost(k) by linear interpolation in the measured curve (k sorted, cost[0] is k = 0).
double CostAt(const std::vector<int>& ks, const std::vector<double>& cost, double k) {
  if (k <= ks.front()) return cost.front();
  for (size_t i = 1; i < ks.size(); ++i) {
    if (k <= ks[i]) {
      const double t = (k - ks[i - 1]) / (ks[i] - ks[i - 1]);
      return cost[i - 1] + t * (cost[i] - cost[i - 1]);
    }
  }
  return cost.back();
}

}  // namespace

struct SpecFlags {
  std::string model_path, spec = "lookup", draft_model, task, workload_path, store_dir;
  bool no_record = false;
  std::vector<int> ks = {1, 2, 4, 7, 8, 12, 16};
  int threads = 0, reps = 5, depth = 256, max_tokens = 128, draft = 7;
};

void AddSpecFlags(CLI::App& app, SpecFlags* f) {
  AddModelFileFlag(app, f->model_path, "GGUF model file, or NAME[:VERSION] from the model store");
  AddStoreFlag(app, &f->store_dir);
  app.add_flag("--no-record", f->no_record,
               "do not record the result in the store's folder (by default the task presets read it: they speculate on "
               "this CPU and model only where it measured a gain)");
  app.add_option("--spec", f->spec, "lookup (prompt lookup), draft (--draft-model) or mtp (Gemma 4's drafter as --draft-model)")
      ->check(CLI::IsMember({"lookup", "draft", "mtp"}))->capture_default_str();
  app.add_option("--draft-model", f->draft_model,
                 "the draft model for --spec draft (the same vocabulary), or Gemma 4's drafter (gemma4-assistant) for --spec mtp");
  AddDraftFlag(app, f->draft, "tokens drafted at most per step in the workload");
  app.add_option("--task", f->task, "run every workload message through this preset (default: each line's own task)")
      ->check(CLI::IsMember(TaskNames()));
  app.add_option("--workload", f->workload_path,
                 "JSON lines with \"text\" and optionally \"task\" (\"polish\", \"rewrite formal\"); default: 8 built-in "
                 "messages in Chinese and English");
  app.add_option("--verify-k", f->ks, "drafted tokens k to time a verification of (comma separated; 0 skips the curve)")
      ->delimiter(',')->check(NonNegative());
  app.add_option("--depth", f->depth, "tokens in the context before the timed verifications")->check(Positive())->capture_default_str();
  app.add_option("-n,--n-gen", f->max_tokens, "tokens per answer at most in the workload (0 skips it)")->check(NonNegative())
      ->capture_default_str();
  AddThreadsFlag(app, f->threads);
  app.add_option("-r,--repetitions", f->reps, "timed repetitions of each verification")->check(Positive())->capture_default_str();
}

// The workload's messages: the built-in ones or --workload's, each through --task when given.
Result<std::vector<WorkItem>> LoadWorkload(const SpecFlags& f) {
  std::vector<WorkItem> workload;
  if (f.max_tokens <= 0) return workload;
  if (f.workload_path.empty()) {
    workload = BuiltInWorkload();
  } else {
    Result<std::vector<WorkItem>> read = ReadWorkload(f.workload_path);
    if (!read.ok()) return read.status();
    workload = std::move(read).value();
  }
  if (!f.task.empty()) {
    for (WorkItem& w : workload) w = {f.task, "", w.text};
  }
  return workload;
}

// 1. Verification cost: 1 + k rows with every row's logits, from the same depth each time, as a
// multiple of one decode step (cost[0] = 1, then one per f.ks); printed as a table.
Result<std::vector<double>> MeasureVerifyCost(const SpecFlags& f, std::shared_ptr<Engine> engine, double* decode_ms) {
  const ModelInfo& info = engine->info();
  const int max_k = f.ks.back();
  SessionOptions so;
  so.n_ctx = f.depth + max_k + 2;
  so.n_threads = f.threads;
  so.rollback_tokens = max_k + 1;
  auto created = Session::Create(engine, so);
  if (!created.ok()) return created.status();
  Session& s = **created;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(4, std::max(5, info.n_vocab - 1));
  std::vector<int32_t> context(static_cast<size_t>(f.depth));
  for (int32_t& t : context) t = id(rng);
  context[0] = 2;
  std::vector<float> logits(static_cast<size_t>(max_k + 1) * info.n_vocab);
  if (Status st = s.Evaluate(context, logits.data(), false); !st.ok()) return st;
  std::vector<int> all_k = {0};
  all_k.insert(all_k.end(), f.ks.begin(), f.ks.end());
  std::vector<double> ms;
  for (int k : all_k) {
    std::vector<double> t;
    for (int r = 0; r < f.reps + 1; ++r) {  // the first one warms the scratch for this row count
      std::vector<int32_t> step(static_cast<size_t>(k + 1));
      for (int32_t& x : step) x = id(rng);
      const double t0 = Now();
      Status st = s.Evaluate(step, logits.data(), true);
      const double dt = Now() - t0;
      if (!st.ok()) return st;
      if (Status tr = s.Truncate(f.depth); !tr.ok()) return tr;
      if (r > 0) t.push_back(dt);
    }
    ms.push_back(Median(t) * 1e3);
  }
  *decode_ms = ms[0];
  std::printf("\n## verifying k drafted tokens (one forward of 1 + k rows at depth %d; median of %d)\n\n", f.depth, f.reps);
  std::printf("| k | ms | x one decode step | ceiling: (k+1) / cost |\n|---:|---:|---:|---:|\n");
  std::printf("| 0 | %.2f | 1.00 | 1.00 |\n", ms[0]);
  std::vector<double> cost = {1.0};
  for (size_t i = 0; i < f.ks.size(); ++i) {
    const double c = ms[i + 1] / ms[0];
    cost.push_back(c);
    std::printf("| %d | %.2f | %.2f | %.2f |\n", f.ks[i], ms[i + 1], c, (f.ks[i] + 1) / c);
  }
  return cost;
}

// One decode step of `engine` at f.depth, in ms (the median of f.reps): a draft model's drafting cost.
Result<double> DecodeStepMs(const SpecFlags& f, std::shared_ptr<Engine> engine) {
  SessionOptions so;
  so.n_ctx = f.depth + 2;
  so.n_threads = f.threads;
  so.rollback_tokens = 1;
  auto created = Session::Create(engine, so);
  if (!created.ok()) return created.status();
  Session& s = **created;
  std::vector<int32_t> context(static_cast<size_t>(f.depth), 5);
  context[0] = 2;
  std::vector<float> logits(static_cast<size_t>(engine->info().n_vocab));
  if (Status st = s.Evaluate(context, logits.data(), false); !st.ok()) return st;
  std::vector<double> t;
  for (int r = 0; r < f.reps + 1; ++r) {
    const std::vector<int32_t> step = {7};
    const double t0 = Now();
    if (Status st = s.Evaluate(step, logits.data(), true); !st.ok()) return st;
    if (r > 0) t.push_back(Now() - t0);
    if (Status tr = s.Truncate(f.depth); !tr.ok()) return tr;
  }
  return Median(t) * 1e3;
}

struct WorkloadResult {
  bool measured = false;  // the workload ran and speculation drafted something
  double acceptance = 0;  // kept / drafted
  double break_even = 0;  // 0: no cost curve to derive it from
  double speedup = 0;     // decode time without / with
};

// 2. The workload: each message with and without speculation, in one session each (their shared
// system prompt reused from the cache alike), the speed-up the cost curve projects and the
// break-even acceptance. draft_cost: one drafting step as a fraction of a decode step (0 for lookup,
// whose drafts are a search of the context).
Result<WorkloadResult> RunWorkload(const SpecFlags& f, std::shared_ptr<Engine> engine, std::shared_ptr<Engine> drafter,
                                   const std::vector<WorkItem>& workload, const std::vector<double>& cost, double draft_cost) {
  SessionOptions so;
  so.n_ctx = 2048;
  so.n_threads = f.threads;
  auto plain_session = Session::Create(engine, so);
  so.draft_model = drafter;
  auto spec_session = Session::Create(engine, so);
  if (!plain_session.ok()) return plain_session.status();
  if (!spec_session.ok()) return spec_session.status();
  WorkloadResult result;
  int identical = 0, tokens = 0, steps = 0, drafted = 0, accepted = 0;
  double plain_seconds = 0, spec_seconds = 0;
  std::vector<double> plain_tps, spec_tps;
  for (const WorkItem& w : workload) {
    TaskOptions to;
    to.task = w.task;
    to.style = w.style;
    to.generate.max_tokens = f.max_tokens;
    to.generate.sampling.temperature = 0;
    auto a = RunTask(**plain_session, w.text, to);
    to.generate.max_draft = f.draft;
    auto b = RunTask(**spec_session, w.text, to);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    identical += a->output == b->output;
    const GenerationStats &pa = a->stats, &pb = b->stats;
    tokens += pb.generated_tokens;
    steps += pb.draft_steps;
    drafted += pb.drafted_tokens;
    accepted += pb.accepted_tokens;
    // Decode time: everything after the first token, the part speculation changes.
    if (pa.decode_tokens_per_second > 0) {
      plain_tps.push_back(pa.decode_tokens_per_second);
      plain_seconds += (pa.generated_tokens - 1) / pa.decode_tokens_per_second;
    }
    if (pb.decode_tokens_per_second > 0) {
      spec_tps.push_back(pb.decode_tokens_per_second);
      spec_seconds += (pb.generated_tokens - 1) / pb.decode_tokens_per_second;
    }
  }
  const int n = static_cast<int>(workload.size());
  std::printf("\n## workload: %d messages%s, greedy, at most %d tokens each, --spec %s --draft %d\n\n", n,
              f.task.empty() ? "" : (" as " + f.task).c_str(), f.max_tokens, f.spec.c_str(), f.draft);
  std::printf("outputs identical with and without speculation: %d of %d\n", identical, n);
  std::printf("verification steps %d, drafted %d, kept %d (%.0f%%); kept per step %.2f, tokens per step %.2f\n", steps,
              drafted, accepted, drafted ? 100.0 * accepted / drafted : 0.0, steps ? static_cast<double>(accepted) / steps : 0.0,
              steps ? static_cast<double>(accepted + steps) / steps : 0.0);
  std::printf("decode tok/s (median over messages): %.1f without, %.1f with; whole workload's decode time %.2f s -> %.2f s "
              "(%.2fx)\n",
              Median(plain_tps), Median(spec_tps), plain_seconds, spec_seconds, spec_seconds > 0 ? plain_seconds / spec_seconds : 0.0);
  result.measured = drafted > 0 && spec_seconds > 0;
  result.acceptance = drafted ? static_cast<double>(accepted) / drafted : 0.0;
  result.speedup = spec_seconds > 0 ? plain_seconds / spec_seconds : 0.0;
  if (!cost.empty() && steps > 0) {
    std::vector<int> curve_k = {0};
    curve_k.insert(curve_k.end(), f.ks.begin(), f.ks.end());
    const double mean_drafts = static_cast<double>(drafted) / steps;
    const double step_cost = CostAt(curve_k, cost, mean_drafts) + mean_drafts * draft_cost;
    // Steps that verified drafts cost cost(mean drafts) plus their drafting; the tokens no step produced were
    // decoded one by one.
    const double verify = steps * step_cost;
    const double plain_steps = std::max(0, tokens - accepted - steps);
    std::printf("projected from the cost curve: %.2fx (%d tokens in %.1f decode-step equivalents)\n",
                tokens / (verify + plain_steps), tokens, verify + plain_steps);
    // A step of k drafts costs step_cost decode steps and yields 1 + acceptance * k tokens: it pays
    // for itself from acceptance = (step_cost - 1) / k on.
    result.break_even = mean_drafts > 0 ? (step_cost - 1) / mean_drafts : 0.0;
    std::printf("acceptance %.0f%% measured, %.0f%% to break even (%.2f drafts per step cost %.2f decode steps%s): %s\n",
                100 * result.acceptance, 100 * result.break_even, mean_drafts, step_cost,
                f.spec == "mtp"  ? ", drafting not counted: bench/mtp's gemlet_mtp_bench times it"
                : draft_cost > 0 ? ", drafting included"
                                 : "",
                result.break_even >= 1                 ? "no acceptance pays for such steps on this model"
                : result.acceptance > result.break_even ? "above, speculation should win"
                                                        : "below, speculation loses");
  } else if (steps > 0) {
    std::printf("acceptance %.0f%% measured; break-even unknown without the cost curve (--verify-k)\n", 100 * result.acceptance);
  }
  return result;
}

int RunSpecBench(int argc, char** argv) {
  CLI::App app{"Speculative decoding on one model: the cost of verifying k drafted tokens against one decode step "
               "(and the ceiling if every draft were right), then a workload through the task presets with and without "
               "speculation: drafts kept per step, tokens/s, the projected speed-up"};
  app.name("gemlet bench --spec");
  SpecFlags f;
  AddSpecFlags(app, &f);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (f.spec == "draft" && f.draft_model.empty()) return UsageError("--spec draft needs --draft-model FILE");
  if (f.spec == "mtp" && f.draft_model.empty()) return UsageError("--spec mtp needs --draft-model FILE (a gemma4-assistant file)");
  if (f.spec == "lookup" && !f.draft_model.empty()) return UsageError("--draft-model drafts for --spec draft, not lookup");
  f.ks.erase(std::remove(f.ks.begin(), f.ks.end(), 0), f.ks.end());
  std::sort(f.ks.begin(), f.ks.end());
  f.ks.erase(std::unique(f.ks.begin(), f.ks.end()), f.ks.end());
  f.threads = ThreadsOrAllCores(f.threads);
  Result<std::vector<WorkItem>> workload = LoadWorkload(f);
  if (!workload.ok()) return Fail(workload.message());

  EngineOptions eo;
  eo.thermal.enabled = false;  // the engine's speed, not the governor's pacing
  eo.memory_pressure_path = "";
  eo.n_threads = f.threads;
  Result<std::string> path = ResolveModelPath(f.model_path, f.store_dir);
  if (!path.ok()) return Fail(path.status());
  Result<std::string> draft_path = f.draft_model.empty() ? Result<std::string>(std::string()) : ResolveModelPath(f.draft_model, f.store_dir);
  if (!draft_path.ok()) return Fail("the draft model: " + draft_path.message());
  auto loaded = Engine::Load(*path, eo);
  if (!loaded.ok()) return Fail(loaded.message());
  std::shared_ptr<Engine> engine = loaded.value();
  std::shared_ptr<Engine> drafter;
  if (f.spec == "draft" || f.spec == "mtp") {
    auto d = Engine::Load(*draft_path, eo);
    if (!d.ok()) return Fail("the draft model: " + d.message());
    drafter = d.value();
    if ((f.spec == "mtp") != (drafter->info().architecture == "gemma4-assistant")) {
      return Fail("--spec " + f.spec + ": '" + *draft_path + "' is a " + drafter->info().architecture + " model" +
                  (f.spec == "mtp" ? ", not Gemma 4's drafter (gemma4-assistant)" : " (Gemma 4's drafter: --spec mtp)"));
    }
  }
  const ModelInfo& info = engine->info();
  std::printf("# gemlet bench --spec %s: %s (%s %s), %d threads, kernels %s\n# CPU: %s\n", f.spec.c_str(),
              f.model_path.c_str(), info.architecture.c_str(), info.file_type.c_str(), f.threads,
              engine->kernels_name().c_str(), CpuInfo().c_str());
  std::vector<double> cost;  // cost[0]: one decode step (k = 0), then one per ks
  double draft_cost = 0;
  if (!f.ks.empty()) {
    double decode_ms = 0;
    Result<std::vector<double>> measured = MeasureVerifyCost(f, engine, &decode_ms);
    if (!measured.ok()) return Fail(measured.message());
    cost = std::move(measured).value();
    if (drafter && f.spec == "draft") {
      Result<double> draft_ms = DecodeStepMs(f, drafter);
      if (!draft_ms.ok()) return Fail("the draft model: " + draft_ms.message());
      draft_cost = *draft_ms / decode_ms;
      std::printf("\none decode step of the draft model: %.2f ms, %.2f of the model's\n", *draft_ms, draft_cost);
    }
  }
  if (workload->empty()) return 0;
  Result<WorkloadResult> result = RunWorkload(f, engine, drafter, *workload, cost, draft_cost);
  if (!result.ok()) return Fail(result.message());
  if (f.no_record) return 0;
  if (!result->measured) {
    std::printf("nothing recorded: no draft was made on this workload\n");
    return 0;
  }
  auto store = OpenStore(f.store_dir);
  if (!store.ok()) return Fail(store.status());
  SpeculationRecord record;
  record.model = *path;
  record.spec = f.spec;
  record.draft_model = drafter ? *draft_path : std::string();
  record.max_draft = f.draft;
  record.acceptance = result->acceptance;
  record.break_even = result->break_even;
  record.speedup = result->speedup;
  if (Status st = (*store)->RecordSpeculation(record); !st.ok()) return Fail(st);
  const bool wins = result->speedup > 1;
  std::printf("recorded for this CPU and model in %s/.speculation.json: %.2fx, %s\n", (*store)->dir().c_str(),
              result->speedup,
              f.spec != "lookup" ? "for reference (the task presets draft with --spec lookup only)"
              : wins             ? "the task presets use --spec lookup on it"
                                 : "the task presets do not speculate on it");
  return 0;
}

}  // namespace gemlet::cli

// `gemlet bench` on the demo model: llama-bench's JSON fields with consistent statistics, our
// roofline figures recomputed from the file, the table form, and clean failures on bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/hf_mm_models.h"
#include "common/test_util.h"
#include "runtime/session.h"

namespace gemlet {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library
namespace {

const char* kModel = GEMLET_DEMO_MODEL;

// A 64 MiB buffer for the bandwidth probes: still far beyond the caches, and 24 probes of it are quick.
std::string Bench(const std::string& args) {
  return test::GemletBinary() + " bench -m " + kModel + (args.find("--spec") == std::string::npos ? " --bandwidth-mib 64 " : " ") + args;
}

TEST(BenchCli, JsonHasLlamaBenchFieldsAndOurs) {
  auto r = test::RunCommand(Bench("-p 16 -n 8 -t 2 -r 3 --ttft-prompt 40 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["n_prompt"], 16);
  EXPECT_EQ(j[0]["n_gen"], 0);
  EXPECT_EQ(j[1]["n_prompt"], 0);
  EXPECT_EQ(j[1]["n_gen"], 8);

  auto engine = runtime::Engine::Load(kModel);
  ASSERT_TRUE(engine.ok()) << engine.message();
  const Model& model = engine.value()->model();
  // Demo model: tied embeddings, so a decoded token reads every tensor once, the token table once
  // more (as the output head) and one row of it (the lookup).
  double file_bytes = 0, embd_row = 0;
  for (const GgufTensor& t : model.gguf().tensors()) {
    ASSERT_NE(t.name, "output.weight");
    file_bytes += static_cast<double>(t.nbytes);
    if (t.name == "token_embd.weight") embd_row = static_cast<double>(t.nbytes) / static_cast<double>(t.n_rows());
  }
  ASSERT_GT(embd_row, 0);
  double kv_sum = 0;  // f16 keys and values of every layer at positions 0..7
  for (int pos = 0; pos < 8; ++pos) {
    for (const KvLayerSpec& s : model.KvLayout()) {
      const int64_t n = s.window > 0 ? std::min<int64_t>(pos + 1, s.window) : pos + 1;
      kv_sum += static_cast<double>(n * s.n_kv_heads * (s.head_dim_k + s.head_dim_v) * 2);
    }
  }

  for (const auto& o : j) {
    EXPECT_EQ(o["n_threads"], 2);
    ASSERT_EQ(o["samples_ts"].size(), 3u);
    ASSERT_EQ(o["samples_ns"].size(), 3u);
    // avg_ts / stddev_ts: mean and sample standard deviation of samples_ts, as llama-bench.
    std::vector<double> ts = o["samples_ts"].get<std::vector<double>>();
    double mean = 0, ss = 0;
    for (double v : ts) mean += v / 3;
    for (double v : ts) ss += (v - mean) * (v - mean);
    EXPECT_GT(mean, 0);
    EXPECT_NEAR(o["avg_ts"].get<double>(), mean, 1e-9 * mean);
    EXPECT_NEAR(o["stddev_ts"].get<double>(), std::sqrt(ss / 2), 1e-6 * mean);
    const int n = o["n_prompt"].get<int>() + o["n_gen"].get<int>();
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(o["samples_ts"][i].get<double>(), n / (o["samples_ns"][i].get<double>() * 1e-9), 1e-6 * ts[i]);
    }
    EXPECT_EQ(o["model_size"].get<double>(), file_bytes);
    // Every weight was touched and the file is mapped once: its pages are part of the peak RSS.
    EXPECT_GE(o["peak_rss_bytes"].get<double>(), file_bytes);
    EXPECT_GT(o["mem_read_bw_gbs"].get<double>(), 0.1);
    // The bound is the larger of the probes before and after the tests.
    EXPECT_EQ(o["mem_read_bw_gbs"].get<double>(),
              std::max(o["mem_read_bw_before_gbs"].get<double>(), o["mem_read_bw_after_gbs"].get<double>()));
    EXPECT_GT(o["mem_read_bw_before_gbs"].get<double>(), 0.1);
    EXPECT_NE(o["mem_read_bw_probe"].get<std::string>().find("stream"), std::string::npos);
    EXPECT_GT(o["load_ms"].get<double>(), 0);
    EXPECT_GT(o["load_model_ms"].get<double>(), 0);
    EXPECT_LT(o["load_model_ms"].get<double>(), o["load_ms"].get<double>());  // the tokenizer comes after
    EXPECT_GT(o["load_cpu_ms"].get<double>(), 0);
    EXPECT_GE(o["ttft_prompt_tokens"].get<int>(), 40);
    EXPECT_GT(o["ttft_ms"].get<double>(), 0);
  }
  const auto& tg = j[1];
  const double weights = file_bytes + embd_row, kv = kv_sum / 8;
  EXPECT_EQ(tg["weight_bytes_per_token"].get<double>(), std::floor(weights));
  EXPECT_EQ(tg["kv_bytes_per_token"].get<double>(), std::floor(kv));
  const double read = tg["avg_ts"].get<double>() * (weights + kv);
  EXPECT_NEAR(tg["read_gbs"].get<double>(), read / 1e9, 1e-9 * read);
  EXPECT_NEAR(tg["bw_fraction"].get<double>(), read / (tg["mem_read_bw_gbs"].get<double>() * 1e9), 1e-9);
  EXPECT_FALSE(j[0].contains("bw_fraction"));  // a prompt test reads weights once per batch, not per token
}

// KV bytes a decode step reads at positions first..first+n-1, averaged (f16 keys and values, or
// Q8_0: 34 bytes per 32 values).
double MeanKvBytes(const Model& model, int first, int n, bool q8_0 = false) {
  double sum = 0;
  for (int pos = first; pos < first + n; ++pos) {
    for (const KvLayerSpec& s : model.KvLayout()) {
      const int64_t held = s.window > 0 ? std::min<int64_t>(pos + 1, s.window) : pos + 1;
      const int64_t values = held * s.n_kv_heads * (s.head_dim_k + s.head_dim_v);
      sum += q8_0 ? static_cast<double>(values / 32 * 34) : static_cast<double>(values * 2);
    }
  }
  return sum / n;
}

TEST(BenchCli, DepthRunsEachTestAfterThatManyTokens) {
  auto r = test::RunCommand(Bench("-p 8 -n 4 -d 0,40 -t 1 -r 1 --ttft-prompt 0 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u);
  auto engine = runtime::Engine::Load(kModel);
  ASSERT_TRUE(engine.ok()) << engine.message();
  const Model& model = engine.value()->model();
  const int depths[] = {0, 0, 40, 40}, prompts[] = {8, 0, 8, 0};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j[i]["n_depth"], depths[i]);
    EXPECT_EQ(j[i]["n_prompt"], prompts[i]);
    EXPECT_GE(j[i]["n_ctx"].get<int>(), 40 + 8);  // the deepest test fits
    EXPECT_GT(j[i]["avg_ts"].get<double>(), 0);
  }
  // Decode after 40 tokens reads the KV of positions 40..43, not 0..3.
  EXPECT_EQ(j[1]["kv_bytes_per_token"].get<double>(), std::floor(MeanKvBytes(model, 0, 4)));
  EXPECT_EQ(j[3]["kv_bytes_per_token"].get<double>(), std::floor(MeanKvBytes(model, 40, 4)));
  EXPECT_GT(j[3]["kv_bytes_per_token"].get<double>(), j[1]["kv_bytes_per_token"].get<double>());

  auto table = test::RunCommand(Bench("-p 8 -n 4 -d 40 -t 1 -r 1 --ttft-prompt 0"));
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("pp8 @ d40"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tg4 @ d40"), std::string::npos) << table.out;
}

TEST(BenchCli, Q8_0KvCacheIsReportedAndCounted) {
  auto r = test::RunCommand(Bench("-p 0 -n 4 -d 40 -t 1 -r 1 --ttft-prompt 0 --kv-type q8_0 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["type_k"], "q8_0");
  EXPECT_EQ(j[0]["type_v"], "q8_0");
  auto engine = runtime::Engine::Load(kModel);
  ASSERT_TRUE(engine.ok()) << engine.message();
  EXPECT_EQ(j[0]["kv_bytes_per_token"].get<double>(), std::floor(MeanKvBytes(engine.value()->model(), 40, 4, true)));
}

TEST(BenchCli, TablePrintsTestsAndRooflineLines) {
  auto r = test::RunCommand(Bench("-p 8 -n 4 -t 1 -r 1 --ttft-prompt 20"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* s : {" test |", "pp8", "tg4", "model ready", "time to first token", "peak RSS", "memory read bandwidth",
                        "of the bandwidth bound"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

// --spec: the verification-cost table (k = 0 is one decode step, costing 1.00 of itself) and the
// workload's figures, computed from runs whose outputs must match with and without drafts; the
// break-even acceptance beside the measured one; the result recorded in the store for the presets.
TEST(BenchCli, SpecPrintsTheVerificationCostAndTheWorkload) {
  test::TempDir store;
  auto r = test::RunCommand(Bench("--spec lookup --task polish -t 2 -r 2 -n 24 --verify-k 2,4,8 --depth 32 --store " +
                                  store.path() + " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# CPU: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 0 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" | 1.00 | 1.00 |"), std::string::npos) << r.out;
  for (const char* k : {"\n| 2 | ", "\n| 4 | ", "\n| 8 | "}) EXPECT_NE(r.out.find(k), std::string::npos) << k;
  EXPECT_NE(r.out.find("8 messages as polish"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outputs identical with and without speculation: 8 of 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("projected from the cost curve: "), std::string::npos) << r.out;
  // "acceptance A% measured, B% to break even (K drafts per step cost C decode steps): ...", where
  // B = (C - 1) / K: a step of K drafts yields 1 + A * K tokens for the C steps it costs.
  const size_t at = r.out.find("% to break even (");
  ASSERT_NE(at, std::string::npos) << r.out;
  const size_t line = r.out.rfind('\n', at) + 1;
  double acceptance = 0, break_even = 0, drafts = 0, step_cost = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + line, "acceptance %lf%% measured, %lf%% to break even (%lf drafts per step cost %lf",
                        &acceptance, &break_even, &drafts, &step_cost), 4) << r.out.substr(line, 200);
  EXPECT_GT(drafts, 0);
  EXPECT_NEAR(break_even, 100 * (step_cost - 1) / drafts, 1.0);
  // Recorded for this CPU and this model file: what the presets read.
  const auto records = test::ReadJson(store.File(".speculation.json"));
  ASSERT_TRUE(records.is_array() && records.size() == 1u) << records.dump();
  EXPECT_EQ(records[0]["spec"], "lookup");
  EXPECT_EQ(records[0]["model"], std::filesystem::weakly_canonical(kModel).string());
  EXPECT_NEAR(records[0]["acceptance"].get<double>() * 100, acceptance, 0.5);
  EXPECT_NEAR(records[0]["break_even"].get<double>() * 100, break_even, 0.5);
  EXPECT_GT(records[0]["speedup"].get<double>(), 0);
  EXPECT_NE(r.out.find("recorded for this CPU and model in " + store.path()), std::string::npos) << r.out;
  // A workload file of our own: one line per message, its task on it.
  test::TempDir dir;
  const std::string workload = dir.File("w.jsonl");
  std::ofstream(workload) << "{\"task\": \"rewrite formal\", \"text\": \"hey send me the notes\"}\n\n{\"text\": \"这个需求要上线\"}\n";
  auto w = test::RunCommand(Bench("--spec lookup -t 2 -n 16 --verify-k 0 --no-record --workload " + workload + " 2>&1"));
  ASSERT_EQ(w.exit_code, 0) << w.out;
  EXPECT_NE(w.out.find("outputs identical with and without speculation: 2 of 2"), std::string::npos) << w.out;
  EXPECT_EQ(w.out.find("| k | ms"), std::string::npos) << "--verify-k 0 skips the curve";
  EXPECT_EQ(w.out.find("recorded"), std::string::npos) << "--no-record";
  std::ofstream(workload) << "{\"task\": \"polish\"}\n";
  auto bad = test::RunCommand(Bench("--spec lookup -t 2 --workload " + workload + " 2>&1"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("w.jsonl:1: expected a JSON object with a \"text\" string"), std::string::npos) << bad.out;
  auto usage = test::RunCommand(Bench("--spec draft 2>&1"));
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_NE(usage.out.find("--spec draft needs --draft-model"), std::string::npos) << usage.out;
}

TEST(BenchCli, BadInputGivesOneClearErrorLine) {
  test::ExpectOneClearErrorLine({
      {"bench -m /nonexistent.gguf -p 8 -n 4", "cannot open"},
      {"bench -m " + std::string(GEMLET_SOURCE_DIR) + "/README.md", "not a valid GGUF"},
      {"bench -m " + std::string(kModel) + " -p 0 -n 0", "nothing to measure"},
      {"bench -m " + std::string(kModel) + " -t 0", "threads"},
      {"bench -m " + std::string(kModel) + " -r abc", "repetitions"},
      {"bench -m " + std::string(kModel) + " -p -5", "n-prompt"},
      {"bench -m " + std::string(kModel) + " -d -1", "n-depth"},
      {"bench -m " + std::string(kModel) + " --kv-type q2_k", "kv-type"},
      {"bench -m " + std::string(kModel) + " -p 16 -n 0 --mem-budget 1M", "floor"},
      {"bench -m " + std::string(kModel) + " --mem-budget lots", "mem-budget"},
      {"bench -p 8", "model"},
  });
}

// --image / --audio: the towers of a converted hf-mm checkpoint. The counts are the processor's
// (input_ids.json), the clip's length the WAV's; the derived figures follow from the samples.
TEST(BenchCli, MediaReportsEncodeTimesAndTheClipsFigures) {
  const test::HfMmModel& m = test::ConvertHfMm("gemma4_e2b_image_audio");
  const std::string dir = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma4_e2b_image_audio";
  std::ifstream ids_in(dir + "/input_ids.json");
  const auto ids = nlohmann::json::parse(ids_in);
  const std::string base = test::GemletBinary() + " bench -m " + m.model + " --mmproj " + m.mmproj + " -t 1 -r 2 --json";

  auto image = test::RunCommand(base + " --image " + dir + "/image.png");
  ASSERT_EQ(image.exit_code, 0) << image.out;
  const auto ji = nlohmann::json::parse(image.out);
  EXPECT_EQ(ji["kind"], "image");
  EXPECT_EQ(ji["soft_tokens"], ids["placeholders"]["image"]["count"]);
  ASSERT_EQ(ji["encode_ms"].size(), 2u);
  EXPECT_FALSE(ji.contains("first_token_ms"));

  auto audio = test::RunCommand(base + " --audio " + dir + "/audio.wav");
  ASSERT_EQ(audio.exit_code, 0) << audio.out;
  const auto ja = nlohmann::json::parse(audio.out);
  EXPECT_EQ(ja["kind"], "audio");
  EXPECT_EQ(ja["soft_tokens"], ids["placeholders"]["audio"]["count"]);
  const std::uintmax_t wav_bytes = std::filesystem::file_size(dir + "/audio.wav");
  EXPECT_NEAR(ja["clip_seconds"].get<double>(), (static_cast<double>(wav_bytes) - 44) / 2 / 16000, 1e-3);
  ASSERT_EQ(ja["encode_ms"].size(), 2u);
  ASSERT_EQ(ja["first_token_ms"].size(), 2u);
  const double median = ja["encode_ms_median"].get<double>();
  EXPECT_NEAR(median, 0.5 * (ja["encode_ms"][0].get<double>() + ja["encode_ms"][1].get<double>()), 1e-9);
  EXPECT_NEAR(ja["real_time_factor"].get<double>(), ja["clip_seconds"].get<double>() * 1e3 / median, 1e-6);
  EXPECT_GT(ja["peak_anon_bytes"].get<double>(), 0);

  test::ExpectOneClearErrorLine({
      {"bench -m " + m.model + " --image " + dir + "/image.png", "mmproj"},
      {"bench -m " + m.model + " --mmproj " + m.mmproj + " --image /nonexistent.png", "nonexistent"},
      {"bench -m " + m.model + " --mmproj " + m.mmproj + " --image " + dir + "/image.png --audio " + dir + "/audio.wav",
       "excludes"},
      {"bench -m " + std::string(kModel) + " --mmproj " + m.mmproj + " --audio " + dir + "/audio.wav", ""},
  });
}

}  // namespace
}  // namespace gemlet

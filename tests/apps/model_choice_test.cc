// Which model a command runs, and whether the task presets speculate, through the CLI: no model is
// one line saying how to get one (never the demo model unasked); -m demo, $GEMLET_MODEL and the
// store's default each run the model they name; the presets draft only where `gemlet bench --spec`
// recorded a gain for this CPU and model, and their greedy output is the same either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/test_util.h"
#include "gemlet/store.hpp"

namespace gemlet {
namespace {

const std::string kModel = GEMLET_DEMO_MODEL;

// The binary with a private HOME and no model from the environment, so nothing of the user's
// (their store, their $GEMLET_MODEL) takes part.
class ModelChoice : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = "env -u GEMLET_MODEL -u XDG_DATA_HOME HOME=" + home_.path() + " XDG_CACHE_HOME=" + home_.path() + "/cache ";
  }
  // `gemlet ARGS` with stdin from `input`; stdout in the result, stderr into *err.
  test::CommandResult Gemlet(const std::string& args, const std::string& input = "", std::string* err = nullptr,
                             const std::string& extra_env = "") {
    const std::string in = home_.File("in.txt"), err_file = home_.File("err.txt");
    std::ofstream(in, std::ios::binary) << input;
    auto r = test::RunCommand(env_ + extra_env + " " + test::GemletBinary() + " " + args + " < " + in + " 2>" + err_file);
    if (err) *err = test::ReadTextFile(err_file);
    return r;
  }
  std::string DefaultStore() const { return home_.path() + "/.local/share/gemlet/models"; }
  test::TempDir home_;
  std::string env_;
};

TEST_F(ModelChoice, NoModelIsOneLineThatSaysHowToGetOne) {
  for (const std::string& args : {std::string("polish"), std::string("rewrite --style formal"), std::string("run -p hi"),
                                  std::string("chat"), std::string("serve --port 0")}) {
    std::string err;
    auto r = Gemlet(args, "me and him goes to school every days.", &err);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << ": " << err;
    EXPECT_EQ(err.rfind("gemlet: no model given", 0), 0u) << args << ": " << err;
    EXPECT_NE(err.find("gemlet pull gemma4-e2b"), std::string::npos) << args << ": " << err;
  }
}

TEST_F(ModelChoice, DemoEnvironmentAndTheStoresDefaultEachRunTheirModel) {
  const std::string run = "run --no-cache -t 2 -n 6 --temp 0 -p 'Who are you?'";
  auto by_path = Gemlet(run + " -m " + kModel);
  ASSERT_EQ(by_path.exit_code, 0);
  ASSERT_FALSE(by_path.out.empty());
  // -m demo: the bundled model, by name only.
  auto demo = Gemlet(run + " -m demo");
  EXPECT_EQ(demo.exit_code, 0);
  EXPECT_EQ(demo.out, by_path.out);
  // $GEMLET_MODEL: a path, or "demo" as -m takes it.
  EXPECT_EQ(Gemlet(run, "", nullptr, "GEMLET_MODEL=" + kModel).out, by_path.out);
  EXPECT_EQ(Gemlet(run, "", nullptr, "GEMLET_MODEL=demo").out, by_path.out);

  // The store's default: none until one is set; set, it runs; its model removed, none again.
  auto store = ModelStore::Open(DefaultStore());
  ASSERT_TRUE(store.ok()) << store.message();
  InstallOptions io;
  io.source = kModel;
  ASSERT_TRUE((*store)->Install("tiny", "1", kModel, "", io).ok());
  std::string err;
  EXPECT_EQ(Gemlet(run, "", &err).exit_code, 1);
  EXPECT_NE(err.find("gemlet pull gemma4-e2b"), std::string::npos) << err;
  auto unset = Gemlet("default");
  EXPECT_EQ(unset.exit_code, 0);
  EXPECT_NE(unset.out.find("no default model"), std::string::npos) << unset.out;
  EXPECT_EQ(Gemlet("default nosuch", "", &err).exit_code, 1);
  EXPECT_NE(err.find("no model 'nosuch'"), std::string::npos) << err;
  auto set = Gemlet("default tiny");
  EXPECT_EQ(set.exit_code, 0);
  EXPECT_EQ(set.out, "tiny\n");
  auto by_default = Gemlet(run, "", &err);
  EXPECT_EQ(by_default.exit_code, 0) << err;
  EXPECT_EQ(by_default.out, by_path.out);
  // -m and $GEMLET_MODEL still come first: a file that is not a model fails, whatever the default.
  EXPECT_EQ(Gemlet(run + " -m /nonexistent.gguf").exit_code, 1);
  EXPECT_EQ(Gemlet(run, "", nullptr, "GEMLET_MODEL=/nonexistent.gguf").exit_code, 1);
  // Another store folder (--store) has its own default: none there.
  test::TempDir other;
  EXPECT_EQ(Gemlet(run + " --store " + other.path()).exit_code, 1);
  ASSERT_TRUE((*store)->Remove("tiny").ok());
  EXPECT_EQ(Gemlet(run, "", &err).exit_code, 1);
  EXPECT_NE(err.find("gemlet pull gemma4-e2b"), std::string::npos) << err;
}

// "[polish] ... decode D tok/s, SPEC: N steps, M drafted, K kept": the spec and the drafted count.
std::pair<std::string, int> SpecOf(const std::string& err) {
  const size_t at = err.find(" tok/s, ");
  if (at == std::string::npos) return {"?", -1};
  char spec[16] = {};
  int steps = 0, drafted = -1;
  if (std::sscanf(err.c_str() + at, " tok/s, %15[a-z]: %d steps, %d drafted", spec, &steps, &drafted) != 3) return {"?", -1};
  return {spec, drafted};
}

TEST_F(ModelChoice, ThePresetsSpeculateOnlyWhereAMeasurementShowedAGain) {
  // The demo model's noise breaks the contract (--lenient prints it anyway); the spec is what matters.
  const std::string polish = "polish -m " + kModel + " --no-cache -t 2 -n 8 --stats --lenient";
  const std::string input = "me and him goes to school every days.";
  std::string err;
  Gemlet(polish, input, &err);
  EXPECT_EQ(SpecOf(err).first, "none") << "no record: " << err;

  auto store = ModelStore::Open(DefaultStore());
  ASSERT_TRUE(store.ok());
  SpeculationRecord record;
  record.model = kModel;
  record.spec = "lookup";
  record.max_draft = 7;
  record.acceptance = 0.6;
  record.break_even = 0.3;
  record.speedup = 1.4;
  ASSERT_TRUE((*store)->RecordSpeculation(record).ok());
  Gemlet(polish, input, &err);
  EXPECT_EQ(SpecOf(err).first, "lookup") << "a winning record: " << err;
  // Records are the store's: another store folder holds none for this model.
  Gemlet(polish + " --store " + home_.path() + "/elsewhere", input, &err);
  EXPECT_EQ(SpecOf(err).first, "none") << err;

  record.speedup = 0.8;  // measured again: slower now, and the new record replaces the old
  ASSERT_TRUE((*store)->RecordSpeculation(record).ok());
  Gemlet(polish, input, &err);
  EXPECT_EQ(SpecOf(err).first, "none") << "a losing record: " << err;
  auto found = (*store)->FindSpeculation(kModel, "lookup");
  ASSERT_TRUE(found.ok());
  EXPECT_DOUBLE_EQ(found->speedup, 0.8);
  // --spec on the command line overrides the record either way.
  Gemlet(polish + " --spec lookup", input, &err);
  EXPECT_EQ(SpecOf(err).first, "lookup") << err;

  // A damaged record file is one clear line from bench's recording, and no speculation for the presets.
  std::ofstream(DefaultStore() + "/.speculation.json") << "[{\"speedup\": \"fast\"}]";
  Gemlet(polish, input, &err);
  EXPECT_EQ(SpecOf(err).first, "none") << err;
  EXPECT_FALSE((*store)->RecordSpeculation(record).ok());
}

TEST_F(ModelChoice, GreedyOutputIsTheSameWithAndWithoutSpeculation) {
  int drafted = 0;
  // Inputs whose answers on the demo model draw drafts (most of its short answers draw none).
  for (const std::string& input : {std::string("i think we should moved the launch to next week because the tests is not finish"),
                                   std::string("请背诵《静夜思》。")}) {
    for (const std::string& task : {std::string("polish"), std::string("rewrite --style formal")}) {
      const std::string args = task + " -m " + kModel + " --no-cache -t 2 -n 64 --lenient --stats";
      std::string err_plain, err_spec;
      auto plain = Gemlet(args + " --spec none", input, &err_plain);
      auto spec = Gemlet(args + " --spec lookup", input, &err_spec);
      EXPECT_EQ(plain.exit_code, spec.exit_code) << task << ": " << input;
      EXPECT_EQ(spec.out, plain.out) << task << ": " << input;
      EXPECT_EQ(SpecOf(err_plain), std::make_pair(std::string("none"), 0)) << err_plain;
      EXPECT_EQ(SpecOf(err_spec).first, "lookup") << err_spec;
      drafted += std::max(0, SpecOf(err_spec).second);
    }
  }
  EXPECT_GT(drafted, 0) << "no draft was made: the comparison tested nothing";
}

}  // namespace
}  // namespace gemlet

// The task presets' output contract, end to end through the CLI on scripted Gemma 4 models (the
// real vocabulary and template; each plays one answer, written by `gemlet synth --script`):
// stdout carries the result alone (no thought, no lead-in, no fences, no banner), exit 0 / 1 / 2,
// empty input refused, long input summarized in parts or refused. And the public API's RunTask on
// the demo model, glossary terms included.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/tasks.hpp"

namespace gemlet {
namespace {

// Scripted answers, as the model would emit them: thinking first, a lead-in line, a fence.
const std::map<std::string, std::string> kAnswers = {
    {"zh", "<|channel>thought\n改正标点。<channel|>以下是润色后的消息：\n\n请把会议纪要发给我。<turn|>"},
    {"en", "Here is the polished message:\nPlease send me the meeting notes.<turn|>"},
    {"sql", "```sql\nSELECT month, SUM(amount) FROM sales GROUP BY month;\n```<turn|>"},
    {"summary", "- 要点：周三上线<turn|>"},
};

class TaskCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    // The 262k vocabulary once, then one model per answer.
    const std::string vocab = dir_->File("vocab.gguf");
    ASSERT_EQ(std::system(("xz -dc " + std::string(GEMLET_TESTDATA_DIR) + "/tokenizer/gemma4/ggml-vocab-gemma-4.gguf.xz > " +
                           vocab).c_str()),
              0);
    for (const auto& [name, answer] : kAnswers) {
      const std::string script = dir_->File(name + ".json");
      std::ofstream(script) << nlohmann::json({{"answers", {answer}}}).dump();
      const auto r = test::RunCommand(test::GemletBinary() + " synth --script " + script + " --tokenizer " + vocab + " -o " +
                                      Model(name) + " 2>&1");
      ASSERT_EQ(r.exit_code, 0) << r.out;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Model(const std::string& name) { return dir_->File(name + ".gguf"); }
  // `gemlet TASK -m MODEL FLAGS` with stdin from `input`; stderr to its own file.
  static test::CommandResult Task(const std::string& task, const std::string& model, const std::string& input,
                                  const std::string& flags = "", std::string* err = nullptr) {
    const std::string in = dir_->File("in.txt"), err_file = dir_->File("err.txt");
    std::ofstream(in, std::ios::binary) << input;
    auto r = test::RunCommand(test::GemletBinary() + " " + task + " -m " + model + " --no-cache -t 2 " + flags + " < " + in +
                              " 2>" + err_file);
    if (err) *err = test::ReadTextFile(err_file);
    return r;
  }
  static test::TempDir* dir_;
};
test::TempDir* TaskCli::dir_ = nullptr;

TEST_F(TaskCli, StdoutCarriesTheResultAlone) {
  std::string err;
  auto zh = Task("polish", Model("zh"), "请把会议纪要发给我", "", &err);
  EXPECT_EQ(zh.exit_code, 0) << err;
  EXPECT_EQ(zh.out, "请把会议纪要发给我。\n");  // no thought, no lead-in line
  EXPECT_EQ(err, "");                          // and nothing else either: no banner, no stats
  auto en = Task("rewrite", Model("en"), "send me teh notes", "--style concise");
  EXPECT_EQ(en.exit_code, 0);
  EXPECT_EQ(en.out, "Please send me the meeting notes.\n");
  auto sql = Task("sql", Model("sql"), "每个月的销售额", "");
  EXPECT_EQ(sql.exit_code, 0);
  EXPECT_EQ(sql.out, "SELECT month, SUM(amount) FROM sales GROUP BY month;\n");  // no fence
  for (const char* task : {"summarize", "explain"}) {
    auto r = Task(task, Model("summary"), "这个需求下周三前要上线。");
    EXPECT_EQ(r.exit_code, 0) << task;
    EXPECT_EQ(r.out, "- 要点：周三上线\n") << task;
  }
  auto translated = Task("translate", Model("en"), "请把会议纪要发给我", "--to en");
  EXPECT_EQ(translated.exit_code, 0);
  EXPECT_EQ(translated.out, "Please send me the meeting notes.\n");
  // -f FILE reads the same as stdin.
  std::ofstream(dir_->File("note.txt")) << "请把会议纪要发给我";
  auto from_file = Task("polish", Model("zh"), "", "-f " + dir_->File("note.txt"));
  EXPECT_EQ(from_file.exit_code, 0);
  EXPECT_EQ(from_file.out, "请把会议纪要发给我。\n");
}

TEST_F(TaskCli, BadInputAndUsageExitOneAndTwo) {
  std::string err;
  for (const std::string& empty : {std::string(""), std::string(" \n\t\n")}) {
    auto r = Task("polish", Model("zh"), empty, "", &err);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(err.find("the input is empty"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  struct Case {
    std::string task, flags, expect;
  };
  for (const Case& c : {Case{"translate", "", "--to is required"}, Case{"translate", "--to klingon", "unknown language 'klingon'"},
                        Case{"rewrite", "--style pirate", "unknown style 'pirate'"}, Case{"polish", "--nope", "--nope"}}) {
    auto r = Task(c.task, Model("zh"), "你好", c.flags, &err);
    EXPECT_EQ(r.exit_code, 2) << c.task << " " << c.flags << ": " << err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(err.find(c.expect), std::string::npos) << err;
  }
  auto missing = Task("polish", Model("zh"), "x", "-f /nonexistent/file.txt", &err);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(err.find("cannot read the input file '/nonexistent/file.txt'"), std::string::npos) << err;
}

TEST_F(TaskCli, LongInputIsSummarizedInPartsAndRefusedByTheOthers) {
  std::string text;
  for (int i = 0; i < 150; ++i) text += "第" + std::to_string(i) + "条：这个需求下周三前要上线，大家抓紧。\n";
  std::string err;
  auto summary = Task("summarize", Model("summary"), text, "-c 512 --stats", &err);
  EXPECT_EQ(summary.exit_code, 0) << err;
  EXPECT_EQ(summary.out, "- 要点：周三上线\n");
  const size_t parts_at = err.find(" parts,");
  ASSERT_NE(parts_at, std::string::npos) << err;  // "--stats": "..., N parts, ..." with N > 1
  auto polish = Task("polish", Model("zh"), text, "-c 512", &err);
  EXPECT_EQ(polish.exit_code, 1);
  EXPECT_EQ(polish.out, "");
  EXPECT_NE(err.find("summarize takes long inputs in parts"), std::string::npos) << err;
}

TEST(TaskApi, TheDemoModelRunsEveryTaskAndListsGlossaryTerms) {
  EngineOptions eo;
  eo.memory_pressure_path = "";
  auto engine = Engine::Load(GEMLET_DEMO_MODEL, eo);
  ASSERT_TRUE(engine.ok()) << engine.message();
  SessionOptions so;
  so.n_ctx = 1024;
  auto session = Session::Create(*engine, so);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(TaskNames(), (std::vector<std::string>{"polish", "summarize", "rewrite", "translate", "explain", "sql"}));
  const std::string glossary = "毛肚\tbeef tripe\t火锅\n钵钵鸡\tbobo chicken\nGemlet\tGemlet\tproduct\n";
  for (const std::string& task : TaskNames()) {
    TaskOptions o;
    o.task = task;
    o.to = task == "translate" ? "en" : "";
    o.glossary = glossary;
    o.generate.max_tokens = 12;
    o.generate.sampling.temperature = 0;
    Result<TaskReply> r = RunTask(**session, "今晚吃毛肚和钵钵鸡，用 gemlet 记下来。", o);
    ASSERT_TRUE(r.ok()) << task << ": " << r.message();
    EXPECT_EQ(r->input_language, "zh-Hans") << task;
    EXPECT_EQ(r->answer_language, task == "translate" ? "en" : "zh-Hans") << task;
    EXPECT_EQ(r->glossary_terms, (std::vector<std::string>{"毛肚", "钵钵鸡", "Gemlet"})) << task;
    EXPECT_LE(r->stats.generated_tokens, 12);
  }
  EXPECT_EQ(DetectLanguageTag("這是繁體字"), "zh-Hant");
  TaskOptions bad;
  bad.task = "polish";
  bad.glossary = "a\tb\tc\td\n";
  EXPECT_EQ(RunTask(**session, "a", bad).status().code(), StatusCode::kError);
  bad.task = "haiku";
  EXPECT_EQ(RunTask(**session, "a", bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gemlet

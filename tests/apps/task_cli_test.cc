// The task presets' output contract, end to end through the CLI on scripted Gemma 4 models (the
// real vocabulary and template; each plays one answer, written by `gemlet synth --script`):
// stdout carries the result alone (no thought, no lead-in, no fences, no banner), exit 0 / 1 / 2,
// empty input refused, long input summarized in parts or refused, glossary terms held (repaired or
// reported). And the public API's RunTask on the demo model, glossary terms included.
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
    // Glossary terms as a model mangles them: another case, left untranslated, lost.
    {"terms_zh", "今晚吃毛肚和钵钵鸡，用 GEMLET 记下来。<turn|>"},
    {"terms_en", "Tonight: 毛肚 and BOBO chicken, noted in gemlet.<turn|>"},
    {"terms_lost", "今晚吃毛豆和钵钵鸡。<turn|>"},
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

TEST_F(TaskCli, TheGlossaryHoldsInChineseAndEnglish) {
  const std::string glossary = dir_->File("terms.tsv");
  std::ofstream(glossary) << "# term\trendering\tnote\n毛肚\tbeef tripe\t火锅\n钵钵鸡\tBobo Chicken\nGemlet\tGemlet\tproduct\n";
  const std::string input = "今晚吃毛肚和钵钵鸡，用 gemlet 记下来";
  std::string err;
  // Polish keeps the terms verbatim: the glossary's case of "Gemlet" comes back.
  auto polish = Task("polish", Model("terms_zh"), input, "--glossary " + glossary, &err);
  EXPECT_EQ(polish.exit_code, 0) << err;
  EXPECT_EQ(polish.out, "今晚吃毛肚和钵钵鸡，用 Gemlet 记下来。\n");
  EXPECT_EQ(err, "");
  // Translate renders them as given: 毛肚 left untranslated, "BOBO chicken" in another case.
  auto translate = Task("translate", Model("terms_en"), input, "--to en --glossary " + glossary, &err);
  EXPECT_EQ(translate.exit_code, 0) << err;
  EXPECT_EQ(translate.out, "Tonight: beef tripe and Bobo Chicken, noted in Gemlet.\n");
  EXPECT_EQ(err, "");
  // A term the answer lost: a warning naming it (the answer still printed), or with
  // --glossary-strict an error and nothing on stdout.
  auto lost = Task("rewrite", Model("terms_lost"), input, "--glossary " + glossary, &err);
  EXPECT_EQ(lost.exit_code, 0) << err;
  EXPECT_EQ(lost.out, "今晚吃毛豆和钵钵鸡。\n");
  EXPECT_EQ(err, "gemlet rewrite: warning: the answer lacks the glossary's '毛肚'\n"
                 "gemlet rewrite: warning: the answer lacks the glossary's 'Gemlet'\n");
  auto strict = Task("rewrite", Model("terms_lost"), input, "--glossary-strict --glossary " + glossary, &err);
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_EQ(strict.out, "");
  EXPECT_NE(err.find("error: the answer lacks the glossary's '毛肚'"), std::string::npos) << err;
  // Without a glossary nothing is required, and a term absent from the input is never asked for.
  EXPECT_EQ(Task("rewrite", Model("terms_lost"), input, "", &err).exit_code, 0);
  EXPECT_EQ(err, "");
  EXPECT_EQ(Task("rewrite", Model("terms_lost"), "今晚吃钵钵鸡", "--glossary-strict --glossary " + glossary, &err).exit_code, 0) << err;
  // A bad glossary line is an input error.
  std::ofstream(dir_->File("bad.tsv")) << "a\tb\tc\td\n";
  auto bad = Task("polish", Model("terms_zh"), input, "--glossary " + dir_->File("bad.tsv"), &err);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(err.find("glossary line 1"), std::string::npos) << err;
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
  EXPECT_EQ(TaskNames(), (std::vector<std::string>{"polish", "summarize", "rewrite", "translate", "explain", "sql",
                                                   "describe", "transcribe"}));
  const std::string glossary = "毛肚\tbeef tripe\t火锅\n钵钵鸡\tbobo chicken\nGemlet\tGemlet\tproduct\n";
  for (const std::string& task : TaskNames()) {
    if (task == "describe" || task == "transcribe") continue;  // an image, a clip: tests/api/media_api_test.cc
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
    // Whatever the tiny model writes, each required form is in the output or reported missing.
    const bool requires_terms = task == "polish" || task == "rewrite" || task == "translate";
    const std::vector<std::string> forms = task == "translate" ? std::vector<std::string>{"beef tripe", "bobo chicken", "Gemlet"}
                                                               : std::vector<std::string>{"毛肚", "钵钵鸡", "Gemlet"};
    for (const std::string& form : forms) {
      const bool in_output = r->output.find(form) != std::string::npos;
      const bool missing = std::count(r->glossary_missing.begin(), r->glossary_missing.end(), form) > 0;
      EXPECT_EQ(missing, requires_terms && !in_output) << task << ": " << form << " in '" << r->output << "'";
    }
    for (const std::string& form : r->glossary_repaired) EXPECT_NE(r->output.find(form), std::string::npos) << task;
  }
  EXPECT_EQ(DetectLanguageTag("這是繁體字"), "zh-Hant");
  TaskOptions bad;
  bad.task = "polish";
  bad.glossary = "a\tb\tc\td\n";
  EXPECT_EQ(RunTask(**session, "a", bad).status().code(), StatusCode::kError);
  bad.task = "haiku";
  EXPECT_EQ(RunTask(**session, "a", bad).status().code(), StatusCode::kInvalidArgument);
}

// `gemlet langid`: the tag DetectLanguageTag gives, on stdout; --lines tags each line of a labelled
// set as the library does; empty or malformed input is refused with one line and exit 1.
TEST(LangidCli, PrintsTheDetectedTag) {
  test::TempDir dir;
  const std::string in = dir.File("in.txt");
  auto langid = [&](const std::string& input, const std::string& flags = "") {
    std::ofstream(in, std::ios::binary) << input;
    return test::RunCommand(test::GemletBinary() + " langid " + flags + " < " + in + " 2>&1");
  };
  auto fr = langid("Bonjour, pouvez-vous m'aider ?\n");
  EXPECT_EQ(fr.exit_code, 0);
  EXPECT_EQ(fr.out, "fr\n");
  // Each line's tag is the library's for that line (an empty line stays empty).
  const std::vector<std::string> lines = {"这个需求下周三前要上线。", "這個 bug 只在 iOS 上出現", "", "明日の会議は午後三時からです。",
                                          "Können Sie mir bitte helfen?"};
  std::string input, expected;
  for (const std::string& l : lines) {
    input += l + "\n";
    expected += (l.empty() ? std::string() : DetectLanguageTag(l)) + "\n";
  }
  auto each = langid(input, "--lines");
  EXPECT_EQ(each.exit_code, 0);
  EXPECT_EQ(each.out, expected);
  EXPECT_EQ(each.out, "zh-Hans\nmixed\n\nja\nde\n");
  auto list = langid("", "--list");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_EQ(static_cast<size_t>(std::count(list.out.begin(), list.out.end(), '\n')), DetectableLanguages().size());
  EXPECT_NE(list.out.find("nb\tNorwegian Bokm"), std::string::npos) << list.out;
  for (const std::string& bad : {std::string(" \n"), std::string("caf\xe9\n")}) {
    auto r = langid(bad);
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_EQ(r.out.rfind("gemlet: langid: ", 0), 0u) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
}

}  // namespace
}  // namespace gemlet

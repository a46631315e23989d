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
    // Lead-ins on the result's own line, one after another, around quotes; one with no clear cut.
    {"sure_inline", "Sure! Here is the polished message: \"Please send me the meeting notes.\"<turn|>"},
    {"sure_line", "Sure!\n\nPlease send me the meeting notes.<turn|>"},
    {"zh_inline", "好的，以下是润色后的内容：“请把会议纪要发给我。”<turn|>"},
    {"lead_only", "Here is a more polished way to say what you wrote<turn|>"},
    {"sure_kept", "Sure, I will come at 3pm.<turn|>"},
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
  // A term the answer lost: an error naming it, exit 5 and nothing on stdout (--glossary-strict,
  // the old name of that, still accepted); with --lenient a warning, the answer printed.
  for (const std::string& flags : {std::string(""), std::string("--glossary-strict ")}) {
    auto lost = Task("rewrite", Model("terms_lost"), input, flags + "--glossary " + glossary, &err);
    EXPECT_EQ(lost.exit_code, 5) << flags << err;
    EXPECT_EQ(lost.out, "");
    EXPECT_EQ(err, "gemlet rewrite: error: the answer lacks the glossary's '毛肚'\n"
                   "gemlet rewrite: error: the answer lacks the glossary's 'Gemlet'\n");
  }
  auto lenient = Task("rewrite", Model("terms_lost"), input, "--lenient --glossary " + glossary, &err);
  EXPECT_EQ(lenient.exit_code, 0) << err;
  EXPECT_EQ(lenient.out, "今晚吃毛豆和钵钵鸡。\n");
  EXPECT_EQ(err, "gemlet rewrite: warning: the answer lacks the glossary's '毛肚'\n"
                 "gemlet rewrite: warning: the answer lacks the glossary's 'Gemlet'\n");
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

// The contract's other outcomes: lead-ins taken off or failed (3), another language (4), cut off (3);
// --lenient prints with a warning; the exit codes are in --help.
TEST_F(TaskCli, TheContractHoldsOrTheExitCodeSaysWhy) {
  std::string err;
  for (const char* model : {"sure_inline", "sure_line"}) {
    auto r = Task("polish", Model(model), "pls send me teh meeting notes", "", &err);
    EXPECT_EQ(r.exit_code, 0) << model << ": " << err;
    EXPECT_EQ(r.out, "Please send me the meeting notes.\n") << model;
    EXPECT_EQ(err, "") << model;
  }
  auto zh = Task("polish", Model("zh_inline"), "请把会议纪要发给我", "", &err);
  EXPECT_EQ(zh.exit_code, 0) << err;
  EXPECT_EQ(zh.out, "请把会议纪要发给我。\n");
  // An input that opens with "Sure" keeps it: it is the user's word, not a lead-in.
  auto kept = Task("polish", Model("sure_kept"), "sure i will come at 3pm", "", &err);
  EXPECT_EQ(kept.exit_code, 0) << err;
  EXPECT_EQ(kept.out, "Sure, I will come at 3pm.\n");
  // A lead-in with no clear cut: not a result.
  auto lead = Task("polish", Model("lead_only"), "pls send me teh meeting notes", "", &err);
  EXPECT_EQ(lead.exit_code, 3) << err;
  EXPECT_EQ(lead.out, "");
  EXPECT_EQ(err, "gemlet polish: error: the answer opens with a lead-in, not the result: 'Here is a more polished way to say "
                 "what '\ngemlet polish: error: the answer keeps 0% of the input's words: it is not a polish of it\n");
  // An answer about something else: a polish keeps most of the input's words.
  auto unrelated = Task("polish", Model("en"), "the quarterly budget review is due on monday", "", &err);
  EXPECT_EQ(unrelated.exit_code, 3) << err;
  EXPECT_EQ(unrelated.out, "");
  EXPECT_EQ(err, "gemlet polish: error: the answer keeps 12% of the input's words: it is not a polish of it\n");  // "the"
  // Chinese polished into English: another language.
  auto language = Task("polish", Model("en"), "请把会议纪要发给我", "", &err);
  EXPECT_EQ(language.exit_code, 4) << err;
  EXPECT_EQ(language.out, "");
  EXPECT_EQ(err, "gemlet polish: error: the answer is in en, not zh-Hans\n");
  // ... and printed with --lenient, the breach a warning.
  auto lenient = Task("polish", Model("en"), "请把会议纪要发给我", "--lenient", &err);
  EXPECT_EQ(lenient.exit_code, 0) << err;
  EXPECT_EQ(lenient.out, "Please send me the meeting notes.\n");
  EXPECT_EQ(err, "gemlet polish: warning: the answer is in en, not zh-Hans\n");
  // English to English through translate --to en is no breach; --to zh is.
  EXPECT_EQ(Task("translate", Model("en"), "请把会议纪要发给我", "--to en", &err).exit_code, 0) << err;
  EXPECT_EQ(Task("translate", Model("en"), "send me the notes", "--to zh", &err).exit_code, 4) << err;
  // Cut off at -n: the scripted answer is longer than 3 tokens.
  auto cut = Task("polish", Model("sure_kept"), "sure i will come at 3pm", "-n 3", &err);
  EXPECT_EQ(cut.exit_code, 3) << err;
  EXPECT_EQ(cut.out, "");
  EXPECT_NE(err.find("cut off at the token limit"), std::string::npos) << err;
  // The codes are documented where a user looks.
  auto help = test::RunCommand(test::GemletBinary() + " polish --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* s : {"3 not a result", "4 in another language", "5 a glossary term missing", "--lenient"}) {
    EXPECT_NE(help.out.find(s), std::string::npos) << s;
  }
}

// The contract through the public API, without a model: lead-ins cut or reported, language judged
// only where the detector can tell, the glossary's missing terms, a cut-off answer.
TEST(TaskApi, CheckTaskContractNamesEachBreach) {
  TaskOptions o;
  o.task = "polish";
  auto prompt = TaskMessages("me and him goes to school", o);
  ASSERT_TRUE(prompt.ok());
  const auto kinds = [](const std::vector<TaskViolation>& v) {
    std::vector<std::string> out;
    for (const TaskViolation& x : v) out.push_back(TaskViolationName(x.kind));
    return out;
  };
  const auto check = [&](const std::string& answer, StopReason stop = StopReason::kEndOfTurn) {
    return kinds(CheckTaskContract("me and him goes to school", *prompt, FinishTaskOutput(answer, *prompt), stop));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(FinishTaskOutput("Certainly! Here's the corrected sentence: \"He and I go to school.\"", *prompt).text,
            "He and I go to school.");
  EXPECT_EQ(FinishTaskOutput("Okay.\nHe and I go to school.", *prompt).text, "He and I go to school.");
  EXPECT_EQ(check("He and I go to school."), V{});
  EXPECT_EQ(check("Me and him go to school."), V{});
  EXPECT_EQ(check("Here is my attempt at it"), (V{"not-a-result", "unrelated"}));
  EXPECT_EQ(check(""), V{"not-a-result"});
  EXPECT_EQ(check("他和我去上学。"), V{"language"}) << "shares no words, but that is the language's breach";
  EXPECT_EQ(check("He and I go to school", StopReason::kMaxTokens), V{"incomplete"});
  EXPECT_EQ(check("The weather is nice today."), V{"unrelated"}) << "none of its 6 words kept";
  EXPECT_EQ(check("12345"), V{"unrelated"}) << "no text to judge the language of, none of the words";
  // Traditional for a Simplified input is another script; Simplified-looking text for a Traditional
  // input is not doubted (the detector reads Chinese without Traditional-only characters as Simplified).
  auto zh = TaskMessages("这个需求下周三前要上线", o);
  ASSERT_TRUE(zh.ok());
  EXPECT_EQ(kinds(CheckTaskContract("", *zh, FinishTaskOutput("這個需求下週三前要上線。", *zh), StopReason::kEndOfTurn)), V{"language"});
  auto hant = TaskMessages("這個需求下週三前要上線", o);
  ASSERT_TRUE(hant.ok());
  EXPECT_EQ(kinds(CheckTaskContract("", *hant, FinishTaskOutput("大家好。", *hant), StopReason::kEndOfTurn)), V{});
  // sql answers in SQL whatever the question's language.
  o.task = "sql";
  auto sql = TaskMessages("每个月的销售额", o);
  ASSERT_TRUE(sql.ok());
  EXPECT_EQ(kinds(CheckTaskContract("", *sql, FinishTaskOutput("SELECT month, SUM(amount) FROM sales GROUP BY month;", *sql),
                                    StopReason::kEndOfTurn)),
            V{});
  // A missing glossary term.
  o.task = "rewrite";
  o.glossary = "Gemlet\tGemlet\n";
  auto g = TaskMessages("gemlet is fast", o);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(kinds(CheckTaskContract("gemlet is fast", *g, FinishTaskOutput("It is fast.", *g), StopReason::kEndOfTurn)),
            V{"glossary"});
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

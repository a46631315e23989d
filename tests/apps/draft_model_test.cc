// Speculative decoding with a draft model through the public API and the CLI (#22): the demo model
// drafted by its own Q4_0 requantization (the same vocabulary, other weights) answers exactly as
// without drafts, in a session, a chat over several turns, and a task preset; a model of another
// vocabulary is refused at Create; `--draft-model` and `--spec draft` say what is wrong.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/tasks.hpp"

namespace gemlet {
namespace {

class DraftModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const auto r = test::RunCommand(test::GemletBinary() + " quantize --allow-requantize " + std::string(GEMLET_DEMO_MODEL) +
                                    " " + DraftPath() + " Q4_0 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string DraftPath() { return dir_->File("demo-q4_0.gguf"); }
  static std::shared_ptr<Engine> Load(const std::string& path) {
    EngineOptions eo;
    eo.memory_pressure_path = "";
    auto e = Engine::Load(path, eo);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  static GenerateOptions Options(float temperature, int max_draft) {
    GenerateOptions g;
    g.max_tokens = 40;
    g.sampling.temperature = temperature;
    g.sampling.seed = 11;
    g.max_draft = max_draft;
    return g;
  }
  static test::TempDir* dir_;
};
test::TempDir* DraftModel::dir_ = nullptr;

TEST_F(DraftModel, SessionsAndChatsAnswerAsWithoutDrafts) {
  auto target = Load(GEMLET_DEMO_MODEL), draft = Load(DraftPath());
  ASSERT_TRUE(target && draft);
  SessionOptions plain_options;
  plain_options.n_ctx = 512;
  plain_options.n_threads = 2;
  SessionOptions draft_options = plain_options;
  draft_options.draft_model = draft;
  const std::vector<int32_t> prompt = target->Tokenize("The quick brown fox jumps over the lazy dog. The quick brown", {.add_special = true});
  for (float temperature : {0.0f, 0.8f}) {
    auto plain = Session::Create(target, plain_options);
    auto spec = Session::Create(target, draft_options);
    ASSERT_TRUE(plain.ok() && spec.ok()) << spec.message();
    auto a = (*plain)->Generate(prompt, Options(temperature, 0));
    auto b = (*spec)->Generate(prompt, Options(temperature, 7));
    ASSERT_TRUE(a.ok() && b.ok()) << b.message();
    EXPECT_EQ(b->tokens, a->tokens) << "temperature " << temperature;
    EXPECT_GT(b->stats.draft_steps, 0);
    EXPECT_GT(b->stats.accepted_tokens, 0) << "a requantized copy should guess some tokens";
    std::printf("[ draft    ] T=%.1f: %d steps, %d drafted, %d kept\n", temperature, b->stats.draft_steps,
                b->stats.drafted_tokens, b->stats.accepted_tokens);
  }
  // A chat: the draft's own cache follows the turns (prefix reuse, the last token pending).
  ConversationOptions plain_chat, draft_chat;
  plain_chat.session = plain_options;
  draft_chat.session = draft_options;
  auto c1 = Conversation::Create(target, plain_chat);
  auto c2 = Conversation::Create(target, draft_chat);
  ASSERT_TRUE(c1.ok() && c2.ok()) << c2.message();
  for (const char* turn : {"你好，请介绍一下你自己。", "Now say it in English.", "再短一点。"}) {
    auto a = (*c1)->Send(turn, Options(0, 0));
    auto b = (*c2)->Send(turn, Options(0, 7));
    ASSERT_TRUE(a.ok() && b.ok()) << b.message();
    EXPECT_EQ(b->text, a->text) << turn;
    EXPECT_EQ(b->tokens, a->tokens) << turn;
  }
  // A task preset on a drafting session.
  auto s1 = Session::Create(target, plain_options);
  auto s2 = Session::Create(target, draft_options);
  ASSERT_TRUE(s1.ok() && s2.ok());
  TaskOptions task;
  task.task = "polish";
  task.generate = Options(0, 0);
  auto t1 = RunTask(**s1, "今晚吃火锅，记得带上钱包。", task);
  task.generate.max_draft = 7;
  auto t2 = RunTask(**s2, "今晚吃火锅，记得带上钱包。", task);
  ASSERT_TRUE(t1.ok() && t2.ok()) << t2.message();
  EXPECT_EQ(t2->output, t1->output);
}

TEST_F(DraftModel, AnotherVocabularyIsRefused) {
  auto target = Load(GEMLET_DEMO_MODEL);
  auto other = Load(test::TestdataDir() + "/gguf/gemma1_2b_like_mqa.gguf");
  ASSERT_TRUE(target && other);
  SessionOptions o;
  o.n_ctx = 256;
  o.draft_model = other;
  auto s = Session::Create(target, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a draft model must share the model's vocabulary"), std::string::npos) << s.message();
  ConversationOptions co;
  co.session = o;
  EXPECT_EQ(Conversation::Create(target, co).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DraftModel, TheCliDraftsWithDraftModelAndSaysWhatIsWrong) {
  const std::string run = test::GemletBinary() + " run -m " + std::string(GEMLET_DEMO_MODEL) +
                          " --no-cache -t 2 -n 32 --temp 0 -p 'The quick brown fox jumps over the lazy dog.'";
  auto plain = test::RunCommand(run + " 2>/dev/null");
  ASSERT_EQ(plain.exit_code, 0);
  auto drafted = test::RunCommand(run + " --draft-model " + DraftPath() + " --stats 2>" + dir_->File("err.txt"));
  ASSERT_EQ(drafted.exit_code, 0) << test::ReadTextFile(dir_->File("err.txt"));
  EXPECT_EQ(drafted.out, plain.out);
  EXPECT_NE(test::ReadTextFile(dir_->File("err.txt")).find("[spec] "), std::string::npos);
  struct Case {
    std::string flags, expect;
    int code;
  };
  for (const Case& c : {Case{"--spec draft", "--spec draft needs --draft-model", 2},
                        Case{"--spec lookup --draft-model " + DraftPath(), "not with --spec lookup", 2},
                        Case{"--draft-model /nonexistent.gguf", "the draft model", 1},
                        Case{"--draft-model " + test::TestdataDir() + "/gguf/gemma1_2b_like_mqa.gguf", "share the model's vocabulary", 1}}) {
    auto r = test::RunCommand(run + " " + c.flags + " 2>&1 >/dev/null");
    EXPECT_EQ(r.exit_code, c.code) << c.flags << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.flags << ": " << r.out;
  }
  // The task presets take it too (--lenient: the demo model's 16 tokens break the contract).
  auto task = test::RunCommand("echo '今晚吃火锅' | " + test::GemletBinary() + " polish -m " + std::string(GEMLET_DEMO_MODEL) +
                               " --no-cache -t 2 -n 16 --lenient --draft-model " + DraftPath() + " 2>&1");
  EXPECT_EQ(task.exit_code, 0) << task.out;
}

}  // namespace
}  // namespace gemlet

// Gemma 4's own drafter through the public API and the CLI (#43 item 3): a tiny Gemma 4 and its drafter
// from `gemlet synth` answer exactly as without drafts in a session, a chat over several turns and
// `gemlet run --spec mtp`; a drafter made for another model, a drafter alone and --spec mtp without
// one are refused with what is wrong.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "gemlet/gemlet.hpp"

namespace gemlet {
namespace {

class MtpCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    for (const auto& [preset, file] : {std::pair<const char*, std::string>{"tiny-gemma4", Target()},
                                       {"tiny-gemma4-assistant", Drafter()}}) {
      const auto r = test::RunCommand(test::GemletBinary() + " synth --preset " + preset + " --type F32 -o " + file + " 2>&1");
      ASSERT_EQ(r.exit_code, 0) << r.out;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Target() { return dir_->File("tiny-gemma4.gguf"); }
  static std::string Drafter() { return dir_->File("tiny-gemma4-assistant.gguf"); }
  static std::shared_ptr<Engine> Load(const std::string& path) {
    EngineOptions eo;
    eo.memory_pressure_path = "";
    auto e = Engine::Load(path, eo);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  static GenerateOptions Options(float temperature, int max_draft) {
    GenerateOptions g;
    g.max_tokens = 32;
    g.sampling.temperature = temperature;
    g.sampling.seed = 11;
    g.max_draft = max_draft;
    return g;
  }
  static test::TempDir* dir_;
};
test::TempDir* MtpCli::dir_ = nullptr;

TEST_F(MtpCli, SessionsAndChatsAnswerAsWithoutDrafts) {
  auto target = Load(Target()), drafter = Load(Drafter());
  ASSERT_TRUE(target && drafter);
  EXPECT_EQ(drafter->info().architecture, "gemma4-assistant");
  SessionOptions plain_options;
  plain_options.n_ctx = 256;
  plain_options.n_threads = 2;
  SessionOptions mtp_options = plain_options;
  mtp_options.draft_model = drafter;
  std::vector<int32_t> prompt = {2};
  for (int i = 0; i < 20; ++i) prompt.push_back(10 + i * 7);
  for (float temperature : {0.0f, 0.8f}) {
    auto plain = Session::Create(target, plain_options);
    auto spec = Session::Create(target, mtp_options);
    ASSERT_TRUE(plain.ok() && spec.ok()) << spec.message();
    auto a = (*plain)->Generate(prompt, Options(temperature, 0));
    auto b = (*spec)->Generate(prompt, Options(temperature, 7));
    ASSERT_TRUE(a.ok() && b.ok()) << b.message();
    EXPECT_EQ(b->tokens, a->tokens) << "temperature " << temperature;
    EXPECT_GT(b->stats.draft_steps, 0);
    // The next call continues from the whole exchange, drafts or not.
    auto a2 = (*plain)->Generate(std::vector<int32_t>{40, 41}, Options(0, 0));
    auto b2 = (*spec)->Generate(std::vector<int32_t>{40, 41}, Options(0, 7));
    ASSERT_TRUE(a2.ok() && b2.ok());
    EXPECT_EQ(b2->tokens, a2->tokens);
  }
  ConversationOptions plain_chat, mtp_chat;
  plain_chat.session = plain_options;
  mtp_chat.session = mtp_options;
  auto c1 = Conversation::Create(target, plain_chat);
  auto c2 = Conversation::Create(target, mtp_chat);
  ASSERT_TRUE(c1.ok() && c2.ok()) << c2.message();
  for (const char* turn : {"<t40><t41><t42>", "<t7><t8>", "<t99>"}) {
    auto a = (*c1)->Send(turn, Options(0, 0));
    auto b = (*c2)->Send(turn, Options(0, 7));
    ASSERT_TRUE(a.ok() && b.ok()) << b.message();
    EXPECT_EQ(b->tokens, a->tokens) << turn;
  }
}

TEST_F(MtpCli, WhatCannotDraftIsRefused) {
  auto drafter = Load(Drafter());
  auto other = Load(test::TestdataDir() + "/gguf/gemma4_e2b_like.gguf");
  ASSERT_TRUE(drafter && other);
  SessionOptions o;
  o.n_ctx = 128;
  o.draft_model = drafter;
  auto s = Session::Create(other, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("was made for a model of hidden size 256"), std::string::npos) << s.message();
  ConversationOptions co;
  co.session = o;
  EXPECT_EQ(Conversation::Create(other, co).status().code(), StatusCode::kInvalidArgument);
  SessionOptions alone;
  alone.n_ctx = 64;
  auto d = Session::Create(drafter, alone);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("Gemma 4 drafter"), std::string::npos) << d.message();
}

TEST_F(MtpCli, TheCliDraftsWithSpecMtpAndSaysWhatIsWrong) {
  const std::string run = test::GemletBinary() + " run -m " + Target() + " --no-cache -t 2 -n 24 --temp 0 --raw -p '<t40><t41><t42><t43>'";
  auto plain = test::RunCommand(run + " 2>/dev/null");
  ASSERT_EQ(plain.exit_code, 0);
  auto drafted = test::RunCommand(run + " --spec mtp --draft-model " + Drafter() + " --stats 2>" + dir_->File("err.txt"));
  ASSERT_EQ(drafted.exit_code, 0) << test::ReadTextFile(dir_->File("err.txt"));
  EXPECT_EQ(drafted.out, plain.out);
  EXPECT_NE(test::ReadTextFile(dir_->File("err.txt")).find("[spec] "), std::string::npos);
  struct Case {
    std::string flags, expect;
    int code;
  };
  for (const Case& c : {Case{"--spec mtp", "--spec mtp needs --draft-model", 2},
                        Case{"--spec mtp --draft-model " + Target(), "not Gemma 4's drafter", 1},
                        Case{"--spec lookup --draft-model " + Drafter(), "not with --spec lookup", 2}}) {
    auto r = test::RunCommand(run + " " + c.flags + " 2>&1 >/dev/null");
    EXPECT_EQ(r.exit_code, c.code) << c.flags << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.flags << ": " << r.out;
  }
  auto wrong = test::RunCommand(test::GemletBinary() + " run -m " + test::TestdataDir() +
                                "/gguf/gemma4_e2b_like.gguf --no-cache -t 2 -n 4 --raw -p '<t40>' --spec mtp --draft-model " +
                                Drafter() + " 2>&1 >/dev/null");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("hidden size"), std::string::npos) << wrong.out;
}

}  // namespace
}  // namespace gemlet

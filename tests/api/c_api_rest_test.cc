// The C API's last parity additions (c_api_test.cc holds the rest), each checked against the C++
// API on the demo model: log-probabilities in replies (gemlet_generate_options.logprobs,
// gemlet_reply_logprob, and a conversation's gemlet_conversation_last_logprob), and the session options gemlet_session_options cannot hold
// (gemlet_session_extra_options: rollback room, a draft model, prompt progress) through
// gemlet_session_create2 and gemlet_conversation_create2.
#include "gemlet/gemlet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "api_test_util.h"
#include "gemlet/gemlet.hpp"

namespace {

using gemlet::test::kDemoModel;

struct Engine {
  gemlet_engine* e = nullptr;
  Engine() { EXPECT_EQ(gemlet_engine_load(kDemoModel, nullptr, &e), GEMLET_OK) << gemlet_last_error(); }
  ~Engine() { gemlet_engine_free(e); }
};

gemlet_generate_options Greedy(int max_tokens) {
  gemlet_generate_options g = gemlet_generate_options_default();
  g.max_tokens = max_tokens;
  g.temperature = 0;
  return g;
}

std::vector<int32_t> ChatPrompt(const gemlet::Engine& e, const std::string& text) {
  return e.Tokenize("<start_of_turn>user\n" + text + "<end_of_turn>\n<start_of_turn>model\n",
                    {.add_special = true, .parse_special = true});
}

std::vector<int32_t> Tokens(const gemlet_reply* r) {
  size_t n = 0;
  const int32_t* t = gemlet_reply_tokens(r, &n);
  return std::vector<int32_t>(t, t + n);
}

gemlet_stats Stats(const gemlet_reply* r) {
  gemlet_stats st = gemlet_stats_default();
  EXPECT_EQ(gemlet_reply_stats(r, &st), GEMLET_OK);
  return st;
}

gemlet_session* NewSession(gemlet_engine* e, int n_ctx, const gemlet_session_extra_options* extra) {
  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = n_ctx;
  gemlet_session* s = nullptr;
  EXPECT_EQ(gemlet_session_create2(e, &so, extra, &s), GEMLET_OK) << gemlet_last_error();
  return s;
}

// ---- log-probabilities ----

// The C reply's logprobs are the C++ Reply::logprobs of the same greedy generation, entry by entry.
TEST(CApiRest, LogprobsAreTheCppOnes) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  const std::vector<int32_t> prompt = ChatPrompt(*cxx, "Who are you?");
  auto cs = gemlet::Session::Create(cxx, {.n_ctx = 256});
  ASSERT_TRUE(cs.ok());
  gemlet::GenerateOptions want_options = gemlet::test::Greedy(10);
  want_options.top_logprobs = 3;
  auto want = (*cs)->Generate(prompt, want_options);
  ASSERT_TRUE(want.ok()) << want.message();
  ASSERT_EQ(want->logprobs.size(), want->tokens.size());

  gemlet_session* s = NewSession(engine.e, 256, nullptr);
  ASSERT_NE(s, nullptr);
  gemlet_generate_options g = Greedy(10);
  g.logprobs = true;
  g.top_logprobs = 3;
  gemlet_reply* r = nullptr;
  ASSERT_EQ(gemlet_session_generate(s, prompt.data(), prompt.size(), &g, nullptr, nullptr, &r), GEMLET_OK)
      << gemlet_last_error();
  EXPECT_EQ(Tokens(r), want->tokens);
  ASSERT_EQ(gemlet_reply_n_logprobs(r), want->logprobs.size());
  for (size_t i = 0; i < want->logprobs.size(); ++i) {
    const gemlet::TokenLogprobs& w = want->logprobs[i];
    gemlet_token_logprob chosen{-1, 0};
    const gemlet_token_logprob* top = nullptr;
    size_t n_top = 0;
    ASSERT_EQ(gemlet_reply_logprob(r, i, &chosen, &top, &n_top), GEMLET_OK);
    EXPECT_EQ(chosen.token, w.chosen.token);
    EXPECT_EQ(chosen.token, want->tokens[i]);
    EXPECT_EQ(chosen.logprob, w.chosen.logprob);  // the same computation: the same bits
    EXPECT_LE(chosen.logprob, 0.0f);
    ASSERT_EQ(n_top, w.top.size());
    ASSERT_EQ(n_top, 3u);
    for (size_t k = 0; k < n_top; ++k) {
      EXPECT_EQ(top[k].token, w.top[k].token);
      EXPECT_EQ(top[k].logprob, w.top[k].logprob);
    }
    // Greedy takes the most likely token, and the alternatives come most likely first.
    EXPECT_EQ(top[0].token, chosen.token);
    EXPECT_GE(top[0].logprob, top[1].logprob);
    EXPECT_GE(top[1].logprob, top[2].logprob);
  }
  gemlet_token_logprob past{};
  EXPECT_EQ(gemlet_reply_logprob(r, want->logprobs.size(), &past, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_reply_logprob(nullptr, 0, &past, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_reply_n_logprobs(nullptr), 0u);
  gemlet_reply_free(r);

  // top_logprobs 0: the chosen token's alone. (From a fresh cache: Complete would evaluate the
  // prompt's last token again on its own, through the decode kernels, which round otherwise.)
  g.top_logprobs = 0;
  gemlet_session_reset(s);
  ASSERT_EQ(gemlet_session_generate(s, prompt.data(), prompt.size(), &g, nullptr, nullptr, &r), GEMLET_OK);
  ASSERT_EQ(gemlet_reply_n_logprobs(r), want->logprobs.size());
  const gemlet_token_logprob* top = reinterpret_cast<const gemlet_token_logprob*>(0x1);
  size_t n_top = 7;
  gemlet_token_logprob chosen{};
  ASSERT_EQ(gemlet_reply_logprob(r, 0, &chosen, &top, &n_top), GEMLET_OK);
  EXPECT_EQ(chosen.logprob, want->logprobs[0].chosen.logprob);
  EXPECT_EQ(top, nullptr);
  EXPECT_EQ(n_top, 0u);
  gemlet_reply_free(r);

  // Off by default, and for a struct from a header before the fields.
  gemlet_generate_options off = Greedy(4);
  ASSERT_EQ(gemlet_session_complete(s, prompt.data(), prompt.size(), &off, nullptr, nullptr, &r), GEMLET_OK);
  EXPECT_EQ(gemlet_reply_n_logprobs(r), 0u);
  gemlet_reply_free(r);
  gemlet_generate_options old = g;
  old.top_logprobs = 5;
  old.struct_size = offsetof(gemlet_generate_options, logprobs);
  ASSERT_EQ(gemlet_session_complete(s, prompt.data(), prompt.size(), &old, nullptr, nullptr, &r), GEMLET_OK);
  EXPECT_EQ(gemlet_reply_n_logprobs(r), 0u);
  gemlet_reply_free(r);

  // More than 20 alternatives is refused before anything runs, by validate too.
  g.top_logprobs = 21;
  EXPECT_EQ(gemlet_generate_options_validate(&g), GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("top_logprobs"), std::string::npos) << gemlet_last_error();
  EXPECT_EQ(gemlet_session_generate(s, prompt.data(), prompt.size(), &g, nullptr, nullptr, &r), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  g.logprobs = false;  // the count is not read without logprobs
  EXPECT_EQ(gemlet_generate_options_validate(&g), GEMLET_OK);
  gemlet_session_free(s);
}

// A batch request's reply carries logprobs as Complete's does.
TEST(CApiRest, BatchRepliesCarryLogprobs) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  const std::vector<int32_t> prompt = ChatPrompt(*cxx, "Hello");
  auto cs = gemlet::Session::Create(cxx, {.n_ctx = 256});
  ASSERT_TRUE(cs.ok());
  gemlet::GenerateOptions want_options = gemlet::test::Greedy(6);
  want_options.top_logprobs = 2;
  auto want = (*cs)->Complete(prompt, want_options);
  ASSERT_TRUE(want.ok());

  gemlet_batch_decoder* d = nullptr;
  ASSERT_EQ(gemlet_batch_decoder_create(engine.e, nullptr, &d), GEMLET_OK);
  gemlet_session* s = NewSession(engine.e, 256, nullptr);
  gemlet_generate_options g = Greedy(6);
  g.logprobs = true;
  g.top_logprobs = 2;
  int id = 0;
  ASSERT_EQ(gemlet_batch_decoder_submit(d, s, prompt.data(), prompt.size(), &g, nullptr, nullptr, &id), GEMLET_OK);
  gemlet_reply* r = nullptr;
  for (int step = 0; step < 100 && r == nullptr; ++step) {
    size_t n = 0;
    ASSERT_EQ(gemlet_batch_decoder_step(d, &n), GEMLET_OK);
    if (n > 0) {
      ASSERT_EQ(gemlet_batch_decoder_finished(d, 0, &id, &r), GEMLET_OK) << gemlet_last_error();
    }
  }
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Tokens(r), want->tokens);
  ASSERT_EQ(gemlet_reply_n_logprobs(r), want->logprobs.size());
  for (size_t i = 0; i < want->logprobs.size(); ++i) {
    gemlet_token_logprob chosen{};
    const gemlet_token_logprob* top = nullptr;
    size_t n_top = 0;
    ASSERT_EQ(gemlet_reply_logprob(r, i, &chosen, &top, &n_top), GEMLET_OK);
    EXPECT_EQ(chosen.token, want->logprobs[i].chosen.token);
    EXPECT_NEAR(chosen.logprob, want->logprobs[i].chosen.logprob, 1e-4);  // batched rows may round otherwise
    ASSERT_EQ(n_top, 2u);
    EXPECT_EQ(top[0].token, want->logprobs[i].top[0].token);
  }
  gemlet_reply_free(r);
  gemlet_batch_decoder_free(d);
  gemlet_session_free(s);
}

// ---- gemlet_session_extra_options ----

TEST(CApiRest, ExtraOptionsDefaultsAndChecks) {
  Engine engine;
  const gemlet_session_extra_options d = gemlet_session_extra_options_default();
  EXPECT_EQ(d.struct_size, sizeof(d));
  EXPECT_EQ(d.rollback_tokens, gemlet::SessionOptions().rollback_tokens);
  EXPECT_EQ(d.draft_model, nullptr);
  EXPECT_EQ(d.progress, nullptr);
  gemlet_session_options so = gemlet_session_options_default();
  gemlet_session_extra_options bad = d;
  bad.struct_size = sizeof(bad) + 8;  // from a newer header than the library
  gemlet_session* s = reinterpret_cast<gemlet_session*>(0x1);
  EXPECT_EQ(gemlet_session_create2(engine.e, &so, &bad, &s), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(gemlet_last_error()).find("gemlet_session_extra_options"), std::string::npos);
  bad = d;
  bad.rollback_tokens = -1;  // the C++ API's own check, reported as is
  EXPECT_EQ(gemlet_session_create2(engine.e, &so, &bad, &s), GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("rollback_tokens"), std::string::npos);
  gemlet_conversation* c = nullptr;
  EXPECT_EQ(gemlet_conversation_create2(engine.e, nullptr, &bad, &c), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(gemlet_session_create2(nullptr, nullptr, nullptr, &s), GEMLET_INVALID_ARGUMENT);
}

// rollback_tokens is the C++ option: the session's rollback room is the C++ session's, and a
// truncation within it keeps the cache's tokens without evaluating.
TEST(CApiRest, RollbackTokensAreHonoured) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  for (int rollback : {0, 16, 48}) {
    gemlet_session_extra_options x = gemlet_session_extra_options_default();
    x.rollback_tokens = rollback;
    gemlet_session* s = NewSession(engine.e, 256, &x);
    ASSERT_NE(s, nullptr);
    auto cs = gemlet::Session::Create(cxx, {.n_ctx = 256, .rollback_tokens = rollback});
    ASSERT_TRUE(cs.ok());
    EXPECT_EQ(gemlet_session_rollback_room(s), (*cs)->rollback_room()) << rollback;
    EXPECT_GE(gemlet_session_rollback_room(s), rollback);
    gemlet_session_free(s);
  }
  // The room grows with the option (the demo model's sliding-window layers keep that many more).
  gemlet_session_extra_options small = gemlet_session_extra_options_default(), big = small;
  small.rollback_tokens = 4;
  big.rollback_tokens = 64;
  gemlet_session* a = NewSession(engine.e, 256, &small);
  gemlet_session* b = NewSession(engine.e, 256, &big);
  EXPECT_LT(gemlet_session_rollback_room(a), gemlet_session_rollback_room(b));
  // An older struct (rollback_tokens only) is read, the rest left at their defaults.
  gemlet_session_extra_options old = big;
  old.struct_size = offsetof(gemlet_session_extra_options, draft_model);
  gemlet_session* o = NewSession(engine.e, 256, &old);
  EXPECT_EQ(gemlet_session_rollback_room(o), gemlet_session_rollback_room(b));
  gemlet_session_free(a);
  gemlet_session_free(b);
  gemlet_session_free(o);
}

// A conversation's last send keeps its logprobs (gemlet_conversation_last_logprob): those of the
// C++ Conversation::Send of the same greedy turn, entry by entry; none when not asked for.
TEST(CApiRest, ConversationLogprobsAreTheCppOnes) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  gemlet::ConversationOptions cco;
  cco.session.n_ctx = 256;
  auto cc = gemlet::Conversation::Create(cxx, cco);
  ASSERT_TRUE(cc.ok());
  gemlet::GenerateOptions want_options = gemlet::test::Greedy(10);
  want_options.top_logprobs = 3;
  auto want = (*cc)->Send("Who are you?", want_options);
  ASSERT_TRUE(want.ok()) << want.message();
  ASSERT_FALSE(want->logprobs.empty());

  gemlet_conversation_options co = gemlet_conversation_options_default();
  co.session.n_ctx = 256;
  gemlet_conversation* chat = nullptr;
  ASSERT_EQ(gemlet_conversation_create(engine.e, &co, &chat), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_conversation_last_n_logprobs(chat), 0u);  // nothing sent yet
  gemlet_generate_options g = Greedy(10);
  g.logprobs = true;
  g.top_logprobs = 3;
  ASSERT_EQ(gemlet_conversation_send(chat, "Who are you?", &g, nullptr, nullptr, nullptr), GEMLET_OK)
      << gemlet_last_error();
  EXPECT_EQ(std::string(gemlet_conversation_last_reply(chat)), want->text);
  ASSERT_EQ(gemlet_conversation_last_n_logprobs(chat), want->logprobs.size());
  for (size_t i = 0; i < want->logprobs.size(); ++i) {
    const gemlet::TokenLogprobs& w = want->logprobs[i];
    gemlet_token_logprob chosen{-1, 0};
    const gemlet_token_logprob* top = nullptr;
    size_t n_top = 0;
    ASSERT_EQ(gemlet_conversation_last_logprob(chat, i, &chosen, &top, &n_top), GEMLET_OK);
    EXPECT_EQ(chosen.token, w.chosen.token);
    EXPECT_EQ(chosen.logprob, w.chosen.logprob);  // the same computation: the same bits
    ASSERT_EQ(n_top, w.top.size());
    ASSERT_EQ(n_top, 3u);
    for (size_t k = 0; k < n_top; ++k) {
      EXPECT_EQ(top[k].token, w.top[k].token);
      EXPECT_EQ(top[k].logprob, w.top[k].logprob);
    }
  }
  gemlet_token_logprob past{};
  const gemlet_token_logprob* top = reinterpret_cast<const gemlet_token_logprob*>(0x1);
  size_t n_top = 7;
  EXPECT_EQ(gemlet_conversation_last_logprob(chat, want->logprobs.size(), &past, &top, &n_top),
            GEMLET_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemlet_last_error()).find("logprob"), std::string::npos);
  EXPECT_EQ(top, nullptr);  // cleared, as gemlet_reply_logprob does
  EXPECT_EQ(n_top, 0u);
  EXPECT_EQ(gemlet_conversation_last_logprob(nullptr, 0, &past, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_conversation_last_n_logprobs(nullptr), 0u);

  // The next send without logprobs forgets the last ones rather than leaving them to be misread.
  const gemlet_generate_options off = Greedy(4);
  ASSERT_EQ(gemlet_conversation_send(chat, "And then?", &off, nullptr, nullptr, nullptr), GEMLET_OK);
  EXPECT_EQ(gemlet_conversation_last_n_logprobs(chat), 0u);
  gemlet_conversation_free(chat);
}

// A draft model changes no token: greedy generation with it is generation without it, in a session
// and in a conversation; the stats show the drafts were made and checked.
TEST(CApiRest, DraftModelGivesTheSameGreedyTokens) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  const std::vector<int32_t> prompt = ChatPrompt(*cxx, "请背诵《静夜思》。");
  gemlet_session* plain = NewSession(engine.e, 512, nullptr);
  const gemlet_generate_options g = Greedy(40);
  gemlet_reply* want = nullptr;
  ASSERT_EQ(gemlet_session_generate(plain, prompt.data(), prompt.size(), &g, nullptr, nullptr, &want), GEMLET_OK);

  // The draft is the demo model loaded again (the same vocabulary); its handle is freed before use:
  // the session holds its own reference.
  gemlet_engine* draft = nullptr;
  ASSERT_EQ(gemlet_engine_load(kDemoModel, nullptr, &draft), GEMLET_OK);
  gemlet_session_extra_options x = gemlet_session_extra_options_default();
  x.draft_model = draft;
  gemlet_session* drafted = NewSession(engine.e, 512, &x);
  gemlet_conversation_options co = gemlet_conversation_options_default();
  co.session.n_ctx = 512;
  gemlet_conversation* chat = nullptr;
  ASSERT_EQ(gemlet_conversation_create2(engine.e, &co, &x, &chat), GEMLET_OK) << gemlet_last_error();
  gemlet_engine_free(draft);
  ASSERT_NE(drafted, nullptr);
  gemlet_generate_options gd = g;
  gd.max_draft = 4;
  gemlet_reply* got = nullptr;
  ASSERT_EQ(gemlet_session_generate(drafted, prompt.data(), prompt.size(), &gd, nullptr, nullptr, &got), GEMLET_OK)
      << gemlet_last_error();
  EXPECT_EQ(Tokens(got), Tokens(want));
  EXPECT_STREQ(gemlet_reply_text(got), gemlet_reply_text(want));
  const gemlet_stats st = Stats(got);
  EXPECT_GT(st.draft_steps, 0);
  EXPECT_GT(st.drafted_tokens, 0);
  EXPECT_GT(st.accepted_tokens, 0);  // the draft is the model itself: its drafts are the answer
  EXPECT_EQ(Stats(want).draft_steps, 0);
  gemlet_reply_free(got);

  // The conversation: its answer is the plain conversation's.
  gemlet_conversation* plain_chat = nullptr;
  ASSERT_EQ(gemlet_conversation_create(engine.e, &co, &plain_chat), GEMLET_OK);
  gemlet_stats cst = gemlet_stats_default();
  ASSERT_EQ(gemlet_conversation_send(plain_chat, "请背诵《静夜思》。", &g, nullptr, nullptr, nullptr), GEMLET_OK);
  ASSERT_EQ(gemlet_conversation_send(chat, "请背诵《静夜思》。", &gd, nullptr, nullptr, &cst), GEMLET_OK)
      << gemlet_last_error();
  EXPECT_STREQ(gemlet_conversation_last_reply(chat), gemlet_conversation_last_reply(plain_chat));
  EXPECT_NE(std::string(gemlet_conversation_last_reply(chat)).find("床前明月光"), std::string::npos);
  EXPECT_GT(cst.draft_steps, 0);
  gemlet_conversation_free(plain_chat);
  gemlet_conversation_free(chat);
  gemlet_reply_free(want);
  gemlet_session_free(plain);
  gemlet_session_free(drafted);
}

struct Progress {
  std::vector<std::pair<int, int>> calls;
  gemlet_session* cancel = nullptr;  // cancelled from the first call when set
};

void OnProgress(int done, int total, void* user_data) {
  auto* p = static_cast<Progress*>(user_data);
  p->calls.emplace_back(done, total);
  if (p->cancel) gemlet_session_cancel(p->cancel);
}

// The prompt progress callback gets the C++ API's (done, total) after each chunk, with its user
// data; a cancel from inside it stops the evaluation.
TEST(CApiRest, PromptProgressIsReportedPerChunk) {
  Engine engine;
  const std::shared_ptr<gemlet::Engine> cxx = gemlet::test::DemoEngine();
  std::vector<int32_t> prompt = ChatPrompt(*cxx, "Tell me about the moon, the sea and the stars at night.");
  ASSERT_GT(prompt.size(), 20u);
  std::vector<std::pair<int, int>> want;
  gemlet::SessionOptions cso{.n_ctx = 256, .max_batch = 8};
  cso.progress = [&](int done, int total) { want.emplace_back(done, total); };
  auto cs = gemlet::Session::Create(cxx, cso);
  ASSERT_TRUE(cs.ok());
  ASSERT_TRUE((*cs)->Evaluate(prompt).ok());
  ASSERT_GT(want.size(), 2u);

  Progress p;
  gemlet_session_extra_options x = gemlet_session_extra_options_default();
  x.progress = OnProgress;
  x.progress_user_data = &p;
  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 256;
  so.max_batch = 8;
  gemlet_session* s = nullptr;
  ASSERT_EQ(gemlet_session_create2(engine.e, &so, &x, &s), GEMLET_OK);
  ASSERT_EQ(gemlet_session_evaluate(s, prompt.data(), prompt.size(), nullptr), GEMLET_OK);
  EXPECT_EQ(p.calls, want);
  EXPECT_EQ(p.calls.back(), std::make_pair(static_cast<int>(prompt.size()), static_cast<int>(prompt.size())));

  // A cancel from the callback: the chunks finished stay, the rest is not evaluated.
  gemlet_session_reset(s);
  p.calls.clear();
  p.cancel = s;
  EXPECT_EQ(gemlet_session_evaluate(s, prompt.data(), prompt.size(), nullptr), GEMLET_CANCELLED);
  EXPECT_LT(gemlet_session_n_past(s), static_cast<int>(prompt.size()));
  EXPECT_LT(p.calls.size(), want.size());
  gemlet_session_free(s);
}

}  // namespace

// BatchDecoder on the demo model: several requests stepped together give what each would give on
// its own session with Session::Complete (tokens, text, stop reason, prefix reuse), and cancels,
// errors and logprobs behave per request.
#include <gtest/gtest.h>

#include <cmath>
#include <atomic>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include "api_test_util.h"

namespace gemlet::test {
namespace {

std::unique_ptr<Session> NewSession(int n_ctx = 512, int max_batch = 512) {
  SessionOptions o;
  o.n_ctx = n_ctx;
  o.max_batch = max_batch;
  auto s = Session::Create(DemoEngine(), o);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::move(s).value();
}

std::vector<int32_t> Prompt(const std::string& user) {
  std::vector<Message> m = {{"user", user}};
  auto text = DemoEngine()->ApplyChatTemplate(m);
  EXPECT_TRUE(text.ok()) << text.message();
  return DemoEngine()->Tokenize(text.value(), {.add_special = true});
}

GenerateOptions Sampled(int max_tokens, uint64_t seed) {
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0.9f;
  g.sampling.seed = seed;
  return g;
}

// Runs every request to the end, collecting the streamed text of each.
std::map<int, Reply> RunAll(BatchDecoder& batch) {
  std::map<int, Reply> replies;
  for (int steps = 0; batch.running() > 0; ++steps) {
    EXPECT_LT(steps, 5000);
    if (steps >= 5000) break;
    for (BatchDecoder::Finished& f : batch.Step()) {
      EXPECT_TRUE(f.reply.ok()) << f.reply.message();
      EXPECT_EQ(replies.count(f.id), 0u) << "finished twice";
      if (f.reply.ok()) replies[f.id] = std::move(f.reply).value();
    }
  }
  return replies;
}

// Whole prompts (over 8 tokens: alone and batched they take the prefill GEMM, whose rows do not
// depend on each other) evaluated in the first step, then every step decodes the four together
// (at most 8 rows: the decode kernels, token for token what decoding alone computes): the same
// bits as each request alone, so the same tokens even when sampled.
TEST(BatchDecoder, RequestsSteppedTogetherMatchEachAlone) {
  const std::vector<std::string> users = {"Tell me about the sea.", "你好，请介绍一下你自己。",
                                          "Write a list of three fruits.", "What is 2+2?"};
  std::vector<GenerateOptions> options = {Greedy(40), Sampled(30, 7), Sampled(25, 11), Greedy(10)};
  options[2].stop = {"."};

  std::vector<Reply> alone;
  for (size_t i = 0; i < users.size(); ++i) {
    ASSERT_GT(Prompt(users[i]).size(), 8u);
    auto s = NewSession();
    auto r = s->Complete(Prompt(users[i]), options[i]);
    ASSERT_TRUE(r.ok()) << r.message();
    alone.push_back(std::move(r).value());
  }

  BatchOptions bo;
  bo.max_requests = 4;
  auto batch = BatchDecoder::Create(DemoEngine(), bo);
  ASSERT_TRUE(batch.ok()) << batch.message();
  std::vector<std::unique_ptr<Session>> sessions;
  std::map<int, size_t> index;
  std::vector<std::string> streamed(users.size());
  for (size_t i = 0; i < users.size(); ++i) {
    sessions.push_back(NewSession());
    auto id = batch.value()->Submit(*sessions.back(), Prompt(users[i]), options[i],
                                    [&streamed, i](ChunkKind, std::string_view text) {
                                      streamed[i] += text;
                                      return true;
                                    });
    ASSERT_TRUE(id.ok()) << id.message();
    index[id.value()] = i;
  }
  EXPECT_EQ(batch.value()->running(), 4);
  std::map<int, Reply> replies = RunAll(*batch.value());
  ASSERT_EQ(replies.size(), users.size());
  for (auto& [id, reply] : replies) {
    const Reply& want = alone[index[id]];
    SCOPED_TRACE(users[index[id]]);
    EXPECT_EQ(reply.tokens, want.tokens);
    EXPECT_EQ(reply.text, want.text);
    EXPECT_EQ(streamed[index[id]], want.text);
    EXPECT_EQ(reply.stats.stop, want.stats.stop);
    EXPECT_EQ(reply.stats.prompt_tokens, want.stats.prompt_tokens);
    EXPECT_EQ(reply.stats.generated_tokens, want.stats.generated_tokens);
  }
  EXPECT_EQ(batch.value()->running(), 0);
}

// Prompts in chunks of 5 while the others decode: long prompts take several steps, every request
// still ends as asked, and the steps carried several requests' rows.
TEST(BatchDecoder, LongPromptsTakeTurnsWithDecoding) {
  BatchOptions bo;
  bo.max_requests = 3;
  bo.prefill_chunk = 5;
  auto batch = BatchDecoder::Create(DemoEngine(), bo);
  ASSERT_TRUE(batch.ok());
  std::vector<std::unique_ptr<Session>> sessions;
  const std::vector<std::string> users = {"Hi", "Summarize: the cat sat on the mat and looked at the dog for a while.",
                                          "写一首关于秋天的短诗，要有月亮和桂花。"};
  for (const std::string& u : users) {
    sessions.push_back(NewSession());
    ASSERT_TRUE(batch.value()->Submit(*sessions.back(), Prompt(u), Greedy(12)).ok());
  }
  int most_rows = 0, steps = 0;
  std::map<int, Reply> replies;
  while (batch.value()->running() > 0 && steps < 1000) {
    for (BatchDecoder::Finished& f : batch.value()->Step()) {
      ASSERT_TRUE(f.reply.ok()) << f.reply.message();
      replies[f.id] = std::move(f.reply).value();
    }
    most_rows = std::max(most_rows, batch.value()->last_step_tokens());
    ++steps;
  }
  ASSERT_EQ(replies.size(), 3u);
  for (auto& [id, r] : replies) {
    EXPECT_TRUE(r.stats.generated_tokens == 12 || r.stats.stop == StopReason::kEndOfTurn);
  }
  EXPECT_LE(most_rows, bo.prefill_chunk + bo.max_requests);
  EXPECT_GT(most_rows, 1);
}

// A server's `seed`: the same requests, batched the same way, sample the same tokens.
TEST(BatchDecoder, SeededSamplingRepeats) {
  std::vector<std::vector<int32_t>> runs[2];
  for (auto& run : runs) {
    BatchOptions bo;
    bo.prefill_chunk = 5;
    auto batch = BatchDecoder::Create(DemoEngine(), bo);
    ASSERT_TRUE(batch.ok());
    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<int> ids;
    for (int i = 0; i < 3; ++i) {
      sessions.push_back(NewSession());
      auto id = batch.value()->Submit(*sessions.back(), Prompt(i == 1 ? "写一首关于秋天的短诗。" : "Tell me a story."),
                                      Sampled(30, 100 + i));
      ASSERT_TRUE(id.ok());
      ids.push_back(id.value());
    }
    std::map<int, Reply> replies = RunAll(*batch.value());
    ASSERT_EQ(replies.size(), 3u);
    for (int id : ids) run.push_back(replies[id].tokens);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_NE(runs[0][0], runs[0][2]) << "different seeds, same prompt";
}

TEST(BatchDecoder, ReusesTheSessionsCachedPrefix) {
  auto batch = BatchDecoder::Create(DemoEngine());
  ASSERT_TRUE(batch.ok());
  auto session = NewSession();
  const std::vector<int32_t> first = Prompt("Summarize: the cat sat on the mat and looked at the dog.");
  ASSERT_TRUE(batch.value()->Submit(*session, first, Greedy(8)).ok());
  std::map<int, Reply> r1 = RunAll(*batch.value());
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1.begin()->second.stats.cached_tokens, 0);

  // The same prompt with more after it: everything the cache holds of it is kept.
  std::vector<int32_t> second = first;
  second.insert(second.end(), r1.begin()->second.tokens.begin(), r1.begin()->second.tokens.end() - 1);
  const std::vector<int32_t> more = DemoEngine()->Tokenize(" And then?");
  second.insert(second.end(), more.begin(), more.end());
  ASSERT_TRUE(batch.value()->Submit(*session, second, Greedy(8)).ok());
  std::map<int, Reply> r2 = RunAll(*batch.value());
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_GE(r2.begin()->second.stats.cached_tokens, static_cast<int>(first.size()));
  EXPECT_EQ(r2.begin()->second.stats.prompt_tokens, static_cast<int>(second.size()));

  auto fresh = NewSession();
  auto want = fresh->Complete(second, Greedy(8));
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(r2.begin()->second.tokens, want.value().tokens);
}

TEST(BatchDecoder, CancelEndsOnlyThatRequest) {
  auto batch = BatchDecoder::Create(DemoEngine());
  ASSERT_TRUE(batch.ok());
  auto a = NewSession(), b = NewSession();
  auto ida = batch.value()->Submit(*a, Prompt("Tell me a long story."), Greedy(60));
  auto idb = batch.value()->Submit(*b, Prompt("Tell me a long story."), Greedy(30));
  ASSERT_TRUE(ida.ok() && idb.ok());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(batch.value()->Step().empty());
  batch.value()->Cancel(ida.value());
  std::vector<BatchDecoder::Finished> f = batch.value()->Step();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, ida.value());
  ASSERT_TRUE(f[0].reply.ok());
  EXPECT_EQ(f[0].reply.value().stats.stop, StopReason::kCancelled);
  std::map<int, Reply> rest = RunAll(*batch.value());
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest.begin()->first, idb.value());
  // The other request's answer is the one it gets alone.
  auto alone = NewSession()->Complete(Prompt("Tell me a long story."), Greedy(30));
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(rest.begin()->second.tokens, alone.value().tokens);
  EXPECT_EQ(rest.begin()->second.stats.generated_tokens, alone.value().stats.generated_tokens);
}

// A server's HTTP threads cancel while its scheduler steps (run under ThreadSanitizer too).
TEST(BatchDecoder, CancelFromAnotherThreadWhileStepping) {
  auto batch = BatchDecoder::Create(DemoEngine());
  ASSERT_TRUE(batch.ok());
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<int> ids;
  for (int i = 0; i < 3; ++i) {
    sessions.push_back(NewSession());
    auto id = batch.value()->Submit(*sessions.back(), Prompt("Tell me a long story."), Greedy(400));
    ASSERT_TRUE(id.ok());
    ids.push_back(id.value());
  }
  std::atomic<bool> stepped{false};
  std::thread canceller([&] {
    while (!stepped.load()) std::this_thread::yield();
    for (int id : ids) batch.value()->Cancel(id);
  });
  std::map<int, Reply> replies;
  for (int steps = 0; batch.value()->running() > 0 && steps < 1000; ++steps) {
    for (BatchDecoder::Finished& f : batch.value()->Step()) {
      ASSERT_TRUE(f.reply.ok()) << f.reply.message();
      replies[f.id] = std::move(f.reply).value();
    }
    stepped.store(true);
  }
  canceller.join();
  ASSERT_EQ(replies.size(), 3u);
  for (auto& [id, r] : replies) {
    EXPECT_EQ(r.stats.stop, StopReason::kCancelled);
    EXPECT_LT(r.stats.generated_tokens, 400);
  }
}

TEST(BatchDecoder, RefusesBadRequestsWithoutDisturbingOthers) {
  BatchOptions bo;
  bo.max_requests = 1;
  auto batch = BatchDecoder::Create(DemoEngine(), bo);
  ASSERT_TRUE(batch.ok());
  auto a = NewSession(), b = NewSession(64);
  EXPECT_FALSE(batch.value()->Submit(*a, std::span<const int32_t>(), Greedy(4)).ok());
  GenerateOptions bad = Greedy(4);
  bad.sampling.top_p = 2;
  EXPECT_FALSE(batch.value()->Submit(*a, Prompt("hi"), bad).ok());
  std::vector<int32_t> long_prompt(100, Prompt("hi")[1]);
  auto too_long = batch.value()->Submit(*b, long_prompt, Greedy(4));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("context"), std::string::npos) << too_long.message();
  ASSERT_TRUE(batch.value()->Submit(*a, Prompt("hi"), Greedy(4)).ok());
  auto full = batch.value()->Submit(*b, Prompt("hi"), Greedy(4));
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.message().find("full"), std::string::npos);
  EXPECT_EQ(RunAll(*batch.value()).size(), 1u);

  BatchOptions zero;
  zero.max_requests = 0;
  EXPECT_FALSE(BatchDecoder::Create(DemoEngine(), zero).ok());
}

TEST(BatchDecoder, LogprobsAreTheModelsDistribution) {
  auto s = NewSession();
  GenerateOptions g = Greedy(6);
  g.top_logprobs = 3;
  auto r = s->Complete(Prompt("Name a colour."), g);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r.value().logprobs.size(), r.value().tokens.size());
  for (size_t i = 0; i < r.value().logprobs.size(); ++i) {
    const TokenLogprobs& lp = r.value().logprobs[i];
    EXPECT_EQ(lp.chosen.token, r.value().tokens[i]);
    EXPECT_LE(lp.chosen.logprob, 0.0f);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_GE(lp.top[0].logprob, lp.top[1].logprob);
    EXPECT_GE(lp.top[1].logprob, lp.top[2].logprob);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(lp.top[0].token, lp.chosen.token);
    EXPECT_FLOAT_EQ(lp.top[0].logprob, lp.chosen.logprob);
  }

  // Recomputed from the logits of an evaluation of the same prompt.
  auto check = NewSession();
  const std::vector<int32_t> prompt = Prompt("Name a colour.");
  std::vector<float> logits(static_cast<size_t>(DemoEngine()->info().n_vocab));
  ASSERT_TRUE(check->Evaluate(prompt, logits.data()).ok());
  double z = 0;
  float mx = logits[0];
  for (float v : logits) mx = std::max(mx, v);
  for (float v : logits) z += std::exp(static_cast<double>(v - mx));
  const double want = logits[r.value().tokens[0]] - mx - std::log(z);
  EXPECT_NEAR(r.value().logprobs[0].chosen.logprob, want, 1e-4);
}

}  // namespace
}  // namespace gemlet::test

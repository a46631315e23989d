// Same answer every time (#39) through the server: one request, greedy or sampled with a seed,
// gets the same text, token count, finish reason and log-probabilities cold, with its prefix
// cached, after another conversation took its slot, as four copies at once, and beside three other
// requests, on a server whose prompts go in 48-token chunks; and the same again on a one-slot server
// with 256-token chunks, one thread and the default ring room (where a cached prefix is replayed).
#include <gtest/gtest.h>
#include <httplib.h>

#include <latch>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"
#include "server/server_test_util.h"

namespace gemlet {
namespace {

using nlohmann::json;

// Short enough that a few-hundred-token prompt takes several chunks; the shared openings below are
// no multiple of it, so a prompt evaluated after a cached opening is cut elsewhere than cold.
constexpr int kChunk = 48;
constexpr int kMaxTokens = 40;

// Server A: four slots stepped together, prompts in kChunk-token chunks. Its sliding-window rings
// are as long as the context (rollback_tokens): a cached prefix is then reused as it is, only the
// rest of the prompt evaluated. With the default room (16) a slot that went on for 40 tokens past
// its prompt has written over the window the prefix needs, and Session::Truncate evaluates it all
// again (server B does that).
ServerOptions ChunkedServer() {
  ServerOptions o;
  o.parallel = 4;
  o.slot.n_ctx = 1024;
  o.slot.max_batch = kChunk;
  o.slot.rollback_tokens = 1024;
  return o;
}

// Server B: one slot, the scheduler's largest chunk (min(256, max_batch)), one thread, default rings
// (a cached prefix is replayed by Session::Truncate in one max_batch chunk).
ServerOptions OneSlotServer() {
  ServerOptions o;
  o.parallel = 1;
  o.slot.n_ctx = 1024;
  o.slot.max_batch = 512;
  o.slot.n_threads = 1;
  return o;
}

// What users write: Chinese and English mixed in one message.
const char* kSystem =
    "你是一个认真负责的助手，回答要简洁、准确。You are a careful assistant: answer briefly and precisely, "
    "用用户提问的语言回答。When the user mixes Chinese and English, 可以两种语言一起用。";

const char* kNotes =
    "下面是我们团队周会的记录，请帮我整理成三条要点，并翻译成英文。Meeting notes, Tuesday: "
    "1) 新版本的发布时间推迟到下周五，because the QA team found a memory leak in the upload service "
    "that only shows up after a few hours of traffic. 2) 小王负责修复这个 bug，预计需要两天；he will also "
    "add a regression test so that it does not come back, 并且在代码评审的时候请老李帮忙看一下。 "
    "3) 我们讨论了是否要把数据库从 MySQL 迁移到 PostgreSQL。大家意见不一：有人认为迁移成本太高，"
    "others think the JSON support and the better query planner are worth it. 最后决定先做一个小规模的试验，"
    "measure the latency of the ten slowest queries, 然后再做决定。 4) 市场部希望我们在发布说明里加上中文版本，"
    "and they asked for screenshots of the new settings page before Thursday. 5) 下个月有两位新同事入职，"
    "需要准备开发环境和入门文档：how to build the project, how to run the tests, and who to ask when "
    "something breaks. 另外请注意：周四下午办公室停电，the build server will be shut down from 2 pm to 6 pm, "
    "请提前保存好你们的工作。谢谢大家！";

const char* kPoemQuestion =
    "请解释一下这首诗的意思：床前明月光，疑是地上霜。举头望明月，低头思故乡。What feelings does the poet "
    "express, and why is the moon so important in Chinese poetry? 请举两个别的例子，比如苏轼的《水调歌头》。";

// The demo model ends its turn after a sentence or two; with its end tokens banned (OpenAI's
// logit_bias) every answer runs to max_tokens, so there are 40 tokens to compare, not 5.
json NoEndOfTurn() {
  json bias = json::object();
  for (int32_t t = 0; t < DemoEngine()->info().n_vocab; ++t) {
    if (DemoEngine()->IsEndOfGeneration(t)) bias[std::to_string(t)] = -100;
  }
  return bias;
}

json Chat(const std::string& user, double temperature = 0) {
  json body = {{"model", "demo"},
               {"messages", {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", user}}}},
               {"max_tokens", kMaxTokens},
               {"temperature", temperature},
               {"logit_bias", NoEndOfTurn()},
               {"logprobs", true},
               {"top_logprobs", 5}};
  if (temperature > 0) body["seed"] = 1234;
  return body;
}

json Text(const std::string& prompt) {
  return {{"model", "demo"},         {"prompt", prompt},   {"max_tokens", kMaxTokens}, {"temperature", 0},
          {"logit_bias", NoEndOfTurn()}, {"logprobs", 5}};
}

struct Request {
  std::string path;
  json body;
};

struct Answer {
  std::string text;
  std::string finish_reason;
  json logprobs;  // the chosen tokens' and the top 5's: equal only if their logits are bit-identical
  int prompt_tokens = -1;
  int cached_tokens = -1;
  int completion_tokens = -1;
};

Answer Ask(int port, const Request& req) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  auto r = c.Post(req.path, req.body.dump(), "application/json");
  Answer a;
  if (!r || r->status != 200) {
    ADD_FAILURE() << req.path << ": " << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
    return a;
  }
  const json j = json::parse(r->body);
  const json& choice = j["choices"][0];
  a.text = choice.contains("message") ? choice["message"]["content"] : choice["text"];
  a.finish_reason = choice["finish_reason"];
  a.logprobs = choice["logprobs"];
  a.prompt_tokens = j["usage"]["prompt_tokens"];
  a.cached_tokens = j["usage"]["prompt_tokens_details"]["cached_tokens"];
  a.completion_tokens = j["usage"]["completion_tokens"];
  return a;
}

// Every request from its own client thread, released together.
std::vector<Answer> AskAtOnce(int port, const std::vector<Request>& reqs) {
  std::vector<Answer> answers(reqs.size());
  std::latch go(static_cast<std::ptrdiff_t>(reqs.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();
      answers[i] = Ask(port, reqs[i]);
    });
  }
  for (std::thread& t : threads) t.join();
  return answers;
}

double Metric(TestServer& t, const std::string& name) {
  auto r = t.client->Get("/metrics");
  if (!r) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  return at == std::string::npos ? -1.0 : std::stod(r->body.substr(at + name.size() + 2));
}

void ExpectSame(const Answer& want, const Answer& got, const std::string& when) {
  EXPECT_EQ(got.text, want.text) << when;
  EXPECT_EQ(got.completion_tokens, want.completion_tokens) << when;
  EXPECT_EQ(got.finish_reason, want.finish_reason) << when;
  EXPECT_EQ(got.prompt_tokens, want.prompt_tokens) << when;
  EXPECT_EQ(got.logprobs, want.logprobs) << when;
}

// Requests sharing steps: a step serves each running request at most one generated token, so
// unless some step served two of them it took at least sum(completion_tokens - 1) steps.
void ExpectStepsShared(double steps, const std::vector<Answer>& answers, const std::string& when) {
  int alone = 0;
  for (const Answer& a : answers) alone += a.completion_tokens - 1;
  EXPECT_LT(steps, alone) << when << ": no step ran two requests at once, so the batch was not exercised";
}

// `req` on server A through the five situations, each answer held to the cold one; `sibling`
// shares `req`'s opening and nothing after; `others` are three unrelated requests.
void ExpectSameAnswerEverywhere(const Request& req, const Request& sibling, const std::vector<Request>& others) {
  TestServer t(ChunkedServer());
  const int port = t.server->port();

  const Answer cold = Ask(port, req);
  ASSERT_EQ(cold.cached_tokens, 0) << "a fresh server holds nothing";
  ASSERT_GT(cold.prompt_tokens, 5 * kChunk) << "the prompt should take several chunks";
  ASSERT_EQ(cold.completion_tokens, kMaxTokens) << cold.text;

  // Its prefix cached: all of the prompt but the last token (evaluated again for its logits).
  const double cached_before = Metric(t, "gemlet_prompt_tokens_cached_total");
  const Answer cached = Ask(port, req);
  EXPECT_EQ(cached.cached_tokens, cold.prompt_tokens - 1);
  EXPECT_EQ(Metric(t, "gemlet_prompt_tokens_cached_total") - cached_before, cached.cached_tokens);
  ExpectSame(cold, cached, "prefix cached");

  // The sibling takes the slot (the longest common prefix picks it): the next `req` finds only the
  // shared opening there and evaluates the rest in chunks that start at another place than cold.
  const Answer sib = Ask(port, sibling);
  EXPECT_NE(sib.text, cold.text) << "the sibling is another conversation";
  const Answer after = Ask(port, req);
  EXPECT_GT(after.cached_tokens, 0);
  EXPECT_LT(after.cached_tokens, cold.prompt_tokens - kChunk);
  ExpectSame(cold, after, "after another conversation took its slot");

  // Four copies: one in the slot holding its prefix (decoding from its first step while the others'
  // prompts go in beside it), three cold in the slots not used yet.
  double steps = Metric(t, "gemlet_decode_steps_total");
  const std::vector<Answer> four = AskAtOnce(port, {req, req, req, req});
  steps = Metric(t, "gemlet_decode_steps_total") - steps;
  for (size_t i = 0; i < four.size(); ++i) ExpectSame(cold, four[i], "copy " + std::to_string(i) + " of four at once");
  ExpectStepsShared(steps, four, "four copies");

  // One copy (its prefix cached: decoding at once) beside three other requests, whose prompt
  // chunks share its decoding steps.
  std::vector<Request> mixed = others;
  mixed.insert(mixed.begin() + 1, req);
  steps = Metric(t, "gemlet_decode_steps_total");
  const std::vector<Answer> beside = AskAtOnce(port, mixed);
  steps = Metric(t, "gemlet_decode_steps_total") - steps;
  ExpectSame(cold, beside[1], "beside three other requests");
  ExpectStepsShared(steps, beside, "one copy and three others");

  // Server B: other chunks, one thread, and its prefix replayed (not kept) when cached.
  TestServer b(OneSlotServer());
  ExpectSame(cold, Ask(b.server->port(), req), "one slot, 256-token chunks, one thread, cold");
  const Answer replayed = Ask(b.server->port(), req);
  // The answer went past the rings' spare room: the kept prefix was evaluated again to refill the
  // sliding-window rings, and so is not reported as cached.
  EXPECT_EQ(replayed.cached_tokens, 0);
  ExpectSame(cold, replayed, "one slot, prefix cached (replayed)");
}

std::vector<Request> Others() {
  return {{"/v1/chat/completions", Chat("你好")},
          {"/v1/chat/completions",
           Chat("Polish this sentence: me and him goes to the market yesterday for buy some apple and 一些香蕉, "
                "but the market it was close because of the rain, so we come back home and cook noodle instead.")},
          {"/v1/completions",
           Text("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
                "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the "
                "waters. And God said, Let there be light: and there was light. And God saw the light, that it "
                "was good: and God divided the light from the darkness.")}};
}

TEST(ServerSameAnswer, GreedyChat) {
  ExpectSameAnswerEverywhere({"/v1/chat/completions", Chat(kNotes)}, {"/v1/chat/completions", Chat(kPoemQuestion)},
                             Others());
}

TEST(ServerSameAnswer, GreedyText) {
  const std::string opening = std::string(kSystem) + "\n\n";
  ExpectSameAnswerEverywhere({"/v1/completions", Text(opening + kNotes)},
                             {"/v1/completions", Text(opening + kPoemQuestion)}, Others());
}

// Issue #39: "Sampling at temperature > 0 with a seed is reproducible too (same seed, same text,
// whatever the batch)". Each request's sampler is seeded from its own seed alone.
TEST(ServerSameAnswer, SeededSampling) {
  ExpectSameAnswerEverywhere({"/v1/chat/completions", Chat(kNotes, 0.8)},
                             {"/v1/chat/completions", Chat(kPoemQuestion, 0.8)}, Others());
}

}  // namespace
}  // namespace gemlet

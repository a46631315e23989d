// LoRA adapters through the public API: Engine::LoadAdapter, Session/Conversation::SetAdapters, the
// cache keyed by the adapters (switching never reuses another adapter's K/V), saved states bound to
// them, batched requests with different adapters, and the C API.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "api/api_test_util.h"
#include "common/lora_files.h"
#include "gemlet/gemlet.h"
#include "gguf/gguf_reader.h"

namespace gemlet {
namespace {

using test::DemoEngine;
using test::Greedy;

// Two adapters for the demo model, made once per process.
struct Adapters {
  test::TempDir dir;
  std::string a, b;
  Adapters() {
    auto demo = GgufFile::Open(test::kDemoModel);
    EXPECT_TRUE(demo.ok()) << demo.message();
    a = dir.File("a.gguf");
    b = dir.File("b.gguf");
    test::AdapterSpec sa;
    sa.rank = 8;
    sa.alpha = 16;
    test::WriteGgufAdapter(*demo.value(), a, sa);
    test::AdapterSpec sb;
    sb.seed = 21;
    sb.targets = {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kDown};
    sb.type = DType::kF16;
    test::WriteGgufAdapter(*demo.value(), b, sb);
  }
};
const Adapters& Files() {
  static const Adapters files;
  return files;
}

std::shared_ptr<const Adapter> Load(const std::string& path) {
  auto a = DemoEngine()->LoadAdapter(path);
  EXPECT_TRUE(a.ok()) << a.message();
  return a.ok() ? a.value() : nullptr;
}

std::vector<int32_t> Prompt() { return DemoEngine()->Tokenize("The quick brown fox jumps over the lazy dog, and then"); }

std::vector<float> NextLogits(Session& s, const std::vector<int32_t>& tokens) {
  std::vector<float> logits(static_cast<size_t>(s.engine().info().n_vocab));
  EXPECT_TRUE(s.Evaluate(tokens, logits.data()).ok());
  return logits;
}

std::unique_ptr<Session> NewSession(std::vector<AdapterUse> adapters = {}) {
  SessionOptions o;
  o.n_ctx = 256;
  o.adapters = std::move(adapters);
  auto s = Session::Create(DemoEngine(), o);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(LoraApi, LoadsAndDescribesAnAdapter) {
  auto a = Load(Files().a);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->rank(), 8);
  EXPECT_FLOAT_EQ(a->alpha(), 16.0f);
  EXPECT_EQ(a->path(), Files().a);
  EXPECT_EQ(a->name(), "a");
  EXPECT_EQ(a->sha256().size(), 64u);
  EXPECT_EQ(a->projections() % 7, 0);
  EXPECT_GT(a->bytes(), 0u);
  auto bad = DemoEngine()->LoadAdapter(test::kDemoModel);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("not an adapter"), std::string::npos) << bad.message();
  EXPECT_FALSE(DemoEngine()->LoadAdapter(Files().dir.File("missing.gguf")).ok());
}

// Options or SetAdapters: the same logits; they differ from the base's; an adapter of another
// engine is refused.
TEST(LoraApi, SessionsRunTheirAdapters) {
  auto a = Load(Files().a);
  ASSERT_TRUE(a);
  auto base = NewSession();
  auto from_options = NewSession({{a, 0.5f}});
  auto set_later = NewSession();
  ASSERT_TRUE(base && from_options && set_later);
  ASSERT_TRUE(set_later->SetAdapters(std::vector<AdapterUse>{{a, 0.5f}}).ok());
  ASSERT_EQ(set_later->adapters().size(), 1u);
  EXPECT_EQ(set_later->adapters()[0].scale, 0.5f);
  const std::vector<float> plain = NextLogits(*base, Prompt());
  const std::vector<float> x = NextLogits(*from_options, Prompt());
  EXPECT_EQ(test::MaxAbsDiff(x, NextLogits(*set_later, Prompt())), 0.0f);
  EXPECT_GT(test::MaxAbsDiff(x, plain), 1e-2f);

  EngineOptions eo;
  eo.memory_pressure_path = "";
  auto other = Engine::Load(test::kDemoModel, eo);
  ASSERT_TRUE(other.ok());
  auto foreign = other.value()->LoadAdapter(Files().a);
  ASSERT_TRUE(foreign.ok());
  Status s = base->SetAdapters(std::vector<AdapterUse>{{foreign.value(), 1.0f}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("another engine"), std::string::npos) << s.message();
}

// The cache belongs to the adapters it was computed with: the same set keeps it, another set or
// scale empties it, and Complete then evaluates the whole prompt again (the answer is what a fresh
// session under the new adapters gives).
TEST(LoraApi, SwitchingAdaptersNeverReusesTheirKv) {
  auto a = Load(Files().a);
  auto b = Load(Files().b);
  ASSERT_TRUE(a && b);
  auto s = NewSession({{a, 1.0f}});
  ASSERT_TRUE(s);
  auto first = s->Complete(Prompt(), Greedy(8));
  ASSERT_TRUE(first.ok()) << first.message();
  const int held = s->n_past();
  ASSERT_GT(held, 0);
  ASSERT_TRUE(s->SetAdapters(std::vector<AdapterUse>{{a, 1.0f}}).ok());
  EXPECT_EQ(s->n_past(), held) << "the same adapters keep the cache";
  auto again = s->Complete(Prompt(), Greedy(8));
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->stats.cached_tokens, 0);
  EXPECT_EQ(again->text, first->text);

  for (const std::vector<AdapterUse>& next : {std::vector<AdapterUse>{{a, 0.5f}}, std::vector<AdapterUse>{{b, 1.0f}},
                                              std::vector<AdapterUse>{{b, 1.0f}, {a, 1.0f}}, std::vector<AdapterUse>{}}) {
    ASSERT_TRUE(s->SetAdapters(next).ok());
    EXPECT_EQ(s->n_past(), 0);
    auto switched = s->Complete(Prompt(), Greedy(8));
    ASSERT_TRUE(switched.ok());
    EXPECT_EQ(switched->stats.cached_tokens, 0);
    auto fresh = NewSession(next);
    auto want = fresh->Complete(Prompt(), Greedy(8));
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(switched->text, want->text);
    EXPECT_EQ(switched->tokens, want->tokens);
  }
}

// A saved state is bound to its adapters: resumed under the same ones it gives the same next
// logits; under others (or none) it is refused with a line that says so.
TEST(LoraApi, SavedStatesAreBoundToTheirAdapters) {
  test::TempDir dir;
  auto a = Load(Files().a);
  auto b = Load(Files().b);
  auto s = NewSession({{a, 1.0f}});
  ASSERT_TRUE(s->Evaluate(Prompt()).ok());
  const std::string path = dir.File("state.bin");
  ASSERT_TRUE(s->SaveState(path).ok());
  const std::vector<int32_t> next = {DemoEngine()->Tokenize(" jumps")[0]};
  const std::vector<float> want = NextLogits(*s, next);

  for (const std::vector<AdapterUse>& other : {std::vector<AdapterUse>{}, std::vector<AdapterUse>{{b, 1.0f}},
                                               std::vector<AdapterUse>{{a, 2.0f}}}) {
    auto t = NewSession(other);
    Status st = t->LoadState(path);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("LoRA"), std::string::npos) << st.message();
    EXPECT_EQ(t->n_past(), 0);
  }
  auto same = NewSession({{a, 1.0f}});
  ASSERT_TRUE(same->LoadState(path).ok());
  EXPECT_EQ(test::MaxAbsDiff(NextLogits(*same, next), want), 0.0f);
  // And a state saved without adapters does not resume under some.
  auto plain = NewSession();
  ASSERT_TRUE(plain->Evaluate(Prompt()).ok());
  ASSERT_TRUE(plain->SaveState(dir.File("plain.bin")).ok());
  Status st = NewSession({{a, 1.0f}})->LoadState(dir.File("plain.bin"));
  EXPECT_NE(st.message().find("without LoRA adapters"), std::string::npos) << st.message();
}

// A conversation that switches adapters mid-way answers as one that ran the new adapters over the
// same messages from the start.
TEST(LoraApi, ConversationSwitchesAdaptersBetweenTurns) {
  auto a = Load(Files().a);
  ConversationOptions co;
  co.session.n_ctx = 512;
  auto c = Conversation::Create(DemoEngine(), co);
  ASSERT_TRUE(c.ok());
  auto r1 = c.value()->Send("Tell me about foxes.", Greedy(12));
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(c.value()->SetAdapters(std::vector<AdapterUse>{{a, 1.0f}}).ok());
  EXPECT_EQ(c.value()->n_past(), 0);
  auto r2 = c.value()->Send("And about dogs?", Greedy(12));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->stats.cached_tokens, 0);

  co.session.adapters = {{a, 1.0f}};
  auto fresh = Conversation::Create(DemoEngine(), co);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(fresh.value()->SetMessages({{"user", "Tell me about foxes."}, {"assistant", r1->text}}).ok());
  auto want = fresh.value()->Send("And about dogs?", Greedy(12));
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(r2->text, want->text);
  ASSERT_EQ(c.value()->adapters().size(), 1u);
}

// Requests with different adapters share the batched steps and each gets its answer alone.
TEST(LoraApi, BatchedRequestsWithDifferentAdapters) {
  auto a = Load(Files().a);
  auto b = Load(Files().b);
  const std::vector<std::vector<AdapterUse>> sets = {{{a, 1.0f}}, {}, {{b, 0.7f}}, {{a, 0.3f}, {b, 1.0f}}};
  std::vector<std::string> alone;
  for (const auto& set : sets) {
    auto s = NewSession(set);
    auto r = s->Generate(Prompt(), Greedy(10));
    ASSERT_TRUE(r.ok());
    alone.push_back(r->text);
  }
  auto decoder = BatchDecoder::Create(DemoEngine());
  ASSERT_TRUE(decoder.ok()) << decoder.message();
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<int> ids;
  for (const auto& set : sets) {
    sessions.push_back(NewSession(set));
    auto id = decoder.value()->Submit(*sessions.back(), Prompt(), Greedy(10));
    ASSERT_TRUE(id.ok()) << id.message();
    ids.push_back(id.value());
  }
  std::map<int, std::string> got;
  while (got.size() < sets.size()) {
    for (const BatchDecoder::Finished& f : decoder.value()->Step()) {
      ASSERT_TRUE(f.reply.ok()) << f.reply.message();
      got[f.id] = f.reply.value().text;
    }
  }
  for (size_t i = 0; i < sets.size(); ++i) EXPECT_EQ(got[ids[i]], alone[i]) << "request " << i;
}

TEST(LoraApi, CApi) {
  gemlet_engine* engine = nullptr;
  ASSERT_EQ(gemlet_engine_load(test::kDemoModel, nullptr, &engine), GEMLET_OK) << gemlet_last_error();
  gemlet_adapter* adapter = nullptr;
  ASSERT_EQ(gemlet_engine_load_adapter(engine, Files().a.c_str(), &adapter), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_adapter_rank(adapter), 8);
  EXPECT_STREQ(gemlet_adapter_name(adapter), "a");
  EXPECT_EQ(std::strlen(gemlet_adapter_sha256(adapter)), 64u);
  gemlet_adapter* wrong = nullptr;
  EXPECT_NE(gemlet_engine_load_adapter(engine, test::kDemoModel, &wrong), GEMLET_OK);
  EXPECT_EQ(wrong, nullptr);
  EXPECT_NE(std::string(gemlet_last_error()).find("not an adapter"), std::string::npos);

  gemlet_session* session = nullptr;
  ASSERT_EQ(gemlet_session_create(engine, nullptr, &session), GEMLET_OK) << gemlet_last_error();
  const gemlet_adapter* list[] = {adapter};
  const float scales[] = {0.25f};
  ASSERT_EQ(gemlet_session_set_adapters(session, list, scales, 1), GEMLET_OK) << gemlet_last_error();
  gemlet_adapter_free(adapter);  // the session keeps its reference
  ASSERT_EQ(gemlet_session_n_adapters(session), 1u);
  gemlet_adapter* got = nullptr;
  float scale = 0;
  ASSERT_EQ(gemlet_session_adapter_at(session, 0, &got, &scale), GEMLET_OK);
  EXPECT_EQ(scale, 0.25f);
  EXPECT_EQ(gemlet_adapter_rank(got), 8);
  EXPECT_EQ(gemlet_session_adapter_at(session, 1, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);
  const std::vector<int32_t> tokens = Prompt();
  EXPECT_EQ(gemlet_session_evaluate(session, tokens.data(), tokens.size(), nullptr), GEMLET_OK);
  ASSERT_EQ(gemlet_session_set_adapters(session, nullptr, nullptr, 0), GEMLET_OK);
  EXPECT_EQ(gemlet_session_n_adapters(session), 0u);
  EXPECT_EQ(gemlet_session_set_adapters(nullptr, nullptr, nullptr, 0), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_session_set_adapters(session, nullptr, nullptr, 2), GEMLET_INVALID_ARGUMENT);
  gemlet_adapter_free(got);
  gemlet_session_free(session);
  gemlet_engine_free(engine);
}

}  // namespace
}  // namespace gemlet

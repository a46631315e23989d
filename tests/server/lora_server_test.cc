// The server's LoRA adapters (llama-server's --lora, /lora-adapters and a request's "lora" list):
// each request answers as a session with its adapters would, requests with different adapters
// share the slots and steps, and a slot's cache is never reused under other adapters.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/lora_files.h"
#include "common/test_util.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"
#include "gguf/gguf_reader.h"
#include "server/server_test_util.h"

namespace gemlet {
namespace {

using nlohmann::json;

struct Files {
  test::TempDir dir;
  std::string a, b;
  Files() {
    auto demo = GgufFile::Open(GEMLET_DEMO_MODEL);
    EXPECT_TRUE(demo.ok());
    a = dir.File("a.gguf");
    b = dir.File("b.gguf");
    // Strong enough to change the demo model's greedy answers (a tuned adapter's job).
    test::AdapterSpec sa;
    sa.alpha = 64;
    test::AdapterSpec sb = sa;
    sb.seed = 33;
    test::WriteGgufAdapter(*demo.value(), a, sa);
    test::WriteGgufAdapter(*demo.value(), b, sb);
  }
};
const Files& AdapterFiles() {
  static const Files f;
  return f;
}

json Chat(const std::string& user, const json& lora = nullptr) {
  json j = {{"model", "demo"}, {"messages", {{{"role", "user"}, {"content", user}}}}, {"max_tokens", 12}, {"temperature", 0}};
  if (!lora.is_null()) j["lora"] = lora;
  return j;
}

// What a session with these adapters answers to the chat.
std::string Want(const std::string& user, std::vector<std::pair<std::string, float>> adapters) {
  SessionOptions so;
  so.n_ctx = 512;
  for (const auto& [path, scale] : adapters) {
    auto a = DemoEngine()->LoadAdapter(path);
    EXPECT_TRUE(a.ok()) << a.message();
    so.adapters.push_back({a.value(), scale});
  }
  auto s = Session::Create(DemoEngine(), so);
  EXPECT_TRUE(s.ok());
  std::vector<Message> m = {{"user", user}};
  auto prompt = DemoEngine()->TokenizeChat(m);
  GenerateOptions g;
  g.max_tokens = 12;
  g.sampling.temperature = 0;
  auto r = s.value()->Complete(prompt.value(), g);
  EXPECT_TRUE(r.ok());
  return r.ok() ? r->text : "";
}

std::string Answer(const httplib::Result& r) {
  EXPECT_TRUE(r);
  if (!r) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body)["choices"][0]["message"]["content"];
}

TEST(ServerLora, RequestsChooseTheirAdapters) {
  ServerOptions o;
  o.parallel = 2;
  o.adapters = {{AdapterFiles().a, 1.0f}, {AdapterFiles().b, 0.5f}};
  TestServer t(o);
  auto list = t.client->Get("/lora-adapters");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200);
  const json adapters = json::parse(list->body);
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_EQ(adapters[1]["id"], 1);
  EXPECT_EQ(adapters[1]["path"], AdapterFiles().b);
  EXPECT_EQ(adapters[1]["scale"], 0.5);

  const std::string q = "Write one line about the sea.";
  // No "lora": the server's scales; a list: those, the rest at 0; an empty list: the base.
  EXPECT_EQ(Answer(t.Post("/v1/chat/completions", Chat(q))), Want(q, {{AdapterFiles().a, 1.0f}, {AdapterFiles().b, 0.5f}}));
  EXPECT_EQ(Answer(t.Post("/v1/chat/completions", Chat(q, json::array({{{"id", 1}, {"scale", 2.0}}})))),
            Want(q, {{AdapterFiles().b, 2.0f}}));
  const std::string base = Want(q, {});
  EXPECT_EQ(Answer(t.Post("/v1/chat/completions", Chat(q, json::array()))), base);
  EXPECT_NE(base, Want(q, {{AdapterFiles().a, 1.0f}}));
  // The same prompt again under other adapters: no slot's cache may serve it.
  EXPECT_EQ(Answer(t.Post("/v1/chat/completions", Chat(q, json::array({{{"id", 0}, {"scale", 1.0}}})))),
            Want(q, {{AdapterFiles().a, 1.0f}}));

  // Two requests with different adapters at once: each its own answer.
  std::string first, second;
  std::thread other([&] {
    httplib::Client c("127.0.0.1", t.server->port());
    c.set_read_timeout(120, 0);
    first = Answer(c.Post("/v1/chat/completions", Chat(q, json::array({{{"id", 0}, {"scale", 1.0}}})).dump(),
                          "application/json"));
  });
  second = Answer(t.Post("/v1/chat/completions", Chat(q, json::array())));
  other.join();
  EXPECT_EQ(first, Want(q, {{AdapterFiles().a, 1.0f}}));
  EXPECT_EQ(second, base);

  // POST /lora-adapters sets the scales of requests without a list (unlisted: 0).
  auto set = t.Post("/lora-adapters", json::array({{{"id", 1}, {"scale", 1.0}}}));
  ASSERT_TRUE(set);
  EXPECT_EQ(set->status, 200) << set->body;
  EXPECT_EQ(Answer(t.Post("/v1/chat/completions", Chat(q))), Want(q, {{AdapterFiles().b, 1.0f}}));

  // Bad lists: one clear 400 each.
  ExpectError(t.Post("/v1/chat/completions", Chat(q, json::array({{{"id", 5}, {"scale", 1.0}}}))), 400, "lora");
  ExpectError(t.Post("/v1/chat/completions", Chat(q, json::object())), 400, "lora");
  ExpectError(t.Post("/v1/chat/completions", Chat(q, json::array({{{"id", 0}}}))), 400, "lora[0].scale");
  ExpectError(t.Post("/lora-adapters", json::array({{{"id", 9}, {"scale", 1.0}}})), 400);
}

TEST(ServerLora, AnAdapterForAnotherModelStopsTheStart) {
  ServerOptions o;
  o.adapters = {{GEMLET_DEMO_MODEL, 1.0f}};  // a model, not an adapter
  o.port = 0;
  auto s = Server::Create(DemoEngine(), o);
  ASSERT_TRUE(s.ok());
  Status st = s.value()->Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not an adapter"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace gemlet

// The server in process on the demo model, for the server's tests: a loaded engine shared by the
// tests of a binary, a server on a free port with a client, and the check of OpenAI's error shape.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"

namespace gemlet {

inline std::shared_ptr<Engine> DemoEngine() {
  static std::shared_ptr<Engine> engine = [] {
    EngineOptions o;
    o.memory_pressure_path = "";
    auto e = Engine::Load(GEMLET_DEMO_MODEL, o);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? std::move(e).value() : nullptr;
  }();
  return engine;
}

struct TestServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<httplib::Client> client;

  explicit TestServer(ServerOptions o = {}) {
    o.port = 0;
    if (o.slot.n_ctx == 0) o.slot.n_ctx = 512;
    if (o.model_name.empty()) o.model_name = "demo";
    auto s = Server::Create(DemoEngine(), o);
    EXPECT_TRUE(s.ok()) << s.message();
    server = std::move(s).value();
    Status st = server->Start();
    EXPECT_TRUE(st.ok()) << st.message();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(120, 0);
  }
  ~TestServer() { server->Stop(); }

  httplib::Result Post(const std::string& path, const nlohmann::json& body, const httplib::Headers& headers = {}) {
    return client->Post(path, headers, body.dump(), "application/json");
  }
};

inline void ExpectError(const httplib::Result& r, int status, const std::string& param = "") {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r->body;
  ASSERT_TRUE(j.contains("error")) << r->body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"]["type"].is_string());
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], param) << r->body;
  }
}

}  // namespace gemlet

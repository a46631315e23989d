// server::HttpFront over loopback with short timeouts and a small route table: heads gathered off
// the handlers (a trickled head holds no handler and is cut off at its deadline), the connection
// cap, keep-alive and pipelined requests, a body that stalls, and Stop beside every kind of
// connection.
#include "server/http_front.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace gemlet::server {
namespace {

using namespace std::chrono_literals;

class Routes : public httplib::Server {
 public:
  Routes() {
    Get("/hello", [](const httplib::Request&, httplib::Response& res) { res.set_content("hello", "text/plain"); });
    Post("/echo", [](const httplib::Request& req, httplib::Response& res) { res.set_content(req.body, "text/plain"); });
    Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(300ms);
      res.set_content("slow", "text/plain");
    });
    svr_sock_ = 0;  // serving (see RoutedServer in server.cc)
  }
  bool Handle(httplib::Stream& s, bool close_after) {
    bool closed = false;
    return process_request(s, close_after, closed, nullptr) && !closed;
  }
};

struct Front {
  Routes routes;
  std::unique_ptr<HttpFront> front;
  explicit Front(FrontOptions o) {
    auto f = HttpFront::Listen("127.0.0.1", 0, o, [this](httplib::Stream& s, bool c) { return routes.Handle(s, c); });
    EXPECT_TRUE(f.ok()) << f.message();
    front = std::move(f).value();
    front->Start();
  }
  int port() const { return front->port(); }
};

FrontOptions Short() {
  FrontOptions o;
  o.workers = 2;
  o.idle_timeout = 500ms;
  o.head_timeout = 400ms;
  o.read_timeout = 300ms;
  o.body_timeout = 600ms;
  return o;
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void Send(int fd, const std::string& s) { ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

// Everything the server sends until it closes (or 5 s pass).
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RequestHeadEnd, FindsTheBlankLine) {
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), 27u);
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\nHost: a\n\nbody"), 24u);
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n"), std::string_view::npos);
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r"), std::string_view::npos);
  EXPECT_EQ(RequestHeadEnd(""), std::string_view::npos);
  // Searching on from where the last search stopped (two bytes back) finds an end split across reads.
  const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  for (size_t split = 1; split < head.size(); ++split) {
    const size_t from = split < 2 ? 0 : split - 2;
    EXPECT_EQ(RequestHeadEnd(std::string_view(head).substr(0, split)), std::string_view::npos) << split;
    EXPECT_EQ(RequestHeadEnd(head, from), head.size()) << split;
  }
}

// A head sent one byte at a time is answered once it is whole; many trickling heads at once hold
// no handler (two workers here), and each is cut off with 408 at its deadline.
TEST(HttpFront, TrickledHeadsHoldNoHandler) {
  FrontOptions o = Short();
  o.head_timeout = 1500ms;  // answered well before the tricklers are cut off (sanitizer builds too)
  Front f(o);
  std::vector<int> tricklers;
  for (int i = 0; i < 50; ++i) {
    const int fd = Connect(f.port());
    ASSERT_GE(fd, 0);
    Send(fd, "GET /hello HTTP/1.1\r\nHo");
    tricklers.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  httplib::Client c("127.0.0.1", f.port());
  auto r = c.Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms) << "a request waited behind trickling heads";
  // One byte every 50 ms: the head is not done by its deadline.
  for (int step = 0; step < 4; ++step) {
    for (int fd : tricklers) (void)send(fd, "s", 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(50ms);
  }
  for (int fd : tricklers) {
    const std::string answer = ReadAll(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
    close(fd);
  }
  EXPECT_EQ(f.front->counts().head_timeouts, 50u);
  // A head that does arrive byte by byte within its time is answered.
  const int fd = Connect(f.port());
  for (char ch : std::string("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) {
    ASSERT_EQ(send(fd, &ch, 1, MSG_NOSIGNAL), 1);
    std::this_thread::sleep_for(1ms);
  }
  const std::string answer = ReadAll(fd);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("\r\n\r\nhello"), std::string::npos) << answer;
}

TEST(HttpFront, ConnectionsOverTheCapGet503) {
  FrontOptions o = Short();
  o.max_connections = 8;
  o.idle_timeout = 5s;
  Front f(o);
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(Connect(f.port()));
  std::this_thread::sleep_for(100ms);  // accepted
  const int extra = Connect(f.port());
  ASSERT_GE(extra, 0);
  const std::string refused = ReadAll(extra);
  close(extra);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  EXPECT_EQ(f.front->counts().over_cap, 1u);
  EXPECT_EQ(f.front->counts().open, 8u);
  for (int fd : held) close(fd);
  // Their closing is noticed and the cap frees up.
  for (int i = 0; i < 100 && f.front->counts().open > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(f.front->counts().open, 0u);
  httplib::Client c("127.0.0.1", f.port());
  auto r = c.Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpFront, KeepAliveAndPipelinedRequests) {
  Front f(Short());
  const int fd = Connect(f.port());
  ASSERT_GE(fd, 0);
  // Three requests in one write, the second with a body: three answers, in order, on one connection.
  Send(fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
           "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nworld"
           "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string answers = ReadAll(fd);
  close(fd);
  EXPECT_EQ(Count(answers, "HTTP/1.1 200"), 3u) << answers;
  const size_t first = answers.find("hello"), second = answers.find("world"), third = answers.rfind("hello");
  EXPECT_TRUE(first < second && second < third) << answers;
  // A keep-alive client reuses its connection across requests.
  httplib::Client c("127.0.0.1", f.port());
  c.set_keep_alive(true);
  for (int i = 0; i < 5; ++i) {
    const std::string body = std::to_string(1000 + i);
    auto r = c.Post("/echo", body, "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, body);
  }
  EXPECT_EQ(f.front->counts().open, 1u);
}

// A body that stops arriving fails at its deadline and frees its handler; an idle keep-alive
// connection is closed after the idle timeout.
TEST(HttpFront, StalledBodiesAndIdleConnectionsEnd) {
  Front f(Short());
  const int fd = Connect(f.port());
  Send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly a little");
  const auto start = std::chrono::steady_clock::now();
  (void)ReadAll(fd);  // the connection ends once the read times out
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  close(fd);
  const int idle = Connect(f.port());
  const auto idle_start = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadAll(idle), "");
  const auto waited = std::chrono::steady_clock::now() - idle_start;
  EXPECT_GE(waited, 400ms);
  EXPECT_LT(waited, 2s);
  close(idle);
  for (int i = 0; i < 100 && f.front->counts().open > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(f.front->counts().open, 0u);
  EXPECT_EQ(f.front->counts().busy, 0u);
}

TEST(HttpFront, OversizedHeadsAreRefused) {
  FrontOptions o = Short();
  o.max_head_bytes = 4096;
  Front f(o);
  const int long_line = Connect(f.port());
  Send(long_line, "GET /" + std::string(8000, 'a'));
  const std::string uri = ReadAll(long_line);
  close(long_line);
  EXPECT_EQ(uri.rfind("HTTP/1.1 414", 0), 0u) << uri.substr(0, 80);
  const int many = Connect(f.port());
  Send(many, "GET /hello HTTP/1.1\r\nX-A: " + std::string(8000, 'b'));
  const std::string headers = ReadAll(many);
  close(many);
  EXPECT_EQ(headers.rfind("HTTP/1.1 431", 0), 0u) << headers.substr(0, 80);
}

// Stop beside an idle connection, a trickling head and a request being handled: the handled one
// gets its answer, and Stop returns promptly.
TEST(HttpFront, StopEndsEveryConnection) {
  FrontOptions o = Short();
  o.idle_timeout = 10s;
  o.head_timeout = 10s;
  Front f(o);
  const int idle = Connect(f.port());
  const int partial = Connect(f.port());
  Send(partial, "GET /hel");
  auto slow = std::async(std::launch::async, [&f] {
    httplib::Client c("127.0.0.1", f.port());
    return c.Get("/slow");
  });
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  f.front->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  auto r = slow.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "slow");
  EXPECT_EQ(ReadAll(idle), "");
  EXPECT_EQ(ReadAll(partial), "");
  close(idle);
  close(partial);
  EXPECT_EQ(f.front->counts().open, 0u);
}

}  // namespace
}  // namespace gemlet::server

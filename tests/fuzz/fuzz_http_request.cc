// libFuzzer target for the bytes a client sends gemlet serve: each input goes over a loopback
// connection to a server on the demo model, as it is (request lines, headers, bodies, several
// requests pipelined, a head cut off anywhere), then the client's side closes. Everything that
// reads them runs as in `gemlet serve`: the connections' front (server/http_front.h: head framing,
// limits, pipelining), cpp-httplib's parser (Debian's library, so its code gives no coverage, but
// every byte it passes on does), the guard (Host, Origin, preflights, the API key), the routes and
// their bodies, the model for what asks for it. Whatever comes back must be HTTP responses; the
// server must answer the next connection (checked every 256 inputs); no crash, no sanitizer report.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "gemlet/gemlet.hpp"
#include "gemlet/server.hpp"

namespace {

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_http_request: %s\n", what);
    std::abort();
  }
}

gemlet::Server& TheServer() {
  static std::unique_ptr<gemlet::Server> server = [] {
    gemlet::EngineOptions eo;
    eo.memory_pressure_path = "";
    auto engine = gemlet::Engine::Load(GEMLET_DEMO_MODEL, eo);
    Require(engine.ok(), "cannot load the demo model");
    gemlet::ServerOptions o;
    o.port = 0;
    o.parallel = 2;
    o.queue_size = 8;
    o.slot.n_ctx = 256;
    o.max_tokens = 8;  // a generation costs milliseconds, not seconds
    o.max_body_bytes = 64 << 10;
    o.head_timeout_seconds = 1;
    o.model_name = "demo";
    auto s = gemlet::Server::Create(std::move(engine).value(), o);
    Require(s.ok(), "cannot create the server");
    Require(s.value()->Start().ok(), "cannot start the server");
    return std::move(s).value();
  }();
  return *server;
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  Require(fd >= 0, "no socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Require(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "the server refuses connections");
  timeval tv{15, 0};  // longer than any of the server's own timeouts
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

// Sends `request`, closes the sending side and returns everything the server answered.
std::string Exchange(int port, std::string_view request) {
  const int fd = Connect(port);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed (an oversized head or body is refused before it is read)
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[16 << 10];
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return answer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint64_t inputs = 0;
  const int port = TheServer().port();
  const std::string answer = Exchange(port, std::string_view(reinterpret_cast<const char*>(data), size));
  Require(answer.empty() || answer.rfind("HTTP/1.1 ", 0) == 0, "an answer that is not HTTP");
  if (++inputs % 256 == 0) {
    const std::string health = Exchange(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    Require(health.rfind("HTTP/1.1 200", 0) == 0, "the server stopped answering");
  }
  return 0;
}

// libFuzzer target for the HTTP layer of gemlet serve without sockets or a model: the input is what
// one connection sends. As the front does (server/http_front.h), heads are framed by
// RequestHeadEnd and refused past the head limit; each complete one goes through cpp-httplib's
// request handling (request line, headers, Content-Length and chunked bodies, Expect, ranges,
// pipelining: what is left unread is the next request) with the server's own admission
// (server/admission.h: sizes, Host, Origin and preflights, the API key) before small routes in place
// of the model's. Every answer must be an HTTP response and every request must consume input.
// fuzz_http_request runs the whole server over loopback (slower; the model answers too).
#include <httplib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "server/admission.h"
#include "server/http_front.h"

namespace {

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_http_parser: %s\n", what);
    std::abort();
  }
}

// One connection's bytes as cpp-httplib's stream: reads from the input (0 at its end, as when the
// client shuts its side), writes into `written`.
class MemoryStream final : public httplib::Stream {
 public:
  explicit MemoryStream(std::string_view input) : input_(input) {}
  bool is_readable() const override { return offset_ < input_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, input_.size() - offset_);
    std::memcpy(ptr, input_.data() + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    written.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 50000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return 0; }
  size_t consumed() const { return offset_; }
  std::string written;

 private:
  std::string_view input_;
  size_t offset_ = 0;
};

class Routes : public httplib::Server {
 public:
  Routes() {
    gemlet::server::AdmissionOptions admission;
    admission.listen_host = "127.0.0.1";
    admission.allowed_hosts = {"*.lan"};
    admission.cors_origins = {"http://localhost:*", "app://*"};
    admission.machine_hostname = "laptop";
    admission.api_key = "sk-test";
    admission.max_body_bytes = 64 << 10;
    set_payload_max_length(admission.max_body_bytes);
    set_pre_routing_handler([admission](const httplib::Request& req, httplib::Response& res) {
      return gemlet::server::Admit(req, res, admission) ? HandlerResponse::Handled : HandlerResponse::Unhandled;
    });
    const auto answer = [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()) + " " + req.get_header_value("Content-Type"), "text/plain");
    };
    Get("/health", answer);
    Get("/v1/models", answer);
    Post("/v1/chat/completions", answer);
    Post(R"(/v1/tasks/([a-z_]+))", answer);
    // A streamed answer, as the completions routes give one.
    Post("/api/generate", [](const httplib::Request& req, httplib::Response& res) {
      const size_t chunks = req.body.size() % 4;
      res.set_chunked_content_provider("application/x-ndjson", [chunks](size_t offset, httplib::DataSink& sink) {
        if (offset / 8 < chunks) return sink.write("{\"a\":1}\n", 8);
        sink.done();
        return true;
      });
    });
    svr_sock_ = 0;  // serving (see RoutedServer in server.cc)
  }
  bool Handle(httplib::Stream& s) {
    bool closed = false;
    return process_request(s, false, closed, nullptr) && !closed;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Routes routes;
  constexpr size_t kMaxHead = 8 << 10;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    if (gemlet::server::RequestHeadEnd(rest) == std::string_view::npos) {
      if (rest.size() > kMaxHead) {
        const std::string answer = gemlet::server::OversizedHeadAnswer(rest, kMaxHead);
        Require(answer.rfind("HTTP/1.1 414", 0) == 0 || answer.rfind("HTTP/1.1 431", 0) == 0,
                "an oversized head's answer is not 414 or 431");
      }
      break;  // the client closed before its head ended: nothing to answer
    }
    MemoryStream stream(rest);
    const bool keep = routes.Handle(stream);
    Require(stream.consumed() > 0 && stream.consumed() <= rest.size(), "a request consumed no input");
    Require(stream.written.empty() || stream.written.rfind("HTTP/1.1 ", 0) == 0, "an answer that is not HTTP");
    if (!keep) break;
    rest.remove_prefix(stream.consumed());
  }
  return 0;
}

// The server's side of its TCP connections: one thread reads every connection's request head, and a
// connection goes to a worker only once its head has fully arrived.
//
// cpp-httplib 0.11 (Debian 12's) gives each connection a thread from the moment it is accepted and
// times out each read, not a whole head: a client trickling its head one byte every few seconds
// kept a thread for as long as it liked, and a few hundred such clients took them all. Here an
// idle, slow or trickling connection costs a buffer in an epoll set, with a deadline for its whole
// head and a cap on how many are open; the workers run cpp-httplib's request handling (its parser,
// the routes) only on connections that are ready.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gemlet/status.hpp"

namespace gemlet::server {

struct FrontOptions {
  int workers = 64;            // requests handled at once (a streamed answer holds one to its end)
  int max_connections = 512;   // open at once; one more is answered 503 and closed
  size_t max_head_bytes = 64 << 10;  // a request line and headers together; more: 414 or 431
  int max_requests_per_connection = 1000;
  std::chrono::milliseconds idle_timeout{2000};   // no byte of a next request for this long: closed
  std::chrono::milliseconds head_timeout{10000};  // from a head's first byte to its end; then 408
  std::chrono::milliseconds read_timeout{10000};  // each wait for a body's next bytes
  std::chrono::milliseconds body_timeout{30000};  // from the head's end to the body's end
  std::chrono::milliseconds write_timeout{30000};  // each wait for the client to take more
};

// Handles one request whose head is ready to be read from `stream` (cpp-httplib's parser and the
// routes); `close_after` asks it to answer with "Connection: close". Returns whether the connection
// may carry another request.
using RequestHandler = std::function<bool(httplib::Stream& stream, bool close_after)>;

struct FrontCounts {
  size_t open = 0;           // connections open now
  size_t busy = 0;           // ... of them with a worker
  uint64_t over_cap = 0;     // answered 503 because max_connections were open
  uint64_t head_timeouts = 0;  // closed (408) because a head did not arrive in time
};

// Where a request head that starts `bytes` ends (past its blank line: "\r\n\r\n", or a bare
// "\n\n" as cpp-httplib also reads), or npos; `from`: no end starts before it.
size_t RequestHeadEnd(std::string_view bytes, size_t from = 0);

// The answer to a connection whose head has grown past `max_head_bytes` with no end: 414 while its
// request line has not ended, else 431 (it is closed after).
std::string OversizedHeadAnswer(std::string_view buffer, size_t max_head_bytes);

class HttpFront {
 public:
  // Binds host:port (0: a free port) and listens; nothing is accepted before Start.
  static Result<std::unique_ptr<HttpFront>> Listen(const std::string& host, int port, const FrontOptions& options,
                                                   RequestHandler handler);
  ~HttpFront();  // Stop()
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  int port() const;
  void Start();
  // Stops accepting, closes the connections waiting for a request, ends the reading side of the
  // busy ones (their answers still go out) and joins every thread once their handlers return.
  void Stop();
  FrontCounts counts() const;

  struct Impl;

 private:
  explicit HttpFront(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemlet::server

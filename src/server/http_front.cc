// HttpFront: accepting connections, gathering request heads on one epoll thread, and the workers
// that run cpp-httplib's request handling on connections whose head has arrived.
#include "server/http_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

namespace gemlet::server {

size_t RequestHeadEnd(std::string_view bytes, size_t from) {
  for (size_t i = from; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    if (i + 1 < bytes.size() && bytes[i + 1] == '\n') return i + 2;
    if (i + 2 < bytes.size() && bytes[i + 1] == '\r' && bytes[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  std::string buffer;     // read and not yet handled: a head, maybe more (a body, a next request)
  size_t scanned = 0;     // `buffer` holds no head end before this
  bool head_started = false;  // some bytes of the next head are in
  Clock::time_point deadline;
  int requests = 0;
};

// An answer the front gives itself (the request never reaches the routes), in OpenAI's error shape.
std::string CannedResponse(int status, const char* reason, const std::string& message) {
  const std::string body = std::string(R"({"error":{"message":")") + message + R"(","type":")" +
                           (status >= 500 ? "server_error" : "invalid_request_error") + R"(","param":null,"code":null}})";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + (status == 503 ? "Retry-After: 1\r\n" : "") + "\r\n" + body;
}

}  // namespace

std::string OversizedHeadAnswer(std::string_view buffer, size_t max_head_bytes) {
  const std::string limit = std::to_string(max_head_bytes);
  if (buffer.find('\n') == std::string_view::npos) {
    return CannedResponse(414, "URI Too Long", "the request line is over " + limit + " bytes");
  }
  return CannedResponse(431, "Request Header Fields Too Large", "the request's headers are over " + limit + " bytes");
}

namespace {

// Best effort: the socket's buffer takes a short answer at once, or the client is gone.
void SendAndClose(int fd, const std::string& response) {
  (void)send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

int PollFor(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
    if (n >= 0 || errno != EINTR) return n;
  }
}

void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ip.clear();
  port = -1;
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

// One request's view of its connection for cpp-httplib: the bytes the front already read first,
// then the socket, with the body's deadline on every read.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Connection& c, const FrontOptions& o)
      : c_(c), o_(o), body_deadline_(Clock::now() + o.body_timeout) {}

  bool is_readable() const override { return offset_ < c_.buffer.size() || PollFor(c_.fd, POLLIN, o_.read_timeout) > 0; }
  bool is_writable() const override { return PollFor(c_.fd, POLLOUT, o_.write_timeout) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (offset_ == c_.buffer.size()) {
      const ssize_t got = Fill();
      if (got <= 0) return got;  // -1: a timeout or an error; 0: the client closed
    }
    const size_t n = std::min(size, c_.buffer.size() - offset_);
    std::memcpy(ptr, c_.buffer.data() + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && PollFor(c_.fd, POLLOUT, o_.write_timeout) > 0) {
        continue;
      } else {
        return -1;
      }
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { AddressOf(c_.fd, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { AddressOf(c_.fd, false, ip, port); }
  socket_t socket() const override { return c_.fd; }

  // What the request left unread (a pipelined next request) stays for the next head.
  void KeepUnread() {
    c_.buffer.erase(0, offset_);
    offset_ = 0;
  }

 private:
  // The next bytes from the socket into the buffer (cpp-httplib reads a head byte by byte), within
  // the read timeout and the body's deadline.
  ssize_t Fill() {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(body_deadline_ - Clock::now());
      if (left.count() <= 0 || PollFor(c_.fd, POLLIN, std::min(o_.read_timeout, left)) <= 0) return -1;
      c_.buffer.resize(16 << 10);
      offset_ = 0;
      const ssize_t n = ::recv(c_.fd, c_.buffer.data(), c_.buffer.size(), 0);
      c_.buffer.resize(n > 0 ? static_cast<size_t>(n) : 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      return n;
    }
  }

  Connection& c_;
  const FrontOptions& o_;
  size_t offset_ = 0;
  Clock::time_point body_deadline_;
};

}  // namespace

struct HttpFront::Impl {
  FrontOptions options;
  RequestHandler handler;
  int listen_fd = -1;
  int port = 0;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::thread loop;
  std::vector<std::thread> workers;
  std::atomic<bool> stopping{false};
  std::mutex lifecycle;  // Start and Stop
  bool started = false, stopped = false;

  // The loop thread's own: connections waiting for (the rest of) a head.
  std::unordered_map<int, std::unique_ptr<Connection>> waiting;

  mutable std::mutex mutex;  // everything below
  std::condition_variable work_ready;
  std::deque<std::unique_ptr<Connection>> ready;      // heads complete, for a worker
  std::vector<std::unique_ptr<Connection>> returned;  // from a worker, for the loop
  std::set<int> busy;  // sockets a worker holds: Stop ends their reads
  bool workers_exit = false;
  size_t open = 0;
  uint64_t over_cap = 0, head_timeouts = 0;

  void Loop();
  void Worker();
  void Accept();
  void ReadHead(Connection& c);
  void Wait(std::unique_ptr<Connection> c);  // into the epoll set, or on to a worker when its head is in
  void Dispatch(std::unique_ptr<Connection> c);
  void Close(int fd);  // a connection the loop holds
  void Expire();
  int NextTimeoutMs() const;
  void Wake() const {
    const uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof(one));
  }
};

Result<std::unique_ptr<HttpFront>> HttpFront::Listen(const std::string& host, int port, const FrontOptions& options,
                                                     RequestHandler handler) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Status::Error("cannot listen on " + host + ":" + service + ": " + gai_strerror(rc));
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    // A deep backlog: a burst of clients would otherwise see their handshakes dropped.
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return Status::Error("cannot listen on " + host + ":" + service + ": " + why);

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->options.workers = std::max(1, options.workers);
  impl->handler = std::move(handler);
  impl->listen_fd = fd;
  std::string ip;
  AddressOf(fd, false, ip, impl->port);
  impl->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  impl->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->epoll_fd < 0 || impl->wake_fd < 0) {
    const std::string error = std::strerror(errno);
    if (impl->epoll_fd >= 0) ::close(impl->epoll_fd);
    if (impl->wake_fd >= 0) ::close(impl->wake_fd);
    ::close(fd);
    return Status::Error("cannot watch connections: " + error);
  }
  for (const int watched : {fd, impl->wake_fd}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = watched;
    epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, watched, &e);
  }
  return std::unique_ptr<HttpFront>(new HttpFront(std::move(impl)));
}

HttpFront::HttpFront(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpFront::~HttpFront() {
  Stop();
  ::close(impl_->listen_fd);
  ::close(impl_->epoll_fd);
  ::close(impl_->wake_fd);
}

int HttpFront::port() const { return impl_->port; }

void HttpFront::Start() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.lifecycle);
  if (d.started || d.stopped) return;
  d.started = true;
  for (int i = 0; i < d.options.workers; ++i) d.workers.emplace_back([&d] { d.Worker(); });
  d.loop = std::thread([&d] { d.Loop(); });
}

void HttpFront::Stop() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.lifecycle);
  if (d.stopped) return;
  d.stopped = true;
  d.stopping = true;
  d.Wake();
  if (d.loop.joinable()) d.loop.join();  // it closes the connections waiting for a request
  std::vector<std::unique_ptr<Connection>> left;
  {
    std::lock_guard<std::mutex> guard(d.mutex);
    // A request being read ends now; an answer being written still goes out.
    for (int fd : d.busy) ::shutdown(fd, SHUT_RD);
    d.workers_exit = true;
  }
  d.work_ready.notify_all();
  for (auto& t : d.workers) t.join();
  d.workers.clear();
  std::lock_guard<std::mutex> guard(d.mutex);
  for (auto& c : d.ready) left.push_back(std::move(c));
  for (auto& c : d.returned) left.push_back(std::move(c));
  d.ready.clear();
  d.returned.clear();
  for (auto& c : left) {
    ::close(c->fd);
    --d.open;
  }
}

FrontCounts HttpFront::counts() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return FrontCounts{impl_->open, impl_->busy.size(), impl_->over_cap, impl_->head_timeouts};
}

void HttpFront::Impl::Loop() {
  epoll_event events[64];
  while (!stopping) {
    const int n = epoll_wait(epoll_fd, events, 64, NextTimeoutMs());
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd) {
        uint64_t count = 0;
        (void)!::read(wake_fd, &count, sizeof(count));
      } else if (fd == listen_fd) {
        Accept();
      } else if (auto it = waiting.find(fd); it != waiting.end()) {
        ReadHead(*it->second);
      }
    }
    std::vector<std::unique_ptr<Connection>> back;
    {
      std::lock_guard<std::mutex> lock(mutex);
      back.swap(returned);
    }
    for (auto& c : back) Wait(std::move(c));
    Expire();
  }
  std::vector<int> left;
  for (const auto& [fd, c] : waiting) left.push_back(fd);
  for (int fd : left) Close(fd);
}

int HttpFront::Impl::NextTimeoutMs() const {
  int64_t ms = 1000;
  const Clock::time_point now = Clock::now();
  for (const auto& [fd, c] : waiting) {
    ms = std::min<int64_t>(ms, std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - now).count() + 1);
  }
  return static_cast<int>(std::max<int64_t>(0, ms));
}

void HttpFront::Impl::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors: the pending connections stay in the backlog; wait before trying again
      // rather than spin on a listening socket that stays readable.
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (open >= static_cast<size_t>(options.max_connections)) {
        ++over_cap;
        SendAndClose(fd, CannedResponse(503, "Service Unavailable",
                                        "the server has " + std::to_string(options.max_connections) +
                                            " connections open, its limit; try again"));
        continue;
      }
      ++open;
    }
    // Streamed answers are many small writes: send each at once.
    const int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    Wait(std::move(c));
  }
}

void HttpFront::Impl::Wait(std::unique_ptr<Connection> c) {
  if (stopping) {
    ::close(c->fd);
    std::lock_guard<std::mutex> lock(mutex);
    --open;
    return;
  }
  c->scanned = 0;
  if (RequestHeadEnd(c->buffer, 0) != std::string_view::npos) return Dispatch(std::move(c));  // pipelined
  c->head_started = !c->buffer.empty();
  c->deadline = Clock::now() + (c->head_started ? options.head_timeout : options.idle_timeout);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = c->fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &e);
  const int fd = c->fd;
  waiting.emplace(fd, std::move(c));
}

void HttpFront::Impl::ReadHead(Connection& c) {
  char chunk[16 << 10];
  const ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) return Close(c.fd);  // the client left
  if (!c.head_started) {
    c.head_started = true;
    c.deadline = Clock::now() + options.head_timeout;
  }
  c.buffer.append(chunk, static_cast<size_t>(n));
  if (RequestHeadEnd(c.buffer, c.scanned) != std::string_view::npos) {
    auto it = waiting.find(c.fd);
    std::unique_ptr<Connection> owned = std::move(it->second);
    waiting.erase(it);
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, owned->fd, nullptr);
    return Dispatch(std::move(owned));
  }
  c.scanned = c.buffer.size() < 2 ? 0 : c.buffer.size() - 2;
  if (c.buffer.size() > options.max_head_bytes) {
    const int fd = c.fd;
    const std::string answer = OversizedHeadAnswer(c.buffer, options.max_head_bytes);
    waiting.erase(fd);
    SendAndClose(fd, answer);
    std::lock_guard<std::mutex> lock(mutex);
    --open;
  }
}

void HttpFront::Impl::Dispatch(std::unique_ptr<Connection> c) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    busy.insert(c->fd);
    ready.push_back(std::move(c));
  }
  work_ready.notify_one();
}

void HttpFront::Impl::Close(int fd) {
  ::close(fd);  // also leaves the epoll set
  waiting.erase(fd);
  std::lock_guard<std::mutex> lock(mutex);
  --open;
}

void HttpFront::Impl::Expire() {
  const Clock::time_point now = Clock::now();
  std::vector<int> late;
  for (const auto& [fd, c] : waiting) {
    if (now >= c->deadline) late.push_back(fd);
  }
  for (int fd : late) {
    if (waiting[fd]->head_started) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++head_timeouts;
      }
      const std::string timeout = CannedResponse(
          408, "Request Timeout",
          "the request's head did not arrive within " + std::to_string(options.head_timeout.count() / 1000.0) + " s");
      (void)::send(fd, timeout.data(), timeout.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    Close(fd);
  }
}

void HttpFront::Impl::Worker() {
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      std::unique_lock<std::mutex> lock(mutex);
      work_ready.wait(lock, [this] { return workers_exit || !ready.empty(); });
      if (workers_exit) return;  // Stop closes what is still queued
      c = std::move(ready.front());
      ready.pop_front();
    }
    ++c->requests;
    const bool close_after = stopping || c->requests >= options.max_requests_per_connection;
    bool keep = false;
    {
      ConnectionStream stream(*c, options);
      try {
        keep = handler(stream, close_after);
      } catch (...) {
        keep = false;  // cpp-httplib answers a route's exception itself; anything else ends the connection
      }
      if (keep) stream.KeepUnread();
    }
    keep = keep && !close_after && !stopping;
    const int fd = c->fd;
    {
      std::lock_guard<std::mutex> lock(mutex);
      busy.erase(fd);  // before the close: Stop must not shut down a number reused by then
      if (keep) {
        returned.push_back(std::move(c));
      } else {
        --open;
      }
    }
    if (keep) {
      Wake();
    } else {
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
    }
  }
}

}  // namespace gemlet::server

// server::Admit: sizes, Host, Origin and the API key, before any route.
#include "server/admission.h"

#include <cstdlib>

#include "server/http_guard.h"
#include "server/web/web_assets.h"

namespace gemlet::server {
namespace {

constexpr size_t kDrainFactor = 4;   // bodies up to 4x the limit are drained before their 413
constexpr size_t kMaxHeaders = 100;  // browsers send ~20; each line is at most 8 KiB (cpp-httplib's limit)

// Compares without an early exit, so response times do not leak how much of a key was right.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0;
}

bool Authorized(const httplib::Request& req, const std::string& api_key) {
  if (api_key.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.compare(0, prefix.size(), prefix) != 0) return false;
  return SameSecret(header.substr(prefix.size()), api_key);
}

}  // namespace

std::string ErrorText(const ApiError& e) {
  return ErrorJson(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(ErrorText(e), "application/json; charset=utf-8");
}

bool Admit(const httplib::Request& req, httplib::Response& res, const AdmissionOptions& o) {
  // Sizes first, before the body is read (cpp-httplib reads it after this handler): a body
  // announced far beyond the limit is refused at once, and the connection closed rather than
  // drained. One just over it is read and dropped by cpp-httplib, which answers 413 then: a client
  // still sending when the connection closes may see a reset instead of the answer.
  if (req.headers.size() > kMaxHeaders) {
    res.set_header("Connection", "close");
    SendError(res, MakeError(431, "the request has " + std::to_string(req.headers.size()) + " header fields; at most " +
                                  std::to_string(kMaxHeaders) + " are read"));
    return true;
  }
  if (req.has_header("Content-Length")) {
    const std::string length = req.get_header_value("Content-Length");
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(length.c_str(), &end, 10);
    if (length.empty() || *end != '\0' || bytes / kDrainFactor > o.max_body_bytes) {
      res.set_header("Connection", "close");
      SendError(res, MakeError(413, "the request body is " + LogSafe(length) + " bytes; at most " +
                                    std::to_string(o.max_body_bytes) + " are read"));
      return true;
    }
  }
  const std::string host = req.get_header_value("Host");
  if (!HostAllowed(host, o.listen_host, o.allowed_hosts, o.machine_hostname)) {
    SendError(res, MakeError(403,
                         "requests for the host '" + LogSafe(host) + "' are refused (a page on another name could "
                         "reach this server through DNS rebinding); start the server with --allow-host NAME to allow one",
                         "invalid_request_error", "forbidden_host"));
    return true;
  }
  const std::string origin = req.get_header_value("Origin");
  const OriginVerdict verdict = CheckOrigin(origin, host, o.cors_origins);
  if (verdict == OriginVerdict::kRefused) {
    SendError(res, MakeError(403,
                         "requests from the web page at '" + LogSafe(origin) + "' are refused; start the server "
                         "with --cors-origin '" + LogSafe(origin) + "' (or a pattern such as 'http://localhost:*') "
                         "to allow it",
                         "invalid_request_error", "forbidden_origin"));
    return true;
  }
  if (verdict == OriginVerdict::kAllowed) {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (req.method == "OPTIONS") {
    // A preflight: only an allowed origin gets here with one (its own page needs none).
    if (verdict != OriginVerdict::kAllowed) {
      SendError(res, MakeError(403, "a preflight needs an Origin that --cors-origin allows"));
      return true;
    }
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers",
                   AllowedRequestHeaders(req.get_header_value("Access-Control-Request-Headers")));
    res.set_header("Access-Control-Max-Age", "600");
    return true;
  }
  // The API key: the health check and the page stay open (a browser loads the page, then asks for
  // the key when the API answers 401).
  const bool open = req.path == "/health" || (req.method == "GET" && FindWebAsset(req.path) != nullptr);
  if (!open && !Authorized(req, o.api_key)) {
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(res, MakeError(401, "invalid or missing API key (send the header 'Authorization: Bearer <key>')",
                         "invalid_request_error", "invalid_api_key"));
    return true;
  }
  return false;
}

}  // namespace gemlet::server

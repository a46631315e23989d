// What the server lets in before any route runs, as pure functions of the request's headers
// (tested without a socket): the Host a request was sent to (DNS rebinding), the Origin of a
// browser page (cross-site requests, the no-preflight text/plain POST included), and the label a
// path gets in /metrics (a fixed set, whatever paths are probed).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gemlet::server {

// Whether `address` (ServerOptions::host) reaches only this machine: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackAddress(std::string_view address);

// A Host header's name, lowercased, without its port or an IPv6 literal's brackets ("[::1]:8080"
// -> "::1"; "LocalHost.:80" -> "localhost").
std::string HostName(std::string_view host_header);

// Whether a request sent to `host_header` may be answered. A page on a rebound name sends that
// name, so names are checked, and IP literals pass (no name was resolved to reach them). Allowed:
// no header (HTTP/1.0 tools; browsers always send one), IP literals, localhost and *.localhost,
// this machine's hostname (and NAME.local), Docker's and Podman's names for the host
// (host.docker.internal, host.containers.internal), the listening address, and `allowed` patterns
// ('*' matches any run of characters; "*" alone allows every name).
bool HostAllowed(std::string_view host_header, std::string_view listen_host, const std::vector<std::string>& allowed,
                 std::string_view machine_hostname);

// Glob match, case-insensitive: '*' matches any run of characters, including none.
bool WildcardMatch(std::string_view pattern, std::string_view text);

// Whether a browser page at `origin` may call the API: its own page (the origin is this server as
// the request addressed it, "http://" + Host), or an origin matching one of `allowed`
// (--cors-origin patterns: "http://localhost:*", "chrome-extension://*", "*"). No Origin header is
// not a cross-site browser request and passes; "null" (sandboxed frames, file://) passes only
// when a pattern says "null" or "*".
enum class OriginVerdict { kNone, kSameOrigin, kAllowed, kRefused };
OriginVerdict CheckOrigin(std::string_view origin, std::string_view host_header, const std::vector<std::string>& allowed);

// Access-Control-Request-Headers echoed back for an allowed origin, when it is a plain list of
// header names (the official JS client sends its x-stainless-* headers); else the ones the API reads.
std::string AllowedRequestHeaders(std::string_view requested);

// Text safe for one log line: control bytes and backslashes escaped (a path may carry terminal
// escape sequences), at most `max_bytes` kept.
std::string LogSafe(std::string_view text, size_t max_bytes = 200);

}  // namespace gemlet::server

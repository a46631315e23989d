// Host, Origin and log-line checks for the server's pre-routing handler.
#include "server/http_guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace gemlet::server {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsIpLiteral(const std::string& name) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, name.c_str(), buffer) == 1 || inet_pton(AF_INET6, name.c_str(), buffer) == 1;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool IsHeaderNameChar(char c) {
  // RFC 9110's token characters.
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

bool IsLoopbackAddress(std::string_view address) {
  const std::string a = HostName(address);
  if (a == "localhost" || a == "::1") return true;
  unsigned char v4[4];
  return inet_pton(AF_INET, a.c_str(), v4) == 1 && v4[0] == 127;
}

std::string HostName(std::string_view host_header) {
  std::string_view h = host_header;
  while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    return Lower(h.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  // One colon: a port. More: an IPv6 literal written without brackets (not valid in Host, but a
  // listening address may be given so).
  if (std::count(h.begin(), h.end(), ':') == 1) h = h.substr(0, h.find(':'));
  std::string name = Lower(h);
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is localhost
  return name;
}

bool WildcardMatch(std::string_view pattern, std::string_view text) {
  // Greedy with backtracking to the last '*': linear for patterns with few stars.
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  const auto same = [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  };
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && same(pattern[p], text[t])) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool HostAllowed(std::string_view host_header, std::string_view listen_host, const std::vector<std::string>& allowed,
                 std::string_view machine_hostname) {
  if (host_header.empty()) return true;
  const std::string name = HostName(host_header);
  if (name.empty()) return false;
  if (IsIpLiteral(name)) return true;
  if (name == "localhost" || EndsWith(name, ".localhost")) return true;
  if (name == "host.docker.internal" || name == "host.containers.internal") return true;
  const std::string machine = Lower(machine_hostname);
  if (!machine.empty() && (name == machine || name == machine + ".local")) return true;
  if (name == HostName(listen_host)) return true;
  for (const std::string& pattern : allowed) {
    if (WildcardMatch(pattern, name)) return true;
  }
  return false;
}

OriginVerdict CheckOrigin(std::string_view origin, std::string_view host_header, const std::vector<std::string>& allowed) {
  if (origin.empty()) return OriginVerdict::kNone;
  if (!host_header.empty() && Lower(origin) == "http://" + Lower(host_header)) return OriginVerdict::kSameOrigin;
  for (const std::string& pattern : allowed) {
    if (origin == "null" ? (pattern == "null" || pattern == "*") : WildcardMatch(pattern, origin)) {
      return OriginVerdict::kAllowed;
    }
  }
  return OriginVerdict::kRefused;
}

std::string AllowedRequestHeaders(std::string_view requested) {
  constexpr std::string_view kDefault = "Authorization, Content-Type";
  if (requested.empty() || requested.size() > 2048) return std::string(kDefault);
  for (char c : requested) {
    if (!IsHeaderNameChar(c) && c != ',' && c != ' ') return std::string(kDefault);
  }
  return std::string(requested);
}

std::string LogSafe(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '\\') {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out.size() >= max_bytes && text.size() > max_bytes) out += "...";
  return out;
}

}  // namespace gemlet::server
